"""How strongly should NOT push? Score-mapping variants for negated terms on the real datasets.

With all-MiniLM-L6-v2 a document that carries a label scores only about 0.3–0.6 against the
label's name, so ``1 − clamp(s)`` never gets near 0 and a strongly-matching trap document (one
that satisfies the positive part but carries the negated label) can still reach the top 10. This
benchmark scores the derived queries with NOT of ``pglogic eval`` exactly (every document, NumPy
reference of the operators, the default family product-max) under several maps applied to the
*negated* terms' similarities only, and reports nDCG@10 and NegRecall@10 next to dense retrieval:

* ``clamp`` — the engine today: t = clamp(s, 0, 1);
* ``×1.5`` / ``×2`` — t = clamp(λ·s): a fixed, model-specific stretch (what a calibration fits);
* ``max-norm`` — t = clamp(s) / max over the corpus (NSFL's S̃_B normalisation);
* ``min-max`` — t = (s − min) / (max − min) over the corpus.

It reads the corpora ``eval_<dataset>`` that ``bench/quality/quality.py`` loaded (database
``bench_quality``) and writes ``bench/studies/2026-11-22-not-strength/not_strength.{json,md}``.

    .venv/bin/python bench/studies/2026-11-22-not-strength/not_strength.py          # ~3 min after bench/quality/quality.py
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib.benchlib import SHARED_DATA, host, server_dsn
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.operators import evaluate_numpy
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.eval.evaluate import corpus_embeddings, with_not
from pglogic.eval.metrics import aggregate, evaluate_run
from pglogic.eval.report import clean_json, md_table
from pglogic.query import negated_only_terms, terms
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect

RESULTS_DIR = Path(__file__).resolve().parent  # a study keeps its results beside it

DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")
Map = Callable[[np.ndarray], np.ndarray]
MAPS: dict[str, Map] = {
    "clamp": lambda s: np.clip(s, 0, 1),
    "×1.5": lambda s: np.clip(1.5 * s, 0, 1),
    "×2": lambda s: np.clip(2 * s, 0, 1),
    "max-norm": lambda s: np.clip(s, 0, None) / (s.max() + 1e-9),
    "min-max": lambda s: (s - s.min()) / (s.max() - s.min() + 1e-9),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("/tmp/plbench"))
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()
    dsn = psycopg.conninfo.make_conninfo(server_dsn(args.home, args.dsn), dbname="bench_quality")
    emb = get_query_embedder("all-MiniLM-L6-v2")
    out: dict[str, dict[str, dict[str, float]]] = {}
    with connect(dsn) as conn:
        for name in DATASETS:
            ds = load_dataset(SHARED_DATA / name)
            queries = [q for q in derive_queries(ds).queries if with_not(q)]
            ids, matrix = corpus_embeddings(conn, get_corpus(conn, f"eval_{name}"))
            relevant = {q.id: q.relevant for q in queries}
            negatives = {q.id: q.negatives for q in queries}
            runs: dict[str, dict[str, list[str]]] = {m: {} for m in ["dense", *MAPS]}
            for q in queries:
                dense = matrix @ emb.embed([q.text])[0]
                runs["dense"][q.id] = [ids[i] for i in np.argsort(-dense, kind="stable")[:100]]
                ts = terms(q.tree)
                sims = dict(zip(ts, (matrix @ v for v in emb.embed(ts)), strict=True))
                neg = set(negated_only_terms(q.tree))
                for m, fn in MAPS.items():
                    # the truth map "clamp" is applied after: leaves values in [0, 1] as they are
                    mapped = {t: fn(s) if t in neg else s for t, s in sims.items()}
                    score = evaluate_numpy(q.tree, mapped)
                    runs[m][q.id] = [ids[i] for i in np.argsort(-score, kind="stable")[:100]]
            out[name] = {
                m: aggregate(evaluate_run(run, relevant, negatives)) | {"queries": len(queries)}
                for m, run in runs.items()
            }
            print(name, {m: round(v["ndcg@10"], 3) for m, v in out[name].items()}, flush=True)
    h = host()
    lines = [
        "# NOT strength: score maps for negated terms (exact scoring, product-max)",
        "",
        f"Machine: {h['cpu_model']}, {h['nproc']} cores. Queries with NOT derived by "
        "`pglogic eval` (seed 0), all-MiniLM-L6-v2; the map applies to negated terms only. "
        "nDCG@10 / NegRecall@10 (lower is better).",
        "",
    ]
    header = ["dataset", "queries", *(m for m in ["dense", *MAPS])]
    rows = [
        [
            name,
            str(int(res["dense"]["queries"])),
            *(f"{res[m]['ndcg@10']:.3f} / {res[m]['negrecall@10']:.3f}" for m in ["dense", *MAPS]),
        ]
        for name, res in out.items()
    ]
    lines += md_table(header, rows)
    (RESULTS_DIR / "not_strength.md").write_text("\n".join(lines))
    (RESULTS_DIR / "not_strength.json").write_text(
        json.dumps(clean_json({"host": h, "results": out}), indent=1) + "\n"
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
