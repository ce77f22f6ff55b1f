"""Lexical terms: each corpus may have a lexical (full-text) index.

Adds ``pglogic.corpora.lexical_config``: the text search configuration of the corpus's
``tsv`` column (``to_tsvector(config, title || ' ' || text)``, generated and stored, with a GIN
index) that ``match:"..."`` terms search; NULL when the corpus has no lexical index. The column
and its index are made by ``pglogic corpus lexical NAME`` (new corpora get them at creation).

Downgrading drops the column (the corpora keep their ``tsv`` columns, which nothing reads then).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE pglogic.corpora ADD COLUMN IF NOT EXISTS lexical_config text")


def downgrade() -> None:
    op.execute("ALTER TABLE pglogic.corpora DROP COLUMN IF EXISTS lexical_config")
