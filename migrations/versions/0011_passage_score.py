"""``pglogic.search()`` takes ``"passage_score": "blend"``, as the Python search does.

Applies ``versions/sql/0011_search.sql``, the statements of ``sql/search.sql`` this revision changed
(each idempotent). One change: the option ``"passage_score"`` (``"max"``, the
default, or ``"blend"``; anything else is refused with the Python error's text). Over passages,
``"blend"`` gives every scored text that is not a negated-only term the mean of its best
passage's similarity and the document's own vector's, the statement of
``pglogic.engine.compile._passage_sims`` text for text; negated terms keep the best passage. No
function changes its arguments or result type.

Downgrading restores 0010's text of those statements.

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""

from __future__ import annotations

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"


def upgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)


def downgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)
