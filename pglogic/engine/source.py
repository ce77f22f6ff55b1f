"""What a query searches: a pglogic corpus (its table, dimension and column), or any
:class:`Source` (a table with an id column and an embedding column).

Pure (no I/O): :mod:`pglogic.store.corpus` reads the corpora's rows from the database.

Example:
    >>> Corpus(1, "news", "corpus_1", "m", 384, "cosine", "embedding", None, None).table.as_string(None)
    '"pglogic"."corpus_1"'
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from pglogic.errors import InvalidInput

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
SCHEMA = "pglogic"
#: The ``tsvector`` column of a corpus's lexical index.
LEXICAL_COLUMN = "tsv"


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


@dataclass(frozen=True)
class Source:
    """What a query searches: a table with an id column and an embedding column.

    ``alias`` names the table inside the statement (``d`` for corpora); None refers to it by its
    own name, so that SQL written against the table (e.g. an application's filters) fits in.
    ``columns`` are extra columns returned after the id. ``lexical`` is the ``tsvector`` column
    of its lexical index and ``text_config`` the text search configuration it was made with
    (both None: lexical terms are refused).

    Example:
        >>> src = Source(sql.Identifier("public", "articles"), None, "id", "embedding", 384, ())
        >>> src.ref.as_string(None)
        '"public"."articles"'
    """

    table: sql.Composable
    alias: str | None
    id: str
    embedding: str
    dim: int
    columns: tuple[str, ...] = ("external_id", "title", "metadata")
    lexical: str | None = None
    text_config: str | None = None
    #: The passage table (alias ``p``: a ``passage_doc`` column referencing ``id`` and the
    #: vector column ``passage_embedding``, None: named like ``embedding``), or None: one
    #: vector per row.
    passages: sql.Composable | None = None
    passage_doc: str = "doc_id"
    #: How much deeper the passages' scans go than a documents' scan of a multi-term query
    #: (:func:`passage_factor` of the passages per document).
    passage_factor: float = 1.0
    passage_embedding: str | None = None
    #: Whether a row with passages may lack its own vector (``embedding`` NULL): the blended
    #: passage scores then take its best passage alone. Set for an application's nullable
    #: column (SQLAlchemy); a pglogic corpus's active column is always filled, and its SQL
    #: function's statement stays the compiler's.
    own_nullable: bool = False
    #: The ``jsonb`` column that metadata filters read (``SearchOptions.filters``).
    metadata_column: str = "metadata"

    @classmethod
    def for_corpus(cls, corpus: Corpus, *, passages: bool = True) -> Source:
        """The source for a pglogic corpus (table ``pglogic.corpus_<id>``, alias ``d``), with its
        passage table when it has one and ``passages`` is on.

        Example:
            >>> c = Corpus(1, "news", "corpus_1", "m", 384, "cosine", "embedding", None, None)
            >>> Source.for_corpus(c).alias
            'd'
        """
        lexical = LEXICAL_COLUMN if corpus.lexical_config is not None else None
        return cls(
            corpus.table, "d", "id", corpus.column, corpus.dim,
            lexical=lexical, text_config=corpus.lexical_config,
            passages=corpus.passage_table if passages else None,
            passage_factor=passage_factor(corpus.passages_per_document),
        )  # fmt: skip

    @property
    def passage_vector(self) -> str:
        """The passage table's vector column: ``passage_embedding``, else ``embedding``'s name.

        Example:
            >>> Source(sql.Identifier("a"), None, "id", "e", 3, (), passage_embedding="pe").passage_vector
            'pe'
        """
        return self.passage_embedding or self.embedding

    @property
    def ref(self) -> sql.Composable:
        """How columns are qualified: the alias, or the table itself."""
        return sql.Identifier(self.alias) if self.alias else self.table

    def col(self, name: str) -> sql.Composable:
        """A qualified column of the source."""
        return sql.SQL("{}.{}").format(self.ref, sql.Identifier(name))

    @property
    def from_(self) -> sql.Composable:
        """The FROM item: ``table alias`` or just ``table``."""
        if self.alias:
            return sql.SQL("{} {}").format(self.table, sql.Identifier(self.alias))
        return self.table


def passage_factor(per_document: float | None) -> float:
    """How many times deeper the passages' scans of a multi-term query go than a documents'
    scan: the corpus's passages per document, in steps of a half, from 1 to 8 (1 when unknown).

    Example:
        >>> passage_factor(None), passage_factor(1.2), passage_factor(4.0), passage_factor(30)
        (1.0, 1.0, 4.0, 8.0)
    """
    if per_document is None or not per_document > 0:
        return 1.0
    return min(8.0, max(1.0, math.ceil(per_document * 2 - 0.5) / 2))
