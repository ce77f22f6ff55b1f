"""Searches while ``pglogic index`` rebuilds the HNSW index of a 100k-vector corpus.

    .venv/bin/python bench/perf/index_rebuild.py                  # ~6 min on 2 cores
    .venv/bin/python bench/perf/index_rebuild.py [--rows 100000] [--seconds 30] [--no-old]
    .venv/bin/python bench/perf/index_rebuild.py --rows 20000 --seconds 5 --no-old   # smoke run

A corpus of ``--rows`` synthetic clustered 384-d vectors (``synthetic.make_dataset``, metadata
``{"g": i % 100}``) is loaded through ``ingest_records`` and indexed (``build_index``, m=16,
ef_construction=128). Then ``--threads`` client threads (one connection each) search it without
pause (3-term AND / OR / NOT queries and a 2-term AND under the 1% filter ``g=0``, k=10, term
vectors given) through these phases:

1. ``before``: ``--seconds`` of searches alone;
2. ``pglogic index``: the real command (a subprocess) rebuilds the index: repair, concurrent
   build of ``<name>_new`` beside the old index, swap, concurrent drop of the old index;
3. ``between``: ``--seconds`` of searches alone;
4. ``old rebuild`` (unless ``--no-old``): what ``pglogic index`` did before: ``DROP INDEX`` and
   ``CREATE INDEX`` in one transaction (the statements of the old ``build_index``);
5. ``after``: ``--seconds`` of searches alone.

Per phase: searches, errors, searches that returned fewer than k rows, p50 / p99 / max latency,
and what a sampler saw every 20 ms in ``pg_stat_activity``: how often a search backend was
waiting on a lock (``wait_event_type = 'Lock'``). Searches compete with the build for the two
cores, so they are slower during a build; they must never wait for it. Writes
``bench/perf/results/index_rebuild.{json,md}``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    drop_database,
    fresh_database,
    machine,
    machine_md,
    md_table,
    percentile,
    server_dsn,
    wait_idle,
    write_results,
)
from bench.lib.harness import Vectors
from bench.lib.synthetic import DIM, make_dataset, make_queries
from pglogic.engine.compile import SearchOptions
from pglogic.engine.filters import parse_filter
from pglogic.store.corpus import build_index, corpus_info, create_corpus, get_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import search

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "index_rebuild"
DB_NAME = "bench_index_rebuild"
APP = "pglogic-bench-search"
K = 10
SHAPES = {
    "AND 3": ('"t1" AND "t2" AND "t3"', ()),
    "OR 3": ('"t1" OR "t2" OR "t3"', ()),
    "NOT 3": ('"t1" AND "t2" AND NOT "t3"', ()),
    "AND 2, g=0": ('"t1" AND "t2"', (parse_filter("g=0"),)),
}


class Load:
    """Client threads searching without pause; every search logged with its phase."""

    def __init__(self, dsn: str, queries: list[dict[str, np.ndarray]], threads: int) -> None:
        self.dsn = dsn
        self.queries = queries
        self.phase = "warm-up"
        self.log: list[tuple[str, float, float, int, str | None]] = []  # phase, t0, s, rows, err
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(threads)]

    def run(self, worker: int) -> None:
        vectors = Vectors()
        shapes = list(SHAPES.values())
        with connect(self.dsn) as conn:
            conn.execute("SELECT set_config('application_name', %s, false)", (APP,))
            conn.execute("SET lock_timeout = '10min'")  # a stalled search ends, reported
            conn.commit()
            corpus = get_corpus(conn, "bench")
            conn.commit()
            n = worker
            while not self.stop.is_set():
                text, filters = shapes[n % len(shapes)]
                vectors.current = self.queries[n % len(self.queries)]
                n += 1
                phase = self.phase
                t0 = time.perf_counter()
                rows, err = 0, None
                try:
                    res = search(
                        conn, corpus, text, embedder=vectors,
                        options=SearchOptions(k=K, filters=filters),
                    )  # fmt: skip
                    rows = len(res.hits)
                    conn.commit()  # never idle in a transaction: a concurrent build waits for it
                except Exception as exc:
                    err = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    conn.rollback()
                with self.lock:
                    self.log.append((phase, t0, time.perf_counter() - t0, rows, err))

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()


class LockSampler:
    """Every 20 ms: how many search backends wait on a lock, and the build's phase."""

    def __init__(self, dsn: str, load: Load) -> None:
        self.dsn = dsn
        self.load = load
        self.samples: list[tuple[str, int, int, str | None]] = []  # phase, searches, waiting
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def run(self) -> None:
        with connect(self.dsn, autocommit=True, vector=False) as conn:
            while not self.stop.wait(0.02):
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE state = 'active'),"
                    " count(*) FILTER (WHERE state = 'active' AND wait_event_type = 'Lock'),"
                    " (SELECT phase FROM pg_stat_progress_create_index"
                    "  WHERE datname = current_database() LIMIT 1)"
                    " FROM pg_stat_activity WHERE application_name = %s"
                    " AND datname = current_database()",
                    (APP,),
                ).fetchone()
                assert row is not None
                self.samples.append((self.load.phase, int(row[0]), int(row[1]), row[2]))

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()


def load_corpus(dsn: str, rows: int, seed: int) -> dict[str, Any]:
    data = make_dataset(rows, seed)
    with connect(dsn) as conn:
        corpus = create_corpus(conn, "bench", model="synthetic", dim=DIM)

        def records() -> Any:
            for i, (vec, label) in enumerate(zip(data.vectors, data.labels, strict=True)):
                meta = {"c": int(label), "g": i % 100}
                yield Record(f"doc{i}", f"document {i} of cluster {label}", None, meta, vec)

        t0 = time.perf_counter()
        ingest_records(conn, corpus, records(), embedder=None, batch_size=5000)
        load_s = time.perf_counter() - t0
        build_s = build_index(conn, "bench")
        conn.autocommit = True
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(corpus.table))
        info = corpus_info(conn, "bench")
    return {
        "rows": rows,
        "load_s": round(load_s, 1),
        "first_build_s": round(build_s, 1),
        "table_mib": round(info.table_bytes / 2**20, 1),
        "index_mib": round(info.index_bytes / 2**20, 1),
        "index_params": info.index_params,
    }


def pglogic_index(dsn: str) -> dict[str, Any]:
    """Run the real ``pglogic index`` command; return its exit code, output and duration."""
    exe = Path(sys.executable).with_name("pglogic")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(exe), "--dsn", dsn, "index", "bench"], capture_output=True, text=True, check=False
    )
    return {
        "command": "pglogic index bench",
        "exit_code": proc.returncode,
        "output": " ".join((proc.stdout + proc.stderr).split()),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def old_rebuild(dsn: str) -> dict[str, Any]:
    """The old ``build_index``: DROP INDEX and CREATE INDEX in one transaction."""
    t0 = time.perf_counter()
    with connect(dsn) as conn:
        c = get_corpus(conn, "bench")
        with conn.transaction():
            conn.execute("SELECT set_config('maintenance_work_mem', '1GB', true)")
            conn.execute(
                sql.SQL("DROP INDEX IF EXISTS {}").format(
                    sql.Identifier("pglogic", f"{c.table_name}_embedding_hnsw")
                )
            )
            conn.execute(
                sql.SQL(
                    "CREATE INDEX {} ON {} USING hnsw (embedding vector_cosine_ops)"
                    " WITH (m = 16, ef_construction = 128)"
                ).format(sql.Identifier(f"{c.table_name}_embedding_hnsw"), c.table)
            )
        conn.commit()
    return {
        "command": "DROP INDEX; CREATE INDEX (one transaction, the old build_index)",
        "exit_code": 0,
        "output": "",
        "seconds": round(time.perf_counter() - t0, 1),
    }


def phase_stats(load: Load, sampler: LockSampler, phase: str, seconds: float) -> dict[str, Any]:
    runs = [r for r in load.log if r[0] == phase]
    ok = [r[2] for r in runs if r[4] is None]
    samples = [s for s in sampler.samples if s[0] == phase]
    return {
        "phase": phase,
        "seconds": round(seconds, 1),
        "searches": len(runs),
        "errors": sum(1 for r in runs if r[4] is not None),
        "error_kinds": sorted({r[4] for r in runs if r[4] is not None}),
        "short": sum(1 for r in runs if r[4] is None and r[3] != K),
        "p50_ms": round(percentile(ok, 50) * 1000, 2),
        "p99_ms": round(percentile(ok, 99) * 1000, 2),
        "max_ms": round(max(ok) * 1000, 2) if ok else None,
        "per_s": round(len(runs) / seconds, 1) if seconds else None,
        "samples": len(samples),
        "samples_search_waiting_on_lock": sum(1 for s in samples if s[2] > 0),
        "build_phases": list(dict.fromkeys(s[3] for s in samples if s[3])),
    }


def markdown(results: dict[str, Any]) -> str:
    c = results["corpus"]
    rows = [
        [
            p["phase"],
            p["seconds"],
            p["searches"],
            p["errors"],
            p["short"],
            p["p50_ms"],
            p["p99_ms"],
            p["max_ms"],
            f"{p['samples_search_waiting_on_lock']} / {p['samples']}",
        ]
        for p in results["phases"]
    ]
    lines = [
        "# Searches during an index rebuild",
        "",
        "Written by `bench/perf/index_rebuild.py` "
        f"({results['threads']} client threads searching without pause, k = {K}; "
        "3-term AND / OR / NOT queries and a 2-term AND under a 1% filter, in turn).",
        "",
        f"Corpus: {c['rows']:,} synthetic 384-d vectors, table {c['table_mib']} MiB, HNSW index "
        f"{c['index_mib']} MiB ({c['index_params']}); first build {c['first_build_s']} s.",
        "",
        md_table(
            [
                "phase",
                "s",
                "searches",
                "errors",
                f"< {K} rows",
                "p50 ms",
                "p99 ms",
                "max ms",
                "samples with a search waiting on a lock",
            ],
            rows,
        ),
        "",
    ]
    for r in results["rebuilds"]:
        lines.append(f"- `{r['command']}`: {r['seconds']} s, exit {r['exit_code']}")
        if r["output"]:
            lines.append(f"  (output: {r['output']})")
    lines.append("")
    for p in results["phases"]:
        if p["build_phases"]:
            lines.append(f"- {p['phase']}: build phases seen: {', '.join(p['build_phases'])}")
    lines += [
        "",
        "The sampler reads `pg_stat_activity` every 20 ms; a sample counts when at least one "
        "search backend had `wait_event_type = 'Lock'`. Searches share the two cores with the "
        "build, so a build slows them; a search that waits for the build's locks shows up here "
        "and in the max.",
        "",
        "## Machine",
        "",
        machine_md(results["machine"]),
        f"- CPU busy before the run: {results['idle']['cpu_busy_before']:.0%} "
        f"(waited {results['idle']['waited_s']} s for an idle machine)",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=30, help="length of the search-only phases")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--no-old", action="store_true", help="skip the old (blocking) rebuild")
    ap.add_argument("--idle-wait", type=float, default=300, help="max seconds to wait for idle CPU")
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME, help="embedded server home")
    ap.add_argument("--dsn", default=None, help="an existing server instead of the embedded one")
    ap.add_argument("--keep", action="store_true", help=f"keep the database {DB_NAME}")
    ap.add_argument("--out", default=NAME, help="results file name under bench/results")
    args = ap.parse_args()

    base = server_dsn(args.home, args.dsn)
    dsn = fresh_database(base, DB_NAME)
    print(f"loading {args.rows:,} vectors and building the first index ...", flush=True)
    corpus = load_corpus(dsn, args.rows, args.seed)
    print(f"  {corpus}", flush=True)
    data = make_dataset(args.rows, args.seed)
    queries = make_queries(data, 200, 3, args.seed + 1)
    idle = wait_idle(args.idle_wait)

    load = Load(dsn, queries, args.threads)
    sampler = LockSampler(dsn, load)
    load.start()
    sampler.start()
    phases: list[dict[str, Any]] = []
    rebuilds: list[dict[str, Any]] = []

    def quiet(phase: str) -> None:
        load.phase = phase
        t0 = time.perf_counter()
        time.sleep(args.seconds)
        phases.append({"phase": phase, "seconds": time.perf_counter() - t0})

    def rebuild(phase: str, run: Any) -> None:
        load.phase = phase
        t0 = time.perf_counter()
        rebuilds.append(run(dsn))
        phases.append({"phase": phase, "seconds": time.perf_counter() - t0})

    try:
        time.sleep(3)  # warm-up: connections, plans, caches
        quiet("before")
        print("rebuilding with pglogic index ...", flush=True)
        rebuild("pglogic index", pglogic_index)
        quiet("between")
        if not args.no_old:
            print("rebuilding the old way (DROP + CREATE in one transaction) ...", flush=True)
            rebuild("old rebuild", old_rebuild)
            quiet("after")
    finally:
        load.phase = "done"
        sampler.finish()
        load.finish()
    results = {
        "corpus": corpus,
        "threads": args.threads,
        "k": K,
        "shapes": {k: v[0] + (" WHERE g=0" if v[1] else "") for k, v in SHAPES.items()},
        "phases": [phase_stats(load, sampler, p["phase"], p["seconds"]) for p in phases],
        "rebuilds": rebuilds,
        "idle": idle,
        "machine": machine(base),
    }
    _, mp = write_results(args.out, results, markdown(results), results_dir=RESULTS_DIR)
    print(mp.read_text())
    if not args.keep:
        drop_database(base, DB_NAME)


if __name__ == "__main__":
    main()
