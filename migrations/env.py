"""Alembic environment for pglogic.

Used three ways: by ``pglogic db upgrade`` (which hands over a live connection in
``config.attributes["connection"]``), by plain ``alembic -c alembic.ini upgrade head`` with
``sqlalchemy.url`` (or ``PGLOGIC_DSN``) set, and offline by ``pglogic db sql`` (Alembic's
``--sql`` mode: the upgrade as one PostgreSQL script, no database needed). The version table
lives in the ``public`` schema as ``pglogic_alembic_version`` so that it never collides with an
application's own Alembic history.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine, pool

VERSION_TABLE = "pglogic_alembic_version"

config = context.config


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("PGLOGIC_DSN", "")
    if not url:
        raise RuntimeError("Set sqlalchemy.url in alembic.ini or PGLOGIC_DSN")
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


# An offline upgrade from a revision first checks that the database is at that revision (the
# version table's UPDATEs alone would match no row and change nothing).
CHECK_START = """\
DO $do$
BEGIN
    IF (SELECT array_agg(version_num) FROM {table}) IS DISTINCT FROM ARRAY['{start}']::varchar[]
    THEN
        RAISE EXCEPTION 'pglogic: this script upgrades from revision {start}; the database is at %',
            coalesce((SELECT string_agg(version_num, ', ') FROM {table}), 'no revision');
    END IF;
END
$do$;
"""


def run_migrations_offline() -> None:
    # No database: the SQL is written for PostgreSQL, whatever the URL says.
    context.configure(dialect_name="postgresql", literal_binds=True, version_table=VERSION_TABLE)
    start = context.get_starting_revision_argument()
    with context.begin_transaction():
        if isinstance(start, str) and start != "base":
            context.static_output(CHECK_START.format(table=VERSION_TABLE, start=start).strip())
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, version_table=VERSION_TABLE)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        context.configure(connection=conn, version_table=VERSION_TABLE)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
