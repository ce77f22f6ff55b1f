"""``pglogic.search()`` scores a term negated inside an AND against its context, as the Python
search does (``"not_context"``, default 0.5).

Applies ``versions/sql/0014_search.sql``, the statements of ``sql/search.sql`` this revision changed
(each idempotent). The change, from ``bench/quality/results/not_projection.md``:

- the option ``"not_context"`` (a number from 0 to 1, default 0.5; anything else is refused with
  the Python error's text): each negated-only term that is an argument ``{"op": "not", "arg":
  TERM}`` of an AND with positive term arguments is scored against its vector without that much
  of their span, ``normalise(b − λ·P b)`` (``pglogic.engine.negation``). The guide vector is
  computed from the vectors so scored. 0 scores every term as before.
- two functions are added: ``pglogic._not_contexts(jsonb, jsonb)`` (the contexts) and
  ``pglogic._projected(vector, vector[], double precision)`` (the projection, modified
  Gram–Schmidt in double precision as NumPy's). No function changes its arguments or result
  type.

Downgrading restores 0013's text of those statements (the option is then refused as unknown)
and drops the two functions.

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


def upgrade() -> None:
    op.run_sql_file("0014_search.sql")


def downgrade() -> None:
    op.restore_sql_file("0014_search.sql")
    op.run_sql(
        "DROP FUNCTION IF EXISTS pglogic._projected(vector, vector[], double precision);\n"
        "DROP FUNCTION IF EXISTS pglogic._not_contexts(jsonb, jsonb);"
    )
