"""``pglogic.search()`` refuses bad input that slipped through, with SQLSTATE 22023 and a message
that says what was wrong, as the Python search does:

- a ``"depth"`` outside 1..100,000 (``pglogic.engine.compile._depths``' bounds): 0 returned no
  rows, a negative depth failed with a raw ``LIMIT`` error, and ``pglogic.search_plan`` showed a
  plan with a negative ``LIMIT``;
- a query node with keys the documented schema does not have: ``{"op": "not", "arg": ...,
  "term": ...}`` was read as the term and dropped the NOT without a word; a term takes ``"term"``
  and ``"vector"``, an operator ``"op"`` with ``"args"`` (AND, OR) or ``"arg"`` (NOT);
- a vector pgvector cannot read (empty, not numbers, out of range, over 16,000 dimensions), in a
  term, in ``"vectors"`` or as the guide: the new ``pglogic._vector`` names what it was for and
  shows at most 100 characters of it, where the raw cast error echoed the whole input;
- a ``complement^G`` exponent past a double's range (``complement^1e400``) is out of range like
  any other, not a failed cast.

``pglogic._vector`` is new; ``pglogic._check_operator``, ``pglogic._collect_terms`` and
``pglogic._plan`` change, with no change to a function's arguments or result type; every valid
input gives the same rows.

Applies ``versions/sql/0017_search.sql``: since the squash of revisions 0002 to 0017, all of
``sql/search.sql`` as 0017 left it (each statement idempotent; a database at 0002 to 0016
upgrades through their table changes, then this replaces its functions). As released, 0017
applied only the statements it changed, and its downgrade restored 0016's text of them.
Downgrading goes only to 0001 or base: it drops the file's functions, ``pglogic._vector`` among
them (``op.leave_squash``); a downgrade to 0002 to 0016 is refused.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.run_sql_file("0017_search.sql")


def downgrade() -> None:
    op.leave_squash("0017_search.sql")
