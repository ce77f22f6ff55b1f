"""Scale benchmark: latency, recall, throughput and memory of logical queries at 10k-1M vectors.

    .venv/bin/pip install -e '.[bench]'                         # matplotlib + psutil: plots, memory
    .venv/bin/python bench/perf/scale.py --quick                # ~1 min smoke run (10k)
    .venv/bin/python bench/perf/scale.py --sizes 10000,100000 --merge
    .venv/bin/python bench/perf/scale.py --sizes 1000000 --keep --load-only --merge   # ~8 min: load + HNSW
    .venv/bin/python bench/perf/scale.py --sizes 1000000 --reuse --keep --results scale_1m   # ~25 min
    [--sizes 10000,100000,1000000] [--ks 10,100] [--queries 10] [--data manifold] [--merge]

Per corpus size (deterministic synthetic clustered 384-d unit vectors, ``synthetic.make_dataset``;
``--data manifold``, the default: each of 1,000 clusters spreads over its own random
48-dimensional subspace plus a little isotropic noise, which gives the local intrinsic dimension
of real all-MiniLM-L6-v2 embeddings, see ``bench/perf/realism.py``; ``--data isotropic``: the
Gaussian clusters of the first runs, the worst case for HNSW; metadata
``{"c": cluster, "g": i % 100}``), loaded with COPY through
``pglogic.store.ingest.ingest_records`` and indexed with ``build_index(m=16, ef_construction=128,
maintenance_work_mem=4GB)`` (``harness.load``):

* load time, HNSW build time, table and index size, peak memory (sum of PSS) of the Postgres
  processes per phase (load, build, queries, concurrency), sampled every 0.25 s with psutil;
* query mix: 1, 2, 3, 5, 8 terms; AND-only, OR-only, with NOT (the last half of the terms
  negated); k = 10 and 100; no filter, ``g < 10`` (10% of rows), ``g = 0`` (1%);
* per (shape, k, filter): p50/p95/p99 of ``pglogic.store.search.search`` (vectors given), recall@10
  and recall@k against exact evaluation of the same formula (NumPy over all vectors, the
  operators' NumPy face, with the AND texts of ``pglogic.engine.conjunction`` at the default
  ``and_text``: synthetic phrase vectors, ``benchlib.phrase_vectors``), compared in the same
  run, per query and in rotating order, with
  (a) ``floor``: one plain HNSW query per candidate term at the same depth / ef_search
  (``SELECT id ... ORDER BY embedding <=> v LIMIT depth``, its ``SET LOCAL``s pipelined in
  the same round trip, as ``search.execute`` does), summed, and separately the same query
  along the guide vector (``guide``);
  (b) ``client``: the same logical query written client-side with pglogic's candidate plan:
  one HNSW query per scan of the statement (terms and/or the guide vector) fetching ids and
  vectors (binary), NumPy scoring, then the columns of the top k;
  (b') ``naive client`` (unfiltered rows, pgvector >= 0.8): the same without pglogic's plan (no
  guide vector: one HNSW query per positive term), deepened until its recall@10 equals
  pglogic's, timed at that depth (``--no-naive`` skips it);
  (c) ``exact``: ``SearchOptions(exact=True)`` (sequential scan), on the first
  ``--exact-queries`` queries of each shape (k = 10);
* throughput with 1, 2, 4, 8 concurrent clients (threads, one connection each) running a
  mix of 3-term AND / OR / NOT queries for ``--seconds`` each: queries/s, p95, errors;
* the share of query-term embedding (the real all-MiniLM-L6-v2, cold and cached) in
  ``search()`` latency.

``--keep`` leaves the database ``bench_scale_<size>_<data>_<seed>``; ``--reuse`` runs the queries
on it again (the load figures from the previous results); ``--results NAME`` writes
``bench/perf/results/NAME.{json,md}`` and ``NAME_*.png`` (default ``scale``).

``--kinds`` / ``--filters`` pick rows; ``--rows-only NOTE`` (with ``--reuse --merge --keep``)
re-runs only those rows and replaces them in the results file.

Results are written after every size to ``bench/perf/results/scale.{json,md}`` and plots
``bench/perf/results/scale_*.png``. The committed ones: ``scale.{json,md}``, ``scale_latency.png``,
``scale_throughput_memory.png`` (10k, 100k and the first 1M run, operator family ``itlr``);
``scale_1m.{json,md}`` and ``scale_1m_*.png`` (1M with the current plans: the load step above,
then ``--results scale_1m``); ``scale_100k_filters.{json,md}`` (100k, 10% and 1% filters);
``scale_isotropic*`` (the isotropic data); ``scale_pgvector062*`` (PostgreSQL 16 + pgvector
0.6.2, no iterative scans, the over-fetch path): start that server with
``bench/correctness/old_pgvector.py``, then::

    .venv/bin/python bench/perf/scale.py --dsn postgresql://postgres@127.0.0.1:5499/postgres \\
        --sizes 100000 --results scale_pgvector062 ...
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
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
    truth_vectors,
    write_results,
)
from bench.lib.harness import (
    FILTER_MASK,
    FILTERS,
    MemorySampler,
    Vectors,
    exact_top,
    index_plan,
    kept_database,
    load,
    postmaster_pid,
    recall,
    set_local,
    shapes,
)
from bench.lib.synthetic import DIM, Dataset, make_dataset, make_queries
from pglogic.engine.compile import GUIDE_DEPTH, SearchOptions
from pglogic.engine.compile import set_local as set_local_statements
from pglogic.engine.conjunction import with_and_texts
from pglogic.engine.filters import filters_sql
from pglogic.engine.guide import guide_vector
from pglogic.engine.operators import evaluate_numpy
from pglogic.engine.source import Corpus
from pglogic.query import Node, parse, positive_terms
from pglogic.store.corpus import get_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.search import search, server_has_iterative_scan

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def scored_tree(tree: Node, opts: SearchOptions) -> Node:
    """The tree the engine scores for ``opts``: with the AND texts (fuzzy mode)."""
    return with_and_texts(tree, opts.and_text if opts.mode == "fuzzy" else 0)


def floor_run(
    conn: Connection, corpus: Corpus, tree: Node, opts: SearchOptions, vecs: dict[str, np.ndarray]
) -> Callable[[], tuple[float, float]]:
    """(a): one plain HNSW query per candidate term at the library's depth and settings.

    Returns the time of the term queries and, separately, of the same query along the guide
    vector (the extra scan pglogic makes; 0 when the query has none). The term queries take the
    depth and settings of the plan's own term scans (for an OR of terms under max: k rows at a
    single-term query's ef_search, i.e. n single-term queries), or of the plan with a scan per
    term (``term_scans=True``) when the default plan scans the guide alone: the floor is what n
    single-term queries cost.
    """
    compiled = index_plan(conn, corpus, tree, opts)
    per_term = (
        compiled
        if compiled.candidate_terms
        else index_plan(conn, corpus, tree, replace(opts, term_scans=True))
    )
    depth = per_term.params.get("depth", opts.k)
    where, fparams = filters_sql(opts.filters, sql.SQL("d.metadata"), prefix="f")
    stmt = sql.SQL(
        "SELECT id FROM {t} d WHERE {w} ORDER BY embedding <=> %(v)s::vector({dim}) LIMIT %(n)s"
    ).format(t=corpus.table, w=where, dim=sql.Literal(DIM))
    scans = [(vecs[t], depth, per_term.settings) for t in per_term.candidate_terms]
    if compiled.guide_param:
        scans.append((compiled.guide_vector(vecs), compiled.params[GUIDE_DEPTH], compiled.settings))

    def run() -> tuple[float, float]:
        times = []
        for vec, n, settings in scans:  # as tight as search.execute: one round trip each
            t0 = time.perf_counter()
            with conn.pipeline(), conn.transaction():
                set_local(conn, settings)
                conn.execute(stmt, {**fparams, "v": vec, "n": n}).fetchall()
            times.append(time.perf_counter() - t0)
        n_terms = len(per_term.candidate_terms)
        return sum(times[:n_terms]), sum(times[n_terms:])

    return run


#: (b') the client without the guide: depths tried per term, as multiples of the per-term
#: plan's depth (and k itself), until its recall@10 is pglogic's (within NAIVE_TOLERANCE).
NAIVE_STEPS = (1, 2, 4, 8, 16)
NAIVE_MAX_DEPTH = 8000
NAIVE_TOLERANCE = 0.01


def naive_settings(opts: SearchOptions, depth: int) -> dict[str, str]:
    """Session settings a user would need for ``depth`` rows per HNSW query: ef_search up to
    its maximum, iterative scans beyond it or under a filter, with room to scan for them."""
    out = {"hnsw.ef_search": str(min(1000, max(40, depth)))}
    if opts.filters or depth > 1000:
        out["hnsw.iterative_scan"] = "relaxed_order"
        out["hnsw.max_scan_tuples"] = str(max(20000, 200 * depth))
    return out


def client_run(
    conn: Connection,
    corpus: Corpus,
    tree: Node,
    opts: SearchOptions,
    vecs: dict[str, np.ndarray],
    naive_depth: int | None = None,
) -> Callable[[], tuple[float, list[int]]]:
    """(b): per candidate scan (terms and, as pglogic, the guide vector: the same candidates, so
    the same recall) an HNSW query for ids + vectors; NumPy scoring; top-k columns.

    With ``naive_depth`` (b'): what a user writes without pglogic: one HNSW query per positive
    term, ``naive_depth`` rows each (:func:`naive_settings`), no guide."""
    compiled = index_plan(conn, corpus, tree, opts)
    depth = compiled.params.get("depth", opts.k)
    cand_terms = compiled.candidate_terms
    use_guide = compiled.guide_param is not None
    plan_settings = compiled.settings
    if naive_depth is not None:
        depth, cand_terms, use_guide = naive_depth, positive_terms(tree), False
        plan_settings = naive_settings(opts, naive_depth)
    where, fparams = filters_sql(opts.filters, sql.SQL("d.metadata"), prefix="f")
    stmt = sql.SQL(
        "SELECT id, embedding FROM {t} d WHERE {w} ORDER BY embedding <=> %(v)s::vector({dim})"
        " LIMIT %(n)s"
    ).format(t=corpus.table, w=where, dim=sql.Literal(DIM))
    cols = sql.SQL(
        "SELECT id, external_id, title, metadata FROM {t} WHERE id = ANY(%(ids)s)"
    ).format(t=corpus.table)
    family = compiled.family  # score client-side with the family the statement uses
    names = compiled.terms  # the terms, then the AND texts
    vecs = truth_vectors(tree, vecs)  # the negated terms against their context, as the engine
    scored = scored_tree(tree, opts)
    qmat = np.stack([vecs[t] for t in names]).astype(np.float32)

    settings = sql.SQL("; ").join(set_local_statements(plan_settings))

    def run() -> tuple[float, list[int]]:
        t0 = time.perf_counter()
        scans = [(vecs[t], depth) for t in cand_terms]
        if use_guide:
            scans.append((guide_vector(tree, vecs), compiled.params[GUIDE_DEPTH]))
        ids: list[int] = []
        embs: list[Any] = []  # pgvector.Vector (binary)
        with conn.transaction():
            if plan_settings:
                conn.execute(settings)  # one round trip, as search.execute
            cur = conn.cursor(binary=True)
            for vec, n in scans:
                for i, e in cur.execute(stmt, {**fparams, "v": vec, "n": n}):
                    ids.append(i)
                    embs.append(e)
        uniq, first = np.unique(np.asarray(ids), return_index=True)
        if len(uniq) == 0:
            return time.perf_counter() - t0, []
        m = np.stack([embs[j].to_numpy() for j in first]).astype(np.float32)
        sims = (m @ qmat.T) / np.linalg.norm(m, axis=1, keepdims=True)
        scores = evaluate_numpy(scored, {t: sims[:, i] for i, t in enumerate(names)}, family)
        order = np.lexsort((uniq, -scores))[: opts.k]
        top = [int(uniq[j]) for j in order]
        conn.execute(cols, {"ids": top}).fetchall()
        conn.rollback()
        return time.perf_counter() - t0, top

    return run


def naive_client(
    conn: Connection,
    corpus: Corpus,
    tree: Node,
    opts: SearchOptions,
    queries: list[dict[str, np.ndarray]],
    truths: list[list[int]],
    target: float,
    pglogic_p50_ms: float,
) -> dict[str, Any]:
    """(b') at equal recall: the shallowest depth of :data:`NAIVE_STEPS` at which the client
    without the guide reaches pglogic's recall@10 (within NAIVE_TOLERANCE), its latency there,
    and every depth tried (depth, recall@10, p50 ms)."""
    base = index_plan(conn, corpus, tree, replace(opts, term_scans=True)).params.get(
        "depth", opts.k
    )
    depths = sorted({opts.k, *(min(NAIVE_MAX_DEPTH, base * m) for m in NAIVE_STEPS)})
    ladder: list[list[float]] = []
    for depth in depths:
        client_run(conn, corpus, tree, opts, queries[0], depth)()  # warm-up
        secs, recs = [], []
        for vecs, truth in zip(queries, truths, strict=True):
            t, top = client_run(conn, corpus, tree, opts, vecs, depth)()
            secs.append(t)
            recs.append(recall(top, truth, 10))
        rec, p50 = float(np.mean(recs)), percentile(secs, 50) * 1000
        ladder.append([depth, round(rec, 3), round(p50, 2)])
        if rec >= target - NAIVE_TOLERANCE:
            break
    depth, rec, p50 = ladder[-1]
    reached = rec >= target - NAIVE_TOLERANCE
    print(f"           naive client: depth {depth:.0f} recall {rec:.3f} p50 {p50:.1f} ms"
          f"{'' if reached else ' (recall not reached)'}", flush=True)  # fmt: skip
    return {
        "naive_client": {
            "depth": int(depth), "recall@10": rec, "p50_ms": p50, "reached": reached,
            "speedup_p50": round(p50 / pglogic_p50_ms, 2), "ladder": ladder,
        }
    }  # fmt: skip


def ms(xs: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(xs, 50) * 1000, 2),
        "p95": round(percentile(xs, 95) * 1000, 2),
        "p99": round(percentile(xs, 99) * 1000, 2),
    }


def run_matrix(
    conn: Connection,
    corpus: Corpus,
    data: Dataset,
    shape_texts: dict[str, str],
    ks: Sequence[int],
    n_queries: int,
    exact_queries: int,
    seed: int,
    filters: Sequence[str] = tuple(FILTERS),
    naive: bool = True,
) -> list[dict[str, Any]]:
    emb = Vectors()
    g = np.arange(len(data.vectors)) % 100
    masks = {name: f(g) for name, f in FILTER_MASK.items()}
    rows: list[dict[str, Any]] = []
    for si, (shape, text) in enumerate(shape_texts.items()):
        tree = parse(text)
        n_terms = len({t for t in text.split('"')[1::2]})
        queries = make_queries(data, n_queries, n_terms, seed + 100 * si)
        truths: dict[tuple[int, str], list[list[int]]] = {}
        for vecs in queries:
            for fname, mask in masks.items():
                t = exact_top(tree, data, vecs, mask, max(ks))
                for k in ks:
                    truths.setdefault((k, fname), []).append(t[:k])
        for k in ks:
            for fname in filters:
                opts = SearchOptions(k=k, filters=FILTERS[fname])
                lat: dict[str, list[float]] = {"pglogic": [], "floor": [], "client": [],
                                               "guide_scan": []}  # fmt: skip
                rec10: list[float] = []
                reck: list[float] = []
                client_rec: list[float] = []
                returned: list[int] = []
                # warm-up: the first query's methods once
                emb.current = queries[0]
                search(conn, corpus, tree, embedder=emb, options=opts)
                for qi, vecs in enumerate(queries):
                    emb.current = vecs
                    truth = truths[(k, fname)][qi]
                    floor = floor_run(conn, corpus, tree, opts, vecs)
                    client = client_run(conn, corpus, tree, opts, vecs)
                    order = ["pglogic", "floor", "client"]
                    order = order[qi % 3 :] + order[: qi % 3]
                    for method in order:
                        if method == "pglogic":
                            t0 = time.perf_counter()
                            res = search(conn, corpus, tree, embedder=emb, options=opts)
                            lat["pglogic"].append(time.perf_counter() - t0)
                            got = [h.row_id for h in res.hits]
                            returned.append(len(got))
                            rec10.append(recall(got, truth, 10))
                            reck.append(recall(got, truth, k))
                        elif method == "floor":
                            terms_s, guide_s = floor()
                            lat["floor"].append(terms_s)
                            lat["guide_scan"].append(guide_s)
                        else:
                            secs, top = client()
                            lat["client"].append(secs)
                            client_rec.append(recall(top, truth, 10))
                ratio = [p / f for p, f in zip(lat["pglogic"], lat["floor"], strict=True)]
                ratio_g = [p / (f + g) for p, f, g in
                           zip(lat["pglogic"], lat["floor"], lat["guide_scan"], strict=True)]  # fmt: skip
                row: dict[str, Any] = {
                    "shape": shape,
                    "terms": n_terms,
                    "candidate_terms": len(positive_terms(tree)),
                    "k": k,
                    "filter": fname,
                    "pglogic_ms": ms(lat["pglogic"]),
                    "floor_ms": ms(lat["floor"]),
                    "guide_scan_ms_p50": round(percentile(lat["guide_scan"], 50) * 1000, 2),
                    "client_ms": ms(lat["client"]),
                    "ratio_vs_floor_p50": round(float(np.median(ratio)), 2),
                    "ratio_vs_floor_and_guide_p50": round(float(np.median(ratio_g)), 2),
                    "speedup_vs_client_p50": round(
                        percentile(lat["client"], 50) / percentile(lat["pglogic"], 50), 2
                    ),
                    "recall@10": round(float(np.mean(rec10)), 3),
                    f"recall@{k}": round(float(np.mean(reck)), 3),
                    "client_recall@10": round(float(np.mean(client_rec)), 3),
                    "min_rows_returned": min(returned),
                    "rows_expected": min(len(t) for t in truths[(k, fname)]),
                }
                if k == min(ks) and exact_queries:
                    ex: list[float] = []
                    eopts = SearchOptions(k=k, filters=FILTERS[fname], exact=True)
                    for vecs in queries[:exact_queries]:
                        emb.current = vecs
                        t0 = time.perf_counter()
                        search(conn, corpus, tree, embedder=emb, options=eopts)
                        ex.append(time.perf_counter() - t0)
                    row["exact_ms_p50"] = round(percentile(ex, 50) * 1000, 1)
                    row["speedup_vs_exact_p50"] = round(
                        percentile(ex, 50) / percentile(lat["pglogic"], 50), 1
                    )
                rows.append(row)
                print(
                    f"  {shape:7} k={k:<3} {fname:4} pglogic p50 {row['pglogic_ms']['p50']:7.2f}"
                    f" ms  floor {row['floor_ms']['p50']:7.2f}  client {row['client_ms']['p50']:7.2f}"
                    f"  ratio {row['ratio_vs_floor_p50']:.2f}  recall@10 {row['recall@10']:.3f}"
                    + (f"  exact {row['exact_ms_p50']} ms" if "exact_ms_p50" in row else ""),
                    flush=True,
                )
                if naive and n_terms > 1 and fname == "none":  # unfiltered rows only
                    row.update(naive_client(conn, corpus, tree, opts, queries,
                                            truths[(k, fname)], row["recall@10"],
                                            row["pglogic_ms"]["p50"]))  # fmt: skip
    return rows


def throughput(
    dsn: str, corpus: Corpus, data: Dataset, clients: Sequence[int], seconds: float, seed: int
) -> list[dict[str, Any]]:
    mix = [parse('"t1" AND "t2" AND "t3"'), parse('"t1" OR "t2" OR "t3"'),
           parse('"t1" AND "t2" AND NOT "t3"')]  # fmt: skip
    queries = make_queries(data, 200, 3, seed + 7)
    out = []
    for n in clients:
        lats: list[list[float]] = [[] for _ in range(n)]
        errors = [0] * n
        stop = time.perf_counter() + seconds

        def worker(
            w: int,
            n: int = n,
            stop: float = stop,
            lats: list[list[float]] = lats,
            errors: list[int] = errors,
        ) -> None:
            emb = Vectors()
            with connect(dsn) as conn:
                conn.autocommit = True
                i = w
                while time.perf_counter() < stop:
                    emb.current = queries[i % len(queries)]
                    t0 = time.perf_counter()
                    try:
                        search(conn, corpus, mix[i % 3], embedder=emb)
                        lats[w].append(time.perf_counter() - t0)
                    except Exception:
                        errors[w] += 1
                    i += n

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(n)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        all_lat = [x for xs in lats for x in xs]
        out.append({
            "clients": n, "queries": len(all_lat), "qps": round(len(all_lat) / wall, 1),
            **{f"{k}_ms": v for k, v in ms(all_lat).items()}, "errors": sum(errors),
        })  # fmt: skip
        print(f"  {n} clients: {out[-1]['qps']} q/s, p95 {out[-1]['p95_ms']} ms", flush=True)
    return out


PHRASES = [
    "oil prices",
    "natural gas",
    "crude output",
    "opec quota",
    "refinery strike",
    "grain exports",
    "wheat harvest",
    "corn futures",
    "soybean crop",
    "rice tariffs",
    "interest rates",
    "bond yields",
    "currency reserves",
    "trade deficit",
    "stock split",
]


def embedding_share(conn: Connection, corpus: Corpus) -> list[dict[str, Any]]:
    """Term embedding (all-MiniLM-L6-v2, batched, LRU-cached) vs database time of ``search``.

    Per number of terms: 10 AND queries of distinct phrases; "cold" = first time (one batched
    model call for the query's terms), "warm" = the same queries again (cache hits).
    """
    from pglogic.embed.registry import CachedEmbedder, get_embedder

    cached = CachedEmbedder(get_embedder("all-MiniLM-L6-v2", "query"), size=4096)
    cached.embed(["warm-up of the model"])
    out = []
    for n in (1, 3, 5):
        texts = []
        for i in range(10):
            words = [PHRASES[(i * 7 + j * 3) % len(PHRASES)] + f" {i}" for j in range(n)]
            texts.append(" AND ".join(f'"{w}"' for w in dict.fromkeys(words)))
        for phase in ("cold", "warm"):
            emb_s, db_s, total_s = [], [], []
            for q in texts:
                t0 = time.perf_counter()
                res = search(conn, corpus, q, embedder=cached)
                total_s.append(time.perf_counter() - t0)
                emb_s.append(res.timings["embed"])
                db_s.append(res.timings["database"])
            share = sum(emb_s) / sum(total_s)
            out.append({"terms": n, "cache": phase, "embed_ms_p50": round(percentile(emb_s, 50) * 1e3, 2),
                        "database_ms_p50": round(percentile(db_s, 50) * 1e3, 2),
                        "total_ms_p50": round(percentile(total_s, 50) * 1e3, 2),
                        "embed_share": round(share, 3)})  # fmt: skip
            print(f"  embedding {n} terms {phase}: {out[-1]}", flush=True)
    return out


def plots(results: dict[str, Any], name: str = "scale") -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    sizes = sorted(int(s) for s in results["sizes"])
    if not sizes:
        return files
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for kind, style in (("AND", "-o"), ("OR", "-s"), ("NOT", "-^")):
        for n in (2, 3, 5, 8):
            ys = []
            for s in sizes:
                row = next((r for r in results["sizes"][str(s)]["queries"]
                            if r["shape"] == f"{kind} {n}" and r["k"] == 10
                            and r["filter"] == "none"), None)  # fmt: skip
                ys.append(row["pglogic_ms"]["p50"] if row else np.nan)
            if kind == "AND" or n in (3, 8):
                axes[0].plot(sizes, ys, style, label=f"{kind} {n}")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("corpus size (vectors)")
    axes[0].set_ylabel("p50 latency (ms), k=10, no filter")
    axes[0].set_title("Growth with corpus size")
    axes[0].legend(fontsize=7)
    big = results["sizes"][str(sizes[-1])]["queries"]
    for kind, style in (("AND", "-o"), ("OR", "-s"), ("NOT", "-^")):
        pts = sorted((r["terms"], r) for r in big
                     if r["k"] == 10 and r["filter"] == "none"
                     and (r["shape"].startswith(kind) or r["terms"] == 1))  # fmt: skip
        xs = [p[0] for p in pts]
        axes[1].plot(xs, [p[1]["pglogic_ms"]["p50"] for p in pts], style, label=f"pglogic {kind}")
        if kind == "AND":
            axes[1].plot(xs, [p[1]["floor_ms"]["p50"] for p in pts], "k--", label="floor (a) AND")
            axes[1].plot(xs, [p[1]["client_ms"]["p50"] for p in pts], "r:", label="client (b) AND")
    axes[1].set_xlabel("number of terms")
    axes[1].set_ylabel("p50 latency (ms)")
    axes[1].set_title(f"Growth with terms at {sizes[-1]:,} vectors (k=10)")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    path = RESULTS_DIR / f"{name}_latency.png"
    fig.savefig(path, dpi=110)
    files.append(path.name)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for s in sizes:
        tp = results["sizes"][str(s)].get("throughput") or []
        if tp:
            axes[0].plot([t["clients"] for t in tp], [t["qps"] for t in tp], "-o", label=f"{s:,}")
    axes[0].set_xlabel("concurrent clients")
    axes[0].set_ylabel("queries / s (3-term mix)")
    axes[0].set_title("Throughput")
    axes[0].legend(fontsize=8)
    phases = ["load", "hnsw build", "queries", "concurrency"]
    for ph in phases:
        axes[1].plot(sizes, [results["sizes"][str(s)]["memory_peak_mib"].get(ph, np.nan)
                             for s in sizes], "-o", label=ph)  # fmt: skip
    axes[1].set_xscale("log")
    axes[1].set_xlabel("corpus size (vectors)")
    axes[1].set_ylabel("peak PSS of Postgres processes (MiB)")
    axes[1].set_title("Memory")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path = RESULTS_DIR / f"{name}_throughput_memory.png"
    fig.savefig(path, dpi=110)
    files.append(path.name)
    plt.close(fig)
    return files


def fill_derived(results: dict[str, Any]) -> None:
    """Add the goal's ratio: pglogic / the sum of n single-term queries (n = all terms).

    The floor is timed for the candidate (positive) terms only; a negated term's single-term
    query costs the same, so the sum over n terms is floor * n / candidate_terms.
    """
    for r in results["sizes"].values():
        for q in r["queries"]:
            q.setdefault(
                "ratio_vs_n_terms_p50",
                round(q["ratio_vs_floor_p50"] * q["candidate_terms"] / q["terms"], 2),
            )


def save(results: dict[str, Any], name: str) -> None:
    """Derived ratios, plots, ``bench/perf/results/<name>.{json,md}``."""
    fill_derived(results)
    results["plots"] = plots(results, name)
    write_results(name, results, markdown(results), results_dir=RESULTS_DIR)


def merge_rows(size_results: dict[str, Any], rows: list[dict[str, Any]], note: str) -> None:
    """Replace the rows of the same (shape, k, filter) in ``size_results`` (``--rows-only``);
    other rows keep their place, new ones are appended."""
    key = ("shape", "k", "filter")
    fresh = {tuple(r[f] for f in key): {**r, "rerun": note} for r in rows}
    queries = size_results.setdefault("queries", [])
    for i, old in enumerate(queries):
        queries[i] = fresh.pop(tuple(old[f] for f in key), old)
    queries.extend(fresh.values())


def markdown(results: dict[str, Any]) -> str:
    parts = ["# Scale benchmark (`bench/perf/scale.py`)", "", machine_md(results["machine"]), ""]
    for s, r in sorted(results["sizes"].items(), key=lambda kv: int(kv[0])):
        parts += [f"## {int(s):,} vectors", ""]
        kind = r["load"].get("data", "isotropic")
        parts += [f"Data: `{kind}` clusters (`synthetic.make_dataset`; geometry vs real embeddings in "
                  "`realism.md`).", ""]  # fmt: skip
        parts.append(md_table(["load s", "rows/s", "HNSW build s", "HNSW", "table MiB",
                               "index MiB", "peak PSS MiB by phase"],
                              [[r["load"]["load_s"], r["load"]["load_rows_per_s"],
                                r["load"]["hnsw_build_s"], r["load"]["hnsw"],
                                r["load"]["table_mib"], r["load"]["index_mib"],
                                ", ".join(f"{k} {v:.0f}" for k, v in
                                          r["memory_peak_mib"].items())]]))  # fmt: skip
        parts += [
            "",
            "Latency p50 / p95 / p99 in ms. floor = the sum of one plain HNSW query per "
            "candidate (positive) term at the depth a scan per term takes; guide = the same "
            "query along the guide vector (pglogic's one extra scan for 2+ terms, or its only "
            "scan for a query without a positive OR); ratio = pglogic / "
            "floor; ratio n = pglogic / the sum of n single-term queries (n = all terms, the "
            "goal's definition); ratio +g = pglogic / (floor + guide), i.e. per index scan "
            "made; client = the same candidate scans (terms + guide) done client-side; "
            "exact = seq scan (k = 10 only).",
            "",
        ]
        rows = []
        notes = list(dict.fromkeys(q["rerun"] for q in r["queries"] if "rerun" in q))
        for q in r["queries"]:
            p = q["pglogic_ms"]
            mark = f" (rerun {notes.index(q['rerun']) + 1})" if "rerun" in q else ""
            rows.append([q["shape"] + mark, q["k"], q["filter"],
                         f"{p['p50']} / {p['p95']} / {p['p99']}", q["floor_ms"]["p50"],
                         q.get("guide_scan_ms_p50", ""),
                         q["ratio_vs_floor_p50"], q["ratio_vs_n_terms_p50"],
                         q.get("ratio_vs_floor_and_guide_p50", ""),
                         q["client_ms"]["p50"],
                         q["speedup_vs_client_p50"], q.get("exact_ms_p50", ""),
                         q.get("speedup_vs_exact_p50", ""), q["recall@10"],
                         q.get(f"recall@{q['k']}", ""), q["client_recall@10"],
                         f"{q['min_rows_returned']}/{q['rows_expected']}"])  # fmt: skip
        parts.append(md_table(["shape", "k", "filter", "pglogic p50/p95/p99", "floor p50",
                               "guide p50", "ratio", "ratio n", "ratio +g", "client p50",
                               "× client", "exact p50", "× exact",
                               "recall@10", "recall@k", "client recall@10", "rows"], rows))  # fmt: skip
        for i, note in enumerate(notes):  # rows of a --rows-only run, on the machine above
            parts += ["", f"Rerun {i + 1} (`--rows-only`): {note}."]
        naive = [q for q in r["queries"] if "naive_client" in q]
        if naive:
            parts += [
                "",
                "(b') The client without pglogic's plan (unfiltered rows): one HNSW query per "
                "positive term (ids + vectors), NumPy scoring, no guide, deepened (k, then 1, 2, 4, 8, 16 × "
                f"the per-term depth, at most {NAIVE_MAX_DEPTH}) until its recall@10 is "
                f"pglogic's within {NAIVE_TOLERANCE}; ladder = depth: recall@10 (p50 ms) of "
                "every depth tried.",
                "",
            ]
            body = []
            for q in naive:
                nc = q["naive_client"]
                body.append([q["shape"], q["k"], q["filter"], q["pglogic_ms"]["p50"],
                             q["recall@10"], nc["depth"], nc["recall@10"],
                             nc["p50_ms"], nc["speedup_p50"] if nc["reached"]
                             else f"({nc['speedup_p50']}, recall not reached)",
                             "; ".join(f"{d:.0f}: {rc} ({t})" for d, rc, t in nc["ladder"])])  # fmt: skip
            parts.append(md_table(["shape", "k", "filter", "pglogic p50", "pglogic recall@10",
                                   "client depth", "client recall@10", "client p50",
                                   "× client at equal recall", "ladder"], body))  # fmt: skip
        if r.get("embedding"):
            parts += [
                "",
                "Query-term embedding (all-MiniLM-L6-v2, batched, LRU cache) vs "
                "database time of `search()`, AND queries, p50 ms:",
                "",
            ]
            parts.append(md_table(["terms", "cache", "embed", "database", "total", "embed share"],
                                  [[e["terms"], e["cache"], e["embed_ms_p50"],
                                    e["database_ms_p50"], e["total_ms_p50"],
                                    f"{100 * e['embed_share']:.0f}%"] for e in r["embedding"]]))  # fmt: skip
        if r.get("throughput"):
            parts += ["", "Throughput (3-term AND / OR / NOT mix):", ""]
            parts.append(md_table(["clients", "queries", "q/s", "p50 ms", "p95 ms", "p99 ms",
                                   "errors"],
                                  [[t["clients"], t["queries"], t["qps"], t["p50_ms"],
                                    t["p95_ms"], t["p99_ms"], t["errors"]]
                                   for t in r["throughput"]]))  # fmt: skip
        parts.append("")
    for f in results.get("plots", []):
        parts.append(f"![{f}]({f})")
    return "\n".join(parts) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--terms", default="1,2,3,5,8")
    ap.add_argument("--ks", default="10,100")
    ap.add_argument("--queries", type=int, default=10, help="queries per (shape, k, filter)")
    ap.add_argument("--exact-queries", type=int, default=2)
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--home", default=str(DEFAULT_HOME))
    ap.add_argument("--dsn", default=None)
    ap.add_argument(
        "--no-embedding",
        dest="embedding",
        action="store_false",
        help="skip the embedding-share measurement (real model)",
    )
    ap.add_argument("--merge", action="store_true", help="keep other sizes in <results>.json")
    ap.add_argument(
        "--results",
        default="scale",
        help="name of the result files (bench/perf/results/<name>.{json,md}, plots <name>_*.png)",
    )
    ap.add_argument(
        "--data",
        default="manifold",
        choices=["manifold", "isotropic"],
        help="synthetic data: clusters on low-dimensional subspaces like real embeddings "
        "(default) or isotropic Gaussian clusters (worst case for HNSW); see bench/perf/realism.py",
    )
    ap.add_argument(
        "--keep", action="store_true", help="keep the database bench_scale_<size> for --reuse"
    )
    ap.add_argument(
        "--load-only", action="store_true", help="with --keep: load and index, no queries"
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="reuse a database kept by --keep (same size, data and seed): no load, no build",
    )
    ap.add_argument("--quick", action="store_true", help="10k vectors, 4 queries, 2 s per level")
    ap.add_argument("--kinds", default="1,AND,OR,NOT", help="shapes to run: 1 (term), AND, OR, NOT")
    ap.add_argument("--filters", default=",".join(FILTERS), help="filters to run: none,10%%,1%%")
    ap.add_argument(
        "--no-naive",
        dest="naive",
        action="store_false",
        help="skip (b'), the client without the guide at equal recall (needs pgvector >= 0.8)",
    )
    ap.add_argument(
        "--rows-only",
        metavar="NOTE",
        help="with --reuse --merge: run only the selected rows and replace them in <results>.json "
        "(marked with NOTE); load, memory, throughput and the other rows are kept",
    )
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.queries, args.seconds = "10000", 4, 2.0
        if args.results == "scale":  # a smoke run never replaces the committed results
            args.results = "scale_quick"
    from pathlib import Path

    base = server_dsn(Path(args.home), args.dsn)
    results: dict[str, Any] = {"machine": machine(base), "sizes": {}, "args": {}}
    previous = RESULTS_DIR / f"{args.results}.json"
    if args.merge and previous.exists():  # keep the other sizes of an earlier run
        results["sizes"] = json.loads(previous.read_text())["sizes"]
        results["args"] = json.loads(previous.read_text()).get("args", {})
    results["args"].update({str(s): vars(args) for s in args.sizes.split(",")})
    kinds = args.kinds.split(",")
    shape_texts = {name: text for name, text in shapes([int(x) for x in args.terms.split(",")]).items()
                   if name.split()[0] in kinds}  # fmt: skip
    filter_names = [f for f in args.filters.split(",") if f]
    if unknown := set(filter_names) - set(FILTERS):
        ap.error(f"unknown filters {sorted(unknown)}: choose from {', '.join(FILTERS)}")
    if args.rows_only and not (args.reuse and args.merge):
        ap.error("--rows-only needs --reuse and --merge")
    ks = [int(x) for x in args.ks.split(",")]
    for size in [int(x) for x in args.sizes.split(",")]:
        print(f"== {size:,} vectors", flush=True)
        db_name, kept_dsn = kept_database(base, size, args.data, args.seed)
        before = json.loads(previous.read_text()) if previous.exists() else {"sizes": {}}
        kept_size = before["sizes"].get(str(size), {})
        kept = kept_size.get("load") if kept_size.get("load", {}).get("data") == args.data else None
        if args.reuse and kept and kept_dsn:
            dsn = kept_dsn
        else:
            dsn = fresh_database(base, db_name)
            kept = None
        try:
            with connect(dsn) as conn:
                mem = MemorySampler(postmaster_pid(conn))
                data = make_dataset(size, args.seed, kind=args.data)
                if kept:
                    corpus, loaded = get_corpus(conn, "scale"), kept
                    conn.commit()
                    mem.peaks.update({ph: v for ph, v in kept_size["memory_peak_mib"].items()
                                      if ph in ("load", "hnsw build")})  # fmt: skip
                else:
                    corpus, loaded = load(conn, data, mem)
                loaded["data"] = args.data
                conn.autocommit = True
                print(f"  loaded {loaded}", flush=True)
                if args.load_only:
                    mem.stop()
                    results["sizes"][str(size)] = {
                        "load": loaded, "queries": [], "throughput": [], "embedding": [],
                        "memory_peak_mib": {k: round(v) for k, v in mem.peaks.items()
                                            if k != "idle"},
                    }  # fmt: skip
                    write_results(args.results, results, "", results_dir=RESULTS_DIR)
                    continue
                mem.phase = "queries"
                naive = args.naive and server_has_iterative_scan(conn)
                rows = run_matrix(conn, corpus, data, shape_texts, ks, args.queries,
                                  args.exact_queries, args.seed, filter_names, naive)  # fmt: skip
                if args.rows_only:
                    mem.stop()
                    merge_rows(kept_size, rows, args.rows_only)
                    results["sizes"][str(size)] = kept_size
                    save(results, args.results)
                    continue
                share = embedding_share(conn, corpus) if args.embedding else []
                mem.phase = "concurrency"
                tp = throughput(dsn, corpus, data, [int(c) for c in args.clients.split(",")],
                                args.seconds, args.seed)  # fmt: skip
                mem.stop()
            results["sizes"][str(size)] = {
                "load": loaded, "queries": rows, "throughput": tp, "embedding": share,
                "memory_peak_mib": {k: round(v) for k, v in mem.peaks.items() if k != "idle"},
            }  # fmt: skip
        finally:
            if not args.keep:
                drop_database(base, db_name)
        save(results, args.results)


if __name__ == "__main__":
    main()
