"""HTTP load benchmark: N concurrent clients against ``pglogic serve`` on a synthetic corpus.

    python bench/perf/http_load.py build [--size 1000000]     # once: synthesize, load, HNSW (~17 min at 1M)
    python bench/perf/http_load.py run [--size 1000000] [--clients 1,2,4,8,16] [--seconds 20]
                                  [--idle-wait 600]

``build`` makes the corpus as ``bench/perf/scale.py`` does (``synthetic.make_dataset``, "manifold"
clusters of 384-d unit vectors, metadata ``{"c": cluster, "g": i % 100}``, COPY, HNSW m = 16,
ef_construction = 128) in database ``bench_http_<size>`` of an embedded server under ``--home``
(default /work/http-bench; the data is kept for ``run``).

``run`` stores the vectors of 200 synthetic 3-term queries (``synthetic.make_queries``, the same
generator as ``scale.py``'s throughput test) and of their AND texts in ``pglogic.term_cache``
under the corpus's model name, so the server never loads a model; starts the real ``pglogic
serve`` (``--pool-size 16``, read-only as ``pglogic_reader``) on a free port; and for each
number of clients runs the mix 3-term AND / OR / AND NOT (k = 10, ``POST /v1/search``) for
``--seconds`` from that many concurrent HTTP/1.1 keep-alive connections (asyncio + httpx, one
client process). Each level also runs the same mix through the Python API in this process
(``PgLogic.search`` on the same read-only role, one thread per client, a pool of 16), so the
difference is what HTTP, JSON and the ASGI stack add. Every non-200 answer or exception counts
as an error. Results: ``bench/perf/results/http_load.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    fresh_database,
    machine,
    machine_md,
    md_table,
    percentile,
    phrase_vectors,
    server_dsn,
    wait_idle,
    write_results,
)
from bench.lib.synthetic import make_dataset, make_queries
from pglogic.api import PgLogic
from pglogic.engine.render import vector_literal
from pglogic.integrations.http.backend import READER_ROLE, reader_dsn
from pglogic.query import parse
from pglogic.store import migrate
from pglogic.store.db import connect

RESULTS_DIR = Path(__file__).resolve().parent / "results"

HOME = Path("/work/http-bench")
DB = "bench_http"
CORPUS = "scale"
N_QUERIES = 200


def database(home: Path, size: int) -> tuple[str, str]:
    """(server DSN, database DSN) of the corpus of ``size`` vectors."""
    base = server_dsn(home / "pg", None)
    return base, make_conninfo(base, dbname=f"{DB}_{size}")


def build(size: int, seed: int, home: Path) -> None:
    """Synthesize, load and index ``size`` vectors (as bench/perf/scale.py does)."""
    from bench.lib.harness import MemorySampler, load, postmaster_pid

    base, _ = database(home, size)
    dsn = fresh_database(base, f"{DB}_{size}")
    t0 = time.perf_counter()
    data = make_dataset(size, seed, kind="manifold")
    print(f"dataset {size:,} in {time.perf_counter() - t0:.0f}s", flush=True)
    with connect(dsn) as conn:
        mem = MemorySampler(postmaster_pid(conn))
        _, loaded = load(conn, data, mem)
        mem.stop()
    loaded.update(size=size, seed=seed, memory_peak_mib={k: round(v) for k, v in mem.peaks.items()})
    (home / f"build_{size}.json").write_text(json.dumps(loaded, indent=2))
    print(loaded, flush=True)


def query_mix(seed: int) -> tuple[list[str], dict[str, np.ndarray]]:
    """The benchmark's query texts (AND, OR, AND NOT in turn) and every vector they need."""
    data = make_dataset(0, seed, kind="isotropic")  # its topics and centres: the seed's alone
    texts: list[str] = []
    vectors: dict[str, np.ndarray] = {}
    for i, q in enumerate(make_queries(data, N_QUERIES, 3, seed + 7)):
        names = {f"q{i}t{j}": q[f"t{j}"] for j in (1, 2, 3)}
        a, b, c = (f'"{n}"' for n in names)
        shape = (f"{a} AND {b} AND {c}", f"{a} OR {b} OR {c}", f"{a} AND {b} AND NOT {c}")[i % 3]
        texts.append(shape)
        vectors.update(phrase_vectors(parse(shape), names))
    return texts, vectors


def cache_vectors(dsn: str, model: str, vectors: dict[str, np.ndarray]) -> None:
    """Store the query vectors in pglogic.term_cache for the corpus's model."""
    with connect(dsn) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO pglogic.term_cache (model, term, embedding) VALUES (%s, %s, %s::vector) "
            "ON CONFLICT (model, term) DO UPDATE SET embedding = EXCLUDED.embedding",
            [(model, t, vector_literal(v)) for t, v in vectors.items()],
        )
        conn.commit()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(dsn: str, port: int, pool: int, home: Path) -> subprocess.Popen[str]:
    exe = Path(sys.executable).with_name("pglogic")
    cmd = [str(exe), "--dsn", dsn, "serve", "--port", str(port), "--pool-size", str(pool),
           "--timeout", "30", "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(cmd, env={**os.environ, "PGLOGIC_HOME": str(home / "serve-home")},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/v1/health", timeout=5).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"pglogic serve exited: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.2)
    raise SystemExit("pglogic serve did not answer in 120 s")


def cpu_seconds(p: psutil.Process) -> float:
    """User + system CPU time of a process (all its threads)."""
    t = p.cpu_times()
    return float(t.user + t.system)


def stats(lat: Sequence[float], wall: float, errors: int, n: int) -> dict[str, Any]:
    ms = [x * 1000 for x in lat]
    return {
        "clients": n,
        "queries": len(lat),
        "errors": errors,
        "qps": round(len(lat) / wall, 1),
        "p50_ms": round(percentile(ms, 50), 2),
        "p90_ms": round(percentile(ms, 90), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "mean_ms": round(float(np.mean(ms)), 2) if ms else None,
        "load_avg": round(os.getloadavg()[0], 2),
    }


async def http_level(url: str, texts: list[str], n: int, seconds: float) -> dict[str, Any]:
    lat: list[float] = []
    errors = 0
    sizes: list[int] = []
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        stop = time.perf_counter() + seconds

        async def worker(w: int) -> None:
            nonlocal errors
            i = w
            while time.perf_counter() < stop:
                body = {"corpus": CORPUS, "query": texts[i % len(texts)], "k": 10}
                t0 = time.perf_counter()
                try:
                    res = await client.post("/v1/search", json=body)
                    ok = res.status_code == 200 and len(res.json()["hits"]) == 10
                    sizes.append(len(res.content))
                except httpx.HTTPError:
                    ok = False
                if ok:
                    lat.append(time.perf_counter() - t0)
                else:
                    errors += 1
                i += n

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(n)))
        wall = time.perf_counter() - t0
    out = stats(lat, wall, errors, n)
    out["response_bytes"] = round(float(np.mean(sizes))) if sizes else None
    return out


def api_level(api: PgLogic, texts: list[str], n: int, seconds: float) -> dict[str, Any]:
    lats: list[list[float]] = [[] for _ in range(n)]
    errors = [0] * n
    stop = time.perf_counter() + seconds

    def worker(w: int) -> None:
        i = w
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            try:
                res = api.search(CORPUS, texts[i % len(texts)], k=10, remember_terms=False,
                                 timeout=30)  # fmt: skip
                if len(res.hits) == 10:
                    lats[w].append(time.perf_counter() - t0)
                else:
                    errors[w] += 1
            except Exception:
                errors[w] += 1
            i += n

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return stats([x for xs in lats for x in xs], time.perf_counter() - t0, sum(errors), n)


def run(args: argparse.Namespace) -> None:
    home = Path(args.home)
    base, dsn = database(home, args.size)
    built = json.loads((home / f"build_{args.size}.json").read_text())
    texts, vectors = query_mix(args.seed)
    migrate.upgrade(dsn)  # a corpus built before a new migration
    with PgLogic(dsn) as admin:
        model = admin.corpus(CORPUS).model
        docs = admin.corpus_info(CORPUS).documents
    cache_vectors(dsn, model, vectors)
    port = free_port()
    proc = start_server(dsn, port, args.pool, home)
    url = f"http://127.0.0.1:{port}"
    levels = [int(x) for x in args.clients.split(",")]
    rows: list[dict[str, Any]] = []
    try:
        with PgLogic(reader_dsn(dsn, role=READER_ROLE), pool_size=args.pool) as api:
            for t in texts:  # warm both: the shapes' statements, the server's buffers
                api.search(CORPUS, t, k=10, remember_terms=False)
            asyncio.run(http_level(url, texts, 1, min(5.0, args.seconds)))
            server, me = psutil.Process(proc.pid), psutil.Process()
            for n in levels:
                idle = wait_idle(args.idle_wait) if args.idle_wait else {}
                s0, c0 = cpu_seconds(server), cpu_seconds(me)
                h = asyncio.run(http_level(url, texts, n, args.seconds))
                s1, c1 = cpu_seconds(server), cpu_seconds(me)
                h["server_cpu_ms_per_query"] = round(1000 * (s1 - s0) / max(1, h["queries"]), 2)
                h["client_cpu_ms_per_query"] = round(1000 * (c1 - c0) / max(1, h["queries"]), 2)
                p = api_level(api, texts, n, args.seconds)
                p["cpu_ms_per_query"] = round(
                    1000 * (cpu_seconds(me) - c1) / max(1, p["queries"]), 2
                )
                rows.append({"clients": n, "http": h, "python_api": p, **idle})
                print(f"{n:>2} clients: HTTP {h['qps']} q/s p50 {h['p50_ms']} p99 {h['p99_ms']} "
                      f"errors {h['errors']} | API {p['qps']} q/s p50 {p['p50_ms']} "
                      f"p99 {p['p99_ms']}", flush=True)  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    results = {
        "machine": machine(base),
        "corpus": {"documents": docs, "build": built},
        "args": {k: v for k, v in vars(args).items() if k != "func"},
        "rows": rows,
    }
    write_results("http_load", results, render(results), results_dir=RESULTS_DIR)


HEADERS = [
    "clients", "HTTP q/s", "HTTP p50", "HTTP p99", "HTTP errors", "API q/s", "API p50",
    "API p99", "API errors", "p50 HTTP − API", "q/s HTTP / API", "server CPU ms/q",
    "API CPU ms/q", "load avg",
]  # fmt: skip


def render(r: dict[str, Any]) -> str:
    b = r["corpus"]["build"]
    a = r["args"]
    rows = []
    for row in r["rows"]:
        h, p = row["http"], row["python_api"]
        rows.append([
            row["clients"], h["qps"], h["p50_ms"], h["p99_ms"], h["errors"], p["qps"],
            p["p50_ms"], p["p99_ms"], p["errors"], round(h["p50_ms"] - p["p50_ms"], 2),
            f"{h['qps'] / p['qps']:.2f}" if p["qps"] else "", h.get("server_cpu_ms_per_query"),
            p.get("cpu_ms_per_query"), h["load_avg"],
        ])  # fmt: skip
    one = next((row for row in r["rows"] if row["clients"] == 1), None)
    overhead = ""
    if one:
        d = one["http"]["p50_ms"] - one["python_api"]["p50_ms"]
        overhead = (
            f"With one client HTTP adds {d:.2f} ms to the median search "
            f"({one['http']['p50_ms']} ms against {one['python_api']['p50_ms']} ms in process); "
            f"a response is {one['http'].get('response_bytes')} bytes of JSON. CPU per query "
            "outside Postgres, which the machine's other work does not inflate: the server "
            f"process {one['http'].get('server_cpu_ms_per_query')} ms (HTTP, validation, JSON "
            f"and the search's Python side), the Python API {one['python_api'].get('cpu_ms_per_query')} "
            "ms (the search's Python side alone)."
        )
    return "\n".join(
        [
            "# HTTP load (`bench/perf/http_load.py`)",
            "",
            machine_md(r["machine"]),
            "",
            f"Corpus: {r['corpus']['documents']:,} synthetic 384-d vectors (`synthetic.make_dataset`, "
            f"manifold clusters, seed {b['seed']}), HNSW {b['hnsw']}; loaded in {b['load_s']} s, "
            f"index built in {b['hnsw_build_s']} s; table {b['table_mib']:,} MiB, index "
            f"{b['index_mib']:,} MiB.",
            "",
            f"Server: `pglogic serve --pool-size {a['pool']}` (one uvicorn process, read-only as "
            "pglogic_reader), query vectors from `pglogic.term_cache` (no model). Mix: 200 "
            "3-term queries, AND / OR / AND NOT in turn, k = 10, `POST /v1/search`; "
            f"{a['seconds']:g} s per level; clients are HTTP/1.1 keep-alive connections from one "
            "asyncio process. *Python API*: the same mix through `PgLogic.search` in process "
            f"(one thread per client, pool {a['pool']}, same role). Latency in ms; errors = "
            "non-200 answers or failed requests. *CPU ms/q*: CPU time of the server process (HTTP) "
            "and of this process (API) per query, Postgres not included. The machine's other work "
            "shows in the load average (1 min) at the end of each level.",
            "",
            md_table(HEADERS, rows),
            "",
            overhead,
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", default=str(HOME), help="where the embedded server keeps the data")
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="synthesize, load and index the corpus")
    b.add_argument("--size", type=int, default=1_000_000)
    b.add_argument("--seed", type=int, default=11)
    r = sub.add_parser("run", help="the load test")
    r.add_argument("--size", type=int, default=1_000_000)
    r.add_argument("--seed", type=int, default=11)
    r.add_argument("--clients", default="1,2,4,8,16")
    r.add_argument("--seconds", type=float, default=20.0)
    r.add_argument("--pool", type=int, default=16)
    r.add_argument("--idle-wait", type=float, default=0.0,
                   help="before each level wait up to this long for the CPU to be idle")  # fmt: skip
    args = ap.parse_args()
    if args.cmd == "build":
        build(args.size, args.seed, Path(args.home))
    else:
        run(args)


if __name__ == "__main__":
    main()
