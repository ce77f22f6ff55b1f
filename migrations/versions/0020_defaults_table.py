"""The engine's defaults become data: the table ``pglogic.defaults``, which ``pglogic.search`` reads.

Adds the table ``pglogic.defaults`` (name, value jsonb) and its rows: the default of each option of ``pglogic.search``
(k, operators, truth, mode, lexical, and_text, passage_score, not_context, not_mention, exact,
guide, iterative_scan, passages) and the planner's constants (depth_floor, depth_per_k,
guide_terms, guide_only_factor, exact_switch), the values of ``pglogic/engine/defaults.py``
at this revision. Applies ``versions/sql/0020_search.sql``: ``pglogic._default`` and
``pglogic._with_defaults`` (new), and the functions that wrote those values as literals read
them from the table instead (``_resolve_operators``, ``_resolve_truth``, the depth functions,
``_prefer_exact``, ``_plan``; they become STABLE). The results do not change.

A later revision that changes a default updates its row (``op.set_default``-style: one
``UPDATE`` in its upgrade, the old value in its downgrade); no function is copied again.

Downgrading restores 0019's text of those functions, drops the two new ones and the table.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28
"""

from __future__ import annotations

import json

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

#: Code one revision older works with a database at this revision, and the reverse: the
#: functions' results do not change.
COMPATIBLE_WITH_PREVIOUS = True

#: The defaults at this revision (frozen here: a later change is a later revision's UPDATE).
DEFAULTS: dict[str, object] = {
    "k": 10,
    "exact": False,
    "guide": True,
    "iterative_scan": True,
    "passages": True,
    "operators": "product-max-strong",
    "truth": "clamp",
    "mode": "fuzzy",
    "lexical": "crisp",
    "and_text": 4,
    "passage_score": "blend-not-or",
    "not_context": 0.5,
    "not_mention": 0.4,
    "depth_floor": 100,
    "depth_per_k": 10,
    "guide_terms": 4,
    "guide_only_factor": 2,
    "exact_switch": 17,
}


def _literal(value: object) -> str:
    return "'" + json.dumps(value).replace("'", "''") + "'::jsonb"


def upgrade() -> None:
    rows = ",\n    ".join(f"('{name}', {_literal(value)})" for name, value in DEFAULTS.items())
    op.run_sql(
        "CREATE TABLE pglogic.defaults (\n"
        "    name  text PRIMARY KEY,\n"
        "    value jsonb NOT NULL\n"
        ");\n"
        "COMMENT ON TABLE pglogic.defaults IS\n"
        "    'The engine''s defaults (pglogic/engine/defaults.py), read by pglogic.search';\n"
        f"INSERT INTO pglogic.defaults VALUES\n    {rows};\n"
        "DO $do$\n"
        "BEGIN\n"
        "    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pglogic_reader') THEN\n"
        "        GRANT SELECT ON pglogic.defaults TO pglogic_reader;\n"
        "    END IF;\n"
        "END\n"
        "$do$;"
    )
    op.run_sql_file("0020_search.sql")
    op.run_sql(
        "INSERT INTO pglogic.schema_compat VALUES "
        f"('{revision}', '{down_revision if COMPATIBLE_WITH_PREVIOUS else revision}');"
    )


def downgrade() -> None:
    op.run_sql(f"DELETE FROM pglogic.schema_compat WHERE revision = '{revision}';")
    op.restore_sql_file("0020_search.sql")
    op.run_sql(
        "DROP FUNCTION IF EXISTS pglogic._with_defaults(jsonb, text[]);\n"
        "DROP FUNCTION IF EXISTS pglogic._default(text);\n"
        "DROP TABLE IF EXISTS pglogic.defaults;"
    )
