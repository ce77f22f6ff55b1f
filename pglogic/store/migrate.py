"""Apply pglogic's Alembic migrations (the top-level ``migrations/``, shipped in the wheel).

Example:
    >>> upgrade("postgresql:///mydb")  # doctest: +SKIP
    >>> current("postgresql:///mydb")  # doctest: +SKIP
    '0001'
"""

from __future__ import annotations

import io
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine, create_engine, pool
from sqlalchemy.exc import DBAPIError

from pglogic.errors import SchemaError
from pglogic.resources import resource_dir
from pglogic.store.db import connect, require_vector_available

VERSION_TABLE = "pglogic_alembic_version"


def script_location() -> Path:
    """Return the directory of the Alembic environment inside the installed package.

    Example:
        >>> (script_location() / "env.py").exists()
        True
    """
    return resource_dir("migrations")


def _config() -> Config:
    cfg = Config(stdout=io.StringIO())
    cfg.set_main_option("script_location", str(script_location()))
    return cfg


def _engine(dsn: str) -> Engine:
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
    rev = ScriptDirectory.from_config(_config()).get_current_head()
    assert rev is not None
    return rev


def _run(dsn: str, action: str, revision: str) -> None:
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
    engine = _engine(dsn)
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        rev = ctx.get_current_revision()
    engine.dispose()
    return rev
