"""Does a calibrated truth map help when applied to negated terms only?

Exact scoring (NumPy over every document's own vector in the ``bench/quality/quality.py``
corpora) of each dataset's label-derived queries with NOT, the engine's default family
(``product-max-strong``) and AND texts (no passages, ``not_context`` or ``not_mention``), three
ways: clamp on every term (the default), the sigmoid fit on every term, the sigmoid fit on
negated terms only (clamp on the others). The fit comes from another dataset, as in
``bench/quality/quality.py`` (``FIT_FROM``). Writes ``bench/quality/results/calibration_polarity.{json,md}``.

    .venv/bin/python bench/quality/calibration_polarity.py      # ~3 min; needs bench/quality/quality.py's corpora
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import SHARED_DATA, machine_line, server_dsn
from bench.lib.corpora import DATABASE, FIT_FROM
from pglogic import PgLogic
from pglogic.embed.registry import get_query_embedder
from pglogic.engine import defaults
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, scored_terms, with_and_texts
from pglogic.engine.operators import PRESETS, TRUTH_MAPS, NumpyAlgebra, TruthMap, resolve_truth
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.eval.evaluate import calibrate_dataset, corpus_embeddings, corpus_name_for
from pglogic.eval.metrics import aggregate, evaluate_run
from pglogic.query import And, Node, Not, Term
from pglogic.store.calibration_store import truth_spec

RESULTS_DIR = Path(__file__).resolve().parent / "results"

DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")
ALG = NumpyAlgebra()
FAMILY = PRESETS[defaults.OPERATORS]


def score(tree: Node, sims: dict[str, Any], positive: TruthMap, negated: TruthMap) -> Any:
    """The default family's score with one truth map for terms under NOT, one for the others."""

    def walk(node: Node, neg: bool) -> Any:
        if isinstance(node, Term):
            return (negated if neg else positive).definition(ALG, sims[node.text])
        if isinstance(node, Not):
            return FAMILY.not_.definition(ALG, walk(node.child, not neg))
        children = [walk(c, neg) for c in node.children]
        if isinstance(node, And):
            return FAMILY.and_.definition(ALG, children)
        return FAMILY.or_.definition(ALG, children)

    return walk(tree, False)


def main() -> None:
    dsn = server_dsn(Path("/tmp/plbench"), None).replace("/postgres?", f"/{DATABASE}?")
    api = PgLogic(dsn)
    rows = []
    for name in DATASETS:
        ds = load_dataset(SHARED_DATA / name)
        fit = truth_spec(calibrate_dataset(api, load_dataset(SHARED_DATA / FIT_FROM[name])))
        corpus = api.corpus(corpus_name_for(ds, "all-MiniLM-L6-v2"))
        with api.connect() as conn:
            ids, matrix = corpus_embeddings(conn, corpus)
        queries = [q for q in derive_queries(ds).queries if q.n_negations > 0]
        emb = get_query_embedder(corpus.model)
        clamp, sig = TRUTH_MAPS["clamp"], resolve_truth(fit)
        variants = {"clamp": (clamp, clamp), "every term": (sig, sig), "negated only": (clamp, sig)}
        runs: dict[str, dict[str, list[str]]] = {v: {} for v in variants}
        for q in queries:
            names = scored_terms(q.tree, DEFAULT_AND_TEXT)
            sims = {t: matrix @ v for t, v in zip(names, emb.embed(names), strict=True)}
            tree = with_and_texts(q.tree, DEFAULT_AND_TEXT)
            for v, (pos, neg) in variants.items():
                top = np.argsort(-score(tree, sims, pos, neg), kind="stable")[:100]
                runs[v][q.id] = [ids[i] for i in top]
        rel = {q.id: q.relevant for q in queries}
        negs = {q.id: q.negatives for q in queries}
        for v in variants:
            agg = aggregate(evaluate_run(runs[v], rel, negs))
            rows.append({"dataset": name, "fit": fit, "queries": len(queries), "variant": v,
                         "ndcg@10": agg["ndcg@10"], "negrecall@10": agg["negrecall@10"]})  # fmt: skip
            print(rows[-1], flush=True)
    machine = machine_line()
    (RESULTS_DIR / "calibration_polarity.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "# A calibrated truth map on every term vs on negated terms only (NOT queries)",
        "",
        f"Machine: {machine}. Exact scoring over the documents' own vectors, "
        f"`{defaults.OPERATORS}` with the AND texts at {DEFAULT_AND_TEXT}, all-MiniLM-L6-v2; "
        "the sigmoid fit "
        "comes from another dataset (`bench/quality/quality.py` FIT_FROM). `bench/quality/calibration_polarity.py`.",
        "",
        "| dataset | queries | fit | truth map | nDCG@10 | NegRecall@10 |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['dataset']} | {r['queries']} | `{r['fit']}` | {r['variant']} | "
        f"{r['ndcg@10']:.3f} | {r['negrecall@10']:.3f} |"
        for r in rows
    ]
    md = provenance.stamp("\n".join(lines) + "\n", provenance.current())  # the JSON is a list
    (RESULTS_DIR / "calibration_polarity.md").write_text(md)


if __name__ == "__main__":
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    main()
