"""Passages: a corpus may split its long documents into passages, one vector each.

Adds the table ``pglogic.passage_layouts`` (corpus_id, tokens, overlap, tokenizer): how a
corpus splits its documents (``tokens`` word pieces per passage of the model's tokenizer,
``overlap`` of them shared by neighbours). A corpus with a row here has a second table,
``pglogic.corpus_<id>_passages`` (doc_id, ord, char_start, char_end, tokens, embedding), made
by ``pglogic corpus create --passages``; searches take each term's best passage per document.
No row: the corpus is one vector per document, as before. A table rather than columns of
``pglogic.corpora``: downgrading drops it and upgrading makes it again.

Downgrading drops the table, and refuses while it has rows: the corpora's passage tables would
stay behind with nothing to read them, and an upgrade could not bring the layouts back.

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"


def upgrade() -> None:
    op.execute(
        "CREATE TABLE IF NOT EXISTS pglogic.passage_layouts ("
        " corpus_id integer PRIMARY KEY REFERENCES pglogic.corpora(id) ON DELETE CASCADE,"
        " tokens integer NOT NULL CHECK (tokens >= 8),"
        " overlap integer NOT NULL CHECK (overlap >= 0 AND overlap * 2 <= tokens),"
        " tokenizer text NOT NULL)"
    )


def downgrade() -> None:
    op.keep_rows(
        "pglogic.passage_layouts",
        "corpora split into passages, which a revision before 0009 cannot search; drop "
        "those corpora first (pglogic corpus drop NAME)",
    )
    op.execute("DROP TABLE IF EXISTS pglogic.passage_layouts")
