"""The read-only role ``pglogic_reader`` (migration 0002): members search, and cannot write.

Each test logs in as a fresh role that is a member of pglogic_reader (the embedded server trusts
local connections, so only the user name changes) and drops it afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import errors, sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from pglogic.api import PgLogic
from pglogic.engine.compile import SearchOptions
from pglogic.engine.render import search_json
from pglogic.eval.calibrate import Calibration
from pglogic.query import parse
from pglogic.store import corpus as corpora
from pglogic.store import migrate
from pglogic.store.calibration_store import delete_calibration, save_calibration
from pglogic.store.db import connect
from pglogic.store.search import search
from pglogic.store.term_cache import cache_terms
from tests.conftest import TEMPLATE_DB, Server

pytestmark = pytest.mark.db

DATA = Path("reuters21578") / "corpus.jsonl.gz"
QUERY = '("oil" OR "gas") AND NOT "coffee"'


@pytest.fixture(scope="module")
def admin_dsn(pg_server: Server, minilm: Any, shared_data: Path) -> Iterator[str]:
    """A database with corpus 'news' (40 Reuters documents), created after the migration by the
    role that ran the migration."""
    name = f"t_reader_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = pg_server.dsn_for(name)
        api = PgLogic(dsn)
        api.create_corpus("news")
        api.ingest("news", shared_data / DATA, limit=40)
        api.build_index("news")
        yield dsn
    finally:
        janitor.drop()


@pytest.fixture
def reader_dsn(admin_dsn: str) -> Iterator[str]:
    """DSN of a new login role that is a member of pglogic_reader (dropped afterwards)."""
    role = f"reader_{uuid.uuid4().hex[:10]}"
    ident = sql.Identifier(role)
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE pglogic_reader").format(ident))
    try:
        yield make_conninfo(admin_dsn, user=role)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(ident))


def query_json(minilm: Any, k: int = 5) -> dict[str, Any]:
    tree = parse(QUERY)
    terms = ["oil", "gas", "coffee"]
    vectors = dict(zip(terms, minilm.embed(terms), strict=True))
    return search_json(tree, SearchOptions(k=k), vectors)


def test_role_exists_and_is_not_a_login_role(reader_dsn: str) -> None:
    with connect(reader_dsn) as c:
        row = c.execute(
            "SELECT current_user <> 'postgres', pg_has_role(current_user, 'pglogic_reader',"
            " 'member'), r.rolcanlogin, r.rolsuper, r.rolcreaterole, r.rolcreatedb"
            " FROM pg_roles r WHERE r.rolname = 'pglogic_reader'"
        ).fetchone()
    assert row == (True, True, False, False, False, False)


@pytest.mark.model
def test_reader_searches_with_the_sql_function(
    admin_dsn: str, reader_dsn: str, minilm: Any
) -> None:
    q = Jsonb(query_json(minilm))
    stmt = "SELECT external_id, score FROM pglogic.search('news', %s)"
    with connect(admin_dsn) as admin:
        expected = admin.execute(stmt, (q,)).fetchall()
    with connect(reader_dsn) as reader:
        got = reader.execute(stmt, (q,)).fetchall()
    assert len(got) == 5
    assert got == expected


@pytest.mark.model
def test_reader_searches_with_python(admin_dsn: str, reader_dsn: str, minilm: Any) -> None:
    with connect(reader_dsn) as reader:
        news = corpora.get_corpus(reader, "news")
        hits = search(reader, news, QUERY, embedder=minilm, options=SearchOptions(k=5)).hits
        rows = reader.execute(
            "SELECT external_id FROM pglogic.search('news', %s)", (Jsonb(query_json(minilm)),)
        ).fetchall()
    assert [h.external_id for h in hits] == [r[0] for r in rows]
    # the API checks the schema revision first (SELECT on the version table)
    api_hits = PgLogic(reader_dsn).search("news", QUERY, k=5).hits
    assert [h.external_id for h in api_hits] == [h.external_id for h in hits]


@pytest.mark.model
def test_reader_searches_with_the_stored_calibration(
    admin_dsn: str, reader_dsn: str, minilm: Any
) -> None:
    q = Jsonb({**query_json(minilm), "truth": "calibrated"})
    stmt = "SELECT external_id, score FROM pglogic.search('news', %s)"
    with connect(admin_dsn) as admin:
        news = corpora.get_corpus(admin, "news")
        save_calibration(admin, news.model, Calibration(0.1857, 18.76, "logistic", 100, 0.9))
    try:
        with connect(admin_dsn) as admin:
            expected = admin.execute(stmt, (q,)).fetchall()
        with connect(reader_dsn) as reader:
            got = reader.execute(stmt, (q,)).fetchall()
            hits = search(reader, news, QUERY, embedder=minilm,
                          options=SearchOptions(k=5, truth="calibrated")).hits  # fmt: skip
        assert got == expected and len(got) == 5
        assert hits and hits[0].score < 1.0
        with pytest.raises(errors.InsufficientPrivilege), connect(reader_dsn) as reader:
            save_calibration(reader, news.model, Calibration(0.2, 10.0, "corpus", 0, None))
    finally:
        with connect(admin_dsn) as admin:
            delete_calibration(admin, news.model)


def _table(admin_dsn: str) -> str:
    with connect(admin_dsn) as admin:
        return corpora.get_corpus(admin, "news").table_name


WRITES = [
    "INSERT INTO {t} (external_id, text, text_hash, row_hash) VALUES ('x', 'y', '\\x00', '\\x00')",
    "UPDATE {t} SET title = 'hacked'",
    "DELETE FROM {t}",
    "TRUNCATE {t}",
    "ALTER TABLE {t} ADD COLUMN x integer",
    "CREATE INDEX ON {t} (title)",
    "DROP TABLE {t}",
    "UPDATE pglogic.corpora SET description = 'hacked'",
    "DELETE FROM pglogic.embeddings",
    "INSERT INTO pglogic.term_cache (model, term, embedding) VALUES ('m', 't', '[1]')",
    "INSERT INTO pglogic.calibration (model, tau, lam, method) VALUES ('m', 0.2, 10, 'corpus')",
    "DELETE FROM pglogic.calibration",
    "DELETE FROM pglogic.pglogic_alembic_version",
    "CREATE TABLE pglogic.evil (id integer)",
    "CREATE TABLE public.evil (id integer)",
    "CREATE FUNCTION pglogic.evil() RETURNS integer LANGUAGE sql RETURN 1",
    "CREATE OR REPLACE FUNCTION pglogic.and_min(VARIADIC xs double precision[])"
    " RETURNS double precision LANGUAGE sql RETURN 0",
    "DROP FUNCTION pglogic.search(text, jsonb)",
    "DROP SCHEMA pglogic CASCADE",
    "CREATE SCHEMA evil",
]


@pytest.mark.parametrize("statement", WRITES)
def test_reader_cannot_write(admin_dsn: str, reader_dsn: str, statement: str) -> None:
    text = statement.replace("{t}", f"pglogic.{_table(admin_dsn)}")
    with connect(reader_dsn) as reader, pytest.raises(errors.InsufficientPrivilege):
        reader.execute(text.encode())


@pytest.mark.parametrize(
    "action",
    [
        lambda c: corpora.create_corpus(c, "mine", model="all-MiniLM-L6-v2", dim=384),
        lambda c: corpora.drop_corpus(c, "news"),
        lambda c: corpora.build_index(c, "news"),
        lambda c: cache_terms(c, corpora.get_corpus(c, "news"), ["oil"], embedder=_Ones()),
    ],
    ids=["create_corpus", "drop_corpus", "build_index", "cache_terms"],
)
def test_reader_cannot_write_through_the_python_api(
    reader_dsn: str, action: Callable[[Any], Any]
) -> None:
    with connect(reader_dsn) as reader, pytest.raises(errors.InsufficientPrivilege):
        action(reader)


class _Ones:
    name = "ones"
    dim = 384

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 384), dtype=np.float32)


def test_corpus_created_later_is_readable(admin_dsn: str, reader_dsn: str) -> None:
    """Default privileges: a corpus created after the migration (by the migrating role)."""
    with connect(admin_dsn) as admin:
        later = corpora.create_corpus(admin, f"later-{uuid.uuid4().hex[:6]}", model="m", dim=3)
        admin.execute(
            sql.SQL(
                "INSERT INTO {} (external_id, title, text, text_hash, row_hash, embedding)"
                " VALUES ('a', 'A', 'a', '\\x00', '\\x00', '[1,0,0]'),"
                " ('b', 'B', 'b', '\\x00', '\\x00', '[0,1,0]')"
            ).format(later.table)
        )
        admin.commit()
    with connect(reader_dsn) as reader:
        row = reader.execute(
            "SELECT has_table_privilege(%s, 'SELECT'), has_table_privilege(%s, 'INSERT')",
            (f"pglogic.{later.table_name}", f"pglogic.{later.table_name}"),
        ).fetchone()
        assert row == (True, False)
        rows = reader.execute(
            "SELECT external_id, score FROM pglogic.search(%s, %s)",
            (later.name, Jsonb({"tree": {"term": "x", "vector": [1, 0, 0]}, "k": 2})),
        ).fetchall()
    assert rows == [("a", 1.0), ("b", 0.0)]


def test_migrating_another_database_reuses_the_role(empty_dsn: str) -> None:
    migrate.upgrade(empty_dsn)
    with connect(empty_dsn) as c:
        row = c.execute(
            "SELECT (SELECT count(*) FROM pg_roles WHERE rolname = 'pglogic_reader'),"
            " has_schema_privilege('pglogic_reader', 'pglogic', 'USAGE'),"
            " has_table_privilege('pglogic_reader', 'pglogic.corpora', 'SELECT'),"
            " has_function_privilege('pglogic_reader', 'pglogic.search(text, jsonb)', 'EXECUTE')"
        ).fetchone()
    assert row == (1, True, True, True)
