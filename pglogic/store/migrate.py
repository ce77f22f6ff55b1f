"""Apply pglogic's Alembic migrations (the top-level ``migrations/``, shipped in the wheel).

Each revision applies its own frozen SQL (``migrations/versions/sql/``: the statements of
``sql/`` it changed); ``sql/`` is what the head revision installs. :func:`upgrade_sql` writes an upgrade as one script for psql
(``sql/install.sql`` is its output from an empty database).

Example:
    >>> upgrade("postgresql:///mydb")  # doctest: +SKIP
    >>> current("postgresql:///mydb")  # doctest: +SKIP
    '0001'
"""

from __future__ import annotations

import functools
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psycopg import errors, sql

from pglogic.errors import InvalidInput, SchemaError
from pglogic.resources import resource_dir
from pglogic.store.db import connect, require_schema, require_vector_available

if TYPE_CHECKING:  # Alembic and SQLAlchemy load when a migration runs, not to check the revision
    from alembic.config import Config
    from sqlalchemy import Engine

VERSION_SCHEMA = "pglogic"
VERSION_TABLE = "pglogic_alembic_version"
_REVISION_RE = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*(.+?)\s*$", re.M)


def script_location() -> Path:
    """Return the directory of the Alembic environment inside the installed package.

    Example:
        >>> (script_location() / "env.py").exists()
        True
    """
    return resource_dir("migrations")


def _config(output: io.StringIO | None = None) -> Config:
    from alembic.config import Config

    cfg = Config(stdout=io.StringIO(), output_buffer=output)
    cfg.set_main_option("script_location", str(script_location()))
    return cfg


def _engine(dsn: str) -> Engine:
    from sqlalchemy import create_engine, pool

    return create_engine(
        "postgresql+psycopg://",
        creator=lambda: connect(dsn, vector=False),
        poolclass=pool.NullPool,
    )


def head() -> str:
    """Return the newest revision shipped with this version of pglogic.

    Example:
        >>> head() >= "0002"
        True
    """
    from alembic.script import ScriptDirectory

    rev = ScriptDirectory.from_config(_config()).get_current_head()
    assert rev is not None
    return rev


@functools.cache
def shipped_head() -> str | None:
    """The newest migration shipped with this pglogic, read from the migration files' headers.

    Found without importing Alembic (what :func:`head` does, in tenths of a second); None when
    the headers do not name exactly one head, and then Alembic decides.

    Example:
        >>> shipped_head() >= "0004"
        True
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (resource_dir("migrations") / "versions").glob("*.py"):
        fields = dict(_REVISION_RE.findall(path.read_text(encoding="utf-8")))
        rev = fields.get("revision", "").strip("\"'")
        if not rev:  # not a migration (Alembic skips it too)
            continue
        if rev in revisions:
            return None
        revisions.add(rev)
        parents.update(re.findall(r"[\"']([^\"']+)[\"']", fields.get("down_revision", "")))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def schema_at_head(dsn: str) -> bool:
    """True when the database's pglogic schema is at :func:`shipped_head` (one query, no Alembic).

    False also when it cannot tell (no version table, several rows): then the caller asks Alembic.

    Example:
        >>> schema_at_head("postgresql:///search")  # doctest: +SKIP
        True
    """
    newest = shipped_head()
    if newest is None:
        return False
    stmt = sql.SQL("SELECT version_num FROM {}").format(
        sql.Identifier(VERSION_SCHEMA, VERSION_TABLE)
    )
    with connect(dsn, autocommit=True, vector=False) as conn:
        try:
            rows = conn.execute(stmt).fetchall()
        except (errors.UndefinedTable, errors.InvalidSchemaName):  # never migrated, or older
            return False
    return len(rows) == 1 and rows[0][0] == newest


@dataclass(frozen=True)
class SchemaState:
    """How a database's pglogic revision relates to this pglogic's code.

    ``usable``: this code can search and write there, at the same revision or inside the
    rolling-deploy window (``docs/operations.md``); otherwise ``advice`` says what to run.
    """

    current: str | None
    head: str
    usable: bool
    behind: bool
    advice: str


def compatible_with_previous(revision: str) -> bool:
    """Whether ``revision`` is marked ``COMPATIBLE_WITH_PREVIOUS`` in its file: code at it works
    against a database at its parent, and code at its parent against a database at it.

    Example:
        >>> compatible_with_previous("0018")
        False
    """
    from alembic.script import ScriptDirectory

    found = ScriptDirectory.from_config(_config()).get_revision(revision)
    return bool(getattr(getattr(found, "module", None), "COMPATIBLE_WITH_PREVIOUS", False))


def schema_state(dsn: str) -> SchemaState:
    """Compare the database's revision with this code's (the rolling-deploy window).

    Code at revision N works with a database at N; at N's parent when revision N is marked
    ``COMPATIBLE_WITH_PREVIOUS``; and at a newer revision whose ``pglogic.schema_compat`` row
    says code as old as N still works there.

    Example:
        >>> schema_state("postgresql:///mydb").usable  # doctest: +SKIP
        True
    """
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    newest = head()
    cur = current(dsn)
    if cur == newest:
        return SchemaState(cur, newest, True, False, "")
    if cur is None:
        return SchemaState(
            cur, newest, False, True,
            "The pglogic schema is not installed here; run 'pglogic db upgrade'",
        )  # fmt: skip
    script = ScriptDirectory.from_config(_config())
    try:
        known = script.get_revision(cur) is not None
    except CommandError:
        known = False
    if known:
        top = script.get_revision(newest)
        usable = top is not None and top.down_revision == cur and compatible_with_previous(newest)
        return SchemaState(
            cur, newest, usable, True,
            f"The database is at schema revision {cur}, this pglogic needs {newest}; "
            "run 'pglogic db upgrade'",
        )  # fmt: skip
    with connect(dsn, autocommit=True, vector=False) as conn:
        try:
            row = conn.execute(
                "SELECT oldest_code FROM pglogic.schema_compat WHERE revision = %s", (cur,)
            ).fetchone()
        except errors.UndefinedTable:
            row = None
    oldest = str(row[0]) if row else cur
    usable = oldest <= newest  # revisions are sequential four-digit ids
    return SchemaState(
        cur, newest, usable, False,
        f"The database is at schema revision {cur}, newer than this pglogic (which ships up "
        f"to {newest}) and used by pglogic code of revision {oldest} or later: upgrade the "
        "pglogic package here",
    )  # fmt: skip


def _run(dsn: str, action: str, revision: str, *, cascade: bool = False) -> None:
    from alembic import command
    from alembic.util.exc import CommandError
    from sqlalchemy.exc import DBAPIError

    with connect(dsn, autocommit=True, vector=False) as conn:
        require_vector_available(conn)
    engine = _engine(dsn)
    cfg = _config()
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            cfg.attributes["cascade"] = cascade
            if action == "upgrade":
                command.upgrade(cfg, revision)
            else:
                command.downgrade(cfg, revision)
    except DBAPIError as exc:
        orig = exc.orig
        first = str(orig).strip().splitlines()[0] if orig else str(exc)
        if isinstance(orig, errors.InsufficientPrivilege):
            from pglogic.store.db import permission_message

            first = permission_message(orig, dsn)
        first = first.removeprefix("pglogic: ")
        raise SchemaError(
            f"Migration {action} to {revision} failed (nothing applied): {first}"
        ) from exc
    except CommandError as exc:
        raise SchemaError(f"Migration {action} to {revision} failed: {exc}") from exc
    finally:
        engine.dispose()


#: A relative revision as alembic reads it: an optional branch, a symbol, then -N or +N.
_RELATIVE = re.compile(r"^(?:.+@)?(\w*)[-+]\d+$")


def check_revision(revision: str, *, stop: bool = True) -> None:
    """Raise :class:`InvalidInput` unless ``revision`` is ``base``, ``head``, a relative step
    (``-1``) or a revision this pglogic ships and a database may stop at (before asking to
    migrate to it): unless ``stop`` is false (a database at it, to upgrade from), not one squashed
    into a later revision.

    Example:
        >>> check_revision("0017"), check_revision("head-1"), check_revision("-2")
        (None, None, None)
        >>> check_revision("9999")
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Unknown revision '9999': pglogic ships 0001 to ...
    """
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    relative = _RELATIVE.match(revision)  # -1, head-1, 0017-2, base+1 (alembic's forms)
    symbol = relative.group(1) if relative else revision
    if symbol in ("", "base", "head"):
        return
    script = ScriptDirectory.from_config(_config())
    try:
        found = script.get_revision(symbol)
    except CommandError:
        found = None
    if found is None:
        raise InvalidInput(
            f"Unknown revision {revision!r}: pglogic ships 0001 to {head()}, and base"
        )
    into = getattr(found.module, "SQUASHED_INTO", None)
    if into and stop:
        raise InvalidInput(
            f"Revision {revision} is squashed into {into}: a database passes through it but "
            f"never stops there; migrate to {into} or later, or down to 0001 or base"
        )


def upgrade(dsn: str, revision: str = "head") -> None:
    """Migrate the database up to ``revision`` (default: the newest).

    Example:
        >>> upgrade("postgresql:///mydb")  # doctest: +SKIP
    """
    _run(dsn, "upgrade", revision)


def downgrade(dsn: str, revision: str, *, cascade: bool = False) -> None:
    """Migrate the database down to ``revision`` (``base`` removes pglogic entirely).

    Refused (nothing applied) when a step would drop registry rows that an upgrade could not
    bring back (passage layouts, lexical indexes, calibrations, the term cache), and, for base,
    while objects outside the schema depend on it (:func:`outside_dependents`) unless
    ``cascade``, which drops them too.

    Example:
        >>> downgrade("postgresql:///mydb", "base")  # doctest: +SKIP
    """
    _run(dsn, "downgrade", revision, cascade=cascade)


def resolve(dsn: str, revision: str) -> str | None:
    """The revision ``revision`` names for this database: itself, or a relative step (``-1``,
    ``+1``, ``head-2``, ``0018+1``) counted from the database's revision; None for base.

    Example:
        >>> resolve("postgresql:///mydb", "-1")  # doctest: +SKIP
        '0017'
    """
    from alembic.script import ScriptDirectory

    relative = re.match(r"^(\w*)([-+])(\d+)$", revision)
    if revision == "base":
        return None
    if relative is None:
        return head() if revision == "head" else revision
    symbol, sign, steps = relative.group(1), relative.group(2), int(relative.group(3))
    at = current(dsn) if symbol == "" else head() if symbol == "head" else symbol
    script = ScriptDirectory.from_config(_config())
    children = {
        str(r.down_revision): r.revision for r in script.walk_revisions() if r.down_revision
    }
    for _ in range(steps):
        if at is None and sign == "+":
            at = next((r.revision for r in script.walk_revisions() if not r.down_revision), None)
        elif at is None:
            break
        elif sign == "-":
            found = script.get_revision(at)
            at = None if found is None or not found.down_revision else str(found.down_revision)
        else:
            at = children.get(at, at)
    return at


def installed_corpora(dsn: str) -> list[tuple[str, int]]:
    """Each corpus's name and document count (empty when pglogic is not installed).

    Example:
        >>> installed_corpora("postgresql:///mydb")  # doctest: +SKIP
        [('news', 2000)]
    """
    out: list[tuple[str, int]] = []
    with connect(dsn, autocommit=True, vector=False) as conn:
        if conn.execute("SELECT to_regclass('pglogic.corpora')").fetchone() == (None,):
            return out
        for name, table in conn.execute("SELECT name, table_name FROM pglogic.corpora ORDER BY 1"):
            stmt = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("pglogic", table))
            row = conn.execute(stmt).fetchone()
            out.append((str(name), int(row[0]) if row else 0))
    return out


def reader_role_exists(dsn: str) -> bool:
    """Whether the cluster has the read-only role ``pglogic_reader`` (a migrator without
    CREATEROLE skips it, with a warning only the server log keeps).

    Example:
        >>> reader_role_exists("postgresql:///mydb")  # doctest: +SKIP
        True
    """
    with connect(dsn, autocommit=True, vector=False) as conn:
        return _has_reader(conn)


def _has_reader(conn: Any) -> bool:
    row = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pglogic_reader'").fetchone()
    return row is not None


def apply_grants(dsn: str) -> int:
    """Create the read-only role ``pglogic_reader`` if missing and grant it what searching needs
    on this database (``sql/reader.sql``, as the migrations do); return the number of tables of
    schema pglogic it may read. Needs the right to create roles when the role is missing.

    Example:
        >>> apply_grants("postgresql:///restored")  # doctest: +SKIP
        7
    """
    from pglogic.errors import PermissionDenied

    script = (resource_dir("sql") / "reader.sql").read_text(encoding="utf-8")
    with connect(dsn, autocommit=True, vector=False) as conn:
        require_schema(conn)
        who = conn.execute(
            "SELECT current_user, nspowner::regrole::text, pg_has_role(nspowner, 'USAGE')"
            " OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
            " FROM pg_namespace WHERE nspname = 'pglogic'"
        ).fetchone()
        if who is not None and not who[2]:  # GRANT by anyone else grants nothing, with a warning
            raise PermissionDenied(
                f"Role {who[0]} cannot grant on schema pglogic: run pglogic db grants as its "
                f"owner ({who[1]}) or a superuser"
            )
        try:
            conn.execute(script.encode())
        except errors.InsufficientPrivilege as exc:
            from pglogic.store.db import permission_message

            raise PermissionDenied(permission_message(exc, dsn)) from exc
        if not _has_reader(conn):
            user = conn.execute("SELECT current_user").fetchone()
            raise PermissionDenied(
                f"Role {user[0] if user else '?'} may not create roles: a superuser (or a role "
                "with CREATEROLE) can run CREATE ROLE pglogic_reader NOLOGIN, then pglogic db "
                "grants again"
            )
        row = conn.execute(
            "SELECT count(*) FROM pg_class WHERE relnamespace = 'pglogic'::regnamespace "
            "AND relkind IN ('r', 'p', 'v', 'm') "
            "AND has_table_privilege('pglogic_reader', oid, 'SELECT')"
        ).fetchone()
    return int(row[0]) if row else 0


def outside_dependents(dsn: str) -> list[str]:
    """The objects outside schema pglogic that depend on it (an application's view, foreign key,
    trigger, ...): what a downgrade to base would drop with it. Empty when none, or not installed.

    Example:
        >>> outside_dependents("postgresql:///mydb")  # doctest: +SKIP
        ['view public.recent_news', 'constraint notes_doc_fk on table public.notes']
    """
    query = (script_location() / "outside_dependents.sql").read_text(encoding="utf-8")
    with connect(dsn, autocommit=True, vector=False) as conn:
        rows = conn.execute(query.encode()).fetchall()
    return [str(r[0]) for r in rows]


def current(dsn: str) -> str | None:
    """Return the database's current pglogic revision, or None if never migrated.

    Example:
        >>> current("postgresql:///fresh")  # doctest: +SKIP
    """
    with connect(dsn, autocommit=True, vector=False) as conn:
        table = _version_table(conn)
        if table is None:
            return None
        rows = conn.execute(sql.SQL("SELECT version_num FROM {}").format(table)).fetchall()
    if len(rows) > 1:
        raise SchemaError(f"The version table holds several revisions: {[r[0] for r in rows]}")
    return str(rows[0][0]) if rows else None


def _version_table(conn: Any) -> sql.Composable | None:
    """The version table: ``pglogic.pglogic_alembic_version``, or where a pglogic before 0018
    made it (``public``, or the first schema of its migrator's search_path); None if none."""
    rows = conn.execute(
        "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relname = %s AND c.relkind = 'r' ORDER BY n.nspname <> %s, n.nspname",
        (VERSION_TABLE, VERSION_SCHEMA),
    ).fetchall()
    if not rows:
        return None
    if rows[0][0] != VERSION_SCHEMA and len(rows) > 1:
        found = ", ".join(f"{r[0]}.{VERSION_TABLE}" for r in rows)
        raise SchemaError(
            f"Found several pglogic version tables ({found}): keep the one that records this "
            "database's pglogic revision and drop the others"
        )
    return sql.Identifier(str(rows[0][0]), VERSION_TABLE)


#: The header of an install script that stops at an older revision (``pglogic db sql 0017``).
_OLDER_INSTALL_HEADER = """\
-- pglogic's schema at revision {target}, for psql alone: what `pglogic db upgrade {target}` runs on
-- an empty database (each revision's frozen SQL in order; the head's is sql/install.sql).
--
--     psql "$DSN" -v ON_ERROR_STOP=1 -f FILE
--
-- Written by `pglogic db sql {target}`. One transaction: on an error nothing is applied. The script
-- records revision {target}, so a later `pglogic db upgrade` applies only newer revisions.

"""

_INSTALL_HEADER = """\
-- pglogic's schema at revision {head}, for psql alone: what `pglogic db upgrade` runs on an
-- empty database.
--
--     psql "$DSN" -v ON_ERROR_STOP=1 -f sql/install.sql
--
-- Generated by `pglogic db sql > sql/install.sql` (Alembic's offline mode); do not edit it, a
-- test checks that it is current. One transaction: on an error nothing
-- is applied. Needs PostgreSQL >= 15 with the pgvector extension available (CREATE EXTENSION
-- vector runs here unless it is installed), the right to create a schema, and the right to
-- create roles for the read-only role pglogic_reader (without it the grants are skipped with a
-- warning). Corpora are created later, by `pglogic corpus create` or Alembic operations.
--
-- A snapshot of the head: each revision's tables, then the head's functions once (sql/
-- operators.sql, search.sql, reader.sql); a test checks that it gives the catalog of `pglogic db
-- upgrade`, which applies the revisions one by one.
--
-- Like `pglogic db upgrade`, the script records its revision in the table
-- pglogic.pglogic_alembic_version, so a later `pglogic db upgrade` applies only newer revisions (for
-- psql: `pglogic db sql --from {head}` writes that upgrade). On a database that already has
-- pglogic it stops at CREATE TABLE pglogic.pglogic_alembic_version, with nothing applied.

"""

_UPGRADE_HEADER = """\
-- pglogic's schema from revision {start} to {head}, for psql alone: what `pglogic db upgrade`
-- runs on a database at {start}. Generated by `pglogic db sql --from {start}`.
--
--     psql "$DSN" -v ON_ERROR_STOP=1 -f upgrade.sql
--
-- One transaction: on an error (a database not at {start} among them) nothing is applied.

"""


_DOWNGRADE_HEADER = """\
-- pglogic's schema from revision {start} down to {target}, for psql alone: what
-- `pglogic db downgrade {target}` runs on a database at {start}. Generated by
-- `pglogic db sql {target} --from {start}`.
--
--     psql "$DSN" -v ON_ERROR_STOP=1 -f downgrade.sql
--
-- One transaction: on an error nothing is applied. It stops on a database not at {start}, when
-- a step would drop registry rows that an upgrade could not bring back (passage layouts, lexical
-- indexes, calibrations, the term cache), and, down to base, while objects outside schema
-- pglogic depend on it (`pglogic db downgrade base --cascade` drops them too).

"""


def _is_downgrade(start: str | None, revision: str) -> bool:
    """True when ``revision`` lies below ``start`` (both shipped revisions, or base)."""
    if start is None or revision == "head" or start == revision:
        return False
    return revision == "base" or (start != "base" and revision < start)


def upgrade_sql(start: str | None = None, revision: str = "head") -> str:
    """The migration from ``start`` (None: an empty database) to ``revision`` as one psql
    script: an upgrade, or a downgrade when ``revision`` is below ``start``.

    Alembic's offline mode renders every revision's frozen SQL and the version table's
    bookkeeping, in one transaction; no database is needed. ``upgrade_sql()`` is
    ``sql/install.sql``.

    Example:
        >>> script = upgrade_sql()
        >>> script.splitlines()[0].startswith(f"-- pglogic's schema at revision {head()}")
        True
        >>> "CREATE SCHEMA IF NOT EXISTS pglogic;" in script
        True
        >>> "CREATE TABLE pglogic.pglogic_alembic_version" in upgrade_sql("0003")
        False
        >>> "DROP TABLE IF EXISTS pglogic.schema_compat" in upgrade_sql("0018", "0017")
        True
        >>> upgrade_sql(revision="0017").startswith("-- pglogic's schema at revision 0017")
        True
    """
    from alembic import command
    from alembic.util.exc import CommandError

    cfg_head = head() if revision == "head" else revision
    check_revision(revision)
    if start is not None:
        check_revision(start, stop=False)
    buf = io.StringIO()
    cfg = _config(buf)
    cfg.attributes["snapshot"] = start is None and revision == "head"  # sql/install.sql
    target = revision if start is None else f"{start}:{revision}"
    down = _is_downgrade(start, revision)
    try:
        if down:
            command.downgrade(cfg, target, sql=True)
        else:
            command.upgrade(cfg, target, sql=True)
    except CommandError as exc:
        raise SchemaError(f"Cannot write the migration {target}: {exc}") from exc
    if start is None and revision == "head":
        header = _INSTALL_HEADER.format(head=cfg_head)
    elif start is None:
        header = _OLDER_INSTALL_HEADER.format(target=revision)
    elif down:
        header = _DOWNGRADE_HEADER.format(start=start, target=revision)
    else:
        header = _UPGRADE_HEADER.format(start=start, head=cfg_head)
    return header + buf.getvalue()
