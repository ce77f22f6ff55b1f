"""Distributed corpora on a real Citus cluster, and the refusals on a server without Citus.

The cluster tests run whenever ``PGLOGIC_CITUS_DSN`` names a Citus coordinator's database with
workers (``bench/perf/citus/cluster.py start`` makes a local one: a coordinator and two workers);
otherwise, in CI too, they are skipped with that reason (the only skip besides the local LLM's).
They migrate that database and make corpora with unique names, dropped afterwards. The refusals
run on the embedded server like every database test.

Vectors are hand-made (no model): each test compares a distributed corpus with a plain corpus of
the same rows on the coordinator itself, or with NumPy.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from pglogic.engine.compile import SearchOptions
from pglogic.engine.render import search_json
from pglogic.errors import DatabaseUnavailable, InvalidInput
from pglogic.query import parse
from pglogic.store import admin, migrate
from pglogic.store.citus import distribution, server_has_citus
from pglogic.store.corpus import (
    build_index,
    corpus_info,
    create_corpus,
    distribute_corpus,
    drop_corpus,
    get_corpus,
)
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import search
from tests.conftest import cli_in_process

CITUS_DSN = os.environ.get("PGLOGIC_CITUS_DSN")
NO_CLUSTER = (
    "no Citus cluster: set PGLOGIC_CITUS_DSN to a coordinator's DSN "
    "(bench/perf/citus/cluster.py start makes one)"
)
DIM = 16
N = 400


class Fixed:
    """An embedder with given vectors (term -> vector); unknown texts (AND texts) get the
    normalised sum of the vectors of the terms they contain."""

    name = "fixed"
    dim = DIM

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for t in texts:
            if t in self.vectors:
                out.append(self.vectors[t])
            else:
                v = sum((self.vectors[w] for w in self.vectors if w in t), np.zeros(DIM))
                out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


ROWS = _unit(np.random.default_rng(7), N)
TERMS = dict(
    zip(["grain", "corn", "wheat", "oil"], _unit(np.random.default_rng(8), 4), strict=True)
)
QUERIES = [
    '"grain"',
    '"grain" AND "corn"',
    '("grain" OR "corn") AND NOT "wheat"',
    '"oil" OR "corn"',
]


def _records(rows: np.ndarray = ROWS) -> list[Record]:
    return [
        Record(f"d{i}", f"document {i}", f"title {i}", {"g": i % 10}, rows[i].tolist())
        for i in range(len(rows))
    ]


@pytest.fixture(scope="module")
def citus_dsn() -> str:
    """The coordinator's database, migrated (skipped without a cluster)."""
    if not CITUS_DSN:
        pytest.skip(NO_CLUSTER)
    migrate.upgrade(CITUS_DSN)
    with connect(CITUS_DSN) as conn:
        if not server_has_citus(conn):
            pytest.fail(f"PGLOGIC_CITUS_DSN has no citus extension: {CITUS_DSN}")
    return CITUS_DSN


@pytest.fixture
def cconn(citus_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to the coordinator; the corpora a test makes are dropped after it."""
    with connect(citus_dsn) as conn:
        before = {r[0] for r in conn.execute("SELECT name FROM pglogic.corpora")}
        conn.commit()
        yield conn
        conn.rollback()
        for (name,) in conn.execute("SELECT name FROM pglogic.corpora").fetchall():
            if name not in before:
                drop_corpus(conn, name)


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _pair(conn: psycopg.Connection[Any], shards: int = 3) -> tuple[str, str]:
    """A distributed corpus and a plain one with the same rows, both indexed."""
    dist, plain = _name("dist"), _name("plain")
    create_corpus(conn, dist, model="fixed", dim=DIM, distributed=True, shards=shards)
    create_corpus(conn, plain, model="fixed", dim=DIM)
    for name in (dist, plain):
        ingest_records(conn, get_corpus(conn, name), _records(), embedder=None, batch_size=150)
        build_index(conn, name, m=16, ef_construction=64)
    return dist, plain


def _remote(conn: psycopg.Connection[Any]) -> list[str]:
    """Log the commands Citus sends to the workers (session setting); return the list."""
    notes: list[str] = []
    conn.add_notice_handler(lambda d: notes.append(str(d.message_primary)))
    conn.execute("SET citus.log_remote_commands = on")
    conn.commit()
    return notes


# -- on a cluster ------------------------------------------------------------------------------


def test_distributed_table_layout(cconn: psycopg.Connection[Any]) -> None:
    name = _name("layout")
    c = create_corpus(cconn, name, model="fixed", dim=DIM, distributed=True, shards=3)
    cconn.commit()
    d = distribution(cconn, c)
    assert d is not None and (d.column, d.shards, d.nodes) == ("external_id", 3, 2)
    cons = dict(
        cconn.execute(
            "SELECT contype::text, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = to_regclass(%s) AND contype IN ('p', 'u')",
            (f"pglogic.{c.table_name}",),
        ).fetchall()
    )
    assert cons == {"u": "UNIQUE (external_id)"}  # no primary key on id: Citus refuses it
    # what create_corpus sets on the table reaches every shard
    shard_state = cconn.execute(
        "SELECT DISTINCT result FROM run_command_on_shards(%s::regclass, $$SELECT"
        " (SELECT attstorage::text FROM pg_attribute WHERE attrelid = '%%1$s'::regclass"
        "  AND attname = 'embedding') || ' ' || (SELECT reloptions::text || relreplident::text"
        "  FROM pg_class WHERE oid = '%%1$s'::regclass)$$)",
        (f"pglogic.{c.table_name}",),
    ).fetchall()
    assert shard_state == [("m {toast_tuple_target=8160}i",)]
    readable = cconn.execute(
        "SELECT DISTINCT result FROM run_command_on_shards(%s::regclass,"
        " $$SELECT has_table_privilege('pglogic_reader', '%%s', 'SELECT')$$)",
        (f"pglogic.{c.table_name}",),
    ).fetchall()
    assert readable == [("t",)]  # the reader role's GRANT reached every shard
    info = corpus_info(cconn, name)
    assert info.distribution == "citus: 3 shards on 2 nodes, by external_id"


def test_ingest_index_and_search_equal_a_plain_table(cconn: psycopg.Connection[Any]) -> None:
    dist, plain = _pair(cconn)
    assert corpus_info(cconn, dist).documents == N
    c = get_corpus(cconn, dist)
    hnsw = cconn.execute(
        "SELECT count(*) FROM run_command_on_shards(%s::regclass, $$SELECT count(*) FROM"
        " pg_index i JOIN pg_class x ON x.oid = i.indexrelid JOIN pg_am a ON a.oid = x.relam"
        " WHERE i.indrelid = '%%s'::regclass AND a.amname = 'hnsw' AND i.indisvalid$$)"
        " WHERE result = '1'",
        (f"pglogic.{c.table_name}",),
    ).fetchone()
    assert hnsw is not None and hnsw[0] == 3  # one valid HNSW index on every shard
    cconn.commit()
    emb = Fixed(TERMS)
    for query in QUERIES:
        for exact in (True, False):
            opts = SearchOptions(k=10, exact=exact)
            a = search(cconn, get_corpus(cconn, dist), query, embedder=emb, options=opts).hits
            b = search(cconn, get_corpus(cconn, plain), query, embedder=emb, options=opts).hits
            cconn.commit()
            assert [h.external_id for h in a] == [h.external_id for h in b], (query, exact)
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-9)
            assert a[0].similarities == pytest.approx(b[0].similarities, abs=1e-9)


def test_reingest_updates_rows_on_the_shards(cconn: psycopg.Connection[Any]) -> None:
    name = _name("reingest")
    c = create_corpus(cconn, name, model="fixed", dim=DIM, distributed=True, shards=2)
    ingest_records(cconn, c, _records(), embedder=None)
    changed = _records(ROWS[::-1].copy())[:5]  # five documents get another vector and text
    changed = [
        Record(r.external_id, r.text + " v2", r.title, r.metadata, r.vector) for r in changed
    ]
    stats = ingest_records(cconn, c, changed + _records()[5:10], embedder=None)
    assert (stats.inserted, stats.updated, stats.unchanged) == (0, 5, 5)
    row = cconn.execute(
        sql.SQL("SELECT text FROM {} WHERE external_id = 'd0'").format(c.table)
    ).fetchone()
    assert row == ("document 0 v2",)


def test_settings_reach_the_workers(cconn: psycopg.Connection[Any]) -> None:
    dist, _ = _pair(cconn, shards=2)
    notes = _remote(cconn)
    res = search(cconn, get_corpus(cconn, dist), '"grain" AND "corn"', embedder=Fixed(TERMS))
    cconn.commit()
    ef = res.compiled.settings["hnsw.ef_search"]
    sent = [n for n in notes if n.startswith("issuing BEGIN")]
    assert sent and all(f"SET LOCAL hnsw.ef_search = '{ef}'" in n for n in sent)


def test_sql_function_on_a_distributed_corpus(cconn: psycopg.Connection[Any]) -> None:
    dist, _ = _pair(cconn, shards=2)
    emb = Fixed(TERMS)
    query = '("grain" OR "corn") AND NOT "wheat"'
    opts = SearchOptions(k=10)
    res = search(cconn, get_corpus(cconn, dist), query, embedder=emb, options=opts)
    cconn.commit()
    vectors = {t: emb.embed([t])[0] for t in res.compiled.terms}
    notes = _remote(cconn)
    rows = cconn.execute(
        "SELECT external_id, score FROM pglogic.search(%s, %s)",
        (dist, Jsonb(search_json(parse(query), opts, vectors))),
    ).fetchall()
    cconn.commit()
    assert [r[0] for r in rows] == [h.external_id for h in res.hits]
    assert [r[1] for r in rows] == pytest.approx([h.score for h in res.hits], abs=1e-6)
    ef = res.compiled.settings["hnsw.ef_search"]
    assert any(f"SET LOCAL hnsw.ef_search = '{ef}'" in n for n in notes), notes[:5]


def test_sqlalchemy_helper_on_a_distributed_corpus(cconn: psycopg.Connection[Any]) -> None:
    from pgvector.sqlalchemy import Vector
    from sqlalchemy import BigInteger, Column, MetaData, Table, Text, create_engine, text
    from sqlalchemy.orm import Session

    from pglogic.integrations.sqlalchemy import execute, logical_search, url_from_dsn

    dist, _ = _pair(cconn, shards=2)
    c = get_corpus(cconn, dist)
    emb = Fixed(TERMS)
    query = '"grain" AND NOT "wheat"'
    want = search(cconn, c, query, embedder=emb, options=SearchOptions(k=5))
    cconn.commit()
    table = Table(
        c.table_name,
        MetaData(schema="pglogic"),
        Column("id", BigInteger, primary_key=True),
        Column("external_id", Text),
        Column("embedding", Vector(DIM)),
    )
    engine = create_engine(url_from_dsn(CITUS_DSN or ""))
    notes: list[str] = []
    try:
        with Session(engine) as session:
            raw = session.connection().connection.driver_connection
            raw.add_notice_handler(lambda d: notes.append(str(d.message_primary)))
            session.execute(text("SET LOCAL citus.log_remote_commands = on"))
            rows = execute(
                session, logical_search(table, table.c.embedding, query, k=5, embedder=emb)
            )
            after = session.execute(
                text("SELECT current_setting('citus.propagate_set_commands')")
            ).scalar()
    finally:
        engine.dispose()
    assert [r.external_id for r in rows] == [h.external_id for h in want.hits]
    ef = want.compiled.settings["hnsw.ef_search"]
    assert any(f"SET LOCAL hnsw.ef_search = '{ef}'" in n for n in notes), notes[:5]
    assert after == "none"  # put back after the search, inside the caller's transaction


def test_model_switch_on_a_distributed_corpus(cconn: psycopg.Connection[Any]) -> None:
    dist, _ = _pair(cconn, shards=2)
    other = _unit(np.random.default_rng(9), N)
    admin.add_embedding(cconn, dist, model="fixed-2", dim=DIM)

    class Second(Fixed):
        name = "fixed-2"

        def embed(self, texts: list[str]) -> np.ndarray:
            return np.asarray(
                [
                    other[int(t.split()[1])] if t.startswith("title") else TERMS["oil"]
                    for t in texts
                ],
                dtype=np.float32,
            )

    filled = admin.backfill_embedding(cconn, dist, model="fixed-2", embedder=Second(TERMS))
    assert filled == N
    admin.build_embedding_index(cconn, dist, model="fixed-2", m=16, ef_construction=64)
    admin.switch_embedding(cconn, dist, model="fixed-2")
    c = get_corpus(cconn, dist)
    assert (c.model, c.column) == ("fixed-2", "embedding_2")
    hits = search(cconn, c, '"oil"', embedder=Fixed(TERMS), options=SearchOptions(k=3)).hits
    cconn.commit()
    best = np.argsort(-(other @ TERMS["oil"]))[:3]
    assert [h.external_id for h in hits] == [f"d{i}" for i in best]


def test_distribute_an_existing_corpus(cconn: psycopg.Connection[Any]) -> None:
    name = _name("later")
    create_corpus(cconn, name, model="fixed", dim=DIM)
    ingest_records(cconn, get_corpus(cconn, name), _records(), embedder=None)
    build_index(cconn, name, m=16, ef_construction=64)
    emb = Fixed(TERMS)
    before = search(cconn, get_corpus(cconn, name), QUERIES[2], embedder=emb).hits
    cconn.commit()
    assert distribution(cconn, get_corpus(cconn, name)) is None
    d = distribute_corpus(cconn, name, shards=2)
    assert (d.shards, d.nodes) == (2, 2)
    c = get_corpus(cconn, name)
    assert c.index_name is not None and corpus_info(cconn, name).documents == N
    local = cconn.execute(
        "SELECT pg_relation_size(to_regclass(%s))", (f"pglogic.{c.table_name}",)
    ).fetchone()
    assert local == (0,)  # the coordinator keeps no copy of the rows
    after = search(cconn, c, QUERIES[2], embedder=emb).hits
    cconn.commit()
    assert [h.external_id for h in after] == [h.external_id for h in before]
    with pytest.raises(InvalidInput, match="distributed already"):
        distribute_corpus(cconn, name)
    stats = ingest_records(cconn, c, _records()[:3], embedder=None)  # idempotent after the move
    assert stats.unchanged == 3


def test_cli_creates_and_shows_a_distributed_corpus(citus_dsn: str) -> None:
    name = _name("cli")
    try:
        out = cli_in_process(
            "--dsn", citus_dsn, "corpus", "create", name, "--distributed", "--shards", "2"
        )
        assert out.returncode == 0, out.stderr
        assert "384-d, cosine, distributed)" in out.stdout
        out = cli_in_process("--dsn", citus_dsn, "corpus", "show", name)
        assert "citus: 2 shards on 2 nodes, by external_id" in " ".join(out.stdout.split())
    finally:
        with connect(citus_dsn) as conn:
            drop_corpus(conn, name)


# -- without Citus (the embedded server) -------------------------------------------------------


def test_distributed_needs_citus(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(DatabaseUnavailable, match="no citus extension") as err:
        create_corpus(conn, "news", model="fixed", dim=DIM, distributed=True)
    assert "create distributed corpus 'news'" in str(err.value)
    conn.rollback()
    assert conn.execute("SELECT count(*) FROM pglogic.corpora").fetchone() == (0,)
    create_corpus(conn, "news", model="fixed", dim=DIM)
    with pytest.raises(DatabaseUnavailable, match="Cannot distribute corpus 'news'"):
        distribute_corpus(conn, "news", shards=2)
    with pytest.raises(InvalidInput, match="--shards needs --distributed"):
        create_corpus(conn, "other", model="fixed", dim=DIM, shards=2)
    with pytest.raises(InvalidInput, match="Invalid --shards 0"):
        create_corpus(conn, "other", model="fixed", dim=DIM, distributed=True, shards=0)


def test_cli_refuses_distributed_without_citus(dsn: str) -> None:
    out = cli_in_process("--dsn", dsn, "corpus", "create", "news", "--distributed")
    assert out.returncode == 3, out.stderr
    assert " ".join(out.stderr.split()).startswith(
        "Error: Cannot create distributed corpus 'news': the database has no citus extension"
    ), out.stderr
    out = cli_in_process("--dsn", dsn, "corpus", "create", "news", "--shards", "4")
    assert out.returncode == 2 and "--shards needs --distributed" in out.stderr
