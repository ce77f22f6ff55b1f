"""Connections to Postgres with pgvector, with readable errors.

Example:
    >>> with connect("dbname=nosuchdb host=/nonexistent") as conn:  # doctest: +SKIP
    ...     pass
    Traceback (most recent call last):
    pglogic.errors.DatabaseUnavailable: Cannot connect to Postgres (...)
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from pglogic.errors import DatabaseUnavailable, ReadOnlyServer, SchemaError

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


def connect(
    dsn: str, *, autocommit: bool = False, vector: bool = True, timeout: int = 10
) -> Connection:
    """Open a psycopg connection; register pgvector types when the extension exists.

    Raises :class:`DatabaseUnavailable` with one sentence when the server cannot be reached
    within ``timeout`` seconds (per host of a multi-host DSN).

    Example:
        >>> conn = connect("postgresql:///postgres")  # doctest: +SKIP
    """
    try:
        conn = psycopg.connect(dsn, autocommit=autocommit, connect_timeout=timeout)
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


#: What to do about a write that reached a read-only server (the end of every such error).
READ_ONLY_ADVICE = (
    "writes (ingest, index, corpus create/drop, calibration, the term cache, migrations) go to "
    "the primary: give its DSN with --dsn / PGLOGIC_DSN (a multi-host DSN may say "
    "target_session_attrs=read-write) and the replica's with --read-dsn / PGLOGIC_READ_DSN; "
    "after a failover, promote the replica first (pglogic server promote)"
)


def read_only_reason(conn: Connection) -> str | None:
    """Why ``conn``'s server refuses writes, or None when it accepts them.

    Reads the parameters the server reports on every connection (PostgreSQL >= 14:
    ``in_hot_standby``, ``default_transaction_read_only``), so it costs no query; it asks the
    server only when they are not reported (an older server, some poolers).

    Example:
        >>> read_only_reason(conn)  # doctest: +SKIP
        'a hot-standby replica (in recovery)'
    """
    standby = conn.info.parameter_status("in_hot_standby")
    read_only = conn.info.parameter_status("default_transaction_read_only")
    if standby is None or read_only is None:
        row = conn.execute(
            "SELECT pg_is_in_recovery(), current_setting('default_transaction_read_only')"
        ).fetchone()
        if not conn.autocommit:
            conn.rollback()
        standby = "on" if row and row[0] else "off"
        read_only = str(row[1]) if row else "off"
    if standby == "on":
        return "a hot-standby replica (in recovery)"
    if read_only == "on":
        return "read-only (default_transaction_read_only = on)"
    return None


def read_only_error(dsn: str, reason: str) -> ReadOnlyServer:
    """The error for a write sent to the read-only server of ``dsn``.

    Example:
        >>> str(read_only_error("host=/r", "a hot-standby replica (in recovery)"))[:67]
        'Cannot write to host=/r: it is a hot-standby replica (in recovery);'
    """
    return ReadOnlyServer(f"Cannot write to {redact(dsn)}: it is {reason}; {READ_ONLY_ADVICE}")


def require_writable(conn: Connection, dsn: str) -> None:
    """Raise :class:`~pglogic.errors.ReadOnlyServer` if ``conn``'s server refuses writes.

    Example:
        >>> require_writable(connect(replica_dsn), replica_dsn)  # doctest: +SKIP
        Traceback (most recent call last):
        pglogic.errors.ReadOnlyServer: Cannot write to ...: it is a hot-standby replica ...
    """
    reason = read_only_reason(conn)
    if reason is not None:
        raise read_only_error(dsn, reason)


@contextlib.contextmanager
def writing(dsn: str) -> Iterator[None]:
    """Turn psycopg's "cannot execute ... in a read-only transaction" raised inside the block
    into :class:`~pglogic.errors.ReadOnlyServer` (a server that became a replica, a role or
    database with ``default_transaction_read_only``).

    Example:
        >>> with writing(dsn), connect(dsn) as conn:  # doctest: +SKIP
        ...     conn.execute("CREATE TABLE t (x int)")
    """
    try:
        yield
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        reason = "a read-only server or transaction (a replica?)"
        raise read_only_error(dsn, reason) from exc


_DENIED = re.compile(r"permission denied for (?P<kind>[a-z ]+?) (?P<name>\S+)$")
_NOT_OWNER = re.compile(r"must be owner of (?P<kind>[a-z ]+?) (?P<name>\S+)$")
#: What pglogic may need of each kind of object, in the order a GRANT names them.
_PRIVILEGES = {
    "table": ("SELECT", "INSERT", "UPDATE", "DELETE"),
    "schema": ("USAGE", "CREATE"),
    "function": ("EXECUTE",),
    "sequence": ("USAGE", "SELECT", "UPDATE"),
    "database": ("CREATE",),
}
_CHECK = {
    "table": "has_table_privilege",
    "schema": "has_schema_privilege",
    "function": "has_function_privilege",
    "sequence": "has_sequence_privilege",
    "database": "has_database_privilege",
}


def permission_message(exc: psycopg.Error, dsn: str | None = None) -> str:
    """One sentence for a refused privilege: the role, what it lacks on which object, and who
    can grant it (looked up on ``dsn`` when given).

    Example:
        >>> permission_message(exc, dsn)  # doctest: +SKIP
        'Role app lacks INSERT, UPDATE, DELETE on table pglogic.corpora (permission denied ...'
    """
    primary = (exc.diag.message_primary or str(exc)).strip().splitlines()[0]
    owned = _NOT_OWNER.search(primary)
    denied = owned or _DENIED.search(primary)
    kind = denied.group("kind") if denied else ""
    name = denied.group("name").strip('"') if denied else ""
    qualified = name if "." in name or kind in ("schema", "database") else f"pglogic.{name}"
    role, owner, missing = "this role", "its owner", list(_PRIVILEGES.get(kind, ()))
    reader = False
    if dsn is not None:
        with (
            contextlib.suppress(psycopg.Error, DatabaseUnavailable),
            connect(dsn, autocommit=True, vector=False) as conn,
        ):
            role = str(_one(conn, sql.SQL("SELECT current_user"), ()))
            reader = bool(
                _one(
                    conn,
                    sql.SQL(
                        "SELECT pg_has_role(current_user, r.oid, 'MEMBER') AND NOT "
                        "has_schema_privilege(to_regnamespace('pglogic')::oid, 'CREATE') "
                        "FROM pg_roles r WHERE r.rolname = 'pglogic_reader'"
                    ),
                    (),
                )
            )
            found = _owner(conn, kind, qualified)
            owner = found or owner
            if kind in _CHECK and found:
                check = sql.SQL("SELECT {}(%s, %s)").format(sql.Identifier(_CHECK[kind]))
                missing = [p for p in missing if not _one(conn, check, (qualified, p))]
    if "create extension" in primary:
        return (
            f"Role {role} may not create the vector extension ({primary}): a superuser runs "
            "CREATE EXTENSION vector in this database once, then this works"
        )
    if reader and kind != "database":
        return (
            f"Role {role} is a member of pglogic_reader, which may search but not change "
            f"pglogic ({primary}): run this as {owner}, the owner of pglogic's objects"
        )
    if owned:
        return (
            f"Role {role} must own {kind} {qualified} for this ({primary}): run it as {owner}, "
            "the owner (members of pglogic_reader may search but not change pglogic)"
        )
    if not denied:
        return f"Role {role} lacks a privilege this needs ({primary}); a superuser can grant it"
    privileges = ", ".join(missing) or "a privilege"
    on = f"{kind.upper()} {qualified}" if kind in _CHECK and kind != "table" else qualified
    return (
        f"Role {role} lacks {privileges} on {kind} {qualified} ({primary}); {owner} (the "
        f"owner) or a superuser can grant it: GRANT {privileges} ON {on} TO {role}. Members "
        "of pglogic_reader may search but not change pglogic"
    )


def _one(conn: Connection, query: sql.SQL | sql.Composed, params: tuple[Any, ...]) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def _owner(conn: Connection, kind: str, qualified: str) -> str | None:
    """The owner of the object a permission error named (None when not found)."""
    query = {
        "schema": "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = %s",
        "table": "SELECT relowner::regrole::text FROM pg_class WHERE oid = to_regclass(%s)",
        "sequence": "SELECT relowner::regrole::text FROM pg_class WHERE oid = to_regclass(%s)",
        "function": "SELECT proowner::regrole::text FROM pg_proc WHERE oid = to_regproc(%s)",
        "database": "SELECT datdba::regrole::text FROM pg_database WHERE datname = %s",
    }.get(kind)
    if query is None:
        return None
    row = conn.execute(query.encode(), (qualified,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


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
    row = conn.execute(
        "SELECT to_regclass('pglogic.corpora') IS NOT NULL,"
        " EXISTS (SELECT FROM pg_extension WHERE extname = 'vector')"
    ).fetchone()
    if not row or not row[0]:
        raise SchemaError("The pglogic schema is not installed here; run 'pglogic db upgrade'")
    if not row[1]:
        raise SchemaError(
            "The pglogic schema is here but the vector extension is not (a restore of a "
            "-n pglogic dump without it?): a superuser runs CREATE EXTENSION vector, then "
            "restores the corpus tables"
        )


def version_tuple(version: str) -> tuple[int, ...]:
    """Parse '0.8.2' into (0, 8, 2) for comparisons.

    Example:
        >>> version_tuple("0.8.2") >= (0, 8)
        True
    """
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])
