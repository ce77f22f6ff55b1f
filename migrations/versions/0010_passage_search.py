"""``pglogic.search()`` searches a corpus's passages, as the Python search does.

Applies ``versions/sql/0010_search.sql``, the statements of ``sql/search.sql`` this revision changed
(each idempotent). A corpus with a row in ``pglogic.passage_layouts``
(revision 0009) is searched through its passage table ``pglogic.<table_name>_passages`` by
default, with the statement of ``pglogic.engine.compile`` (``_passage_statement``), text for
text: HNSW scans of the passages for the candidate documents (joined to the documents only
under a filter), their union ``cand``, then each term's similarity as the best over the
document's passages (``max`` per document), the same ranking; exact mode over every document's
passages; the exact fallback also after an unfiltered passage scan that found fewer than k
documents. The option ``"passages": false`` searches the documents' own vectors, as before.
``_plan`` returns one more column, ``passage_table`` (so it and ``search_plan``, whose SQL body
depends on it, are dropped first); ``search_plan`` shows it as ``"passages"``.

Downgrading drops ``_plan`` and ``search_plan`` and restores 0008's text of those statements
(which creates them as they were).

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"

#: What 0010 replaces with functions of another result type, dependents first (the SQL-standard
#: body of ``search_plan`` records its dependency on ``_plan``).
DROP_OLD = """
DROP FUNCTION IF EXISTS pglogic.search_plan(text, jsonb);
DROP FUNCTION IF EXISTS pglogic._plan(text, jsonb);
"""

#: 0010's functions that 0008's SQL creates in another form, dependents first.
DROP_NEW = DROP_OLD


def upgrade() -> None:
    op.run_sql(DROP_OLD)


def downgrade() -> None:
    op.run_sql(DROP_NEW)
