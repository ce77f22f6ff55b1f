"""``pglogic.search()`` takes ``"passage_score": "blend"``, as the Python search does.

Applies ``versions/sql/0011_search.sql``, the statements of ``sql/search.sql`` this revision changed
(each idempotent). One change: the option ``"passage_score"`` (``"max"``, the
default, or ``"blend"``; anything else is refused with the Python error's text). Over passages,
``"blend"`` gives every scored text that is not a negated-only term the mean of its best
passage's similarity and the document's own vector's, the statement of
``pglogic.engine.compile._passage_sims`` text for text; negated terms keep the best passage. No
function changes its arguments or result type.

Downgrading restores 0010's text of those statements.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.run_sql_file("0011_search.sql")


def downgrade() -> None:
    op.restore_sql_file("0011_search.sql")
