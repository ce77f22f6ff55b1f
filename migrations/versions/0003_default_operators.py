"""The default operator family of ``pglogic.search()`` becomes ``product-max``.

Re-creates ``pglogic._resolve_operators`` from its current definition in
``pglogic/sql/search.sql``: no operators (or a partial spec such as ``not=reciprocal``) now means
and=product, or=max, not=complement, like ``pglogic.operators.DEFAULT_FAMILY``; the preset
``itlr`` keeps its meaning. Downgrading restores 0002's definition, frozen in
``pglogic/sql/resolve_operators_0002.sql``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

from alembic import op

from pglogic.resources import sql_text

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_START = "-- Resolve an operator family"
_END = "$fn$;"


def _sql(name: str) -> str:
    return sql_text(name)


def _run(script: str) -> None:
    # Straight to the driver: the function bodies hold '%' (RAISE), not bind parameters.
    op.get_bind().exec_driver_sql(script, execution_options={"no_parameters": True})


def upgrade() -> None:
    text = _sql("search.sql")
    start = text.index(_START)
    _run(text[start : text.index(_END, start) + len(_END)])


def downgrade() -> None:
    _run(_sql("resolve_operators_0002.sql"))
