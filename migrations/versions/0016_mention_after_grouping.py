"""``pglogic.search()`` over passages reads a document's words after grouping its passages, as the
Python search does, and binds the text search configuration as a ``regconfig``: the same scores,
less work.

As released, it applied ``versions/sql/0016_search.sql``, the statements of ``sql/search.sql``
it changed (each idempotent). The change, from ``bench/perf/results/not_mention_latency.md``:

- over passages, the floor of ``"not_mention"`` (0015) and the lexical truths (0007) are
  computed after the ``GROUP BY`` the document, from the document's row joined again (as the
  blends' own vectors have been since 0012), instead of inside the grouping. The grouping then
  reads only the documents' ids (an index-only scan; with a filter, also what it tests) and no
  longer carries each document's ``tsv`` through it. The floor applies to the best passage's
  similarity either way, so every score is the same (``pglogic.engine.compile._passage_sims``).
- ``pglogic.search`` binds ``$7``, the text search configuration, as a ``regconfig``: bound as
  text, the statement's ``$7::regconfig`` looked the configuration up again for every row it
  matched (about 2 ms of a Reuters NOT query). ``pglogic.search_plan`` says so in its list of
  parameters, which now names ``$9`` too.
- ``pglogic._plan``, ``pglogic.search`` and ``pglogic.search_plan`` change; no function changes
  its arguments or result type.

Its downgrade restored 0015's text of those statements.

Squashed: its SQL is part of ``versions/sql/0017_search.sql`` (revision 0017's squash of the
deltas of 0002 to 0017); this revision keeps only its table changes, so a database at it still
upgrades, and no database is migrated to it any more (only through it, or down to 0001 or base).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from __future__ import annotations

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

#: The revision whose frozen SQL holds this one's (no database is migrated to this one).
SQUASHED_INTO = "0017"


def upgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)


def downgrade() -> None:
    pass  # (its SQL: versions/sql/0017_search.sql)
