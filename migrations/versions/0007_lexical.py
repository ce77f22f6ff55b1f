"""Lexical terms: each corpus may have a lexical (full-text) index, and ``pglogic.search()`` reads them.

Adds the table ``pglogic.lexical_indexes`` (corpus_id, config): the text search configuration of
each corpus's ``tsv`` column (``to_tsvector(config, title || ' ' || text)``, generated and
stored, with a GIN index) that ``match:"..."`` terms search; no row when the corpus has no
lexical index. The column and its index are made by ``pglogic corpus lexical NAME`` (new corpora
get them at creation). A table rather than a column of ``pglogic.corpora``: downgrading drops it
and upgrading makes it again with the catalog as it was.

Then applies ``versions/sql/0007_search.sql``, the statements of ``sql/search.sql`` this revision changed (each idempotent): the query tree takes lexical terms
(``{"match": "wheat"}``) and the options ``"lexical"`` (``crisp``, the default, or ``rank``) and
``"mode"`` (``fuzzy`` only), like ``pglogic.engine.compile``; ``pglogic.search`` returns one more
column, ``lexical`` (each lexical term's truth value). New helper: ``_semantic_part``.
``_score_sql`` takes the lexical terms as a sixth argument (the five-argument function is
dropped); ``_plan`` (and ``search_plan``, whose SQL body depends on it) and ``search`` return
other columns, so they are dropped first.

Downgrading drops the new functions, restores 0006's text of those statements (which creates
the old ones) and drops the table (the corpora keep their ``tsv`` columns, which nothing reads
then).

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"

#: What 0007 replaces with functions of other result types or arguments, dependents first
#: (SQL-standard bodies record their dependencies).
DROP_OLD = """
DROP FUNCTION IF EXISTS pglogic.search_plan(text, jsonb);
DROP FUNCTION IF EXISTS pglogic._plan(text, jsonb);
DROP FUNCTION IF EXISTS pglogic.search(text, jsonb);
DROP FUNCTION IF EXISTS pglogic._score_sql(jsonb, text[], text[], text, integer);
"""

#: 0007's functions that 0006 has in another form or not at all, dependents first: the
#: SQL-standard body of ``_and_phrase`` calls ``_semantic_part``.
DROP_NEW = """
DROP FUNCTION IF EXISTS pglogic.search_plan(text, jsonb);
DROP FUNCTION IF EXISTS pglogic._plan(text, jsonb);
DROP FUNCTION IF EXISTS pglogic.search(text, jsonb);
DROP FUNCTION IF EXISTS pglogic._score_sql(jsonb, text[], text[], text, integer, text[]);
DROP FUNCTION IF EXISTS pglogic._and_phrase(jsonb);
DROP FUNCTION IF EXISTS pglogic._semantic_part(jsonb);
"""


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS pglogic.lexical_indexes ("
        " corpus_id integer PRIMARY KEY REFERENCES pglogic.corpora(id) ON DELETE CASCADE,"
        " config text NOT NULL)"
    )
    op.run_sql(DROP_OLD)


def downgrade() -> None:
    op.keep_rows(
        "pglogic.lexical_indexes",
        "corpora with a lexical index; drop each first (pglogic corpus lexical NAME --drop)",
    )
    op.run_sql(DROP_NEW)
    op.execute("DROP TABLE IF EXISTS pglogic.lexical_indexes")
