"""Generated bad input through the parser, the compiler and the SQL function (hypothesis).

Only pglogic's documented errors may come out: :class:`~pglogic.errors.PglogicError` subclasses
in Python (a syntax error with a column inside the query), SQLSTATEs 22023/42704/22P02/22000 from
``pglogic.search_plan``. ``bench/correctness/reliability.py`` runs the same checks at 100,000 strings and
10,000 JSON values; these run a few hundred of each, and a few hundred queries in the SQL
function's own language (``bench/lib/fuzz.py``), most of which run the whole search.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from bench.lib.fuzz import SQL_STATES, arbitrary
from pglogic.engine.compile import MODES, SearchOptions, compile_query
from pglogic.engine.filters import Comparison, Contains, filters_sql
from pglogic.engine.operators import PRESETS
from pglogic.engine.source import Corpus
from pglogic.errors import EmbeddingError, InvalidInput, PglogicError, QuerySyntaxError
from pglogic.query import parse
from pglogic.store.corpus import create_corpus
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import search

CORPUS = Corpus(1, "c", "corpus_1", "m", 4, "cosine", "embedding", None, None)
PIECES = st.sampled_from(['"', "'", "\\", "AND", "OR", "NOT", "(", ")", " ", "oil", "gas", "é",
                          "\x00", "\t", "and", "not", "x y", "''", '""'])  # fmt: skip
QUERIES = st.one_of(st.lists(PIECES, max_size=25).map("".join), st.text(max_size=60))


@settings(max_examples=600, deadline=None, database=None)
@given(QUERIES)
def test_the_parser_raises_only_positioned_syntax_errors(query: str) -> None:
    try:
        parse(query)
    except QuerySyntaxError as err:
        if str(err) != "Empty query":
            assert 1 <= err.column <= len(query) + 1 and "col" in str(err), (query, str(err))
        else:
            assert not query.strip()
    except PglogicError:
        pass


OPTIONS = st.builds(
    SearchOptions,
    k=st.sampled_from([0, 1, 10, 1000, 1001, 10**9]),
    depth=st.sampled_from([None, 0, 5, 2000, 10**7]),
    ef_search=st.sampled_from([None, 0, 1, 1000, 1001]),
    exact=st.booleans(),
    mode=st.sampled_from([*MODES, "bogus"]),
    operators=st.sampled_from([*PRESETS, "and=min", "bogus"]),
    truth=st.sampled_from(["clamp", "affine", "sigmoid:0.2:10", "sigmoid:x:y", "bogus"]),
    filters=st.sampled_from(
        [
            (),
            (Comparison("y", ">=", 1990),),
            (Contains({"a": [1]}),),
            (Comparison("x", "<", True),),
            (Comparison("k\x00", "=", 1),),
            (Comparison("n", "=", float("nan")),),
        ]
    ),
    timeout=st.sampled_from([None, 1.0, 0.0, -1.0, float("nan")]),
)
TREES = st.lists(st.sampled_from(['"a"', '"b"', '"c"', "NOT", "AND", "OR", "(", ")"]),
                 min_size=1, max_size=12).map(" ".join)  # fmt: skip


@settings(max_examples=600, deadline=None, database=None)
@given(TREES, OPTIONS)
def test_the_compiler_raises_only_pglogic_errors(query: str, opts: SearchOptions) -> None:
    with contextlib.suppress(PglogicError):
        compile_query(parse(query), CORPUS, opts)


def test_filters_refuse_what_jsonb_cannot_hold() -> None:
    from psycopg import sql

    for f in (Comparison("k\x00", "=", 1), Comparison("k", "=", float("nan")),
              Contains({"x": "a\x00"}), Comparison("k", "<", "v\x00")):  # fmt: skip
        with pytest.raises(InvalidInput):
            filters_sql([f], sql.Identifier("m"))


def test_depth_is_bounded() -> None:
    with pytest.raises(InvalidInput, match="Invalid depth=10000000"):
        compile_query(parse('"a" AND "b"'), CORPUS, SearchOptions(depth=10**7))


@pytest.fixture
def tiny(conn: psycopg.Connection[Any]) -> Corpus:
    corpus = create_corpus(conn, "tiny", model="hand", dim=4)
    rng = np.random.default_rng(0)
    ingest_records(conn, corpus, [Record(f"d{i}", f"t{i}", None, {"g": i},
                                         tuple(map(float, rng.random(4) + 0.1)))
                                  for i in range(30)], embedder=None)  # fmt: skip
    conn.commit()
    return corpus


def test_the_sql_function_raises_only_documented_sqlstates(
    conn: psycopg.Connection[Any], tiny: Corpus
) -> None:
    conn.autocommit = True

    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(arbitrary())
    def run(value: Any) -> None:
        try:
            conn.execute("SELECT pglogic.search_plan('tiny', %s)", (Jsonb(value),))
        except psycopg.Error as exc:
            assert exc.sqlstate in SQL_STATES, (exc.sqlstate, str(exc), json.dumps(value))

    run()


class _Bad:
    name, dim = "hand", 4

    def __init__(self, value: float) -> None:
        self.value = value

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.full((len(texts), 4), self.value, dtype=np.float32)


@pytest.mark.parametrize("value", [float("nan"), 0.0])
def test_unusable_query_vectors_are_refused_before_sql(
    conn: psycopg.Connection[Any], tiny: Corpus, value: float
) -> None:
    """A model (or cache row) giving NaN used to reach pgvector as a DataError; a zero vector
    made every similarity NaN."""
    with pytest.raises(EmbeddingError, match="The vector of term 'a'"):
        search(conn, tiny, '"a" AND "b"', embedder=_Bad(value))


@pytest.fixture
def words(conn: psycopg.Connection[Any]) -> Corpus:
    """30 documents of 4-d vectors with words (a lexical index) and a number g; the terms oil
    and gas in the term cache."""
    from pglogic.store.lexical import add_lexical_index

    corpus = create_corpus(conn, "words", model="hand", dim=4)
    rng = np.random.default_rng(1)
    texts = ["wheat harvest", "oil prices rise", "gas and oil", "durum wheat exports", "coffee"]
    ingest_records(conn, corpus, [Record(f"d{i}", texts[i % 5], None, {"g": i, "h": "x"},
                                         tuple(map(float, rng.random(4) + 0.1)))
                                  for i in range(30)], embedder=None)  # fmt: skip
    corpus = add_lexical_index(conn, corpus, "english")
    for term in ("oil", "gas"):
        conn.execute(
            "INSERT INTO pglogic.term_cache (model, term, embedding) VALUES ('hand', %s, %s)",
            (term, "[" + ",".join(map(str, rng.random(4) + 0.1)) + "]"),
        )
    conn.execute("CREATE TABLE IF NOT EXISTS public.canary (x int)")
    conn.commit()
    return corpus


def test_the_sql_function_runs_generated_queries_or_refuses_them(
    conn: psycopg.Connection[Any], words: Corpus
) -> None:
    """Query JSON in the function's own language (bench/lib/fuzz.py: trees of terms, lexical
    terms and operators, options at and past their bounds, filters of every form, hostile text):
    most run the whole search and return at most k rows, best first; the rest are refused with a
    documented SQLSTATE. Nothing reaches the database as SQL (the canary table stands)."""
    from bench.lib.fuzz import queries, vector_of

    conn.autocommit = True
    outcomes: dict[str, int] = {}

    @settings(max_examples=300, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(queries(dim=4, terms=("oil", "gas")))
    def run(value: dict[str, Any]) -> None:
        with contextlib.suppress(psycopg.Error):  # the AND texts' vectors, as search_json gives
            found = conn.execute("SELECT pglogic._and_texts(%s, '{}')", (Jsonb(value["tree"]),))
            value["vectors"] = {t: vector_of(t, 4) for t in found.fetchone()[0]}  # type: ignore[index]
        try:
            rows = conn.execute(
                "SELECT score FROM pglogic.search('words', %s)", (Jsonb(value),)
            ).fetchall()
        except psycopg.Error as exc:
            assert exc.sqlstate in SQL_STATES, (exc.sqlstate, str(exc), json.dumps(value))
            outcomes[exc.sqlstate or "?"] = outcomes.get(exc.sqlstate or "?", 0) + 1
            return
        scores = [r[0] for r in rows]
        k = value.get("k", 10)
        assert len(scores) <= (k if isinstance(k, int) and k > 0 else 10), json.dumps(value)
        assert all(np.isfinite(scores)) and scores == sorted(scores, reverse=True), value
        outcomes["ran"] = outcomes.get("ran", 0) + 1

    run()
    assert conn.execute("SELECT to_regclass('public.canary')").fetchone() == ("canary",)
    total = sum(outcomes.values())
    assert outcomes.get("ran", 0) >= total // 2, outcomes  # the valid paths are reached
