"""Apply pglogic's Alembic migrations (the top-level ``migrations/``, shipped in the wheel).

Each revision applies its own frozen SQL (``migrations/versions/sql/``); ``sql/`` is what the
head revision installs. :func:`upgrade_sql` writes an upgrade as one script for psql
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
from pathlib import Path
from typing import TYPE_CHECKING

from psycopg import errors, sql

from pglogic.errors import InvalidInput, SchemaError
from pglogic.resources import resource_dir
from pglogic.store.db import connect, require_vector_available

if TYPE_CHECKING:  # Alembic and SQLAlchemy load when a migration runs, not to check the revision
    from alembic.config import Config
    from sqlalchemy import Engine

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
    stmt = sql.SQL("SELECT version_num FROM {}").format(sql.Identifier(VERSION_TABLE))
    with connect(dsn, autocommit=True, vector=False) as conn:
        try:
            rows = conn.execute(stmt).fetchall()
        except errors.UndefinedTable:  # never migrated
            return False
    return len(rows) == 1 and rows[0][0] == newest


def _run(dsn: str, action: str, revision: str) -> None:
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
            if action == "upgrade":
                command.upgrade(cfg, revision)
            else:
                command.downgrade(cfg, revision)
    except DBAPIError as exc:
        first = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise SchemaError(
            f"Migration {action} to {revision} failed (nothing applied): {first}"
        ) from exc
    except CommandError as exc:
        raise SchemaError(f"Migration {action} to {revision} failed: {exc}") from exc
    finally:
        engine.dispose()


#: A relative revision as alembic reads it: an optional branch, a symbol, then -N or +N.
_RELATIVE = re.compile(r"^(?:.+@)?(\w*)[-+]\d+$")


def check_revision(revision: str) -> None:
    """Raise :class:`InvalidInput` unless ``revision`` is ``base``, ``head``, a relative step
    (``-1``) or a revision this pglogic ships (before asking to migrate to it).

    Example:
        >>> check_revision("0002"), check_revision("head-1"), check_revision("-2")
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


def upgrade(dsn: str, revision: str = "head") -> None:
    """Migrate the database up to ``revision`` (default: the newest).

    Example:
        >>> upgrade("postgresql:///mydb")  # doctest: +SKIP
    """
    _run(dsn, "upgrade", revision)


def downgrade(dsn: str, revision: str) -> None:
    """Migrate the database down to ``revision`` (``base`` removes pglogic entirely).

    Example:
        >>> downgrade("postgresql:///mydb", "base")  # doctest: +SKIP
    """
    _run(dsn, "downgrade", revision)


def current(dsn: str) -> str | None:
    """Return the database's current pglogic revision, or None if never migrated.

    Example:
        >>> current("postgresql:///fresh")  # doctest: +SKIP
    """
    from alembic.runtime.migration import MigrationContext

    engine = _engine(dsn)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        rev = ctx.get_current_revision()
    engine.dispose()
    return rev


_INSTALL_HEADER = """\
-- pglogic's schema at revision {head}, for psql alone: what `pglogic db upgrade` runs on an
-- empty database.
--
--     psql "$DSN" -v ON_ERROR_STOP=1 -f sql/install.sql
--
-- Generated from the frozen migrations by `pglogic db sql > sql/install.sql` (Alembic's offline
-- mode); do not edit it, a test checks that it is current. One transaction: on an error nothing
-- is applied. Needs PostgreSQL >= 15 with the pgvector extension available (CREATE EXTENSION
-- vector runs here unless it is installed), the right to create a schema, and the right to
-- create roles for the read-only role pglogic_reader (without it the grants are skipped with a
-- warning). Corpora are created later, by `pglogic corpus create` or Alembic operations.
--
-- Each revision's SQL follows the one before, as `pglogic db upgrade` applies them: functions of
-- an older revision are replaced by the newer ones further down.
--
-- Like `pglogic db upgrade`, the script records its revision in the table
-- pglogic_alembic_version, so a later `pglogic db upgrade` applies only newer revisions (for
-- psql: `pglogic db sql --from {head}` writes that upgrade). On a database that already has
-- pglogic it stops at its first statement, CREATE TABLE pglogic_alembic_version, with nothing
-- applied.

"""

_UPGRADE_HEADER = """\
-- pglogic's schema from revision {start} to {head}, for psql alone: what `pglogic db upgrade`
-- runs on a database at {start}. Generated by `pglogic db sql --from {start}`.
--
--     psql "$DSN" -v ON_ERROR_STOP=1 -f upgrade.sql
--
-- One transaction: on an error (a database not at {start} among them) nothing is applied.

"""


def upgrade_sql(start: str | None = None, revision: str = "head") -> str:
    """The upgrade from ``start`` (None: an empty database) to ``revision`` as one psql script.

    Alembic's offline mode renders every revision's frozen SQL and the version table's
    bookkeeping, in one transaction; no database is needed. ``upgrade_sql()`` is
    ``sql/install.sql``.

    Example:
        >>> script = upgrade_sql()
        >>> script.splitlines()[0].startswith(f"-- pglogic's schema at revision {head()}")
        True
        >>> "CREATE SCHEMA IF NOT EXISTS pglogic;" in script
        True
        >>> "CREATE TABLE pglogic_alembic_version" in upgrade_sql("0003")
        False
    """
    from alembic import command
    from alembic.util.exc import CommandError

    cfg_head = head() if revision == "head" else revision
    buf = io.StringIO()
    cfg = _config(buf)
    target = revision if start is None else f"{start}:{revision}"
    try:
        command.upgrade(cfg, target, sql=True)
    except CommandError as exc:
        raise SchemaError(f"Cannot write the upgrade {target}: {exc}") from exc
    if start is None:
        header = _INSTALL_HEADER.format(head=cfg_head)
    else:
        header = _UPGRADE_HEADER.format(start=start, head=cfg_head)
    return header + buf.getvalue()
