"""Installing pglogic's schema: frozen migrations, ``sql/install.sql`` for psql, the wheel.

- the head revision installs exactly the functions of ``sql/``;
- stepping down one revision gives the catalog of a database migrated straight to that revision;
- ``sql/install.sql`` is current, runs as psql would run it (statement by statement, no
  meta-commands) and gives the catalog of ``pglogic db upgrade``, version row included; the
  upgrade scripts of ``pglogic db sql --from REV`` do the same from every revision;
- the wheel ships ``migrations/`` and ``sql/`` and migrates a database from a fresh venv.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pglogic.errors import InvalidInput, SchemaError
from pglogic.resources import resource_dir
from pglogic.store import migrate
from pglogic.store.db import connect
from tests.conftest import Server, database_at, head_functions, revisions, squashed_revisions

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ROOT / "sql" / "install.sql"
#: The files of sql/ that the head revision installs, in the order it applies them.
SOURCES = ("operators.sql", "search.sql", "reader.sql")


# -- catalogs --------------------------------------------------------------------------------------

_IN_SCOPE = "(n.nspname = 'pglogic' OR c.relname = 'pglogic_alembic_version')"

CATALOG_QUERIES = {
    "extensions": "SELECT extname FROM pg_extension ORDER BY 1",
    "relations": f"""
        SELECT n.nspname, c.relname, c.relkind,
               coalesce(c.relacl, acldefault('r', c.relowner))::text,
               obj_description(c.oid, 'pg_class')
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE {_IN_SCOPE} ORDER BY 1, 2""",
    "columns": """
        SELECT table_schema, table_name, column_name, ordinal_position, data_type, udt_name,
               character_maximum_length, is_nullable, column_default, is_identity,
               identity_generation
        FROM information_schema.columns
        WHERE table_schema = 'pglogic' OR table_name = 'pglogic_alembic_version'
        ORDER BY 1, 2, 4""",
    "constraints": f"""
        SELECT c.relname, k.conname, pg_get_constraintdef(k.oid)
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE {_IN_SCOPE} ORDER BY 1, 2""",
    "indexes": """
        SELECT schemaname, tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = 'pglogic' OR tablename = 'pglogic_alembic_version' ORDER BY 1, 2, 3""",
    "functions": """
        SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid),
               coalesce(p.proacl, acldefault('f', p.proowner))::text,
               obj_description(p.oid, 'pg_proc')
        FROM pg_proc p WHERE p.pronamespace = 'pglogic'::regnamespace ORDER BY 1""",
    "schema": """
        SELECT coalesce(nspacl, acldefault('n', nspowner))::text,
               obj_description(oid, 'pg_namespace')
        FROM pg_namespace
        WHERE nspname = 'pglogic'""",
    "default_privileges": """
        SELECT defaclrole::regrole::text, defaclobjtype, defaclacl::text FROM pg_default_acl
        WHERE defaclnamespace = 'pglogic'::regnamespace ORDER BY 1, 2""",
    "reader": """
        SELECT r.rolname, r.rolcanlogin,
               has_schema_privilege(r.oid, 'pglogic', 'USAGE'),
               has_table_privilege(r.oid, v.t, 'SELECT')
        FROM pg_roles r LEFT JOIN (SELECT coalesce(to_regclass('pglogic.pglogic_alembic_version'),
                                                   to_regclass('pglogic_alembic_version')) AS t) v
             ON v.t IS NOT NULL
        WHERE r.rolname = 'pglogic_reader'""",
}


def catalog(dsn: str, *, version: bool = True) -> dict[str, list[tuple[Any, ...]]]:
    """What pglogic installed in a database: its relations, columns, constraints, indexes,
    functions (with definitions, grants and comments), default privileges, the reader role's
    rights and the version row; names and texts only, so two databases compare equal."""
    with connect(dsn, vector=False) as c:
        if c.execute("SELECT to_regnamespace('pglogic')").fetchone() == (None,):
            return {"extensions": c.execute(CATALOG_QUERIES["extensions"]).fetchall()}
        out = {name: c.execute(query).fetchall() for name, query in CATALOG_QUERIES.items()}
    if version and (rev := migrate.current(dsn)) is not None:
        out["version"] = [(rev,)]
    return out


def functions(dsn: str) -> dict[str, tuple[str, str | None]]:
    """Every pglogic function's definition (``pg_get_functiondef``: body, SET options) and
    comment, by signature."""
    return {
        sig: (definition, comment) for sig, definition, _acl, comment in catalog(dsn)["functions"]
    }


def diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The parts of two catalogs that differ (for readable assertion messages)."""
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


# -- psql ------------------------------------------------------------------------------------------

_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z_0-9]*)?\$")


def psql_statements(script: str) -> list[str]:
    """Split a script into the statements psql sends, one by one, like psql's lexer: ``;`` ends
    a statement outside quotes, dollar quotes, comments and parentheses.

    Fails on what psql would not send as it is: a backslash meta-command or a ``:variable``
    interpolation outside quotes.
    """
    out: list[str] = []
    buf: list[str] = []
    depth = 0
    i, n = 0, len(script)

    def ident(ch: str) -> bool:
        return ch.isalnum() or ch == "_"

    while i < n:
        c = script[i]
        if script.startswith("--", i):
            end = script.find("\n", i)
            i = n if end < 0 else end
            continue
        if script.startswith("/*", i):
            i = script.index("*/", i + 2) + 2
            buf.append(" ")
            continue
        if c == "'":
            escapes = i > 0 and script[i - 1] in "eE" and (i < 2 or not ident(script[i - 2]))
            j = i + 1
            while True:
                if (escapes and script[j] == "\\") or script.startswith("''", j):
                    j += 2
                elif script[j] == "'":
                    break
                else:
                    j += 1
            buf.append(script[i : j + 1])
            i = j + 1
            continue
        if c == '"':
            j = script.index('"', i + 1)
            buf.append(script[i : j + 1])
            i = j + 1
            continue
        match = _DOLLAR.match(script, i)
        if c == "$" and match and not (i > 0 and ident(script[i - 1])):
            tag = match.group(0)
            j = script.index(tag, i + len(tag)) + len(tag)
            buf.append(script[i:j])
            i = j
            continue
        line = script.count("\n", 0, i) + 1
        assert c != "\\", f"psql meta-command on line {line}: {script[i : i + 30]!r}"
        assert not (
            c == ":"
            and i + 1 < n
            and (script[i + 1].isalpha() or script[i + 1] in "_'\"")
            and script[i - 1] != ":"
        ), f"psql would interpolate a variable on line {line}: {script[i : i + 30]!r}"
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == ";" and depth == 0:
            statement = "".join(buf).strip()
            if statement:
                out.append(statement + ";")
            buf = []
            i += 1
            continue
        buf.append(c)
        i += 1
    assert not "".join(buf).strip(), "the script ends inside a statement"
    return out


def run_as_psql(dsn: str, script: str) -> None:
    """Run a script the way ``psql -v ON_ERROR_STOP=1 -f`` does: statement by statement in
    autocommit mode (the script's BEGIN/COMMIT make the transaction), stopping at an error."""
    with connect(dsn, autocommit=True, vector=False) as c:
        for statement in psql_statements(script):
            c.execute(statement.encode())  # bytes: no placeholders, '%' stays '%'


def test_psql_statements_splits_like_psql() -> None:
    script = """
        -- a comment; with a semicolon
        CREATE FUNCTION f() RETURNS text LANGUAGE plpgsql AS $fn$ BEGIN RETURN ';'; END $fn$;
        SELECT 'it''s; fine', E'a\\'; b', "x;y" FROM t WHERE a IN (1; 2) /* ; */;
        SELECT 1::int;
    """
    assert psql_statements(script) == [
        "CREATE FUNCTION f() RETURNS text LANGUAGE plpgsql AS $fn$ BEGIN RETURN ';'; END $fn$;",
        "SELECT 'it''s; fine', E'a\\'; b', \"x;y\" FROM t WHERE a IN (1; 2);",
        "SELECT 1::int;",
    ]
    with pytest.raises(AssertionError, match="meta-command on line 2"):
        psql_statements("SELECT 1;\n\\set x 1\n")
    with pytest.raises(AssertionError, match="interpolate a variable"):
        psql_statements("SELECT :USER;")


# -- frozen migrations -----------------------------------------------------------------------------


@pytest.fixture
def sql_only_dsn(empty_dsn: str) -> str:
    """A database where only ``sql/`` ran, on the extension and schema that revision 0001 makes."""
    with connect(empty_dsn, vector=False) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute("CREATE SCHEMA pglogic")
        for name in SOURCES:
            c.execute((resource_dir("sql") / name).read_bytes())
    return empty_dsn


def test_sql_sources_are_the_files_of_sql() -> None:
    names = {p.name for p in resource_dir("sql").glob("*.sql")}
    assert names == {*SOURCES, "install.sql"}


def test_head_installs_the_functions_of_sql(dsn: str, sql_only_dsn: str) -> None:
    migrated = functions(dsn)
    assert len(migrated) == head_functions()
    assert migrated == functions(sql_only_dsn)


def test_each_downgrade_gives_the_catalog_of_its_target(
    dsn: str, pg_server: Server, revision_templates: dict[str, str]
) -> None:
    """Down from head one revision at a time: at each revision the database has exactly what a
    database migrated up to that revision has (the previous revision's frozen SQL)."""
    targets = [r for r in revisions()[:-1] if r not in squashed_revisions()]
    expected: dict[str, dict[str, Any]] = {}
    for rev in targets:
        with database_at(pg_server, revision_templates, rev) as fresh:
            expected[rev] = catalog(fresh)
    for rev in reversed(targets):  # (below the squash: 0001, its functions all dropped)
        migrate.downgrade(dsn, rev)
        got = catalog(dsn)
        assert got == expected[rev], diff(got, expected[rev])


@pytest.mark.parametrize("start", squashed_revisions())
def test_a_database_at_a_squashed_revision_upgrades_to_the_head(
    start: str, dsn: str, pg_server: Server, revision_templates: dict[str, str]
) -> None:
    """A database that a release of a squashed revision made (its own functions) upgrades
    through the revisions' table changes and 0017's squash to exactly the head's catalog."""
    with database_at(pg_server, revision_templates, start) as at_start:
        assert migrate.current(at_start) == start
        migrate.upgrade(at_start)
        got, upgraded = catalog(at_start), catalog(dsn)
    assert got == upgraded, diff(got, upgraded)


def test_no_migration_stops_at_a_squashed_revision(dsn: str, empty_dsn: str) -> None:
    before = catalog(dsn)
    for squashed in ("0008", "0015"):  # (0008: squashed into 0013 first; 0015: since 0017)
        with pytest.raises(SchemaError, match=f"revision {squashed} is squashed into 0017"):
            migrate.downgrade(dsn, squashed)
        assert catalog(dsn) == before
    for squashed in ("0005", "0014"):
        with pytest.raises(SchemaError, match=f"revision {squashed} is squashed into 0017"):
            migrate.upgrade(empty_dsn, squashed)
        assert migrate.current(empty_dsn) is None
        with pytest.raises(InvalidInput, match=f"Revision {squashed} is squashed into 0017"):
            migrate.check_revision(squashed)
        # (a database at it upgrades)
        assert "pglogic.search" in migrate.upgrade_sql(squashed)


# -- sql/install.sql -------------------------------------------------------------------------------


def test_install_sql_is_current() -> None:
    assert INSTALL.read_text(encoding="utf-8") == migrate.upgrade_sql(), (
        "sql/install.sql is stale: run `pglogic db sql > sql/install.sql`"
    )


def test_install_sql_gives_the_catalog_of_db_upgrade(dsn: str, empty_dsn: str) -> None:
    statements = psql_statements(INSTALL.read_text(encoding="utf-8"))
    assert statements[0] == "BEGIN;" and statements[-1] == "COMMIT;"
    run_as_psql(empty_dsn, INSTALL.read_text(encoding="utf-8"))
    upgraded, installed = catalog(dsn), catalog(empty_dsn)
    assert installed["version"] == [(migrate.head(),)]
    assert installed == upgraded, diff(installed, upgraded)
    # the version row tells a later `pglogic db upgrade` that there is nothing to do
    assert migrate.current(empty_dsn) == migrate.head()
    migrate.upgrade(empty_dsn)
    assert catalog(empty_dsn) == upgraded
    # and the Python side can take it down like any migrated database
    migrate.downgrade(empty_dsn, "base")
    assert migrate.current(empty_dsn) is None


def test_install_sql_twice_stops_with_nothing_applied(dsn: str) -> None:
    before = catalog(dsn)
    with pytest.raises(psycopg.errors.DuplicateTable, match="pglogic_alembic_version"):
        run_as_psql(dsn, INSTALL.read_text(encoding="utf-8"))
    assert catalog(dsn) == before


@pytest.mark.parametrize("start", revisions()[:-1])
def test_upgrade_scripts_from_each_revision(
    start: str, dsn: str, pg_server: Server, revision_templates: dict[str, str]
) -> None:
    with database_at(pg_server, revision_templates, start) as at_start:
        run_as_psql(at_start, migrate.upgrade_sql(start))
        got, upgraded = catalog(at_start), catalog(dsn)
    assert got == upgraded, diff(got, upgraded)


def test_upgrade_script_refuses_a_database_at_another_revision(empty_dsn: str) -> None:
    migrate.upgrade(empty_dsn, "0017")
    before = catalog(empty_dsn)
    with pytest.raises(psycopg.errors.RaiseException) as info:
        run_as_psql(empty_dsn, migrate.upgrade_sql("0018"))
    assert info.value.diag.message_primary == (
        "pglogic: this script starts from revision 0018; the database is at 0017"
    )
    assert catalog(empty_dsn) == before


def test_cli_db_sql_prints_the_install_script() -> None:
    from click.testing import CliRunner

    from pglogic.cli import cli

    result = CliRunner().invoke(cli, ["db", "sql"])
    assert result.exit_code == 0, result.output
    assert result.output == INSTALL.read_text(encoding="utf-8")
    result = CliRunner().invoke(cli, ["db", "sql", "--from", "0003"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("-- pglogic's schema from revision 0003 to ")
    result = CliRunner().invoke(cli, ["db", "sql", "--from", "9999"])
    assert isinstance(result.exception, InvalidInput)  # main() prints it as one sentence
    assert str(result.exception).startswith("Unknown revision '9999': ")


# -- the wheel -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    return next(out.glob("pglogic-*.whl"))


def test_the_wheel_ships_migrations_and_sql(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    frozen = {f"pglogic/migrations/versions/sql/{p.name}"
              for p in (ROOT / "migrations" / "versions" / "sql").glob("*.sql")}  # fmt: skip
    assert len(frozen) >= 5
    assert (
        frozen
        | {
            "pglogic/migrations/env.py",
            "pglogic/migrations/script.py.mako",
            "pglogic/migrations/versions/0001_initial.py",
            "pglogic/migrations/versions/0002_sql_functions.py",
            "pglogic/migrations/versions/0003_default_operators.py",
            "pglogic/migrations/versions/0004_calibration.py",
            "pglogic/migrations/versions/0005_search_plans.py",
            "pglogic/sql/operators.sql",
            "pglogic/sql/search.sql",
            "pglogic/sql/reader.sql",
            "pglogic/sql/install.sql",
            "pglogic/data/arxiv_categories.json",
            "pglogic/engine/render.py",
            "pglogic/store/term_cache.py",
            "pglogic/py.typed",
        }
        <= names
    )


@pytest.mark.slow
def test_the_wheel_installs_and_migrates(wheel: Path, empty_dsn: str, tmp_path: Path) -> None:
    """The wheel in a fresh venv (its dependencies borrowed from this environment, the editable
    pglogic not) runs ``pglogic db upgrade`` from its own migrations."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # A plain path line: the dependencies are importable, this environment's .pth files (the
    # editable install's among them) are not processed.
    Path(site, "_borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
         str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def run(*args: str) -> str:
        out = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        return out.stdout

    where = run(str(python), "-c",
                "import pglogic, pglogic.resources as r; print(pglogic.__file__);"
                " print(r.resource_dir('migrations')); print(r.resource_dir('sql'))")  # fmt: skip
    package = Path(site, "pglogic")
    assert where.split() == [
        str(package / "__init__.py"),
        str(package / "migrations"),
        str(package / "sql"),
    ]
    exe = str(venv / "bin" / "pglogic")
    assert f"Schema at revision {migrate.head()}" in run(exe, "--dsn", empty_dsn, "db", "upgrade")
    current = run(exe, "--dsn", empty_dsn, "db", "current")
    assert f"current: {migrate.head()}  head: {migrate.head()}" in current
    assert run(exe, "db", "sql") == INSTALL.read_text(encoding="utf-8")
