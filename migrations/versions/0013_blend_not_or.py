"""``pglogic.search()`` takes ``"passage_score": "blend-not-or"``, its new default, as the
Python search.

Applies ``versions/sql/0013_search.sql``, the statements of ``sql/search.sql`` this revision changed
(each idempotent). The change, from ``bench/quality/results/family_losses.md`` (the
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

Downgrading restores 0012's text of those statements (the default is then ``"blend-not"``;
``"blend-not-or"`` is refused).

Since the squash of revisions 0002 to 0013, ``versions/sql/0013_search.sql`` holds all of
``sql/search.sql`` as 0013 left it (a database at 0002 to 0012 upgrades through their table
changes, then this replaces its functions). Downgrading goes only to 0001 or base: it drops
the file's functions (``op.leave_squash``); a downgrade to 0002 to 0012 is refused.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.run_sql_file("0013_search.sql")


def downgrade() -> None:
    op.leave_squash("0013_search.sql")
