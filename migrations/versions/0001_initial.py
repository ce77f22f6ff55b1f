"""Initial schema: the pgvector extension, the pglogic schema, the corpus registry.

Documents live in one table per corpus (``pglogic.corpus_<id>``), created by
``pglogic corpus create`` because each embedding column has its corpus's own dimension.
Downgrading this revision drops the whole ``pglogic`` schema, corpora included; it refuses
while objects outside the schema depend on it (an application's view or foreign key), unless
told to cascade (``pglogic db downgrade base --cascade``).

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute("CREATE SCHEMA IF NOT EXISTS pglogic")
    op.execute(
        """
        CREATE TABLE pglogic.corpora (
            id          integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name        text NOT NULL UNIQUE
                        CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$'),
            table_name  text NOT NULL UNIQUE,
            description text NOT NULL DEFAULT '',
            created_at  timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE pglogic.embeddings (
            id            integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            corpus_id     integer NOT NULL REFERENCES pglogic.corpora(id) ON DELETE CASCADE,
            model         text NOT NULL,
            dim           integer NOT NULL CHECK (dim BETWEEN 1 AND 16000),
            distance      text NOT NULL DEFAULT 'cosine' CHECK (distance IN ('cosine')),
            column_name   text NOT NULL,
            is_active     boolean NOT NULL DEFAULT false,
            index_name    text,
            index_params  jsonb,
            created_at    timestamptz NOT NULL DEFAULT now(),
            UNIQUE (corpus_id, model),
            UNIQUE (corpus_id, column_name)
        )
        """
    )
    op.execute(
        "CREATE UNIQUE INDEX embeddings_one_active ON pglogic.embeddings (corpus_id) "
        "WHERE is_active"
    )


def downgrade() -> None:
    # Refuses while objects outside the schema depend on it, unless told to cascade (env.py).
    op.drop_pglogic_schema()
