"""What NOT against its context costs: latency with ``not_context`` 0.5 (the default) and 0.

The projection (:mod:`pglogic.engine.negation`) changes a negated term's vector, not the
statement: the same scans over the same indexes. What it adds is the projection itself, in
NumPy before the statement (the Python search) or in plpgsql inside ``pglogic._plan`` (the SQL
function, migration 0014). On the corpora ``eval_<dataset>`` that ``bench/quality/quality.py`` keeps
(database ``bench_quality`` of the embedded server in /tmp/plbench, or of
``$PGLOGIC_BENCH_DSN``'s server), the first 120 derived queries with a NOT inside an AND of
each real corpus (30 per template), k = 100, each timed twice per setting, alternating which
goes first:

* ``PgLogic.search`` end to end with cached term vectors;
* ``pglogic.search(corpus, query)`` with the JSON ``render.search_json`` writes (term vectors
  and the guide given; the function projects the negated terms itself);
* ``pglogic._plan`` alone: the planning step that holds the projection.

Writes ``bench/perf/results/not_context_latency.{json,md}``.

    .venv/bin/python bench/perf/not_context_latency.py        # ~10 minutes on 2 cores
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    SHARED_DATA,
    cpu_busy,
    machine_line,
    md_table,
    results_main,
    server_dsn,
    stats_ms,
)
from bench.lib.corpora import database
from pglogic import PgLogic
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.compile import SearchOptions
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, scored_terms
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, contexts
from pglogic.engine.render import search_json
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.store.db import connect
from pglogic.store.term_cache import cached_term_vectors

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "not_context_latency"
DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")
SETTINGS = (0.0, DEFAULT_NOT_CONTEXT)
QUERIES = 120
PATHS = ("PgLogic.search", "pglogic.search (SQL)", "pglogic._plan (SQL)")


def run() -> dict[str, Any]:
    """Median and p95 milliseconds per path and setting, per corpus."""
    dsn = database(server_dsn(DEFAULT_HOME, None))  # (or $PGLOGIC_BENCH_DSN's server)
    api = PgLogic(dsn)
    busy = cpu_busy()
    rows: dict[str, dict[str, Any]] = {}
    for name in DATASETS:
        derived = derive_queries(load_dataset(SHARED_DATA / name), per_template=30)
        corpus = f"eval_{name}"
        queries = [q for q in derived.queries if contexts(q.tree)][:QUERIES]
        info = api.corpus(corpus)
        with connect(dsn) as conn:
            for q in queries:  # the term vectors into the cache, the pages into memory
                for lam in SETTINGS:
                    api.search(corpus, q.tree, k=100, not_context=lam)
            texts = sorted({t for q in queries for t in scored_terms(q.tree, DEFAULT_AND_TEXT)})
            vectors: dict[str, Any] = dict(cached_term_vectors(conn, info, texts))
            missing = [t for t in texts if t not in vectors]  # (AND texts are not cached)
            if missing:
                embedded = get_query_embedder(info.model).embed(missing)
                vectors.update(zip(missing, embedded, strict=True))
            bodies = {}
            for q in queries:
                for lam in SETTINGS:
                    opts = SearchOptions(k=100, not_context=lam)
                    bodies[(q.id, lam)] = Jsonb(search_json(q.tree, opts, vectors))
            conn.commit()
            times: dict[tuple[str, float], list[float]] = {
                (p, lam): [] for p in PATHS for lam in SETTINGS
            }
            for rep in range(2):
                for q in queries:
                    for lam in SETTINGS if rep == 0 else SETTINGS[::-1]:
                        t0 = time.perf_counter()
                        api.search(corpus, q.tree, k=100, not_context=lam)
                        times[(PATHS[0], lam)].append(1000 * (time.perf_counter() - t0))
                        for path, stmt in ((PATHS[1], "SELECT * FROM pglogic.search(%s, %s)"),
                                           (PATHS[2], "SELECT * FROM pglogic._plan(%s, %s)")):  # fmt: skip
                            t0 = time.perf_counter()
                            conn.execute(stmt, (corpus, bodies[(q.id, lam)])).fetchall()
                            conn.commit()
                            times[(path, lam)].append(1000 * (time.perf_counter() - t0))
        rows[name] = {
            path: {f"{lam:g}": stats_ms(times[(path, lam)]) for lam in SETTINGS} for path in PATHS
        } | {"queries": len(queries)}
        print(name, rows[name], flush=True)
    return {"machine_line": machine_line(), "cpu_busy_before": busy, "queries": QUERIES,
            "rows": rows}  # fmt: skip


HEADER = ["corpus", "path", "n", "not_context 0 p50", "0.5 p50", "Δ p50", "0 p95", "0.5 p95"]


def markdown(data: dict[str, Any]) -> str:
    """The results file."""
    body = []
    on = f"{DEFAULT_NOT_CONTEXT:g}"
    for name, r in data["rows"].items():
        for path in PATHS:
            a, b = r[path]["0"], r[path][on]
            body.append([name, path, str(r["queries"]), f"{a['p50_ms']:.2f}",
                         f"{b['p50_ms']:.2f}", f"{b['p50_ms'] - a['p50_ms']:+.2f}",
                         f"{a['p95_ms']:.2f}", f"{b['p95_ms']:.2f}"])  # fmt: skip
    out = [
        "# What NOT against its context costs (`bench/perf/not_context_latency.py`)",
        "",
        f"- {data['machine_line']}; CPU busy before the run: {data['cpu_busy_before']:.0%}",
        f"- Up to {data['queries']} derived queries with a NOT inside an AND per corpus (30 per "
        "template), k = 100, each run twice per setting, alternating the order; milliseconds. "
        "`PgLogic.search`: end to end with cached term vectors; `pglogic.search (SQL)`: the SQL "
        "function with the vectors and the guide given; `pglogic._plan (SQL)`: its planning "
        "step alone, which holds the projection.",
        "",
        md_table(HEADER, body),
        "",
    ]
    if data.get("conclusions"):
        out += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    return "\n".join(out)


if __name__ == "__main__":
    results_main(NAME, __doc__, run, markdown, results_dir=RESULTS_DIR)
