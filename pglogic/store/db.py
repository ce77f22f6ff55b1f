"""Connections to Postgres with pgvector, with readable errors.

Example:
    >>> with connect("dbname=nosuchdb host=/nonexistent") as conn:  # doctest: +SKIP
    ...     pass
    Traceback (most recent call last):
    pglogic.errors.DatabaseUnavailable: Cannot connect to Postgres (...)
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

from pglogic.errors import DatabaseUnavailable, SchemaError

Connection = psycopg.Connection[Any]


def redact(dsn: str) -> str:
    """Hide the password in a DSN (URL or key=value form) for messages.

    Example:
        >>> redact("postgresql://bob:secret@db:5432/x")
        'postgresql://bob:***@db:5432/x'
        >>> redact("host=db password=secret dbname=x")
        'host=db password=*** dbname=x'
    """
    dsn = re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", dsn)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", dsn)


def connect(dsn: str, *, autocommit: bool = False, vector: bool = True) -> Connection:
    """Open a psycopg connection; register pgvector types when the extension exists.

    Raises :class:`DatabaseUnavailable` with one sentence when the server cannot be reached.

    Example:
        >>> conn = connect("postgresql:///postgres")  # doctest: +SKIP
    """
    try:
        conn = psycopg.connect(dsn, autocommit=autocommit, connect_timeout=10)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseUnavailable(f"Cannot connect to Postgres ({redact(dsn)}): {reason}") from exc
    except psycopg.ProgrammingError as exc:
        raise DatabaseUnavailable(f"Invalid DSN {redact(dsn)!r}: {exc}") from exc
    if vector:
        configure(conn)
    return conn


def configure(conn: Connection) -> None:
    """Register pgvector's types on ``conn`` when the extension exists; leave it idle.

    :func:`connect` calls it on every new connection, and :class:`pglogic.PgLogic`'s pool once
    per pooled connection (not once per query).

    Example:
        >>> configure(conn)  # doctest: +SKIP
    """
    row = conn.execute("SELECT 1 FROM pg_type WHERE typname = 'vector'").fetchone()
    if not conn.autocommit:
        conn.rollback()
    if row is not None:
        register_vector(conn)


def vector_version(conn: Connection) -> str | None:
    """Return the installed pgvector version, or None when the extension is not created.

    Example:
        >>> vector_version(conn)  # doctest: +SKIP
        '0.8.2'
    """
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return None if row is None else str(row[0])


def require_vector_available(conn: Connection) -> None:
    """Raise :class:`DatabaseUnavailable` if the server cannot provide pgvector.

    Example:
        >>> require_vector_available(conn)  # doctest: +SKIP
    """
    row = conn.execute(
        "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    if row is None:
        raise DatabaseUnavailable(
            "This Postgres server has no pgvector extension ('vector' is not available); "
            "install pgvector on the server or use the embedded server"
        )


def require_schema(conn: Connection) -> None:
    """Raise :class:`SchemaError` if the pglogic schema has not been migrated in.

    Example:
        >>> require_schema(conn)  # doctest: +SKIP
    """
    row = conn.execute("SELECT to_regclass('pglogic.corpora') IS NOT NULL").fetchone()
    if not row or not row[0]:
        raise SchemaError("The pglogic schema is not installed here; run 'pglogic db upgrade'")


def version_tuple(version: str) -> tuple[int, ...]:
    """Parse '0.8.2' into (0, 8, 2) for comparisons.

    Example:
        >>> version_tuple("0.8.2") >= (0, 8)
        True
    """
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])
