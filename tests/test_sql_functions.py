"""The SQL functions of migrations 0002-0004: fuzzy operators, pglogic.search, the term cache.

The operators are checked against their NumPy faces on a grid; ``pglogic.search`` is checked
against the Python path (``pglogic.store.search.search``) on 200 real Reuters documents embedded with
all-MiniLM-L6-v2: same ids in the same order, scores and similarities to 1e-9.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import errors, sql
from psycopg.types.json import Jsonb

from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.operators import (
    AND_OPS,
    NOT_OPS,
    OR_OPS,
    TRUTH_MAPS,
    resolve_family,
    resolve_truth,
)
from pglogic.engine.render import json_tree, search_json
from pglogic.errors import PglogicError
from pglogic.eval.calibrate import Calibration
from pglogic.query import parse, to_tree
from pglogic.resources import resource_dir
from pglogic.store import migrate
from pglogic.store.calibration_store import (
    delete_calibration,
    resolve_stored_truth,
    save_calibration,
)
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect
from pglogic.store.search import Hit, search
from pglogic.store.term_cache import cache_terms, cached_terms, uncache_terms
from tests.conftest import Server, reuters_database

pytestmark = pytest.mark.db

Conn = psycopg.Connection[Any]


# -- fixtures -------------------------------------------------------------------------------------


class FixedEmbedder:
    """Embeds each term alone, once: both paths get bit-identical vectors."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        for t in texts:
            if t not in self.cache:
                self.cache[t] = np.asarray(self.inner.embed([t])[0], dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])


@pytest.fixture(scope="module")
def news_dsn(pg_server: Server, minilm: Any, shared_data: Path) -> Iterator[str]:
    """A database with corpus 'news': 200 Reuters documents, HNSW index."""
    yield from reuters_database(pg_server, "t_sqlfn", 200)


@pytest.fixture
def news(news_dsn: str) -> Iterator[Conn]:
    with connect(news_dsn) as c:
        yield c


@pytest.fixture(scope="module")
def fixed(minilm: Any) -> FixedEmbedder:
    return FixedEmbedder(minilm)


def sql_search(conn: Conn, corpus: str, query: Any) -> list[tuple[Any, ...]]:
    try:
        return conn.execute(
            "SELECT id, external_id, title, metadata, score, similarities"
            " FROM pglogic.search(%s, %s)",
            (corpus, Jsonb(query)),
        ).fetchall()
    finally:
        conn.rollback()


def sql_error(conn: Conn, corpus: str, query: Any) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as info:
        sql_search(conn, corpus, query)
    return info.value


def message(exc: psycopg.Error) -> str:
    assert exc.diag.message_primary is not None
    return exc.diag.message_primary


def assert_same(hits: list[Hit], rows: list[tuple[Any, ...]]) -> None:
    assert [r[0] for r in rows] == [h.id for h in hits]
    for h, (_id, ext, title, metadata, score, sims) in zip(hits, rows, strict=True):
        assert (ext, title, metadata) == (h.external_id, h.title, h.metadata)
        assert abs(score - h.score) <= 1e-9, (h.external_id, score, h.score)
        assert set(sims) == set(h.similarities)
        for term, value in h.similarities.items():
            assert abs(sims[term] - value) <= 1e-9


# -- the operators as SQL functions ----------------------------------------------------------------

GRID = [0.0, 1e-7, 0.1, 0.25, 1 / 3, 0.5, 0.75, 0.9, 0.999, 1.0]
SIMS = [-1.0, -0.3, *GRID, 1.2]


def _columns(n: int) -> list[list[float]]:
    rows = list(itertools.product(GRID, repeat=n))
    return [[row[i] for row in rows] for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize(
    ("kind", "name"),
    [("and", n) for n in AND_OPS] + [("or", n) for n in OR_OPS],
)
def test_nary_operator_functions_match_numpy(conn: Conn, kind: str, name: str, n: int) -> None:
    op = AND_OPS[name] if kind == "and" else OR_OPS[name]
    cols = _columns(n)
    args = sql.SQL(", ").join(sql.Identifier(f"x{i}") for i in range(n))
    query = sql.SQL(
        "SELECT {fn}({args}) FROM unnest({arrays}) WITH ORDINALITY AS t({args}, n) ORDER BY n"
    ).format(
        fn=sql.Identifier("pglogic", f"{kind}_{name}"),
        args=args,
        arrays=sql.SQL(", ").join(sql.Literal(c) + sql.SQL("::float8[]") for c in cols),
    )
    got = np.array([r[0] for r in conn.execute(query)], dtype=np.float64)
    np.testing.assert_array_equal(got, op.numpy([np.array(c) for c in cols]))


@pytest.mark.parametrize(
    ("fn", "face", "values"),
    [("not_" + n, NOT_OPS[n], GRID) for n in NOT_OPS]
    + [("truth_" + n, TRUTH_MAPS[n], SIMS) for n in TRUTH_MAPS],
)
def test_unary_functions_match_numpy(conn: Conn, fn: str, face: Any, values: list[float]) -> None:
    query = sql.SQL("SELECT {}(x) FROM unnest(%s::float8[]) WITH ORDINALITY AS t(x, n) ORDER BY n")
    rows = conn.execute(query.format(sql.Identifier("pglogic", fn)), (values,)).fetchall()
    np.testing.assert_array_equal(np.array([r[0] for r in rows]), face.numpy(values))


def test_operator_functions_nulls_and_errors(conn: Conn) -> None:
    row = conn.execute(
        "SELECT pglogic.and_min(0.5, NULL), pglogic.or_max(NULL, 0.5), pglogic.truth_clamp(NULL),"
        " pglogic.not_reciprocal(NULL), pglogic.not_reciprocal(0), pglogic.and_product(0.5)"
    ).fetchone()
    assert row == (None, None, None, None, 1e6, 0.5)
    with pytest.raises(errors.InvalidParameterValue, match=r"pglogic\.and_sum needs at least one"):
        conn.execute("SELECT pglogic.and_sum(VARIADIC '{}'::float8[])")
    conn.rollback()
    marks = conn.execute(
        "SELECT p.proname, p.provolatile, p.proparallel FROM pg_proc p"
        " WHERE p.pronamespace = 'pglogic'::regnamespace"
        " AND p.proname ~ '^(and|or|not|truth)_'"
    ).fetchall()
    assert len(marks) == 12
    assert {(v, par) for _, v, par in marks} == {("i", "s")}


# -- pglogic.search: parity with the Python compiler ------------------------------------------------------

QUERIES = [
    '"oil prices" AND "opec"',
    '"grain exports" OR "wheat harvest"',
    '"crude oil" AND NOT "natural gas"',
    '("gold" OR "silver") AND NOT ("mining" OR "strike")',
    '"bank" AND NOT "interest rates" OR "bank" AND "loans"',
    '"coffee" AND NOT NOT "brazil" AND NOT "cocoa"',
]
FAMILIES = ["itlr", "godel", "lukasiewicz", "product", "and=sum,or=max,not=reciprocal"]


def python_and_sql(
    news: Conn, fixed: FixedEmbedder, query: str, opts: SearchOptions
) -> tuple[list[Hit], list[tuple[Any, ...]]]:
    corpus = get_corpus(news, "news")
    news.commit()
    # pglogic.search() in SQL has no guide scan (its direction is optimised in Python), so it
    # ranks like the Python engine without one
    result = search(news, corpus, query, embedder=fixed, options=replace(opts, guide=False))
    vectors = {t: fixed.embed([t])[0] for t in result.compiled.terms}
    rows = sql_search(news, "news", search_json(result.tree, opts, vectors))
    return result.hits, rows


@pytest.mark.model
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("query", QUERIES)
def test_search_function_ranks_like_python(
    news: Conn, fixed: FixedEmbedder, query: str, family: str
) -> None:
    opts = SearchOptions(k=10, operators=family)
    hits, rows = python_and_sql(news, fixed, query, opts)
    assert len(hits) == 10
    if family != "lukasiewicz":  # max(0, Σx − (n−1)) is 0 for most documents
        assert len({round(h.score, 12) for h in hits}) > 1
    assert_same(hits, rows)


@pytest.mark.model
@pytest.mark.parametrize("family", ["itlr", "godel"])
def test_search_function_ranks_like_python_through_the_index(
    news: Conn, fixed: FixedEmbedder, family: str
) -> None:
    """With sequential scans off, both paths read candidates from the HNSW index."""
    news.execute("SET enable_seqscan = off")
    news.commit()
    corpus = get_corpus(news, "news")
    compiled = compile_query(parse(QUERIES[3]), corpus, SearchOptions(operators=family))
    params = compiled.with_vectors({t: fixed.embed([t])[0] for t in compiled.terms})
    plan = news.execute(sql.SQL("EXPLAIN ") + compiled.statement, params).fetchall()
    news.rollback()
    assert f"Index Scan using {corpus.index_name}" in "\n".join(r[0] for r in plan)
    for query in QUERIES:
        hits, rows = python_and_sql(news, fixed, query, SearchOptions(k=10, operators=family))
        assert_same(hits, rows)


@pytest.mark.model
@pytest.mark.parametrize(
    "opts",
    [
        SearchOptions(k=5, truth="affine"),
        SearchOptions(k=25, operators="godel", truth="affine"),
        SearchOptions(k=7, depth=150, ef_search=50),  # depth > ef: iterative scan
        SearchOptions(k=3, depth=20, ef_search=40, operators="itlr[min,sum,reciprocal]"),
        SearchOptions(k=10, exact=True),
        SearchOptions(k=200, exact=True, operators="product"),
        SearchOptions(k=10, truth="sigmoid:0.1857:18.76"),
        SearchOptions(k=50, operators="godel", truth="Sigmoid:1e-01:1_2.5", exact=True),
    ],
    ids=["affine", "godel-affine", "iterative", "small-depth", "exact", "exact-all", "sigmoid",
         "godel-sigmoid-exact"],
)  # fmt: skip
def test_search_function_options_rank_like_python(
    news: Conn, fixed: FixedEmbedder, opts: SearchOptions
) -> None:
    for query in QUERIES[2:5]:
        hits, rows = python_and_sql(news, fixed, query, opts)
        assert hits
        assert_same(hits, rows)


@pytest.mark.model
def test_calibrated_truth_ranks_like_python(news: Conn, fixed: FixedEmbedder) -> None:
    """The stored parameters: the corpus's own row first, else its model's."""
    corpus = get_corpus(news, "news")
    news.commit()
    save_calibration(news, corpus.model, Calibration(0.1857, 18.76, "logistic", 100, 0.9))
    try:
        for own in (None, Calibration(0.25, 12.5, "corpus", 0, None)):
            if own is not None:
                save_calibration(news, corpus.model, own, corpus_id=corpus.id)
            for query in QUERIES[2:5]:
                opts = SearchOptions(k=10, truth="calibrated")
                hits, rows = python_and_sql(news, fixed, query, opts)
                assert hits
                assert_same(hits, rows)
                spec = resolve_stored_truth(news, corpus, "calibrated")
                assert spec == ("sigmoid:0.1857:18.76" if own is None else "sigmoid:0.25:12.5")
                hits_spec, _ = python_and_sql(news, fixed, query, replace(opts, truth=spec))
                assert [(h.id, h.score) for h in hits_spec] == [(h.id, h.score) for h in hits]
    finally:
        delete_calibration(news, corpus.model, corpus.id)
        delete_calibration(news, corpus.model)


@pytest.mark.model
def test_exact_mode_scores_every_document_like_python(news: Conn, fixed: FixedEmbedder) -> None:
    opts = SearchOptions(k=500, exact=True)
    hits, rows = python_and_sql(news, fixed, 'NOT "oil" AND NOT "grain"', opts)
    assert len(hits) == 200
    assert_same(hits, rows)


@pytest.mark.model
@pytest.mark.parametrize(
    ("query", "opts"),
    [
        ('"a" AND NOT "b"', SearchOptions()),
        ('"a" OR "b" OR "c" AND NOT "a"', SearchOptions(k=40)),
        ('"a" OR "b" OR "c" OR "d"', SearchOptions(k=100)),
        ('"a" AND "b"', SearchOptions(k=3, depth=2000)),
        ('"a"', SearchOptions(k=1000)),
        ('"a" AND "b"', SearchOptions(k=5, depth=300, ef_search=64)),
        ('"a" AND "b"', SearchOptions(k=5, depth=300, ef_search=64, iterative_scan=False)),
        ('NOT "a" OR "b"', SearchOptions(k=5, exact=True)),
    ],
)
def test_search_plan_has_the_compiler_shape(news: Conn, query: str, opts: SearchOptions) -> None:
    """Same terms, candidate CTEs, depth, settings and statement skeleton as compile_query."""
    tree = parse(query)
    corpus = get_corpus(news, "news")
    compiled = compile_query(tree, corpus, replace(opts, guide=False))  # SQL has no guide scan
    vectors = {t: np.ones(corpus.dim, dtype=np.float32) for t in compiled.terms}
    plan = news.execute(
        "SELECT pglogic.search_plan('news', %s)", (Jsonb(search_json(tree, opts, vectors)),)
    ).fetchone()
    news.rollback()
    assert plan is not None
    p = plan[0]
    assert p["terms"] == compiled.terms
    assert p["candidate_terms"] == compiled.candidate_terms
    assert p["settings"] == compiled.settings
    if "depth" in compiled.params:  # one term compiles to plain k-NN in Python (no depth)
        assert p["depth"] == compiled.params["depth"]
    assert p["k"] == compiled.params["k"]
    assert p["operators"] == resolve_family(str(opts.operators)).spec
    statement = p["statement"]
    python_sql = compiled.as_string()
    # The SQL function keeps migration 0002's shape (columns carried through a materialized
    # sims); Python computes the similarities in the candidate CTEs, fetches the columns of the
    # top k only and runs one term as plain k-NN.
    single = len(compiled.terms) == 1 and not opts.exact
    for text, python in ((statement, False), (python_sql, True)):
        ctes = len(compiled.candidate_terms) + (0 if opts.exact or python else 1)  # + sims
        assert text.count("AS MATERIALIZED") == (1 if python and single else ctes)
        assert text.count(" UNION ") == max(0, len(compiled.candidate_terms) - 1)
        assert "ORDER BY score DESC, " in text
    assert statement.endswith("ORDER BY score DESC, id LIMIT $3")


def test_search_statement_is_served_by_the_hnsw_index(news: Conn) -> None:
    corpus = get_corpus(news, "news")
    tree = parse('"a" OR "b" AND NOT "c"')
    vecs = {t: np.random.default_rng(1).normal(size=corpus.dim) for t in ("a", "b", "c")}
    plan = news.execute(
        "SELECT pglogic.search_plan('news', %s)", (Jsonb(search_json(tree, None, vecs)),)
    ).fetchone()
    assert plan is not None
    news.execute("SET enable_seqscan = off")
    news.execute(
        sql.SQL("PREPARE q(vector[], integer, integer, text[]) AS {}").format(
            sql.SQL(plan[0]["statement"])
        )
    )
    args = sql.Literal([f"[{','.join(map(str, v))}]" for v in vecs.values()])
    explain = news.execute(
        sql.SQL("EXPLAIN EXECUTE q({}::vector[], 100, 10, ARRAY['a', 'b', 'c'])").format(args)
    ).fetchall()
    news.rollback()
    text = "\n".join(r[0] for r in explain)
    assert text.count(f"Index Scan using {corpus.index_name}") == 2, text


def test_search_settings_end_with_the_call(news: Conn) -> None:
    vec = [0.0] * 383 + [1.0]
    news.execute("SET hnsw.ef_search = 33")
    rows = news.execute(
        "SELECT count(*) FROM pglogic.search('news', %s)",
        (Jsonb({"tree": {"term": "x", "vector": vec}, "k": 5, "ef_search": 77}),),
    ).fetchone()
    assert rows == (5,)
    assert news.execute("SELECT current_setting('hnsw.ef_search')").fetchone() == ("33",)
    news.rollback()


def test_search_works_without_vector_on_the_search_path(news: Conn) -> None:
    news.execute("SET search_path = pg_catalog")
    rows = news.execute(
        "SELECT external_id FROM pglogic.search('news', %s::jsonb)",
        (Jsonb({"term": "x", "vector": [1.0] * 384}),),
    ).fetchall()
    news.rollback()
    assert len(rows) == 10


# -- the term cache --------------------------------------------------------------------------------


@pytest.mark.model
def test_term_cache_path_ranks_like_python(news: Conn, fixed: FixedEmbedder) -> None:
    query = '("gold" OR "silver") AND NOT "mining"'
    corpus = get_corpus(news, "news")
    assert cache_terms(news, corpus, query, embedder=fixed) == ["gold", "silver", "mining"]
    assert {"gold", "silver", "mining"} <= set(cached_terms(news, corpus.model))
    news.commit()
    opts = SearchOptions(k=10, operators="godel")
    hits = search(news, corpus, query, embedder=fixed, options=opts).hits
    tree = to_tree(query)
    rows = sql_search(news, "news", search_json(tree, opts))  # no vectors: all from the cache
    assert_same(hits, rows)
    # a vector in the tree wins over the cache; a term given only once still counts everywhere
    mixed = json_tree(tree)
    mixed["args"][0]["args"][0]["vector"] = [float(x) for x in fixed.embed(["gold"])[0]]
    assert_same(hits, sql_search(news, "news", {"tree": mixed, "operators": "godel"}))
    assert uncache_terms(news, corpus.model, ["mining"]) == 1
    exc = sql_error(news, "news", {"tree": json_tree(tree)})
    assert message(exc) == (
        "Term 'mining' has no vector and is not in pglogic.term_cache for model 'all-MiniLM-L6-v2'"
    )
    uncache_terms(news, corpus.model)
    assert cached_terms(news, corpus.model) == []


def test_cache_terms_checks_the_model_dimension(news: Conn) -> None:
    corpus = get_corpus(news, "news")

    class Tiny:
        name = "tiny"
        dim = 3

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            return np.ones((len(texts), 3), dtype=np.float32)

    with pytest.raises(PglogicError, match="makes 3-d vectors; corpus 'news' needs 384-d"):
        cache_terms(news, corpus, ["a"], embedder=Tiny())
    with pytest.raises(PglogicError, match="Invalid term ' '"):
        cache_terms(news, corpus, ["a", " "], embedder=Tiny())


# -- errors ------------------------------------------------------------------------------------------

VEC = [0.5] * 384


def test_unknown_corpus(news: Conn) -> None:
    exc = sql_error(news, "nope", {"term": "a", "vector": VEC})
    assert isinstance(exc, errors.UndefinedObject)
    assert message(exc) == "Unknown corpus 'nope'; existing: news"


def test_no_positive_term_needs_exact(news: Conn) -> None:
    tree = {"op": "not", "arg": {"term": "a", "vector": VEC}}
    exc = sql_error(news, "news", {"tree": tree})
    assert isinstance(exc, errors.InvalidParameterValue)
    assert message(exc) == (
        "The query has no positive term to find candidates with (every term is negated); "
        'set "exact": true to scan every document'
    )
    assert len(sql_search(news, "news", {"tree": tree, "exact": True, "k": 3})) == 3


@pytest.mark.parametrize(
    "operators",
    ["fuzzy", "and=foo", "or=min", "not=max", "and=min,and=sum", "xor=min", "itlr[min,max]",
     "itlr:min/max/xor", "and"],
)  # fmt: skip
def test_bad_operator_names_give_the_python_message(news: Conn, operators: str) -> None:
    with pytest.raises(PglogicError) as python:
        resolve_family(operators)
    exc = sql_error(news, "news", {"tree": {"term": "a", "vector": VEC}, "operators": operators})
    assert isinstance(exc, errors.InvalidParameterValue)
    assert message(exc) == str(python.value)


@pytest.mark.parametrize("truth", ["sigmoid", "sigmoid:0.2:-1", "sigmoid:x:1", "sigmoid:0.2:inf"])
def test_bad_truth_and_k_give_the_python_message(news: Conn, truth: str) -> None:
    with pytest.raises(PglogicError) as python:
        resolve_truth(truth)
    exc = sql_error(news, "news", {"tree": {"term": "a", "vector": VEC}, "truth": truth})
    assert message(exc) == str(python.value)
    exc = sql_error(news, "news", {"tree": {"term": "a", "vector": VEC}, "k": 0})
    assert message(exc) == "Invalid k=0: must be at least 1"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"tree": {"term": "a", "vector": VEC}, "K": 3},
         "Unknown option 'K' in the query: valid options are tree, operators, truth, k, exact, "
         "depth, ef_search, iterative_scan"),
        ({"tree": {"term": "a", "vector": VEC}, "k": "ten"}, 'Invalid k="ten": expected an integer'),
        ({"tree": {"term": "a", "vector": VEC}, "exact": "yes"},
         'Invalid exact="yes": expected true or false'),
        ({"tree": {"term": "a", "vector": VEC}, "k": 1001},
         'k=1001 is above 1000, the most an HNSW scan returns; set "exact": true'),
        ({"tree": {"term": "a", "vector": VEC}, "ef_search": 0},
         "Invalid ef_search=0: pgvector accepts 1 to 1000"),
        ({"tree": {"term": "a", "vector": VEC}, "depth": 2000, "iterative_scan": False},
         "depth=2000 is above 1000 without iterative scans"),
        ({"k": 3}, 'The query has no "tree": give {"tree": {...}, "k": 10, ...} or a bare tree '
                   'like {"op": "and", "args": [...]}'),
        ({"op": "and", "args": [{"term": "a", "vector": VEC}]},
         'An "and" node needs two or more operands in "args": '
         + json.dumps({"op": "and", "args": [{"term": "a", "vector": VEC}]})[:97] + "..."),
        ({"op": "xor", "args": ["a", "b"]},
         'Unknown operator "xor" in query node {"op": "xor", "args": ["a", "b"]}: expected '
         '"and", "or" or "not"'),
        ({"op": "not"}, 'A "not" node takes one operand in "arg": {"op": "not"}'),
        ({"term": " "}, 'Invalid term " ": a term is a non-blank string'),
        ({"term": "a", "vector": [1, 2, 3]},
         "The vector of term 'a' has 3 dimensions; corpus 'news' needs 384 "
         "(model 'all-MiniLM-L6-v2')"),
        ({"op": "or", "args": [{"term": "a", "vector": VEC}, {"term": "a", "vector": [1.0] * 384}]},
         "Term 'a' is given two different vectors"),
        ({"term": "a", "vector": 5}, "Invalid vector for term 'a': expected an array of numbers"),
    ],
)  # fmt: skip
def test_malformed_queries_have_clear_messages(news: Conn, query: Any, expected: str) -> None:
    exc = sql_error(news, "news", query)
    assert isinstance(exc, errors.InvalidParameterValue)
    assert message(exc) == expected


# -- migration -------------------------------------------------------------------------------------


def test_downgrade_0002_removes_functions_and_cache(dsn: str) -> None:
    def objects() -> tuple[int, bool, bool]:
        with connect(dsn) as c:
            row = c.execute(
                "SELECT (SELECT count(*) FROM pg_proc WHERE pronamespace = 'pglogic'::regnamespace),"
                " to_regclass('pglogic.term_cache') IS NOT NULL,"
                " has_schema_privilege('pglogic_reader', 'pglogic', 'USAGE')"
            ).fetchone()
        assert row is not None
        return int(row[0]), bool(row[1]), bool(row[2])

    assert migrate.current(dsn) == migrate.head()
    assert objects() == (25, True, True)
    migrate.downgrade(dsn, "0001")
    assert objects() == (0, False, False)
    migrate.upgrade(dsn)
    assert objects() == (25, True, True)


def all_functions(dsn: str) -> dict[str, str]:
    """``pg_get_functiondef`` of every pglogic function, by signature."""
    with connect(dsn) as c:
        rows = c.execute(
            "SELECT oid::regprocedure::text, pg_get_functiondef(oid) FROM pg_proc"
            " WHERE pronamespace = 'pglogic'::regnamespace"
        ).fetchall()
    return dict(rows)


def test_migration_0003_sets_the_default_family_and_downgrades(dsn: str) -> None:
    def default() -> list[str]:
        with connect(dsn) as c:
            row = c.execute("SELECT pglogic._resolve_operators(NULL)").fetchone()
        assert row is not None
        return list(row[0])

    migrate.downgrade(dsn, "0003")
    at_0003 = all_functions(dsn)
    assert default() == ["product", "max", "complement"]
    migrate.downgrade(dsn, "0002")
    assert default() == ["product", "sum", "complement"]
    at_0002 = all_functions(dsn)
    # 0003 changed this one function and nothing else
    assert {f for f in at_0003 if at_0003[f] != at_0002.get(f)} == {
        "pglogic._resolve_operators(jsonb)"
    }
    assert set(at_0002) == set(at_0003)
    migrate.upgrade(dsn, "0003")
    assert all_functions(dsn) == at_0003
    migrate.upgrade(dsn)
    assert default() == ["product", "max", "complement"]


def test_migration_0004_adds_calibration_and_downgrades(dsn: str) -> None:
    changed = ("_resolve_truth(jsonb)", "_score_sql(jsonb, text[], text[], text)",
               "_plan(text, jsonb)")  # fmt: skip

    def state() -> dict[str, Any]:
        with connect(dsn) as c:
            defs = {
                f: c.execute(
                    "SELECT pg_get_functiondef(%s::regprocedure)", (f"pglogic.{f}",)
                ).fetchone()[0]  # type: ignore[index]
                for f in changed
            }
            row = c.execute(
                "SELECT to_regclass('pglogic.calibration') IS NOT NULL,"
                " to_regprocedure('pglogic._float_text(double precision)') IS NOT NULL,"
                " (SELECT array_to_string(proconfig, ',') FROM pg_proc"
                "  WHERE oid = 'pglogic._plan(text, jsonb)'::regprocedure),"
                " CASE WHEN to_regclass('pglogic.calibration') IS NOT NULL THEN"
                "  has_table_privilege('pglogic_reader', 'pglogic.calibration', 'SELECT') END"
            ).fetchone()
        assert row is not None
        return {"defs": defs, "table": row[0], "float_text": row[1], "plan_config": row[2],
                "reader": row[3]}  # fmt: skip

    def truth(spec: str) -> str:
        with connect(dsn) as c:
            try:
                row = c.execute("SELECT pglogic._resolve_truth(%s)", (Jsonb(spec),)).fetchone()
            except psycopg.Error as exc:
                return message(exc)
        assert row is not None
        return str(row[0])

    head = state()
    head_functions = all_functions(dsn)
    assert head["table"] and head["float_text"] and head["reader"]
    assert head["plan_config"].startswith("search_path=pg_catalog, ")
    assert truth("sigmoid:0.1:2") == "sigmoid:0.1:2.0"
    assert truth("calibrated") == "calibrated"
    migrate.downgrade(dsn, "0003")
    old = state()
    assert (old["table"], old["float_text"], old["reader"]) == (False, False, None)
    assert old["plan_config"] == head["plan_config"]
    for f in changed:
        assert old["defs"][f] != head["defs"][f]
        assert "calibrat" not in old["defs"][f] and "sigmoid" not in old["defs"][f]
    old_functions = all_functions(dsn)
    # 0004 changed those three, added _float_text and left every other function as it was
    assert set(head_functions) - set(old_functions) == {"pglogic._float_text(double precision)"}
    # (regprocedure writes no space after the commas)
    assert {f for f in old_functions if old_functions[f] != head_functions[f]} == {
        f"pglogic.{f}".replace(", ", ",") for f in changed
    }
    assert truth("sigmoid:0.1:2") == (
        "Unknown truth map 'sigmoid:0.1:2': valid names are clamp, affine"
    )
    migrate.upgrade(dsn)
    assert state() == head
    migrate.downgrade(dsn, "0003")
    assert state() == old


def test_sql_files_ship_in_the_package() -> None:
    names = {p.name for p in resource_dir("sql").iterdir()}
    assert {"operators.sql", "search.sql", "reader.sql", "install.sql"} <= names
