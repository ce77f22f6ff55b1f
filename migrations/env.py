"""Alembic environment for pglogic.

Used three ways: by ``pglogic db upgrade`` (which hands over a live connection in
``config.attributes["connection"]``), by plain ``alembic -c alembic.ini upgrade head`` with
``sqlalchemy.url`` (or ``PGLOGIC_DSN``) set, and offline by ``pglogic db sql`` (Alembic's
``--sql`` mode: an upgrade or a downgrade as one PostgreSQL script, no database needed).

The version table is ``pglogic.pglogic_alembic_version``: inside pglogic's own schema, so that
``pg_dump -n pglogic`` carries it, every role finds it whatever its ``search_path``, and it never
collides with an application's own Alembic history. Earlier pglogic kept it outside the schema
(``public``, or the first schema of the migrating role's ``search_path``): every run first moves
such a table into the schema (:data:`ADOPT`).

It also registers operations for the revisions (which never import pglogic):

- ``op.run_sql(script)``: SQL of several statements as it is (offline: printed for psql);

- ``op.run_sql_file("NNNN_search.sql")``: apply a revision's frozen SQL (a delta of
  ``sql/search.sql``, ``migrations/sqlfiles.py``); ``op.restore_sql_file(...)`` in its
  downgrade applies what the revisions before it installed for the same statements. When
  ``config.attributes["snapshot"]`` is set (``pglogic db sql`` from an empty database, which is
  ``sql/install.sql``) the files are skipped and the head's ``sql/`` files follow the last
  revision, so the script defines each function once;

- ``op.leave_squash("0017_search.sql")``: the downgrade of a revision whose frozen file squashed
  the revisions before it (``SQUASHED_INTO`` in theirs): only to 0001 or base, dropping its
  functions; no run stops at a squashed revision (refused before anything runs);

- ``op.keep_rows(table, fix)``: a downgrade that would drop ``table`` refuses while it holds
  rows, saying what they are and ``fix``, so a down/up round trip never loses the registry
  (except down to base, which removes pglogic with every corpus on purpose);
- ``op.drop_pglogic_schema()``: the downgrade to base; it refuses while objects outside the
  schema depend on it (``migrations/outside_dependents.sql``) unless told to cascade
  (``config.attributes["cascade"]``, or ``alembic -x cascade=true``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from alembic import context
from alembic.operations import MigrateOperation, Operations
from alembic.util.exc import CommandError
from sqlalchemy import create_engine, pool

SCHEMA = "pglogic"
VERSION_TABLE = "pglogic_alembic_version"
QUALIFIED = f"{SCHEMA}.{VERSION_TABLE}"

config = context.config


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("PGLOGIC_DSN", "")
    if not url:
        raise RuntimeError("Set sqlalchemy.url in alembic.ini or PGLOGIC_DSN")
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


#: Before every run: the schema exists (Alembic creates its version table first), and a version
#: table that an earlier pglogic made outside the schema is moved into it, privileges and all.
ADOPT = """\
DO $do$
DECLARE
    found text[];
BEGIN
    IF to_regnamespace('pglogic') IS NULL THEN  -- (no CREATE right needed when it exists)
        CREATE SCHEMA pglogic;
    END IF;
    IF to_regclass('pglogic.pglogic_alembic_version') IS NULL THEN
        SELECT array_agg(format('%I.%I', n.nspname, c.relname) ORDER BY n.nspname) INTO found
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relname = 'pglogic_alembic_version' AND c.relkind = 'r';
        IF cardinality(found) > 1 THEN
            RAISE EXCEPTION 'pglogic: found several version tables (%): keep the one that '
                'records this database''s pglogic revision and drop the others',
                array_to_string(found, ', ');
        ELSIF cardinality(found) = 1 THEN
            EXECUTE format('ALTER TABLE %s SET SCHEMA pglogic', found[1]);
        END IF;
    END IF;
END
$do$;
"""

# An offline script from a revision first checks that the database is at that revision (the
# version table's UPDATEs alone would match no row and change nothing).
CHECK_START = """\
DO $do$
BEGIN
    IF (SELECT array_agg(version_num) FROM {table}) IS DISTINCT FROM ARRAY['{start}']::varchar[]
    THEN
        RAISE EXCEPTION 'pglogic: this script starts from revision {start}; the database is at %',
            coalesce((SELECT string_agg(version_num, ', ') FROM {table}), 'no revision');
    END IF;
END
$do$;
"""

#: The revision that moved the version table into the schema (0018_version_table.py).
MOVED_AT = "0018"

#: After every run: a version table emptied by a downgrade to base goes, with the schema if it
#: held only that; a database left below :data:`MOVED_AT` gets its version table back where the
#: pglogic of that revision looks for it (the first schema of the search_path).
SETTLE = f"""\
DO $do$
BEGIN
    IF to_regclass('pglogic.pglogic_alembic_version') IS NULL THEN
        RETURN;
    ELSIF NOT EXISTS (SELECT 1 FROM pglogic.pglogic_alembic_version) THEN
        DROP TABLE pglogic.pglogic_alembic_version;
        IF NOT EXISTS (SELECT 1 FROM pg_class WHERE relnamespace = 'pglogic'::regnamespace)
           AND NOT EXISTS (SELECT 1 FROM pg_proc WHERE pronamespace = 'pglogic'::regnamespace)
           AND NOT EXISTS (SELECT 1 FROM pg_type WHERE typnamespace = 'pglogic'::regnamespace)
        THEN
            DROP SCHEMA pglogic;
        END IF;
    ELSIF (SELECT max(version_num) FROM pglogic.pglogic_alembic_version) < '{MOVED_AT}'
          AND current_schema() IS NOT NULL AND current_schema() <> 'pglogic' THEN
        EXECUTE format('ALTER TABLE pglogic.pglogic_alembic_version SET SCHEMA %I',
                       current_schema());
    END IF;
END
$do$;
"""

_OUTSIDE = (Path(__file__).with_name("outside_dependents.sql")).read_text(encoding="utf-8")
# The list as one text, for a DO block (the query's comment lines dropped).
_OUTSIDE_QUERY = "\n".join(
    line for line in _OUTSIDE.splitlines() if not line.startswith("--")
).strip()


def sqlfiles() -> ModuleType:
    """``migrations/sqlfiles.py``, loaded by path (the migrations are not a package)."""
    name = "pglogic_migrations_sqlfiles"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("sqlfiles.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


#: The head's sql/ files a snapshot install applies after the last revision, in first-use order.
_SNAPSHOT: list[str] = []


def _apply(operations: Operations, script: str) -> None:
    if not script.strip():
        return
    if context.is_offline_mode():  # pglogic db sql: the script as it is, for psql
        context.static_output(script.strip())
        return
    # Straight to the driver: the function bodies hold '%' (RAISE, format), not bind parameters.
    operations.get_bind().exec_driver_sql(script, execution_options={"no_parameters": True})


@Operations.register_operation("run_sql")
class RunSqlOp(MigrateOperation):
    """``op.run_sql(script)``: SQL of several statements, as it is (offline: printed for psql;
    online: straight to the driver, so that '%' in function bodies is no bind parameter)."""

    def __init__(self, script: str) -> None:
        self.script = script

    @classmethod
    def run_sql(cls, operations: Operations, script: str) -> Any:
        return operations.invoke(cls(script))


@Operations.implementation_for(RunSqlOp)
def _run_sql(operations: Operations, operation: RunSqlOp) -> None:
    _apply(operations, operation.script)


class SqlFileOp(MigrateOperation):
    """``op.run_sql_file("0021_search.sql")``: a revision's frozen SQL; in its downgrade,
    ``op.restore_sql_file("0021_search.sql")``: what the revisions before it installed for the
    same statements."""

    def __init__(self, name: str, restore: bool) -> None:
        self.name = name
        self.restore = restore

    @classmethod
    def run_sql_file(cls, operations: Operations, name: str) -> Any:
        return operations.invoke(cls(name, restore=False))

    @classmethod
    def restore_sql_file(cls, operations: Operations, name: str) -> Any:
        return operations.invoke(cls(name, restore=True))


Operations.register_operation("run_sql_file")(SqlFileOp)
Operations.register_operation("restore_sql_file")(SqlFileOp)


@Operations.implementation_for(SqlFileOp)
def _sql_file(operations: Operations, operation: SqlFileOp) -> None:
    revision, name = operation.name[:4], operation.name[5:]
    if operation.restore:
        _apply(operations, sqlfiles().restore(name, revision))
    elif config.attributes.get("snapshot"):  # the head's file follows the last revision
        if name not in _SNAPSHOT:
            _SNAPSHOT.append(name)
    else:
        _apply(operations, sqlfiles().applied(name, revision))


@Operations.register_operation("leave_squash")
class LeaveSquashOp(MigrateOperation):
    """``op.leave_squash("0017_search.sql")``: the downgrade of a revision whose frozen file is
    the squash of the revisions before it. No database is left at one of those (their SQL is
    gone): only a downgrade to 0001 or base passes, and it drops the file's functions, newest
    first (SQL-standard bodies record what they call)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @classmethod
    def leave_squash(cls, operations: Operations, name: str) -> Any:
        return operations.invoke(cls(name))


@Operations.implementation_for(LeaveSquashOp)
def _leave_squash(operations: Operations, operation: LeaveSquashOp) -> None:
    revision, name = operation.name[:4], operation.name[5:]
    try:
        target = context.get_revision_argument()
    except Exception:  # a relative step: pglogic db names the revision first
        target = "a relative step"
    if target is not None and target != "0001":
        raise CommandError(
            f"pglogic: revision {revision} squashed the SQL of the revisions before it, so a "
            f"database goes below {revision} only to 0001 or base, not to {target}"
        )
    names = [k.removeprefix("function ") for k in sqlfiles().resolved(name, revision)]
    drops = [f"DROP FUNCTION IF EXISTS {n};" for n in reversed(names) if n.startswith("pglogic.")]
    _apply(operations, "\n".join(drops))


def _refuse_a_squashed_target() -> None:
    """A revision whose SQL a later one squashed (``SQUASHED_INTO``) is no target: a database
    passes through it, never stops at it."""
    try:
        target = context.get_revision_argument()
        found = context.script.get_revision(target) if isinstance(target, str) else None
    except Exception:  # head, base, relative steps: pglogic db resolves those first
        return
    into = getattr(getattr(found, "module", None), "SQUASHED_INTO", None)
    if into:
        raise CommandError(
            f"pglogic: revision {target} is squashed into {into}: migrate to {into} or later "
            "(or down to 0001 or base)"
        )


@Operations.register_operation("keep_rows")
class KeepRowsOp(MigrateOperation):
    """``op.keep_rows("pglogic.passage_layouts", "drop those corpora first")``."""

    def __init__(self, table: str, fix: str) -> None:
        self.table = table
        self.fix = fix

    @classmethod
    def keep_rows(cls, operations: Operations, table: str, fix: str) -> Any:
        return operations.invoke(cls(table, fix))


@Operations.implementation_for(KeepRowsOp)
def _keep_rows(operations: Operations, operation: KeepRowsOp) -> None:
    if _to_base():  # all of pglogic goes: nothing to keep
        return
    table, fix = operation.table, operation.fix.replace("'", "''")
    _apply(
        operations,
        f"""DO $do$
DECLARE
    n bigint;
BEGIN
    IF to_regclass('{table}') IS NOT NULL THEN
        EXECUTE 'SELECT count(*) FROM {table}' INTO n;
        IF n > 0 THEN
            RAISE EXCEPTION 'pglogic: this downgrade would drop {table}, which holds % row(s), '
                'and an upgrade could not bring them back: {fix}', n
                USING ERRCODE = 'dependent_objects_still_exist';
        END IF;
    END IF;
END
$do$;""",
    )


@Operations.register_operation("drop_pglogic_schema")
class DropSchemaOp(MigrateOperation):
    """``op.drop_pglogic_schema()``: the downgrade to base (keeps the version table)."""

    @classmethod
    def drop_pglogic_schema(cls, operations: Operations) -> Any:
        return operations.invoke(cls())


def _to_base() -> bool:
    """True when this run goes down to base (Alembic names base None)."""
    try:
        return context.get_revision_argument() is None
    except Exception:  # a relative step (-1): never base here, pglogic db resolves it first
        return False


def _cascade() -> bool:
    told = config.attributes.get("cascade")
    if told is None:
        told = context.get_x_argument(as_dictionary=True).get("cascade", "") == "true"
    return bool(told)


@Operations.implementation_for(DropSchemaOp)
def _drop_schema(operations: Operations, operation: DropSchemaOp) -> None:
    if not _cascade():
        _apply(
            operations,
            f"""DO $do$
DECLARE
    found text;
BEGIN
    SELECT string_agg(what, '; ') INTO found FROM ({_OUTSIDE_QUERY}) AS outside;
    IF found IS NOT NULL THEN
        RAISE EXCEPTION 'pglogic: dropping schema pglogic would also drop: %', found
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = 'Drop or change them first, or downgrade with --cascade '
                         '(pglogic db downgrade base --cascade; alembic -x cascade=true)';
    END IF;
END
$do$;""",
        )
    # The version table moves aside while the schema goes, so that Alembic can record base.
    _apply(
        operations,
        "CREATE SCHEMA pglogic_base_downgrade;\n"
        f"ALTER TABLE {QUALIFIED} SET SCHEMA pglogic_base_downgrade;\n"
        "DROP SCHEMA pglogic CASCADE;\n"
        "ALTER SCHEMA pglogic_base_downgrade RENAME TO pglogic;",
    )


def _configure(**kw: Any) -> None:
    context.configure(version_table=VERSION_TABLE, version_table_schema=SCHEMA, **kw)


def run_migrations_offline() -> None:
    # No database: the SQL is written for PostgreSQL, whatever the URL says.
    _configure(dialect_name="postgresql", literal_binds=True)
    start = context.get_starting_revision_argument()
    _refuse_a_squashed_target()
    with context.begin_transaction():
        context.static_output(ADOPT.strip())
        if isinstance(start, str) and start != "base":
            context.static_output(CHECK_START.format(table=QUALIFIED, start=start).strip())
        context.run_migrations()
        for name in _SNAPSHOT:  # the head's functions, once (a snapshot install)
            context.static_output((sqlfiles().HEAD_SQL / name).read_text(encoding="utf-8").strip())
        context.static_output(SETTLE.strip())


def _run_online(connection: Any) -> None:
    _refuse_a_squashed_target()
    connection.exec_driver_sql(ADOPT, execution_options={"no_parameters": True})
    _configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
    connection.exec_driver_sql(SETTLE, execution_options={"no_parameters": True})


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_online(connection)
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.begin() as conn:
        _run_online(conn)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
