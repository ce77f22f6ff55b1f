"""How realistic is the synthetic benchmark data? Compare it with real MiniLM embeddings.

    python bench/perf/realism.py [--docs 4000] [--cache /tmp/plbench-emb]

ANN recall depends on the geometry of the data, above all on its local intrinsic dimension
(LID): in a cluster spread isotropically over all 384 dimensions every point is almost equally
far from a query, and HNSW has to visit most of the cluster to find the true 10 nearest. Real
sentence embeddings live near low-dimensional manifolds. This script measures, at the same
number of vectors (the real corpora are small):

* LID: the maximum-likelihood estimate of Levina & Bickel (2004) from the 20 nearest
  neighbours, median over 1,000 sample points (each against all others);
* the cosine similarity of the 1st / 10th / 100th nearest neighbour and the median similarity
  to a random document ("contrast": how far the top 10 stand out from the crowd);

for the real corpora of ``../shared/data`` embedded with all-MiniLM-L6-v2 (the default model;
embeddings cached under ``--cache``), for ``synthetic.make_dataset`` (``isotropic``: the generator
of the first scale runs) and for ``synthetic.make_dataset(kind="manifold")`` (the default since).
Results: ``bench/perf/results/realism.{json,md}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import SHARED_DATA, md_table, write_results
from bench.lib.synthetic import make_dataset

RESULTS_DIR = Path(__file__).resolve().parent / "results"

CORPORA = {
    "reuters21578": "Reuters-21578 news",
    "stackexchange_cooking_robotics": "Stack Exchange cooking + robotics",
    "arxiv_0704": "arXiv abstracts",
}


def real_embeddings(name: str, limit: int, cache: Path) -> np.ndarray:
    """The first ``limit`` documents of a shared corpus embedded with all-MiniLM-L6-v2."""
    path = cache / f"{name}-{limit}.npy"
    if path.exists():
        return np.load(path)
    from pglogic.embed.registry import get_embedder

    src = SHARED_DATA / name / "corpus.jsonl.gz"
    texts = []
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                d = json.loads(line)
                texts.append(" ".join(x for x in (d.get("title"), d.get("text")) if x))
            if len(texts) >= limit:
                break
    vecs = get_embedder("all-MiniLM-L6-v2").embed(texts)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def geometry(x: np.ndarray, samples: int = 1000, k: int = 20, seed: int = 0) -> dict[str, Any]:
    """LID (MLE, k neighbours) and neighbour similarities of sample points against all others."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(x), size=min(samples, len(x)), replace=False)
    sims = x[idx] @ x.T
    sims[np.arange(len(idx)), idx] = -np.inf  # not its own neighbour
    top = -np.sort(-sims, axis=1)[:, :100]
    dist = np.sqrt(np.maximum(2 - 2 * top[:, :k], 1e-12))
    lid = -1.0 / np.mean(np.log(dist[:, :-1] / dist[:, -1:]), axis=1)
    finite = np.where(np.isfinite(sims), sims, np.nan)
    return {
        "vectors": len(x),
        "lid_median": round(float(np.median(lid)), 1),
        "sim_nn1": round(float(np.median(top[:, 0])), 3),
        "sim_nn10": round(float(np.median(top[:, 9])), 3),
        "sim_nn100": round(float(np.median(top[:, 99])), 3),
        "sim_random": round(float(np.nanmedian(finite)), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument("--cache", default="/tmp/plbench-emb")
    args = ap.parse_args()
    rows: dict[str, Any] = {}
    for name, label in CORPORA.items():
        vecs = real_embeddings(name, args.docs, Path(args.cache))
        rows[f"{label} (all-MiniLM-L6-v2)"] = geometry(vecs)
        print(label, rows[f"{label} (all-MiniLM-L6-v2)"], flush=True)
    for n in (100_000,):  # 100 points per cluster, as in the 100k scale run
        for kind in ("isotropic", "manifold"):
            data = make_dataset(n, 11, kind=kind)
            rows[f"synthetic {kind}, {n:,} vectors"] = geometry(data.vectors)
            print(kind, n, rows[f"synthetic {kind}, {n:,} vectors"], flush=True)
    table = md_table(
        ["data", "vectors", "LID (MLE, k=20)", "sim 1st NN", "sim 10th NN", "sim 100th NN",
         "median sim"],
        [[k, v["vectors"], v["lid_median"], v["sim_nn1"], v["sim_nn10"], v["sim_nn100"],
          v["sim_random"]] for k, v in rows.items()],
    )  # fmt: skip
    md = "\n".join(
        [
            "# Geometry of real embeddings vs the synthetic benchmark data (`bench/perf/realism.py`)",
            "",
            "Medians over 1,000 sample points, each against all other vectors of its set. The"
            " real corpora are small (4,000 documents each); the synthetic sets have 1,000"
            " clusters, so they are compared at 100,000 vectors (100 per cluster). Real"
            " embeddings are anisotropic (a random pair scores 0.05-0.2, the synthetic ~0):"
            " that shifts every similarity but not the neighbourhood structure HNSW depends on.",
            "",
            table,
        ]
    )
    write_results("realism", {"rows": rows, "args": vars(args)}, md, results_dir=RESULTS_DIR)
    print(md)


if __name__ == "__main__":
    main()
