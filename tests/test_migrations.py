"""Migrations up and down on a real Postgres; the frozen SQL of each revision.

Each revision applies its own frozen SQL (``migrations/versions/sql/<rev>_<file>.sql``: the
statements of ``sql/<file>`` it changed, ``migrations/sqlfiles.py``), never the current ``sql/``:
the frozen files never change (their SHA-256 are pinned here), and the chain of them reproduces
``sql/``, so a change to ``sql/`` needs a new revision (migrations/README.md).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from pglogic.resources import resource_dir
from pglogic.store import migrate
from pglogic.store.db import connect
from tests.conftest import sqlfiles_module

VERSIONS = resource_dir("migrations") / "versions"
FROZEN = VERSIONS / "sql"

#: The frozen SQL of every revision. A new revision adds its files here; an existing line never
#: changes (a database at that revision has exactly that text), but for a squash: 0017's file
#: holds the search.sql of 0002 to 0017 whole, where 0013's held that of 0002 to 0013 and 0014
#: to 0017 had their deltas (conftest.SQUASH_COMMITS: the commits before each squash).
FROZEN_SHA256 = {
    "0002_operators.sql": "02954ed7e300bc6c5935ffa6eb89a3cb3b5b80599118a3b891e69fb4d9d4476c",
    "0002_reader.sql": "e2040a525b7d5f84bd6c551b21d9da98dfd09322f448c3c5aec756d442562468",
    "0017_search.sql": "e66fc06aa81f184ef0b1700dce6f063d7de866bb32e40ff22d21920616d5a7dc",
    "0018_reader.sql": "d459720aaa78da6b37e18e13b0b205f77221705bf36b0bfc3b154c0d623c1adb",
    "0019_search.sql": "3b7eae1de7caec3354391df17462e222383f0d9323a5e4a50bfac64c532f2cf2",
    "0020_search.sql": "f1c7de1a944ee7e338175f72bb1c9963075d168bf24fbfb6ba1daf4814b373ca",
    "0021_search.sql": "35dc5872fcc8c6a95833c8fec721c000725101006cf1a533e058abc21649a631",
    "0022_search.sql": "13e527f2bb1ac9237ce2bdd9ecca5c1f7fdb95b4981a56920b225891c53f22a7",
    "0023_search.sql": "93ba9f6595dd9a747dbdc0a217a366c07de2f332a3b900ed3db8e4b3913a46fc",
}

#: The most lines the frozen SQL and the install script may hold: a revision freezes only what
#: it changes, and old revisions are squashed before the chain grows past this.
MAX_FROZEN_LINES, MAX_INSTALL_LINES = 8_000, 5_000


def test_the_frozen_sql_and_the_install_script_stay_small() -> None:
    frozen = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in FROZEN.glob("*.sql"))
    assert frozen <= MAX_FROZEN_LINES, f"{frozen:,} frozen lines: squash old revisions"
    install = resource_dir("sql") / "install.sql"
    assert len(install.read_text(encoding="utf-8").splitlines()) <= MAX_INSTALL_LINES


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


def test_the_chain_of_deltas_reproduces_sql() -> None:
    """``sql/`` is what the head installs: each file's deltas, applied in order, give every
    statement of it, and it holds no change that no revision froze (that needs a new revision:
    ``python migrations/sqlfiles.py NNNN search.sql``)."""
    sf = sqlfiles_module()
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
    sf = sqlfiles_module()
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
        used |= set(re.findall(r"\"(\d{4}_\w+\.sql)\"", text))  # (a file it runs: a string)
        for name in re.findall(r"\"(\d{4})_\w+\.sql\"", text):
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
    from tests.conftest import cli_in_process

    out = cli_in_process("--dsn", empty_dsn, "db", "current")
    assert out.returncode == 0, out.stderr
    assert "current: none" in out.stdout
    out = cli_in_process("--dsn", empty_dsn, "db", "upgrade")
    assert out.returncode == 0, out.stderr
    assert f"revision {migrate.head()}" in out.stdout
    # an upgrade to an older revision says so (it did nothing and exited 0)
    out = cli_in_process("--dsn", empty_dsn, "db", "upgrade", "0017")
    assert out.returncode != 0 and migrate.current(empty_dsn) == migrate.head()
    assert f"The database is at revision {migrate.head()}, newer than 0017" in out.stderr
    assert "pglogic db downgrade 0017 does" in out.stderr
    # -1 onto a squashed revision is refused before the prompt
    migrate.downgrade(empty_dsn, "0017")
    out = cli_in_process("--dsn", empty_dsn, "db", "downgrade", "-1")
    assert out.returncode != 0 and "Revision 0016 is squashed into 0017" in out.stderr
    assert "Downgrade the schema" not in out.stdout
    out = cli_in_process("--dsn", empty_dsn, "db", "downgrade", "base", "--yes")
    assert out.returncode == 0, out.stderr
    assert migrate.current(empty_dsn) is None
    # and again, on a database without pglogic: nothing to do, said so (it reported success)
    out = cli_in_process("--dsn", empty_dsn, "db", "downgrade", "-1", "--yes")
    assert out.returncode != 0 and "pglogic is not installed in this database" in out.stderr


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
