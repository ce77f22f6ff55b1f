"""The version table inside schema pglogic, and the rolling-deploy window recorded per revision.

- ``pglogic_alembic_version`` now lives in schema ``pglogic`` (``migrations/env.py`` moves it
  there before any run, from ``public`` or wherever an earlier pglogic put it, e.g. the first
  schema of a non-superuser migrator's ``search_path``), so every role finds it and
  ``pg_dump -n pglogic`` carries it. A downgrade below this revision puts it back where the
  older pglogic looks for it (the first schema of the ``search_path``).
- New table ``pglogic.schema_compat`` (revision, oldest_code): for a database at ``revision``,
  the oldest pglogic code revision that works with it. A revision marked
  ``COMPATIBLE_WITH_PREVIOUS`` records its parent (code one revision older keeps working during
  a rolling deploy, and code at it works against its parent); any other records itself.
  :mod:`pglogic.store.migrate` reads it when the code and the database disagree. This revision
  is not compatible: code before it looks for the version table outside the schema.
- Applies ``versions/sql/0018_reader.sql`` (``sql/reader.sql``: the reader's grants, now
  covering the version table through ``GRANT SELECT ON ALL TABLES IN SCHEMA pglogic``).

Downgrading drops ``pglogic.schema_compat`` (and env.py moves the version table back).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

#: Code one revision older works with a database at this revision, and the reverse.
COMPATIBLE_WITH_PREVIOUS = False


def upgrade() -> None:
    oldest = down_revision if COMPATIBLE_WITH_PREVIOUS else revision
    op.run_sql(
        "CREATE TABLE pglogic.schema_compat (\n"
        "    revision    varchar(32) PRIMARY KEY,\n"
        "    oldest_code varchar(32) NOT NULL\n"
        ");\n"
        f"INSERT INTO pglogic.schema_compat VALUES ('{revision}', '{oldest}');"
    )
    op.run_sql_file("0018_reader.sql")


def downgrade() -> None:
    op.run_sql("DROP TABLE IF EXISTS pglogic.schema_compat;")
