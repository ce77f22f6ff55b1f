"""``pglogic.search()`` scores like the new default: NOT ``(1 - x)^1.25`` and each AND's own text.

Applies ``versions/sql/0006_search.sql``, the statements of ``sql/search.sql`` this revision changed
(each idempotent): the default operators become ``product-max-strong``
(product, max, ``complement^1.25``; ``product-max`` keeps its meaning) and any NOT may be
``complement^G``; the option ``"and_text"`` (default 4) scores the phrase of each AND's positive
operands too, its vector from the query's ``"vectors"`` or ``pglogic.term_cache``, like
``pglogic.engine.conjunction``. New helpers: ``_to_text``, ``_flat_args``, ``_and_phrase``,
``_and_texts``, ``_truth_sql``; ``_score_sql`` takes the weight as a fifth argument (the
four-argument function is dropped).

Downgrading drops the new ``_score_sql`` and the helpers and restores 0005's text of the
statements it changed (the four-argument ``_score_sql`` among them).

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"

#: The functions 0006 adds, dependents first (SQL-standard bodies record their dependencies).
HELPERS = (
    "pglogic._score_sql(jsonb, text[], text[], text, integer)",
    "pglogic._truth_sql(text, text)",
    "pglogic._and_texts(jsonb, text[])",
    "pglogic._and_phrase(jsonb)",
    "pglogic._flat_args(jsonb, text)",
    "pglogic._to_text(jsonb)",
)


def upgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)


def downgrade() -> None:
    op.run_sql("\n".join(f"DROP FUNCTION IF EXISTS {f};" for f in HELPERS))
