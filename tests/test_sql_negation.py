"""A negated term against its context (``not_context``, migration 0014) in ``pglogic.search``:
the vectors and the guide the SQL function binds are the Python search's, and its errors say the
Python words."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.negation import contexts, projected
from pglogic.engine.render import search_json
from pglogic.errors import InvalidInput
from pglogic.query import And, Not, Term, parse, terms
from pglogic.store.corpus import create_corpus, get_corpus
from pglogic.store.db import connect
from pglogic.store.lexical import add_lexical_index, drop_lexical_index
from pglogic.store.search import execute
from tests.conftest import TEMPLATE_DB, Server
from tests.test_sql_functions import (
    assert_same,
    message,
    sql_error,
    sql_search,
)

pytestmark = pytest.mark.db

DIM = 384
QUERIES = [
    '"a" AND NOT "b"',
    '"a" AND "c" AND NOT "b"',
    '"a" OR NOT "b" AND "c"',
    '("a" AND NOT "b") OR ("c" AND NOT "b" AND "d")',
    '"a" AND NOT "b" AND NOT "d"',
    '"a" AND NOT NOT "b" AND NOT "c"',
    '"a" AND NOT ("b" OR "c")',
    '"b" AND NOT "b" AND "a"',
    '"a" AND NOT "b" AND match:wheat',
]


@pytest.fixture(scope="module")
def neg_dsn(pg_server: Server) -> Iterator[str]:
    """Corpus 'neg': 500 random documents (no index), a lexical index."""
    name = f"t_sqlneg_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = pg_server.dsn_for(name)
        with connect(dsn) as c:
            corpus = create_corpus(c, "neg", model="synthetic", dim=DIM)
            c.execute(
                sql.SQL(
                    "INSERT INTO {} (external_id, title, text, metadata, text_hash, row_hash,"
                    " embedding) SELECT 'n' || i, NULL, CASE WHEN i % 5 = 0 THEN 'wheat' ELSE"
                    " 'corn' END, '{{}}', '\\x00', '\\x00', (SELECT array_agg(random() - 0.5)"
                    " FROM generate_series(1, {}) WHERE i > 0)::vector"
                    " FROM generate_series(1, 500) AS i"
                ).format(corpus.table, sql.Literal(DIM))
            )
            c.commit()
        yield dsn
    finally:
        janitor.drop()


def _vectors(query: str, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=DIM)  # terms that share a direction, as related words do
    return {
        t: (0.8 * shared + rng.normal(size=DIM)).astype(np.float32) for t in terms(parse(query))
    }


def _plan_vectors(conn: psycopg.Connection[Any], query: dict[str, Any]) -> tuple[list, Any]:
    row = conn.execute(
        "SELECT terms, vectors, guide FROM pglogic._plan('neg', %s)", (Jsonb(query),)
    ).fetchone()
    assert row is not None
    return [(t, np.asarray(v.to_numpy())) for t, v in zip(row[0], row[1], strict=True)], row[2]


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("query", QUERIES)
def test_the_function_binds_the_python_vectors(
    neg_dsn: str, query: str, lam: float, exact: bool
) -> None:
    """Each scored vector (``$1``) is the one Python binds, and the guide the function computes
    is Python's within the rounding of its double-precision ascent."""
    tree = parse(query)
    vectors = _vectors(query)
    opts = SearchOptions(k=10, not_context=lam, exact=exact, and_text=0)
    with connect(neg_dsn) as conn:
        corpus = get_corpus(conn, "neg")
        compiled = compile_query(tree, corpus, opts)
        params = compiled.with_vectors(vectors)
        rendered = search_json(tree, opts, vectors)
        bound, _ = _plan_vectors(conn, rendered)
        assert [t for t, _ in bound] == compiled.terms
        for i, (t, v) in enumerate(bound):
            assert np.array_equal(v, params[f"v{i}"]), t
        projected_terms = {t for t in contexts(tree) if lam}
        for t, v in bound:  # a projected term moved; the others are as given
            assert np.array_equal(v, vectors[t]) == (t not in projected_terms), t
        if compiled.guide_param is not None and not exact:
            computed = {**rendered, "guide": True}
            _, guide = _plan_vectors(conn, computed)
            g, p = np.asarray(guide.to_numpy()), params[compiled.guide_param]
            assert float(g @ p / np.linalg.norm(g) / np.linalg.norm(p)) > 1 - 1e-6


def test_projection_removes_the_context(neg_dsn: str) -> None:
    """λ = 1: the negated term's bound vector is orthogonal to both positive terms of its AND."""
    query = '"a" AND "c" AND NOT "b"'
    vectors = _vectors(query, seed=3)
    with connect(neg_dsn) as conn:
        opts = SearchOptions(not_context=1.0, and_text=0)
        bound, _ = _plan_vectors(conn, search_json(parse(query), opts, vectors))
    b = dict(bound)["b"]
    for t in ("a", "c"):
        assert abs(float(b @ vectors[t])) < 1e-5 * float(np.linalg.norm(vectors[t]))
    assert np.allclose(b, projected(vectors["b"], [vectors["a"], vectors["c"]], 1.0))
    assert float(np.linalg.norm(b)) == pytest.approx(1.0, abs=1e-6)


def test_not_context_errors_say_the_python_words(neg_dsn: str) -> None:
    vec = {"term": "a", "vector": [0.1] * DIM}
    tree = {"op": "and", "args": [vec, {"op": "not", "arg": {"term": "b", "vector": [0.2] * DIM}}]}
    with connect(neg_dsn) as conn:
        corpus = get_corpus(conn, "neg")
        for bad, shown in ((1.5, "1.5"), (-0.25, "-0.25"), ("half", '"half"'), (True, "true")):
            exc = sql_error(conn, "neg", {"tree": tree, "not_context": bad})
            assert message(exc) == (
                f"Invalid not_context={shown}: a number from 0 (the negated term as it is) to 1 "
                "(without its AND's positive terms)"
            )
            conn.rollback()
        for bad in (1.5, -0.25, "half", True):
            with pytest.raises(InvalidInput) as py:
                compile_query(parse('"a" AND NOT "b"'), corpus, SearchOptions(not_context=bad))  # type: ignore[arg-type]
            assert str(py.value) == (
                f"Invalid not_context={bad!r}: a number from 0 (the negated term as it is) to 1 "
                "(without its AND's positive terms)"
            )
        # null is the default, as an absent option
        assert _plan_vectors(conn, {"tree": tree, "not_context": None})[0][1][1].tolist() == (
            _plan_vectors(conn, {"tree": tree})[0][1][1].tolist()
        )


def _node(text: str, vectors: dict[str, np.ndarray]) -> dict[str, Any]:
    return {"term": text, "vector": [float(x) for x in vectors[text]]}


def test_contexts_read_every_spelling_of_the_tree(neg_dsn: str) -> None:
    """Operators in any case, a NOT's operand in "args", nested ANDs (spliced in, as the Python
    contexts do): the same vectors as the canonical tree's."""
    vectors = _vectors('"a" AND "c" AND NOT "b"', seed=5)
    a, b, c = (_node(t, vectors) for t in "abc")
    canonical = {"op": "and", "args": [a, c, {"op": "not", "arg": b}]}
    spellings = [
        {"op": "AND", "args": [a, c, {"op": "Not", "arg": b}]},
        {"op": "and", "args": [a, c, {"op": "not", "args": [b]}]},
        {"op": "and", "args": [a, {"op": "and", "args": [c, {"op": "not", "arg": b}]}]},
    ]
    opts = {"and_text": 0, "exact": True}
    with connect(neg_dsn) as conn:
        want = dict(_plan_vectors(conn, {"tree": canonical, **opts})[0])
        assert not np.array_equal(want["b"], vectors["b"])  # projected
        for tree in spellings:
            got = dict(_plan_vectors(conn, {"tree": tree, **opts})[0])
            assert set(got) == set(want)
            for t in want:
                assert np.array_equal(got[t], want[t]), (tree, t)
    # Python: a nested AND built in code has the flat tree's contexts
    nested = And((Term("a"), And((Term("c"), Not(Term("b"))))))
    assert contexts(nested) == contexts(parse('"a" AND "c" AND NOT "b"')) == {"b": ("a", "c")}


# -- a mention floors a negated term (not_mention, migration 0015) ------------------------------

MENTION_QUERIES = ['"a" AND NOT "wheat"', '"a" AND NOT ("wheat" OR "b")', '"a" OR NOT "wheat"']


@pytest.mark.parametrize("floor", [0.0, 0.4, 1.0])
@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("query", MENTION_QUERIES)
def test_the_function_floors_a_mentioned_negated_term_as_python_does(
    neg_dsn: str, query: str, floor: float, exact: bool
) -> None:
    """Every fifth document of 'neg' says "wheat": the function ranks and scores as Python does,
    and the floor keeps those documents out of the top (1: a mention is a full NOT)."""
    tree = parse(query)
    vectors = _vectors(query, seed=5)
    opts = SearchOptions(k=20, not_mention=floor, exact=exact, and_text=0)
    with connect(neg_dsn) as conn:
        hits = execute(conn, compile_query(tree, get_corpus(conn, "neg"), opts), dict(vectors))
        assert_same(hits, sql_search(conn, "neg", search_json(tree, opts, vectors)))
    said = sum(int(h.external_id[1:]) % 5 == 0 for h in hits)
    if floor == 1.0 and query != '"a" OR NOT "wheat"':
        assert said == 0
    elif floor == 0.0 and exact:
        # random vectors: the similarity alone leaves them in. (Not asserted of the approximate
        # top 20: pgvector draws each HNSW node's level at random, so which borderline documents
        # an index scan returns varies from build to build; above, it is Python's either way.)
        assert said > 0


def test_not_mention_errors_say_the_python_words(neg_dsn: str) -> None:
    tree = {"op": "and", "args": [{"term": "a", "vector": [0.1] * DIM},
                                  {"op": "not", "arg": {"term": "b", "vector": [0.2] * DIM}}]}  # fmt: skip
    with connect(neg_dsn) as conn:
        corpus = get_corpus(conn, "neg")
        for bad, shown in ((1.5, "1.5"), (-0.25, "-0.25"), ("half", '"half"'), (True, "true")):
            exc = sql_error(conn, "neg", {"tree": tree, "not_mention": bad})
            assert message(exc) == (
                f"Invalid not_mention={shown}: a number from 0 (the similarity alone) to 1 (a "
                "mention makes the negated term fully true)"
            )
            conn.rollback()
            with pytest.raises(InvalidInput) as py:
                compile_query(parse('"a" AND NOT "b"'), corpus, SearchOptions(not_mention=bad))  # type: ignore[arg-type]
            assert str(py.value) == (
                f"Invalid not_mention={bad!r}: a number from 0 (the similarity alone) to 1 (a "
                "mention makes the negated term fully true)"
            )


def test_without_a_lexical_index_the_floor_does_nothing(neg_dsn: str) -> None:
    query = '"a" AND NOT "wheat"'
    vectors = _vectors(query, seed=5)
    with connect(neg_dsn, autocommit=True) as conn:
        corpus = drop_lexical_index(conn, get_corpus(conn, "neg"))
        try:
            for floor in (0.0, 0.4):
                opts = SearchOptions(k=20, not_mention=floor, and_text=0)
                compiled = compile_query(parse(query), corpus, opts)
                assert "tsv" not in compiled.as_string()
                hits = execute(conn, compiled, dict(vectors))
                assert_same(hits, sql_search(conn, "neg", search_json(parse(query), opts, vectors)))
                assert sum(int(h.external_id[1:]) % 5 == 0 for h in hits) > 0
        finally:
            add_lexical_index(conn, get_corpus(conn, "neg"))
