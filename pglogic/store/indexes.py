"""Indexes of corpus tables: built concurrently, swapped atomically, repaired after a crash.

Every index on a corpus table is built with ``CREATE INDEX CONCURRENTLY``, which takes no lock
that a search (ACCESS SHARE) or an ingest (ROW EXCLUSIVE) waits for. A rebuild builds the new HNSW
index beside the old one (``<name>_new``), then swaps the names in one short transaction
(``ALTER INDEX ... RENAME`` locks only the two indexes, SHARE UPDATE EXCLUSIVE, never the table)
together with the registry row, then drops the old index (``<name>_old``) concurrently. So the
index's name is the same before and after, a search finds a valid index at every moment, and the
registry names the index that exists.

A client killed at any point (``kill -9``) leaves one of these states, which :func:`repair` (run
first by every index command, under the same lock) resolves:

- an invalid index (an interrupted concurrent build or drop): dropped concurrently;
- a valid ``<name>_new`` (the build finished, the swap did not run): swapped in;
- a ``<name>_old`` (the swap committed, the drop did not run): dropped concurrently;
- a registry row that names a missing index, or stale parameters: set from the catalog.

The build's session sets ``client_connection_check_interval``, so a build whose client died stops
within a second instead of running (and holding its locks) to the end. Index commands on one corpus
take a session advisory lock, so two of them never work on the same indexes at once, and a repair
never mistakes a build in progress for an interrupted one.

Example:
    >>> with Maintenance(conn, corpus) as m:  # doctest: +SKIP
    ...     repair(conn, corpus, note=print)
    ...     build_hnsw(conn, corpus, column="embedding", m=16, ef_construction=128)
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from pglogic.engine.compile import set_local
from pglogic.engine.source import SCHEMA, Corpus
from pglogic.errors import InvalidInput, PglogicError
from pglogic.store.citus import distribution, with_propagation
from pglogic.store.db import Connection
from pglogic.store.lexical import index_name as lexical_index_name
from pglogic.store.passages import passage_index_name, passage_table_name, swap_passage_index

#: Key space of the session advisory lock that serializes index commands on one corpus
#: (``pg_advisory_lock(LOCK_SPACE, corpus id)``): the bytes of "pgli".
LOCK_SPACE = 0x70676C69

#: How long the swap transaction waits for its index locks before it retries (searches never wait
#: for it: a rename locks only the indexes, in a mode that searches do not take).
SWAP_LOCK_TIMEOUT = "2s"
SWAP_ATTEMPTS = 30

#: How often a build's backend checks that its client is still there (PostgreSQL 14+, Linux).
CLIENT_CHECK_INTERVAL = "1s"

Note = Callable[[str], None]


class AdminError(PglogicError):
    """An index or embedding operation refused because of the corpus's state.

    Example:
        >>> str(AdminError("Refusing to drop the active embedding"))
        'Refusing to drop the active embedding'
    """


@dataclass(frozen=True)
class IndexProgress:
    """A snapshot of ``pg_stat_progress_create_index`` while an index builds.

    Example:
        >>> IndexProgress("building index: loading tuples", 10, 100).done
        10
    """

    phase: str
    done: int
    total: int


def hnsw_name(corpus: Corpus, column: str) -> str:
    """Name of the HNSW index of ``column`` in ``corpus``'s table.

    Example:
        >>> c = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> hnsw_name(c, "embedding_2")
        'corpus_1_embedding_2_hnsw'
    """
    return f"{corpus.table_name}_{column}_hnsw"


def metadata_index_name(corpus: Corpus) -> str:
    """Name of the GIN index (``jsonb_path_ops``) on ``metadata`` that serves ``@>`` filters.

    Example:
        >>> c = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> metadata_index_name(c)
        'corpus_1_metadata_gin'
    """
    return f"{corpus.table_name}_metadata_gin"


def metadata_index_sql(corpus: Corpus, *, concurrently: bool) -> sql.Composed:
    """The ``CREATE INDEX`` statement of the metadata GIN index.

    Example:
        >>> c = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> metadata_index_sql(c, concurrently=False).as_string(None)
        'CREATE INDEX  "corpus_1_metadata_gin" ON "pglogic"."corpus_1" USING gin (metadata jsonb_path_ops)'
    """
    return sql.SQL(
        "CREATE INDEX {conc} {idx} ON {table} USING gin (metadata jsonb_path_ops)"
    ).format(
        conc=sql.SQL("CONCURRENTLY") if concurrently else sql.SQL(""),
        idx=sql.Identifier(metadata_index_name(corpus)),
        table=corpus.table,
    )


def check_hnsw(m: int, ef_construction: int) -> None:
    """Raise :class:`InvalidInput` unless pgvector accepts these HNSW build parameters.

    Example:
        >>> check_hnsw(16, 128)
        >>> check_hnsw(1, 128)
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid m=1: pgvector accepts 2 to 100
    """
    if not 2 <= m <= 100:
        raise InvalidInput(f"Invalid m={m}: pgvector accepts 2 to 100")
    if not 4 <= ef_construction <= 1000 or ef_construction < 2 * m:
        raise InvalidInput(
            f"Invalid ef_construction={ef_construction}: must be 4 to 1000 and at least 2*m"
        )


def _ignore(_: str) -> None:
    return None


def _set_session(conn: Connection, name: str, value: str) -> str | None:
    """Set a session setting; return its old value (None: the server does not accept it)."""
    old = conn.execute("SELECT current_setting(%s, true)", (name,)).fetchone()
    try:
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    except (pgerrors.InvalidParameterValue, pgerrors.UndefinedObject):
        return None  # e.g. client_connection_check_interval on a platform without it
    return None if old is None else str(old[0])


class Maintenance:
    """Hold a corpus's index-maintenance lock on ``conn``, in autocommit mode.

    On enter: the connection goes to autocommit (``CONCURRENTLY`` cannot run in a transaction;
    refused when one is open), takes the corpus's session advisory lock (waiting for another index
    command on the same corpus, after saying so through ``note``; with ``wait=False`` it does not
    wait and :attr:`locked` is False), and sets ``maintenance_work_mem`` and
    ``client_connection_check_interval`` for the session. On exit all three are undone.

    Example:
        >>> with Maintenance(conn, corpus, note=print) as m:  # doctest: +SKIP
        ...     m.locked
        True
    """

    def __init__(
        self,
        conn: Connection,
        corpus: Corpus,
        *,
        note: Note | None = None,
        wait: bool = True,
        maintenance_work_mem: str | None = None,
    ) -> None:
        self.conn = conn
        self.corpus = corpus
        self.note = note or _ignore
        self.wait = wait
        self.maintenance_work_mem = maintenance_work_mem
        self.locked = False
        self._autocommit: bool | None = None
        self._restore: list[tuple[str, str]] = []

    def __enter__(self) -> Maintenance:
        conn = self.conn
        if not conn.autocommit:
            if conn.info.transaction_status != TransactionStatus.IDLE:
                raise AdminError(
                    "CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction: commit "
                    "first, or pass concurrently=False"
                )
            conn.autocommit = True
            self._autocommit = False
        try:
            self._lock()
            if self.locked:
                settings = [("client_connection_check_interval", CLIENT_CHECK_INTERVAL)]
                if self.maintenance_work_mem is not None:
                    settings.append(("maintenance_work_mem", self.maintenance_work_mem))
                for name, value in settings:
                    old = _set_session(conn, name, value)
                    if old is not None:
                        self._restore.append((name, old))
        except BaseException:
            self.__exit__()
            raise
        return self

    def _lock(self) -> None:
        key = (LOCK_SPACE, self.corpus.id & 0x7FFFFFFF)
        row = self.conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()
        if row is not None and row[0]:
            self.locked = True
            return
        if not self.wait:
            return
        holder = self.conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = %s"
            " AND objid = %s AND objsubid = 2 AND granted AND database = ("
            "SELECT oid FROM pg_database WHERE datname = current_database())",
            key,
        ).fetchone()
        who = f" (backend {holder[0]})" if holder else ""
        self.note(
            f"Waiting for another index command on corpus {self.corpus.name!r}{who} to finish"
        )
        self.conn.execute("SELECT pg_advisory_lock(%s, %s)", key)
        self.locked = True

    def __exit__(self, *exc: object) -> None:
        conn = self.conn
        if conn.closed or conn.broken:
            return
        try:
            if conn.info.transaction_status == TransactionStatus.IDLE:
                for name, value in reversed(self._restore):
                    conn.execute("SELECT set_config(%s, %s, false)", (name, value))
                if self.locked:
                    key = (LOCK_SPACE, self.corpus.id & 0x7FFFFFFF)
                    conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)
        finally:
            self.locked = False
            self._restore = []
            if self._autocommit is not None:
                conn.autocommit = self._autocommit


@dataclass(frozen=True)
class _Index:
    name: str
    valid: bool
    building: bool  # a CREATE INDEX of another session is running on it
    options: list[str] | None


def _indexes(conn: Connection, corpus: Corpus, table: str | None = None) -> dict[str, _Index]:
    """The indexes of the corpus's table (or of its table named ``table``: the passages')."""
    rows = conn.execute(
        "SELECT c.relname, i.indisvalid, EXISTS (SELECT 1 FROM pg_stat_progress_create_index p"
        " WHERE p.index_relid = i.indexrelid), c.reloptions FROM pg_index i"
        " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = to_regclass(%s)",
        (f"{SCHEMA}.{table or corpus.table_name}",),
    ).fetchall()
    return {str(r[0]): _Index(str(r[0]), bool(r[1]), bool(r[2]), r[3]) for r in rows}


def hnsw_params(options: list[str] | None) -> dict[str, Any]:
    """The HNSW build parameters of an index, from its ``pg_class.reloptions``.

    pgvector's defaults (m=16, ef_construction=64) fill what the index was built without.

    Example:
        >>> hnsw_params(["m=12", "ef_construction=40"])
        {'m': 12, 'ef_construction': 40}
        >>> hnsw_params(None)
        {'m': 16, 'ef_construction': 64}
    """
    params: dict[str, Any] = {"m": 16, "ef_construction": 64}
    for option in options or []:
        key, _, value = option.partition("=")
        if key in params and value.isdigit():
            params[key] = int(value)
    return params


def _drop(conn: Connection, name: str) -> None:
    conn.execute(
        sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(SCHEMA, name))
    )


def _drop_after_failure(conn: Connection, name: str) -> None:
    """Drop what a failed concurrent build left, if the connection still can (else: repair)."""
    if not conn.broken and conn.info.transaction_status == TransactionStatus.IDLE:
        with contextlib.suppress(Exception):
            _drop(conn, name)


def _embeddings(conn: Connection, corpus: Corpus) -> list[tuple[int, str, str | None, Any]]:
    return [
        (int(r[0]), str(r[1]), r[2], r[3])
        for r in conn.execute(
            "SELECT id, column_name, index_name, index_params FROM pglogic.embeddings"
            " WHERE corpus_id = %s ORDER BY id",
            (corpus.id,),
        )
    ]


def own_index_names(corpus: Corpus, columns: Sequence[str]) -> set[str]:
    """The names pglogic gives the indexes it builds on ``corpus``'s tables (HNSW per embedding
    column, with the ``_new`` / ``_old`` of a rebuild; the metadata GIN index; the lexical GIN
    index; the passages' HNSW indexes). Repairs and swaps touch no other index: a DBA's own
    indexes on a corpus table, valid or not, are left alone.

    ``columns``: the corpus's embedding columns.

    Example:
        >>> sorted(own_index_names(corpus, ["embedding"]))[:2]  # doctest: +SKIP
        ['corpus_1_embedding_hnsw', 'corpus_1_embedding_hnsw_new']
    """
    names = {metadata_index_name(corpus), lexical_index_name(corpus)}
    for column in columns:
        for base in (hnsw_name(corpus, column), passage_index_name(corpus, column)):
            names.update((base, f"{base}_new", f"{base}_old"))
    return names


def repair(conn: Connection, corpus: Corpus, *, note: Note | None = None) -> list[str]:
    """Undo or finish what an interrupted index command left on ``corpus``; return what was done.

    Only pglogic's own indexes (:func:`own_index_names`) are touched. Drops invalid ones (not
    one another session is building), swaps in a finished
    ``<name>_new``, drops a leftover ``<name>_old``, and makes the registry name the HNSW index of
    each embedding column that exists and is valid, with its parameters. The same for the
    passage table's indexes (:func:`_repair_passages`). Run it inside :class:`Maintenance`. Each
    action is reported through ``note`` and returned.

    Example:
        >>> with Maintenance(conn, corpus):  # doctest: +SKIP
        ...     repair(conn, corpus)
        ['Dropped invalid index corpus_1_embedding_hnsw_new (left by an interrupted build)']
    """
    done: list[str] = []

    def say(text: str) -> None:
        done.append(text)
        (note or _ignore)(text)

    embeddings = _embeddings(conn, corpus)
    own = own_index_names(corpus, [e[1] for e in embeddings])
    _drop_invalid(conn, _indexes(conn, corpus), own, say, note)
    for emb_id, column, index_name, index_params in embeddings:
        name = hnsw_name(corpus, column)
        indexes = _indexes(conn, corpus)
        if f"{name}_old" in indexes:
            _drop(conn, f"{name}_old")
            say(f"Dropped {name}_old (replaced by an interrupted rebuild)")
        new = indexes.get(f"{name}_new")
        if new is not None and new.valid:
            swap(conn, corpus, emb_id, name, hnsw_params(new.options))
            say(f"Swapped in {name}_new as {name} (built by an interrupted rebuild)")
        current = _indexes(conn, corpus).get(name)
        if current is not None and current.valid:
            want: tuple[str | None, Any] = (name, hnsw_params(current.options))
        else:
            want = (None, None)
        if (index_name, index_params) != want:
            conn.execute(
                "UPDATE pglogic.embeddings SET index_name = %s, index_params = %s WHERE id = %s",
                (want[0], None if want[1] is None else Jsonb(want[1]), emb_id),
            )
    if corpus.passage_table is not None:
        _repair_passages(conn, corpus, own, say, note)
    return done


def _drop_invalid(
    conn: Connection,
    found: dict[str, _Index],
    own: set[str],
    say: Callable[[str], None],
    note: Note | None,
    what: str = "",
) -> None:
    """Drop the invalid indexes of ``found`` that pglogic builds (``own``) and that no other
    session is building; an invalid index of someone else's is reported and left alone."""
    for ix in found.values():
        if ix.valid:
            continue
        if ix.name not in own:
            (note or _ignore)(f"Index {ix.name} is invalid but not pglogic's: left alone")
            continue
        if ix.building:
            (note or _ignore)(f"Index {ix.name} is being built by another session: left alone")
            continue
        _drop(conn, ix.name)
        say(f"Dropped invalid index {ix.name}{what} (left by an interrupted build)")


def _repair_passages(
    conn: Connection,
    corpus: Corpus,
    own: set[str],
    say: Callable[[str], None],
    note: Note | None,
) -> None:
    """What an interrupted build of a passage index left
    (:func:`pglogic.store.passages.build_passage_index`): invalid indexes are dropped, and a
    finished ``<name>_new`` (the client died before the swap) takes the place of ``<name>``."""
    table = passage_table_name(corpus)
    _drop_invalid(conn, _indexes(conn, corpus, table), own, say, note, " of the passages")
    for ix in _indexes(conn, corpus, table).values():
        if ix.valid and ix.name.endswith("_new") and ix.name in own:
            name = ix.name.removesuffix("_new")
            swap_passage_index(conn, name)
            say(f"Swapped in {ix.name} as {name} (built by an interrupted passage index build)")


def swap(conn: Connection, corpus: Corpus, emb_id: int, name: str, params: dict[str, Any]) -> None:
    """Put the valid index ``<name>_new`` in the place of ``name``; drop the old one.

    One short transaction renames ``name`` to ``<name>_old`` and ``<name>_new`` to ``name`` and
    records ``params`` in the registry (renames lock only the indexes: searches and writes go
    on; a lock wait longer than :data:`SWAP_LOCK_TIMEOUT` is retried). Then the old index is
    dropped concurrently. Needs an autocommit connection (:class:`Maintenance`).

    Example:
        >>> swap(conn, corpus, 1, "corpus_1_embedding_hnsw", {"m": 16, "ef_construction": 128})  # doctest: +SKIP
    """
    old, new = f"{name}_old", f"{name}_new"
    for attempt in range(SWAP_ATTEMPTS):
        try:
            with conn.transaction():
                conn.execute("SELECT set_config('lock_timeout', %s, true)", (SWAP_LOCK_TIMEOUT,))
                exists = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.{name}",)).fetchone()
                if exists is not None and exists[0] is not None:
                    conn.execute(
                        sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                            sql.Identifier(SCHEMA, name), sql.Identifier(old)
                        )
                    )
                conn.execute(
                    sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                        sql.Identifier(SCHEMA, new), sql.Identifier(name)
                    )
                )
                conn.execute(
                    "UPDATE pglogic.embeddings SET index_name = %s, index_params = %s"
                    " WHERE id = %s",
                    (name, Jsonb(params), emb_id),
                )
            break
        except pgerrors.LockNotAvailable:
            if attempt == SWAP_ATTEMPTS - 1:
                raise AdminError(
                    f"Could not swap in the new index of corpus {corpus.name!r}: its indexes "
                    "stayed locked; the next index command finishes the swap"
                ) from None
            time.sleep(min(0.1 * 2**attempt, 2.0))
    _drop(conn, old)


def build_hnsw(
    conn: Connection,
    corpus: Corpus,
    *,
    emb_id: int,
    column: str,
    m: int,
    ef_construction: int,
) -> None:
    """Build (or rebuild) the HNSW cosine index of ``column`` concurrently; register it.

    With no valid index yet it is built under its own name; otherwise under ``<name>_new`` and
    then swapped in (:func:`swap`). A build that fails drops what it left, or leaves it to
    :func:`repair` when the connection is gone. Run it inside :class:`Maintenance` after
    :func:`repair`.

    Example:
        >>> build_hnsw(conn, corpus, emb_id=1, column="embedding", m=16, ef_construction=128)  # doctest: +SKIP
    """
    check_hnsw(m, ef_construction)
    name = hnsw_name(corpus, column)
    current = _indexes(conn, corpus).get(name)
    if current is not None and not current.valid:
        _drop(conn, name)  # repair() leaves one being built by another session: not ours
        current = None
    target = name if current is None else f"{name}_new"
    params = {"m": m, "ef_construction": ef_construction}
    try:
        conn.execute(
            sql.SQL(
                "CREATE INDEX CONCURRENTLY {idx} ON {table} USING hnsw ({col} vector_cosine_ops)"
                " WITH (m = {m}, ef_construction = {efc})"
            ).format(
                idx=sql.Identifier(target),
                table=corpus.table,
                col=sql.Identifier(column),
                m=sql.Literal(m),
                efc=sql.Literal(ef_construction),
            )
        )
    except Exception:
        # a failed concurrent build leaves an invalid index behind; a cancelled or killed one
        # is left to the next command's repair()
        _drop_after_failure(conn, target)
        raise
    if target == name:
        conn.execute(
            "UPDATE pglogic.embeddings SET index_name = %s, index_params = %s WHERE id = %s",
            (name, Jsonb(params), emb_id),
        )
    else:
        swap(conn, corpus, emb_id, name, params)


def build_hnsw_in_transaction(
    conn: Connection,
    corpus: Corpus,
    *,
    emb_id: int,
    column: str,
    m: int,
    ef_construction: int,
    maintenance_work_mem: str,
) -> None:
    """Build the HNSW index of ``column`` in the caller's transaction (e.g. a migration's).

    ``CREATE INDEX`` takes a SHARE lock (writes wait, searches do not) while it builds; a rebuild
    builds ``<name>_new`` first and drops the old index only at the end, whose ACCESS EXCLUSIVE
    lock is held until the caller commits. ``maintenance_work_mem`` is a ``SET LOCAL``, which on
    a Citus coordinator reaches the workers (every shard's index is built there, in parallel).

    Example:
        >>> with conn.transaction():  # doctest: +SKIP
        ...     build_hnsw_in_transaction(conn, corpus, emb_id=1, column="embedding", m=16,
        ...                               ef_construction=128, maintenance_work_mem="1GB")
    """
    check_hnsw(m, ef_construction)
    name = hnsw_name(corpus, column)
    with conn.transaction():
        # SET LOCAL, not set_config(): on Citus only SET LOCAL reaches the workers that build
        for stmt in set_local(
            with_propagation(conn, {"maintenance_work_mem": maintenance_work_mem})
        ):
            conn.execute(stmt)
        exists = conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.{name}",)).fetchone()
        rebuild = exists is not None and exists[0] is not None
        target = f"{name}_new" if rebuild else name
        conn.execute(
            sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(SCHEMA, f"{name}_new"))
        )
        conn.execute(
            sql.SQL(
                "CREATE INDEX {idx} ON {table} USING hnsw ({col} vector_cosine_ops)"
                " WITH (m = {m}, ef_construction = {efc})"
            ).format(
                idx=sql.Identifier(target),
                table=corpus.table,
                col=sql.Identifier(column),
                m=sql.Literal(m),
                efc=sql.Literal(ef_construction),
            )
        )
        if rebuild:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(SCHEMA, name)))
            conn.execute(
                sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                    sql.Identifier(SCHEMA, target), sql.Identifier(name)
                )
            )
        conn.execute(
            "UPDATE pglogic.embeddings SET index_name = %s, index_params = %s WHERE id = %s",
            (name, Jsonb({"m": m, "ef_construction": ef_construction}), emb_id),
        )


def build_any_hnsw(
    conn: Connection,
    corpus: Corpus,
    *,
    emb_id: int,
    column: str,
    m: int,
    ef_construction: int,
    maintenance_work_mem: str,
) -> None:
    """Build the HNSW index of ``column`` the way the corpus's table allows; register it.

    A plain table: :func:`build_hnsw` (``CREATE INDEX CONCURRENTLY``: writes go on). A Citus
    distributed table: :func:`build_hnsw_in_transaction`, because a concurrent build on Citus
    runs outside any transaction on the workers, where no ``SET LOCAL`` arrives: every shard
    would be built with the worker's default ``maintenance_work_mem`` (a graph that does not
    fit is built far slower). In a transaction the setting reaches every shard's build; writes
    to the corpus wait for the build, searches do not. Run it inside :class:`Maintenance` (an
    autocommit connection) after :func:`repair`.

    Example:
        >>> build_any_hnsw(conn, corpus, emb_id=1, column="embedding", m=16, ef_construction=128,
        ...                maintenance_work_mem="1GB")  # doctest: +SKIP
    """
    if distribution(conn, corpus) is None:
        build_hnsw(conn, corpus, emb_id=emb_id, column=column, m=m, ef_construction=ef_construction)
        return
    build_hnsw_in_transaction(
        conn,
        corpus,
        emb_id=emb_id,
        column=column,
        m=m,
        ef_construction=ef_construction,
        maintenance_work_mem=maintenance_work_mem,
    )


def ensure_metadata_index(conn: Connection, corpus: Corpus, *, note: Note | None = None) -> bool:
    """Build the metadata GIN index concurrently if the corpus has none; True if built.

    Run it inside :class:`Maintenance` after :func:`repair` (which drops an invalid one).

    Example:
        >>> ensure_metadata_index(conn, corpus)  # doctest: +SKIP
        False
    """
    name = metadata_index_name(corpus)
    current = _indexes(conn, corpus).get(name)
    if current is not None and current.valid:
        return False
    if current is not None:
        _drop(conn, name)
    try:
        conn.execute(metadata_index_sql(corpus, concurrently=True))
    except Exception:
        _drop_after_failure(conn, name)
        raise
    (note or _ignore)(f"Built the metadata index {name} (GIN, jsonb_path_ops)")
    return True


def clean_metadata_pending(conn: Connection, corpus: Corpus) -> None:
    """Merge the metadata GIN index's pending list (rows ingested since the last vacuum).

    GIN defers its inserts to a pending list that every filtered search scans in full; an
    ingest fills it faster than autovacuum empties it.

    Example:
        >>> clean_metadata_pending(conn, corpus)  # doctest: +SKIP
    """
    conn.execute(
        "SELECT gin_clean_pending_list(to_regclass(%s))",
        (f"{SCHEMA}.{metadata_index_name(corpus)}",),
    )


def invalid_indexes(conn: Connection, corpus: Corpus) -> list[str]:
    """Names of the invalid indexes on ``corpus``'s table and its passage table (interrupted or
    running builds).

    Example:
        >>> invalid_indexes(conn, corpus)  # doctest: +SKIP
        []
    """
    found = list(_indexes(conn, corpus).values())
    if corpus.passage_table is not None:
        found += _indexes(conn, corpus, passage_table_name(corpus)).values()
    return sorted(ix.name for ix in found if not ix.valid)


def poll_progress(
    dsn: str, pid: int, report: Callable[[IndexProgress], None], stop: threading.Event
) -> None:
    """Report ``pg_stat_progress_create_index`` of backend ``pid`` every 0.5 s until ``stop``.

    Runs on its own connection (in a thread); errors end it quietly (progress is cosmetic).

    Example:
        >>> threading.Thread(target=poll_progress, args=(dsn, pid, print, stop)).start()  # doctest: +SKIP
    """
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


class Progress:
    """Poll a build's progress in a thread while the ``with`` block runs (no-op without both).

    Example:
        >>> with Progress(dsn, conn, print):  # doctest: +SKIP
        ...     build_hnsw(conn, corpus, emb_id=1, column="embedding", m=16, ef_construction=128)
    """

    def __init__(
        self, dsn: str | None, conn: Connection, report: Callable[[IndexProgress], None] | None
    ) -> None:
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        if dsn is not None and report is not None:
            self.thread = threading.Thread(
                target=poll_progress,
                args=(dsn, conn.info.backend_pid, report, self.stop),
                daemon=True,
            )

    def __enter__(self) -> Progress:
        if self.thread is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()


__all__ = [
    "AdminError",
    "IndexProgress",
    "Maintenance",
    "Progress",
    "build_any_hnsw",
    "build_hnsw",
    "build_hnsw_in_transaction",
    "check_hnsw",
    "clean_metadata_pending",
    "ensure_metadata_index",
    "hnsw_name",
    "hnsw_params",
    "invalid_indexes",
    "metadata_index_name",
    "metadata_index_sql",
    "poll_progress",
    "repair",
    "swap",
]
