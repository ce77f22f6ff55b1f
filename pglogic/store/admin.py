"""Embedding administration: switch a corpus to another embedding model without downtime.

A corpus table can hold several embedding columns (``embedding``, ``embedding_2``, ...), one per
model, registered in ``pglogic.embeddings``; exactly one is *active* and serves searches. The
zero-downtime switch is: :func:`add_embedding` (a new nullable column, instant),
:func:`backfill_embedding` (resumable, one commit per batch), :func:`build_embedding_index`
(HNSW, ``CREATE INDEX CONCURRENTLY``), :func:`switch_embedding` (one transaction flips
``is_active``; refused while the new column has NULLs or no valid index) and, once every client
has picked up the switch, :func:`drop_embedding` of the old model.

A corpus with passages (``Corpus.passage_table``) gets the same column in its passage table:
each step handles both tables (the backfill embeds each passage's stored slice of the text, as
split when the corpus was made; the index step builds both HNSW indexes; the switch waits for
both to be complete).

Every function takes a psycopg connection. Outside a transaction each step commits on its own;
inside one (e.g. an Alembic migration) it runs in a savepoint and the caller commits.
:func:`backfill_embedding` commits per batch and the concurrent index build needs autocommit, so
call those two outside a transaction.

Example:
    >>> with connect(dsn) as conn:  # doctest: +SKIP
    ...     new = "sentence-transformers/all-MiniLM-L6-v2"
    ...     add_embedding(conn, "news", model=new, dim=384)
    ...     backfill_embedding(conn, "news", model=new, embedder=get_embedder(new))
    ...     build_embedding_index(conn, "news", model=new)
    ...     switch_embedding(conn, "news", model=new)
    ...     drop_embedding(conn, "news", model="all-MiniLM-L6-v2")
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.pq import TransactionStatus

from pglogic.embed.base import Embedder
from pglogic.embed.passages import tokenizer_of
from pglogic.engine.source import SCHEMA, Corpus
from pglogic.errors import EmbeddingError, InvalidInput
from pglogic.store import citus, indexes
from pglogic.store.corpus import DEFAULT_EF_CONSTRUCTION, DEFAULT_M, get_corpus
from pglogic.store.db import Connection
from pglogic.store.indexes import AdminError as AdminError
from pglogic.store.indexes import IndexProgress, Maintenance, Progress
from pglogic.store.passages import (
    build_passage_index,
    embed_text_sql,
    passage_index_name,
    passage_table_name,
)
from pglogic.store.readers import Record

DEFAULT_LOCK_TIMEOUT = "5s"


@dataclass(frozen=True)
class EmbeddingInfo:
    """One embedding column of a corpus and how complete it is.

    A corpus with passages also counts its passages (``passages``, None without) and those with
    a vector in this column, and names the passage table's HNSW index of the column.

    Example:
        >>> e = EmbeddingInfo("news", "m", 384, "embedding_2", False, None, None, False, 10, 7)
        >>> e.missing, e.ready, e.missing_passages
        (3, False, 0)
        >>> p = EmbeddingInfo("news", "m", 384, "embedding_2", False, "i", None, True, 10, 10,
        ...                   passages=25, passages_embedded=20)
        >>> p.missing, p.missing_passages, p.ready
        (0, 5, False)
    """

    corpus: str
    model: str
    dim: int
    column: str
    active: bool
    index_name: str | None
    index_params: dict[str, Any] | None
    index_valid: bool
    documents: int
    embedded: int
    #: passages of the corpus (None: one vector per document)
    passages: int | None = None
    #: passages with a vector in this column
    passages_embedded: int = 0
    #: the passage table's HNSW index of this column, when it exists
    passage_index: str | None = None
    passage_index_valid: bool = False

    @property
    def missing(self) -> int:
        """Documents without a vector in this column."""
        return self.documents - self.embedded

    @property
    def missing_passages(self) -> int:
        """Passages without a vector in this column (0 without passages)."""
        return 0 if self.passages is None else self.passages - self.passages_embedded

    @property
    def ready(self) -> bool:
        """True when every document (and passage) has a vector and the HNSW index (of the
        passages too) is valid: the switch to it would be accepted."""
        if self.passages is not None and (self.missing_passages or not self.passage_index_valid):
            return False
        return self.missing == 0 and self.index_valid


@dataclass
class BackfillStats:
    """What :func:`backfill_embedding` found and wrote, updated as it goes (an interrupted
    backfill's counts are what was committed).

    Example:
        >>> s = BackfillStats(documents=3, passages=9, reused=2)
        >>> s.vectors
        12
    """

    #: document vectors written
    documents: int = 0
    #: passage vectors written (embedded, or copied from their one-passage document)
    passages: int = 0
    #: of those, passage vectors copied from their document (a passage of the whole text)
    reused: int = 0
    #: NULLs in the column when the backfill started (documents, passages)
    missing_documents: int = 0
    missing_passages: int = 0
    #: passages longer than the model's window (it embedded only their start)
    over_window: int = 0
    #: word pieces the model reads (None: not known, passages not checked)
    window: int | None = None
    #: the notes given (also passed to ``note``)
    notes: list[str] = field(default_factory=list)

    @property
    def vectors(self) -> int:
        """Vectors written, documents and passages."""
        return self.documents + self.passages


@dataclass(frozen=True)
class _Emb:
    id: int
    model: str
    dim: int
    column: str
    active: bool
    index_name: str | None
    index_params: dict[str, Any] | None


def index_name_for(corpus: Corpus, column: str) -> str:
    """Name of the HNSW index of ``column`` (the same scheme as :func:`pglogic.store.corpus.build_index`).

    Example:
        >>> c = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> index_name_for(c, "embedding_2")
        'corpus_1_embedding_2_hnsw'
    """
    return indexes.hnsw_name(corpus, column)


def _rows(conn: Connection, c: Corpus, *, lock: bool = False) -> list[_Emb]:
    query = sql.SQL(
        "SELECT id, model, dim, column_name, is_active, index_name, index_params"
        " FROM pglogic.embeddings WHERE corpus_id = %s ORDER BY id{}"
    ).format(sql.SQL(" FOR UPDATE") if lock else sql.SQL(""))
    return [_Emb(*r) for r in conn.execute(query, (c.id,))]


def _find(rows: list[_Emb], c: Corpus, model: str | None) -> _Emb:
    for r in rows:
        if (model is None and r.active) or r.model == model:
            return r
    have = ", ".join(repr(r.model) for r in rows)
    raise AdminError(f"Corpus {c.name!r} has no embedding for model {model!r}; it has: {have}")


def _index_valid(conn: Connection, index_name: str | None) -> bool | None:
    """None when the index does not exist, else whether it is valid (usable by queries)."""
    if index_name is None:
        return None
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
        (f"{SCHEMA}.{index_name}",),
    ).fetchone()
    return None if row is None else bool(row[0])


def _set_lock_timeout(conn: Connection, lock_timeout: str | None) -> None:
    if lock_timeout is not None:
        conn.execute("SELECT set_config('lock_timeout', %s, true)", (lock_timeout,))


def _check_client(conn: Connection) -> None:
    """Have the server end this transaction within a second if the client dies (PG 14+, Linux)."""
    try:
        with conn.transaction():
            conn.execute(
                "SELECT set_config('client_connection_check_interval', %s, true)",
                (indexes.CLIENT_CHECK_INTERVAL,),
            )
    except (pgerrors.InvalidParameterValue, pgerrors.UndefinedObject):
        pass  # not on this platform: the transaction still never commits without its client


def _lock_error(c: Corpus, lock_timeout: str | None) -> AdminError:
    return AdminError(
        f"Could not lock the table of corpus {c.name!r} within {lock_timeout} (long queries or "
        "open transactions hold it); retry, or give a longer --lock-timeout"
    )


def _q(text: str) -> str:
    return shlex.quote(text)


def list_embeddings(conn: Connection, name: str) -> list[EmbeddingInfo]:
    """Return every embedding column of corpus ``name`` (creation order) with its fill state.

    Example:
        >>> [(e.model, e.column, e.active) for e in list_embeddings(conn, "news")]  # doctest: +SKIP
        [('all-MiniLM-L6-v2', 'embedding', True)]
    """
    with conn.transaction():
        c = get_corpus(conn, name)
        rows = _rows(conn, c)
        counts = conn.execute(
            sql.SQL("SELECT count(*), {} FROM {}").format(
                sql.SQL(", ").join(
                    sql.SQL("count({})").format(sql.Identifier(r.column)) for r in rows
                ),
                c.table,
            )
        ).fetchone()
        assert counts is not None
        valid = [_index_valid(conn, r.index_name) for r in rows]
        passages: list[Any] = [None] * (len(rows) + 1)
        pidx: list[tuple[str | None, bool]] = [(None, False)] * len(rows)
        if c.passage_table is not None:
            prow = conn.execute(
                sql.SQL("SELECT count(*), {} FROM {}").format(
                    sql.SQL(", ").join(
                        sql.SQL("count({})").format(sql.Identifier(r.column)) for r in rows
                    ),
                    c.passage_table,
                )
            ).fetchone()
            assert prow is not None
            passages = [int(n) for n in prow]
            for i, r in enumerate(rows):
                name = passage_index_name(c, r.column)
                v = _index_valid(conn, name)
                pidx[i] = (None, False) if v is None else (name, v)
    return [
        EmbeddingInfo(
            c.name,
            r.model,
            r.dim,
            r.column,
            r.active,
            r.index_name,
            r.index_params,
            bool(v),
            int(counts[0]),
            int(n),
            passages[0],
            passages[i + 1] or 0,
            pidx[i][0],
            pidx[i][1],
        )
        for i, (r, n, v) in enumerate(zip(rows, counts[1:], valid, strict=True))
    ]


def get_embedding(conn: Connection, name: str, model: str | None = None) -> EmbeddingInfo:
    """Return the embedding of corpus ``name`` made by ``model`` (None: the active one).

    Example:
        >>> get_embedding(conn, "news").column  # doctest: +SKIP
        'embedding'
    """
    infos = list_embeddings(conn, name)
    for e in infos:
        if (model is None and e.active) or e.model == model:
            return e
    have = ", ".join(repr(e.model) for e in infos)
    raise AdminError(f"Corpus {name!r} has no embedding for model {model!r}; it has: {have}")


def add_embedding(
    conn: Connection,
    name: str,
    *,
    model: str,
    dim: int,
    lock_timeout: str | None = DEFAULT_LOCK_TIMEOUT,
) -> EmbeddingInfo:
    """Add an (inactive, empty) embedding column for ``model`` to corpus ``name``.

    The column is ``embedding_<n>`` (the smallest free ``n >= 2``); adding a nullable column is
    instant. A corpus with passages gets the same column in its passage table, in the same
    transaction. ``lock_timeout`` bounds the wait for each table's lock so that a long query
    cannot make searches queue behind this statement. The caller checks that ``model`` makes
    ``dim``-dimensional vectors.

    Example:
        >>> add_embedding(conn, "news", model="sentence-transformers/all-MiniLM-L6-v2", dim=384).column  # doctest: +SKIP
        'embedding_2'
    """
    if not model.strip():
        raise InvalidInput("Invalid model name: empty")
    if not 1 <= dim <= 16000:
        raise InvalidInput(f"Invalid dimension {dim}: must be between 1 and 16000")
    c = None
    try:
        with conn.transaction():
            c = get_corpus(conn, name)
            rows = _rows(conn, c, lock=True)
            for r in rows:
                if r.model == model:
                    raise AdminError(
                        f"Corpus {name!r} already has an embedding for model {model!r} "
                        f"(column {r.column})"
                    )
            tables = [c.table_name]
            if c.passage_table is not None:
                tables.append(passage_table_name(c))
            taken = {r.column for r in rows} | {
                str(a[0])
                for a in conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = ANY(%s::regclass[])"
                    " AND attnum > 0",
                    ([f"{SCHEMA}.{t}" for t in tables],),
                )
            }
            n = 2
            while f"embedding_{n}" in taken:
                n += 1
            column = f"embedding_{n}"
            _set_lock_timeout(conn, lock_timeout)
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN {} vector({})").format(
                    c.table, sql.Identifier(column), sql.Literal(dim)
                )
            )
            distributed = citus.distribution(conn, c) is not None
            if not distributed:  # Citus refuses it: set on each shard below
                conn.execute(
                    sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STORAGE MAIN").format(
                        c.table, sql.Identifier(column)
                    )
                )
            if c.passage_table is not None:
                conn.execute(
                    sql.SQL(
                        "ALTER TABLE {t} ADD COLUMN {c} vector({d}), ALTER COLUMN {c} SET STORAGE MAIN"
                    ).format(t=c.passage_table, c=sql.Identifier(column), d=sql.Literal(dim))
                )
            conn.execute(
                "INSERT INTO pglogic.embeddings (corpus_id, model, dim, distance, column_name,"
                " is_active) VALUES (%s, %s, %s, 'cosine', %s, false)",
                (c.id, model, dim, column),
            )
    except pgerrors.LockNotAvailable as exc:
        assert c is not None
        raise _lock_error(c, lock_timeout) from exc
    if distributed:
        citus.set_storage_main(conn, c, column)
    return get_embedding(conn, name, model)


def window_note(corpus: Corpus, embedder: Embedder) -> str | None:
    """A warning when ``embedder`` reads fewer word pieces than the corpus's passages hold (it
    would cut the longer passages), else None (also without passages or a known window).

    Example:
        >>> class Short:
        ...     name, dim, window = "short", 3, 32
        ...     def token_offsets(self, text): return []
        >>> c = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None,
        ...            passage_tokens=64)
        >>> print(window_note(c, Short()))
        Model 'short' reads 32 word pieces, fewer than the 64 per passage of corpus 'news': it would embed only the start of the longer passages (the backfill counts them)
    """
    window = tokenizer_of(embedder).window
    if corpus.passage_tokens is None or window is None or window >= corpus.passage_tokens:
        return None
    return (
        f"Model {embedder.name!r} reads {window} word pieces, fewer than the "
        f"{corpus.passage_tokens} per passage of corpus {corpus.name!r}: it would embed only "
        "the start of the longer passages (the backfill counts them)"
    )


def _over_window_note(name: str, model: str, stats: BackfillStats) -> str:
    n = stats.over_window
    return (
        f"{n:,} passage{'s' if n != 1 else ''} of corpus {name!r} "
        f"{'are' if n != 1 else 'is'} longer than the {stats.window} word pieces {model!r} "
        "reads: it embedded only the start of each. To search all of their text with this "
        f"model, make a corpus with --passage-tokens {stats.window} or fewer and ingest the "
        "documents into it"
    )


def backfill_embedding(
    conn: Connection,
    name: str,
    *,
    model: str,
    embedder: Embedder,
    batch_size: int = 256,
    on_start: Callable[[int], None] | None = None,
    on_batch: Callable[[int, int], None] | None = None,
    note: Callable[[str], None] | None = None,
    stats: BackfillStats | None = None,
) -> int:
    """Embed with ``embedder`` every document (then every passage) of ``name`` whose ``model``
    column is NULL.

    Batches go in id order and each batch is committed, so an interrupted backfill resumes where
    it stopped (only NULL rows are read). A row whose text changed meanwhile is left to the
    ingest that changed it. When a pass filled rows, one more pass picks up rows ingested behind
    it. ``on_start(total_missing)`` is called first (documents and passages without a vector),
    ``on_batch(filled_so_far, n)`` after each commit. Returns the number of vectors written
    (documents and passages; ``stats`` has each).

    A corpus with passages keeps the split made when it was created: passage ``ord`` of a
    document is embedded from its stored slice of the text; a passage of the whole text takes
    its document's new vector. Passages longer than the model's window (counted with its own
    tokenizer) are cut by the model: they are counted in ``stats.over_window`` and reported
    through ``note``, as is a window smaller than the corpus's passage size before any work.

    Example:
        >>> backfill_embedding(conn, "news", model=m, embedder=get_embedder(m), batch_size=512)  # doctest: +SKIP
        10789
    """
    if batch_size < 1:
        raise InvalidInput(f"Invalid batch size {batch_size}: must be at least 1")
    if conn.info.transaction_status != TransactionStatus.IDLE and not conn.autocommit:
        raise AdminError(
            "backfill_embedding commits per batch: call it with no transaction open "
            "(commit or roll back first)"
        )
    stats = stats if stats is not None else BackfillStats()
    with conn.transaction():
        c = get_corpus(conn, name)
        e = _find(_rows(conn, c), c, model)
        col = sql.Identifier(e.column)
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE {} IS NULL").format(c.table, col)
        ).fetchone()
        stats.missing_documents = int(row[0]) if row else 0
        if c.passage_table is not None:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE {} IS NULL").format(c.passage_table, col)
            ).fetchone()
            stats.missing_passages = int(row[0]) if row else 0
    if embedder.dim != e.dim:
        raise EmbeddingError(
            f"Model {embedder.name!r} makes {embedder.dim}-d vectors but the {model!r} column of "
            f"corpus {name!r} stores {e.dim}-d vectors"
        )
    if embedder.name != model:
        raise EmbeddingError(f"Embedder {embedder.name!r} given to backfill model {model!r}")

    def say(text: str) -> None:
        stats.notes.append(text)
        if note:
            note(text)

    if on_start:
        on_start(stats.missing_documents + stats.missing_passages)
    early = window_note(c, embedder) if stats.missing_passages else None
    if early:
        say(early)
    select = sql.SQL(
        "SELECT id, external_id, title, text, text_hash FROM {t} WHERE id > %s AND {c} IS NULL"
        " ORDER BY id LIMIT %s"
    ).format(t=c.table, c=col)
    update = sql.SQL(
        "UPDATE {t} SET {c} = %s WHERE id = %s AND text_hash = %s AND {c} IS NULL"
    ).format(t=c.table, c=col)

    def documents(rows: list[Any]) -> int:
        texts = [Record(str(r[1]), str(r[3]), r[2]).embed_text for r in rows]
        vectors = _embed(embedder, texts, e.dim)
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(update, [(v, r[0], r[4]) for r, v in zip(rows, vectors, strict=True)])
            n = max(cur.rowcount, 0)
        stats.documents += n
        return n

    _batched(conn, select, batch_size, documents, stats, on_batch)
    if c.passage_table is not None:
        _backfill_passages(conn, c, col, e.dim, embedder, batch_size, stats, on_batch)
        if stats.over_window:
            say(_over_window_note(name, model, stats))
    return stats.vectors


def _embed(embedder: Embedder, texts: list[str], dim: int) -> np.ndarray:
    vectors = embedder.embed(texts)
    if vectors.shape != (len(texts), dim) or not np.isfinite(vectors).all():
        raise EmbeddingError(f"Model {embedder.name!r} returned unusable vectors")
    return vectors


def _batched(
    conn: Connection,
    select: sql.Composed,
    batch_size: int,
    write: Callable[[list[Any]], int],
    stats: BackfillStats,
    on_batch: Callable[[int, int], None] | None,
) -> None:
    """Read NULL rows by id (``select`` takes the last id and the batch size; the id is the
    first column), ``write`` each batch (it commits and returns the rows filled), pass again
    while the previous pass filled rows (rows committed behind it)."""
    pass_filled = 0
    last = 0
    while True:
        with conn.transaction():
            rows = conn.execute(select, (last, batch_size)).fetchall()
        if not rows:
            if last == 0 or pass_filled == 0:
                return
            last = pass_filled = 0  # another pass for rows that arrived behind this one
            continue
        pass_filled += write(rows)
        last = int(rows[-1][0])
        if on_batch:
            on_batch(stats.vectors, len(rows))


def _backfill_passages(
    conn: Connection,
    c: Corpus,
    col: sql.Identifier,
    dim: int,
    embedder: Embedder,
    batch_size: int,
    stats: BackfillStats,
    on_batch: Callable[[int, int], None] | None,
) -> None:
    """The passages' part of :func:`backfill_embedding`: each passage is its stored slice of
    the document's text (ingest replaces a changed document's passages, new ids, so an UPDATE
    by id never writes a stale vector); a passage of the whole text copies the document's new
    vector."""
    table = c.passage_table
    assert table is not None
    text = embed_text_sql("d")
    select = sql.SQL(
        "SELECT p.id, substr({text}, p.char_start + 1, p.char_end - p.char_start),"
        " p.char_start = 0 AND p.char_end = length({text}) AND d.{c} IS NOT NULL"
        " FROM {p} p JOIN {d} d ON d.id = p.doc_id"
        " WHERE p.id > %s AND p.{c} IS NULL ORDER BY p.id LIMIT %s"
    ).format(text=text, c=col, p=table, d=c.table)
    copy = sql.SQL(
        "UPDATE {p} p SET {c} = d.{c} FROM {d} d WHERE p.id = ANY(%s) AND d.id = p.doc_id"
        " AND p.{c} IS NULL AND d.{c} IS NOT NULL"
        " AND p.char_start = 0 AND p.char_end = length({text})"
    ).format(p=table, c=col, d=c.table, text=text)
    update = sql.SQL("UPDATE {p} SET {c} = %s WHERE id = %s AND {c} IS NULL").format(p=table, c=col)
    tok = tokenizer_of(embedder)
    stats.window = tok.window

    def passages(rows: list[Any]) -> int:
        if tok.window is not None:
            stats.over_window += sum(tok.count(str(r[1])) > tok.window for r in rows)
        whole = [int(r[0]) for r in rows if r[2]]
        rest = [r for r in rows if not r[2]]
        vectors = _embed(embedder, [str(r[1]) for r in rest], dim) if rest else None
        with conn.transaction(), conn.cursor() as cur:
            reused = 0
            if whole:
                cur.execute(copy, (whole,))
                reused = max(cur.rowcount, 0)
            n = 0
            if vectors is not None:
                cur.executemany(update, [(v, r[0]) for r, v in zip(rest, vectors, strict=True)])
                n = max(cur.rowcount, 0)
        stats.reused += reused
        stats.passages += reused + n
        return reused + n

    _batched(conn, select, batch_size, passages, stats, on_batch)


def build_embedding_index(
    conn: Connection,
    name: str,
    *,
    model: str | None = None,
    m: int = DEFAULT_M,
    ef_construction: int = DEFAULT_EF_CONSTRUCTION,
    concurrently: bool = True,
    maintenance_work_mem: str = "1GB",
    progress: Callable[[IndexProgress], None] | None = None,
    dsn: str | None = None,
    note: Callable[[str], None] | None = None,
) -> float:
    """Build (or rebuild) the HNSW cosine index of ``model``'s column (None: the active one).

    With ``concurrently`` (default) searches and ingests go on meanwhile: the index is built
    with ``CREATE INDEX CONCURRENTLY`` (a rebuild under ``<name>_new``, then swapped in under the
    same name in one short transaction, see :mod:`pglogic.store.indexes`), after repairing what
    an interrupted index command left on the corpus (reported through ``note``). It needs a
    connection outside a transaction. ``concurrently=False`` builds in the caller's
    transaction (e.g. a migration's): writes wait for the build, searches wait only for the
    final swap. With ``dsn`` and ``progress``, a second connection reports progress. A corpus
    with passages gets the HNSW index of the column in its passage table too (built the same
    way, after the documents'). Returns the build time in seconds.

    Example:
        >>> build_embedding_index(conn, "news", model="sentence-transformers/all-MiniLM-L6-v2")  # doctest: +SKIP
        2.7
    """
    indexes.check_hnsw(m, ef_construction)
    with conn.transaction():
        c = get_corpus(conn, name)
        e = _find(_rows(conn, c), c, model)
    started = time.perf_counter()
    with Progress(dsn, conn, progress):
        if not concurrently:
            with conn.transaction():  # both tables' indexes or neither
                indexes.build_hnsw_in_transaction(
                    conn,
                    c,
                    emb_id=e.id,
                    column=e.column,
                    m=m,
                    ef_construction=ef_construction,
                    maintenance_work_mem=maintenance_work_mem,
                )
                if c.passage_table is not None:
                    _build_passage_index_in_transaction(
                        conn, c, e.column, m, ef_construction, maintenance_work_mem
                    )
                conn.execute(sql.SQL("ANALYZE {}").format(c.table))
        else:
            with Maintenance(conn, c, note=note, maintenance_work_mem=maintenance_work_mem):
                indexes.repair(conn, c, note=note)
                e = _find(_rows(conn, c), c, model)  # as of the lock
                indexes.build_any_hnsw(  # a Citus distributed table builds in a transaction
                    conn,
                    c,
                    emb_id=e.id,
                    column=e.column,
                    m=m,
                    ef_construction=ef_construction,
                    maintenance_work_mem=maintenance_work_mem,
                )
                if c.passage_table is not None:
                    build_passage_index(
                        conn, c, column=e.column, m=m, ef_construction=ef_construction
                    )
                conn.execute(sql.SQL("ANALYZE {}").format(c.table))
    return time.perf_counter() - started


def _build_passage_index_in_transaction(
    conn: Connection, c: Corpus, column: str, m: int, ef_construction: int, work_mem: str
) -> None:
    """The passage table's HNSW index of ``column``, built in the caller's transaction (a
    rebuild under ``<name>_new``, then put in the old one's place)."""
    table = c.passage_table
    assert table is not None
    name = passage_index_name(c, column)
    conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (work_mem,))
    exists = _index_valid(conn, name) is not None
    target = f"{name}_new" if exists else name
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(SCHEMA, f"{name}_new")))
    conn.execute(
        sql.SQL(
            "CREATE INDEX {idx} ON {table} USING hnsw ({col} vector_cosine_ops)"
            " WITH (m = {m}, ef_construction = {efc})"
        ).format(
            idx=sql.Identifier(target),
            table=table,
            col=sql.Identifier(column),
            m=sql.Literal(m),
            efc=sql.Literal(ef_construction),
        )
    )
    if exists:
        conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(SCHEMA, name)))
        conn.execute(
            sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                sql.Identifier(SCHEMA, target), sql.Identifier(name)
            )
        )
    conn.execute(sql.SQL("ANALYZE {}").format(table))


def drop_embedding_index(
    conn: Connection, name: str, *, model: str | None = None, concurrently: bool = True
) -> None:
    """Drop the HNSW index of ``model``'s column (None: the active one), if there is one.

    Searches on that column keep working, by exact scan. A corpus with passages loses the
    passage table's index of the column too. ``concurrently`` needs a connection outside a
    transaction.

    Example:
        >>> drop_embedding_index(conn, "news", model="all-MiniLM-L6-v2")  # doctest: +SKIP
    """
    with conn.transaction():
        c = get_corpus(conn, name)
        e = _find(_rows(conn, c), c, model)
    idx = [sql.Identifier(SCHEMA, e.index_name or index_name_for(c, e.column))]
    if c.passage_table is not None:
        idx.append(sql.Identifier(SCHEMA, passage_index_name(c, e.column)))
    clear = "UPDATE pglogic.embeddings SET index_name = NULL, index_params = NULL WHERE id = %s"
    if concurrently:
        with Maintenance(conn, c):
            for i in idx:
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(i))
            conn.execute(clear, (e.id,))
    else:
        with conn.transaction():
            for i in idx:
                conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(i))
            conn.execute(clear, (e.id,))


def switch_embedding(
    conn: Connection,
    name: str,
    *,
    model: str,
    lock_timeout: str | None = DEFAULT_LOCK_TIMEOUT,
    note: Callable[[str], None] | None = None,
) -> EmbeddingInfo:
    """Make ``model`` the active embedding of corpus ``name``, atomically (one transaction).

    Refused while any document lacks a ``model`` vector or the column has no valid HNSW index,
    and, in a corpus with passages, while any passage lacks one or the passage table's column
    has no valid HNSW index. The check holds a SHARE lock on the corpus table and its passage
    table (writes wait, searches do not), so no unembedded row can slip in between check and
    switch. Searches that resolve the corpus after
    the commit use the new column; switching back is the same call with the old model. A client
    killed during the switch leaves the corpus as it was (the transaction never commits; its
    backend notices the lost client within a second, even while waiting for the lock). Called
    outside a transaction, it first repairs what an interrupted index command left on the corpus
    (:func:`pglogic.store.indexes.repair`, each repair reported through ``note``), unless an index
    command is running on it.

    Example:
        >>> switch_embedding(conn, "news", model="sentence-transformers/all-MiniLM-L6-v2").active  # doctest: +SKIP
        True
    """
    c = None
    if conn.autocommit or conn.info.transaction_status == TransactionStatus.IDLE:
        with conn.transaction():
            c = get_corpus(conn, name)
        with Maintenance(conn, c, wait=False) as held:
            if held.locked:
                indexes.repair(conn, c, note=note)
    try:
        with conn.transaction():
            c = get_corpus(conn, name)
            target = _find(_rows(conn, c, lock=True), c, model)
            if not target.active:
                _set_lock_timeout(conn, lock_timeout)
                _check_client(conn)
                tables = [("documents", c.table)]
                if c.passage_table is not None:
                    tables.append(("passages", c.passage_table))
                conn.execute(
                    sql.SQL("LOCK TABLE {} IN SHARE MODE").format(
                        sql.SQL(", ").join(t for _, t in tables)
                    )
                )
                refuse = f"Refusing to switch corpus {name!r} to {model!r}"
                backfill = f"pglogic embedding backfill {_q(name)} --model {_q(model)}"
                for kind, table in tables:
                    row = conn.execute(
                        sql.SQL("SELECT count(*) FROM {} WHERE {} IS NULL").format(
                            table, sql.Identifier(target.column)
                        )
                    ).fetchone()
                    missing = int(row[0]) if row else 0
                    if missing:
                        raise AdminError(
                            f"{refuse}: {missing:,} {kind} have no {model!r} vector yet; run: "
                            f"{backfill}"
                        )
                index = f"pglogic embedding index {_q(name)} --model {_q(model)}"
                idx = index_name_for(c, target.column)
                if target.index_name != idx or not _index_valid(conn, idx):
                    raise AdminError(
                        f"{refuse}: column {target.column} has no valid HNSW index; run: {index}"
                    )
                if c.passage_table is not None and not _index_valid(
                    conn, passage_index_name(c, target.column)
                ):
                    raise AdminError(
                        f"{refuse}: column {target.column} of the passages has no valid HNSW "
                        f"index; run: {index}"
                    )
                conn.execute(
                    "UPDATE pglogic.embeddings SET is_active = false"
                    " WHERE corpus_id = %s AND is_active",
                    (c.id,),
                )
                conn.execute(
                    "UPDATE pglogic.embeddings SET is_active = true WHERE id = %s", (target.id,)
                )
    except pgerrors.LockNotAvailable as exc:
        assert c is not None
        raise _lock_error(c, lock_timeout) from exc
    return get_embedding(conn, name, model)


def drop_embedding(
    conn: Connection,
    name: str,
    *,
    model: str,
    lock_timeout: str | None = DEFAULT_LOCK_TIMEOUT,
) -> None:
    """Drop the (inactive) ``model`` column of corpus ``name`` with its index and registry row.

    Refused for the active embedding. A corpus with passages loses the column of its passage
    table too (with its index), in the same transaction. Drop the old column only after the
    clients that cache a
    :class:`~pglogic.store.corpus.Corpus` have picked up the switch (``PgLogic`` resolves it per call).

    Example:
        >>> drop_embedding(conn, "news", model="all-MiniLM-L6-v2")  # doctest: +SKIP
    """
    c = None
    try:
        with conn.transaction():
            c = get_corpus(conn, name)
            target = _find(_rows(conn, c, lock=True), c, model)
            if target.active:
                raise AdminError(
                    f"Refusing to drop {model!r}: it is the active embedding of corpus {name!r}; "
                    f"switch first: pglogic embedding switch {_q(name)} --model OTHER"
                )
            _set_lock_timeout(conn, lock_timeout)
            conn.execute(
                sql.SQL("ALTER TABLE {} DROP COLUMN {}").format(
                    c.table, sql.Identifier(target.column)
                )
            )
            if c.passage_table is not None:
                conn.execute(
                    sql.SQL("ALTER TABLE {} DROP COLUMN IF EXISTS {}").format(
                        c.passage_table, sql.Identifier(target.column)
                    )
                )
            conn.execute("DELETE FROM pglogic.embeddings WHERE id = %s", (target.id,))
    except pgerrors.LockNotAvailable as exc:
        assert c is not None
        raise _lock_error(c, lock_timeout) from exc


__all__ = [
    "AdminError",
    "BackfillStats",
    "EmbeddingInfo",
    "add_embedding",
    "backfill_embedding",
    "build_embedding_index",
    "drop_embedding",
    "drop_embedding_index",
    "get_embedding",
    "index_name_for",
    "list_embeddings",
    "switch_embedding",
    "window_note",
]
