"""The search policies, written once in :mod:`pglogic.engine.plans` and applied by every path.

The exact pass when the index scans found fewer than k rows (:func:`needs_exact_pass`) and the
filter estimate's arithmetic (:func:`sample_percent`, :func:`estimate_from_sample`): the
Python search (:mod:`pglogic.store.search`) and the SQLAlchemy helper call them; the SQL
function ``pglogic.search`` (``sql/search.sql``) writes them in PL/pgSQL, so these tests run
the SQL's own expressions, read from the file, against the Python functions, and both searches
on one corpus.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.filters import parse_filter
from pglogic.engine.plans import (
    estimate_from_sample,
    lexical_candidates_only,
    needs_exact_pass,
    sample_percent,
)
from pglogic.engine.render import search_json
from pglogic.query import parse
from pglogic.resources import resource_dir
from pglogic.store.corpus import build_index, create_corpus, get_corpus
from pglogic.store.search import estimate_filter, execute, search, server_has_iterative_scan

Conn = psycopg.Connection[Any]

SEMANTIC = ['"a"', '"a" OR "b"', '"a" AND NOT "b"', '"a" OR match:wheat', 'NOT match:corn AND "a"']
LEXICAL_ONLY = ["match:wheat", 'match:wheat AND NOT "a"', "match:wheat OR match:corn"]


def test_the_exact_pass_runs_when_fewer_than_k_rows_came_back() -> None:
    for query, rows, k in itertools.product(SEMANTIC, range(12), (1, 5, 10)):
        tree = parse(query)
        assert needs_exact_pass(rows, k, tree) is (rows < k), (query, rows, k)
        assert needs_exact_pass(rows, k, tree, exact=True) is False
    for query in LEXICAL_ONLY:  # the lexical scans found every match: the answer
        assert lexical_candidates_only(parse(query))
        assert not any(needs_exact_pass(rows, 10, parse(query)) for rows in range(12))
    assert not any(lexical_candidates_only(parse(q)) for q in SEMANTIC)


def test_the_estimate_counts_one_match_at_least_and_scales_to_the_table() -> None:
    assert estimate_from_sample(0, 500, 10_000.0) == (1 / 500, 20.0)
    assert estimate_from_sample(500, 500, 0.0) == (1.0, 500.0)  # stale statistics: the sample
    assert estimate_from_sample(0, 0, 123.0) == (1.0, 123.0)  # an empty sample says nothing
    assert [sample_percent(p) for p in (-1, 0, 1, 1000, 1001, 8000)] == [
        100.0, 100.0, 100.0, 100.0, 100.0 * 1000 / 1001, 12.5
    ]  # fmt: skip


# -- the SQL function's own text -------------------------------------------------------------------


def search_sql() -> str:
    """``sql/search.sql`` without comments, its whitespace collapsed."""
    text = (resource_dir("sql") / "search.sql").read_text()
    text = re.sub(r"--[^\n]*", "", text)
    return re.sub(r"\s+", " ", text)


def sql_part(pattern: str) -> re.Match[str]:
    found = re.search(pattern, search_sql())
    assert found is not None, f"sql/search.sql no longer matches {pattern!r}: update this test"
    return found


def test_the_sql_function_reruns_exactly_under_the_same_rule(conn: Conn) -> None:
    """pglogic.search runs its exact fallback on the condition read from sql/search.sql,
    evaluated here on a grid of k and row counts: exactly where needs_exact_pass says so, for a
    plan that has a fallback statement (which plans have one: the tests below)."""
    cond = sql_part(r"IF (p\.exact_statement IS NOT NULL AND [^;]*?) THEN")[1]
    cases = [(n, k) for k in (1, 5, 10, 100) for n in range(0, 12)]
    rows = conn.execute(
        sql.SQL(
            "SELECT {} FROM unnest(%s::int[], %s::int[]) WITH ORDINALITY AS u(n, k, o),"
            " LATERAL (SELECT 'statement'::text AS exact_statement, u.k) AS p,"
            " LATERAL (SELECT CASE WHEN u.n > 0 THEN array_fill(0::bigint, ARRAY[u.n])"
            " END AS ids) AS r ORDER BY o"
        ).format(sql.SQL(cond)),  # (the file's own text)
        ([n for n, _ in cases], [k for _, k in cases]),
    ).fetchall()
    tree = parse('"a" OR "b"')
    assert [r[0] for r in rows] == [needs_exact_pass(n, k, tree) for n, k in cases]


def test_the_sql_estimate_is_the_python_arithmetic(conn: Conn) -> None:
    """The sample's percentage and the (selectivity, matching rows) of pglogic._plan, their
    expressions read from sql/search.sql, on a grid: bit for bit :func:`sample_percent` and
    :func:`estimate_from_sample`, which :func:`pglogic.store.search.estimate_filter` calls."""
    percent = sql_part(r"INTO est USING (.+?), filter_values;")[1]
    pages = [1, 2, 999, 1000, 1001, 4096, 123_457]
    got = conn.execute(
        sql.SQL("SELECT {} FROM unnest(%s::int[]) WITH ORDINALITY AS u(pages, o) ORDER BY o")
        .format(sql.SQL(percent)),
        (pages,),
    ).fetchall()  # fmt: skip
    assert [r[0] for r in got] == [sample_percent(p) for p in pages]

    branch = sql_part(
        r"IF est\.total = 0 THEN selectivity := ([^;]+); matching_rows := ([^;]+); "
        r"ELSE selectivity := ([^;]+); matching_rows := ([^;]+); END IF;"
    )
    empty_sel, empty_rows, sel, matching = branch.groups()
    cases = [(h, t, r) for t in (0, 1, 100, 999, 4000) for h in (0, 1, 7, t) if h <= t
             for r in (0.0, 50.0, 12_345.0, 1e6)]  # fmt: skip
    got = conn.execute(
        sql.SQL(
            "SELECT CASE WHEN est.total = 0 THEN {} ELSE selectivity END,"
            " CASE WHEN est.total = 0 THEN {} ELSE {} END"
            " FROM unnest(%s::bigint[], %s::bigint[], %s::float8[]) WITH ORDINALITY"
            " AS u(h, t, r, o),"
            " LATERAL (SELECT u.h AS hits, u.t AS total) AS est,"
            " LATERAL (SELECT u.r AS rows_est,"
            "          CASE WHEN est.total > 0 THEN {} END AS selectivity) AS v ORDER BY o"
        ).format(*(sql.SQL(e) for e in (empty_sel, empty_rows, matching, sel))),
        ([h for h, _, _ in cases], [t for _, t, _ in cases], [r for _, _, r in cases]),
    ).fetchall()
    assert [tuple(r) for r in got] == [estimate_from_sample(h, t, r) for h, t, r in cases]


# -- both searches on one corpus -------------------------------------------------------------------

DIM = 16


class HashVectors:
    """An embedder of fixed pseudo-random vectors, one per text."""

    name = "synthetic"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([vector_of(t) for t in texts], dtype=np.float32)


def vector_of(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return [float(x) for x in np.random.default_rng(seed).normal(size=DIM)]


@pytest.fixture
def small(conn: Conn) -> Conn:
    """Corpus 'small': 400 documents of random vectors, 15 tagged rare and 5 rarest, 8 that
    say wheat (3 of them rare), with an HNSW index."""
    corpus = create_corpus(conn, "small", model="synthetic", dim=DIM)
    assert corpus.lexical_config is not None
    conn.execute("SELECT setseed(0.25)")
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (external_id, title, text, metadata, text_hash, row_hash, embedding)"
            " SELECT 'd' || i, NULL, CASE WHEN i % 50 = 0 THEN 'durum wheat' ELSE 'plain' END,"
            " jsonb_build_object('tag', CASE WHEN i % 80 = 0 THEN 'rarest'"
            "                                WHEN i % 20 = 0 THEN 'rare' ELSE 'common' END),"
            " '\\x00', '\\x00', (SELECT array_agg(random() - 0.5) FROM generate_series(1, {})"
            " WHERE i > 0)::vector FROM generate_series(1, 400) AS i"
        ).format(corpus.table, sql.Literal(DIM))
    )
    conn.commit()
    build_index(conn, "small", maintenance_work_mem="64MB")
    conn.execute(sql.SQL("ANALYZE {}").format(corpus.table))
    conn.execute("SET enable_seqscan = off")  # (the session's) the HNSW index, at 400 rows too
    conn.commit()
    return conn


RARE = [parse_filter('{"tag": "rare"}')]  # 15 documents
RAREST = [parse_filter('{"tag": "rarest"}')]  # 5 documents, fewer than k
#: (query, options, whether the exact pass runs, rows): filtered, lexical and exact plans.
CASES = [
    ('"a" OR "b"', SearchOptions(k=10, depth=1, iterative_scan=False, filters=RARE), True, 10),
    ('"a" AND NOT "b"', SearchOptions(k=10, depth=10, ef_search=10, filters=RAREST), True, 5),
    ('"a" OR "b"', SearchOptions(k=10, filters=RARE, exact=True), False, 10),
    ('"a" OR match:wheat', SearchOptions(k=10, depth=10), False, 10),
    ('"a" AND match:wheat', SearchOptions(k=10, depth=10, filters=RARE), False, 10),
    ('match:wheat AND NOT "a"', SearchOptions(k=10), False, 8),
    ("match:wheat OR match:corn", SearchOptions(k=10, filters=RARE), False, 3),
]


def both_searches(conn: Conn, query: str, opts: SearchOptions) -> dict[str, Any]:
    """The approximate statement's rows, the Python search and the SQL function, one query."""
    corpus = get_corpus(conn, "small")
    conn.commit()
    tree = parse(query)
    iterative = server_has_iterative_scan(conn) and opts.iterative_scan
    selectivity = estimate_filter_for(conn, opts)[0] if opts.filters and not opts.exact else None
    compiled = compile_query(
        tree, corpus, opts, server_has_iterative_scan=iterative, filter_selectivity=selectivity
    )  # (the search's approximate statement)
    vectors: dict[str, object] = {t: vector_of(t) for t in compiled.terms}
    found = execute(conn, compiled, vectors)
    result = search(conn, corpus, tree, embedder=HashVectors(), options=opts)
    query_json = search_json(tree, opts, {t: vector_of(t) for t in result.compiled.terms})
    try:
        plan = conn.execute("SELECT pglogic.search_plan('small', %s)", (Jsonb(query_json),))
        plan_row = plan.fetchone()
        rows = conn.execute(
            "SELECT id FROM pglogic.search('small', %s)", (Jsonb(query_json),)
        ).fetchall()
    finally:
        conn.rollback()
    assert plan_row is not None
    return {"found": len(found), "python": result, "plan": plan_row[0], "sql": [r[0] for r in rows]}


@pytest.mark.parametrize(("query", "opts", "rerun", "n"), CASES, ids=[c[0] for c in CASES])
def test_both_searches_run_the_exact_pass_where_the_policy_says(
    small: Conn, query: str, opts: SearchOptions, rerun: bool, n: int
) -> None:
    """Filtered and lexical plans: the SQL plan has a fallback statement exactly where the
    policy can ask for one (not exact, not every candidate lexical), and both searches run it
    exactly where :func:`needs_exact_pass` does, with the same rows."""
    got = both_searches(small, query, opts)
    tree = parse(query)
    assert needs_exact_pass(got["found"], opts.k, tree, exact=opts.exact) is rerun
    assert ("database_approximate" in got["python"].timings) is rerun
    has_fallback = got["plan"]["exact_fallback"] is not None
    assert has_fallback is (not opts.exact and not lexical_candidates_only(tree))
    assert [h.row_id for h in got["python"].hits] == got["sql"]
    assert len(got["sql"]) == n
    if rerun:
        assert got["found"] < opts.k
    if opts.filters and not opts.exact:
        selectivity, matching = estimate_filter_for(small, opts)
        assert (got["plan"]["selectivity"], got["plan"]["matching_rows"]) == (selectivity, matching)


def estimate_filter_for(conn: Conn, opts: SearchOptions) -> tuple[float, float]:
    corpus = get_corpus(conn, "small")
    try:
        return estimate_filter(conn, corpus, opts.filters)
    finally:
        conn.rollback()


def test_an_unfiltered_plain_plan_is_completed_by_both_searches(small: Conn) -> None:
    got = both_searches(small, '"a" OR "b"', SearchOptions(k=10, depth=1))
    assert got["found"] < 10 and "database_approximate" in got["python"].timings
    assert got["plan"]["exact_fallback"] is not None
    assert [h.row_id for h in got["python"].hits] == got["sql"]
