"""The default operator family of ``pglogic.search()`` becomes ``product-max``.

Applies ``versions/sql/0003_search.sql``, the statements of ``sql/search.sql`` this revision changed:
it differs from 0002's only in ``pglogic._resolve_operators`` (and comments), so no operators (or
a partial spec such as ``not=reciprocal``) now means and=product, or=max, not=complement, like
``pglogic.engine.operators.DEFAULT_FAMILY``; the preset ``itlr`` keeps its meaning. Downgrading
restores 0002's text of those statements.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.run_sql_file("0003_search.sql")


def downgrade() -> None:
    op.restore_sql_file("0003_search.sql")
