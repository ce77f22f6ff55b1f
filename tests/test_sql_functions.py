"""The SQL functions of migrations 0002-0007: fuzzy operators, pglogic.search, the term cache.

The operators are checked against their NumPy faces on a grid; ``pglogic.search`` is checked
against the Python path (``pglogic.store.search.search``) on 200 real Reuters documents embedded
with all-MiniLM-L6-v2, at default options (guide scan, guide-only and union plans) and others,
filters included: same ids in the same order, scores and similarities to 1e-9. The statement
``pglogic.search_plan`` shows is the compiler's, text for text, for every query shape and plan
(a 20,000-row synthetic corpus gives the filtered plans); the planning heuristics, the guide
vector and the filters' SQL are compared one by one. Lexical terms (``{"match": ...}``, since
migration 0007) are compared the same ways: ranks, truth values and statements. The Reuters
corpus has passages (the default of new corpora): since migration 0010 both paths search them;
tests/test_sql_passages.py compares passage corpora specifically.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import uuid
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
from pglogic.engine.conjunction import scored_terms
from pglogic.engine.filters import FORMS, Comparison, filters_sql, parse_filter
from pglogic.engine.guide import guide_vector
from pglogic.engine.operators import (
    AND_OPS,
    NOT_OPS,
    OR_OPS,
    TRUTH_MAPS,
    resolve_family,
    resolve_truth,
)
from pglogic.engine.plans import (
    default_depth,
    guide_depth,
    guide_only_depth,
    guide_suffices,
    prefer_exact,
    union_plan,
    union_suffices,
)
from pglogic.engine.render import filter_json, function_statement, json_tree, search_json
from pglogic.engine.source import Corpus
from pglogic.errors import PglogicError
from pglogic.eval.calibrate import Calibration
from pglogic.query import (
    matches,
    parse,
    positive_terms,
    semantic_part,
    terms,
    to_text,
    to_tree,
)
from pglogic.resources import resource_dir
from pglogic.store import migrate
from pglogic.store.calibration_store import (
    delete_calibration,
    resolve_stored_truth,
    save_calibration,
)
from pglogic.store.corpus import create_corpus, get_corpus
from pglogic.store.db import connect
from pglogic.store.lexical import add_lexical_index
from pglogic.store.passages import passage_index_name
from pglogic.store.search import Hit, estimate_filter, search
from pglogic.store.term_cache import cache_terms, cached_terms, uncache_terms
from tests.conftest import TEMPLATE_DB, Server, head_functions, reuters_database

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
    """A database with corpus 'news': 200 Reuters documents, HNSW index; their metadata also
    holds a number n, a numeric string ns and a number or a string x, for the filters; a lexical
    index (english)."""
    for dsn in reuters_database(pg_server, "t_sqlfn", 200):
        with connect(dsn) as c:
            corpus = get_corpus(c, "news")
            if corpus.lexical_config != "english":
                add_lexical_index(c, corpus, "english")
            table = corpus.table
            c.execute(
                sql.SQL(
                    "UPDATE {} SET metadata = metadata || jsonb_build_object('n', id % 10,"
                    " 'ns', (id % 7)::text, 'x', CASE WHEN id % 3 = 0 THEN to_jsonb(1.5)"
                    " ELSE to_jsonb('abc'::text) END)"
                ).format(table)
            )
            c.commit()
            c.execute(sql.SQL("ANALYZE {}").format(table))
            c.commit()
        yield dsn


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
            "SELECT id, external_id, title, metadata, score, similarities, lexical"
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
    assert [r[0] for r in rows] == [h.row_id for h in hits]
    for h, (_id, ext, title, metadata, score, sims, lexical) in zip(hits, rows, strict=True):
        assert (ext, title, metadata) == (h.external_id, h.title, h.metadata)
        assert abs(score - h.score) <= 1e-9, (h.external_id, score, h.score)
        assert set(sims) == set(h.similarities)
        for term, value in h.similarities.items():
            assert abs(sims[term] - value) <= 1e-9
        assert set(lexical) == set(h.lexical)
        for text, value in h.lexical.items():
            assert abs(lexical[text] - value) <= 1e-9


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


# -- pglogic.search: parity with the Python search -------------------------------------------------

QUERIES = [
    '"oil prices" AND "opec"',
    '"grain exports" OR "wheat harvest"',
    '"crude oil" AND NOT "natural gas"',
    '("gold" OR "silver") AND NOT ("mining" OR "strike")',
    '"bank" AND NOT "interest rates" OR "bank" AND "loans"',
    '"coffee" AND NOT NOT "brazil" AND NOT "cocoa"',
]
FAMILIES = ["itlr", "godel", "lukasiewicz", "product", "and=sum,or=max,not=reciprocal"]


def function_json(
    tree: Any, opts: SearchOptions, vectors: dict[str, Any] | None = None
) -> dict[str, Any]:
    """:func:`search_json` with the option ``"passages": false`` when ``opts.passages`` is off
    (since migration 0010: the documents' own vectors of a corpus with passages)."""
    query_json = search_json(tree, opts, vectors)
    if not opts.passages:
        query_json["passages"] = False
    return query_json


def python_and_sql(
    news: Conn,
    fixed: FixedEmbedder,
    query: str,
    opts: SearchOptions,
    *,
    guide: bool = True,
    corpus_name: str = "news",
) -> tuple[list[Hit], list[tuple[Any, ...]]]:
    """The Python search's hits and the SQL function's rows, with the same options: the JSON
    carries the term vectors and, with ``guide``, the guide vector Python computed (else the
    function computes it)."""
    corpus = get_corpus(news, corpus_name)
    news.commit()
    result = search(news, corpus, query, embedder=fixed, options=opts)
    vectors = {t: fixed.embed([t])[0] for t in result.compiled.terms}
    query_json = function_json(result.tree, opts, vectors)
    if not guide:
        del query_json["guide"]
    rows = sql_search(news, corpus_name, query_json)
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
@pytest.mark.parametrize("k", [10, 100])
@pytest.mark.parametrize("query", [*QUERIES, '"sugar"', '"trade deficit" AND "japan"'])
def test_search_function_with_default_options_ranks_like_python(
    news: Conn, fixed: FixedEmbedder, query: str, k: int
) -> None:
    """Default options: the guide scan, the guide-only plan (AND, NOT), the union plan (OR)."""
    hits, rows = python_and_sql(news, fixed, query, SearchOptions(k=k))
    assert len(hits) == k
    assert_same(hits, rows)
    # the guide computed by the function (double precision, in SQL) ranks the same
    _, computed = python_and_sql(news, fixed, query, SearchOptions(k=k), guide=False)
    assert_same(hits, computed)


@pytest.mark.model
def test_the_guide_computed_in_sql_is_numpys(news: Conn, fixed: FixedEmbedder) -> None:
    """pglogic._guide_vector against pglogic.engine.guide.guide_vector on real term vectors, for
    every query that scans along its guide (not an OR of terms under max: the union plan)."""
    queries = [*QUERIES, '"trade deficit" AND "japan" AND NOT "tariffs"']
    for family in ["product-max", "itlr", "godel"]:
        for query in queries:
            tree = parse(query)
            if union_plan(tree, SearchOptions(operators=family)):
                continue
            names = terms(tree)
            vectors = {t: fixed.embed([t])[0] for t in names}
            expected = guide_vector(tree, vectors, family, "clamp")
            row = news.execute(
                "SELECT pglogic._guide_vector(%s, %s, %s, %s::vector[],"
                " pglogic._resolve_operators(%s), 'clamp')::real[]",
                (Jsonb(json_tree(tree)), names, positive_terms(tree),
                 [vectors[t] for t in names], Jsonb(family)),
            ).fetchone()  # fmt: skip
            assert row is not None
            got = np.array(row[0], dtype=np.float32)
            cosine = float(got.astype(np.float64) @ expected / np.linalg.norm(got))
            assert cosine > 1 - 1e-6, (query, family, cosine)
            assert np.abs(got - expected).max() < 1e-6, (query, family)


@pytest.mark.model
@pytest.mark.parametrize("family", ["itlr", "godel"])
def test_search_function_ranks_like_python_through_the_index(
    news: Conn, fixed: FixedEmbedder, family: str
) -> None:
    """With sequential scans off, both paths read candidates from the HNSW index: the
    passages' (the corpus has passages, since migration 0010 searched by the function too), or
    the documents' with ``passages`` off."""
    news.execute("SET enable_seqscan = off")
    news.commit()
    corpus = get_corpus(news, "news")
    for passages, index in ((True, hnsw_index(corpus, True)), (False, corpus.index_name)):
        opts = SearchOptions(k=10, operators=family, passages=passages)
        compiled = compile_query(parse(QUERIES[3]), corpus, opts)
        params = compiled.with_vectors({t: fixed.embed([t])[0] for t in compiled.terms})
        plan = news.execute(sql.SQL("EXPLAIN ") + compiled.statement, params).fetchall()
        news.rollback()
        assert f"Index Scan using {index}" in "\n".join(r[0] for r in plan)
        for query in QUERIES:
            hits, rows = python_and_sql(news, fixed, query, opts)
            assert_same(hits, rows)


def hnsw_index(corpus: Corpus, passages: bool) -> str | None:
    """The HNSW index a statement over ``corpus`` scans: its passages' (a corpus with passages,
    ``passages`` on), else its documents'."""
    if passages and corpus.passage_table is not None:
        return passage_index_name(corpus, corpus.column)
    return corpus.index_name


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
        SearchOptions(k=10, guide=False),
        SearchOptions(k=10, term_scans=True),
        SearchOptions(k=10, term_scans=False),
        SearchOptions(k=10, iterative_scan=False),
        SearchOptions(k=10, filters=[parse_filter("labels=grain")]),
        SearchOptions(k=10, filters=[parse_filter("n>=5")], depth=40),
        SearchOptions(k=20, filters=[parse_filter("places!=usa"), parse_filter("ns<3")]),
        SearchOptions(k=10, filters=[parse_filter("split=train")], depth=30,
                      iterative_scan=False),
    ],
    ids=["affine", "godel-affine", "iterative", "small-depth", "exact", "exact-all", "sigmoid",
         "godel-sigmoid-exact", "no-guide", "term-scans", "guide-only", "no-iterative",
         "filter", "filter-depth", "filters", "filter-overfetch"],
)  # fmt: skip
def test_search_function_options_rank_like_python(
    news: Conn, fixed: FixedEmbedder, opts: SearchOptions
) -> None:
    for query in QUERIES[2:5]:
        hits, rows = python_and_sql(news, fixed, query, opts)
        assert hits
        assert_same(hits, rows)


@pytest.mark.model
@pytest.mark.parametrize(
    "where",
    [["labels=grain"], ["labels!=grain"], ['{"places": ["usa"]}'], ["n>=5"], ["n<2.5"],
     ["ns>=4"], ["ns=3"], ["n=3"], ["x>1"], ["x<b"], ["x!=abc"], ["title_only=false"],
     ["date>=26-MAR-1987"], ["missing!=1"], ["missing>1"], ["n>=2", "labels!=acq"]],
)  # fmt: skip
def test_filters_select_like_python(news: Conn, fixed: FixedEmbedder, where: list[str]) -> None:
    """Every filter form, exact (every matching row) and approximate (depth given)."""
    filters = [parse_filter(w) for w in where]
    for opts in (SearchOptions(k=200, exact=True, filters=filters),
                 SearchOptions(k=10, depth=60, filters=filters)):  # fmt: skip
        hits, rows = python_and_sql(news, fixed, '"oil" AND NOT "gas"', opts)
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
                hits, rows = python_and_sql(news, fixed, query, opts)  # the guide: computed
                assert hits
                assert_same(hits, rows)
                spec = resolve_stored_truth(news, corpus, "calibrated")
                assert spec == ("sigmoid:0.1857:18.76" if own is None else "sigmoid:0.25:12.5")
                hits_spec, _ = python_and_sql(news, fixed, query, replace(opts, truth=spec))
                assert [(h.row_id, h.score) for h in hits_spec] == [
                    (h.row_id, h.score) for h in hits
                ]
    finally:
        delete_calibration(news, corpus.model, corpus.id)
        delete_calibration(news, corpus.model)


@pytest.mark.model
def test_exact_mode_scores_every_document_like_python(news: Conn, fixed: FixedEmbedder) -> None:
    opts = SearchOptions(k=500, exact=True)
    hits, rows = python_and_sql(news, fixed, 'NOT "oil" AND NOT "grain"', opts)
    assert len(hits) == 200
    assert_same(hits, rows)


#: The parameter types of the statement of ``pglogic.search_plan`` ($1 to $9; $9, the scored
#: texts, since 0015: a negated term's phrase match, not_mention).
PARAMETER_TYPES = "vector[], vector, integer, integer, integer, text[], text, text[], text[]"


def run_statement(conn: Conn, plan: dict[str, Any], vectors: list[list[float]]) -> list[Any]:
    """Run the statement of ``pglogic.search_plan`` with its parameters and settings."""
    conn.execute(
        sql.SQL("PREPARE q({}) AS {}").format(sql.SQL(PARAMETER_TYPES), sql.SQL(plan["statement"]))
    )
    for name, value in plan["settings"].items():
        conn.execute("SELECT set_config(%s, %s, true)", (name, value))
    texts = [f"[{','.join(map(str, v))}]" for v in vectors]
    guide = None if plan["guide"] is None else f"[{','.join(map(str, plan['guide']))}]"
    values = (texts, guide, plan["depth"], plan["gdepth"], plan["k"], plan["filter_values"],
              plan["text_config"], plan["lexical"], plan["terms"])  # fmt: skip
    rows = conn.execute(  # (EXECUTE takes no bind parameters: literals)
        sql.SQL(
            "EXECUTE q({}::text[]::vector[], {}::vector, {}::int, {}::int, {}::int, {}::text[],"
            " {}::text, {}::text[], {}::text[])"
        ).format(*map(sql.Literal, values))
    ).fetchall()
    conn.execute("DEALLOCATE q")
    return rows


class GivenVectors:
    """An embedder of fixed vectors."""

    name = "given"
    dim = 384

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


def test_a_filtered_scan_that_returns_too_few_rows_falls_back_to_the_exact_plan(
    news: Conn,
) -> None:
    """A filtered index scan that stops early (here: 10 tuples, no iterative scan) finds fewer
    than the k rows that match: the function then scores every matching row (the exact plan),
    as the Python search does, and returns k."""
    vectors = {"a": [float(x) for x in np.random.default_rng(3).normal(size=384)], "b": VEC}
    opts = SearchOptions(filters=[parse_filter("n>8")], depth=10, ef_search=10,
                         iterative_scan=False)  # fmt: skip
    tree = parse('"a" AND NOT "b"')
    query = search_json(tree, opts, vectors)
    news.execute("SET enable_seqscan = off")
    row = news.execute("SELECT pglogic.search_plan('news', %s)", (Jsonb(query),)).fetchone()
    assert row is not None
    plan = row[0]
    assert (plan["plan"], plan["k"], plan["gdepth"]) == ("guide", 10, 10)
    assert plan["settings"] == {"hnsw.ef_search": "10", "plan_cache_mode": "force_custom_plan"}
    assert plan["exact_fallback"].startswith("WITH sims AS (SELECT")
    found = run_statement(news, plan, [vectors["a"], vectors["b"]])
    assert len(found) < 10
    news.rollback()
    news.execute("SET enable_seqscan = off")
    rows = sql_search(news, "news", query)
    assert len(rows) == 10
    assert rows == sql_search(news, "news", {**query, "exact": True})
    corpus = get_corpus(news, "news")
    news.commit()
    result = search(news, corpus, tree, embedder=GivenVectors(vectors), options=opts)
    assert_same(result.hits, rows)


# -- lexical terms (match, since migration 0007) ---------------------------------------------------

LEXICAL_QUERIES = [
    '"grain exports" AND NOT match:wheat',  # a lexical NOT: no lexical scan
    '"crude oil" OR match:opec',  # a lexical OR: its own scan of the GIN index
    'match:"natural gas" AND "prices"',  # a phrase
    '"trade" AND match:japan AND "deficit"',  # two terms, a lexical term, the guide, an AND text
    'match:oil AND NOT match:"natural gas"',  # lexical terms only
    "match:wheat",
]


@pytest.mark.model
@pytest.mark.parametrize("lexical", ["crisp", "rank"])
@pytest.mark.parametrize("query", LEXICAL_QUERIES)
def test_lexical_terms_rank_like_python(
    news: Conn, fixed: FixedEmbedder, query: str, lexical: str
) -> None:
    """Approximate (the lexical scans, the guide given or computed in SQL) and exact: the same
    ids, scores, similarities and lexical truth values."""
    for exact in (False, True):
        opts = SearchOptions(k=10, lexical=lexical, exact=exact)
        hits, rows = python_and_sql(news, fixed, query, opts)
        # candidates from lexical scans only: the matching documents, however few
        assert len(hits) == 10 or (not exact and query.startswith("match:"))
        assert_same(hits, rows)
        _, computed = python_and_sql(news, fixed, query, opts, guide=False)
        assert_same(hits, computed)
    everything = SearchOptions(k=200, lexical=lexical, exact=True)
    hits, rows = python_and_sql(news, fixed, query, everything)
    assert_same(hits, rows)
    values = {v for h in hits for v in h.lexical.values()}
    assert 0.0 in values and max(values) > 0  # the words match some documents, not all
    if lexical == "rank":  # r / (r + 1): in (0, 1), not 1 / 0
        assert max(values) < 1


@pytest.mark.model
def test_a_lexical_not_drops_every_document_with_the_word(news: Conn, fixed: FixedEmbedder) -> None:
    hits, rows = python_and_sql(news, fixed, LEXICAL_QUERIES[0], SearchOptions(k=50))
    assert_same(hits, rows)
    assert {r[6]["wheat"] for r in rows} == {0.0}  # the 50 best name no wheat
    every, _ = python_and_sql(news, fixed, LEXICAL_QUERIES[0], SearchOptions(k=200, exact=True))
    named = [h for h in every if h.lexical["wheat"] == 1.0]
    assert named and {h.score for h in named} == {0.0}


@pytest.mark.model
@pytest.mark.parametrize(
    "opts",
    [
        SearchOptions(k=10, operators="godel"),
        SearchOptions(k=10, operators="itlr", lexical="rank"),
        SearchOptions(k=5, operators="lukasiewicz", truth="affine"),
        SearchOptions(k=10, operators="and=min,or=probsum,not=complement^2", truth="sigmoid:0.2:10"),
        SearchOptions(k=10, and_text=0),
        SearchOptions(k=25, depth=30),
        SearchOptions(k=10, guide=False),
        SearchOptions(k=10, term_scans=True),
        SearchOptions(k=10, term_scans=False),
        SearchOptions(k=10, depth=150, ef_search=50),
    ],
    ids=["godel", "itlr-rank", "lukasiewicz-affine", "min-probsum-sigmoid", "no-and-text",
         "small-depth", "no-guide", "term-scans", "guide-only", "iterative"],
)  # fmt: skip
def test_lexical_terms_with_options_rank_like_python(
    news: Conn, fixed: FixedEmbedder, opts: SearchOptions
) -> None:
    for query in LEXICAL_QUERIES:
        hits, rows = python_and_sql(news, fixed, query, opts)
        # (candidates from lexical scans only: the matching documents, however few)
        assert len(hits) == opts.k or query.startswith("match:")
        assert_same(hits, rows)


@pytest.mark.model
@pytest.mark.parametrize(
    "where", [["n>=5"], ["labels!=grain"], ["n=3"], ['{"places": ["usa"]}']], ids=str
)
@pytest.mark.parametrize("lexical", ["crisp", "rank"])
def test_filtered_lexical_terms_rank_like_python(
    news: Conn, fixed: FixedEmbedder, where: list[str], lexical: str
) -> None:
    filters = [parse_filter(w) for w in where]
    for opts in (SearchOptions(k=10, filters=filters, lexical=lexical),
                 SearchOptions(k=10, filters=filters, lexical=lexical, iterative_scan=False),
                 SearchOptions(k=10, filters=filters, lexical=lexical, exact=True)):  # fmt: skip
        for query in LEXICAL_QUERIES:
            hits, rows = python_and_sql(news, fixed, query, opts)
            assert len(hits) == 10 or (not opts.exact and query.startswith("match:"))
            assert_same(hits, rows)


#: Queries whose plan turns on pglogic.engine.plans.guide_suffices with a lexical term in the
#: walk (it holds like a term: a positive one needs a scan of its own).
GUIDE_WALK_QUERIES = [
    ('"trade" AND "deficit" AND NOT match:japan', SearchOptions(k=10)),
    ('("gold" OR "silver") AND NOT match:mining', SearchOptions(k=10, lexical="rank")),
    ('"trade" AND match:japan AND "deficit"',
     SearchOptions(k=10, depth=50, filters=[parse_filter("n>=2")])),
    ('("oil" OR match:opec) AND "prices"', SearchOptions(k=10, filters=[parse_filter("n>=2")])),
]  # fmt: skip


@pytest.mark.model
def test_lexical_terms_in_the_guide_walk_plan_like_python(news: Conn, fixed: FixedEmbedder) -> None:
    """A negated lexical term leaves the guide's scan alone where the formula's other terms
    would; a positive one keeps every scan (its own, the terms', the guide's)."""
    plans = []
    for query, opts in GUIDE_WALK_QUERIES:
        hits, rows = python_and_sql(news, fixed, query, opts)
        assert len(hits) == 10
        assert_same(hits, rows)
        _, computed = python_and_sql(news, fixed, query, opts, guide=False)
        assert_same(hits, computed)
        tree = parse(query)
        texts = scored_terms(tree, opts.and_text)
        query_json = search_json(tree, opts, {t: fixed.embed([t])[0] for t in texts})
        row = news.execute("SELECT pglogic.search_plan('news', %s)", (Jsonb(query_json),))
        plans.append(row.fetchone()[0])  # type: ignore[index]
        news.rollback()
        if query == GUIDE_WALK_QUERIES[0][0]:  # crisp: a document that names Japan scores 0
            assert {r[6]["japan"] for r in rows} == {0.0}
    assert [p["plan"] for p in plans] == ["guide", "terms", "terms", "exact"]
    assert [p["candidate_lexical"] for p in plans] == [[], [], ["japan"], []]
    assert '"x0" AS MATERIALIZED' in plans[2]["statement"]


def test_lexical_scans_use_the_gin_index(news: Conn) -> None:
    corpus = get_corpus(news, "news")
    tree = parse('"a" OR match:wheat AND NOT match:corn')
    vecs = {"a": np.random.default_rng(1).normal(size=corpus.dim)}
    row = news.execute(
        "SELECT pglogic.search_plan('news', %s)", (Jsonb(search_json(tree, None, vecs)),)
    ).fetchone()
    assert row is not None
    plan = row[0]
    assert (plan["plan"], plan["lexical"], plan["candidate_lexical"]) == (
        "terms", ["wheat", "corn"], ["wheat"]
    )  # fmt: skip
    assert (plan["text_config"], plan["lexical_truth"]) == ("english", "crisp")
    news.execute("SET enable_seqscan = off")
    news.execute(
        sql.SQL("PREPARE q({}) AS {}").format(sql.SQL(PARAMETER_TYPES), sql.SQL(plan["statement"]))
    )
    args = sql.Literal([f"[{','.join(map(str, v))}]" for v in vecs.values()])
    explain = news.execute(
        sql.SQL(
            "EXPLAIN EXECUTE q({}::vector[], NULL, 100, 200, 10, '{{}}', 'english',"
            " '{{wheat,corn}}', {}::text[])"
        ).format(args, sql.Literal(plan["terms"]))
    ).fetchall()
    news.rollback()
    text = "\n".join(r[0] for r in explain)
    # the positive term's HNSW scan, the positive lexical term's GIN scan (not the negated one's)
    index = hnsw_index(corpus, plan["passages"] is not None)
    assert text.count(f"Index Scan using {index}") == 1, text
    assert text.count(f"Bitmap Index Scan on {corpus.table_name}_tsv") == 1, text


@pytest.mark.parametrize(
    "text",
    ['"a" AND NOT match:x OR match:y AND "b"', "match:x AND NOT match:y", '"a" OR match:x',
     '("a" OR match:x) AND NOT ("b" AND match:y AND "c")', 'NOT (match:x OR NOT "a")',
     '"a" AND ("b" OR match:x) AND NOT match:z', '(match:x OR "a" AND "b") AND "c"'],
)  # fmt: skip
def test_the_lexical_tree_functions_are_pythons(conn: Conn, text: str) -> None:
    """pglogic._semantic_part, _to_text, _and_texts, _guide_suffices and _union_suffices on
    trees with lexical terms, against pglogic.query and pglogic.engine."""
    tree = parse(text)
    node = Jsonb(json_tree(tree))
    semantic = semantic_part(tree)
    row = conn.execute(
        "SELECT pglogic._semantic_part(%s), pglogic._to_text(%s), pglogic._and_texts(%s, %s),"
        " pglogic._guide_suffices(%s), pglogic._union_suffices(%s, 'max')",
        (node, node, node, terms(tree), node, node),
    ).fetchone()
    assert row is not None
    assert row[0] == (None if semantic is None else json_tree(semantic))
    assert row[1] == to_text(tree)
    assert row[2] == scored_terms(tree, 1)
    assert row[3] == guide_suffices(tree)
    assert row[4] == union_suffices(tree, resolve_family("product-max"))


@pytest.mark.parametrize("lexical", ["crisp", "rank"])
@pytest.mark.parametrize("family", ["product-max-strong", "godel", "itlr", "lukasiewicz"])
def test_lexical_score_expressions_are_pythons(conn: Conn, family: str, lexical: str) -> None:
    """pglogic._score_sql with lexical terms, text for text pglogic.engine.operators.to_sql."""
    corpus = Corpus(1, "news", "corpus_1", "m", 4, "cosine", "embedding", None, None, "english")
    for text in ['"a" AND NOT match:x', 'match:x OR match:y AND NOT "a"',
                 '"a" AND "b" AND NOT (match:x OR match:"y z")', 'NOT match:x']:  # fmt: skip
        tree = parse(text)
        compiled = compile_query(tree, corpus, SearchOptions(operators=family, lexical=lexical,
                                                            exact=True))  # fmt: skip
        python = compiled.as_string().split('FROM (SELECT "id", ')[1].split(" AS score")[0]
        row = conn.execute(
            "SELECT pglogic._score_sql(%s, %s, pglogic._resolve_operators(%s), 'clamp', 4, %s)",
            (Jsonb(json_tree(tree)), compiled.terms, Jsonb(family), matches(tree)),
        ).fetchone()
        assert row == (python,), text


# -- pglogic.search_plan: the compiler's statement, text for text ----------------------------------


class RandomEmbedder:
    """A deterministic random unit vector per term (no model): plans do not read the vectors."""

    name = "synthetic"
    dim = 384

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=self.dim)
            out[i] = v / np.linalg.norm(v)
        return out


@pytest.fixture(scope="module")
def synth_dsn(pg_server: Server) -> Iterator[str]:
    """Corpus 'synth': 20,000 random vectors (no index) with metadata of every filter type, so
    filtered plans of every kind (exact, filtered scans, the thinned guide-only depth) occur, and
    texts of a few words for its lexical index (english)."""
    name = f"t_sqlplan_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = pg_server.dsn_for(name)
        with connect(dsn) as c:
            corpus = create_corpus(c, "synth", model="synthetic", dim=384)
            if corpus.lexical_config != "english":
                corpus = add_lexical_index(c, corpus, "english")
            c.execute(
                sql.SQL(
                    "INSERT INTO {} (external_id, title, text, metadata, text_hash, row_hash,"
                    " embedding) SELECT 's' || i, NULL, CASE WHEN i % 26 = 0 THEN 'durum wheat'"
                    " WHEN i % 13 = 0 THEN 'wheat harvest' WHEN i % 17 = 0 THEN 'corn exports'"
                    " ELSE 't' END, jsonb_build_object('n', i % 10,"
                    " 'ns', (i % 7)::text, 'x', CASE WHEN i % 3 = 0 THEN to_jsonb(1.5)"
                    " ELSE to_jsonb('abc'::text) END, 'tag', CASE WHEN i % 200 = 0 THEN 'rare'"
                    " ELSE 'common' END), '\\x00', '\\x00', (SELECT array_agg(random() - 0.5)"
                    " FROM generate_series(1, 384) WHERE i > 0)::vector"
                    " FROM generate_series(1, 20000) AS i"
                ).format(corpus.table)
            )
            c.commit()
            c.execute(sql.SQL("ANALYZE {}").format(corpus.table))
            c.commit()
        yield dsn
    finally:
        janitor.drop()


SHAPES = ['"a"', '"a" AND "b"', '"a" OR "b"', '"a" OR "b" OR "c"', '"a" AND NOT "b"',
          'NOT "a" AND "b"', '"a" OR "b" AND NOT "c"', '("a" OR "b") AND NOT ("c" OR "d")',
          'NOT (NOT "a" AND NOT "b")', '"a" AND ("b" OR "c")', '"a" AND "a"', '"a" OR NOT "b"',
          '"a" AND NOT NOT "b" AND "c" AND NOT "d"',
          # AND texts (pglogic.engine.conjunction): a phrase equal to a term, an OR and a NOT
          # under an AND, an AND under a NOT
          '"a and b" OR "a" AND "b"', '("a" OR "b") AND "c" AND NOT "d"',
          'NOT ("a" AND "b") AND "c" AND "d"', '"a" AND ("b" OR NOT "c")']  # fmt: skip
PLAN_FILTERS = [[], ["n>=5"], ["n=3"], ["ns<1"], ['{"tag": "rare"}'], ["x>1", "tag!=common"],
                ["ns!=2", "x<abd"]]  # fmt: skip
PLAN_OPTIONS = [
    SearchOptions(operators="itlr"),
    SearchOptions(operators="godel", truth="affine"),
    SearchOptions(guide=False),
    SearchOptions(term_scans=True),
    SearchOptions(term_scans=False),
    SearchOptions(iterative_scan=False),
    SearchOptions(depth=300, ef_search=64),
    SearchOptions(k=5, depth=2000),
    SearchOptions(k=10, depth=3),  # (a depth below k: the guide scans k rows too, as Python)
    SearchOptions(exact=True),
    SearchOptions(and_text=0),
    SearchOptions(and_text=3, operators="and=min,not=complement^2.5"),
    SearchOptions(operators="itlr:product/sum/complement^3", truth="sigmoid:0.2:10.0"),
]


def assert_plan_is_pythons(
    conn: Conn, query: str, opts: SearchOptions, corpus_name: str = "synth"
) -> str:
    """Run ``query`` through the Python search and compare what it ran with
    ``pglogic.search_plan``: statement, parameters, settings, candidate terms, guide vector, the
    passage table searched (a corpus with passages, since migration 0010)."""
    corpus = get_corpus(conn, corpus_name)
    conn.commit()
    result = search(conn, corpus, query, embedder=RandomEmbedder(), options=opts)
    compiled = result.compiled
    vectors = dict(zip(compiled.terms, RandomEmbedder().embed(compiled.terms), strict=True))
    query_json = function_json(result.tree, opts, vectors)
    row = conn.execute(
        "SELECT pglogic.search_plan(%s, %s)", (corpus_name, Jsonb(query_json))
    ).fetchone()
    conn.rollback()
    assert row is not None
    plan = row[0]
    table = corpus.passage_table if opts.passages else None
    assert plan["passages"] == (None if table is None else table.as_string(None))
    text, values = function_statement(compiled)
    assert plan["lexical"] == list(compiled.lexical)
    # (the configuration of lexical terms and of the mention floor: since 0015, not_mention)
    assert plan["text_config"] == ("english" if compiled.lexical or compiled.mentions else None)
    assert plan["lexical_truth"] == opts.lexical
    if "database_approximate" in result.timings:
        # the lexical scans found fewer than k rows: Python reran the exact plan, as the
        # function does (its exact fallback)
        assert plan["exact_fallback"] == text, (query, opts)
        assert plan["terms"] == compiled.terms
        return "fallback"
    assert plan["statement"] == text, (query, opts)
    assert plan["settings"] == compiled.settings
    assert plan["candidate_terms"] == compiled.candidate_terms
    assert plan["terms"] == compiled.terms
    given = {name: plan[name] for name in ("k", "depth", "gdepth") if plan[name] is not None}
    assert given == {n: v for n, v in compiled.params.items() if n in ("k", "depth", "gdepth")}
    assert plan["filter_values"] == [v if isinstance(v, str) else str(v) for v in values]
    if compiled.guide_param is not None:
        assert plan["guide"] == query_json["guide"]
    else:
        assert plan["guide"] is None
    if opts.filters and not opts.exact:
        selectivity, matching = estimate_filter(conn, corpus, opts.filters)
        assert (plan["selectivity"], plan["matching_rows"]) == (selectivity, matching)
    return str(plan["plan"])


@pytest.mark.parametrize("k", [10, 100])
@pytest.mark.parametrize("where", PLAN_FILTERS, ids=lambda w: ",".join(w) or "unfiltered")
def test_search_plan_is_the_python_statement_at_default_options(
    synth_dsn: str, where: list[str], k: int
) -> None:
    opts = SearchOptions(k=k, filters=[parse_filter(w) for w in where])
    with connect(synth_dsn) as conn:
        plans = {q: assert_plan_is_pythons(conn, q, opts) for q in SHAPES}
    if not where:  # every plan of the fuzzy mode occurs
        assert plans['"a"'] == "knn" and plans['"a" OR "b"'] == "union"
        assert plans['"a" AND NOT "b"'] == "guide" and plans['"a" OR "b" AND NOT "c"'] == "terms"
    if where == ["n>=5"] and k == 10:  # half the rows match: filtered scans
        assert "exact" not in plans.values()
    if where == ['{"tag": "rare"}']:  # 100 rows match: scoring them all is cheaper
        assert set(plans.values()) == {"exact"}


@pytest.mark.parametrize("opts", PLAN_OPTIONS, ids=repr)
@pytest.mark.parametrize("where", [[], ["n=3"]], ids=["unfiltered", "filtered"])
def test_search_plan_is_the_python_statement_with_options(
    synth_dsn: str, opts: SearchOptions, where: list[str]
) -> None:
    opts = replace(opts, filters=[parse_filter(w) for w in where])
    with connect(synth_dsn) as conn:
        for query in SHAPES:
            if opts.exact or not (query.startswith("NOT") and "AND" not in query):
                assert_plan_is_pythons(conn, query, opts)


LEXICAL_SHAPES = ["match:wheat", '"a" AND NOT match:wheat', 'NOT match:wheat AND "a"',
                  '"a" OR match:wheat', "match:wheat OR match:corn", "match:wheat AND NOT match:corn",
                  '"a" AND match:"durum wheat"', '("a" OR match:wheat) AND NOT match:corn',
                  'match:corn AND NOT ("a" OR match:wheat)', '"a" OR NOT match:corn']  # fmt: skip
#: Shapes of two or more terms: the guide, and plans that turn on the guide's walk.
LEXICAL_SHAPES_GUIDED = ['"a" AND "b" AND match:wheat', '"a" OR "b" OR match:wheat',
                         '("a" OR "b") AND match:wheat AND NOT match:corn',
                         '"a" AND match:wheat AND NOT "b"', '"a" AND "b" AND NOT match:wheat',
                         '("a" OR match:wheat) AND "b"', 'NOT (NOT "a" AND NOT match:wheat) AND "b"',
                         '"a" AND NOT ("b" OR match:wheat)']  # fmt: skip
LEXICAL_PLAN_OPTIONS = [
    SearchOptions(),
    SearchOptions(lexical="rank"),
    SearchOptions(exact=True),
    SearchOptions(operators="godel", truth="affine", lexical="rank"),
    SearchOptions(and_text=0),
    SearchOptions(guide=False),
    SearchOptions(term_scans=True),
    SearchOptions(term_scans=False),
    SearchOptions(iterative_scan=False),
    SearchOptions(depth=300, ef_search=64),
    SearchOptions(k=100),
]


@pytest.mark.parametrize("opts", LEXICAL_PLAN_OPTIONS, ids=repr)
@pytest.mark.parametrize("where", [[], ["n>=5"], ['{"tag": "rare"}']], ids=str)
def test_search_plan_of_lexical_terms_is_the_python_statement(
    synth_dsn: str, opts: SearchOptions, where: list[str]
) -> None:
    """Lexical terms: their truth columns, their scans of the GIN index, the depths, the exact
    plan and the exact fallback, text for text."""
    opts = replace(opts, filters=[parse_filter(w) for w in where])
    with connect(synth_dsn) as conn:
        plans = {q: assert_plan_is_pythons(conn, q, opts) for q in LEXICAL_SHAPES}
        guided = {q: assert_plan_is_pythons(conn, q, opts) for q in LEXICAL_SHAPES_GUIDED}
    if opts.exact:
        assert set(plans.values()) == set(guided.values()) == {"exact"}
    elif not where:
        assert set(plans.values()) == {"terms"}  # (a scan per positive term, lexical or not)
        if opts.guide and opts.term_scans is None:  # no lexical scan: the guide's alone
            assert {q for q, p in guided.items() if p == "guide"} == {
                '"a" AND "b" AND NOT match:wheat', '"a" AND NOT ("b" OR match:wheat)'
            }  # fmt: skip
    if where == ['{"tag": "rare"}'] and not opts.exact:  # 7 documents say wheat: too few
        # candidates from lexical scans only: the matches, no exact fallback over everything
        assert plans["match:wheat"] == "terms"


def test_plan_functions_are_the_python_heuristics(conn: Conn) -> None:
    """default_depth, guide_depth, guide_only_depth, prefer_exact on grids, in SQL and Python."""
    ks, ns = [1, 3, 10, 33, 100, 250, 1000, 5000], [1, 2, 3, 4, 5, 8, 13]
    sels = [None, 1e-6, 0.001, 0.01, 0.013, 0.1, 0.25, 0.5, 0.9999, 1.0, 2.0]
    cases = [(k, n, s) for k in ks for n in ns for s in sels]
    rows = conn.execute(
        "SELECT pglogic._default_depth(k, n), pglogic._guide_depth(k, 10 * n),"
        " pglogic._guide_only_depth(k, s), pglogic._prefer_exact(m, k, n, p, coalesce(s, 1))"
        " FROM unnest(%s::int[], %s::int[], %s::float8[], %s::float8[], %s::text[])"
        " WITH ORDINALITY AS u(k, n, s, m, p, o) ORDER BY o",
        ([c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases],
         [float(37 * c[0] * c[1]) for c in cases],
         [("terms", "guide", "union")[i % 3] for i in range(len(cases))]),
    ).fetchall()  # fmt: skip
    for i, ((k, n, s), row) in enumerate(zip(cases, rows, strict=True)):
        plan = ("terms", "guide", "union")[i % 3]
        expected = (
            default_depth(k, n),
            guide_depth(k, 10 * n),
            guide_only_depth(k, s),
            prefer_exact(37 * k * n, k, n, plan=plan, selectivity=1 if s is None else s),
        )
        assert row == expected, (k, n, s, plan)  # fmt: skip


TREES = ['"a"', '"a" AND "b"', '"a" OR "b"', '"a" OR "b" OR "c"', '"a" OR NOT "b"',
         '"a" OR ("b" AND "c")', '"a" AND NOT ("b" OR "c")', 'NOT (NOT "a" AND NOT "b")',
         'NOT (NOT "a" OR NOT "b")', '("a" OR "b") AND "c"', 'NOT NOT ("a" OR "b")',
         '"a" AND NOT (NOT "b" AND NOT "c")', '("a" OR "a") AND "b"', 'NOT "a" OR NOT "b"']  # fmt: skip


@pytest.mark.parametrize("family", ["product-max", "itlr", "godel"])
def test_guide_and_union_suffices_are_pythons(conn: Conn, family: str) -> None:
    resolved = resolve_family(family)
    for text in TREES:
        tree = parse(text)
        row = conn.execute(
            "SELECT pglogic._guide_suffices(%s), pglogic._union_suffices(%s, %s)",
            (Jsonb(json_tree(tree)), Jsonb(json_tree(tree)), resolved.or_.name),
        ).fetchone()
        assert row == (guide_suffices(tree), union_suffices(tree, resolved)), text


FILTERS = ['{"site": "cooking"}', '{"a": {"b": [1, "x"]}, "c": null}', "site=cooking",
           "site!=cooking", "year=1995", "year!=1995.5", "year=-0.25", "flag=true", "flag!=null",
           'labels=["a", "b"]', 'obj={"k": 1}', "year>=1990", "year<1e3", "year>2.5",
           "year<=-7", "name>m", "name<=Zürich", "big>123456789012345678901234567890",
           "tiny<0.30000000000000004", 'q="quoted"', "k.e-y_1=x"]  # fmt: skip


@pytest.mark.parametrize("text", FILTERS)
@pytest.mark.parametrize("given", ["explicit", "text"])
def test_filters_sql_is_filters_sql(conn: Conn, text: str, given: str) -> None:
    """The condition text for text (placeholders numbered), the same parameter values, from the
    explicit JSON forms Python writes and from the text itself (pglogic._parse_filters)."""
    f = parse_filter(text)
    expr, params = filters_sql([f, f], sql.SQL('"d"."metadata"'), prefix="f")
    python = expr.as_string(None)
    slot = {name: j + 1 for j, name in enumerate(params)}
    expected = re.sub(r"%\((\w+)\)s", lambda m: f"$6[{slot[m.group(1)]}]", python)
    forms = [filter_json(f), filter_json(f)] if given == "explicit" else [text, text]
    row = conn.execute(
        'SELECT condition, params FROM pglogic._filters_sql(%s, \'"d"."metadata"\', 6)',
        (Jsonb(forms),),
    ).fetchone()
    assert row is not None
    assert row[0] == expected
    assert len(row[1]) == len(params)
    for got, (name, value) in zip(row[1], params.items(), strict=True):
        if f"%({name})s::jsonb" in python:
            same = conn.execute("SELECT %s::jsonb = %s::jsonb", (got, value)).fetchone()
        elif f"%({name})s::numeric" in python:  # (Python binds an int, or a float: float8)
            same = conn.execute("SELECT %s::numeric = %s::numeric", (got, value)).fetchone()
        else:
            same = (got == value,)
        assert same == (True,), (name, got, value)


@pytest.mark.parametrize(
    "f",
    [Comparison("x", ">", True), Comparison("x", "<", None), Comparison("x", ">=", [1, 2]),
     Comparison("x", "<=", {"a": 1}), Comparison("x", "~", 1)],
    ids=repr,
)  # fmt: skip
def test_bad_filters_give_the_python_message(news: Conn, f: Comparison) -> None:
    with pytest.raises(PglogicError) as python:
        filters_sql([f], sql.SQL("m"))
    exc = sql_error(
        news, "news", {"tree": {"term": "a", "vector": VEC}, "filters": [filter_json(f)]}
    )
    assert isinstance(exc, errors.InvalidParameterValue)
    assert message(exc) == str(python.value)


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"site": 5, "op": "="}, 'Invalid filter with keys "op", "site": {"key": KEY, "op": OP, '
                                 '"value": VALUE} takes these three keys and no other (for '
                                 'metadata with a field named key, op or value, use {"contains": '
                                 f'{{...}}}}); {FORMS}'),
        ([7], f"Invalid filter: got a number; {FORMS}"),
        ([{"contains": [1]}], 'Invalid filter with keys "contains": {"contains": {...}} takes one '
                              f"object and no other key; {FORMS}"),
        ([{"key": 1, "op": "=", "value": 1}],
         'Invalid filter: "key" takes a string (got a number)'),
    ],
)  # fmt: skip
def test_malformed_filters_have_clear_messages(news: Conn, filters: Any, expected: str) -> None:
    exc = sql_error(news, "news", {"tree": {"term": "a", "vector": VEC}, "filters": filters})
    assert isinstance(exc, errors.InvalidParameterValue)
    assert message(exc) == expected


def test_search_statement_is_served_by_the_hnsw_index(news: Conn) -> None:
    corpus = get_corpus(news, "news")
    tree = parse('"a" OR "b" AND NOT "c"')
    vecs = {t: np.random.default_rng(1).normal(size=corpus.dim) for t in ("a", "b", "c")}
    plan = news.execute(
        "SELECT pglogic.search_plan('news', %s)",
        (Jsonb(search_json(tree, SearchOptions(not_mention=0), vecs)),),  # ($1 to $6 only)
    ).fetchone()
    assert plan is not None
    news.execute("SET enable_seqscan = off")
    assert plan[0]["plan"] == "terms"
    news.execute(
        sql.SQL("PREPARE q(vector[], vector, integer, integer, integer, text[]) AS {}").format(
            sql.SQL(plan[0]["statement"])
        )
    )
    args = sql.Literal([f"[{','.join(map(str, v))}]" for v in vecs.values()])
    guide = sql.Literal(f"[{','.join(map(str, plan[0]['guide']))}]")
    explain = news.execute(
        sql.SQL("EXPLAIN EXECUTE q({}::vector[], {}::vector, 100, 200, 10, '{{}}')").format(
            args, guide
        )
    ).fetchall()
    news.rollback()
    text = "\n".join(r[0] for r in explain)
    # one scan per positive term ("a", "b") and the guide's (of the passages' index since 0010)
    index = hnsw_index(corpus, plan[0]["passages"] is not None)
    assert text.count(f"Index Scan using {index}") == 3, text


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
         "depth, ef_search, iterative_scan, guide, term_scans, filters, and_text, vectors, "
         "lexical, mode, passages, passage_score, not_context, not_mention"),
        ({"tree": {"term": "a", "vector": VEC}, "guide": 1},
         "Invalid guide=1: expected true, false or the guide vector (an array of numbers)"),
        ({"tree": {"op": "and", "args": [{"term": "a", "vector": VEC}, "b"]}, "guide": [1, 2]},
         "Term 'b' has no vector and is not in pglogic.term_cache for model 'all-MiniLM-L6-v2'"),
        ({"tree": {"op": "and", "args": [{"term": "a", "vector": VEC},
                                         {"term": "b", "vector": VEC}]}, "guide": [1, 2],
          "and_text": 0},
         "The guide vector has 2 dimensions; corpus 'news' needs 384 (model 'all-MiniLM-L6-v2')"),
        ({"tree": {"op": "and", "args": [{"term": "a", "vector": VEC},
                                         {"term": "b", "vector": VEC}]}},
         "The AND text 'a and b' has no vector: give it in \"vectors\" (render.search_json does), "
         "cache it in pglogic.term_cache for model 'all-MiniLM-L6-v2', or set \"and_text\": 0"),
        ({"tree": {"term": "a", "vector": VEC}, "and_text": 11},
         "Invalid and_text=11: a whole number from 0 to 10"),
        ({"tree": {"term": "a", "vector": VEC}, "operators": "not=complement^0"},
         "The exponent of complement^G must be in (0, 100], got 0.0 in operator family "
         "'not=complement^0'"),
        ({"tree": {"term": "a", "vector": VEC}, "term_scans": "no"},
         'Invalid term_scans="no": expected true or false'),
        ({"tree": {"term": "a", "vector": VEC}, "k": "ten"}, 'Invalid k="ten": expected an integer'),
        ({"tree": {"term": "a", "vector": VEC}, "exact": "yes"},
         'Invalid exact="yes": expected true or false'),
        ({"tree": {"term": "a", "vector": VEC}, "passages": 0},
         "Invalid passages=0: expected true or false"),
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
        ({"tree": [1]},
         'Invalid query node [1]: expected {"term": ...}, {"match": ...} or {"op": ...}'),
        # lexical terms (since migration 0007)
        ({"match": " "}, 'Invalid lexical term " ": "match" takes a word or a phrase (a non-blank '
                         "string)"),
        ({"op": "or", "args": ["a", {"match": ["wheat"]}]},
         'Invalid lexical term ["wheat"]: "match" takes a word or a phrase (a non-blank string)'),
        ({"match": "wheat", "vector": [1, 2]},
         'Invalid query node {"match": "wheat", "vector": [1, 2]}: a lexical term is {"match": '
         '"words"} alone (no vector, no other key)'),
        ({"op": "and", "args": [{"term": "a", "vector": VEC}, {"match": "the"}]},
         "match:\"the\" has no word that the corpus's lexical index holds (english drops stop "
         'words and punctuation); use another word or a semantic term "the"'),
        ({"match": 'it "is"'},
         'match:"it \\"is\\"" has no word that the corpus\'s lexical index holds (english drops '
         'stop words and punctuation); use another word or a semantic term "it \\"is\\""'),
        ({"op": "not", "arg": {"match": "wheat"}},
         "The query has no positive term to find candidates with (every term is negated); "
         'set "exact": true to scan every document'),
        ({"tree": {"match": "wheat"}, "lexical": "bm25"},
         "Unknown lexical truth 'bm25': valid values are crisp, rank"),
        ({"tree": {"match": "wheat"}, "lexical": 1},
         "Unknown lexical truth 1: valid values are crisp, rank"),
        ({"tree": {"op": "and", "args": [{"term": "a", "vector": VEC}, {"match": "wheat"}]},
          "mode": "nsfl"},
         "Lexical terms (match:...) are scored in the fuzzy mode only, not in mode 'nsfl'"),
        ({"tree": {"term": "a", "vector": VEC}, "mode": "sqo"},
         "pglogic.search (SQL) has the fuzzy mode only, not 'sqo'"),
        # since migration 0017: what slipped through, or failed as a raw error
        *(({"tree": {"term": "a", "vector": VEC}, "depth": d},
           f"Invalid depth={d}: from 1 to 100,000 candidates per scan; use \"exact\": true to "
           "score every document") for d in (0, -5, 100001)),
        ({"op": "not", "arg": "grain", "term": "cocoa"},  # (was read as the term: NOT dropped)
         'Invalid query node {"op": "not", "arg": "grain", "term": "cocoa"}: a term is '
         '{"term": "text"} with an optional "vector", no other key'),
        ({"term": "a", "weight": 2},
         'Invalid query node {"term": "a", "weight": 2}: a term is {"term": "text"} with an '
         'optional "vector", no other key'),
        *((node, f"Invalid query node {json.dumps(node)}: an operator is "
                 '{"op": "and"|"or", "args": [...]} or {"op": "not", "arg": ...}, no other key')
          for node in ({"op": "or", "args": ["a", "b"], "bogus": 1},
                       {"op": "and", "arg": "a", "args": ["a", "b"]},
                       {"op": "not", "arg": "a", "args": ["a"]})),
        ({"term": "a", "vector": []},
         "Invalid vector for term 'a': vector must have at least 1 dimension, got []"),
        ({"term": "a", "vector": ["a", "b"]},
         """Invalid vector for term 'a': expected an array of numbers, got ["a", "b"]"""),
        ({"term": "a", "vector": [None]},
         "Invalid vector for term 'a': expected an array of numbers, got [null]"),
        ({"term": "a", "vector": [1e39]},
         "Invalid vector for term 'a': a number is out of range, got [1" + "0" * 39 + "]"),
        ({"term": "a", "vector": "[1,2"},
         "Invalid vector for term 'a': invalid input syntax for type vector, got \"[1,2\""),
        ({"term": "a", "vector": [0.5] * 20000},
         "Invalid vector for term 'a': more than 16,000 dimensions, got [" + "0.5, " * 19
         + "0..."),
        ({"tree": {"op": "and", "args": [{"term": "a", "vector": VEC},
                                         {"term": "b", "vector": VEC}]}, "and_text": 0,
          "guide": "yes"},
         "Invalid vector for the guide: invalid input syntax for type vector, got \"yes\""),
        ({"tree": {"op": "and", "args": [{"term": "a", "vector": VEC},
                                         {"term": "b", "vector": VEC}]},
          "vectors": {"a and b": ["x"]}},
         """Invalid vector for the AND text 'a and b': expected an array of numbers, got ["x"]"""),
        # past a double's range, as Python's float() reads it (Python says the same)
        ({"tree": {"term": "a", "vector": VEC}, "operators": "not=complement^1e400"},
         "The exponent of complement^G must be in (0, 100], got inf in operator family "
         "'not=complement^1e400'"),
        ({"tree": {"term": "a", "vector": VEC}, "operators": "not=complement^1e-400"},
         "The exponent of complement^G must be in (0, 100], got 0.0 in operator family "
         "'not=complement^1e-400'"),
    ],
)  # fmt: skip
def test_malformed_queries_have_clear_messages(news: Conn, query: Any, expected: str) -> None:
    exc = sql_error(news, "news", query)
    assert isinstance(exc, errors.InvalidParameterValue)
    assert message(exc) == expected
    operators = query.get("operators") if isinstance(query, dict) else None
    if operators and "complement^" in operators:  # Python's words for the same mistake
        with pytest.raises(PglogicError) as py:
            resolve_family(operators)
        assert str(py.value) == expected


def test_what_0017_refuses_stays_valid_where_python_takes_it(news: Conn) -> None:
    """An exact search has no depth to check (Python skips it too, and search_json always sends
    "depth"); an exponent a double rounds into range is in range, as in Python; NumPy integers
    render as JSON numbers."""
    tree = {"term": "a", "vector": VEC}
    assert len(sql_search(news, "news", {"tree": tree, "exact": True, "depth": 0})) == 10
    spec = "not=complement^100.0000000000000000001"
    assert resolve_family(spec).not_.name == "complement^100"
    assert len(sql_search(news, "news", {"tree": tree, "operators": spec})) == 10
    rendered = search_json(parse('"a" AND NOT "b"'), SearchOptions(k=np.int64(3), depth=np.int32(40)),
                           {"a": VEC, "b": [1.0] * 384})  # type: ignore[arg-type]  # fmt: skip
    assert (rendered["k"], rendered["depth"]) == (3, 40)
    assert len(sql_search(news, "news", rendered)) == 3


def test_lexical_errors_are_pythons(news: Conn) -> None:
    """The messages of the compiler (an unknown lexical truth, a mode other than fuzzy) and of
    the Python search (a term with no searchable word), but for the column."""
    corpus = get_corpus(news, "news")
    news.commit()
    tree = parse('"a" AND NOT match:wheat')
    for opts in (SearchOptions(lexical="bm25"), SearchOptions(mode="nsfl")):
        with pytest.raises(PglogicError) as python:
            compile_query(tree, corpus, opts)
        query = {"tree": json_tree(tree), "lexical": opts.lexical, "mode": opts.mode}
        assert message(sql_error(news, "news", query)) == str(python.value)
    with pytest.raises(PglogicError) as python:
        search(news, corpus, '"a" AND NOT match:"the"', embedder=GivenVectors({"a": VEC}))
    exc = sql_error(
        news,
        "news",
        {
            "op": "and",
            "args": [{"term": "a", "vector": VEC}, {"op": "not", "arg": {"match": "the"}}],
        },
    )
    assert message(exc) == str(python.value).replace(" at col 13", "")


def test_lexical_terms_need_the_corpus_lexical_index(news: Conn) -> None:
    news.execute(
        "DELETE FROM pglogic.lexical_indexes WHERE corpus_id ="
        " (SELECT id FROM pglogic.corpora WHERE name = 'news')"
    )
    exc = sql_error(news, "news", {"op": "or", "args": [{"match": 'a "b"'}, {"match": "c"}]})
    assert isinstance(exc, errors.InvalidParameterValue)
    assert message(exc) == (
        'match:"a \\"b\\"" needs a lexical index, and corpus \'news\' has none: add it with '
        "`pglogic corpus lexical news`"
    )
    # (sql_error rolled the update back)
    assert len(sql_search(news, "news", {"match": "oil"})) == 10


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
    assert objects() == (head_functions(), True, True)
    migrate.downgrade(dsn, "0001")
    assert objects() == (0, False, False)
    migrate.upgrade(dsn)
    assert objects() == (head_functions(), True, True)


@pytest.mark.parametrize(
    "tree",
    ['"a" AND "b"', '("a" OR "b") AND NOT "c" AND "d"', '"x" AND NOT ("y" AND NOT "z" AND "w")',
     '"p" OR NOT ("q" OR "r") AND "s" AND NOT "t"', '("a" AND "b") AND ("c" OR "d")'],
)  # fmt: skip
def test_the_and_texts_in_sql_are_pythons(conn: Conn, tree: str) -> None:
    """pglogic._to_text and pglogic._and_texts against pglogic.query.to_text and
    pglogic.engine.conjunction.scored_terms."""
    node = parse(tree)
    got = conn.execute(
        "SELECT pglogic._to_text(%s), pglogic._and_texts(%s, %s)",
        (Jsonb(json_tree(node)), Jsonb(json_tree(node)), terms(node)),
    ).fetchone()
    assert got is not None
    assert got[0] == to_text(node)
    assert got[1] == scored_terms(node, 1)


def test_sql_files_ship_in_the_package() -> None:
    names = {p.name for p in resource_dir("sql").iterdir()}
    assert {"operators.sql", "search.sql", "reader.sql", "install.sql"} <= names
