"""Passages against one vector per document, on the shared labelled corpora (``pglogic eval``).

For each real corpus (Reuters-21578, Stack Exchange cooking+robotics, arXiv 0704) and each
document subset — ``long``: only the documents longer than all-MiniLM-L6-v2's window of 254
word pieces (``pglogic eval --long-only``: their labels alone make the queries and the ground
truth), and ``all``: every document — the evaluation harness (:func:`pglogic.eval.evaluate.
evaluate_dataset`, 30 derived queries per template, k = 100) runs on a corpus with passages
and compares, on the same queries and the same corpus:

* ``dense``               — the question as one vector against each document's own vector (the
  model's first window: what a single-vector corpus holds);
* ``dense@passages``      — the same vector against each document's best passage;
* ``pglogic@documents``   — the default engine over the documents' own vectors;
* ``pglogic[default]``    — the default engine over passages (each term's best passage; since
  the default passage score ``blend-not-or``, a positive text's blended with the document's own
  vector in a formula with a NOT or a disjunction; with ``not_context`` and ``not_mention``).

Reported per corpus, subset and passage layout: nDCG@10 over all queries, the queries with NOT
and those without, NegRecall@10 (the share of trap documents — they satisfy the positive part
but carry a negated label — in the top 10; lower is better) on the NOT queries, and paired
two-sided Wilcoxon tests of passages against documents (Holm-adjusted over the tests of each
corpus and subset). The passage layouts (``--configs``, tokens:overlap) are compared on the
``long`` subset, and one is chosen leaving one corpus out: for each corpus, the layout with the
best mean NOT nDCG@10 on the other two, then its result on the left-out one.

    .venv/bin/python bench/quality/passages_quality.py                        # all corpora, both subsets (~1 h, 2 busy cores)
    .venv/bin/python bench/quality/passages_quality.py --configs 254:32,128:16   # the layouts compared (the default)
    .venv/bin/python bench/quality/passages_quality.py --only arxiv_0704 --subsets long
    .venv/bin/python bench/quality/passages_quality.py --render [--conclusions FILE]   # Markdown from the JSON

Corpora ``eval_<dataset>[_long]`` (the default layout, as ``pglogic eval`` names them) and
``eval_<dataset>[_long]_p<tokens>o<overlap>`` live in database ``bench_passages`` on the embedded
server under ``--home`` (default ``/tmp/plbench``; kept between runs), or in the database of
``--dsn`` with ``--dsn-as-is``. Writes
``bench/quality/results/passages_quality.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import (
    SHARED_DATA,
    cpu_busy,
    machine,
    machine_line,
    md_table,
    server_dsn,
)
from pglogic import PgLogic
from pglogic.config import DEFAULT_MODEL
from pglogic.embed.passages import DEFAULT_OVERLAP, DEFAULT_TOKENS, tokenizer_of
from pglogic.embed.registry import get_embedder
from pglogic.engine.operators import DEFAULT_FAMILY, PRESETS
from pglogic.eval.compare import holm
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.eval.evaluate import (
    DENSE,
    DENSE_PASSAGES,
    HEADLINE,
    HEADLINE_DOCUMENTS,
    EvalResult,
    corpus_name_for,
    evaluate_dataset,
    with_not,
    without_not,
)
from pglogic.eval.long_docs import long_only
from pglogic.eval.metrics import paired_test
from pglogic.eval.report import clean_json
from pglogic.store import migrate

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "passages_quality"
DATABASE = "bench_passages"
DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")
METHODS = (DENSE, DENSE_PASSAGES, HEADLINE_DOCUMENTS, HEADLINE)
#: (passages against documents) pairs tested per subset of queries and metric.
PAIRS = ((HEADLINE_DOCUMENTS, HEADLINE), (DENSE, DENSE_PASSAGES), (DENSE, HEADLINE))


def database(dsn: str) -> str:
    """DSN of the (kept) database ``bench_passages``, created and migrated when missing."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
        if exists.fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    target = psycopg.conninfo.make_conninfo(dsn, dbname=DATABASE)
    migrate.upgrade(target)
    return target


def _mean(values: list[float]) -> float | None:
    vals = [v for v in values if v == v]  # NaN: the metric is undefined for the query
    return statistics.fmean(vals) if vals else None


def summarise(result: EvalResult) -> dict[str, Any]:
    """Means per method and query subset, and the Holm-adjusted paired tests."""
    subsets = {
        "all": [q.id for q in result.queries],
        "with NOT": result.subset(with_not),
        "without NOT": result.subset(without_not),
    }
    table: dict[str, dict[str, Any]] = {}
    for m in METHODS:
        pq = result.per_query[m]
        table[m] = {
            f"ndcg@10 {label}": _mean([pq[q]["ndcg@10"] for q in qids])
            for label, qids in subsets.items()
        }
        table[m]["negrecall@10 with NOT"] = _mean(
            [pq[q]["negrecall@10"] for q in subsets["with NOT"]]
        )
    tests: list[dict[str, Any]] = []
    for a, b in PAIRS:
        for label, qids in subsets.items():
            metrics = ["ndcg@10"] + (["negrecall@10"] if label == "with NOT" else [])
            for metric in metrics:
                pa, pb = result.per_query[a], result.per_query[b]
                r = paired_test({q: pa[q][metric] for q in qids}, {q: pb[q][metric] for q in qids})
                tests.append({
                    "a": a, "b": b, "subset": label, "metric": metric, "n": r.n,
                    "mean_a": r.mean_a, "mean_b": r.mean_b, "delta": r.delta, "p": r.p_value,
                })  # fmt: skip
    adjusted = holm({i: t["p"] for i, t in enumerate(tests)})
    for i, t in enumerate(tests):
        t["p_holm"] = adjusted[i]
    return {
        "queries": {k: len(v) for k, v in subsets.items()},
        "documents": len(result.dataset.doc_ids),
        "methods": table,
        "tests": tests,
        "latency_ms": {m: result.latency_ms.get(m) for m in METHODS},
    }


def run_one(
    api: PgLogic, name: str, subset: str, tokens: int, overlap: int, per_template: int
) -> dict[str, Any]:
    """Evaluate one corpus, subset and passage layout."""
    ds = load_dataset(SHARED_DATA / name)
    if subset == "long":
        ds = long_only(ds, tokenizer_of(get_embedder(DEFAULT_MODEL)))
    derived = derive_queries(ds, per_template=per_template)
    # the default layout gets the corpus name `pglogic eval` gives it (eval_<dataset>[_long])
    default = (tokens, overlap) == (DEFAULT_TOKENS, DEFAULT_OVERLAP)
    layout = (True, None, None) if default else (True, tokens, overlap)
    corpus = corpus_name_for(ds, DEFAULT_MODEL, layout)
    t0 = time.perf_counter()
    result = evaluate_dataset(
        api, ds, derived=derived, families=[PRESETS[DEFAULT_FAMILY]], modes=(),
        layout=layout, corpus_name=corpus,
    )  # fmt: skip
    info = api.corpus_info(corpus)
    out = summarise(result)
    stats = info.passages
    out.update(
        dataset=name, subset=subset, tokens=tokens, overlap=overlap, seconds=time.perf_counter() - t0,
        passages=None if stats is None else {
            "rows": stats.passages, "per_document": stats.per_document, "split": stats.split,
            "longest": stats.longest,
        },
    )  # fmt: skip
    print(f"{name} {subset} {tokens}:{overlap}: {json.dumps(out['methods'][HEADLINE])}", flush=True)
    return out


def loco(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Leave one corpus out: per corpus, the layout best on the other corpora's long documents
    (mean NOT nDCG@10 of the default engine over passages), and its result there."""
    long = [r for r in runs if r["subset"] == "long"]
    layouts = sorted({(r["tokens"], r["overlap"]) for r in long})
    corpora = sorted({r["dataset"] for r in long})
    score = {
        (r["dataset"], r["tokens"], r["overlap"]): r["methods"][HEADLINE]["ndcg@10 with NOT"]
        for r in long
    }
    out = []
    # the corpora measured with every layout (the others cannot take part)
    corpora = [c for c in corpora if all((c, *lay) in score for lay in layouts)]
    full = layouts
    for held in corpora:
        others = [c for c in corpora if c != held]
        if not others or len(full) < 2:
            continue
        pick = max(full, key=lambda lay: statistics.fmean(score[(c, *lay)] for c in others))
        best = max(full, key=lambda lay: score[(held, *lay)])
        out.append({
            "held_out": held, "pick": f"{pick[0]}:{pick[1]}", "pick_score": score[(held, *pick)],
            "best": f"{best[0]}:{best[1]}", "best_score": score[(held, *best)],
        })  # fmt: skip
    return out


def _f(v: Any) -> str:
    return "–" if v is None else f"{v:.3f}"


def to_markdown(data: dict[str, Any]) -> str:
    """The results file."""
    lines = [
        "# Passages against one vector per document (`bench/quality/passages_quality.py`)",
        "",
        f"- {data['machine_line']}; CPU busy at the start: {data['cpu_busy']:.0%}",
        f"- Model {DEFAULT_MODEL} (window 254 word pieces); default engine {HEADLINE}; "
        f"{data['per_template']} derived queries per template, k = 100",
        "- `long`: only the documents longer than the window (their labels make the queries); "
        "`all`: every document. Same corpus, same queries for the four methods.",
        "",
    ]
    if data.get("conclusions"):
        lines += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    lines += ["## Quality", ""]
    rows = []
    for r in data["runs"]:
        p = r.get("passages") or {}
        for m in METHODS:
            v = r["methods"][m]
            rows.append([
                r["dataset"], r["subset"], f"{r['tokens']}:{r['overlap']}",
                f"{r['documents']:,} / {p.get('per_document', '–')}", m,
                _f(v["ndcg@10 all"]), _f(v["ndcg@10 with NOT"]), _f(v["ndcg@10 without NOT"]),
                _f(v["negrecall@10 with NOT"]),
            ])  # fmt: skip
    lines.append(md_table(
        ["corpus", "docs", "layout", "documents / passages per doc", "method", "nDCG@10",
         "NOT nDCG@10", "no-NOT nDCG@10", "NOT NegRecall@10 ↓"], rows,
    ))  # fmt: skip
    lines += ["", "## Paired tests (two-sided Wilcoxon, Holm-adjusted per corpus and subset)", ""]
    rows = []
    for r in data["runs"]:
        for t in r["tests"]:
            rows.append([
                r["dataset"], r["subset"], f"{r['tokens']}:{r['overlap']}",
                f"{t['b']} vs {t['a']}", t["subset"], t["metric"], t["n"], _f(t["mean_a"]),
                _f(t["mean_b"]), f"{t['delta']:+.3f}", f"{t['p_holm']:.2g}",
            ])  # fmt: skip
    lines.append(md_table(
        ["corpus", "docs", "layout", "comparison", "queries", "metric", "n", "A", "B", "B − A",
         "p (Holm)"], rows,
    ))  # fmt: skip
    if data.get("loco"):
        lines += ["", "## Choosing the passage size, leaving one corpus out", ""]
        lines.append(md_table(
            ["held-out corpus", "picked on the others", "its NOT nDCG@10 there",
             "best there", "best's NOT nDCG@10"],
            [[x["held_out"], x["pick"], _f(x["pick_score"]), x["best"], _f(x["best_score"])]
             for x in data["loco"]],
        ))  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run (or ``--render``) the benchmark; write ``bench/quality/results/passages_quality.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("/tmp/plbench"))
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--dsn-as-is", action="store_true", help="use --dsn's own database")
    ap.add_argument("--only", action="append", help="dataset name (repeatable)")
    ap.add_argument("--subsets", default="long,all")
    ap.add_argument("--configs", default="254:32,128:16", help="tokens:overlap of the long runs")
    ap.add_argument("--all-config", default="254:32", help="tokens:overlap of the 'all' runs")
    ap.add_argument("--per-template", type=int, default=30)
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--conclusions", type=Path)
    args = ap.parse_args()
    jp, mp = RESULTS_DIR / f"{NAME}.json", RESULTS_DIR / f"{NAME}.md"
    old = json.loads(jp.read_text()) if jp.exists() else {}
    if args.render:
        data = old
    else:
        old = provenance.fresh(old)  # merged with this run: the file names it
        busy = cpu_busy()
        dsn = args.dsn if args.dsn and args.dsn_as_is else database(server_dsn(args.home, args.dsn))
        api = PgLogic(dsn)
        done = {(r["dataset"], r["subset"], r["tokens"], r["overlap"]): r
                for r in old.get("runs", [])}  # fmt: skip
        for name in args.only or DATASETS:
            for subset in args.subsets.split(","):
                configs = args.configs if subset == "long" else args.all_config
                for spec in configs.split(","):
                    tokens, overlap = (int(x) for x in spec.split(":"))
                    r = run_one(api, name, subset, tokens, overlap, args.per_template)
                    done[(name, subset, tokens, overlap)] = r
                    data = {**old, "runs": sorted(done.values(), key=_order)}
                    data.update(machine=machine(dsn), machine_line=machine_line(), cpu_busy=busy,
                                per_template=args.per_template)  # fmt: skip
                    jp.write_text(json.dumps(clean_json(data), indent=1) + "\n")
        data = json.loads(jp.read_text())
    data["loco"] = loco(data["runs"])
    if args.conclusions:
        data["conclusions"] = args.conclusions.read_text()
    prov = provenance.of(data)  # this run's, or (--render) the one the JSON holds
    jp.write_text(json.dumps(provenance.record(clean_json(data), prov), indent=1) + "\n")
    mp.write_text(provenance.stamp(to_markdown(data), prov))
    print(mp.read_text())


def _order(r: dict[str, Any]) -> tuple[int, str, int, int]:
    return (DATASETS.index(r["dataset"]), r["subset"], -r["tokens"], r["overlap"])


if __name__ == "__main__":
    main()
