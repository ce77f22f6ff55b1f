"""Citus benchmark: pglogic's statements on a local Citus cluster (a coordinator, two workers).

    bench/perf/citus/build.sh /work/citus-src                 # Citus v13.2.x source -> the embedded server's tree
    .venv/bin/python bench/perf/citus/cluster.py start          # coordinator :9700 + workers :9701, :9702
    .venv/bin/python bench/perf/citus.py load --size 1000000 --shards 2      # ~20 min on a busy 2-core machine
    .venv/bin/python bench/perf/citus.py measure --size 1000000 --shards 2 --single-dsn "$DSN"
    .venv/bin/python bench/perf/citus.py settings --size 1000000 --shards 2  # recall when settings stay on the coordinator
    .venv/bin/python bench/perf/citus.py plans --size 1000000 --shards 2     # bench/perf/results/citus_plans.md
    .venv/bin/python bench/perf/citus.py report                            # the Markdown again from citus.json
    .venv/bin/python bench/perf/citus/partitioning.py                      # bench/perf/results/citus_partitioning.md

Options: ``[--size 100000] [--shards 2] [--queries 10] [--single-dsn DSN --single-index]``. The
vectors are cached as ``.npz`` under ``/work/citus-data``, where the cluster keeps its data too.

``load`` creates the distributed corpus ``bench_<size>_s<shards>`` (``create_corpus(...,
distributed=True)``), ingests the synthetic vectors of ``bench/perf/scale.py`` (``synthetic.make_dataset``,
``manifold`` clusters, seed 11, metadata ``{"c": cluster, "g": i % 100}``) with pglogic's own
ingest (binary COPY through the coordinator) and builds the HNSW index with ``build_index``
(m = 16, ef_construction = 128, ``maintenance_work_mem`` 1GB sent to the workers with ``SET
LOCAL``); the per-shard build times are read from the workers' logs
(``log_min_duration_statement``, set by ``cluster.py``). The timings are kept in
``/work/citus-data/bench_state.json``.

``measure`` runs, per query shape (1 term; AND / OR / NOT of 2, 3, 5 terms; k = 10; no filter and
the 10% filter), ``pglogic.store.search.search`` on the cluster: latency p50/p95, recall@10
against the exact top 10 (NumPy over all vectors, the same formula and AND texts as
``bench/perf/scale.py``), the fan-outs (multi-shard tasks counted from ``citus.log_remote_commands``
on a separate run of the same statement), the plan's own recall with exact scans, one shard's
HNSW scan timed on its worker, and compares with the cost model of docs/scaling.md section 4. In exact mode the top k must equal NumPy's (ids; scores to 1e-6), and
with ``--single-dsn`` the top k of one plain PostgreSQL holding the same rows too
(``--single-index``: also the HNSW searches timed there, which builds its index).

``plans`` writes ``EXPLAIN (ANALYZE, VERBOSE)`` of each plan shape on the cluster to
``bench/perf/results/citus_plans.md``.

Results: ``bench/perf/results/citus.{json,md}`` (merged per size and shard count).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import (
    machine,
    machine_md,
    md_table,
    percentile,
    wait_idle,
    write_results,
)
from bench.lib.harness import FILTER_MASK, FILTERS, Vectors, exact_top, recall, shapes
from bench.lib.synthetic import DIM, Dataset, make_dataset, make_queries
from pglogic.engine.compile import CompiledQuery, SearchOptions, set_local
from pglogic.engine.source import Corpus
from pglogic.query import Node, parse
from pglogic.store.citus import with_propagation
from pglogic.store.corpus import build_index, corpus_info, create_corpus, drop_corpus, get_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import search, server_has_iterative_scan

RESULTS_DIR = Path(__file__).resolve().parent / "results"

DATA_DIR = Path("/work/citus-data")
STATE = DATA_DIR / "bench_state.json"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:9700/pglogic"
SEED = 11
KIND = "manifold"
HNSW_M = 16
#: Each timed search runs REPEAT times in a row: p50/p95 of the first runs, and "best" = p50 of
#: each query's fastest run (the machine is shared: the fastest run is the least disturbed).
REPEAT = 3
HNSW_EF_CONSTRUCTION = 128


def corpus_name(size: int, shards: int) -> str:
    return f"bench_{size}_s{shards}"


def dataset(size: int) -> Dataset:
    """The benchmark's vectors, cached under DATA_DIR (1M take minutes to generate)."""
    cache = DATA_DIR / f"vectors_{KIND}_{SEED}_{size}.npz"
    if cache.exists():
        z = np.load(cache)
        return Dataset(z["topics"], z["centres"], int(z["per_topic"]), z["vectors"], z["labels"])
    data = make_dataset(size, SEED, kind=KIND)
    np.savez(
        cache,
        topics=data.topics,
        centres=data.centres,
        per_topic=data.per_topic,
        vectors=data.vectors,
        labels=data.labels,
    )
    return data


def _state() -> dict[str, Any]:
    return json.loads(STATE.read_text()) if STATE.exists() else {}


def _save_state(state: dict[str, Any]) -> None:
    STATE.write_text(json.dumps(state, indent=2) + "\n")


def worker_logs(root: Path = DATA_DIR) -> list[Path]:
    return sorted(root.glob("worker*/log"))


def shard_build_times(
    logs: Sequence[Path], offsets: dict[str, int], index: str
) -> list[dict[str, Any]]:
    """Per shard: the duration of its CREATE INDEX ``index`` logged by the workers since
    ``offsets`` (byte offsets of each log when the build started)."""
    out = []
    pat = re.compile(
        r"duration: ([\d.]+) ms\s+statement: CREATE\s+INDEX\s+(?:CONCURRENTLY\s+)?"
        + re.escape(index)
        + r"_(\d+)\s+ON"
    )
    for log in logs:
        with open(log, encoding="utf-8", errors="replace") as f:
            f.seek(offsets.get(str(log), 0))
            for line in f:
                m = pat.search(line)
                if m:
                    out.append(
                        {
                            "node": log.parent.name,
                            "shard": int(m.group(2)),
                            "seconds": round(float(m.group(1)) / 1000, 1),
                        }
                    )
    return sorted(out, key=lambda r: r["shard"])


def load(dsn: str, size: int, shards: int, batch: int) -> dict[str, Any]:
    """Create, ingest and index the distributed corpus; return (and keep) the timings."""
    name = corpus_name(size, shards)
    t0 = time.perf_counter()
    data = dataset(size)
    gen_s = time.perf_counter() - t0
    print(f"{name}: {size:,} vectors generated in {gen_s:.0f} s", flush=True)
    with connect(dsn) as conn:
        try:
            drop_corpus(conn, name)
        except Exception:
            conn.rollback()
        corpus = create_corpus(
            conn, name, model="synthetic", dim=DIM, distributed=True, shards=shards
        )

        def records() -> Any:
            for i, (vec, label) in enumerate(zip(data.vectors, data.labels, strict=True)):
                meta = {"c": int(label), "g": i % 100}
                yield Record(f"doc{i}", f"document {i} of cluster {label}", None, meta, vec)

        t0 = time.perf_counter()
        ingest_records(conn, corpus, records(), embedder=None, batch_size=batch)
        load_s = time.perf_counter() - t0
        print(f"  loaded in {load_s:.0f} s ({size / load_s:,.0f} rows/s)", flush=True)
        logs = worker_logs()
        offsets = {str(p): p.stat().st_size for p in logs}
        build_s = build_index(
            conn, name, m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION, maintenance_work_mem="1GB"
        )
        print(f"  HNSW built in {build_s:.0f} s", flush=True)
        corpus = get_corpus(conn, name)
        per_shard = shard_build_times(logs, offsets, str(corpus.index_name))
        info = corpus_info(conn, name)
        placement = [
            {"shard": int(r[0]), "node": f"{r[1]}:{r[2]}", "rows": int(r[3])}
            for r in conn.execute(
                "SELECT s.shardid, n.nodename, n.nodeport, r.result FROM pg_dist_shard s"
                " JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)"
                " JOIN run_command_on_shards(s.logicalrelid, 'SELECT count(*) FROM %%s') r"
                " USING (shardid) WHERE s.logicalrelid = to_regclass(%s) ORDER BY s.shardid",
                (f"pglogic.{corpus.table_name}",),
            )
        ]
    result = {
        "size": size,
        "shards": shards,
        "corpus": name,
        "generate_s": round(gen_s, 1),
        "load_s": round(load_s, 1),
        "load_rows_per_s": round(size / load_s),
        "hnsw_build_s": round(build_s, 1),
        "hnsw": f"m={HNSW_M}, ef_construction={HNSW_EF_CONSTRUCTION}",
        "hnsw_build_per_shard": per_shard,
        "placement": placement,
        "table_mib": round(info.table_bytes / 2**20, 1),
        "index_mib": round(info.index_bytes / 2**20, 1),
        "distribution": info.distribution,
    }
    state = _state()
    state[name] = result
    _save_state(state)
    print(json.dumps(result, indent=2), flush=True)
    return result


# -- measure -------------------------------------------------------------------------------


def remote_commands(
    conn: Connection, compiled: CompiledQuery, vectors: dict[str, np.ndarray]
) -> list[str]:
    """Run the statement once with ``citus.log_remote_commands``; the commands Citus sent."""
    notes: list[str] = []

    def handler(d: Any) -> None:
        notes.append(str(d.message_primary or ""))

    conn.add_notice_handler(handler)
    try:
        with conn.transaction():
            for stmt in set_local(with_propagation(conn, compiled.settings)):
                conn.execute(stmt)
            conn.execute("SET LOCAL citus.log_remote_commands = on")
            conn.execute(compiled.text, compiled.with_vectors(vectors)).fetchall()  # type: ignore[arg-type]
    finally:
        conn.remove_notice_handler(handler)
    conn.commit()
    return notes


_SHARD = re.compile(r"_\d{5,}\b")


def fanouts(notes: Sequence[str]) -> dict[str, int]:
    """Phases of a statement's execution from its remote commands: ``fanouts`` = rounds of
    queries sent to the shards (consecutive commands of one text, shard names aside),
    ``broadcasts`` = intermediate results copied to the workers, ``tasks`` = queries sent,
    ``local`` = (sub)plans the coordinator ran itself."""
    phases: list[tuple[str, str]] = []
    tasks = local = 0
    for n in notes:
        if n.startswith("executing the command locally"):
            local += 1
            phases.append(("local", n))
            continue
        if not n.startswith("issuing "):
            continue
        cmd = n[len("issuing ") :]
        if cmd.startswith(
            ("BEGIN", "SET ", "COMMIT", "RELEASE", "SAVEPOINT", "PREPARE", "ROLLBACK")
        ):
            continue
        kind = "copy" if cmd.startswith("COPY") else "query"
        if kind == "query":
            tasks += 1
        key = _SHARD.sub("_N", cmd)  # the same statement on another shard: the same phase
        if not phases or phases[-1] != (kind, key):
            phases.append((kind, key))
    return {
        "fanouts": sum(1 for k, _ in phases if k == "query"),
        "broadcasts": sum(1 for k, _ in phases if k == "copy"),
        "tasks": tasks,
        "local": local,
    }


def term_vectors(compiled: CompiledQuery, emb: Vectors) -> dict[str, np.ndarray]:
    """Every scored text's vector (the terms and the AND texts), as search() embeds them."""
    return dict(zip(compiled.terms, emb.embed(compiled.terms), strict=True))


def shard_scan_ms(
    dsn: str, corpus: Corpus, compiled: CompiledQuery, vectors: dict[str, np.ndarray], reps: int = 3
) -> float:
    """t_h on one shard: one plain HNSW scan (the statement's first candidate scan: depth and
    settings) run directly on the worker that holds the first shard, median of ``reps``, ms."""
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT s.shardid, n.nodename, n.nodeport FROM pg_dist_shard s"
            " JOIN pg_dist_placement p USING (shardid) JOIN pg_dist_node n USING (groupid)"
            " WHERE s.logicalrelid = to_regclass(%s) ORDER BY s.shardid LIMIT 1",
            (f"pglogic.{corpus.table_name}",),
        ).fetchone()
    assert row is not None
    shard_table = sql.Identifier("pglogic", f"{corpus.table_name}_{row[0]}")
    if compiled.guide_param and not compiled.candidate_terms:
        vec, depth = compiled.guide_vector(vectors), int(compiled.params["gdepth"])
    else:
        vec = vectors[compiled.candidate_terms[0]]
        depth = int(compiled.params.get("depth", 10))
    stmt = sql.SQL(
        "SELECT id FROM {t} ORDER BY embedding <=> %(v)s::vector({dim}) LIMIT %(n)s"
    ).format(t=shard_table, dim=sql.Literal(DIM))
    times = []
    with connect(f"postgresql://postgres@{row[1]}:{row[2]}/pglogic") as w:
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            with w.pipeline(), w.transaction():
                for st in set_local(compiled.settings):
                    w.execute(st)
                w.execute(stmt, {"v": vec, "n": depth}).fetchall()
            times.append(time.perf_counter() - t0)
    return 1000 * float(np.median(times[1:]))


def round_trip_ms(conn: Connection, corpus: Corpus, reps: int = 20) -> dict[str, float]:
    """The cost of fan-outs without work: c0 (``SELECT 1``), one multi-shard query by a
    non-distribution column (``WHERE id = -1``: one index probe per shard), p50 in ms."""
    one = sql.SQL("SELECT 1")
    multi = sql.SQL("SELECT id FROM {} WHERE id = -1").format(corpus.table)
    out = {}
    for name, stmt in (("c0", one), ("multi_shard", multi)):
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            conn.execute(stmt).fetchall()
            conn.commit()
            times.append(time.perf_counter() - t0)
        out[name] = round(1000 * percentile(times, 50), 3)
    return out


def measure(
    dsn: str,
    size: int,
    shards: int,
    n_queries: int,
    single_dsn: str | None,
    single_index: bool = False,
) -> dict[str, Any]:
    name = corpus_name(size, shards)
    print(f"{name}: waiting for an idle machine", flush=True)
    idle = wait_idle(180)
    data = dataset(size)
    emb = Vectors()
    out: dict[str, Any] = {
        "size": size,
        "shards": shards,
        "queries": n_queries,
        "idle": idle,
        "rows": [],
    }
    with connect(dsn) as conn:
        corpus = get_corpus(conn, name)
        conn.commit()
        out["round_trip_ms"] = round_trip_ms(conn, corpus)
        g = np.arange(size) % 100
        iterative = server_has_iterative_scan(conn)
        for shape, text in shapes([2, 3, 5]).items():
            tree = parse(text)
            n_terms = len(tree_terms(tree))
            queries = make_queries(data, n_queries, n_terms, seed=1000 + n_terms)
            for fname in ("none", "10%"):
                if fname != "none" and n_terms != 3:
                    continue
                opts = SearchOptions(k=10, filters=FILTERS[fname])
                mask = FILTER_MASK[fname](g)
                lat, best, rec, ex_equal, ex_lat, plan_rec = [], [], [], [], [], []
                compiled = None
                for qi, vecs in enumerate(queries):
                    emb.current = vecs
                    truth = exact_top(tree, data, vecs, mask, 10)
                    times = []
                    for _ in range(REPEAT):  # the best of REPEAT: the least disturbed run
                        t0 = time.perf_counter()
                        res = search(conn, corpus, tree, embedder=emb, options=opts)
                        times.append(time.perf_counter() - t0)
                        conn.commit()
                    lat.append(times[0])
                    best.append(min(times))
                    rec.append(recall([h.row_id for h in res.hits], truth, 10))
                    compiled = res.compiled
                    emb.current = vecs
                    plan_rec.append(
                        plan_recall(data, tree, compiled, term_vectors(compiled, emb), mask, truth)
                    )
                    if qi < 2 and fname == "none":  # exact mode equals NumPy's exact top k
                        t0 = time.perf_counter()
                        exact = search(
                            conn,
                            corpus,
                            tree,
                            embedder=emb,
                            options=SearchOptions(k=10, exact=True),
                        )
                        ex_lat.append(time.perf_counter() - t0)
                        conn.commit()
                        ex_equal.append([h.row_id for h in exact.hits] == truth)
                assert compiled is not None
                emb.current = queries[0]
                vecs_all = term_vectors(compiled, emb)
                phases = fanouts(remote_commands(conn, compiled, vecs_all))
                scan_ms = shard_scan_ms(dsn, corpus, compiled, vecs_all)
                row = {
                    "shape": shape,
                    "filter": fname,
                    "scans": len(compiled.candidate_terms) + (1 if compiled.guide_param else 0),
                    "term_scans": len(compiled.candidate_terms),
                    "guide": bool(compiled.guide_param),
                    "depth": compiled.params.get("depth"),
                    "gdepth": compiled.params.get("gdepth"),
                    "p50_ms": round(1000 * percentile(lat, 50), 2),
                    "p95_ms": round(1000 * percentile(lat, 95), 2),
                    "best_p50_ms": round(1000 * percentile(best, 50), 2),
                    "recall@10": round(float(np.mean(rec)), 3),
                    "plan_recall@10": round(float(np.mean(plan_rec)), 3),
                    **phases,
                    "t_h_shard_ms": round(scan_ms, 2),
                    "exact_equal": None if not ex_equal else all(ex_equal),
                    "exact_p50_ms": None if not ex_lat else round(1000 * percentile(ex_lat, 50), 1),
                    "settings": compiled.settings,
                }
                out["rows"].append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "settings"}), flush=True)
        out["iterative_scan"] = iterative
    if single_dsn:
        out["single_node_exact"] = single_node_exact(single_dsn, size, data, dsn, name)
        if single_index:
            out["single_node"] = single_node_latency(single_dsn, size, data, name, n_queries)
    return out


def single_node_latency(
    single_dsn: str, size: int, data: Dataset, name: str, n_queries: int
) -> dict[str, dict[str, float]]:
    """The same searches on one plain PostgreSQL with the HNSW index (built here if missing),
    in the same run, so both see the same load on the machine: p50 ms and recall@10."""
    from psycopg.conninfo import make_conninfo

    sdsn = make_conninfo(single_dsn, dbname=f"bench_citus_single_{size}")
    emb = Vectors()
    out: dict[str, dict[str, float]] = {}
    with connect(sdsn) as one:
        c = get_corpus(one, name)
        one.commit()
        if c.index_name is None:
            build_index(one, name, m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION,
                        maintenance_work_mem="1GB")  # fmt: skip
            c = get_corpus(one, name)
        mask = np.ones(size, dtype=bool)
        for shape, text in shapes([2, 3, 5]).items():
            tree = parse(text)
            n = len(tree_terms(tree))
            queries = make_queries(data, n_queries, n, seed=1000 + n)
            lat, best, rec = [], [], []
            for vecs in queries:
                emb.current = vecs
                truth = exact_top(tree, data, vecs, mask, 10)
                times = []
                for _ in range(REPEAT):
                    t0 = time.perf_counter()
                    res = search(one, c, tree, embedder=emb, options=SearchOptions(k=10))
                    times.append(time.perf_counter() - t0)
                    one.commit()
                lat.append(times[0])
                best.append(min(times))
                rec.append(recall([h.row_id for h in res.hits], truth, 10))
            out[shape] = {"p50_ms": round(1000 * percentile(lat, 50), 2),
                          "best_p50_ms": round(1000 * percentile(best, 50), 2),
                          "recall@10": round(float(np.mean(rec)), 3)}  # fmt: skip
            print(shape, out[shape], flush=True)
    return out


def plan_recall(
    data: Dataset,
    tree: Node,
    compiled: CompiledQuery,
    vecs: dict[str, np.ndarray],
    mask: np.ndarray,
    truth: Sequence[int],
) -> float:
    """recall@10 of the plan itself: its candidate scans done exactly (each term's and the
    guide's nearest ``depth`` rows, in NumPy), then the formula on the candidates. Whatever
    the shard count, the merged per-shard top ``depth`` is the global top ``depth``, so this is
    what the cluster reaches when every shard's HNSW search is exact."""
    cand = np.zeros(len(data.vectors), dtype=bool)
    scans = [(vecs[t], int(compiled.params.get("depth", 10))) for t in compiled.candidate_terms]
    if compiled.guide_param:
        scans.append((compiled.guide_vector(vecs), int(compiled.params["gdepth"])))
    for v, depth in scans:
        d = np.where(mask, -(data.vectors @ np.asarray(v, dtype=np.float32)), np.inf)
        cand[np.argpartition(d, min(depth, len(d) - 1))[:depth]] = True
    got = exact_top(tree, data, vecs, cand & mask, 10)
    return recall(got, truth, 10)


def add_plan_recall(dsn: str, size: int, shards: int, run: dict[str, Any]) -> None:
    """plan recall@10 for the rows of a run measured before it was computed (same queries)."""
    data = dataset(size)
    emb = Vectors()
    g = np.arange(size) % 100
    with connect(dsn) as conn:
        corpus = get_corpus(conn, corpus_name(size, shards))
        conn.commit()
        for row in run["rows"]:
            tree = parse(shapes([2, 3, 5])[row["shape"]])
            n_terms = len(tree_terms(tree))
            queries = make_queries(data, run.get("queries", 10), n_terms, seed=1000 + n_terms)
            opts = SearchOptions(k=10, filters=FILTERS[row["filter"]])
            mask = FILTER_MASK[row["filter"]](g)
            recs = []
            for vecs in queries:
                emb.current = vecs
                truth = exact_top(tree, data, vecs, mask, 10)
                res = search(conn, corpus, tree, embedder=emb, options=opts)
                conn.commit()
                recs.append(
                    plan_recall(
                        data, tree, res.compiled, term_vectors(res.compiled, emb), mask, truth
                    )
                )
            row["plan_recall@10"] = round(float(np.mean(recs)), 3)
            print(row["shape"], row["filter"], row["recall@10"], row["plan_recall@10"], flush=True)


def tree_terms(tree: Node) -> list[str]:
    from pglogic.query import terms

    return list(dict.fromkeys(terms(tree)))


def single_node_exact(
    single_dsn: str, size: int, data: Dataset, dsn: str, name: str, n_queries: int = 3
) -> list[dict[str, Any]]:
    """Exact mode on one plain PostgreSQL (the embedded server, same vectors, no index) against
    the cluster: the same ids and scores (to 1e-9) for each shape."""
    from psycopg.conninfo import make_conninfo

    from bench.lib.benchlib import fresh_database

    db = f"bench_citus_single_{size}"
    with connect(single_dsn) as c:
        exists = c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone()
    sdsn = make_conninfo(single_dsn, dbname=db)
    if not exists:
        fresh_database(single_dsn, db)
        with connect(sdsn) as c:
            corpus = create_corpus(c, name, model="synthetic", dim=DIM)
            ingest_records(
                c,
                corpus,
                (
                    Record(
                        f"doc{i}",
                        f"document {i} of cluster {lab}",
                        None,
                        {"c": int(lab), "g": i % 100},
                        v,
                    )
                    for i, (v, lab) in enumerate(zip(data.vectors, data.labels, strict=True))
                ),
                embedder=None,
                batch_size=5000,
            )
    emb = Vectors()
    rows = []
    with connect(sdsn) as one, connect(dsn) as cl:
        c1, cc = get_corpus(one, name), get_corpus(cl, name)
        for shape, text in shapes([2, 3, 5]).items():
            tree = parse(text)
            queries = make_queries(data, n_queries, len(tree_terms(tree)), seed=2000)
            same_ids = same_scores = True
            worst = 0.0
            for vecs in queries:
                emb.current = vecs
                opts = SearchOptions(k=10, exact=True)
                a = search(one, c1, tree, embedder=emb, options=opts).hits
                b = search(cl, cc, tree, embedder=emb, options=opts).hits
                one.commit()
                cl.commit()
                same_ids &= [h.external_id for h in a] == [h.external_id for h in b]
                diff = max((abs(x.score - y.score) for x, y in zip(a, b, strict=False)), default=0)
                worst = max(worst, diff)
                same_scores &= diff <= 1e-9
            rows.append(
                {
                    "shape": shape,
                    "queries": n_queries,
                    "same_ids": same_ids,
                    "same_scores": same_scores,
                    "max_score_diff": worst,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


# -- settings that do not reach the workers --------------------------------------------------

SETTING_SHAPES = ["1 term", "AND 3", "OR 3", "NOT 3"]


def run_ids(
    conn: Connection,
    compiled: CompiledQuery,
    vectors: dict[str, np.ndarray],
    *,
    propagate: bool,
) -> list[int]:
    """The statement's hits (ids), its settings sent as ``SET LOCAL`` with or without
    ``citus.propagate_set_commands = 'local'``."""
    settings = with_propagation(conn, compiled.settings) if propagate else compiled.settings
    with conn.transaction():
        for stmt in set_local(settings):
            conn.execute(stmt)
        rows = conn.execute(compiled.text, compiled.with_vectors(vectors)).fetchall()  # type: ignore[arg-type]
    conn.commit()
    return [int(r[0]) for r in rows]


def settings_experiment(dsn: str, size: int, shards: int, n_queries: int) -> dict[str, Any]:
    """recall@10 of the default plans when the settings reach the workers (pglogic), when
    they do not (SET LOCAL without propagation = set_config(): the workers keep ef_search = 40
    and no iterative scan), and with the fallback of docs/scaling.md 1.3: worker defaults
    ``hnsw.iterative_scan = relaxed_order`` (ALTER DATABASE on the coordinator, which Citus
    forwards to the workers; new connections)."""
    name = corpus_name(size, shards)
    data = dataset(size)
    emb = Vectors()
    mask = np.ones(size, dtype=bool)
    variants = ["propagated", "not propagated", "worker default relaxed_order"]
    rows = []
    with connect(dsn) as conn:
        corpus = get_corpus(conn, name)
        conn.commit()
        plans = {}
        for shape in SETTING_SHAPES:
            text = shapes([3])[shape]
            tree = parse(text)
            queries = make_queries(data, n_queries, len(tree_terms(tree)), seed=3000)
            truths, compiled = [], []
            for vecs in queries:
                emb.current = vecs
                truths.append(exact_top(tree, data, vecs, mask, 10))
                res = search(conn, corpus, tree, embedder=emb, options=SearchOptions(k=10))
                conn.commit()
                compiled.append((res.compiled, term_vectors(res.compiled, emb)))
            plans[shape] = (truths, compiled)
        for variant in variants:
            if variant == "worker default relaxed_order":
                # on the coordinator: Citus forwards it to the workers (run on a worker it
                # fails: "operation is not allowed on this node")
                conn.execute("ALTER DATABASE pglogic SET hnsw.iterative_scan = 'relaxed_order'")
                conn.commit()
            try:
                # a new coordinator connection: new worker connections with the defaults
                with connect(dsn) as fresh:
                    for shape, (truths, compiled) in plans.items():
                        got = [
                            run_ids(fresh, c, v, propagate=variant == "propagated")
                            for c, v in compiled
                        ]
                        rec = [recall(g, t, 10) for g, t in zip(got, truths, strict=True)]
                        rows.append({
                            "variant": variant,
                            "shape": shape,
                            "recall@10": round(float(np.mean(rec)), 3),
                            "hits": round(float(np.mean([len(g) for g in got])), 1),
                            "settings": compiled[0][0].settings,
                            "depth": compiled[0][0].params.get("depth")
                            or compiled[0][0].params.get("gdepth"),
                        })  # fmt: skip
                        print(json.dumps(rows[-1]), flush=True)
            finally:
                if variant == "worker default relaxed_order":
                    conn.execute("ALTER DATABASE pglogic RESET hnsw.iterative_scan")
                    conn.commit()
    return {"queries": n_queries, "rows": rows}


# -- report ----------------------------------------------------------------------------------


def model_ms(row: dict[str, Any], rt: dict[str, float]) -> float:
    """docs/scaling.md section 4 with the measured pieces: c0, one fan-out r (a multi-shard
    round trip minus c0) per fan-out and broadcast, and per scan one shard's HNSW time (the
    shards of a worker search in parallel: 2 cores per worker here is not true, the cluster
    shares 2 cores, so the shards' scans of one fan-out are counted as run one after another)."""
    c0 = rt["c0"]
    r = max(0.0, rt["multi_shard"] - c0)
    return c0 + (row["fanouts"] + row["broadcasts"]) * r + row["scans"] * row["t_h_shard_ms"]


def _by_shape(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["shape"], []).append(r)
    return out


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Citus benchmark (`bench/perf/citus.py`)",
        "",
        "A local Citus 13.2 cluster (`bench/perf/citus/cluster.py`): a coordinator and two workers, "
        "three PostgreSQL servers of the embedded package on one machine (they share its 2 "
        "cores: the cluster measures Citus's plans, fan-outs and overheads, not a speed-up).",
        "",
        machine_md(results["machine"]),
        "",
    ]
    for name, run in sorted(results["runs"].items()):
        size, shards = (int(x) for x in re.findall(r"\d+", name)[:2])
        run = {"size": size, "shards": shards, **run}
        load = run.get("load") or {}
        lines += [f"## {run['size']:,} vectors, {run['shards']} shards (`{name}`)", ""]
        if load:
            per = ", ".join(
                f"{p['node']} shard {p['shard']}: {p['seconds']} s"
                for p in load.get("hnsw_build_per_shard", [])
            )
            rows = ", ".join(
                f"{p['shard']}@{p['node']}: {p['rows']:,}" for p in load.get("placement", [])
            )
            lines += [
                md_table(
                    ["load s", "rows/s", "HNSW build s (whole)", "HNSW", "table MiB", "index MiB"],
                    [
                        [
                            load["load_s"],
                            load["load_rows_per_s"],
                            load["hnsw_build_s"],
                            load["hnsw"],
                            load["table_mib"],
                            load["index_mib"],
                        ]
                    ],
                ),
                "",
                f"- HNSW build per shard (CREATE INDEX on the worker, from its log): {per}",
                f"- Rows per shard: {rows}",
                "",
            ]
        rt = run.get("round_trip_ms")
        if rt is None:
            rt = {"c0": 0.0, "multi_shard": 0.0}
            run = {**run, "rows": [], "idle": {"cpu_busy_before": float("nan")}}
        lines += [
            f"Round trips (p50): c0 = `SELECT 1` {rt['c0']} ms; one multi-shard query doing "
            f"nothing (`WHERE id = -1`) {rt['multi_shard']} ms, so one fan-out r ≈ "
            f"{max(0.0, rt['multi_shard'] - rt['c0']):.2f} ms. CPU busy before the run: "
            f"{run['idle']['cpu_busy_before']:.0%} (other work on the machine).",
            "",
            "Per query shape (k = 10, {} queries each): latency of `search()`; recall@10 against "
            "the exact top 10 (NumPy); fan-outs = rounds of queries sent to the shards, "
            "broadcasts = intermediate results copied to the workers, tasks = queries sent "
            "(counted with `citus.log_remote_commands`); t_h = one of the plan's HNSW scans run "
            "directly on one shard; model = c0 + (fan-outs + broadcasts)·r + scans·t_h; exact = "
            "exact mode's top 10 equals NumPy's (2 queries).".format(run.get("queries", "")),
            "",
        ]
        table = []
        for row in run["rows"]:
            table.append(
                [
                    row["shape"],
                    row["filter"],
                    f"{row['term_scans']}{' + guide' if row['guide'] else ''}",
                    row["depth"] if row["term_scans"] else row["gdepth"],
                    row["p50_ms"],
                    row["p95_ms"],
                    row.get("best_p50_ms", ""),
                    row["recall@10"],
                    row.get("plan_recall@10", ""),
                    row["fanouts"],
                    row["broadcasts"],
                    row["tasks"],
                    row["t_h_shard_ms"],
                    round(model_ms(row, rt), 1),
                    (run.get("single_node") or {}).get(row["shape"], {}).get("best_p50_ms", "")
                    if row["filter"] == "none"
                    else "",
                    {True: "yes", False: "NO", None: ""}[row["exact_equal"]],
                    row["exact_p50_ms"] or "",
                ]
            )
        lines += [
            md_table(
                [
                    "shape",
                    "filter",
                    "scans",
                    "depth",
                    "p50 ms",
                    "p95 ms",
                    "best p50 ms",
                    "recall@10",
                    "plan recall@10",
                    "fan-outs",
                    "broadcasts",
                    "tasks",
                    "t_h shard ms",
                    "model ms",
                    "1 node best p50 ms",
                    "exact = NumPy",
                    "exact p50 ms",
                ],
                table,
            ),
            "",
        ]
        if run.get("single_node_exact"):
            lines += [
                "Exact mode against one plain PostgreSQL (the embedded server, same rows, "
                "no index):",
                "",
                md_table(
                    ["shape", "queries", "same ids", "same scores", "max score diff"],
                    [
                        [
                            r["shape"],
                            r["queries"],
                            r["same_ids"],
                            r["same_scores"],
                            f"{r['max_score_diff']:.1e}",
                        ]
                        for r in run["single_node_exact"]
                    ],
                ),
                "",
            ]
        exp = run.get("settings_experiment")
        if exp:
            lines += [
                "When the settings do not reach the workers ({} queries per shape, k = 10, "
                "no filter): recall@10 of the same statements run with pglogic's `SET LOCAL`s "
                "(1) forwarded (`citus.propagate_set_commands = 'local'`), (2) not forwarded, "
                "as with `set_config()` or a session `SET` (the workers keep `hnsw.ef_search = "
                "40` and no iterative scan), (3) not forwarded, with `ALTER DATABASE ... SET "
                "hnsw.iterative_scan = relaxed_order` (run on the coordinator, forwarded to the "
                "workers; the fallback of "
                "docs/scaling.md 1.3); hits = rows returned (k = 10).".format(exp["queries"]),
                "",
                md_table(
                    [
                        "shape",
                        "depth",
                        "settings",
                        *(
                            f"{v}: recall@10 / hits"
                            for v in dict.fromkeys(r["variant"] for r in exp["rows"])
                        ),
                    ],
                    [
                        [
                            shape,
                            rows[0]["depth"],
                            json.dumps(rows[0]["settings"]),
                            *(f"{r['recall@10']} / {r['hits']}" for r in rows),
                        ]
                        for shape, rows in _by_shape(exp["rows"]).items()
                    ],
                ),
                "",
            ]
        for extra in run.get("notes", []):
            lines += [extra, ""]
    return "\n".join(lines)


# -- plans -----------------------------------------------------------------------------------

PLAN_SHAPES = [
    ("1 term (k-NN)", '"t1"', {}),
    ("OR of terms under max (term scans of depth k, no guide)", '"t1" OR "t2" OR "t3"', {}),
    ("AND 3 (the guide scan alone, depth 2d)", '"t1" AND "t2" AND "t3"', {}),
    ("(OR) AND NOT (term scans + the guide)", '("t1" OR "t2") AND NOT "t3"', {}),
    ("AND 3 with a 10% filter (iterative scans)", '"t1" AND "t2" AND "t3"', {"filter": "10%"}),
    ("AND 3, exact mode", '"t1" AND "t2" AND "t3"', {"exact": True}),
]
_VECTOR = re.compile(r"'\[[-0-9.e,]{40,}\]'")


def short(text: str) -> str:
    """A plan or command with its vector literals shortened."""
    return _VECTOR.sub("'[…384 floats…]'", text)


def explain(conn: Connection, compiled: CompiledQuery, vectors: dict[str, np.ndarray]) -> str:
    with conn.transaction():
        for stmt in set_local(with_propagation(conn, compiled.settings)):
            conn.execute(stmt)
        rows = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) " + compiled.text,
            compiled.with_vectors(vectors),  # type: ignore[arg-type]
        ).fetchall()
    conn.commit()
    return short("\n".join(str(r[0]) for r in rows))


def plans(dsn: str, size: int, shards: int) -> None:
    name = corpus_name(size, shards)
    data = dataset(size)
    emb = Vectors()
    parts = [
        "# Citus plans of pglogic's statements (`bench/perf/citus.py plans`)",
        "",
        f"`EXPLAIN (ANALYZE, COSTS OFF)` on the local cluster (a coordinator, two workers; "
        f"Citus 13.2, PostgreSQL 17.9, pgvector 0.8.2) for corpus `{name}` ({size:,} vectors, "
        f"{shards} shards, HNSW m = 16, ef_construction = 128), each statement as "
        "`pglogic.store.search.search` compiles it, run after its `SET LOCAL` settings "
        "(`citus.propagate_set_commands = 'local'` first). Vector literals are shortened; "
        "Citus shows one task of each multi-shard query (`citus.explain_all_tasks` off). "
        "Timings are of a shared 2-core machine.",
        "",
    ]
    with connect(dsn) as conn:
        corpus = get_corpus(conn, name)
        conn.commit()
        for title, text, extra in PLAN_SHAPES:
            tree = parse(text)
            emb.current = make_queries(data, 1, len(tree_terms(tree)), seed=77)[0]
            opts = SearchOptions(
                k=10,
                exact=bool(extra.get("exact")),
                filters=FILTERS[str(extra.get("filter", "none"))],
            )
            res = search(conn, corpus, tree, embedder=emb, options=opts)
            conn.commit()
            vecs = term_vectors(res.compiled, emb)
            notes = remote_commands(conn, res.compiled, vecs)
            phases = fanouts(notes)
            sent = [short(n) for n in notes if n.startswith("issuing BEGIN")][:1]
            parts += [
                f"## {title}: `{text}`",
                "",
                f"Settings: `{json.dumps(res.compiled.settings)}`. Remote phases: "
                f"{phases['fanouts']} fan-outs, {phases['broadcasts']} intermediate-result "
                f"broadcasts, {phases['tasks']} tasks, {phases['local']} local executions.",
                "",
                "First command sent to a worker in the transaction:",
                "",
                "```text",
                *(sent or ["(none)"]),
                "```",
                "",
                "```text",
                explain(conn, res.compiled, vecs),
                "```",
                "",
            ]
            print(title, phases, flush=True)
        parts += single_shard_plan(conn, corpus, data)
    plans_md = provenance.stamp("\n".join(parts), provenance.current())
    (RESULTS_DIR / "citus_plans.md").write_text(plans_md.rstrip() + "\n")


def single_shard_plan(conn: Connection, corpus: Corpus, data: Dataset) -> list[str]:
    """The same statement on a copy of the corpus made a single-shard distributed table
    (``create_distributed_table(t, NULL)``, Citus >= 12: a table without a shard key, on one
    node): Citus routes the whole statement to that node as one task."""
    emb = Vectors()
    table = sql.Identifier("pglogic", "citus_single_shard_copy")
    conn.autocommit = True
    try:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigint, external_id text NOT NULL, title text,"
                " metadata jsonb, embedding vector({}))"
            ).format(table, sql.Literal(DIM))
        )
        conn.execute(
            "SELECT create_distributed_table('pglogic.citus_single_shard_copy', NULL,"
            " colocate_with => 'none')"
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {} SELECT id, external_id, title, metadata, embedding FROM {}"
                " WHERE id % 10 = 0"
            ).format(table, corpus.table)
        )
        conn.execute(
            sql.SQL("CREATE INDEX ON {} USING hnsw (embedding vector_cosine_ops)").format(table)
        )
        conn.execute(sql.SQL("CREATE INDEX ON {} (id)").format(table))
        conn.autocommit = False
        text = '("t1" OR "t2") AND NOT "t3"'
        tree = parse(text)
        emb.current = make_queries(data, 1, 3, seed=77)[0]
        res = search(conn, corpus, tree, embedder=emb, options=SearchOptions(k=10))
        conn.commit()
        vecs = term_vectors(res.compiled, emb)
        stmt = res.compiled.text.replace(
            f'"pglogic"."{corpus.table_name}"', '"pglogic"."citus_single_shard_copy"'
        )
        with conn.transaction():
            for st in set_local(with_propagation(conn, res.compiled.settings)):
                conn.execute(st)
            rows = conn.execute(
                "EXPLAIN (ANALYZE, COSTS OFF) " + stmt,
                res.compiled.with_vectors(vecs),  # type: ignore[arg-type]
            ).fetchall()
        conn.commit()
        plan = short("\n".join(str(r[0]) for r in rows))
    finally:
        conn.autocommit = True
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        conn.autocommit = False
    return [
        f"## A single-shard table (no shard key): `{text}`",
        "",
        "A copy of every 10th row made a distributed table without a shard key "
        "(`create_distributed_table(t, NULL)`): the statement goes whole to the one node "
        "that holds it (router execution: one task, no subplan, no intermediate result).",
        "",
        "```text",
        plan,
        "```",
        "",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "action", choices=["load", "measure", "plans", "settings", "report", "planrecall"]
    )
    ap.add_argument("--dsn", default=DEFAULT_DSN, help="the Citus coordinator")
    ap.add_argument("--single-dsn", default=None, help="a single node to compare exact top k")
    ap.add_argument(
        "--single-index",
        action="store_true",
        help="with --single-dsn: also time the HNSW searches there (builds its index)",
    )
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--queries", type=int, default=10)
    args = ap.parse_args()
    if args.action == "load":
        load(args.dsn, args.size, args.shards, args.batch)
    elif args.action == "settings":
        res = settings_experiment(args.dsn, args.size, args.shards, args.queries)
        path = RESULTS_DIR / "citus.json"
        results = json.loads(path.read_text()) if path.exists() else {"runs": {}}
        results = provenance.fresh(results)  # merged with this run: the file names it
        run = results["runs"].setdefault(corpus_name(args.size, args.shards), {})
        run["settings_experiment"] = res
        write_results("citus", results, markdown(results), results_dir=RESULTS_DIR)
    elif args.action == "planrecall":  # add plan recall@10 to a measured run
        path = RESULTS_DIR / "citus.json"
        results = provenance.fresh(json.loads(path.read_text()))
        run = results["runs"][corpus_name(args.size, args.shards)]
        add_plan_recall(args.dsn, args.size, args.shards, run)
        write_results("citus", results, markdown(results), results_dir=RESULTS_DIR)
    elif args.action == "report":  # the Markdown again from bench/perf/results/citus.json
        results = json.loads((RESULTS_DIR / "citus.json").read_text())
        write_results("citus", results, markdown(results), results_dir=RESULTS_DIR)
    elif args.action == "plans":
        plans(args.dsn, args.size, args.shards)
    elif args.action == "measure":
        res = measure(
            args.dsn, args.size, args.shards, args.queries, args.single_dsn, args.single_index
        )
        res["load"] = _state().get(corpus_name(args.size, args.shards))
        res["machine"] = machine(args.dsn)
        results = provenance.fresh(
            json.loads((RESULTS_DIR / "citus.json").read_text())
            if (RESULTS_DIR / "citus.json").exists()
            else {"runs": {}}
        )
        results["runs"].setdefault(corpus_name(args.size, args.shards), {}).update(res)
        results["machine"] = res["machine"]
        write_results("citus", results, markdown(results), results_dir=RESULTS_DIR)


if __name__ == "__main__":
    main()
