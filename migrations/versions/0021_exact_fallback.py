"""``pglogic.search()`` completes every plan to k rows as the Python search does.

Applies ``versions/sql/0021_search.sql`` (``pglogic._plan``; arguments and result unchanged), two
changes that make the SQL function follow ``pglogic.engine.plans`` where it did not:

- **The exact fallback on every plan.** When the index scans find fewer than k rows, the Python
  search and the SQLAlchemy helper score every row instead (``needs_exact_pass``); the SQL
  function did so only for filtered, lexical and passage plans, so an unfiltered plain plan
  (a corpus of fewer than k documents, a ``depth`` below k) returned fewer than k rows. Now every
  plan has its fallback but one whose candidates all come from lexical scans (they found every
  match).
- **A user's depth for the guide scan is at least k**, as the Python planner's (``_depths``): the
  guide scanned only ``depth`` rows where the terms' scans took ``max(depth, k)``.

Downgrading restores 0020's text of ``pglogic._plan``.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

#: Code one revision older works with a database at this revision, and the reverse: only the
#: rows of an edge case change, towards what the Python search returns.
COMPATIBLE_WITH_PREVIOUS = True


def upgrade() -> None:
    op.run_sql_file("0021_search.sql")
    op.run_sql(
        "INSERT INTO pglogic.schema_compat VALUES "
        f"('{revision}', '{down_revision if COMPATIBLE_WITH_PREVIOUS else revision}');"
    )


def downgrade() -> None:
    op.run_sql(f"DELETE FROM pglogic.schema_compat WHERE revision = '{revision}';")
    op.restore_sql_file("0021_search.sql")
