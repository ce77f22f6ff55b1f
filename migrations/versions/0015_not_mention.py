"""``pglogic.search()`` makes a negated term's similarity at least 0.4 for a document that
mentions it, as the Python search does (``"not_mention"``, default 0.4).

As released, it applied ``versions/sql/0015_search.sql``, the statements of ``sql/search.sql``
it changed (each idempotent). The change, from ``bench/quality/results/not_mention.md``:

- the option ``"not_mention"`` (a number from 0 to 1, default 0.4; anything else is refused with
  the Python error's text): on a corpus with a lexical index, each negated-only term's
  similarity column is ``GREATEST(s, CASE WHEN tsv @@ phraseto_tsquery(config, term) THEN
  not_mention END)`` (GREATEST ignores the NULL of a document without a match): at least
  ``not_mention`` where the document's words match the term
  as a phrase, the ``match:`` semantics (``pglogic.engine.compile._floored``; the term's text is
  the scored texts' ``$9[i]``). 0 scores every term as before, and so does a corpus without a
  lexical index.
- Only ``pglogic._plan`` changes; no function changes its arguments or result type.

Its downgrade restored 0014's text of those statements (the option was then refused as
unknown).

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27
"""

from __future__ import annotations

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"


def upgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)


def downgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)
