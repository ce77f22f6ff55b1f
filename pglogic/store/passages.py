"""Passage tables: a corpus's long documents as passages, one vector each.

A corpus made with passages (``create_corpus(..., passages=PassageLayout(...))``) has a second
table beside its documents, ``pglogic.corpus_<id>_passages``::

    id bigint PRIMARY KEY, doc_id bigint REFERENCES corpus_<id>(id) ON DELETE CASCADE,
    ord integer, char_start integer, char_end integer, tokens integer, embedding vector(dim),
    UNIQUE (doc_id, ord)

Passage ``ord`` of a document is ``embed_text[char_start:char_end]`` (title and text, as the
model reads them, :attr:`pglogic.store.readers.Record.embed_text`), with ``tokens`` word pieces
of the model's tokenizer. Its layout (tokens per passage, overlap, tokenizer) is the corpus's row
in ``pglogic.passage_layouts``. The ingest (:mod:`pglogic.store.ingest`) writes a document's
passages in the same transaction as the document; its own ``embedding`` column keeps the
model's vector of the whole text (cut at the window, as a single-vector corpus has it), which a
search with ``passages=False`` reads. The HNSW index of the passages is built by
``pglogic index`` beside the documents' one (:func:`build_passage_index`).

Example:
    >>> layout = PassageLayout(tokens=254, overlap=32, tokenizer="all-MiniLM-L6-v2")
    >>> layout.describe()
    '254 tokens per passage, 32 shared (all-MiniLM-L6-v2 tokenizer)'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql

from pglogic.embed.passages import (
    DEFAULT_OVERLAP,
    DEFAULT_TOKENS,
    Span,
    check_layout,
    tokenizer_of,
)
from pglogic.engine.source import SCHEMA, Corpus
from pglogic.store.db import Connection

_COLUMNS = ("doc_id", "ord", "char_start", "char_end", "tokens")


def embed_text_sql(alias: str | None) -> sql.Composed:
    """The text the model reads (title, newline, text; the text alone without a title), as
    :attr:`pglogic.store.readers.Record.embed_text` builds it, in SQL; passage offsets index it.

    Example:
        >>> print(embed_text_sql("d").as_string(None)[:50])
        CASE WHEN coalesce("d"."title", '') = '' THEN "d".
    """

    def col(name: str) -> sql.Composable:
        return sql.Identifier(alias, name) if alias else sql.Identifier(name)

    return sql.SQL(
        "CASE WHEN coalesce({t}, '') = '' THEN {x} ELSE {t} || E'\\n' || {x} END"
    ).format(t=col("title"), x=col("text"))


@dataclass(frozen=True)
class PassageLayout:
    """How a corpus splits its documents.

    Example:
        >>> PassageLayout(128, 16, "words").tokens
        128
    """

    tokens: int
    overlap: int
    tokenizer: str

    def describe(self) -> str:
        """One line for ``pglogic corpus show``."""
        return (
            f"{self.tokens} tokens per passage, {self.overlap} shared ({self.tokenizer} tokenizer)"
        )


def passage_layout(embedder: Any, tokens: int | None, overlap: int | None) -> PassageLayout:
    """The layout of a new corpus of ``embedder``'s model: ``tokens`` per passage (default:
    the model's window, else :data:`~pglogic.embed.passages.DEFAULT_TOKENS`) and ``overlap``
    (default :data:`~pglogic.embed.passages.DEFAULT_OVERLAP`, at most half the size); refused
    (InvalidInput) when a passage would not fit the window.

    Example:
        >>> class Plain:
        ...     name, dim = "plain", 2
        >>> passage_layout(Plain(), 64, None)
        PassageLayout(tokens=64, overlap=32, tokenizer='words (the model has no tokenizer here)')
    """
    tok = tokenizer_of(embedder)
    size = tokens if tokens is not None else (tok.window or DEFAULT_TOKENS)
    if overlap is None:
        overlap = min(DEFAULT_OVERLAP, size // 2) if isinstance(size, int) else DEFAULT_OVERLAP
    check_layout(size, overlap, tok.window)
    return PassageLayout(size, overlap, tok.name)


def passage_table_name(corpus: Corpus) -> str:
    """The bare name of the corpus's passage table.

    Example:
        >>> passage_table_name(Corpus(1, "n", "corpus_1", "m", 3, "cosine", "embedding", None, None))
        'corpus_1_passages'
    """
    return f"{corpus.table_name}_passages"


def create_passage_table(conn: Connection, corpus: Corpus, layout: PassageLayout) -> None:
    """Make the corpus's passage table and register its layout (in the caller's transaction).

    Example:
        >>> create_passage_table(conn, corpus, PassageLayout(254, 32, "all-MiniLM-L6-v2"))  # doctest: +SKIP
    """
    check_layout(layout.tokens, layout.overlap)
    table = sql.Identifier(SCHEMA, passage_table_name(corpus))
    conn.execute(
        sql.SQL(
            "CREATE TABLE {table} ("
            " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " doc_id bigint NOT NULL REFERENCES {docs} (id) ON DELETE CASCADE,"
            " ord integer NOT NULL, char_start integer NOT NULL, char_end integer NOT NULL,"
            " tokens integer NOT NULL, embedding vector({dim}), UNIQUE (doc_id, ord))"
        ).format(table=table, docs=corpus.table, dim=sql.Literal(corpus.dim))
    )
    conn.execute(
        sql.SQL(
            "ALTER TABLE {} ALTER COLUMN embedding SET STORAGE MAIN, SET (toast_tuple_target = 8160)"
        ).format(table)
    )
    reader = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pglogic_reader'")
    if reader.fetchone() is not None:
        conn.execute(sql.SQL("GRANT SELECT ON {} TO pglogic_reader").format(table))
    conn.execute(
        "INSERT INTO pglogic.passage_layouts (corpus_id, tokens, overlap, tokenizer)"
        " VALUES (%s, %s, %s, %s)",
        (corpus.id, layout.tokens, layout.overlap, layout.tokenizer),
    )


def get_layout(conn: Connection, corpus: Corpus) -> PassageLayout | None:
    """The corpus's passage layout, or None when it is one vector per document.

    Example:
        >>> get_layout(conn, corpus)  # doctest: +SKIP
        PassageLayout(tokens=254, overlap=32, tokenizer='all-MiniLM-L6-v2')
    """
    row = conn.execute(
        "SELECT tokens, overlap, tokenizer FROM pglogic.passage_layouts WHERE corpus_id = %s",
        (corpus.id,),
    ).fetchone()
    return None if row is None else PassageLayout(int(row[0]), int(row[1]), str(row[2]))


def write_passages(
    conn: Connection,
    corpus: Corpus,
    docs: Sequence[tuple[str, Sequence[Span], np.ndarray]],
    column: str | None = None,
) -> int:
    """Replace the passages of documents ``(external_id, spans, vectors)`` (in the caller's
    transaction); return how many passages were written. ``column`` is the embedding column
    (default: the corpus's active one); the vectors are row ``i`` for span ``i``.

    Example:
        >>> write_passages(conn, corpus, [("d1", [Span(0, 5, 2)], vecs)])  # doctest: +SKIP
        1
    """
    table = corpus.passage_table
    assert table is not None
    if not docs:
        return 0
    col = sql.Identifier(column or corpus.column)
    ids = {
        str(r[0]): int(r[1])
        for r in conn.execute(
            sql.SQL("SELECT external_id, id FROM {} WHERE external_id = ANY(%s)").format(
                corpus.table
            ),
            ([d[0] for d in docs],),
        )
    }
    conn.execute(
        sql.SQL("DELETE FROM {} WHERE doc_id = ANY(%s)").format(table),
        ([ids[d[0]] for d in docs],),
    )
    n = 0
    statement = sql.SQL("COPY {} ({}, {}) FROM STDIN (FORMAT BINARY)").format(
        table, sql.SQL(", ").join(map(sql.Identifier, _COLUMNS)), col
    )
    with conn.cursor() as cur, cur.copy(statement) as copy:
        copy.set_types(["int8", "int4", "int4", "int4", "int4", "vector"])
        for external_id, spans, vectors in docs:
            doc_id = ids[external_id]
            for i, span in enumerate(spans):
                copy.write_row((doc_id, i, span.start, span.end, span.tokens, vectors[i]))
                n += 1
    return n


def set_passage_vectors(
    conn: Connection, corpus: Corpus, column: str, rows: Sequence[tuple[int, np.ndarray | None]]
) -> None:
    """Set ``column`` of passages ``(passage id, vector)`` (a model switch's backfill).

    Example:
        >>> set_passage_vectors(conn, corpus, "embedding_2", [(1, vec)])  # doctest: +SKIP
    """
    table = corpus.passage_table
    assert table is not None
    with conn.cursor() as cur:
        cur.executemany(
            sql.SQL("UPDATE {} SET {} = %s WHERE id = %s").format(table, sql.Identifier(column)),
            [(v, i) for i, v in rows],
        )


@dataclass(frozen=True)
class PassageStats:
    """How many passages a corpus has and how its documents split.

    Example:
        >>> PassageStats(passages=12, documents=10, split=1, longest=3, table_bytes=0,
        ...              index_bytes=0).per_document
        1.2
    """

    passages: int
    documents: int
    split: int  # documents of more than one passage
    longest: int  # the most passages of one document
    table_bytes: int
    index_bytes: int  # every index of the passage table
    embedded: int = 0  # passages with a vector in the corpus's active column
    hnsw_bytes: int = 0  # the active column's HNSW index (part of index_bytes)

    @property
    def per_document(self) -> float:
        """Passages per document (0 for an empty corpus)."""
        return round(self.passages / self.documents, 2) if self.documents else 0.0


def passage_stats(conn: Connection, corpus: Corpus) -> PassageStats | None:
    """Counts and sizes of the corpus's passages, or None without passages.

    Example:
        >>> passage_stats(conn, corpus).passages  # doctest: +SKIP
        12
    """
    table = corpus.passage_table
    if table is None:
        return None
    row = conn.execute(
        sql.SQL(
            "SELECT count(*), count(*) FILTER (WHERE n > 1), coalesce(max(n), 0),"
            " coalesce(sum(n), 0), coalesce(sum(e), 0)"
            " FROM (SELECT doc_id, count(*) AS n, count({}) AS e FROM {} GROUP BY doc_id) s"
        ).format(sql.Identifier(corpus.column), table)
    ).fetchone()
    sizes = conn.execute(
        "SELECT pg_table_size(%s::regclass), pg_indexes_size(%s::regclass),"
        " coalesce(pg_relation_size(to_regclass(%s)), 0)",
        (*(f"{SCHEMA}.{passage_table_name(corpus)}",) * 2,
         f"{SCHEMA}.{passage_index_name(corpus, corpus.column)}"),
    ).fetchone()  # fmt: skip
    assert row is not None and sizes is not None
    return PassageStats(
        int(row[3]), int(row[0]), int(row[1]), int(row[2]), int(sizes[0]), int(sizes[1]),
        int(row[4]), int(sizes[2]),
    )  # fmt: skip


def passage_index_name(corpus: Corpus, column: str) -> str:
    """Name of the HNSW index of ``column`` in the corpus's passage table.

    Example:
        >>> c = Corpus(1, "n", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> passage_index_name(c, "embedding")
        'corpus_1_passages_embedding_hnsw'
    """
    return f"{passage_table_name(corpus)}_{column}_hnsw"


def build_passage_index(
    conn: Connection, corpus: Corpus, *, column: str, m: int, ef_construction: int
) -> None:
    """(Re)build the HNSW cosine index of the passages' ``column`` concurrently (autocommit):
    beside the old one under ``<name>_new``, then swapped in, so searches go on.

    Example:
        >>> build_passage_index(conn, corpus, column="embedding", m=16, ef_construction=128)  # doctest: +SKIP
    """
    table = corpus.passage_table
    assert table is not None
    name = passage_index_name(corpus, column)
    valid = conn.execute(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
        (f"{SCHEMA}.{name}",),
    ).fetchone()
    drop = sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}")
    if valid is not None and not valid[0]:  # left invalid by an interrupted build
        conn.execute(drop.format(sql.Identifier(SCHEMA, name)))
        valid = None
    target = name if valid is None else f"{name}_new"
    conn.execute(drop.format(sql.Identifier(SCHEMA, f"{name}_new")))
    try:
        conn.execute(
            sql.SQL(
                "CREATE INDEX CONCURRENTLY {idx} ON {table} USING hnsw ({col} vector_cosine_ops)"
                " WITH (m = {m}, ef_construction = {efc})"
            ).format(
                idx=sql.Identifier(target),
                table=table,
                col=sql.Identifier(column),
                m=sql.Literal(m),
                efc=sql.Literal(ef_construction),
            )
        )
    except Exception:
        if not conn.broken:
            conn.execute(drop.format(sql.Identifier(SCHEMA, target)))
        raise
    if target != name:
        swap_passage_index(conn, name)
    conn.execute(sql.SQL("ANALYZE {}").format(table))


def swap_passage_index(conn: Connection, name: str) -> None:
    """Put the built index ``<name>_new`` of a passage table in the place of ``name`` (dropped
    if it exists), in one transaction.

    Example:
        >>> swap_passage_index(conn, "corpus_1_passages_embedding_hnsw")  # doctest: +SKIP
    """
    with conn.transaction():
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(SCHEMA, name)))
        conn.execute(
            sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                sql.Identifier(SCHEMA, f"{name}_new"), sql.Identifier(name)
            )
        )


@dataclass(frozen=True)
class Deciding:
    """The passage that decided a term's similarity for one document.

    Example:
        >>> Deciding("wheat", 2, 812, 1650, 0.61, "...wheat exports...").ord
        2
    """

    term: str
    ord: int
    start: int
    end: int
    similarity: float
    snippet: str


def deciding_passages(
    conn: Connection,
    corpus: Corpus,
    doc_ids: Sequence[int],
    terms: Sequence[str],
    vectors: Sequence[np.ndarray],
    *,
    snippet: int = 160,
) -> dict[int, list[Deciding]]:
    """For each document and term, its passage most similar to the term (``--explain``).

    One statement: every passage of the documents against every term vector, the best per
    (document, term), with its offsets and the first ``snippet`` characters of its text.

    Example:
        >>> deciding_passages(conn, corpus, [7], ["wheat"], [vec])[7][0].ord  # doctest: +SKIP
        3
    """
    table = corpus.passage_table
    if table is None or not doc_ids or not terms:
        return {}
    sims = sql.SQL(", ").join(
        sql.SQL("coalesce(nullif(1 - (p.{} <=> %s::vector), 'NaN'), 0)").format(corpus.embedding)
        for _ in terms
    )
    rows = conn.execute(
        sql.SQL(
            "SELECT p.doc_id, p.ord, p.char_start, p.char_end,"
            " substr({text}, p.char_start + 1, least(p.char_end - p.char_start, %s)), ARRAY[{sims}]"
            " FROM {table} p JOIN {docs} d ON d.id = p.doc_id"
            " WHERE p.doc_id = ANY(%s) AND p.{col} IS NOT NULL ORDER BY p.doc_id, p.ord"
        ).format(
            sims=sims,
            text=embed_text_sql("d"),
            table=table,
            docs=corpus.table,
            col=corpus.embedding,
        ),
        (snippet, *(np.asarray(v, dtype=np.float32) for v in vectors), list(doc_ids)),
    ).fetchall()
    best: dict[int, list[Deciding]] = {}
    for doc_id, ord_, start, end, text, values in rows:
        current = best.setdefault(int(doc_id), [])
        for t, (term, value) in enumerate(zip(terms, values, strict=True)):
            cand = Deciding(term, int(ord_), int(start), int(end), float(value), str(text))
            if len(current) <= t:
                current.append(cand)
            elif cand.similarity > current[t].similarity:
                current[t] = cand
    return best
