"""``pglogic.search()`` takes ``"passage_score": "blend-not-or"``, its new default, as the
Python search.

As released, it applied ``versions/sql/0013_search.sql``, the statements of ``sql/search.sql``
it changed (each idempotent). The change, from ``bench/quality/results/family_losses.md`` (the
own vector in disjunctions is what both folds that see every family chose; its weight is the
Stack Exchange fold's):

- the option ``"passage_score"`` takes ``"blend-not-or"``, now the default when the option is
  absent or null (``"blend-not"``, ``"max"`` and ``"blend"`` as before; anything else is
  refused with the Python error's text). It is ``"blend-not"`` and, in a formula with neither
  a negated-only term nor an AND phrase (``pglogic._and_texts`` empty: a disjunction, or one
  term), each text's similarity is 0.9 of its best passage's and 0.1 of the document's own
  vector's (``pglogic.engine.conjunction.own_weights``). Stack Exchange's ``OR`` queries ranked
  below one vector per document without it.

Each statement is ``pglogic.engine.compile._passage_sims``'s, text for text. No function
changes its arguments or result type; no function is added.

Its downgrade restored 0012's text of those statements (the default was then ``"blend-not"``;
``"blend-not-or"`` refused).

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"


def upgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)


def downgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)
