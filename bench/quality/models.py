"""Retrieval quality across embedding models: dense vs pglogic per local model and dataset.

    .venv/bin/python bench/quality/models.py                    # every local model, every dataset
    .venv/bin/python bench/quality/models.py --model minilm-int8 --only reuters21578
    .venv/bin/python bench/quality/models.py --render           # rewrite models.md from models.json

For each local model (``pglogic models list``: all-MiniLM-L6-v2, minilm-int8,
multilingual-e5-small, all-mpnet-base-v2) and each shared dataset, runs
:func:`pglogic.eval.evaluate.evaluate_dataset` (the code path of ``pglogic eval``) with dense
retrieval, the default engine, the engine with the dataset's own unsupervised calibration
(``pglogic calibrate --from-corpus``: no labels) and the baselines, and records nDCG@10 and
NegRecall@10 on queries with and without NOT. It also records each model's *score range*: the
cosine similarity of the queries' terms to every document (percentiles), i.e. where "unrelated"
sits for the model, which is what the fuzzy operators see without calibration.

Corpora ``eval_<dataset>[_<model>]`` are kept in database ``bench_quality``; a rerun embeds
nothing again (the first run of all-mpnet-base-v2 on Reuters took 65 min: ``load_and_calibrate_s``). Results: ``bench/quality/results/models.{json,md}`` (merged per model and dataset).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    SHARED_DATA,
    machine_line,
    md_table,
    server_dsn,
    write_results,
)
from bench.lib.corpora import database
from pglogic import PgLogic
from pglogic.embed.registry import MODELS, get_query_embedder
from pglogic.engine.operators import DEFAULT_FAMILY, resolve_family
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.eval.evaluate import (
    DENSE,
    HEADLINE,
    calibrate_dataset,
    corpus_name_for,
    evaluate_dataset,
    with_not,
    without_not,
)
from pglogic.eval.metrics import aggregate
from pglogic.query import terms
from pglogic.store.calibration_store import truth_spec
from pglogic.store.corpus import get_corpus

RESULTS_DIR = Path(__file__).resolve().parent / "results"

DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704", "limit_small")
SHORT = {"reuters21578": "Reuters", "stackexchange_cooking_robotics": "Stack Exchange",
         "arxiv_0704": "arXiv", "limit_small": "LIMIT-small"}  # fmt: skip
CALIBRATED = f"pglogic[{DEFAULT_FAMILY}|unsupervised]"
METHODS = (DENSE, HEADLINE, CALIBRATED)


def score_range(
    api: PgLogic, corpus_name: str, model: str, term_texts: list[str]
) -> dict[str, Any]:
    """Percentiles of cos(term, document) over every (term, document) pair, and of each term's
    best document: where unrelated pairs sit for this model."""
    with api.connect() as conn:
        corpus = get_corpus(conn, corpus_name)
        rows = conn.execute(
            sql.SQL("SELECT {c} FROM {t} WHERE {c} IS NOT NULL").format(
                c=sql.Identifier(corpus.column), t=corpus.table
            )
        ).fetchall()
    docs = np.stack([np.asarray(r[0].to_numpy(), dtype=np.float32) for r in rows])
    vecs = get_query_embedder(model).embed(term_texts)
    sims = vecs @ docs.T
    pct = np.percentile(sims, [5, 50, 95, 99]).round(3).tolist()
    best = sims.max(axis=1)
    return {
        "pairs": int(sims.size),
        "p5": pct[0],
        "p50": pct[1],
        "p95": pct[2],
        "p99": pct[3],
        "best_p50": round(float(np.median(best)), 3),
    }


def run_one(api: PgLogic, model: str, name: str) -> dict[str, Any]:
    ds = load_dataset(SHARED_DATA / name)
    derived = derive_queries(ds)
    corpus_name = corpus_name_for(ds, model)
    t0 = time.perf_counter()

    def ingest_progress(done: int, total: int) -> None:
        if done == total or done % 2000 < 64:
            print(f"  {model} {name}: embedded {done}/{total}", flush=True)

    fit = calibrate_dataset(api, ds, model=model, corpus_name=corpus_name, unsupervised=True,
                            on_ingest=ingest_progress)  # fmt: skip
    load_s = time.perf_counter() - t0
    result = evaluate_dataset(
        api, ds, model=model, corpus_name=corpus_name, derived=derived,
        families=[resolve_family(DEFAULT_FAMILY)], modes=(),
        calibrations={"unsupervised": truth_spec(fit)},
    )  # fmt: skip
    row: dict[str, Any] = {"model": model, "dataset": name, "queries": len(result.queries),
                           "load_and_calibrate_s": round(load_s, 1)}  # fmt: skip
    for label, qids in (("not", result.subset(with_not)), ("plain", result.subset(without_not))):
        row[f"{label}_queries"] = len(qids)
        for m in METHODS:
            agg = aggregate(result.per_query[m], qids)
            row.setdefault(label, {})[m] = {
                "ndcg@10": round(agg["ndcg@10"], 4),
                "negrecall@10": round(agg["negrecall@10"], 4),
            }
    sig = result.significance.get(HEADLINE, {})
    row["p_vs_dense"] = {k: v.p_value for k, v in sig.items()}
    row["calibration"] = {"tau": fit.tau, "lambda": fit.lam}
    texts = sorted({t for q in derived.queries for t in terms(q.tree)})
    row["score_range"] = score_range(api, corpus_name, model, texts)
    return row


def fmt(x: float | None) -> str:
    return "—" if x is None or x != x else f"{x:.3f}"


def measured_methods(rows: list[dict[str, Any]]) -> tuple[str, str, str]:
    """The (dense, headline, calibrated) method names of ``rows``: those of the family they were
    measured with (a committed JSON rendered again keeps its own, whatever today's default)."""
    names = list(rows[0]["not"]) if rows else []
    headline = next((m for m in names if m.startswith("pglogic[") and "|" not in m), HEADLINE)
    calibrated = next((m for m in names if m.endswith("|unsupervised]")), CALIBRATED)
    return DENSE, headline, calibrated


def markdown(rows: list[dict[str, Any]], machine: str) -> str:
    methods = measured_methods(rows)
    _, headline, calibrated = methods
    out = [
        "# Retrieval quality across embedding models (`bench/quality/models.py`)",
        "",
        f"Machine: {machine}. Label-derived queries of each dataset (`pglogic eval`'s), "
        f"top 100 per query; `{headline}` is the default engine (clamp truth map), "
        f"`calibrated` the same with the dataset's own unsupervised fit σ((s − τ)·λ) (no "
        "labels). NegRecall@10: lower is better.",
        "",
        "## Summary (the README's table)",
        "",
        "nDCG@10; median cos = where an unrelated (term, document) pair sits for the model.",
        "",
    ]
    out += md_table(
        ["model", "dataset", "NOT: dense / pglogic / calibrated",
         "no NOT: dense / pglogic / calibrated", "median cos"],
        [[r["model"], SHORT.get(r["dataset"], r["dataset"]),
          " / ".join(fmt(r["not"][m]["ndcg@10"]) for m in methods),
          " / ".join(fmt(r["plain"][m]["ndcg@10"]) for m in methods),
          f"{r['score_range']['p50']:.2f}"] for r in rows],
    ).splitlines()  # fmt: skip
    out += ["", "## nDCG@10, queries with NOT / without NOT", ""]
    body = []
    for r in rows:
        n, p = r["not"], r["plain"]
        body.append([
            r["model"], r["dataset"], f"{r['not_queries']} / {r['plain_queries']}",
            *(f"{fmt(n[m]['ndcg@10'])} / {fmt(p[m]['ndcg@10'])}" for m in methods),
            fmt(n[DENSE]["negrecall@10"]), fmt(n[headline]["negrecall@10"]),
            fmt(n[calibrated]["negrecall@10"]),
        ])  # fmt: skip
    out += md_table(
        ["model", "dataset", "queries NOT / no-NOT", "dense", "pglogic", "calibrated",
         "NegRecall dense", "NegRecall pglogic", "NegRecall calibrated"], body,
    ).splitlines()  # fmt: skip
    out += [
        "",
        "## Score ranges: cos(term, document) over every pair",
        "",
        "p50 is where an unrelated document sits for the model; `best p50` the median over terms "
        "of the term's best document. The clamp map sends cos ≤ 0 to 0 and cos 1 to 1, so a model "
        "whose unrelated pairs score 0.7 gives every document a high truth value for every "
        "term: NOT then penalises everything about equally. τ, λ: the unsupervised fit.",
        "",
    ]
    body = [
        [r["model"], r["dataset"], *(fmt(r["score_range"][k]) for k in
                                     ("p5", "p50", "p95", "p99", "best_p50")),
         fmt(r["calibration"]["tau"]), f"{r['calibration']['lambda']:.1f}"]
        for r in rows
    ]  # fmt: skip
    out += md_table(
        ["model", "dataset", "p5", "p50", "p95", "p99", "best p50", "τ", "λ"], body
    ).splitlines()
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("/tmp/plbench"))
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--model", action="append", help="model spec (repeatable; default: all)")
    ap.add_argument("--only", action="append", help="dataset name (repeatable)")
    ap.add_argument("--render", action="store_true", help="rewrite models.md from models.json")
    args = ap.parse_args()
    path = RESULTS_DIR / "models.json"
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    if args.render:
        if not path.exists():
            ap.error(f"--render: {path} does not exist; run the benchmark first")
        saved = json.loads(path.read_text())
        write_results(
            "models", saved, markdown(saved["rows"], saved["machine"]), results_dir=RESULTS_DIR
        )
        return
    api = PgLogic(database(server_dsn(args.home, args.dsn)))
    done = {(r["model"], r["dataset"]): r for r in old}
    for model in args.model or list(MODELS):
        for name in args.only or DATASETS:
            print(f"{model} on {name}", flush=True)
            done[(model, name)] = run_one(api, model, name)
            r = done[(model, name)]
            print(f"  NOT {json.dumps(r['not'])}\n  plain {json.dumps(r['plain'])}", flush=True)
            rows = [done[k] for k in sorted(done, key=lambda k: (list(MODELS).index(k[0])
                    if k[0] in MODELS else 99, k[1]))]  # fmt: skip
            write_results(
                "models",
                {"machine": machine_line(), "rows": rows},
                markdown(rows, machine_line()),
                results_dir=RESULTS_DIR,
            )


if __name__ == "__main__":
    main()
