"""Migrations up and down on a real Postgres, and the schema shipped inside the package."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pglogic.store import migrate
from pglogic.store.db import connect

pytestmark = pytest.mark.db


def _tables(dsn: str) -> set[str]:
    with connect(dsn) as c:
        rows = c.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'pglogic'"
        ).fetchall()
    return {r[0] for r in rows}


def test_upgrade_creates_schema_and_downgrade_removes_it(empty_dsn: str) -> None:
    assert migrate.current(empty_dsn) is None
    migrate.upgrade(empty_dsn)
    assert migrate.current(empty_dsn) == migrate.head()
    assert {"corpora", "embeddings"} <= _tables(empty_dsn)
    with connect(empty_dsn) as c:
        row = c.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert row is not None
    migrate.downgrade(empty_dsn, "base")
    assert migrate.current(empty_dsn) is None
    assert _tables(empty_dsn) == set()
    migrate.upgrade(empty_dsn)  # and up again
    assert migrate.current(empty_dsn) == migrate.head()


def test_upgrade_is_idempotent(dsn: str) -> None:
    migrate.upgrade(dsn)
    migrate.upgrade(dsn)
    assert migrate.current(dsn) == migrate.head()


def test_version_table_does_not_collide_with_application_alembic(empty_dsn: str) -> None:
    with connect(empty_dsn) as c:
        c.execute("CREATE TABLE alembic_version (version_num varchar(32) PRIMARY KEY)")
        c.execute("INSERT INTO alembic_version VALUES ('app_rev_1')")
        c.commit()
    migrate.upgrade(empty_dsn)
    with connect(empty_dsn) as c:
        assert c.execute("SELECT version_num FROM alembic_version").fetchall() == [("app_rev_1",)]


def test_cli_db_commands(empty_dsn: str) -> None:
    from tests.conftest import run_cli

    out = run_cli("--dsn", empty_dsn, "db", "current")
    assert out.returncode == 0, out.stderr
    assert "current: none" in out.stdout
    out = run_cli("--dsn", empty_dsn, "db", "upgrade")
    assert out.returncode == 0, out.stderr
    assert f"revision {migrate.head()}" in out.stdout
    out = run_cli("--dsn", empty_dsn, "db", "downgrade", "base", "--yes")
    assert out.returncode == 0, out.stderr
    assert migrate.current(empty_dsn) is None


def test_migrations_ship_inside_the_wheel(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(root)],
        check=True, capture_output=True,
    )  # fmt: skip
    wheel = next(tmp_path.glob("pglogic-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "pglogic/migrations/env.py" in names
    assert "pglogic/migrations/script.py.mako" in names
    assert "pglogic/migrations/versions/0001_initial.py" in names
    assert "pglogic/py.typed" in names


def test_unknown_revision_is_a_clear_error(empty_dsn: str) -> None:
    from pglogic.errors import SchemaError

    with pytest.raises(SchemaError, match="Migration upgrade to 9999 failed"):
        migrate.upgrade(empty_dsn, "9999")
    assert migrate.current(empty_dsn) is None


def test_missing_privilege_is_a_clear_error_and_applies_nothing(
    empty_dsn: str, pg_server: object
) -> None:
    import uuid

    from psycopg.conninfo import make_conninfo

    from pglogic.errors import SchemaError

    role = f"weak_{uuid.uuid4().hex[:8]}"
    with connect(empty_dsn, autocommit=True) as c:
        c.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        with pytest.raises(SchemaError, match="failed \\(nothing applied\\)"):
            migrate.upgrade(make_conninfo(empty_dsn, user=role))
        assert migrate.current(empty_dsn) is None
    finally:
        with connect(empty_dsn, autocommit=True) as c:
            c.execute(f'DROP ROLE "{role}"')
