"""Batched, idempotent, resumable ingestion with binary COPY.

Each batch: look up the stored hashes of its external ids, embed only new or changed texts, COPY
(binary) the rows into a temporary staging table, upsert them into the corpus table, commit. A
re-run skips rows whose content is unchanged, so an interrupted ingest resumes where it stopped
and nothing committed is lost.

Example:
    >>> stats = ingest_path(conn, corpus, Path("corpus.jsonl"), embedder=emb)  # doctest: +SKIP
    >>> stats.inserted  # doctest: +SKIP
    2000
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from pglogic.embed.base import Embedder
from pglogic.embed.passages import Span, Tokenizer, split, tokenizer_of
from pglogic.embed.registry import get_embedder
from pglogic.engine.source import Corpus
from pglogic.errors import EmbeddingError, InvalidInput
from pglogic.store.db import Connection
from pglogic.store.passages import embed_text_sql, set_passage_vectors, write_passages
from pglogic.store.readers import FieldMap, Record, read_records

log = logging.getLogger("pglogic")
#: Set on the log records of the warnings that :class:`IngestStats` also carries (a caller that
#: prints the stats, like the CLI, filters these records out).
SAID_BY_CALLER = "pglogic_ingest_stats"

DEFAULT_BATCH_SIZE = 256
_COLUMNS = ("external_id", "title", "text", "metadata", "text_hash", "row_hash", "embedding")
_TYPES = ("text", "text", "text", "jsonb", "bytea", "bytea", "vector")
#: A row to write: the record, its text and row hashes, and whether it needs a new vector.
_Todo = tuple[Record, bytes, bytes, bool]
#: The stored state of an external id: text hash, row hash, whether it has a vector.
_Stored = tuple[bytes, bytes, bool]


@dataclass
class IngestStats:
    """Counts and timings of one ingest run.

    Example:
        >>> IngestStats(seen=3, inserted=3).changed
        3
    """

    seen: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    embedded: int = 0
    batches: int = 0
    embed_seconds: float = 0.0
    load_seconds: float = 0.0
    #: passages written (a corpus with passages; a re-embedded document's replace its old ones)
    passages: int = 0
    #: documents embedded whose text is longer than the model's window: in a corpus without
    #: passages, the model read only their first ``window`` tokens
    truncated: int = 0
    #: passages longer than the model's window (a model with a smaller window than the split)
    over_window: int = 0
    #: records whose id an earlier record of the same input had: the last record of an id is
    #: the one kept (counted in ``seen``, not in ``inserted`` / ``updated`` / ``unchanged``
    #: when the earlier one was in the same batch)
    repeated: int = 0

    @property
    def changed(self) -> int:
        """Rows inserted or updated."""
        return self.inserted + self.updated


def text_hash(record: Record) -> bytes:
    """Hash of what gets embedded (title + text, or the given vector): re-embed when it changes.

    Example:
        >>> text_hash(Record("a", "x", None)) == text_hash(Record("b", "x", None, {"k": 1}))
        True
    """
    h = hashlib.sha256(record.embed_text.encode("utf-8"))
    if record.vector is not None:
        h.update(b"\x00" + np.asarray(record.vector, dtype=np.float32).tobytes())
    return h.digest()


def row_hash(record: Record) -> bytes:
    """Hash of the whole row (title, text, metadata, vector): skip the row when it is unchanged.

    Example:
        >>> row_hash(Record("a", "x", None)) == row_hash(Record("a", "x", None, {"k": 1}))
        False
    """
    payload = json.dumps([record.title, record.text, record.metadata], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8") + text_hash(record)).digest()


def vector_problem(vector: Sequence[float], dim: int) -> str | None:
    """What is wrong with a precomputed vector for a ``dim``-d corpus, or None when nothing is.

    pgvector stores float32: a component must be finite as a float32, and the vector must not
    be zero (its cosine similarity to anything is undefined: NaN).

    Example:
        >>> vector_problem([1.0, 0.0], 2) is None
        True
        >>> vector_problem([0.0, 0.0], 2), vector_problem([1.0, float("nan")], 2)
        ('is a zero vector (no direction: its cosine similarity is undefined)', 'has a NaN or infinite component (component 2)')
        >>> vector_problem([1.0], 2)
        'has a 1-d vector but the corpus stores 2-d vectors'
    """
    if len(vector) != dim:
        return f"has a {len(vector)}-d vector but the corpus stores {dim}-d vectors"
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.asarray(vector, dtype=np.float32)
    finite = np.isfinite(arr)
    if not finite.all():
        return f"has a NaN or infinite component (component {int(np.argmin(finite)) + 1})"
    if not np.any(arr):
        return "is a zero vector (no direction: its cosine similarity is undefined)"
    return None


#: The longest external id, in UTF-8 bytes: the unique index on it takes a third of a page.
MAX_ID_BYTES = 2000
#: Texts longer than this (UTF-8 bytes) are checked against the lexical index's limit: a tsvector
#: holds at most 1 MiB, and no shorter text's words come near it.
_CHECK_WORDS_BYTES = 256 * 1024


def validate(
    records: Iterable[Record],
    corpus: Corpus,
    *,
    words_fit: Callable[[Record], bool] | None = None,
    drop_lexical: str | None = None,
) -> int:
    """Check every record (the readers raise on bad ones), its id's length, every precomputed
    vector (:func:`vector_problem`) and, with ``words_fit`` (a corpus with a lexical index:
    :func:`words_fit_in`), that a long text's words fit in its ``tsvector``, before anything is
    written; return the count. ``drop_lexical`` says how to drop the lexical index (default:
    the command).

    Example:
        >>> validate([Record("a", "x", None, {}, (1.0, 0.0))], corpus)  # doctest: +SKIP
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: record 1 ('a') has a 2-d vector but corpus 'news' stores 384-d vectors; nothing was written
    """
    n = 0
    for r in records:
        n += 1
        where = r.source or f"record {n} ({r.external_id[:40]!r})"
        if (size := len(r.external_id.encode("utf-8"))) > MAX_ID_BYTES:
            raise InvalidInput(
                f"{where}: the id is {size:,} bytes long, at most {MAX_ID_BYTES:,}; nothing was "
                "written"
            )
        if (
            words_fit is not None
            and 4 * (len(r.text) + len(r.title or "")) > _CHECK_WORDS_BYTES  # (UTF-8: ≤ 4 a char)
            and len(r.text.encode("utf-8")) + len((r.title or "").encode("utf-8"))
            > _CHECK_WORDS_BYTES
            and not words_fit(r)
        ):
            raise InvalidInput(
                f"{where}: the text has too many distinct words for the corpus's lexical index "
                "(a tsvector holds at most 1 MiB): split the document, or drop the index "
                f"({drop_lexical or f'pglogic corpus lexical {corpus.name} --drop'}); nothing "
                "was written"
            )
        if r.vector is None:
            continue
        problem = vector_problem(r.vector, corpus.dim)
        if problem is not None:
            problem = problem.replace("the corpus", f"corpus {corpus.name!r}")
            raise InvalidInput(f"{where} {problem}; nothing was written")
    return n


def words_fit_in(conn: Connection, corpus: Corpus) -> Callable[[Record], bool]:
    """Whether a record's title and text fit in the ``tsvector`` of ``corpus``'s lexical index
    (asks the server; for :func:`validate`, which asks only of long texts).

    Example:
        >>> words_fit_in(conn, corpus)(Record("a", "a few words", None))  # doctest: +SKIP
        True
    """

    def fits(r: Record) -> bool:
        try:
            with conn.transaction():
                conn.execute(
                    "SELECT to_tsvector(%s::regconfig, %s)",
                    (corpus.lexical_config, f"{r.title or ''} {r.text}"),
                )
        except psycopg.errors.ProgramLimitExceeded:
            return False
        return True

    return fits


def _batches(records: Iterable[Record], size: int, stats: IngestStats) -> Iterator[list[Record]]:
    """``records`` in batches of ``size`` distinct ids; counts every record read in
    ``stats.seen`` and each repeat of an id read before in ``stats.repeated``.

    Example:
        >>> s = IngestStats()
        >>> rs = [Record(i, t, None) for i, t in (("a", "1"), ("b", "2"), ("a", "3"), ("c", "4"))]
        >>> [[r.text for r in b] for b in _batches(rs, 3, s)], s.seen, s.repeated
        ([['3', '2', '4']], 4, 1)
    """
    batch: dict[str, Record] = {}
    ids: set[str] = set()
    for r in records:
        stats.seen += 1
        if r.external_id in ids:
            stats.repeated += 1
        ids.add(r.external_id)
        batch[r.external_id] = r  # a repeated id within a batch: the last one wins
        if len(batch) >= size:
            yield list(batch.values())
            batch = {}
    if batch:
        yield list(batch.values())


def check_embedder(corpus: Corpus, embedder: Embedder | None) -> None:
    """Refuse to embed documents of ``corpus`` with a model other than its stored one.

    Example:
        >>> c = Corpus(1, "news", "corpus_1", "all-MiniLM-L6-v2", 384, "cosine", "embedding", None, None)
        >>> class E5:
        ...     name, dim = "multilingual-e5-small", 384
        >>> check_embedder(c, E5())
        Traceback (most recent call last):
        pglogic.errors.EmbeddingError: Corpus 'news' is embedded with 'all-MiniLM-L6-v2' (384-d), not 'multilingual-e5-small' (384-d): ingest with its own model
    """
    if embedder is None:
        return
    if embedder.dim != corpus.dim:
        raise EmbeddingError(
            f"Model {embedder.name!r} makes {embedder.dim}-d vectors but corpus "
            f"{corpus.name!r} stores {corpus.dim}-d vectors of {corpus.model!r}"
        )
    if embedder.name != corpus.model:
        raise EmbeddingError(
            f"Corpus {corpus.name!r} is embedded with {corpus.model!r} ({corpus.dim}-d), not "
            f"{embedder.name!r} ({embedder.dim}-d): ingest with its own model"
        )


def _other_embeddings(conn: Connection, corpus: Corpus) -> list[tuple[str, str, int]]:
    """The corpus's embedding columns besides ``corpus.column`` (e.g. during a model switch)."""
    rows = conn.execute(
        "SELECT column_name, model, dim FROM pglogic.embeddings"
        " WHERE corpus_id = %s AND column_name <> %s ORDER BY id",
        (corpus.id, corpus.column),
    )
    return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]


def _fill_other_columns(
    conn: Connection,
    corpus: Corpus,
    todo: list[_Todo],
    existing: dict[str, _Stored],
    embedders: dict[str, Embedder | None],
) -> None:
    """Give the batch's rows vectors in every other embedding column of the corpus.

    New rows, rows whose text changed and rows still NULL there are embedded with that column's
    model. A model that cannot be loaded here leaves NULL (changed rows are reset to NULL, never
    left stale); ``pglogic embedding backfill`` fills those, and a switch refuses until it has.
    """
    others = _other_embeddings(conn, corpus)
    if not others:
        return
    changed = {
        r.external_id
        for r, th, _, _ in todo
        if (old := existing.get(r.external_id)) is None or old[0] != th
    }
    ids = [r.external_id for r, _, _, _ in todo]
    for column, model, dim in others:
        col = sql.Identifier(column)
        if model not in embedders:
            try:
                emb: Embedder | None = get_embedder(model)
            except EmbeddingError:
                emb = None
            embedders[model] = emb if emb is not None and emb.dim == dim else None
        emb = embedders[model]
        if emb is None:
            conn.execute(
                sql.SQL("UPDATE {} SET {} = NULL WHERE external_id = ANY(%s)").format(
                    corpus.table, col
                ),
                ([i for i in ids if i in changed],),
            )
            continue
        missing = {
            row[0]
            for row in conn.execute(
                sql.SQL(
                    "SELECT external_id FROM {} WHERE external_id = ANY(%s) AND {} IS NULL"
                ).format(corpus.table, col),
                (ids,),
            )
        }
        need = [r for r, _, _, _ in todo if r.external_id in changed or r.external_id in missing]
        if not need:
            continue
        out = emb.embed([r.embed_text for r in need])
        if out.shape != (len(need), dim) or not np.isfinite(out).all():
            raise EmbeddingError(f"Model {emb.name!r} returned unusable vectors")
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL("UPDATE {} SET {} = %s WHERE external_id = %s").format(corpus.table, col),
                [(v, r.external_id) for r, v in zip(need, out, strict=True)],
            )


def _fill_other_passages(
    conn: Connection,
    corpus: Corpus,
    passages: _Passages,
    embedders: dict[str, Embedder | None],
) -> None:
    """Give the passages just written vectors in the corpus's other embedding columns (a model
    switch in progress), with the models :func:`_fill_other_columns` loaded; a model that
    cannot be loaded here leaves NULL for ``pglogic embedding backfill``."""
    table = corpus.passage_table
    if table is None or not passages:
        return
    ids = [external_id for external_id, _, _ in passages]
    for column, model, _dim in _other_embeddings(conn, corpus):
        emb = embedders.get(model)
        if emb is None:
            continue
        rows = conn.execute(
            sql.SQL(
                "SELECT p.id, substr({text}, p.char_start + 1, p.char_end - p.char_start)"
                " FROM {p} p JOIN {d} d ON d.id = p.doc_id"
                " WHERE d.external_id = ANY(%s) AND p.{col} IS NULL"
            ).format(text=embed_text_sql("d"), p=table, d=corpus.table, col=sql.Identifier(column)),
            (ids,),
        ).fetchall()
        if not rows:
            continue
        out = emb.embed([str(r[1]) for r in rows])
        if not np.isfinite(out).all():
            raise EmbeddingError(f"Model {emb.name!r} returned unusable vectors")
        set_passage_vectors(
            conn, corpus, column, [(int(r[0]), v) for r, v in zip(rows, out, strict=True)]
        )


def _copy_rows(
    conn: Connection,
    statement: sql.Composed,
    todo: list[_Todo],
    vectors: dict[str, np.ndarray],
) -> None:
    with conn.cursor() as cur, cur.copy(statement) as copy:
        copy.set_types(list(_TYPES))
        for r, th, rh, _ in todo:
            copy.write_row(
                (
                    r.external_id,
                    r.title,
                    r.text,
                    Jsonb(r.metadata),
                    th,
                    rh,
                    vectors.get(r.external_id),
                )
            )


@dataclass(frozen=True)
class _Statements:
    """The statements of an ingest into one corpus (:meth:`for_corpus`)."""

    lookup: sql.Composed  # the stored hashes of a batch's external ids
    copy_staging: sql.Composed  # COPY into the staging table
    copy_direct: sql.Composed  # COPY straight into the corpus table
    upsert: sql.Composed  # staging -> corpus table, RETURNING (xmax = 0): inserted or updated

    @classmethod
    def for_corpus(cls, corpus: Corpus) -> _Statements:
        """The statements for ``corpus``'s table and its current embedding column."""
        upsert = sql.SQL(
            "INSERT INTO {table} AS d (external_id, title, text, metadata, text_hash, row_hash,"
            " {col})"
            " SELECT external_id, title, text, metadata, text_hash, row_hash, embedding"
            " FROM pglogic_staging"
            " ON CONFLICT (external_id) DO UPDATE SET title = EXCLUDED.title, text = EXCLUDED.text,"
            " metadata = EXCLUDED.metadata, text_hash = EXCLUDED.text_hash,"
            " row_hash = EXCLUDED.row_hash, {col} = COALESCE(EXCLUDED.{col}, d.{col}),"
            # the proposed row's default, now(): Citus refuses now() itself in DO UPDATE SET
            " ingested_at = EXCLUDED.ingested_at"
            " WHERE d.row_hash IS DISTINCT FROM EXCLUDED.row_hash"
            " RETURNING (xmax = 0)"
        ).format(table=corpus.table, col=corpus.embedding)
        lookup = sql.SQL(
            "SELECT external_id, text_hash, row_hash, {col} IS NOT NULL FROM {table}"
            " WHERE external_id = ANY(%s)"
        ).format(table=corpus.table, col=corpus.embedding)
        copy_staging = sql.SQL("COPY pglogic_staging ({}) FROM STDIN (FORMAT BINARY)").format(
            sql.SQL(", ").join(map(sql.Identifier, _COLUMNS))
        )
        copy_direct = sql.SQL("COPY {} ({}, {}) FROM STDIN (FORMAT BINARY)").format(
            corpus.table, sql.SQL(", ").join(map(sql.Identifier, _COLUMNS[:-1])), corpus.embedding
        )
        return cls(lookup, copy_staging, copy_direct, upsert)


def _create_staging(conn: Connection) -> None:
    """The session's temporary staging table (committed, so a batch's rollback keeps it)."""
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS pglogic_staging (external_id text, title text,"
        " text text, metadata jsonb, text_hash bytea, row_hash bytea, embedding vector)"
    )
    conn.commit()


def _stored(conn: Connection, stmts: _Statements, batch: list[Record]) -> dict[str, _Stored]:
    """The stored hashes of the batch's external ids (those already in the corpus)."""
    return {
        row[0]: (bytes(row[1]), bytes(row[2]), bool(row[3]))
        for row in conn.execute(stmts.lookup, ([r.external_id for r in batch],))
    }


def _to_write(batch: list[Record], existing: dict[str, _Stored], stats: IngestStats) -> list[_Todo]:
    """The batch's new and changed rows (counting the unchanged ones in ``stats``)."""
    todo: list[_Todo] = []
    for r in batch:
        th, rh = text_hash(r), row_hash(r)
        old = existing.get(r.external_id)
        if old is not None and old[1] == rh and old[2]:
            stats.unchanged += 1
            continue
        needs_vector = old is None or old[0] != th or not old[2]
        todo.append((r, th, rh, needs_vector))
    return todo


#: A document's passages: (external id, spans, one vector per span).
_Passages = list[tuple[str, list[Span], np.ndarray]]


def _split(
    corpus: Corpus, tokenizer: Tokenizer | None, records: list[Record], stats: IngestStats
) -> list[list[Span]]:
    """Each record's passages (one span of the whole text without passages), counting in
    ``stats`` the texts the model would cut and the passages longer than its window."""
    window = tokenizer.window if tokenizer is not None else None
    out: list[list[Span]] = []
    for r in records:
        text = r.embed_text
        if corpus.passage_tokens is None or tokenizer is None:
            if window is not None and tokenizer is not None and tokenizer.count(text) > window:
                stats.truncated += 1
            out.append([Span(0, len(text), 0)])
            continue
        spans = split(text, tokenizer.offsets(text), corpus.passage_tokens, corpus.passage_overlap)
        if window is not None:
            stats.over_window += sum(s.tokens > window for s in spans)
        out.append(spans)
    return out


def _vectors(
    corpus: Corpus,
    embedder: Embedder | None,
    todo: list[_Todo],
    stats: IngestStats,
    tokenizer: Tokenizer | None = None,
) -> tuple[dict[str, np.ndarray], _Passages]:
    """The new vectors of the rows that need one (embedded, or given with the record) and, in a
    corpus with passages, their passages' spans and vectors (a short document is one passage
    whose vector is the document's; a given vector is one passage of the whole text)."""
    vectors: dict[str, np.ndarray] = {}
    passages: _Passages = []
    to_embed = [r for r, _, _, need in todo if need and r.vector is None]
    if to_embed:
        if embedder is None:
            raise EmbeddingError(
                f"{to_embed[0].source or to_embed[0].external_id} has no vector and no "
                "embedding model was given"
            )
        spans = _split(corpus, tokenizer, to_embed, stats)
        # A split document's first passage is what the model reads of its whole text when the
        # passages fill the window (cosine >= 0.998 on long Reuters stories,
        # bench/perf/results/passages_scale.md): its vector is the document's, embedded once.
        window = tokenizer.window if tokenizer is not None else None
        reuse = window is not None and (corpus.passage_tokens or 0) >= window
        whole = [r for r, ss in zip(to_embed, spans, strict=True) if len(ss) == 1 or not reuse]
        pieces = [r.embed_text[p.start : p.end] for r, ss in zip(to_embed, spans, strict=True)
                  if len(ss) > 1 for p in ss]  # fmt: skip
        out = embedder.embed([r.embed_text for r in whole] + pieces)
        if out.shape != (len(whole) + len(pieces), corpus.dim) or not np.isfinite(out).all():
            raise EmbeddingError(f"Model {embedder.name!r} returned unusable vectors")
        own = dict(zip([r.external_id for r in whole], out, strict=False))
        at = len(whole)
        for r, ss in zip(to_embed, spans, strict=True):
            if len(ss) > 1:
                pvecs = out[at : at + len(ss)]
                at += len(ss)
                vectors[r.external_id] = own.get(r.external_id, pvecs[0])
            else:
                pvecs = own[r.external_id][None, :]
                vectors[r.external_id] = own[r.external_id]
            if corpus.passage_tokens is not None:
                passages.append((r.external_id, ss, pvecs))
        stats.embedded += len(to_embed)
    for r, _, _, need in todo:
        if need and r.vector is not None:
            problem = vector_problem(r.vector, corpus.dim)  # (ingest_path validated them all)
            if problem is not None:
                raise InvalidInput(f"{r.source or repr(r.external_id)} {problem}")
            vectors[r.external_id] = np.asarray(r.vector, dtype=np.float32)
            if corpus.passage_tokens is not None:
                span = [Span(0, len(r.embed_text), 0)]
                passages.append((r.external_id, span, vectors[r.external_id][None, :]))
    return vectors, passages


def _load(
    conn: Connection,
    stmts: _Statements,
    todo: list[_Todo],
    vectors: dict[str, np.ndarray],
    only_new: bool,
) -> list[tuple[bool]]:
    """Write the rows: COPY straight into the corpus table when every id is new, else (or when
    a concurrent insert got there first) COPY into staging and upsert. One ``(inserted,)`` per
    row written."""
    if only_new:
        try:
            with conn.transaction():  # a savepoint: a concurrent insert falls back below
                _copy_rows(conn, stmts.copy_direct, todo, vectors)
            return [(True,)] * len(todo)
        except psycopg.errors.UniqueViolation:
            pass
    conn.execute("TRUNCATE pglogic_staging")
    _copy_rows(conn, stmts.copy_staging, todo, vectors)
    return conn.execute(stmts.upsert).fetchall()


def _write_batch(
    conn: Connection,
    corpus: Corpus,
    stmts: _Statements,
    todo: list[_Todo],
    existing: dict[str, _Stored],
    vectors: dict[str, np.ndarray],
    other_embedders: dict[str, Embedder | None],
    stats: IngestStats,
    started: float,
    passages: _Passages | None = None,
) -> None:
    """Load the rows, fill the other embedding columns, commit (one transaction per batch: what
    is committed survives a crash) and count; rolls back on any error. ``started`` is when the
    load began (filling the other columns counts as embedding, not as load)."""
    try:
        results = _load(conn, stmts, todo, vectors, only_new=not existing)
        written = write_passages(conn, corpus, passages) if passages else 0
        t2 = time.perf_counter()
        _fill_other_columns(conn, corpus, todo, existing, other_embedders)
        _fill_other_passages(conn, corpus, passages or [], other_embedders)
        fill_seconds = time.perf_counter() - t2
        stats.embed_seconds += fill_seconds
        started += fill_seconds
        conn.commit()
    except BaseException:
        if not conn.broken:  # a lost connection has nothing to roll back: keep its own error
            conn.rollback()
        raise
    stats.passages += written
    for (was_insert,) in results:
        if was_insert:
            stats.inserted += 1
        else:
            stats.updated += 1
    stats.load_seconds += time.perf_counter() - started


def ingest_records(
    conn: Connection,
    corpus: Corpus,
    records: Iterable[Record],
    *,
    embedder: Embedder | None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_batch: Callable[[IngestStats, int], None] | None = None,
) -> IngestStats:
    """Load ``records`` into ``corpus`` batch by batch, committing after each batch.

    ``on_batch(stats, n)`` is called after each commit with ``n``, the number of records the
    batch read. When the corpus has more than one embedding column (a model switch in progress),
    the other columns are filled too, by their own models (see :func:`_fill_other_columns`).

    Example:
        >>> ingest_records(conn, corpus, [Record("d1", "hello", None)], embedder=emb).inserted  # doctest: +SKIP
        1
    """
    check_embedder(corpus, embedder)
    stats = IngestStats()
    tokenizer = tokenizer_of(embedder) if embedder is not None else None
    other_embedders: dict[str, Embedder | None] = {}
    _create_staging(conn)
    stmts = _Statements.for_corpus(corpus)
    read = 0  # records read up to the last batch (a repeated id makes a batch smaller)
    for batch in _batches(records, batch_size, stats):
        existing = _stored(conn, stmts, batch)
        todo = _to_write(batch, existing, stats)
        if todo:
            t0 = time.perf_counter()
            vectors, passages = _vectors(corpus, embedder, todo, stats, tokenizer)
            t1 = time.perf_counter()
            stats.embed_seconds += t1 - t0
            _write_batch(
                conn, corpus, stmts, todo, existing, vectors, other_embedders, stats,
                started=t1, passages=passages,
            )  # fmt: skip
        else:
            conn.rollback()
        stats.batches += 1
        if on_batch:
            on_batch(stats, stats.seen - read)
        read = stats.seen
    if stats.truncated:  # never silently: the model read only the first window of these
        log.warning(
            "%d documents of corpus %r are longer than the model's window (%s tokens): their "
            "vectors cover only the first part; a corpus with passages reads all of it",
            stats.truncated, corpus.name, tokenizer.window if tokenizer else "?",
            extra={SAID_BY_CALLER: True},
        )  # fmt: skip
    if stats.over_window:
        log.warning(
            "%d passages of corpus %r are longer than the model's window: the model cut them",
            stats.over_window, corpus.name, extra={SAID_BY_CALLER: True},
        )  # fmt: skip
    if stats.repeated:
        log.warning(
            "%d record(s) repeat the id of an earlier record: the last record of each id is kept",
            stats.repeated, extra={SAID_BY_CALLER: True},
        )  # fmt: skip
    return stats


def ingest_checked(
    conn: Connection,
    corpus: Corpus,
    records: Callable[[], Iterable[Record]],
    *,
    embedder: Embedder | None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_start: Callable[[int], None] | None = None,
    on_batch: Callable[[IngestStats, int], None] | None = None,
    drop_lexical: str | None = None,
) -> IngestStats:
    """Validate every record of ``records()`` first (:func:`validate`: nothing is written if
    any is bad), then ingest them (``records()`` again: :func:`ingest_records`). Files
    (:func:`ingest_path`) and an application's records (:meth:`pglogic.PgLogic.add_documents`)
    both go through it. ``drop_lexical`` is how the caller drops the lexical index (for a text
    with too many words; default: the command).

    Example:
        >>> ingest_checked(conn, corpus, lambda: [Record("d1", "hello", None)], embedder=emb).inserted  # doctest: +SKIP
        1
    """
    if batch_size < 1:
        raise InvalidInput(f"Invalid batch size {batch_size}: must be at least 1")
    fit = words_fit_in(conn, corpus) if corpus.lexical_config else None
    total = validate(records(), corpus, words_fit=fit, drop_lexical=drop_lexical)
    if on_start:
        on_start(total)
    return ingest_records(
        conn, corpus, records(), embedder=embedder, batch_size=batch_size, on_batch=on_batch
    )


def ingest_path(
    conn: Connection,
    corpus: Corpus,
    path: Path,
    *,
    embedder: Embedder | None,
    fmt: str = "auto",
    fields: FieldMap | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    limit: int | None = None,
    on_start: Callable[[int], None] | None = None,
    on_batch: Callable[[IngestStats, int], None] | None = None,
) -> IngestStats:
    """Validate the whole file first (nothing is written if any record is bad), then ingest it
    (:func:`ingest_checked`).

    ``on_start(total)`` is called once the records are counted.

    Example:
        >>> ingest_path(conn, corpus, Path("docs/"), embedder=emb).seen  # doctest: +SKIP
        12
    """

    def records() -> Iterator[Record]:
        for i, r in enumerate(read_records(path, fmt, fields)):
            if limit is not None and i >= limit:
                return
            yield r

    if limit is not None and limit < 1:
        raise InvalidInput(f"Invalid limit {limit}: must be at least 1")
    return ingest_checked(
        conn, corpus, records, embedder=embedder, batch_size=batch_size, on_start=on_start,
        on_batch=on_batch,
    )  # fmt: skip
