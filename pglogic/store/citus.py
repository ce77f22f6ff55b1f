"""Citus: distributed corpora, and settings that reach the workers.

A corpus table is distributed by ``external_id`` (hash, ``colocate_with => 'none'``): Citus
accepts a unique constraint only if it contains the distribution column, and ingestion's
``ON CONFLICT (external_id)`` needs the one on ``external_id``. So a distributed corpus has
``UNIQUE (external_id)`` (also its replica identity, which shard moves replicate by), a plain
btree index on ``id`` (the late fetch of the top k), and no primary key on ``id`` (the identity
column stays unique: Citus hands each node its own range of the sequence).

Settings (``hnsw.ef_search``, iterative scans, ``maintenance_work_mem``) reach the workers only
as ``SET LOCAL`` statements in a transaction, and only with ``citus.propagate_set_commands =
'local'`` (:data:`PROPAGATE`); ``set_config()`` and session ``SET`` never do. Measured in
``bench/perf/results/citus.md``.

Example:
    >>> server_has_citus(conn)  # doctest: +SKIP
    True
    >>> distribute_table(conn, corpus, shards=4)  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from psycopg import sql
from psycopg.pq import TransactionStatus

from pglogic.engine.compile import set_local
from pglogic.engine.source import SCHEMA, Corpus
from pglogic.errors import DatabaseUnavailable, InvalidInput
from pglogic.store.db import Connection

#: The setting that makes Citus forward ``SET LOCAL`` to the workers of the transaction; sent
#: first, itself never forwarded.
PROPAGATE: dict[str, str] = {"citus.propagate_set_commands": "local"}

#: Shards per corpus when none is given: two per worker (each query searches every shard once
#: per scan, so more shards cost CPU without adding parallelism; two per worker leave room to
#: rebalance onto a new node). ``bench/perf/results/citus.md`` measures 2 and 4 shards on 2 workers.
SHARDS_PER_WORKER = 2
MAX_SHARDS = 1024

_HAS_CITUS: dict[str, bool] = {}
_LOCK = threading.Lock()


def _key(conn: Connection) -> str:
    return f"{conn.info.host}:{conn.info.port}:{conn.info.dbname}"


def server_has_citus(conn: Connection) -> bool:
    """True when the database has the citus extension (cached per server and database).

    Example:
        >>> server_has_citus(conn)  # doctest: +SKIP
        False
    """
    key = _key(conn)
    with _LOCK:
        known = _HAS_CITUS.get(key)
    if known is None:
        idle = not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE
        row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone()
        if idle:  # leave the connection as it was (no transaction open for the caller)
            conn.rollback()
        known = row is not None
        with _LOCK:
            _HAS_CITUS[key] = known
    return known


def forget(conn: Connection) -> None:
    """Forget what :func:`server_has_citus` cached for ``conn``'s database.

    Example:
        >>> forget(conn)  # doctest: +SKIP
    """
    with _LOCK:
        _HAS_CITUS.pop(_key(conn), None)


def with_propagation(conn: Connection, settings: Mapping[str, str]) -> dict[str, str]:
    """``settings`` preceded by :data:`PROPAGATE` on a Citus coordinator (as given elsewhere).

    Example:
        >>> with_propagation(conn, {"hnsw.ef_search": "100"})  # doctest: +SKIP
        {'citus.propagate_set_commands': 'local', 'hnsw.ef_search': '100'}
    """
    if settings and server_has_citus(conn):
        return {**PROPAGATE, **settings}
    return dict(settings)


def require_citus(conn: Connection, what: str) -> None:
    """Raise :class:`DatabaseUnavailable` unless the database is a Citus coordinator with workers.

    Example:
        >>> require_citus(conn, "distribute corpus 'news'")  # doctest: +SKIP
        Traceback (most recent call last):
        pglogic.errors.DatabaseUnavailable: Cannot distribute corpus 'news': ...
    """
    forget(conn)
    if not server_has_citus(conn):
        available = conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'citus'"
        ).fetchone()
        hint = (
            "run CREATE EXTENSION citus (with shared_preload_libraries = 'citus') and add "
            "workers with citus_add_node()"
            if available
            else "this server has no Citus; use a Citus coordinator's DSN"
        )
        raise DatabaseUnavailable(
            f"Cannot {what}: the database has no citus extension; {hint} (docs/scaling.md)"
        )
    row = conn.execute("SELECT count(*) FROM citus_get_active_worker_nodes()").fetchone()
    if not row or not row[0]:
        raise DatabaseUnavailable(
            f"Cannot {what}: the Citus coordinator has no active worker; add one with "
            "SELECT citus_add_node(host, port) (docs/scaling.md)"
        )


def default_shards(conn: Connection) -> int:
    """:data:`SHARDS_PER_WORKER` per active worker.

    Example:
        >>> default_shards(conn)  # doctest: +SKIP
        4
    """
    row = conn.execute("SELECT count(*) FROM citus_get_active_worker_nodes()").fetchone()
    return SHARDS_PER_WORKER * max(1, int(row[0]) if row else 1)


def check_shards(shards: int) -> None:
    """Raise :class:`InvalidInput` for a shard count Citus would refuse or pglogic advises against.

    Example:
        >>> check_shards(0)
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid --shards 0: must be 1 to 1024
    """
    if not 1 <= shards <= MAX_SHARDS:
        raise InvalidInput(f"Invalid --shards {shards}: must be 1 to {MAX_SHARDS}")


@dataclass(frozen=True)
class Distribution:
    """How a corpus table is distributed.

    Example:
        >>> str(Distribution("external_id", 4, 2))
        'citus: 4 shards on 2 nodes, by external_id'
    """

    column: str
    shards: int
    nodes: int

    def __str__(self) -> str:
        if self.column == "<none>":  # create_distributed_table(t, NULL): one shard, one node
            return "citus: a single shard (no shard key)"
        return f"citus: {self.shards} shards on {self.nodes} nodes, by {self.column}"


def distribution(conn: Connection, corpus: Corpus) -> Distribution | None:
    """The corpus table's distribution, or None when it is a plain table (or there is no Citus).

    Example:
        >>> distribution(conn, corpus)  # doctest: +SKIP
        Distribution(column='external_id', shards=4, nodes=2)
    """
    if not server_has_citus(conn):
        return None
    row = conn.execute(
        "SELECT t.distribution_column, t.shard_count,"
        " (SELECT count(DISTINCT p.nodeid) FROM pg_dist_shard s"
        "  JOIN pg_dist_placement pl USING (shardid)"
        "  JOIN pg_dist_node p ON p.groupid = pl.groupid WHERE s.logicalrelid = t.table_name)"
        " FROM citus_tables t WHERE t.table_name = to_regclass(%s)"
        " AND t.citus_table_type = 'distributed'",
        (f"{SCHEMA}.{corpus.table_name}",),
    ).fetchone()
    if row is None:
        return None
    return Distribution(str(row[0]), int(row[1]), int(row[2]))


def id_index_name(corpus: Corpus) -> str:
    """Name of the btree index on ``id`` that a distributed corpus has instead of its primary key.

    Example:
        >>> id_index_name(Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None))
        'corpus_1_id'
    """
    return f"{corpus.table_name}_id"


def _constraint(conn: Connection, corpus: Corpus, kind: str) -> str | None:
    row = conn.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = %s",
        (f"{SCHEMA}.{corpus.table_name}", kind),
    ).fetchone()
    return None if row is None else str(row[0])


def distribute_table(conn: Connection, corpus: Corpus, *, shards: int) -> None:
    """Make ``corpus``'s table a Citus distributed table, in the caller's transaction.

    Replaces the primary key on ``id`` (which Citus refuses: it does not contain the
    distribution column) by a btree index on ``id``, makes ``UNIQUE (external_id)`` the replica
    identity, then ``create_distributed_table(table, 'external_id', colocate_with => 'none',
    shard_count => shards)``: the rows move to the shards, and every index (HNSW included) is
    built on every shard, with ``maintenance_work_mem`` sent to the workers. The local copy of
    the rows is then truncated. Call :func:`require_citus` first.

    Example:
        >>> with conn.transaction():  # doctest: +SKIP
        ...     distribute_table(conn, corpus, shards=4)
    """
    check_shards(shards)
    table = sql.Identifier(SCHEMA, corpus.table_name)
    regclass = f"{SCHEMA}.{corpus.table_name}"
    pkey = _constraint(conn, corpus, "p")
    if pkey is not None:
        conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(table, sql.Identifier(pkey))
        )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (id)").format(
            sql.Identifier(id_index_name(corpus)), table
        )
    )
    unique = conn.execute(
        "SELECT c.conname FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid"
        " AND a.attnum = c.conkey[1] WHERE c.conrelid = to_regclass(%s) AND c.contype = 'u'"
        " AND cardinality(c.conkey) = 1 AND a.attname = 'external_id'",
        (regclass,),
    ).fetchone()
    if unique is None:
        raise InvalidInput(f"Corpus {corpus.name!r} has no UNIQUE (external_id): cannot distribute")
    conn.execute(
        sql.SQL("ALTER TABLE {} REPLICA IDENTITY USING INDEX {}").format(
            table, sql.Identifier(str(unique[0]))
        )
    )
    # the HNSW and GIN indexes are built on the shards inside this transaction: give them
    # the coordinator's maintenance_work_mem (a session value never reaches the workers)
    mwm = conn.execute("SELECT current_setting('maintenance_work_mem')").fetchone()
    for stmt in set_local({**PROPAGATE, "maintenance_work_mem": str(mwm[0]) if mwm else "1GB"}):
        conn.execute(stmt)
    conn.execute(
        "SELECT create_distributed_table(%s::regclass, 'external_id',"
        " colocate_with => 'none', shard_count => %s)",
        (regclass, shards),
    )
    conn.execute("SELECT truncate_local_data_after_distributing_table(%s::regclass)", (regclass,))


def set_storage_main(conn: Connection, corpus: Corpus, column: str) -> None:
    """``SET STORAGE MAIN`` for a column of a distributed table, on every shard and on the
    coordinator's table (run it after the column's ``ADD COLUMN`` committed).

    Citus refuses ``ALTER COLUMN ... SET STORAGE`` on a distributed table and drops the
    ``STORAGE`` clause of ``ADD COLUMN`` when it forwards it, so each shard gets it with
    ``run_command_on_shards``; commits first. (Rows up to ``toast_tuple_target`` = 8160 bytes, which the shards
    have from ``create_corpus``, are not toasted whatever the column's storage.)

    Example:
        >>> set_storage_main(conn, corpus, "embedding_2")  # doctest: +SKIP
    """
    alter = sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STORAGE MAIN")
    on_shard = alter.format(sql.SQL("%s"), sql.Identifier(column)).as_string(conn)
    if not conn.autocommit:
        conn.commit()  # the shards' commands run on other connections: they wait for our locks
    with conn.transaction():
        conn.execute("SET LOCAL citus.enable_ddl_propagation = off")
        conn.execute(
            alter.format(sql.Identifier(SCHEMA, corpus.table_name), sql.Identifier(column))
        )
    failed = conn.execute(
        "SELECT shardid, result FROM run_command_on_shards(%s::regclass, %s) WHERE NOT success",
        (f"{SCHEMA}.{corpus.table_name}", on_shard),
    ).fetchall()
    conn.commit()
    if failed:
        raise InvalidInput(f"SET STORAGE MAIN failed on shard {failed[0][0]}: {failed[0][1]}")


def table_stats(conn: Connection, corpus: Corpus) -> tuple[int, float]:
    """(pages, rows) of a distributed corpus, summed over its shards' ``pg_class`` (one fan-out).

    The coordinator's own ``pg_class`` row of a distributed table stays empty (0 pages).

    Example:
        >>> table_stats(conn, corpus)  # doctest: +SKIP
        (131072, 1000000.0)
    """
    row = conn.execute(
        "SELECT coalesce(sum(split_part(result, ' ', 1)::bigint), 0),"
        " coalesce(sum(greatest(split_part(result, ' ', 2)::float8, 0)), 0)"
        " FROM run_command_on_shards(%s::regclass,"
        " $$SELECT relpages || ' ' || reltuples FROM pg_class WHERE oid = '%%s'::regclass$$)"
        " WHERE success",
        (f"{SCHEMA}.{corpus.table_name}",),
    ).fetchone()
    return (int(row[0]), float(row[1])) if row else (0, 0.0)


def relation_bytes(conn: Connection, regclass: str) -> int:
    """Size in bytes of a distributed table (or one of its indexes) over all its shards.

    Example:
        >>> relation_bytes(conn, "pglogic.corpus_1")  # doctest: +SKIP
        2048000000
    """
    row = conn.execute("SELECT citus_relation_size(to_regclass(%s))", (regclass,)).fetchone()
    return int(row[0] or 0) if row else 0


__all__ = [
    "PROPAGATE",
    "Distribution",
    "check_shards",
    "default_shards",
    "distribute_table",
    "distribution",
    "forget",
    "id_index_name",
    "relation_bytes",
    "require_citus",
    "server_has_citus",
    "set_storage_main",
    "table_stats",
    "with_propagation",
]
