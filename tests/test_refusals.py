"""Python and the SQL function refuse the same bad vectors.

One table of bad term vectors goes through :func:`pglogic.store.search.search` (a model that
returns them) and through ``pglogic.search`` (the vector in the query's JSON): both refuse each,
the SQL function with SQLSTATE 22023 or pgvector's own data exception, never with rows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from pglogic.errors import PglogicError
from pglogic.store import corpus as corpora
from pglogic.store.db import connect
from pglogic.store.search import search

pytestmark = pytest.mark.db

#: (name, the vector as Python's model would return it, as the query's JSON carries it)
BAD = [
    ("zero", [0.0, 0.0, 0.0], [0, 0, 0]),
    ("NaN", [math.nan, 0.0, 1.0], "[NaN,0,1]"),
    ("infinite", [math.inf, 0.0, 1.0], "[Infinity,0,1]"),
    ("too big for float32", [1e39, 0.0, 1.0], [1e39, 0, 1]),
    ("wrong dimension", [1.0, 0.0], [1, 0]),
]


class _Returns:
    """A model that embeds every text as one given vector."""

    name = "m"
    dim = 3

    def __init__(self, vector: list[float]) -> None:
        self.vector = vector

    def embed(self, texts: list[str]) -> Any:
        return np.array([self.vector for _ in texts], dtype=np.float64)


@pytest.fixture
def docs(dsn: str) -> str:
    with connect(dsn, autocommit=True) as c:
        corpus = corpora.create_corpus(c, "docs", model="m", dim=3, lexical=None)
        c.execute(
            sql.SQL(
                "INSERT INTO {} (external_id, title, text, text_hash, row_hash, embedding)"
                " VALUES ('a', 'A', 'a', '\\x00', '\\x00', '[1,0,0]'),"
                " ('b', 'B', 'b', '\\x00', '\\x00', '[0,1,0]')"
            ).format(corpus.table)
        )
    return dsn


@pytest.mark.parametrize(("name", "python", "as_json"), BAD, ids=[b[0] for b in BAD])
def test_python_and_sql_refuse_the_same_vectors(
    docs: str, name: str, python: list[float], as_json: Any
) -> None:
    with connect(docs) as conn, pytest.raises(PglogicError) as py_error:
        corpus = corpora.get_corpus(conn, "docs")
        search(conn, corpus, '"x"', embedder=_Returns(python))
    assert "vector" in str(py_error.value)
    with connect(docs) as conn, pytest.raises(psycopg.Error) as sql_error:
        conn.execute(
            "SELECT * FROM pglogic.search('docs', %s)",
            (Jsonb({"tree": {"term": "x", "vector": as_json}}),),
        ).fetchall()
    assert sql_error.value.sqlstate is not None and sql_error.value.sqlstate.startswith("22")


def test_both_say_why_a_zero_vector_is_refused(docs: str) -> None:
    why = "no direction: its cosine similarity is undefined"
    with connect(docs) as conn, pytest.raises(PglogicError, match=why):
        search(conn, corpora.get_corpus(conn, "docs"), '"x"', embedder=_Returns([0.0] * 3))
    with connect(docs) as conn, pytest.raises(psycopg.errors.InvalidParameterValue, match=why):
        conn.execute(
            "SELECT * FROM pglogic.search('docs', %s)",
            (Jsonb({"tree": {"term": "x", "vector": [0, 0, 0]}, "vectors": {}}),),
        ).fetchall()
