"""``pglogic.search()`` plans like the Python search: guide scan, guide-only and union plans, filters.

Applies ``versions/sql/0005_search.sql``, the statements of ``sql/search.sql`` this revision changed
(each idempotent). ``pglogic._plan`` now decides as
``pglogic.store.search.search`` and ``pglogic.engine.compile.compile_query`` decide (fuzzy mode):
the k-NN scan of one term, a scan per positive term plus the scan along the guide vector, the
guide's scan alone or each term's top k, their depths and hnsw settings, metadata filters
(``"filters"``) with the filter estimate and the exact plan where it is cheaper, and the exact
plan again when a filtered plan returns fewer than k rows; the statement is the compiler's text
for text, its placeholders numbered. New helpers: ``_qi``, ``_json_number_text``,
``_filters_sql``, ``_default_depth``, ``_guide_depth``, ``_guide_only_depth``, ``_guide_walk``,
``_guide_suffices``, ``_disjunction``, ``_union_suffices``, ``_prefer_exact``, ``_dot``,
``_gram_times``, ``_guide_vector``; new bodies of ``_score_sql``, ``search``. ``_plan`` returns
other columns, so it (and ``search_plan``, whose SQL body depends on it) is dropped first.

Downgrading drops the new ``_plan`` and ``search_plan``, restores 0004's text of those
statements and drops the helpers.

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"

DROP_PLAN = """
DROP FUNCTION IF EXISTS pglogic.search_plan(text, jsonb);
DROP FUNCTION IF EXISTS pglogic._plan(text, jsonb);
"""

#: The functions 0005 adds, dependents first (SQL-standard bodies record their dependencies).
HELPERS = (
    "pglogic._prefer_exact(double precision, bigint, integer, text, double precision)",
    "pglogic._union_suffices(jsonb, text)",
    "pglogic._guide_suffices(jsonb)",
    "pglogic._guide_only_depth(bigint, double precision)",
    "pglogic._guide_depth(bigint, bigint)",
    "pglogic._default_depth(bigint, integer)",
    "pglogic._guide_walk(jsonb, boolean)",
    "pglogic._disjunction(jsonb)",
    "pglogic._guide_vector(jsonb, text[], text[], vector[], text[], text)",
    "pglogic._gram_times(double precision[], double precision[])",
    "pglogic._dot(double precision[], double precision[])",
    "pglogic._filters_sql(jsonb, text, integer)",
    "pglogic._json_number_text(jsonb)",
    "pglogic._qi(text)",
)


def upgrade() -> None:
    op.run_sql(DROP_PLAN)


def downgrade() -> None:
    op.run_sql(DROP_PLAN)
    op.run_sql("\n".join(f"DROP FUNCTION IF EXISTS {f};" for f in HELPERS))
