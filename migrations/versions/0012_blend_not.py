"""``pglogic.search()`` takes ``"passage_score": "blend-not"``, its new default, as the Python search.

Applies ``versions/sql/0012_search.sql``, the statements of ``sql/search.sql`` this revision changed
(each idempotent). The changes:

- the option ``"passage_score"`` takes ``"blend-not"``, now the default when the option is
  absent or null (``"max"`` and ``"blend"`` as before; anything else is refused with the Python
  error's text). Over passages, ``"blend-not"`` is ``"blend"`` in a formula with a negated-only
  term (every scored text that is not one takes the mean of its best passage's similarity and
  the document's own vector's) and ``"max"`` in a formula without one. Chosen leaving one
  corpus out in ``bench/quality/results/passage_choice.md``;
- under both blends, an AND's own text whose ANDs all sit under an odd number of NOTs counts as
  negated and keeps its best passage (new helper ``pglogic._and_text_polarity``, as
  ``pglogic.engine.conjunction.negated_and_texts``);
- the blended texts' own-vector halves are added after the ``GROUP BY``, the documents joined
  again, so the grouping never carries the documents' vectors.

Each statement is ``pglogic.engine.compile._passage_sims``'s, text for text. No function
changes its arguments or result type.

Downgrading restores 0011's text of those statements (the default is then ``"max"``) and drops
``pglogic._and_text_polarity``.

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"


def upgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)


def downgrade() -> None:
    op.run_sql("DROP FUNCTION IF EXISTS pglogic._and_text_polarity(jsonb, boolean, jsonb);")
