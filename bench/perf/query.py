"""Query benchmark: latency and recall of compiled logical queries vs plain HNSW queries.

    .venv/bin/python bench/perf/query.py             # ~20 min: 100k rows, 200 queries per shape
    .venv/bin/python bench/perf/query.py --quick     # ~2 min smoke run (10k rows, 30 queries)
    .venv/bin/python bench/perf/query.py [--rows 100000] [--queries 200] [--no-diagnostics]

Data (deterministic, ``--seed``): 100 random topic directions in 384-d, 10 cluster centres per
topic (centre = topic + noise, so sibling centres have cosine ~0.5) = 1,000 centres; each document
vector = its centre + noise, normalised (cosine ~0.78 to its centre). Document texts and metadata
are Reuters-21578 stories cycled (``--text reuters``, so rows have a realistic width; ``short``
gives tiny rows). Loaded with ``pglogic.store.ingest.ingest_records``; HNSW index via
``pglogic.store.corpus.build_index`` (m=16, ef_construction=64).

A query of n terms picks one topic and n distinct centres in it; each term vector = its centre +
small noise (cosine ~0.96). Shapes: 1 term; AND-only, OR-only and with NOT, for 2, 3 and 5 terms
(``"t1" AND "t2" AND NOT "t3"``...), and ``("t1" OR "t2") AND NOT "t3"``. Each query is compiled
with ``compile_query(tree, corpus, SearchOptions(k=10))`` and run with
``pglogic.store.search.execute`` (client wall time, its own transaction with its ``SET LOCAL``s):
p50 / p95 over ``--queries`` (200) queries per shape after 20 warm-ups.

Per query we also time n single-term HNSW queries at the same depth and ``hnsw.ef_search``
(``SELECT id FROM t ORDER BY embedding <=> v LIMIT depth``, each in its own transaction with
``set_config(..., true)``) and report compiled / sum (goal <= 1.3), and recall@10 of the
compiled query against ``exact=True`` evaluation of the same formula (goal >= 0.95). The AND
texts the engine scores (``pglogic.engine.conjunction``) get synthetic vectors: the normalised
mean of their terms' (``benchlib.phrase_vectors``).

Diagnostics (skip with ``--no-diagnostics``): EXPLAIN (ANALYZE, BUFFERS, VERBOSE) of compiled
statements; which plan a candidate CTE gets as the depth grows; a depth sweep (recall vs
latency); statement variants: ``sims AS MATERIALIZED`` (each similarity computed once; if the
library lacks it), ``late`` (fetch the top k's columns last), ``nojoin`` (similarities on the
CTE rows), on the table ``create_corpus`` makes and on the same data with the embedding column
stored the other way (``STORAGE MAIN`` vs pgvector's default ``EXTERNAL``). Variants and the
baseline run back to back per query in a rotating order: a fixed order favours whatever runs
second, by ~20%, because the same HNSW neighbourhoods are then warm in the CPU caches.

Results: ``bench/perf/results/query.json`` and ``bench/perf/results/query.md``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    REUTERS,
    drop_database,
    fresh_database,
    machine,
    machine_md,
    md_table,
    phrase_vectors,
    server_dsn,
    summary_ms,
    wait_idle,
    write_results,
)
from bench.lib.synthetic import DIM, Dataset, make_dataset, make_queries
from pglogic.engine.compile import CompiledQuery, SearchOptions, compile_query
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, with_and_texts
from pglogic.engine.operators import to_sql
from pglogic.engine.plans import default_depth
from pglogic.engine.source import Corpus
from pglogic.query import Node, parse, terms
from pglogic.store.corpus import build_index, corpus_info, create_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import execute, server_has_iterative_scan

RESULTS_DIR = Path(__file__).resolve().parent / "results"

DB_NAME = "bench_query"
GOAL_RATIO = 1.3
GOAL_RECALL = 0.95
K = 10
_VECTOR_LITERAL = re.compile(r"'\[[^\]]*\]'::vector")

#: shape name -> query text (terms are bound to vectors by name)
SHAPES: dict[str, str] = {
    "1 term": '"t1"',
    "AND 2": '"t1" AND "t2"',
    "AND 3": '"t1" AND "t2" AND "t3"',
    "AND 5": '"t1" AND "t2" AND "t3" AND "t4" AND "t5"',
    "OR 2": '"t1" OR "t2"',
    "OR 3": '"t1" OR "t2" OR "t3"',
    "OR 5": '"t1" OR "t2" OR "t3" OR "t4" OR "t5"',
    "NOT 2": '"t1" AND NOT "t2"',
    "NOT 3": '"t1" AND "t2" AND NOT "t3"',
    "NOT 5": '"t1" AND "t2" AND "t3" AND NOT "t4" AND NOT "t5"',
    "mixed 3": '("t1" OR "t2") AND NOT "t3"',
}


# ---------------------------------------------------------------------------------------- data


def load_corpus(
    conn: Connection, name: str, data: Dataset, text: str, storage: str | None
) -> tuple[Corpus, dict[str, Any]]:
    """Create corpus ``name``, load ``data`` through the library's ingest path, build HNSW."""
    corpus = create_corpus(conn, name, model="synthetic", dim=DIM)
    if storage:
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STORAGE {}").format(
                corpus.table, corpus.embedding, sql.SQL(storage)
            )
        )
        conn.commit()
    docs: list[dict[str, Any]] = []
    if text == "reuters":
        with gzip.open(REUTERS, "rt", encoding="utf-8") as fh:
            docs = [json.loads(line) for line in fh if line.strip()]

    def records() -> Any:
        for i, (vec, label) in enumerate(zip(data.vectors, data.labels, strict=True)):
            if docs:
                d = docs[i % len(docs)]
                yield Record(f"doc{i}", d["text"], d.get("title") or None, {"c": int(label)}, vec)
            else:
                yield Record(f"doc{i}", f"document {i} of cluster {label}", None, {}, vec)

    t0 = time.perf_counter()
    stats = ingest_records(conn, corpus, records(), embedder=None, batch_size=1000)
    load_s = time.perf_counter() - t0
    build_s = build_index(conn, name, m=16, ef_construction=64)
    info = corpus_info(conn, name)
    toast = conn.execute(
        "SELECT coalesce(pg_relation_size(reltoastrelid), 0) FROM pg_class"
        " WHERE oid = to_regclass(%s)",
        (f"pglogic.{corpus.table_name}",),
    ).fetchone()
    conn.rollback()
    from pglogic.store.corpus import get_corpus

    return get_corpus(conn, name), {
        "rows": stats.inserted,
        "load_s": round(load_s, 2),
        "hnsw_build_s": round(build_s, 2),
        "table_mib": round(info.table_bytes / 2**20, 1),
        "toast_mib": round((toast[0] if toast else 0) / 2**20, 1),
        "index_mib": round(info.index_bytes / 2**20, 1),
        "storage": column_storage(conn, corpus),
    }


_STORAGE = {"p": "PLAIN", "m": "MAIN", "e": "EXTERNAL", "x": "EXTENDED"}


def column_storage(conn: Connection, corpus: Corpus) -> str:
    """The embedding column's TOAST strategy, read from the catalog."""
    row = conn.execute(
        "SELECT attstorage FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = %s",
        (f"pglogic.{corpus.table_name}", corpus.column),
    ).fetchone()
    conn.rollback()
    return _STORAGE.get(str(row[0]), str(row[0])) if row else "?"


# ------------------------------------------------------------------------------------- running

#: A prepared way to run one shape: query vectors -> top-k ids.
Run = Callable[[dict[str, np.ndarray]], list[int]]
#: Prepares a :data:`Run` for (connection, corpus, shape's tree, the library's compiled query).
Variant = Callable[[Connection, Corpus, Node, CompiledQuery], Run]


def library_variant(conn: Connection, corpus: Corpus, tree: Node, compiled: CompiledQuery) -> Run:
    """The product path: ``pglogic.store.search.execute`` of the library's statement."""
    return lambda vecs: [h.row_id for h in execute(conn, compiled, phrase_vectors(tree, vecs))]


def rewrite_materialized(text: str) -> str:
    """Prototype A: ``sims AS MATERIALIZED`` so each similarity is computed once, not twice."""
    if "\nsims AS MATERIALIZED (" in text:
        raise RewriteError("the library statement already has 'sims AS MATERIALIZED'")
    if "\nsims AS (" not in text:
        raise RewriteError("no 'sims AS (' line in the compiled statement")
    return text.replace("\nsims AS (", "\nsims AS MATERIALIZED (")


class RewriteError(Exception):
    """The compiled statement no longer has the shape a prototype rewrite expects."""


def _q(name: str) -> str:
    """Regex for an identifier that may or may not be double-quoted."""
    return f'"?{name}"?'


def rewrite_late(text: str) -> str:
    """Prototype B: similarities only (once each) for all candidates, rank them, and fetch
    external_id / title / metadata for the top k only::

        sims AS MATERIALIZED (SELECT d.id, 1 - (d.embedding <=> v0) AS s0, ... FROM cand JOIN t d),
        top AS (SELECT id, <score> AS score, s0, ... FROM sims ORDER BY score DESC, id LIMIT k)
        SELECT top.id, d.external_id, d.title, d.metadata, top.score, top.s0, ...
        FROM top JOIN t d ON d.id = top.id ORDER BY top.score DESC, top.id
    """
    lines = text.split("\n")
    try:
        i = next(n for n, line in enumerate(lines) if re.match(r"sims AS (MATERIALIZED )?\(", line))
    except StopIteration:
        raise RewriteError("no 'sims AS (' line in the compiled statement") from None
    d = _q("d")
    extra = (
        rf"({d}\.{_q('id')}), {d}\.{_q('external_id')}, {d}\.{_q('title')}, {d}\.{_q('metadata')}, "
    )
    sims, n_sub = re.subn(
        r"^sims AS (?:MATERIALIZED )?\(SELECT " + extra,
        r"sims AS MATERIALIZED (SELECT \1, ",
        lines[i],
    )
    table = re.search(rf" JOIN (.+?) {d} ON ", sims)
    final = re.match(
        rf"^SELECT {_q('id')}, {_q('external_id')}, {_q('title')}, {_q('metadata')}, (.*) FROM sims$",
        lines[i + 1] if i + 1 < len(lines) else "",
    )
    order_ok = i + 2 < len(lines) and re.match(
        rf"^ORDER BY score DESC, {_q('id')} LIMIT %\(k\)s$", lines[i + 2]
    )
    if not (n_sub and table and final and order_ok):
        raise RewriteError("unexpected statement shape:\n" + "\n".join(lines[i : i + 3]))
    cols = ", ".join(f"top.{c}" for c in re.findall(r' AS ("s\d+")', sims))
    return "\n".join(
        [
            *lines[:i],
            sims + ",",
            f"top AS (SELECT id, {final.group(1)} FROM sims ORDER BY score DESC, id LIMIT %(k)s)",
            f"SELECT top.id, d.external_id, d.title, d.metadata, top.score, {cols}",
            f"FROM top JOIN {table.group(1)} d ON d.id = top.id ORDER BY top.score DESC, top.id",
        ]
    )


def rewrite_variant(rewrite: Callable[[str], str]) -> Variant:
    """The library's statement after a textual rewrite, run exactly as ``execute`` runs it."""

    def prepare(conn: Connection, corpus: Corpus, tree: Node, compiled: CompiledQuery) -> Run:
        stmt = rewrite(compiled.as_string(conn)).encode()

        def run(vecs: dict[str, np.ndarray]) -> list[int]:
            params = compiled.with_vectors(phrase_vectors(tree, vecs))
            with conn.transaction():
                for name, value in compiled.settings.items():
                    conn.execute("SELECT set_config(%s, %s, true)", (name, value))
                return [int(r[0]) for r in conn.execute(stmt, params).fetchall()]

        return run

    return prepare


def compile_nojoin(
    tree: Node, corpus: Corpus, compiled: CompiledQuery, and_text: int = DEFAULT_AND_TEXT
) -> CompiledQuery:
    """Prototype C: each candidate CTE returns ``id, embedding`` (the HNSW scan has the heap row
    already; with STORAGE MAIN the vector is inline), so similarities are computed on the CTE
    rows without joining the table again; only the top k rows are joined for their columns.
    Same terms, depth, settings, score expression (``pglogic.engine.operators.to_sql``, with the
    AND texts of ``and_text``: ``pglogic.engine.conjunction``) as the library.
    """
    all_terms = compiled.terms  # the terms, then the AND texts
    cand_terms = compiled.candidate_terms
    index_of = {t: i for i, t in enumerate(all_terms)}
    col = {t: sql.Identifier(f"s{i}") for t, i in index_of.items()}
    score = to_sql(with_and_texts(tree, and_text), lambda t: col[t], compiled.family, "clamp")

    def dist(expr: sql.Composable, i: int) -> sql.Composable:
        return sql.SQL("{} <=> {}::vector({})").format(
            expr, sql.Placeholder(f"v{i}"), sql.Literal(corpus.dim)
        )

    emb = sql.SQL("d.{}").format(corpus.embedding)
    ctes = [
        sql.SQL(
            "{name} AS MATERIALIZED (SELECT d.id, {emb} AS e FROM {table} d"
            " ORDER BY {dist} LIMIT %(depth)s)"
        ).format(
            name=sql.Identifier(f"c{index_of[t]}"),
            emb=emb,
            table=corpus.table,
            dist=dist(emb, index_of[t]),
        )
        for t in cand_terms
    ]
    union = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT id, e FROM {}").format(sql.Identifier(f"c{index_of[t]}"))
        for t in cand_terms
    )
    sims = sql.SQL(", ").join(
        sql.SQL("1 - ({}) AS {}").format(dist(sql.SQL("e"), i), col[t]) for t, i in index_of.items()
    )
    out = sql.SQL(", ").join(sql.SQL("top.{}").format(col[t]) for t in all_terms)
    plain = sql.SQL(", ").join(col[t] for t in all_terms)
    statement = sql.SQL(
        "WITH {ctes},\n"
        "cand AS (SELECT DISTINCT ON (id) id, e FROM ({union}) u),\n"
        "sims AS MATERIALIZED (SELECT id, {sims} FROM cand),\n"
        "top AS (SELECT id, {score} AS score, {plain} FROM sims ORDER BY score DESC, id"
        " LIMIT %(k)s)\n"
        "SELECT top.id, d.external_id, d.title, d.metadata, top.score, {out}\n"
        "FROM top JOIN {table} d ON d.id = top.id ORDER BY top.score DESC, top.id"
    ).format(
        ctes=sql.SQL(",\n").join(ctes),
        union=union,
        sims=sims,
        score=score,
        plain=plain,
        out=out,
        table=corpus.table,
    )
    return CompiledQuery(
        statement=statement,
        params=dict(compiled.params),
        terms=all_terms,
        candidate_terms=cand_terms,
        settings=dict(compiled.settings),
        family=compiled.family,
    )


def nojoin_variant(conn: Connection, corpus: Corpus, tree: Node, compiled: CompiledQuery) -> Run:
    """Prototype C run through ``pglogic.store.search.execute``."""
    proto = compile_nojoin(tree, corpus, compiled)
    return lambda vecs: [h.row_id for h in execute(conn, proto, phrase_vectors(tree, vecs))]


VARIANTS: dict[str, Variant] = {
    "library": library_variant,
    "materialized": rewrite_variant(rewrite_materialized),
    "late": rewrite_variant(rewrite_late),
    "nojoin": nojoin_variant,
}


def plan_by_depth(conn: Connection, corpus: Corpus, vec: np.ndarray) -> list[dict[str, Any]]:
    """Which plan the planner picks for one candidate CTE (``ORDER BY <=> LIMIT depth``) as
    the depth grows: the HNSW index, or a sequential scan + sort (every vector detoasted)."""
    out = []
    stmt = sql.SQL(
        "EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM {} ORDER BY {} <=> %s::vector({}) LIMIT %s"
    ).format(corpus.table, corpus.embedding, sql.Literal(DIM))
    for depth in (100, 174, 224, 316, 500, 1000):
        with conn.transaction():
            conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(depth),))
            plan = conn.execute(stmt, (vec, depth)).fetchone()[0][0]  # type: ignore[index]
        node = plan["Plan"]["Plans"][0]
        scan = node["Node Type"]
        if scan == "Sort":
            scan = "Sort over " + node["Plans"][0]["Node Type"]
        out.append({"depth": depth, "plan": scan, "ms": round(plan["Execution Time"], 2)})
    return out


def single_term(
    conn: Connection, corpus: Corpus, vec: np.ndarray, depth: int, ef: int
) -> tuple[float, list[int]]:
    """One plain HNSW query in its own transaction; return (seconds, ids)."""
    stmt = sql.SQL("SELECT id FROM {} ORDER BY {} <=> %s::vector({}) LIMIT %s").format(
        corpus.table, corpus.embedding, sql.Literal(DIM)
    )
    t0 = time.perf_counter()
    with conn.transaction():
        conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef),))
        ids = [r[0] for r in conn.execute(stmt, (vec, depth))]
    return time.perf_counter() - t0, ids


def compile_shape(
    conn: Connection, corpus: Corpus, shape: str, depth: int | None = None, exact: bool = False
) -> CompiledQuery:
    """The library's compiled statement for ``shape`` (k=10, default settings)."""
    return compile_query(
        parse(SHAPES[shape]),
        corpus,
        SearchOptions(k=K, depth=depth, exact=exact),
        server_has_iterative_scan=server_has_iterative_scan(conn),
    )


def scan_depth(compiled: CompiledQuery) -> int:
    """The rows each scan of the statement reads: the terms' depth; in a guide-only plan
    (:func:`pglogic.engine.plans.guide_only_plan`) the guide's scan's; for one term, k (a plain
    k-NN scan)."""
    p = compiled.params
    return int(next(p[name] for name in ("depth", "gdepth", "k") if name in p))


def bench_shape(
    conn: Connection,
    corpus: Corpus,
    shape: str,
    queries: list[dict[str, np.ndarray]],
    *,
    warmup: int,
    variants: dict[str, Variant],
    depth: int | None = None,
    baseline: bool = True,
) -> dict[str, Any]:
    """Latency of each variant of one shape and of its n-single-term baseline. Per query all
    of them run back to back, in an order rotated from query to query: whatever runs second
    finds the same HNSW neighbourhoods warm in the CPU caches, so a fixed order would favour
    the later ones (measured: ~20%). Also returns the top-k ids of each query per variant."""
    compiled = compile_shape(conn, corpus, shape, depth)
    tree = parse(SHAPES[shape])
    depth = scan_depth(compiled)
    ef = int(compiled.settings["hnsw.ef_search"])
    runs = {name: prep(conn, corpus, tree, compiled) for name, prep in variants.items()}
    lat: dict[str, list[float]] = {v: [] for v in runs}
    ids: dict[str, list[list[int]]] = {v: [] for v in runs}
    base: list[float] = []
    base_pos: list[float] = []
    steps = [*runs, *(["baseline"] if baseline else [])]
    for i, vecs in enumerate(queries[:warmup] + queries):
        times: dict[str, float] = {}
        got: dict[str, list[int]] = {}
        b = bp = 0.0
        k = i % len(steps)
        for step in steps[k:] + steps[:k]:
            if step == "baseline":
                for t in terms(tree):  # the query's terms (not the AND texts: no scan)
                    sec, _ = single_term(conn, corpus, vecs[t], depth, ef)
                    b += sec
                    if t in compiled.candidate_terms:
                        bp += sec
                continue
            t0 = time.perf_counter()
            got[step] = runs[step](vecs)
            times[step] = time.perf_counter() - t0
        if i < warmup:
            continue
        for name in runs:
            lat[name].append(times[name])
            ids[name].append(got[name])
        base.append(b)
        base_pos.append(bp)
    out: dict[str, Any] = {
        "shape": shape,
        "query": SHAPES[shape],
        "terms": len(terms(tree)),
        "candidate_terms": len(compiled.candidate_terms),
        "depth": depth,
        "ef_search": ef,
        "settings": compiled.settings,
        "queries": len(base),
        "variants": {},
        "ids": ids,
    }
    if baseline:
        out["sum_single"] = summary_ms(base)
        out["sum_single_positive"] = summary_ms(base_pos)
    for name in runs:
        v: dict[str, Any] = {"latency": summary_ms(lat[name])}
        if baseline:
            v["ratio_p50"] = round(v["latency"]["p50_ms"] / out["sum_single"]["p50_ms"], 3)
            v["ratio_p95"] = round(v["latency"]["p95_ms"] / out["sum_single"]["p95_ms"], 3)
            per_query = [a / b for a, b in zip(lat[name], base, strict=True)]
            v["ratio_median_per_query"] = round(float(np.median(per_query)), 3)
        if name != "library" and "library" in ids:
            same = [a == b for a, b in zip(ids[name], ids["library"], strict=True)]
            v["same_ids_as_library_pct"] = round(100 * float(np.mean(same)), 1)
        out["variants"][name] = v
    return out


def exact_ids(
    conn: Connection, corpus: Corpus, shape: str, queries: list[dict[str, np.ndarray]]
) -> tuple[list[list[int]], list[float]]:
    """Top-k ids of ``exact=True`` evaluation of each query, and the exact latencies."""
    compiled = compile_shape(conn, corpus, shape, exact=True)
    tree = parse(SHAPES[shape])
    out, lat = [], []
    for vecs in queries:
        t0 = time.perf_counter()
        out.append([h.row_id for h in execute(conn, compiled, phrase_vectors(tree, vecs))])
        lat.append(time.perf_counter() - t0)
    return out, lat


def recall(approx: list[list[int]], truth: list[list[int]]) -> dict[str, float]:
    """Mean / min recall@k and the share of queries below the goal."""
    rs = [len(set(a) & set(t)) / max(1, len(t)) for a, t in zip(approx, truth, strict=False)]
    return {
        "recall_at_10": round(float(np.mean(rs)), 4),
        "recall_min": round(float(np.min(rs)), 2),
        "recall_below_goal_pct": round(100 * float(np.mean([r < GOAL_RECALL for r in rs])), 1),
    }


def plain_knn(
    conn: Connection, corpus: Corpus, queries: list[dict[str, np.ndarray]]
) -> dict[str, Any]:
    """The plain single-term HNSW query (k=10, pgvector's default ef_search=40)."""
    for q in queries[:20]:
        single_term(conn, corpus, q["t1"], K, 40)
    lat = [single_term(conn, corpus, q["t1"], K, 40)[0] for q in queries]
    return {"k": K, "ef_search": 40, "queries": len(lat), "latency": summary_ms(lat)}


def explain(
    conn: Connection,
    corpus: Corpus,
    shape: str,
    vecs: dict[str, np.ndarray],
    rewrite: Callable[[str], str] | None = None,
) -> str:
    """EXPLAIN (ANALYZE, BUFFERS, VERBOSE) of the compiled statement of ``shape`` (vector
    literals elided)."""
    compiled = compile_shape(conn, corpus, shape)
    text = compiled.as_string(conn)
    if rewrite is not None:
        text = rewrite(text)
    params = compiled.with_vectors(phrase_vectors(parse(SHAPES[shape]), vecs))
    with conn.transaction():
        for name, value in compiled.settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        rows = conn.execute(
            ("EXPLAIN (ANALYZE, BUFFERS, VERBOSE, SETTINGS) " + text).encode(),
            params,
        ).fetchall()
    return _VECTOR_LITERAL.sub("'[...]'::vector", "\n".join(r[0] for r in rows))


def warm(conn: Connection, corpus: Corpus) -> None:
    """Read the table and its TOAST once so every variant starts warm."""
    with conn.transaction():
        conn.execute(
            sql.SQL("SELECT count(*), sum(vector_dims({})) FROM {}").format(
                corpus.embedding, corpus.table
            )
        )


def strip_ids(r: dict[str, Any]) -> dict[str, Any]:
    """A shape result without the per-query id lists (kept out of the JSON)."""
    return {k: v for k, v in r.items() if k != "ids"}


# ---------------------------------------------------------------------------------------- main

DIAG_SHAPES = ("1 term", "AND 2", "AND 3", "AND 5", "OR 5", "NOT 3", "NOT 5")
SWEEP_SHAPES = ("AND 2", "AND 3", "AND 5", "NOT 2", "NOT 5", "mixed 3")
SWEEP_FACTORS = (0.5, 0.75, 1.0, 1.5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="documents (default 100k)")
    ap.add_argument("--queries", type=int, default=200, help="queries per shape (default 200)")
    ap.add_argument("--warmup", type=int, default=20, help="warm-up queries per shape")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--text", choices=("reuters", "short"), default="reuters")
    ap.add_argument("--quick", action="store_true", help="small smoke run (10k rows, 30 queries)")
    ap.add_argument("--no-diagnostics", action="store_true", help="skip the diagnostic runs")
    ap.add_argument("--diag-queries", type=int, default=100, help="queries per diagnostic shape")
    ap.add_argument("--idle-wait", type=float, default=300, help="max seconds to wait for idle CPU")
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME, help="embedded server home")
    ap.add_argument("--dsn", default=None, help="an existing server instead of the embedded one")
    ap.add_argument("--keep", action="store_true", help=f"keep the database {DB_NAME}")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows = min(args.rows, 10_000)
        args.queries = min(args.queries, 30)
        args.warmup = min(args.warmup, 5)
        args.diag_queries = min(args.diag_queries, 20)

    dsn = server_dsn(args.home, args.dsn)
    db_dsn = fresh_database(dsn, DB_NAME)
    results: dict[str, Any] = {
        "benchmark": "query",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv[1:],
        "args": vars(args) | {"home": str(args.home)},
        "machine": machine(db_dsn),
        "goals": {"ratio_max": GOAL_RATIO, "recall_min": GOAL_RECALL},
        "default_depth": {n: default_depth(K, n) for n in (1, 2, 3, 5)},
    }
    data = make_dataset(args.rows, args.seed)
    queries = {
        shape: make_queries(
            data, args.warmup + args.queries, len(shape_terms(shape)), args.seed + j
        )
        for j, shape in enumerate(SHAPES)
    }
    measured = {s: q[args.warmup :] for s, q in queries.items()}
    with connect(db_dsn) as conn:
        print("loading ...", flush=True)
        corpus, results["corpus"] = load_corpus(conn, "synthetic", data, args.text, None)
        print(f"  {results['corpus']}", flush=True)
        results["idle_before_latency"] = wait_idle(args.idle_wait)
        warm(conn, corpus)
        results["plain_knn"] = plain_knn(conn, corpus, measured["1 term"])
        print(f"  plain kNN {results['plain_knn']}", flush=True)
        lib = {"library": library_variant}
        shapes = {}
        for shape in SHAPES:
            shapes[shape] = bench_shape(
                conn, corpus, shape, measured[shape], warmup=args.warmup, variants=lib
            )
            print(f"  {shape}: {strip_ids(shapes[shape])['variants']}", flush=True)
        results["idle_after_latency"] = wait_idle(0)
        print("exact evaluation for recall ...", flush=True)
        truth: dict[str, list[list[int]]] = {}
        for shape, r in shapes.items():
            truth[shape], exact_lat = exact_ids(conn, corpus, shape, measured[shape])
            r["recall"] = recall(r["ids"]["library"], truth[shape])
            r["exact_latency"] = summary_ms(exact_lat)
            print(f"  {shape}: {r['recall']} exact {r['exact_latency']}", flush=True)
        results["shapes"] = [strip_ids(r) for r in shapes.values()]

        if not args.no_diagnostics:
            results["diagnostics"] = diagnostics(conn, corpus, data, args, measured, truth)

    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    # a smoke run never replaces the committed results
    jp, mp = write_results(
        "query_quick" if args.quick else "query", results, render(results), results_dir=RESULTS_DIR
    )
    if not args.keep:
        drop_database(dsn, DB_NAME)
    print(f"wrote {jp} and {mp}")
    return 0


def diagnostics(
    conn: Connection,
    corpus: Corpus,
    data: Dataset,
    args: argparse.Namespace,
    measured: dict[str, list[dict[str, np.ndarray]]],
    truth: dict[str, list[list[int]]],
) -> dict[str, Any]:
    """Statement variants on both storages, a depth sweep, and EXPLAIN output."""
    diag: dict[str, Any] = {}
    nq = args.diag_queries
    sample = {s: measured[s][0] for s in ("1 term", "AND 3", "NOT 5")}
    diag["explain"] = {s: explain(conn, corpus, s, v) for s, v in sample.items()}
    variants = dict(VARIANTS)
    diag["skipped_variants"] = {}
    text = compile_shape(conn, corpus, "NOT 5").as_string(conn)
    for name, rewrite in (("materialized", rewrite_materialized), ("late", rewrite_late)):
        try:
            rewrite(text)
        except RewriteError as exc:
            print(f"  variant {name} skipped: {exc}", flush=True)
            diag["skipped_variants"][name] = str(exc)
            variants.pop(name)
    if "late" in variants:
        diag["explain_late"] = {
            "NOT 5": explain(conn, corpus, "NOT 5", sample["NOT 5"], rewrite_late)
        }

    diag["plan_by_depth"] = plan_by_depth(conn, corpus, sample["1 term"]["t1"])
    print(f"  plan by depth: {diag['plan_by_depth']}", flush=True)
    print("diagnostic: depth sweep (recall vs latency) ...", flush=True)
    diag["idle_before_sweep"] = wait_idle(args.idle_wait)
    sweep = []
    for shape in SWEEP_SHAPES:
        default = scan_depth(compile_shape(conn, corpus, shape))
        for f in SWEEP_FACTORS:
            depth = max(K, round(default * f))
            r = bench_shape(
                conn,
                corpus,
                shape,
                measured[shape][:nq],
                warmup=5,
                variants={"library": library_variant},
                depth=depth,
                baseline=False,
            )
            row = {
                "shape": shape,
                "factor": f,
                "depth": depth,
                "ef_search": r["ef_search"],
                "latency": r["variants"]["library"]["latency"],
                **recall(r["ids"]["library"], truth[shape][:nq]),
            }
            print(f"  {row}", flush=True)
            sweep.append(row)
    diag["depth_sweep"] = sweep

    print("diagnostic: statement variants, library table ...", flush=True)
    diag["idle_before_variants"] = wait_idle(args.idle_wait)
    diag["variants_library_table"] = []
    for shape in DIAG_SHAPES:
        r = bench_shape(conn, corpus, shape, measured[shape][:nq], warmup=5, variants=variants)
        print(f"  {shape}: {r['variants']}", flush=True)
        diag["variants_library_table"].append(strip_ids(r))

    other = "EXTERNAL" if column_storage(conn, corpus) == "MAIN" else "MAIN"
    print(f"diagnostic: same data, embedding STORAGE {other} ...", flush=True)
    corpus_other, diag["corpus_other"] = load_corpus(
        conn, "synthetic_other", data, args.text, other
    )
    print(f"  {diag['corpus_other']}", flush=True)
    diag["idle_before_other"] = wait_idle(args.idle_wait)
    warm(conn, corpus_other)
    diag["variants_other_table"] = []
    for shape in DIAG_SHAPES:
        r = bench_shape(
            conn, corpus_other, shape, measured[shape][:nq], warmup=5, variants=variants
        )
        print(f"  {shape}: {r['variants']}", flush=True)
        diag["variants_other_table"].append(strip_ids(r))
    diag["explain_other"] = {"NOT 5": explain(conn, corpus_other, "NOT 5", sample["NOT 5"])}
    return diag


def shape_terms(shape: str) -> list[str]:
    from pglogic.query import terms

    return terms(parse(SHAPES[shape]))


def render(r: dict[str, Any]) -> str:
    """The Markdown report."""
    c = r["corpus"]
    goal_r = r["goals"]["ratio_max"]
    goal_rec = r["goals"]["recall_min"]
    pk = r["plain_knn"]
    out = [
        "# Query benchmark",
        "",
        f"Run {r['started']} with `python bench/perf/query.py {' '.join(r['argv'])}`.",
        "",
        "## Machine",
        "",
        machine_md(r["machine"]),
        f"- CPU busy before the latency runs (other processes; the machine is shared): "
        f"{r['idle_before_latency']['cpu_busy_before']:.0%} "
        f"(waited {r['idle_before_latency']['waited_s']} s); after: "
        f"{r['idle_after_latency']['cpu_busy_before']:.0%}",
        "",
        "## Corpus",
        "",
        f"{c['rows']:,} synthetic clustered 384-d unit vectors (100 topics × 10 centres), "
        f"Reuters texts as row payload ({r['args']['text']}); embedding storage {c['storage']}; "
        f"load {c['load_s']} s, HNSW (m=16, ef_construction=64) build {c['hnsw_build_s']} s; "
        f"table {c['table_mib']} MiB (of which TOAST {c['toast_mib']} MiB), "
        f"index {c['index_mib']} MiB.",
        "",
        f"Plain single-term HNSW query (k={pk['k']}, ef_search={pk['ef_search']}): "
        f"p50 {pk['latency']['p50_ms']} ms, p95 {pk['latency']['p95_ms']} ms.",
        "",
        f"## Logical queries (k=10, default depth / ef_search, {r['args']['queries']} queries per "
        "shape after warm-up)",
        "",
        "`sum single` = n single-term HNSW queries (one per term, also the negated ones) at the "
        "same depth and ef_search, each in its own transaction, timed right after the compiled "
        f"query (the order alternates per query). ratio = compiled p50 / sum p50 (goal ≤ {goal_r}); `per-query` = median of the "
        "per-query ratios (robust to load drift). Recall@10 against `exact=True` evaluation of "
        f"the same formula (goal ≥ {goal_rec}).",
        "",
        md_table(
            [
                "shape",
                "terms (cand.)",
                "depth",
                "p50 ms",
                "p95 ms",
                "sum single p50",
                "sum single p95",
                "ratio p50",
                "ratio p95",
                "per-query",
                "≤ 1.3",
                "recall@10",
                "min",
                "≥ 0.95",
                "exact p50 ms",
            ],
            [
                [
                    x["shape"],
                    f"{x['terms']} ({x['candidate_terms']})",
                    x["depth"],
                    x["variants"]["library"]["latency"]["p50_ms"],
                    x["variants"]["library"]["latency"]["p95_ms"],
                    x["sum_single"]["p50_ms"],
                    x["sum_single"]["p95_ms"],
                    x["variants"]["library"]["ratio_p50"],
                    x["variants"]["library"]["ratio_p95"],
                    x["variants"]["library"]["ratio_median_per_query"],
                    "yes" if x["variants"]["library"]["ratio_p50"] <= goal_r else "no",
                    x["recall"]["recall_at_10"],
                    x["recall"]["recall_min"],
                    "yes" if x["recall"]["recall_at_10"] >= goal_rec else "no",
                    x["exact_latency"]["p50_ms"],
                ]
                for x in r["shapes"]
            ],
        ),
        "",
    ]
    d = r.get("diagnostics")
    if d:
        co = d["corpus_other"]
        names = list(d["variants_library_table"][0]["variants"])

        def cells(rows: list[dict[str, Any]], shape: str) -> list[str]:
            x = next(y for y in rows if y["shape"] == shape)
            return [
                f"{v['latency']['p50_ms']} ({v['ratio_p50']} / {v['ratio_median_per_query']})"
                for v in x["variants"].values()
            ]

        out += [
            "## Diagnostics",
            "",
            f"### Statement variants × table layout ({r['args']['diag_queries']} queries per "
            "shape)",
            "",
            "p50 ms (ratio p50 / median per-query ratio, each against the sum of single-term "
            "queries on the same table). `library` = pglogic's statement; `materialized` = the "
            "same with `sims AS MATERIALIZED` (each similarity computed once instead of twice); "
            "`late` = similarities only for the candidates, top k ranked, then external_id / "
            "title / metadata fetched for those k rows; `nojoin` = candidate CTEs return "
            "`id, embedding` and similarities are computed on those rows (no second lookup of "
            "each candidate in the table), top k joined for their columns (`compile_nojoin`). "
            "Per query the variants and the baseline run back to back in a rotating order. "
            "Left: the table as `create_corpus` makes it "
            f"(embedding STORAGE {c['storage']}, TOAST {c['toast_mib']} MiB); right: the same "
            f"data with STORAGE {co['storage']} (TOAST {co['toast_mib']} MiB). With EXTERNAL "
            "(pgvector's default) a 384-d vector plus a Reuters-size text exceeds the ~2 kB row "
            "limit, so vectors go to TOAST and every distance on the heap fetches one."
            + "".join(f" Variant `{k}` not run: {v}." for k, v in d["skipped_variants"].items()),
            "",
            md_table(
                [
                    "shape",
                    *(f"{c['storage']}: {n}" for n in names),
                    *(f"{co['storage']}: {n}" for n in names),
                ],
                [
                    [
                        s,
                        *cells(d["variants_library_table"], s),
                        *cells(d["variants_other_table"], s),
                    ]
                    for s in DIAG_SHAPES
                    if any(y["shape"] == s for y in d["variants_library_table"])
                ],
            ),
            "",
            "### Plan of one candidate CTE by depth (library table)",
            "",
            md_table(
                ["depth", "plan", "execution ms"],
                [[x["depth"], x["plan"], x["ms"]] for x in d["plan_by_depth"]],
            ),
            "",
            "### Depth sweep (library statement and table; recall vs exact)",
            "",
            md_table(
                ["shape", "depth (× default)", "ef_search", "p50 ms", "recall@10", "min"],
                [
                    [
                        x["shape"],
                        f"{x['depth']} (×{x['factor']})",
                        x["ef_search"],
                        x["latency"]["p50_ms"],
                        x["recall_at_10"],
                        x["recall_min"],
                    ]
                    for x in d["depth_sweep"]
                ],
            ),
            "",
            "### EXPLAIN (ANALYZE, BUFFERS, VERBOSE) — NOT 5, library statement and table",
            "",
            "```",
            d["explain"]["NOT 5"],
            "```",
            "",
            f"### EXPLAIN — NOT 5, library statement, STORAGE {co['storage']}",
            "",
            "```",
            d["explain_other"]["NOT 5"],
            "```",
            "",
        ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
