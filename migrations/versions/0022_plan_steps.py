"""``pglogic._plan`` as the steps of the Python search, one function each.

Applies ``versions/sql/0022_search.sql``. ``pglogic._plan`` (arguments and result unchanged) was
one 700-line function; it now runs functions named after their Python twins, in the Python
search's order: ``_corpus`` (``store.corpus.get_corpus``), ``_options``
(``engine.compile.check_options``), ``_normalise`` (``engine.normalise``), ``_estimate_filter``
and ``_scan_plan`` (``store.search.estimate_filter``, ``engine.plans.scan_plan``),
``_statement_parts`` and ``_passage_sims`` (``engine.statements``), ``_term_vectors`` and
``_with_contexts`` (``engine.negation.with_context``), ``_passage_factor``
(``engine.source.passage_factor``), ``_plan_query`` (``engine.plans.plan_query``), and one
renderer per statement shape: ``_exact_statement``, ``_passage_exact_statement``,
``_knn_statement``, ``_candidates_statement``, ``_passage_statement``. Every plan, statement,
setting and message is the same as 0021's, text for text.

Downgrading restores 0021's ``pglogic._plan`` and drops the new functions.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

#: Code one revision older works with a database at this revision, and the reverse: nothing a
#: caller sees changes.
COMPATIBLE_WITH_PREVIOUS = True

#: The functions this revision adds (pglogic has no overloads: a name is a function).
NEW = ["_corpus", "_options", "_normalise", "_estimate_filter", "_scan_plan", "_passage_factor",
       "_term_vectors", "_with_contexts", "_plan_query", "_statement_parts", "_passage_sims",
       "_exact_statement", "_passage_exact_statement", "_knn_statement", "_candidates_statement",
       "_passage_statement"]  # fmt: skip


def upgrade() -> None:
    op.run_sql_file("0022_search.sql")
    op.run_sql(
        "INSERT INTO pglogic.schema_compat VALUES "
        f"('{revision}', '{down_revision if COMPATIBLE_WITH_PREVIOUS else revision}');"
    )


def downgrade() -> None:
    op.run_sql(f"DELETE FROM pglogic.schema_compat WHERE revision = '{revision}';")
    op.restore_sql_file("0022_search.sql")
    op.run_sql("\n".join(f"DROP FUNCTION IF EXISTS pglogic.{name};" for name in reversed(NEW)))
