"""Migrations up and down on a real Postgres; the frozen SQL of each revision.

Each revision applies its own copy of the SQL (``migrations/versions/sql/<rev>_<file>.sql``),
never the current ``sql/``: the copies never change (their SHA-256 are pinned here), and the
newest copy of each file of ``sql/`` is that file byte for byte, so a change to ``sql/`` needs a
new revision (migrations/README.md).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from pglogic.resources import resource_dir
from pglogic.store import migrate
from pglogic.store.db import connect

VERSIONS = resource_dir("migrations") / "versions"
FROZEN = VERSIONS / "sql"

#: The frozen SQL of every revision. A new revision adds its files here; an existing line never
#: changes (a database at that revision has exactly that text).
FROZEN_SHA256 = {
    "0002_operators.sql": "02954ed7e300bc6c5935ffa6eb89a3cb3b5b80599118a3b891e69fb4d9d4476c",
    "0002_search.sql": "7bcc44b9fd3488d52cb11f1e46073e8a13bb3e4aca914a1fe6b9edf87cc1b361",
    "0002_reader.sql": "e2040a525b7d5f84bd6c551b21d9da98dfd09322f448c3c5aec756d442562468",
    "0003_search.sql": "521794b33e8612878a127484cde58bb625c0bb9325d341c9625da294fa131a10",
    "0004_search.sql": "379e70586a165ab891d0753484f769461039a836063a8d6eeaf40c9234c535a3",
    "0005_search.sql": "5e3d5e12d728a17fb7ce52d14e571df4cc8c6ed028a8d44242f25dbdaa395d4e",
    "0006_search.sql": "779ece3bdf15b450ba0615cb0b2eabee272b2ffe930dae097436006c4660c9b6",
    "0007_search.sql": "2d9931b6efecb9b2d68e2e6b463978f68f26f9b7512db7301aee11c61c7f6641",
    "0008_search.sql": "dc263e82305b333e8ac24f4892f22a891bc4de6947fcfff58b880f90ca563ab8",
    "0010_search.sql": "323453217d1755851cd54dba952d5802e8b1608476697fb414c3480be933361b",
    "0011_search.sql": "6df9fe9b6d13841a304ff472d47a220730b50dfa7ace671d20a3478b4ec8347c",
    "0012_search.sql": "6f3c59ce827d5320ba2e8c364fa242e1f0a0033443ebaeaa0e537062a7b20a00",
    "0013_search.sql": "03b0b59ecefa3a35808d80e5f44ba434df60db23eb61c0873285f467ed404f09",
    "0014_search.sql": "add7c7f527136b73fe3c8cd8b1376eb93f7859bb1a2cb1953e64134564eb2f7e",
    "0015_search.sql": "6c381177d3230c6f9fba85fda21663cc1c26a40f63e7b027bd542cb62e24d4cb",
    "0016_search.sql": "1cb51a121358cfef1e41f5151cd487dc3531815e7e0923fa776861f805cd23f9",
    "0017_search.sql": "6e63f1bbe708b7dc6f5eaefc2341d5f8aafc03273a2c2d0be4ebd05fbbc56e33",
    "0018_reader.sql": "d459720aaa78da6b37e18e13b0b205f77221705bf36b0bfc3b154c0d623c1adb",
}

_FROZEN_NAME = re.compile(r"^(\d{4})_(\w+\.sql)$")


def _revision_files() -> dict[str, Path]:
    out = {}
    for path in VERSIONS.glob("*.py"):
        match = re.search(r"^revision = \"(\w+)\"$", path.read_text(encoding="utf-8"), re.M)
        if match:
            out[match.group(1)] = path
    return out


def test_frozen_sql_never_changes() -> None:
    got = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in FROZEN.glob("*")}
    assert got == FROZEN_SHA256, (
        "migrations/versions/sql/ changed: a released revision's SQL is frozen; put changed SQL "
        "in a new revision (migrations/README.md)"
    )


def test_the_newest_frozen_copy_of_each_sql_file_is_sql() -> None:
    """``sql/`` is what the head installs: a change to it needs a new revision with a copy."""
    newest: dict[str, Path] = {}
    revisions = _revision_files()
    for path in sorted(FROZEN.glob("*.sql")):
        match = _FROZEN_NAME.match(path.name)
        assert match, f"{path.name}: frozen files are named <revision>_<file of sql/>"
        rev, name = match.groups()
        assert rev in revisions, f"{path.name}: no revision {rev}"
        newest[name] = path  # sorted by name: the later revision wins
    sources = {p.name for p in resource_dir("sql").glob("*.sql")} - {"install.sql"}
    assert set(newest) == sources, "every file of sql/ (but install.sql) has frozen copies"
    for name, path in newest.items():
        assert path.read_bytes() == (resource_dir("sql") / name).read_bytes(), (
            f"sql/{name} differs from its newest frozen copy, {path.name}: add a revision "
            "that installs it (migrations/README.md)"
        )


def test_revisions_read_only_their_frozen_sql() -> None:
    """No revision imports pglogic or reads ``sql/``: what it runs cannot change later."""
    used: set[str] = set()
    for rev, path in _revision_files().items():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(from|import) pglogic", text, re.M), (
            f"{path.name} imports pglogic"
        )
        assert "sql_text" not in text and "resource_dir" not in text, path.name
        used |= set(re.findall(r"\b(\d{4}_\w+\.sql)\b", text))
        for name in re.findall(r"\b(\d{4})_\w+\.sql\b", text):
            assert name <= rev, f"{path.name} reads the SQL of a later revision, {name}"
    assert used == set(FROZEN_SHA256), "every frozen file is applied by a revision"


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
