"""What the engine needs to know of a pglogic corpus: its table, dimension and column.

Pure (no I/O): :mod:`pglogic.store.corpus` reads these rows from the database.

Example:
    >>> Corpus(1, "news", "corpus_1", "m", 384, "cosine", "embedding", None, None).table.as_string(None)
    '"pglogic"."corpus_1"'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from pglogic.errors import InvalidInput

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
SCHEMA = "pglogic"


@dataclass(frozen=True)
class Corpus:
    """A corpus and its active embedding space.

    Example:
        >>> c = Corpus(1, "news", "corpus_1", "all-MiniLM-L6-v2", 384, "cosine", "embedding", None, None)
        >>> c.table.as_string(None)
        '"pglogic"."corpus_1"'
    """

    id: int
    name: str
    table_name: str
    model: str
    dim: int
    distance: str
    column: str
    index_name: str | None
    index_params: dict[str, Any] | None
    #: The text search configuration of the corpus's lexical index (column ``tsv``), or None
    #: when the corpus has none (lexical terms are refused).
    lexical_config: str | None = None
    #: Word pieces per passage when the corpus splits its documents into passages (table
    #: ``<table_name>_passages``, one vector each), or None: one vector per document.
    passage_tokens: int | None = None
    #: Word pieces that neighbouring passages share.
    passage_overlap: int = 0
    #: Passages per document, from the planner's statistics of both tables (None: unknown).
    passages_per_document: float | None = None

    @property
    def table(self) -> sql.Identifier:
        """The corpus table as a qualified SQL identifier."""
        return sql.Identifier(SCHEMA, self.table_name)

    @property
    def passage_table(self) -> sql.Identifier | None:
        """The corpus's passage table as a qualified SQL identifier, or None without passages.

        Example:
            >>> Corpus(1, "n", "corpus_1", "m", 3, "cosine", "embedding", None, None,
            ...        passage_tokens=128).passage_table.as_string(None)
            '"pglogic"."corpus_1_passages"'
        """
        if self.passage_tokens is None:
            return None
        return sql.Identifier(SCHEMA, f"{self.table_name}_passages")

    @property
    def embedding(self) -> sql.Identifier:
        """The active embedding column as an SQL identifier."""
        return sql.Identifier(self.column)


def validate_name(name: str) -> None:
    """Raise :class:`InvalidInput` unless ``name`` is a valid corpus name.

    Example:
        >>> validate_name("news-2024")
        >>> validate_name("bad name")
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid corpus name 'bad name': use ASCII letters, digits, '_', '-', '.' (max 63, starting with a letter or digit)
    """
    if not isinstance(name, str):
        raise InvalidInput(f"Invalid corpus name {name!r}: expected a string")
    if not NAME_RE.match(name):
        raise InvalidInput(
            f"Invalid corpus name {name!r}: use ASCII letters, digits, '_', '-', '.' "
            "(max 63, starting with a letter or digit)"
        )
