"""The default operator family of ``pglogic.search()`` becomes ``product-max``.

Applies ``versions/sql/0003_search.sql``, the statements of ``sql/search.sql`` this revision changed:
it differs from 0002's only in ``pglogic._resolve_operators`` (and comments), so no operators (or
a partial spec such as ``not=reciprocal``) now means and=product, or=max, not=complement, like
``pglogic.engine.operators.DEFAULT_FAMILY``; the preset ``itlr`` keeps its meaning. Downgrading
restores 0002's text of those statements.

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"


def upgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)


def downgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)
