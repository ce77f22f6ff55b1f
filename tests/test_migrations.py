"""Migrations up and down on a real Postgres; the frozen SQL of each revision.

Each revision applies its own frozen SQL (``migrations/versions/sql/<rev>_<file>.sql``: the
statements of ``sql/<file>`` it changed, ``migrations/sqlfiles.py``), never the current ``sql/``:
the frozen files never change (their SHA-256 are pinned here), and the chain of them reproduces
``sql/``, so a change to ``sql/`` needs a new revision (migrations/README.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

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
    "0002_reader.sql": "e2040a525b7d5f84bd6c551b21d9da98dfd09322f448c3c5aec756d442562468",
    "0002_search.sql": "7bcc44b9fd3488d52cb11f1e46073e8a13bb3e4aca914a1fe6b9edf87cc1b361",
    "0003_search.sql": "7e4a0a91f53838eac6b5be9a4b96ebdf8c57e1ad0963d9b407d63ab1d4771092",
    "0004_search.sql": "3344ff62fbc8b1a0f8e72b61ddc249b009dca1176411a3ae1b93dc77cd08f0c5",
    "0005_search.sql": "243d9755395bad323a53cd8ea9781eaec09fc15cdebf8d731eb8e57d766cb951",
    "0006_search.sql": "ca275ca094ee8a775f99a864192006917138bbfb515ddf8956416aebcfde34db",
    "0007_search.sql": "aa44ef110b93a4da93b6fb34fc119e2f3dc325e3fff317a73e16f3bc7af62918",
    "0008_search.sql": "f207207cd42abe82f3bd422437fbd7a66f18e1216bb21b77f272cb8a20a4de43",
    "0010_search.sql": "fa654cfe8e587d3fad14982876642fcf66808ed261301bdb815fd17c7f22fdf1",
    "0011_search.sql": "36fe4e126e19c94d57408c9eefe3062b393a8d80a7f661c4c291e785932f665b",
    "0012_search.sql": "fea0acf3352ea989086ee5fd5a2b9d1c72088e4c70cb75243857559ee3c93906",
    "0013_search.sql": "67d13c67c6e8021291119cb45b04622117661d414c921ea8c5650560927f9e08",
    "0014_search.sql": "d3dc621b2572b693610f2208c4e4ab471a7eb0c8ab59a0005599db6fe07c2302",
    "0015_search.sql": "379950d47b44d94dbe8d3f9b5df4ce93f4090036aeb26f806bbc9a39c7430a58",
    "0016_search.sql": "86df2e06a2d8a295c321e2889a43bf51df871346f9fdf9ed16ac354bae8ef2ec",
    "0017_search.sql": "7278eaeb096f2d5a13f61cafaa2e63dc6b87c2bae4bba4d76a4054c85b971f48",
    "0018_reader.sql": "d459720aaa78da6b37e18e13b0b205f77221705bf36b0bfc3b154c0d623c1adb",
    "0019_search.sql": "c4dff956443ad89c07375c8f693a75eb946ffa1b5bd88a351bf63c3b8788c229",
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


def _sqlfiles() -> Any:
    spec = importlib.util.spec_from_file_location(
        "sqlfiles_under_test", resource_dir("migrations") / "sqlfiles.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sqlfiles_under_test"] = module
    spec.loader.exec_module(module)
    return module


def test_the_chain_of_deltas_reproduces_sql() -> None:
    """``sql/`` is what the head installs: each file's deltas, applied in order, give every
    statement of it, and it holds no change that no revision froze (that needs a new revision:
    ``python migrations/sqlfiles.py NNNN search.sql``)."""
    sf = _sqlfiles()
    revisions = _revision_files()
    names = set()
    for path in sorted(FROZEN.glob("*.sql")):
        match = _FROZEN_NAME.match(path.name)
        assert match, f"{path.name}: frozen files are named <revision>_<file of sql/>"
        rev, name = match.groups()
        assert rev in revisions, f"{path.name}: no revision {rev}"
        names.add(name)
    sources = {p.name for p in resource_dir("sql").glob("*.sql")} - {"install.sql"}
    assert names == sources, "every file of sql/ (but install.sql) has frozen statements"
    after_head = f"{int(max(revisions)) + 1:04d}"
    for name in sorted(names):
        head = sf.parse((resource_dir("sql") / name).read_text(encoding="utf-8"))
        chain = sf.resolved(name)
        assert {s.key: s.text for s in head} == {k: s.text for k, s in chain.items()}, (
            f"the deltas of {name} do not reproduce sql/{name}"
        )
        assert sf.delta(name, after_head) == "", f"sql/{name} changed: add a revision"


def test_a_delta_holds_only_what_changed() -> None:
    """Each delta of search.sql is smaller than the file, and its downgrade text restores
    exactly the statements it changed that existed before."""
    sf = _sqlfiles()
    full = len((resource_dir("sql") / "search.sql").read_text(encoding="utf-8"))
    for path in sorted(FROZEN.glob("0*_search.sql"))[1:]:
        rev = path.name[:4]
        keys = [s.key for s in sf.parse(path.read_text(encoding="utf-8"))]
        before = sf.resolved("search.sql", f"{int(rev) - 1:04d}")
        restored = {s.key for s in sf.parse(sf.restore("search.sql", rev))}
        changed = {k for k in keys if not k.startswith("do ")}
        assert changed - {k for k in restored if not k.startswith("do ")} <= set(keys) - set(before)
        assert {k for k in restored if not k.startswith("do ")} <= set(before)
        assert path.stat().st_size < full, path.name


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
