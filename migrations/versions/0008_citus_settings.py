"""``pglogic.search()`` sets its settings with ``SET LOCAL`` statements, so they reach Citus workers.

Applies ``versions/sql/0008_search.sql``, the frozen text of ``sql/search.sql`` at this revision
(every statement in it is idempotent). One change: ``pglogic.search`` sets ``hnsw.ef_search``,
iterative scans and the other settings of its plan with ``EXECUTE format('SET LOCAL %s = %L')``
instead of ``set_config(name, value, true)``, and first ``SET LOCAL
citus.propagate_set_commands = 'local'`` where Citus is loaded (restored last). On a Citus
coordinator a ``set_config()`` call never reaches the workers, which then searched every shard
at ``hnsw.ef_search = 40`` without iterative scans (``bench/results/citus.md``); on plain
PostgreSQL both forms do the same. No function changes its arguments or result type.

Downgrading applies 0007's ``0007_search.sql`` again.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

from pathlib import Path

from alembic import context, op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def _frozen(name: str) -> str:
    return (Path(__file__).with_name("sql") / name).read_text(encoding="utf-8")


def _run(script: str) -> None:
    if context.is_offline_mode():  # pglogic db sql: the script as it is, for psql
        context.static_output(script.strip())
        return
    # Straight to the driver: the function bodies hold '%' (RAISE, format), not bind parameters.
    op.get_bind().exec_driver_sql(script, execution_options={"no_parameters": True})


def upgrade() -> None:
    _run(_frozen("0008_search.sql"))


def downgrade() -> None:
    _run(_frozen("0007_search.sql"))
