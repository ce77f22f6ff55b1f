"""What the default passage score costs: search latency of ``blend-not-or`` against ``max``.

On the corpora ``eval_<dataset>`` that ``bench/quality/quality.py`` keeps (database ``bench_quality`` of
the embedded server in /tmp/plbench, or of ``$PGLOGIC_BENCH_DSN``'s server; passages, HNSW
indexes), the first 120 derived queries of each real corpus (30 per template) with NOT, and the
first 120 disjunctions (neither a NOT nor an AND phrase), run through ``PgLogic.search`` (k = 100,
the term vectors cached) with each passage score, alternating which goes first, twice.
``blend-not-or`` reads each candidate document's own vector once, after the passages are
grouped: with a NOT to blend the positive texts (as ``blend-not``), in a disjunction to add a
tenth of it; plain conjunctions run the same statement as under ``max``, so they are not timed.
Writes ``bench/perf/results/passage_score_latency.{json,md}``.

    .venv/bin/python bench/perf/passage_score_latency.py        # ~6 minutes on 2 cores
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    SHARED_DATA,
    cpu_busy,
    machine_line,
    md_table,
    results_main,
    server_dsn,
)
from bench.lib.corpora import database
from pglogic import PgLogic
from pglogic.engine.conjunction import and_texts
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.query import Node, negated_only_terms

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "passage_score_latency"
DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")
SCORES = ("max", "blend-not-or")
QUERIES = 120
#: The queries timed: with a NOT, and disjunctions (neither a NOT nor an AND phrase).
KINDS = ("with NOT", "disjunction")


def _kind(tree: Node) -> str | None:
    if negated_only_terms(tree):
        return KINDS[0]
    return None if and_texts(tree) else KINDS[1]


def run() -> dict[str, Any]:
    """Median and p95 milliseconds per query and passage score, per corpus."""
    api = PgLogic(database(server_dsn(DEFAULT_HOME, None)))  # (or $PGLOGIC_BENCH_DSN's server)
    busy = cpu_busy()
    rows: dict[str, dict[str, Any]] = {}
    for name in DATASETS:
        derived = derive_queries(load_dataset(SHARED_DATA / name), per_template=30)
        corpus = f"eval_{name}"
        rows[name] = {}
        for kind in KINDS:
            queries = [q for q in derived.queries if _kind(q.tree) == kind][:QUERIES]
            for q in queries:  # the term vectors into the cache, the pages into memory
                for how in SCORES:
                    api.search(corpus, q.tree, k=100, passage_score=how)
            times: dict[str, list[float]] = {how: [] for how in SCORES}
            for rep in range(2):
                for q in queries:
                    for how in SCORES if rep == 0 else SCORES[::-1]:
                        t0 = time.perf_counter()
                        api.search(corpus, q.tree, k=100, passage_score=how)
                        times[how].append(1000 * (time.perf_counter() - t0))
            rows[name][kind] = {
                how: {"p50_ms": statistics.median(v), "p95_ms": statistics.quantiles(v, n=20)[18]}
                for how, v in times.items()
            } | {"queries": len(queries)}
            print(name, kind, rows[name][kind], flush=True)
    return {"machine_line": machine_line(), "cpu_busy_before": busy, "queries": QUERIES,
            "rows": rows}  # fmt: skip


HEADER = ["corpus", "queries", "n", "max p50", "blend-not-or p50", "Δ p50", "max p95",
          "blend-not-or p95"]  # fmt: skip


def markdown(data: dict[str, Any]) -> str:
    """The results file."""
    body = []
    for name, by_kind in data["rows"].items():
        for kind, r in by_kind.items():
            m, b = r["max"], r["blend-not-or"]
            body.append([name, kind, str(r["queries"]), f"{m['p50_ms']:.1f}",
                         f"{b['p50_ms']:.1f}", f"{b['p50_ms'] - m['p50_ms']:+.1f}",
                         f"{m['p95_ms']:.1f}", f"{b['p95_ms']:.1f}"])  # fmt: skip
    out = [
        "# What the default passage score costs (`bench/perf/passage_score_latency.py`)",
        "",
        f"- {data['machine_line']}; CPU busy before the run: {data['cpu_busy_before']:.0%}",
        f"- Up to {data['queries']} queries with NOT and as many disjunctions (neither a NOT nor "
        "an AND phrase) per corpus (derived, 30 per template), k = 100, `PgLogic.search` end "
        "to end with cached term vectors, each run twice per passage score, alternating the "
        "order; milliseconds.",
        "",
        md_table(HEADER, body),
        "",
    ]
    if data.get("conclusions"):
        out += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    return "\n".join(out)


if __name__ == "__main__":
    results_main(NAME, __doc__, run, markdown, results_dir=RESULTS_DIR)
