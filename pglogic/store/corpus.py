"""Corpora: create, look up, list, describe, drop, and build their HNSW index.

Each corpus has its own table ``pglogic.corpus_<id>`` (documents and their embedding column
``vector(dim)``) registered in ``pglogic.corpora`` and ``pglogic.embeddings``. All SQL is built
with :mod:`psycopg.sql`.

Example:
    >>> with connect(dsn) as conn:  # doctest: +SKIP
    ...     create_corpus(conn, "news", model="all-MiniLM-L6-v2", dim=384)
    ...     build_index(conn, "news", m=16, ef_construction=128)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from pglogic.engine.source import NAME_RE as NAME_RE
from pglogic.engine.source import SCHEMA as SCHEMA
from pglogic.engine.source import Corpus as Corpus
from pglogic.engine.source import validate_name as validate_name
from pglogic.errors import CorpusExists, InvalidInput, UnknownCorpus
from pglogic.store.db import Connection, require_schema

_SELECT = sql.SQL(
    "SELECT c.id, c.name, c.table_name, e.model, e.dim, e.distance, e.column_name, "
    "e.index_name, e.index_params FROM pglogic.corpora c "
    "JOIN pglogic.embeddings e ON e.corpus_id = c.id AND e.is_active "
)


def get_corpus(conn: Connection, name: str) -> Corpus:
    """Return the corpus called ``name`` or raise :class:`UnknownCorpus`.

    Example:
        >>> get_corpus(conn, "news").dim  # doctest: +SKIP
        384
    """
    require_schema(conn)
    row = conn.execute(_SELECT + sql.SQL("WHERE c.name = %s"), (name,)).fetchone()
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
    description: str = "",
) -> Corpus:
    """Create corpus ``name`` for vectors of ``dim`` dimensions made by ``model``; commit.

    The caller checks that ``model`` exists and produces ``dim``-dimensional vectors.

    Example:
        >>> create_corpus(conn, "news", model="all-MiniLM-L6-v2", dim=384).table_name  # doctest: +SKIP
        'corpus_1'
    """
    validate_name(name)
    if distance != "cosine":
        raise InvalidInput(f"Unsupported distance {distance!r}: pglogic corpora use 'cosine'")
    if not 1 <= dim <= 16000:
        raise InvalidInput(f"Invalid dimension {dim}: must be between 1 and 16000")
    require_schema(conn)
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
        # measured in bench/query.py and bench/ingest.py (18.7k -> 26.8k rows/s)
        conn.execute(
            sql.SQL(
                "ALTER TABLE {} ALTER COLUMN embedding SET STORAGE MAIN,"
                " SET (toast_tuple_target = 8160)"
            ).format(sql.Identifier(SCHEMA, table_name))
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
    return get_corpus(conn, name)


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


def corpus_info(conn: Connection, name: str) -> CorpusInfo:
    """Return exact statistics for corpus ``name`` (document count, sizes, index).

    Example:
        >>> corpus_info(conn, "news").documents  # doctest: +SKIP
        2000
    """
    c = get_corpus(conn, name)
    row = conn.execute(
        sql.SQL(
            "SELECT count(*), count({col}), pg_table_size({regclass}),"
            " (SELECT created_at FROM pglogic.corpora WHERE id = %s) FROM {table}"
        ).format(col=c.embedding, table=c.table, regclass=sql.Literal(f"{SCHEMA}.{c.table_name}")),
        (c.id,),
    ).fetchone()
    assert row is not None
    index_bytes = 0
    if c.index_name:
        r = conn.execute(
            "SELECT pg_relation_size(to_regclass(%s))", (f"{SCHEMA}.{c.index_name}",)
        ).fetchone()
        index_bytes = int(r[0] or 0) if r else 0
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
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(c.table))
        conn.execute("DELETE FROM pglogic.corpora WHERE id = %s", (c.id,))


@dataclass(frozen=True)
class IndexProgress:
    """A snapshot of ``pg_stat_progress_create_index`` while an index builds."""

    phase: str
    done: int
    total: int


#: HNSW build parameters. ef_construction is twice pgvector's default (64): at 1M vectors an
#: index built with 64 found 0.87 of the true 10 nearest at ef_search = 100, one built with 128
#: found 0.985 (bench/results/ef_sweep*.md); building costs more (1M: 438 s, scale.md).
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
) -> float:
    """(Re)build the HNSW cosine index of corpus ``name``; return the build time in seconds.

    The old index is dropped in the same transaction, so a failed build keeps it. With ``dsn``
    and ``progress``, a second connection polls the build's progress.

    Example:
        >>> build_index(conn, "news", m=16, ef_construction=128)  # doctest: +SKIP
        1.84
    """
    if not 2 <= m <= 100:
        raise InvalidInput(f"Invalid m={m}: pgvector accepts 2 to 100")
    if not 4 <= ef_construction <= 1000 or ef_construction < 2 * m:
        raise InvalidInput(
            f"Invalid ef_construction={ef_construction}: must be 4 to 1000 and at least 2*m"
        )
    c = get_corpus(conn, name)
    index_name = f"{c.table_name}_{c.column}_hnsw"
    stop = threading.Event()
    poller = None
    if progress is not None and dsn is not None:
        pid = conn.info.backend_pid
        poller = threading.Thread(target=_poll_progress, args=(dsn, pid, progress, stop))
        poller.start()
    started = time.perf_counter()
    try:
        with conn.transaction():
            conn.execute(
                "SELECT set_config('maintenance_work_mem', %s, true)", (maintenance_work_mem,)
            )
            conn.execute(
                sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(SCHEMA, index_name))
            )
            conn.execute(
                sql.SQL(
                    "CREATE INDEX {idx} ON {table} USING hnsw ({col} vector_cosine_ops)"
                    " WITH (m = {m}, ef_construction = {efc})"
                ).format(
                    idx=sql.Identifier(index_name),
                    table=c.table,
                    col=c.embedding,
                    m=sql.Literal(m),
                    efc=sql.Literal(ef_construction),
                )
            )
            conn.execute(
                "UPDATE pglogic.embeddings SET index_name = %s, index_params = %s::jsonb"
                " WHERE corpus_id = %s AND column_name = %s",
                (
                    index_name,
                    Jsonb({"m": m, "ef_construction": ef_construction}),
                    c.id,
                    c.column,
                ),
            )
    finally:
        stop.set()
        if poller is not None:
            poller.join()
    conn.execute(sql.SQL("ANALYZE {}").format(c.table))
    conn.commit()
    return time.perf_counter() - started


def _poll_progress(
    dsn: str, pid: int, report: Callable[[IndexProgress], None], stop: threading.Event
) -> None:
    from pglogic.store.db import connect

    try:
        with connect(dsn, autocommit=True, vector=False) as watcher:
            while not stop.wait(0.5):
                row = watcher.execute(
                    "SELECT phase, blocks_done, blocks_total, tuples_done, tuples_total"
                    " FROM pg_stat_progress_create_index WHERE pid = %s",
                    (pid,),
                ).fetchone()
                if row is None:
                    continue
                phase, bdone, btotal, tdone, ttotal = row
                if ttotal:
                    report(IndexProgress(str(phase), int(tdone), int(ttotal)))
                else:
                    report(IndexProgress(str(phase), int(bdone or 0), int(btotal or 0)))
    except Exception:  # progress is cosmetic; never break the build
        return
