"""Corpora: create, look up, list, describe, drop, and build their indexes.

Each corpus has its own table ``pglogic.corpus_<id>`` (documents and their embedding column
``vector(dim)``) registered in ``pglogic.corpora`` and ``pglogic.embeddings``. All SQL is built
with :mod:`psycopg.sql`. Every corpus table has a GIN index on ``metadata`` (``jsonb_path_ops``,
for ``@>`` filters) from its creation; :func:`build_index` builds its HNSW index without blocking
searches (:mod:`pglogic.store.indexes`).

Example:
    >>> with connect(dsn) as conn:  # doctest: +SKIP
    ...     create_corpus(conn, "news", model="all-MiniLM-L6-v2", dim=384)
    ...     build_index(conn, "news", m=16, ef_construction=128)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from psycopg import sql
from psycopg.pq import TransactionStatus

from pglogic.embed.passages import check_layout
from pglogic.engine.source import NAME_RE as NAME_RE
from pglogic.engine.source import SCHEMA as SCHEMA
from pglogic.engine.source import Corpus as Corpus
from pglogic.engine.source import validate_name as validate_name
from pglogic.errors import CorpusExists, InvalidInput, SchemaError, UnknownCorpus
from pglogic.store import citus, indexes
from pglogic.store.db import Connection, require_schema
from pglogic.store.indexes import IndexProgress as IndexProgress
from pglogic.store.indexes import Maintenance, Progress, check_hnsw
from pglogic.store.lexical import DEFAULT_TEXT_CONFIG, add_lexical_index
from pglogic.store.passages import (
    PassageLayout,
    PassageStats,
    build_passage_index,
    create_passage_table,
    get_layout,
    passage_stats,
)

_SELECT = sql.SQL(
    "SELECT c.id, c.name, c.table_name, e.model, e.dim, e.distance, e.column_name, "
    "e.index_name, e.index_params,"
    " (SELECT l.config FROM pglogic.lexical_indexes l WHERE l.corpus_id = c.id),"
    " p.tokens, coalesce(p.overlap, 0),"
    " (SELECT pt.reltuples / dt.reltuples FROM pg_class pt, pg_class dt"
    "  WHERE p.corpus_id IS NOT NULL AND dt.reltuples > 0 AND pt.reltuples > 0"
    "  AND pt.oid = to_regclass('pglogic.' || quote_ident(c.table_name || '_passages'))"
    "  AND dt.oid = to_regclass('pglogic.' || quote_ident(c.table_name)))"
    " FROM pglogic.corpora c LEFT JOIN pglogic.passage_layouts p ON p.corpus_id = c.id "
    "JOIN pglogic.embeddings e ON e.corpus_id = c.id AND e.is_active "
)


def get_corpus(conn: Connection, name: str) -> Corpus:
    """Return the corpus called ``name`` or raise :class:`UnknownCorpus`.

    Example:
        >>> get_corpus(conn, "news").dim  # doctest: +SKIP
        384
    """
    if not isinstance(name, str):
        raise InvalidInput(f"Invalid corpus name {name!r}: expected a string")
    require_schema(conn)
    # (a NUL character cannot be sent as text, and no corpus name holds one)
    row = (
        None
        if "\x00" in name
        else conn.execute(_SELECT + sql.SQL("WHERE c.name = %s"), (name,)).fetchone()
    )
    if row is None:
        names = [r[0] for r in conn.execute("SELECT name FROM pglogic.corpora ORDER BY name")]
        hint = f"; existing: {', '.join(names)}" if names else "; there are no corpora yet"
        raise UnknownCorpus(f"Unknown corpus {name!r}{hint}")
    return Corpus(*row)


def create_corpus(
    conn: Connection,
    name: str,
    *,
    model: str,
    dim: int,
    distance: str = "cosine",
    distributed: bool = False,
    shards: int | None = None,
    description: str = "",
    lexical: str | None = DEFAULT_TEXT_CONFIG,
    passages: PassageLayout | None = None,
) -> Corpus:
    """Create corpus ``name`` for vectors of ``dim`` dimensions made by ``model``; commit.

    The caller checks that ``model`` exists and produces ``dim``-dimensional vectors.
    ``distributed`` makes it a Citus distributed table of ``shards`` shards (default: two per
    worker; :func:`pglogic.store.citus.distribute_table`), in the same transaction; refused with
    :class:`~pglogic.errors.DatabaseUnavailable` on a server without Citus.
    ``lexical`` is the text search configuration of its lexical index (``match:`` terms,
    :mod:`pglogic.store.lexical`); None makes the corpus without one. ``passages`` makes it
    split its documents into passages (:mod:`pglogic.store.passages`); None: one vector per
    document. A distributed corpus cannot have passages (yet).

    Example:
        >>> create_corpus(conn, "news", model="all-MiniLM-L6-v2", dim=384).table_name  # doctest: +SKIP
        'corpus_1'
    """
    validate_name(name)
    if distance != "cosine":
        raise InvalidInput(f"Unsupported distance {distance!r}: pglogic corpora use 'cosine'")
    if not 1 <= dim <= 16000:
        raise InvalidInput(f"Invalid dimension {dim}: must be between 1 and 16000")
    if shards is not None:
        if not distributed:
            raise InvalidInput("--shards needs --distributed")
        citus.check_shards(shards)
    require_schema(conn)
    if distributed and passages is not None:
        raise InvalidInput("A distributed corpus cannot have passages yet: drop --passages")
    if passages is not None:
        check_layout(passages.tokens, passages.overlap)
    if distributed:
        citus.require_citus(conn, f"create distributed corpus {name!r}")
        shards = shards or citus.default_shards(conn)
    with conn.transaction():
        exists = conn.execute("SELECT 1 FROM pglogic.corpora WHERE name = %s", (name,)).fetchone()
        if exists:
            raise CorpusExists(f"Corpus {name!r} already exists")
        row = conn.execute(
            "INSERT INTO pglogic.corpora (name, table_name, description) "
            "VALUES (%s, 'pending', %s) RETURNING id",
            (name, description),
        ).fetchone()
        assert row is not None
        corpus_id = int(row[0])
        table_name = f"corpus_{corpus_id}"
        conn.execute(
            "UPDATE pglogic.corpora SET table_name = %s WHERE id = %s", (table_name, corpus_id)
        )
        conn.execute(
            sql.SQL(
                "CREATE TABLE {table} ("
                " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                " external_id text NOT NULL UNIQUE,"
                " title text,"
                " text text NOT NULL CHECK (text <> ''),"
                " metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb,"
                " text_hash bytea NOT NULL,"
                " row_hash bytea NOT NULL,"
                " ingested_at timestamptz NOT NULL DEFAULT now(),"
                " embedding vector({dim}))"
            ).format(table=sql.Identifier(SCHEMA, table_name), dim=sql.Literal(dim))
        )
        # vectors stay in the heap row (no TOAST detour per distance, no TOAST write on load):
        # measured in bench/perf/query.py and bench/perf/ingest.py (18.7k -> 26.8k rows/s)
        conn.execute(
            sql.SQL(
                "ALTER TABLE {} ALTER COLUMN embedding SET STORAGE MAIN,"
                " SET (toast_tuple_target = 8160)"
            ).format(sql.Identifier(SCHEMA, table_name))
        )
        # metadata filters (key=value, containment) compile to @>, which this index serves;
        # built now, on an empty table, it costs nothing
        conn.execute(
            indexes.metadata_index_sql(_new_corpus(corpus_id, name, table_name), concurrently=False)
        )
        reader = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pglogic_reader'")
        if reader.fetchone() is not None:  # default privileges only cover the migrating role
            conn.execute(
                sql.SQL("GRANT SELECT ON {} TO pglogic_reader").format(
                    sql.Identifier(SCHEMA, table_name)
                )
            )
        conn.execute(
            "INSERT INTO pglogic.embeddings (corpus_id, model, dim, distance, column_name,"
            " is_active) VALUES (%s, %s, %s, %s, 'embedding', true)",
            (corpus_id, model, dim, distance),
        )
        if lexical is not None:  # on an empty table: no rewrite, no wait
            add_lexical_index(conn, _new_corpus(corpus_id, name, table_name), lexical)
        if passages is not None:
            new = replace(_new_corpus(corpus_id, name, table_name), dim=dim)
            create_passage_table(conn, new, passages)
        if distributed:  # (the shards get the lexical column and its index too)
            assert shards is not None
            new = _new_corpus(corpus_id, name, table_name)
            citus.distribute_table(conn, new, shards=shards)
    return get_corpus(conn, name)


def _new_corpus(corpus_id: int, name: str, table_name: str) -> Corpus:
    return Corpus(corpus_id, name, table_name, "", 0, "cosine", "embedding", None, None)


@dataclass(frozen=True)
class CorpusInfo:
    """Statistics of a corpus, as shown by ``pglogic corpus show``.

    Example:
        >>> CorpusInfo("news", "all-MiniLM-L6-v2", 384, "cosine", 0, 0, 0, 0, None, None, None).documents
        0
    """

    name: str
    model: str
    dim: int
    distance: str
    documents: int
    embedded: int
    table_bytes: int
    index_bytes: int
    index_name: str | None
    index_params: dict[str, Any] | None
    created_at: datetime | None
    #: indexes left invalid by an interrupted build (``pglogic index CORPUS --repair`` drops them)
    invalid_indexes: tuple[str, ...] = ()
    #: how the table is distributed (``citus: 4 shards on 2 nodes, by external_id``), or None
    distribution: str | None = None
    #: how the documents split into passages, and the passages' counts and sizes (None: one
    #: vector per document)
    passage_layout: PassageLayout | None = None
    passages: PassageStats | None = None
    #: the free text given at ``corpus create --description``
    description: str = ""


def corpus_info(conn: Connection, name: str) -> CorpusInfo:
    """Return exact statistics for corpus ``name`` (document count, sizes, index).

    Example:
        >>> corpus_info(conn, "news").documents  # doctest: +SKIP
        2000
    """
    c = get_corpus(conn, name)
    found = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.{c.table_name}",)).fetchone()
    if found is None or found[0] is None:
        raise SchemaError(
            f"Corpus {name!r} is registered but its table {SCHEMA}.{c.table_name} is missing "
            f"(a restore that failed?): restore it, or drop the corpus (pglogic corpus drop {name})"
        )
    counts = conn.execute(
        sql.SQL("SELECT count(*), count({col}) FROM {table}").format(col=c.embedding, table=c.table)
    ).fetchone()
    meta = conn.execute(
        "SELECT pg_table_size(to_regclass(%s)), created_at, description FROM pglogic.corpora"
        " WHERE id = %s",
        (f"{SCHEMA}.{c.table_name}", c.id),
    ).fetchone()
    assert counts is not None and meta is not None
    row = (counts[0], counts[1], meta[0], meta[1])
    index_bytes = 0
    if c.index_name:
        r = conn.execute(
            "SELECT pg_relation_size(to_regclass(%s))", (f"{SCHEMA}.{c.index_name}",)
        ).fetchone()
        index_bytes = int(r[0] or 0) if r else 0
    dist = citus.distribution(conn, c)
    if dist is not None:  # the coordinator's own table is empty: sum the shards
        row = (row[0], row[1], citus.relation_bytes(conn, f"{SCHEMA}.{c.table_name}"), row[3])
        if c.index_name:
            index_bytes = citus.relation_bytes(conn, f"{SCHEMA}.{c.index_name}")
    invalid = tuple(indexes.invalid_indexes(conn, c))
    layout, pstats = get_layout(conn, c), passage_stats(conn, c)
    conn.rollback()
    return CorpusInfo(
        c.name,
        c.model,
        c.dim,
        c.distance,
        int(row[0]),
        int(row[1]),
        int(row[2]),
        index_bytes,
        c.index_name,
        c.index_params,
        row[3],
        invalid,
        None if dist is None else str(dist),
        layout,
        pstats,
        meta[2] or "",
    )


def list_corpora(conn: Connection) -> list[CorpusInfo]:
    """Return every corpus with its statistics, by name.

    Example:
        >>> [c.name for c in list_corpora(conn)]  # doctest: +SKIP
        ['news']
    """
    require_schema(conn)
    names = [r[0] for r in conn.execute("SELECT name FROM pglogic.corpora ORDER BY name")]
    return [corpus_info(conn, n) for n in names]


def drop_corpus(conn: Connection, name: str) -> None:
    """Drop corpus ``name``: its table, index and registry rows, in one transaction.

    Example:
        >>> drop_corpus(conn, "news")  # doctest: +SKIP
    """
    c = get_corpus(conn, name)
    with conn.transaction():
        if c.passage_table is not None:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(c.passage_table))
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(c.table))
        conn.execute("DELETE FROM pglogic.corpora WHERE id = %s", (c.id,))


def distribute_corpus(
    conn: Connection,
    name: str,
    *,
    shards: int | None = None,
    maintenance_work_mem: str = "1GB",
    note: Callable[[str], None] | None = None,
) -> citus.Distribution:
    """Distribute corpus ``name`` over the Citus workers (``shards`` shards; default two per
    worker); return the distribution.

    One transaction: the primary key on ``id`` becomes a btree index, the rows move to the
    shards and every index, the HNSW one included, is built on every shard with
    ``maintenance_work_mem`` (:func:`pglogic.store.citus.distribute_table`). Writes and searches
    wait until it commits. Holds the corpus's index-maintenance lock (an index command running
    on the corpus finishes first). Refused on a server without Citus, or when the corpus is
    distributed already.

    Example:
        >>> str(distribute_corpus(conn, "news", shards=4))  # doctest: +SKIP
        'citus: 4 shards on 2 nodes, by external_id'
    """
    if shards is not None:
        citus.check_shards(shards)
    citus.require_citus(conn, f"distribute corpus {name!r}")
    c = _for_maintenance(conn, name)
    with Maintenance(conn, c, note=note, maintenance_work_mem=maintenance_work_mem):
        c = get_corpus(conn, name)
        if citus.distribution(conn, c) is not None:
            raise InvalidInput(f"Corpus {name!r} is distributed already")
        indexes.repair(conn, c, note=note)
        with conn.transaction():
            citus.distribute_table(conn, c, shards=shards or citus.default_shards(conn))
        dist = citus.distribution(conn, c)
    assert dist is not None
    return dist


#: HNSW build parameters. ef_construction is twice pgvector's default (64): at 1M vectors an
#: index built with 64 found 0.87 of the true 10 nearest at ef_search = 100, one built with 128
#: found 0.985 (bench/perf/results/ef_sweep*.md); building costs more (1M: 438 s, scale.md).
DEFAULT_M = 16
DEFAULT_EF_CONSTRUCTION = 128


def build_index(
    conn: Connection,
    name: str,
    *,
    m: int = DEFAULT_M,
    ef_construction: int = DEFAULT_EF_CONSTRUCTION,
    maintenance_work_mem: str = "1GB",
    progress: Callable[[IndexProgress], None] | None = None,
    dsn: str | None = None,
    note: Callable[[str], None] | None = None,
) -> float:
    """(Re)build the HNSW cosine index of corpus ``name``; return the build time in seconds.

    Searches and ingests go on during the build: the index is built with ``CREATE INDEX
    CONCURRENTLY`` (a rebuild beside the old one, then swapped in under the same name; see
    :mod:`pglogic.store.indexes`). First it repairs what an interrupted index command left
    (invalid indexes, an unfinished swap) and builds the metadata GIN index if the corpus has
    none; each repair is reported through ``note``; after the build it merges the GIN index's
    pending list and analyzes the table. Commits the connection's open transaction
    first (the build runs in autocommit mode). With ``dsn`` and ``progress``, a second
    connection polls the build's progress.

    Example:
        >>> build_index(conn, "news", m=16, ef_construction=128)  # doctest: +SKIP
        1.84
    """
    check_hnsw(m, ef_construction)
    started = time.perf_counter()
    c = _for_maintenance(conn, name)
    with (
        Progress(dsn, conn, progress),
        Maintenance(conn, c, note=note, maintenance_work_mem=maintenance_work_mem),
    ):
        c = get_corpus(conn, name)  # as of the lock: another command may have changed it
        indexes.repair(conn, c, note=note)
        indexes.ensure_metadata_index(conn, c, note=note)
        emb = conn.execute(
            "SELECT id FROM pglogic.embeddings WHERE corpus_id = %s AND is_active", (c.id,)
        ).fetchone()
        assert emb is not None
        indexes.build_any_hnsw(
            conn,
            c,
            emb_id=int(emb[0]),
            column=c.column,
            m=m,
            ef_construction=ef_construction,
            maintenance_work_mem=maintenance_work_mem,
        )
        if c.passage_table is not None:
            build_passage_index(conn, c, column=c.column, m=m, ef_construction=ef_construction)
        indexes.clean_metadata_pending(conn, c)
        conn.execute(sql.SQL("ANALYZE {}").format(c.table))
    return time.perf_counter() - started


def repair_indexes(
    conn: Connection,
    name: str,
    *,
    progress: Callable[[IndexProgress], None] | None = None,
    dsn: str | None = None,
    note: Callable[[str], None] | None = None,
) -> list[str]:
    """Repair the indexes of corpus ``name`` without rebuilding a valid HNSW index.

    Drops invalid indexes left by interrupted builds, finishes an interrupted swap, fixes the
    registry, and builds the metadata GIN index if missing (concurrently). Returns what it did
    (also reported through ``note``); an empty list when there was nothing to do.

    Example:
        >>> repair_indexes(conn, "news")  # doctest: +SKIP
        []
    """
    c = _for_maintenance(conn, name)
    with Progress(dsn, conn, progress), Maintenance(conn, c, note=note):
        c = get_corpus(conn, name)
        done = indexes.repair(conn, c, note=note)
        if indexes.ensure_metadata_index(conn, c, note=note):
            done.append(f"Built the metadata index {indexes.metadata_index_name(c)}")
    return done


def _for_maintenance(conn: Connection, name: str) -> Corpus:
    c = get_corpus(conn, name)
    if not conn.autocommit and conn.info.transaction_status == TransactionStatus.INTRANS:
        conn.commit()
    return c


def _poll_progress(
    dsn: str, pid: int, report: Callable[[IndexProgress], None], stop: threading.Event
) -> None:
    """Former name of :func:`pglogic.store.indexes.poll_progress`."""
    indexes.poll_progress(dsn, pid, report, stop)
