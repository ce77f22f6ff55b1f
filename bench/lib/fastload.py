"""Prototype of a faster ``pglogic.store.ingest.ingest_records`` (measured by ``bench/perf/ingest.py``).

Same contract as the library function (same hashes, same skip / update / insert decisions, one
commit per batch, same :class:`~pglogic.store.ingest.IngestStats`; ``bench/perf/ingest.py`` checks that it
leaves identical rows). Changes:

1. **Client encoding.** Every hash input is computed once per record (the library computes
   ``text_hash`` twice per row and converts a tuple vector to NumPy three times). The vectors of a
   batch are converted to big-endian float32 in one NumPy call and sent as pgvector's binary
   ``vector_recv`` payload (``>HH`` dim, 0 + ``>f4`` values) through the ``bytea`` dumper, and
   metadata as jsonb's binary payload (``\\x01`` + JSON text). This bypasses
   ``pgvector.Vector(...)`` / ``Jsonb`` per-row adaptation. In binary COPY the server decodes each
   field with the *target column's* receive function, so declaring the field ``bytea`` on the
   client only selects the client-side dumper.
2. **Direct COPY of new rows, per row.** Rows whose external id the lookup did not find are
   COPYed straight into the corpus table inside a savepoint; only changed rows go through the
   staging table and ``INSERT ... ON CONFLICT DO UPDATE`` (the library now does the direct COPY
   only when *no* id of the batch exists). If a concurrent writer inserted one of the ids in the
   meantime the COPY fails with a unique violation, the savepoint is rolled back and the whole
   batch takes the staging path.
3. ``pipeline=True`` prepares the next batch in a thread while this one loads. Measured: no gain
   on 2 cores (the Python thread, the GIL-holding COPY writer and the server backend compete).

Table layout (DDL, measured in ``bench/perf/ingest.py``, not in this file): ``STORAGE MAIN`` for the
embedding column (now what ``create_corpus`` does) and ``toast_tuple_target``.
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg import sql

from pglogic.engine.source import Corpus
from pglogic.store.db import Connection
from pglogic.store.ingest import _COLUMNS, IngestStats, _batches
from pglogic.store.readers import Record

_T = TypeVar("_T")

#: Client-side dumpers for the COPY fields: text, or raw binary payloads (see the module doc).
_WIRE_TYPES = ("text", "text", "text", "bytea", "bytea", "bytea", "bytea")


@dataclass
class Phases:
    """Where the time of a prototype run went (seconds)."""

    hash_lookup: float = 0.0
    encode: float = 0.0
    copy_direct: float = 0.0
    staging_upsert: float = 0.0
    commit: float = 0.0
    fallbacks: int = 0
    extra: dict[str, float] = field(default_factory=dict)


def _hashes(r: Record) -> tuple[bytes, bytes, np.ndarray | None]:
    """The library's ``text_hash`` and ``row_hash`` (same bytes), computing each input once."""
    vec = None if r.vector is None else np.asarray(r.vector, dtype=np.float32)
    h = hashlib.sha256(r.embed_text.encode("utf-8"))
    if vec is not None:
        h.update(b"\x00" + vec.tobytes())
    th = h.digest()
    payload = json.dumps([r.title, r.text, r.metadata], sort_keys=True, default=str)
    rh = hashlib.sha256(payload.encode("utf-8") + th).digest()
    return th, rh, vec


def vector_payloads(matrix: np.ndarray) -> list[bytes]:
    """pgvector binary input (``vector_recv``) for each row of an (n, dim) float32 matrix."""
    header = struct.pack(">HH", matrix.shape[1], 0)
    big = np.ascontiguousarray(matrix, dtype=">f4")
    return [header + row.tobytes() for row in big]


def fast_ingest_records(
    conn: Connection,
    corpus: Corpus,
    records: Iterable[Record],
    *,
    batch_size: int = 1000,
    direct_copy: bool = True,
    pipeline: bool = False,
    phases: Phases | None = None,
) -> IngestStats:
    """Load records that carry their vectors (no embedder) like ``ingest_records`` does.

    ``pipeline``: hash and encode the next batch in a worker thread while this one loads (the
    main thread mostly waits for the server then, with the GIL released).
    """
    ph = phases if phases is not None else Phases()
    stats = IngestStats()
    conn.execute(
        "CREATE TEMP TABLE IF NOT EXISTS pglogic_staging (external_id text, title text,"
        " text text, metadata jsonb, text_hash bytea, row_hash bytea, embedding vector)"
    )
    conn.commit()
    cols = sql.SQL(", ").join(map(sql.Identifier, _COLUMNS[:-1]))
    upsert = sql.SQL(
        "INSERT INTO {table} AS d (external_id, title, text, metadata, text_hash, row_hash, {col})"
        " SELECT external_id, title, text, metadata, text_hash, row_hash, embedding"
        " FROM pglogic_staging"
        " ON CONFLICT (external_id) DO UPDATE SET title = EXCLUDED.title, text = EXCLUDED.text,"
        " metadata = EXCLUDED.metadata, text_hash = EXCLUDED.text_hash,"
        " row_hash = EXCLUDED.row_hash, {col} = COALESCE(EXCLUDED.{col}, d.{col}),"
        " ingested_at = now()"
        " WHERE d.row_hash IS DISTINCT FROM EXCLUDED.row_hash"
        " RETURNING (xmax = 0)"
    ).format(table=corpus.table, col=corpus.embedding)
    lookup = sql.SQL(
        "SELECT external_id, text_hash, row_hash, {col} IS NOT NULL FROM {table}"
        " WHERE external_id = ANY(%s)"
    ).format(table=corpus.table, col=corpus.embedding)
    copy_staging = sql.SQL(
        "COPY pglogic_staging ({}, embedding) FROM STDIN (FORMAT BINARY)"
    ).format(cols)
    copy_direct = sql.SQL("COPY {} ({}, {}) FROM STDIN (FORMAT BINARY)").format(
        corpus.table, cols, corpus.embedding
    )

    def prepare(batch: list[Record]) -> tuple[list[Record], list[Any], list[tuple[Any, ...]]]:
        """Hashes and wire-ready rows of a batch (no database access: can run in a thread)."""
        hashed = [_hashes(r) for r in batch]
        with_vec = [i for i, h in enumerate(hashed) if h[2] is not None]
        payloads = vector_payloads(np.stack([hashed[i][2] for i in with_vec])) if with_vec else []
        payload: dict[int, bytes] = dict(zip(with_vec, payloads, strict=True))
        rows = [
            (
                r.external_id,
                r.title,
                r.text,
                b"\x01" + json.dumps(r.metadata).encode("utf-8"),
                h[0],
                h[1],
                payload.get(i),
            )
            for i, (r, h) in enumerate(zip(batch, hashed, strict=True))
        ]
        return batch, hashed, rows

    prepared: Iterator[tuple[list[Record], list[Any], list[tuple[Any, ...]]]]
    pool = ThreadPoolExecutor(max_workers=1) if pipeline else None
    if pool is not None:
        prepared = _ahead(pool, prepare, _batches(records, batch_size))
    else:
        prepared = (prepare(b) for b in _batches(records, batch_size))

    t_wait = time.perf_counter()
    for batch, hashed, rows in prepared:
        t0 = time.perf_counter()
        ph.encode += t0 - t_wait  # hashing + encoding (only what the main thread waited for)
        stats.seen += len(batch)
        existing = {
            row[0]: (bytes(row[1]), bytes(row[2]), bool(row[3]))
            for row in conn.execute(lookup, ([r.external_id for r in batch],))
        }
        new: list[int] = []
        changed: list[int] = []
        for i, (r, (th, rh, vec)) in enumerate(zip(batch, hashed, strict=True)):
            old = existing.get(r.external_id)
            if old is not None and old[1] == rh and old[2]:
                stats.unchanged += 1
                continue
            if old is None or old[0] != th or not old[2]:
                if vec is None:
                    raise ValueError("the prototype only loads records that carry their vector")
            elif rows[i][6] is not None:
                rows[i] = (*rows[i][:6], None)  # text unchanged: keep the stored vector
            (new if old is None else changed).append(i)
        t2 = time.perf_counter()
        ph.hash_lookup += t2 - t0
        if not new and not changed:
            conn.rollback()
            stats.batches += 1
            t_wait = time.perf_counter()
            continue
        todo = new + changed

        with conn.transaction():
            via_staging = changed
            if new and direct_copy:
                try:
                    with conn.transaction(), conn.cursor() as cur, cur.copy(copy_direct) as copy:
                        copy.set_types(list(_WIRE_TYPES))
                        for i in new:
                            copy.write_row(rows[i])
                    stats.inserted += len(new)
                except psycopg.errors.UniqueViolation:
                    ph.fallbacks += 1
                    via_staging = todo
            elif new:
                via_staging = todo
            t3 = time.perf_counter()
            ph.copy_direct += t3 - t2
            if via_staging:
                conn.execute("TRUNCATE pglogic_staging")
                with conn.cursor() as cur, cur.copy(copy_staging) as copy:
                    copy.set_types(list(_WIRE_TYPES))
                    for i in via_staging:
                        copy.write_row(rows[i])
                for (was_insert,) in conn.execute(upsert):
                    if was_insert:
                        stats.inserted += 1
                    else:
                        stats.updated += 1
            t4 = time.perf_counter()
            ph.staging_upsert += t4 - t3
        t5 = time.perf_counter()
        ph.commit += t5 - t4
        stats.load_seconds += t5 - t2
        stats.batches += 1
        t_wait = time.perf_counter()
    if pool is not None:
        pool.shutdown()
    return stats


def _ahead(
    pool: ThreadPoolExecutor, fn: Callable[[list[Record]], _T], batches: Iterator[list[Record]]
) -> Iterator[_T]:
    """Yield ``fn(batch)`` for each batch, computing the next one in ``pool`` meanwhile."""
    pending: Future[_T] | None = None
    for batch in batches:
        nxt = pool.submit(fn, batch)
        if pending is not None:
            yield pending.result()
        pending = nxt
    if pending is not None:
        yield pending.result()
