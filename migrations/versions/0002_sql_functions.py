"""SQL functions for applications that are not Python, a term cache and a read-only role.

Installs this revision's frozen SQL (``versions/sql/0002_*.sql``, the text of ``sql/`` while
0002 was the newest revision; it never reads the current ``sql/``):

* ``0002_operators.sql``: the fuzzy operators as SQL functions (``pglogic.and_product(VARIADIC
  double precision[])``, ``pglogic.or_max``, ``pglogic.not_complement(x)``,
  ``pglogic.truth_clamp(s)``, ...), the same definitions as ``pglogic.engine.operators``;
* ``0002_search.sql``: the table ``pglogic.term_cache`` and ``pglogic.search(corpus, query
  jsonb)`` (plus ``pglogic.search_plan``), which builds the same statement as the Python compiler;
* ``0002_reader.sql``: the role ``pglogic_reader`` (NOLOGIN, created if missing) with USAGE,
  SELECT, EXECUTE and default privileges in schema ``pglogic``.

Downgrading drops the functions and the term cache and revokes the grants; the role itself stays
(roles belong to the whole cluster; other databases may use it).

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"

SQL_FILES = ("0002_operators.sql", "0002_reader.sql")  # (its search.sql: 0017's squash)

FUNCTIONS = (
    "pglogic.search_plan(text, jsonb)",
    "pglogic.search(text, jsonb)",
    "pglogic._plan(text, jsonb)",
    "pglogic._score_sql(jsonb, text[], text[], text)",
    "pglogic._collect_terms(jsonb, boolean, jsonb, integer)",
    "pglogic._resolve_truth(jsonb)",
    "pglogic._resolve_operators(jsonb)",
    "pglogic._check_operator(text, text, text)",
    "pglogic._bool_option(jsonb, text, boolean)",
    "pglogic._int_option(jsonb, text, integer)",
    "pglogic._show(jsonb)",
    # 0004's helper: a database migrated before the revisions were frozen may have it at 0002
    "pglogic._float_text(double precision)",
    "pglogic.and_product(double precision[])",
    "pglogic.and_sum(double precision[])",
    "pglogic.and_min(double precision[])",
    "pglogic.and_lukasiewicz(double precision[])",
    "pglogic.or_sum(double precision[])",
    "pglogic.or_max(double precision[])",
    "pglogic.or_probsum(double precision[])",
    "pglogic.or_lukasiewicz(double precision[])",
    "pglogic.not_complement(double precision)",
    "pglogic.not_reciprocal(double precision)",
    "pglogic.truth_clamp(double precision)",
    "pglogic.truth_affine(double precision)",
    "pglogic._fold(text, double precision[])",
)

REVOKE_READER = """
DO $do$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pglogic_reader') THEN
        ALTER DEFAULT PRIVILEGES IN SCHEMA pglogic REVOKE SELECT ON TABLES FROM pglogic_reader;
        ALTER DEFAULT PRIVILEGES IN SCHEMA pglogic REVOKE EXECUTE ON FUNCTIONS FROM pglogic_reader;
        REVOKE SELECT ON ALL TABLES IN SCHEMA pglogic FROM pglogic_reader;
        REVOKE USAGE ON SCHEMA pglogic FROM pglogic_reader;
        IF to_regclass('pglogic_alembic_version') IS NOT NULL THEN
            REVOKE SELECT ON pglogic_alembic_version FROM pglogic_reader;
        END IF;
    END IF;
END
$do$;
"""


def upgrade() -> None:
    for name in SQL_FILES:
        op.run_sql_file(name)


def downgrade() -> None:
    op.keep_rows(
        "pglogic.term_cache",
        "it is a cache; empty it first (DELETE FROM pglogic.term_cache) to downgrade further",
    )
    op.run_sql(REVOKE_READER)
    for signature in FUNCTIONS:
        op.run_sql(f"DROP FUNCTION IF EXISTS {signature};")
    op.run_sql("DROP TABLE IF EXISTS pglogic.term_cache;")
