"""Read replicas: search throughput of one server vs a primary and a streaming replica.

    python bench/perf/replicas.py [--rows 100000] [--clients 1,2,4,8] [--seconds 15] [--rounds 2]
                                  [--quick]       # ~25 min on a busy 2-core machine

Its own embedded servers, under ``--home`` (default ``/tmp/plbench-replicas``).

An embedded primary under ``--home``/primary gets a database ``bench_replicas`` with the scale
benchmark's corpus (``harness.load``: ``synthetic.make_dataset`` manifold clusters, 384-d unit vectors,
HNSW m = 16, ef_construction = 128); ``pglogic.store.replica.start_replica`` then makes a
streaming replica of it under ``--home``/replica (pg_basebackup -R -X stream, timed).

Throughput: N client processes (one connection each) run the scale benchmark's mix of 3-term
AND / OR / NOT queries (``pglogic.store.search.search``, vectors given, no model) for
``--seconds`` each:

* ``1 server``: every client on the primary;
* ``primary + replica``: clients split between them (client i on the replica when i is odd).

Both setups run ``--rounds`` times per client count in alternating order (the machine may be
shared: its load drifts). Per run: queries/s, p50 / p99 latency, the CPU seconds per query spent
by each server's processes and by the clients (psutil), and the share of the machine's CPU they
used together (the rest went to other processes), so the cost model of docs/scaling.md section 4
(X_1 = c / C_q per server, X ≈ R·X_1 for R servers) can be applied to machines where each
server has its own cores. Both servers share this machine's cores, so here the second server
adds no CPU: the gain is bounded, and the results say so.

Replication lag: ``--lag-rows`` more rows are ingested on the primary (batches of 5,000, one
transaction each, HNSW index maintained) while the replica's replay position is sampled every
20 ms: bytes behind and replay lag at their worst, and how long after the last commit the
replica had replayed everything.

Writes ``bench/perf/results/replicas.{json,md}``.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from psycopg import sql
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import machine, machine_md, md_table, percentile, wait_idle, write_results
from bench.lib.harness import MemorySampler, Vectors, load
from bench.lib.synthetic import make_dataset, make_queries
from pglogic.engine.source import Corpus
from pglogic.query import parse
from pglogic.store import migrate, replica, server
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record

RESULTS_DIR = Path(__file__).resolve().parent / "results"

DB_NAME = "bench_replicas"
MIX = ['"t1" AND "t2" AND "t3"', '"t1" OR "t2" OR "t3"', '"t1" AND "t2" AND NOT "t3"']


def postmaster(dsn: str) -> psutil.Process:
    with connect(dsn, autocommit=True, vector=False) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return psutil.Process(psutil.Process(int(row[0])).ppid())


def cpu_seconds(proc: psutil.Process) -> float:
    """CPU time (user + system) of a postmaster and all its children now (exited backends are
    counted by the postmaster's children_* times)."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
        if p.pid == proc.pid:
            total += t.children_user + t.children_system
    return total


def _worker(
    dsn: str, corpus: Corpus, queries: list[dict[str, np.ndarray]], first: int, step: int,
    start: float, stop: float, out: Any,
) -> None:  # fmt: skip
    from pglogic.store.search import search

    trees = [parse(q) for q in MIX]
    emb = Vectors()
    lats: list[float] = []
    errors = 0
    with connect(dsn) as conn:
        conn.autocommit = True
        for i in range(first, first + 30 * step, step):  # warm this connection's plans
            emb.current = queries[i % len(queries)]
            search(conn, corpus, trees[i % 3], embedder=emb)
        while time.time() < start:
            time.sleep(0.001)
        t = psutil.Process().cpu_times()
        cpu0 = t.user + t.system
        i = first
        while time.time() < stop:
            emb.current = queries[i % len(queries)]
            t0 = time.perf_counter()
            try:
                search(conn, corpus, trees[i % 3], embedder=emb)
                lats.append(time.perf_counter() - t0)
            except Exception:
                errors += 1
            i += step
    t = psutil.Process().cpu_times()
    out.put((lats, errors, t.user + t.system - cpu0))


def run(
    targets: list[str], corpus: Corpus, queries: list[dict[str, np.ndarray]], seconds: float,
    servers: dict[str, psutil.Process],
) -> dict[str, Any]:  # fmt: skip
    """``len(targets)`` client processes, client i on ``targets[i]``, for ``seconds``."""
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    n = len(targets)
    start = time.time() + 2.0 + 0.3 * n  # every client connected and warm before the clock
    stop = start + seconds
    procs = [
        ctx.Process(target=_worker, args=(dsn, corpus, queries, i, n, start, stop, out))
        for i, dsn in enumerate(targets)
    ]
    for p in procs:
        p.start()
    while time.time() < start:
        time.sleep(0.005)
    cpu0 = {name: cpu_seconds(proc) for name, proc in servers.items()}
    stat0 = _proc_stat()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    cpu1 = {name: cpu_seconds(proc) for name, proc in servers.items()}
    stat1 = _proc_stat()
    lats = [x for r in results for x in r[0]]
    done = len(lats)
    busy = 1 - (stat1[0] - stat0[0]) / max(1, stat1[1] - stat0[1])
    ours = sum(cpu1[k] - cpu0[k] for k in servers) + sum(r[2] for r in results)
    return {
        "clients": n,
        "queries": done,
        "qps": round(done / seconds, 1),
        "p50_ms": round(percentile(lats, 50) * 1000, 2),
        "p99_ms": round(percentile(lats, 99) * 1000, 2),
        "errors": sum(r[1] for r in results),
        "server_cpu_ms_per_query": {
            name: round(1000 * (cpu1[name] - cpu0[name]) / max(1, done), 3) for name in servers
        },
        "client_cpu_ms_per_query": round(1000 * sum(r[2] for r in results) / max(1, done), 3),
        "machine_busy": round(busy, 3),
        # the share of the machine's CPU time that both servers and the clients used: the rest
        # went to other processes (the machine is shared)
        "bench_cpu_share": round(ours / (seconds * (psutil.cpu_count() or 1)), 3),
    }


def _proc_stat() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)


def lag_during_ingest(
    primary: str, replica_dsn: str, corpus: Corpus, rows: int, seed: int
) -> dict[str, Any]:
    """Ingest ``rows`` more rows on the primary while sampling the replica's lag."""
    data = make_dataset(rows, seed + 1, kind="manifold")
    samples: list[tuple[float, int, float | None]] = []
    done = threading.Event()

    def sample() -> None:
        with connect(primary, autocommit=True, vector=False) as conn:
            while not done.is_set():
                row = conn.execute(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint, "
                    "extract(epoch FROM replay_lag)::float8 FROM pg_stat_replication"
                ).fetchone()
                if row is not None:
                    samples.append((time.perf_counter(), int(row[0] or 0), row[1]))
                time.sleep(0.02)

    def records() -> Any:
        for i, vec in enumerate(data.vectors):
            yield Record(f"late{i}", f"late document {i}", None, {"g": i % 100}, vec)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    with connect(primary) as conn:
        ingest_records(conn, corpus, records(), embedder=None, batch_size=5000)
    t1 = time.perf_counter()
    caught = replica.wait_for_replay(primary, replica_dsn, timeout=600)
    done.set()
    thread.join()
    behind = [s[1] for s in samples]
    lag = [s[2] for s in samples if s[2] is not None]
    return {
        "rows": rows,
        "batch_size": 5000,
        "ingest_s": round(t1 - t0, 2),
        "rows_per_s": round(rows / (t1 - t0)),
        "max_bytes_behind": max(behind, default=0),
        "p50_bytes_behind": int(percentile(behind, 50)) if behind else 0,
        "max_replay_lag_s": round(max(lag), 3) if lag else None,
        "caught_up_s_after_last_commit": round(caught, 3),
        "samples": len(samples),
    }


def markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    setup = res["setup"]
    lines = [
        "# Read replicas (`bench/perf/replicas.py`)",
        "",
        machine_md(m),
        f"- Run: {res['args']['rows']:,} vectors (384-d, manifold clusters), "
        f"{res['args']['seconds']:g} s per run, clients are processes (one connection each) "
        "on the same machine as both servers; CPU busy before the run: "
        f"{res['idle']['cpu_busy_before']:.0%}",
        "",
        f"Corpus load {setup['load']['load_s']} s, HNSW build {setup['load']['hnsw_build_s']} s "
        f"(table {setup['load']['table_mib']} MiB, index {setup['load']['index_mib']} MiB). "
        f"Replica made with pg_basebackup -R -X stream in {setup['replica_start_s']} s "
        f"(database size {setup['database_mib']} MiB), caught up "
        f"{setup['first_catch_up_s']} s later.",
        "",
        "## Throughput (3-term AND / OR / NOT mix)",
        "",
    ]
    rows = []
    for r in res["runs"]:
        cpu = r["server_cpu_ms_per_query"]
        rows.append([
            r["setup"], r["clients"], r["queries"], r["qps"], r["p50_ms"], r["p99_ms"],
            r["errors"], " / ".join(f"{cpu[k]:.2f}" for k in cpu), r["client_cpu_ms_per_query"],
            f"{100 * r['machine_busy']:.0f}%", f"{100 * r['bench_cpu_share']:.0f}%",
        ])  # fmt: skip
    lines.append(
        md_table(
            [
                "setup",
                "clients",
                "queries",
                "q/s",
                "p50 ms",
                "p99 ms",
                "errors",
                "server CPU ms/query (primary / replica)",
                "client CPU ms/query",
                "machine busy",
                "of it this benchmark",
            ],
            rows,
        )
    )
    g = res["gain"]
    lines += [
        "",
        f"Runs in alternating order, {res['args']['rounds']} rounds per client count "
        "(1 server first in odd rounds, primary + replica first in even ones). Median q/s per "
        "client count:",
        "",
        md_table(
            ["clients", "1 server q/s", "primary + replica q/s", "ratio"],
            [[m["clients"], m["qps_1"], m["qps_2"], f"{m['ratio']:.2f}"] for m in g["medians"]],
        ),
        "",
        "Best of each setup: 1 server "
        f"{g['best_1']['qps']} q/s ({g['best_1']['clients']} clients), primary + replica "
        f"{g['best_2']['qps']} q/s ({g['best_2']['clients']} clients): × {g['ratio']:.2f}.",
        "",
        _noise(res["runs"]),
        "",
        "## Projection (docs/scaling.md section 4)",
        "",
        res["projection"]["text"],
        "",
        md_table(
            ["servers R (each with c cores)", "X ≈ R·c / C_q, q/s"],
            [[p["R"], p["qps"]] for p in res["projection"]["rows"]],
        ),
        "",
        "## Replication lag while ingesting",
        "",
    ]
    lag = res.get("lag")
    if lag:
        lines.append(
            f"{lag['rows']:,} more rows ingested on the primary (batches of {lag['batch_size']:,},"
            f" HNSW index maintained) in {lag['ingest_s']} s ({lag['rows_per_s']:,} rows/s): the "
            f"replica was at most {lag['max_bytes_behind'] / 2**20:.1f} MiB of WAL behind "
            f"(median {lag['p50_bytes_behind'] / 2**20:.1f} MiB), replay lag at most "
            f"{lag['max_replay_lag_s']} s, and had replayed everything "
            f"{lag['caught_up_s_after_last_commit']} s after the last commit "
            f"({lag['samples']} samples, every 20 ms)."
        )
    return "\n".join(lines) + "\n"


def _noise(runs: list[dict[str, Any]]) -> str:
    """How much of the machine the benchmark had, and how far the same run varied."""
    shares = [r["bench_cpu_share"] for r in runs]
    spread = []
    for n in sorted({r["clients"] for r in runs}):
        for setup in ("1 server", "primary + replica"):
            qps = [r["qps"] for r in runs if r["clients"] == n and r["setup"] == setup]
            if len(qps) > 1:
                spread.append(max(qps) / min(qps) - 1)
    return (
        f"Both servers and all clients together used {100 * min(shares):.0f}–"
        f"{100 * max(shares):.0f}% of the machine's CPU during the runs; other processes of "
        "the shared machine took the rest. The same setup at the same client count varied by up "
        f"to {100 * max(spread, default=0):.0f}% between rounds: differences between the two "
        "setups smaller than that are noise."
    )


def rewrite_markdown() -> None:
    """Rewrite ``bench/perf/results/replicas.md`` from the committed JSON (no run)."""
    import json

    res = json.loads((RESULTS_DIR / "replicas.json").read_text())
    (RESULTS_DIR / "replicas.md").write_text(provenance.stamp(markdown(res), provenance.of(res)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--rounds", type=int, default=2, help="runs of each setup per client count")
    ap.add_argument("--lag-rows", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--home", default="/tmp/plbench-replicas")
    ap.add_argument("--idle-wait", type=float, default=120.0)
    ap.add_argument("--keep", action="store_true", help="leave both servers and their data")
    ap.add_argument("--quick", action="store_true", help="10k vectors, 1,2 clients, 3 s")
    ap.add_argument(
        "--markdown-only", action="store_true", help="rewrite the .md from the .json, no run"
    )
    args = ap.parse_args()
    if args.markdown_only:
        rewrite_markdown()
        return
    if args.quick:
        args.rows, args.clients, args.seconds, args.lag_rows = 10_000, "1,2", 3.0, 2_000
    home = Path(args.home)
    p_home, r_home = home / "primary", home / "replica"
    for h in (r_home, p_home):  # a fresh pair every run
        server.stop(h)
        shutil.rmtree(h, ignore_errors=True)
    base = server.ensure_running(p_home)
    with connect(base, autocommit=True, vector=False) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
    primary = make_conninfo(base, dbname=DB_NAME)
    migrate.upgrade(primary)
    res: dict[str, Any] = {"machine": machine(primary), "args": vars(args), "setup": {}}
    try:
        print(f"== loading {args.rows:,} vectors", flush=True)
        data = make_dataset(args.rows, args.seed, kind="manifold")
        with connect(primary) as conn:
            corpus, loaded = load(conn, data, MemorySampler(None))
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        res["setup"]["load"] = loaded
        res["setup"]["database_mib"] = round(int(size[0]) / 2**20) if size else None
        print("== starting the replica", flush=True)
        t0 = time.perf_counter()
        r_base = replica.start_replica(r_home, p_home)
        res["setup"]["replica_start_s"] = round(time.perf_counter() - t0, 1)
        replica_dsn = make_conninfo(r_base, dbname=DB_NAME)
        res["setup"]["first_catch_up_s"] = round(replica.wait_for_replay(primary, replica_dsn), 3)
        with connect(replica_dsn) as conn:
            assert get_corpus(conn, "scale").table_name == corpus.table_name
        servers = {"primary": postmaster(primary), "replica": postmaster(replica_dsn)}
        queries = make_queries(data, 400, 3, args.seed + 7)
        res["idle"] = wait_idle(args.idle_wait)
        # warm both servers' caches the same way (one pass over the queries each)
        for dsn in (primary, replica_dsn):
            run([dsn], corpus, queries, 3.0, servers)
        runs = []
        medians = []
        for n in [int(x) for x in args.clients.split(",")]:
            setups = [("1 server", [primary] * n)]
            if n > 1:  # one client uses one server
                split = [replica_dsn if i % 2 else primary for i in range(n)]
                setups.append(("primary + replica", split))
            for rnd in range(args.rounds if n > 1 else 1):
                for setup, targets in setups if rnd % 2 == 0 else setups[::-1]:
                    r = run(targets, corpus, queries, args.seconds, servers)
                    r["setup"], r["round"] = setup, rnd + 1
                    runs.append(r)
                    print(f"  {setup}, {n} clients, round {rnd + 1}: {r['qps']} q/s, p50 "
                          f"{r['p50_ms']} ms, p99 {r['p99_ms']} ms, ours "
                          f"{r['bench_cpu_share']:.0%}", flush=True)  # fmt: skip
            if n > 1:
                q1 = statistics.median(
                    r["qps"] for r in runs if r["clients"] == n and r["setup"] == "1 server"
                )
                q2 = statistics.median(
                    r["qps"] for r in runs if r["clients"] == n and r["setup"] != "1 server"
                )
                medians.append({"clients": n, "qps_1": q1, "qps_2": q2, "ratio": q2 / q1})
        res["runs"] = runs
        best_1 = max(medians, key=lambda m: m["qps_1"])
        best_2 = max(medians, key=lambda m: m["qps_2"])
        res["gain"] = {
            "medians": medians,
            "best_1": {"qps": best_1["qps_1"], "clients": best_1["clients"]},
            "best_2": {"qps": best_2["qps_2"], "clients": best_2["clients"]},
            "ratio": round(best_2["qps_2"] / best_1["qps_1"], 3),
        }
        one = next(r for r in runs if r["setup"] == "1 server" and r["clients"] == 1)
        c_q = one["server_cpu_ms_per_query"]["primary"]
        cores = psutil.cpu_count() or 2
        x1 = 1000 * cores / c_q
        res["projection"] = {
            "server_cpu_ms_per_query": c_q,
            "cores_per_server": cores,
            "rows": [{"R": r, "qps": round(r * x1)} for r in (1, 2, 4)],
            "text": (
                f"One server spends C_q = {c_q:.2f} ms of CPU per query of this mix (1 client, "
                f"server processes only). With c = {cores} cores of its own and the clients "
                f"elsewhere, a server tops out near X_1 = c / C_q = {x1:,.0f} q/s, and R "
                "streaming replicas near R·X_1 (each holds the whole index; latency unchanged). "
                "Here both servers and the clients share the same cores, so the best "
                f"primary + replica rate is {res['gain']['ratio']:.2f}× the best single-server "
                "rate: the machine, not the server, is the limit (see 'machine busy')."
            ),
        }
        print("== replication lag while ingesting", flush=True)
        with connect(primary) as conn:
            corpus = get_corpus(conn, "scale")
        res["lag"] = lag_during_ingest(primary, replica_dsn, corpus, args.lag_rows, args.seed)
        write_results("replicas", res, markdown(res), results_dir=RESULTS_DIR)
        print(markdown(res))
    finally:
        if not args.keep:
            for h in (r_home, p_home):
                server.stop(h)
                shutil.rmtree(h, ignore_errors=True)


if __name__ == "__main__":
    main()
