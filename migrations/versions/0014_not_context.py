"""``pglogic.search()`` scores a term negated inside an AND against its context, as the Python
search does (``"not_context"``, default 0.5).

As released, it applied ``versions/sql/0014_search.sql``, the statements of ``sql/search.sql``
it changed (each idempotent). The change, from ``bench/quality/results/not_projection.md``:

- the option ``"not_context"`` (a number from 0 to 1, default 0.5; anything else is refused with
  the Python error's text): each negated-only term that is an argument ``{"op": "not", "arg":
  TERM}`` of an AND with positive term arguments is scored against its vector without that much
  of their span, ``normalise(b − λ·P b)`` (``pglogic.engine.negation``). The guide vector is
  computed from the vectors so scored. 0 scores every term as before.
- two functions are added: ``pglogic._not_contexts(jsonb, jsonb)`` (the contexts) and
  ``pglogic._projected(vector, vector[], double precision)`` (the projection, modified
  Gram–Schmidt in double precision as NumPy's). No function changes its arguments or result
  type.

Its downgrade restored 0013's text of those statements (the option was then refused as
unknown) and dropped the two functions; it still drops them (``DROP FUNCTION IF EXISTS``).

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"


def upgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)


def downgrade() -> None:
    op.run_sql(
        "DROP FUNCTION IF EXISTS pglogic._projected(vector, vector[], double precision);\n"
        "DROP FUNCTION IF EXISTS pglogic._not_contexts(jsonb, jsonb);"
    )
