"""``pglogic.search()`` sets its settings with ``SET LOCAL`` statements, so they reach Citus workers.

Applies ``versions/sql/0008_search.sql``, the statements of ``sql/search.sql`` this revision changed
(each idempotent). One change: ``pglogic.search`` sets ``hnsw.ef_search``,
iterative scans and the other settings of its plan with ``EXECUTE format('SET LOCAL %s = %L')``
instead of ``set_config(name, value, true)``, and first ``SET LOCAL
citus.propagate_set_commands = 'local'`` where Citus is loaded (restored last). On a Citus
coordinator a ``set_config()`` call never reaches the workers, which then searched every shard
at ``hnsw.ef_search = 40`` without iterative scans (``bench/perf/results/citus.md``); on plain
PostgreSQL both forms do the same. No function changes its arguments or result type.

Downgrading restores 0007's text of those statements.

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from __future__ import annotations

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"


def upgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)


def downgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)
