"""Index builds never block searches, and an interrupted one (cancelled, or its client killed) is
repaired by the next command: no invalid index, no half swap, no half model switch.

The builds are held open deterministically: a writer's open transaction (ROW EXCLUSIVE on the
corpus table, which a search does not wait for) makes ``CREATE INDEX CONCURRENTLY`` wait in its
first phase, and the tests act while the build's backend is seen waiting on that lock. Waits for
a state have a generous deadline that only turns a hang into a failure; nothing is timed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pglogic.embed.registry import get_embedder, get_query_embedder
from pglogic.engine.compile import SearchOptions
from pglogic.engine.filters import filters_sql, parse_filter
from pglogic.store import admin
from pglogic.store.corpus import (
    IndexProgress,
    build_index,
    corpus_info,
    create_corpus,
    get_corpus,
)
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import search

pytestmark = [pytest.mark.db, pytest.mark.model]

A = "all-MiniLM-L6-v2"
B = "sentence-transformers/all-MiniLM-L6-v2"  # the same packaged model under another name
TOPICS = ["coffee", "crude oil", "gold", "wheat", "interest rates", "shipping", "steel", "sugar"]
X = "corpus_1_embedding_hnsw"
GIN = "corpus_1_metadata_gin"
DEADLINE = 180.0  # seconds before a wait for a state counts as a hang (never reached when green)


def records(n: int) -> list[Record]:
    return [
        Record(
            f"d{i}",
            f"Report {i} on {TOPICS[i % len(TOPICS)]} markets, prices and trade.",
            None,
            {"topic": TOPICS[i % len(TOPICS)], "n": i},
        )
        for i in range(n)
    ]


def setup_corpus(conn: Connection, minilm: Any, n: int = 60) -> None:
    create_corpus(conn, "c", model=A, dim=384)
    ingest_records(conn, get_corpus(conn, "c"), records(n), embedder=minilm, batch_size=32)
    build_index(conn, "c", m=16, ef_construction=64)


def wait_until(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def lock_waiter(dsn: str, query_prefix: str, exclude: int) -> Callable[[], int | None]:
    """The pid of a backend of this database running ``query_prefix...`` and waiting on a lock."""

    def check() -> int | None:
        with connect(dsn, autocommit=True, vector=False) as c:
            row = c.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND pid <> %s AND wait_event_type = 'Lock'"
                " AND query ILIKE %s",
                (exclude, query_prefix + "%"),
            ).fetchone()
        return None if row is None else int(row[0])

    return check


def gone(dsn: str, pid: int) -> Callable[[], bool]:
    def check() -> bool:
        with connect(dsn, autocommit=True, vector=False) as c:
            return (
                c.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
                is None
            )

    return check


def still_waiting(dsn: str, pid: int) -> bool:
    with connect(dsn, autocommit=True, vector=False) as c:
        row = c.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
        return row.fetchone() == ("Lock",)


def table_indexes(conn: Connection) -> dict[str, bool]:
    rows = conn.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = 'pglogic.corpus_1'::regclass"
    ).fetchall()
    conn.rollback()
    return {str(r[0]): bool(r[1]) for r in rows}


def clean_state(conn: Connection, *, hnsw: tuple[str, ...] = (X,)) -> None:
    """Exactly the indexes a corpus should have, all valid, and the registry names them."""
    expected = {"corpus_1_pkey", "corpus_1_external_id_key", "corpus_1_tsv", GIN, *hnsw}
    assert table_indexes(conn) == dict.fromkeys(expected, True)
    rows = conn.execute(
        "SELECT column_name, index_name FROM pglogic.embeddings WHERE corpus_id = 1 ORDER BY id"
    ).fetchall()
    conn.rollback()
    for column, index_name in rows:
        name = f"corpus_1_{column}_hnsw"
        assert index_name == (name if name in hnsw else None)


@pytest.fixture
def db(dsn: str) -> Iterator[Connection]:
    with connect(dsn) as c:
        yield c


@pytest.fixture
def writer(dsn: str) -> Iterator[Callable[[], Connection]]:
    """Open a writer's transaction on the corpus table (holds ROW EXCLUSIVE until rollback)."""
    opened: list[Connection] = []

    def hold() -> Connection:
        c = connect(dsn)
        c.execute("LOCK TABLE pglogic.corpus_1 IN ROW EXCLUSIVE MODE")
        opened.append(c)
        return c

    yield hold
    for c in opened:
        c.close()


def k_hits(conn: Connection, k: int = 5) -> int:
    corpus = get_corpus(conn, "c")
    conn.commit()
    res = search(
        conn, corpus, '"gold" OR ("coffee" AND NOT "sugar")', embedder=get_query_embedder(A),
        options=SearchOptions(k=k),
    )  # fmt: skip
    conn.rollback()
    return len(res.hits)


def cli(dsn: str, *args: str, **kw: Any) -> subprocess.Popen[str]:
    exe = Path(sys.executable).with_name("pglogic")
    return subprocess.Popen(
        [str(exe), "--dsn", dsn, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        **kw,
    )


def run(dsn: str, *args: str) -> tuple[int, str]:
    proc = cli(dsn, *args)
    out, err = proc.communicate(timeout=600)
    return proc.returncode, " ".join((out + err).split())


def test_a_search_completes_while_a_rebuild_is_in_progress(
    dsn: str, db: Connection, minilm: Any, writer: Callable[[], Connection]
) -> None:
    setup_corpus(db, minilm)
    hold = writer()  # the rebuild will wait for this transaction: a build held open
    errors: list[BaseException] = []
    seen: list[IndexProgress] = []
    with connect(dsn) as builder:
        pid = builder.info.backend_pid

        def rebuild() -> None:
            try:
                build_index(builder, "c", m=8, ef_construction=32, progress=seen.append, dsn=dsn)
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=rebuild)
        thread.start()
        try:
            wait_until(lambda: still_waiting(dsn, pid), "the rebuild waits for the writer")
            with connect(dsn) as searcher:
                # a search that queued behind the rebuild's locks would fail here instead of hanging
                searcher.execute("SET lock_timeout = '60s'")
                searcher.commit()
                assert k_hits(searcher) == 5
                searcher.execute("SET LOCAL enable_seqscan = off")
                plan = searcher.execute(
                    "EXPLAIN SELECT id FROM pglogic.corpus_1 ORDER BY embedding <=> %s::vector"
                    " LIMIT 5",
                    ("[" + ",".join(["0.05"] * 384) + "]",),
                ).fetchall()
                searcher.rollback()
            assert still_waiting(dsn, pid)  # the search ran while the rebuild was in progress
            assert any(X in str(r[0]) for r in plan)  # ... and used the old index
            # the progress bar's source still reports the (concurrent) build
            wait_until(lambda: seen, "progress is reported")
            assert seen[-1].phase.startswith("waiting for writers")
        finally:
            hold.rollback()
            thread.join()
    assert not errors, errors
    clean_state(db)
    assert get_corpus(db, "c").index_params == {"m": 8, "ef_construction": 32}
    db.rollback()
    assert k_hits(db) == 5


def test_the_next_index_command_drops_an_invalid_index_left_by_a_cancelled_build(
    dsn: str, db: Connection, minilm: Any, writer: Callable[[], Connection]
) -> None:
    setup_corpus(db, minilm)
    hold = writer()
    failed: list[BaseException] = []
    with connect(dsn, autocommit=True) as victim:

        def build() -> None:
            try:
                victim.execute(
                    "CREATE INDEX CONCURRENTLY corpus_1_embedding_hnsw_new ON pglogic.corpus_1"
                    " USING hnsw (embedding vector_cosine_ops)"
                )
            except BaseException as exc:
                failed.append(exc)

        thread = threading.Thread(target=build)
        thread.start()
        pid = wait_until(lock_waiter(dsn, "CREATE INDEX", hold.info.backend_pid), "build waits")
        db.execute("SELECT pg_cancel_backend(%s)", (pid,))
        db.rollback()
        thread.join()
    hold.rollback()
    assert [type(e).__name__ for e in failed] == ["QueryCanceled"]
    assert table_indexes(db)[f"{X}_new"] is False  # what an interrupted build leaves

    code, out = run(dsn, "index", "c", "--m", "12", "--ef-construction", "40")
    assert code == 0, out
    assert f"Dropped invalid index {X}_new (left by an interrupted build)" in out
    assert "Built HNSW index (m=12, ef_construction=40)" in out
    clean_state(db)
    assert get_corpus(db, "c").index_params == {"m": 12, "ef_construction": 40}
    db.rollback()


def test_repair_finishes_an_interrupted_swap_and_builds_the_metadata_index(
    dsn: str, db: Connection, minilm: Any
) -> None:
    setup_corpus(db, minilm)
    code, out = run(dsn, "index", "c", "--repair")
    assert (code, out) == (0, "Nothing to repair in corpus 'c'")
    # a rebuild whose client died after the build and before the swap: a valid <name>_new;
    # and a corpus made before every corpus had its metadata index
    db.execute(f"CREATE INDEX {X}_new ON pglogic.corpus_1 USING hnsw (embedding vector_cosine_ops)")
    db.execute(f"DROP INDEX pglogic.{GIN}")
    db.commit()
    code, out = run(dsn, "index", "c", "--repair")
    assert code == 0, out
    assert f"Swapped in {X}_new as {X} (built by an interrupted rebuild)" in out
    assert f"Built the metadata index {GIN} (GIN, jsonb_path_ops)" in out
    clean_state(db)
    assert get_corpus(db, "c").index_params == {"m": 16, "ef_construction": 64}  # the new one's
    db.rollback()
    # a swap that committed but did not drop the old index
    db.execute(f"CREATE INDEX {X}_old ON pglogic.corpus_1 USING hnsw (embedding vector_cosine_ops)")
    db.commit()
    from pglogic.store.corpus import repair_indexes

    assert repair_indexes(db, "c") == [f"Dropped {X}_old (replaced by an interrupted rebuild)"]
    clean_state(db)


def test_repair_mends_what_an_interrupted_passage_index_build_left(
    dsn: str, db: Connection, minilm: Any
) -> None:
    from pglogic.store.corpus import corpus_info, repair_indexes
    from pglogic.store.passages import passage_layout

    create_corpus(db, "c", model=A, dim=384, passages=passage_layout(minilm, 32, 8))
    ingest_records(db, get_corpus(db, "c"), records(40), embedder=minilm, batch_size=32)
    build_index(db, "c", m=16, ef_construction=64)
    p = "corpus_1_passages_embedding_hnsw"

    def passage_indexes() -> dict[str, tuple[bool, list[str] | None]]:
        rows = db.execute(
            "SELECT c.relname, i.indisvalid, c.reloptions FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = 'pglogic.corpus_1_passages'::regclass AND c.relname LIKE %s",
            ("%hnsw%",),
        ).fetchall()
        db.rollback()
        return {str(r[0]): (bool(r[1]), r[2]) for r in rows}

    assert passage_indexes() == {p: (True, ["m=16", "ef_construction=64"])}
    # what an interrupted build of the passages' index leaves: an invalid index, which
    # 'corpus show' names and the repair drops
    db.execute(f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'pglogic.{p}'::regclass")
    db.commit()
    assert corpus_info(db, "c").invalid_indexes == (p,)
    db.rollback()
    code, out = run(dsn, "index", "c", "--repair")
    assert code == 0, out
    assert out == f"Dropped invalid index {p} of the passages (left by an interrupted build)"
    assert passage_indexes() == {}
    clean_state(db)
    # a rebuild whose client died after the build and before the swap: a valid <name>_new
    db.execute(
        f"CREATE INDEX {p} ON pglogic.corpus_1_passages USING hnsw (embedding vector_cosine_ops)"
    )
    db.execute(
        f"CREATE INDEX {p}_new ON pglogic.corpus_1_passages USING hnsw"
        " (embedding vector_cosine_ops) WITH (m = 8)"
    )
    db.commit()
    assert repair_indexes(db, "c") == [
        f"Swapped in {p}_new as {p} (built by an interrupted passage index build)"
    ]
    assert passage_indexes() == {p: (True, ["m=8"])}
    assert repair_indexes(db, "c") == []
    clean_state(db)


def test_kill_9_of_the_client_during_a_rebuild_leaves_a_state_the_next_command_repairs(
    dsn: str, db: Connection, minilm: Any, writer: Callable[[], Connection]
) -> None:
    setup_corpus(db, minilm)
    hold = writer()
    proc = cli(dsn, "index", "c")
    try:
        pid = wait_until(lock_waiter(dsn, "CREATE INDEX", hold.info.backend_pid), "build waits")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    # the server notices the dead client and ends the build, although the writer still holds it
    wait_until(gone(dsn, pid), "the killed client's build ends")
    assert table_indexes(db)[f"{X}_new"] is False
    assert corpus_info(db, "c").invalid_indexes == (f"{X}_new",)  # pglogic corpus show says so
    assert k_hits(db) == 5  # searches never noticed
    hold.rollback()

    code, out = run(dsn, "index", "c")
    assert code == 0, out
    assert f"Dropped invalid index {X}_new (left by an interrupted build)" in out
    clean_state(db)
    assert k_hits(db) == 5


def test_kill_9_during_a_model_switch_leaves_no_half_switch(
    dsn: str, db: Connection, minilm: Any, writer: Callable[[], Connection]
) -> None:
    setup_corpus(db, minilm, n=30)
    admin.add_embedding(db, "c", model=B, dim=384)
    admin.backfill_embedding(db, "c", model=B, embedder=get_embedder(B))
    new = "corpus_1_embedding_2_hnsw"

    # 1. killed while the new column's index builds
    hold = writer()
    proc = cli(dsn, "embedding", "index", "c", "--model", B)
    try:
        pid = wait_until(lock_waiter(dsn, "CREATE INDEX", hold.info.backend_pid), "build waits")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    wait_until(gone(dsn, pid), "the killed client's build ends")
    hold.rollback()
    assert table_indexes(db)[new] is False
    code, out = run(dsn, "embedding", "switch", "c", "--model", B)
    assert code == 2
    assert f"Dropped invalid index {new} (left by an interrupted build)" in out
    assert "column embedding_2 has no valid HNSW index; run: pglogic embedding index" in out
    clean_state(db)
    code, out = run(dsn, "embedding", "index", "c", "--model", B)
    assert code == 0, out
    clean_state(db, hnsw=(X, new))

    # 2. killed while the switch waits for its lock: the transaction never commits
    hold = writer()
    proc = cli(dsn, "embedding", "switch", "c", "--model", B, "--lock-timeout", "10min")
    try:
        pid = wait_until(lock_waiter(dsn, "LOCK TABLE", hold.info.backend_pid), "switch waits")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    wait_until(gone(dsn, pid), "the killed client's switch ends")
    active = db.execute("SELECT model FROM pglogic.embeddings WHERE is_active").fetchall()
    db.rollback()
    assert active == [(A,)]
    assert k_hits(db) == 5
    hold.rollback()

    code, out = run(dsn, "embedding", "switch", "c", "--model", B)
    assert code == 0, out
    active = db.execute("SELECT model FROM pglogic.embeddings WHERE is_active").fetchall()
    db.rollback()
    assert active == [(B,)]
    assert get_corpus(db, "c").column == "embedding_2"
    db.rollback()
    clean_state(db, hnsw=(X, new))


def test_every_corpus_has_a_metadata_index_that_containment_filters_use(db: Connection) -> None:
    corpus = create_corpus(db, "c", model=A, dim=384)
    row = db.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", (GIN,)).fetchone()
    assert row is not None and "USING gin (metadata jsonb_path_ops)" in row[0]
    db.execute(
        "INSERT INTO pglogic.corpus_1 (external_id, text, metadata, text_hash, row_hash,"
        " embedding) SELECT 'd' || i, 'text ' || i,"
        " jsonb_build_object('site', 's' || (i % 500), 'n', i), '\\x00', '\\x00',"
        " array_fill((i % 7 + 1)::real, ARRAY[384])::vector FROM generate_series(1, 10000) i"
    )
    db.execute("ANALYZE pglogic.corpus_1")
    db.commit()
    from psycopg import sql

    where, params = filters_sql([parse_filter("site=s7")], sql.Identifier("metadata"))
    query = sql.SQL("EXPLAIN (FORMAT JSON) SELECT id FROM {} WHERE {}").format(corpus.table, where)
    [[plan]] = db.execute(query, params).fetchall()
    db.rollback()
    assert f'"Index Name": "{GIN}"' in json.dumps(plan)
    ids = db.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE {}").format(corpus.table, where), params
    ).fetchone()
    db.rollback()
    assert ids == (20,)


def test_index_commands_on_one_corpus_take_turns(dsn: str, db: Connection, minilm: Any) -> None:
    from pglogic.store import indexes

    setup_corpus(db, minilm, n=10)
    notes: list[str] = []
    with connect(dsn) as first, connect(dsn) as second:
        c = get_corpus(first, "c")
        first.commit()
        with indexes.Maintenance(first, c) as held:
            assert held.locked
            with indexes.Maintenance(second, c, wait=False) as other:
                assert not other.locked  # a switch's repair skips instead of waiting
            done = threading.Event()

            def rebuild() -> None:
                build_index(second, "c", note=notes.append)
                done.set()

            thread = threading.Thread(target=rebuild)
            thread.start()
            wait_until(lambda: notes, "the second command says it waits")
            assert not done.is_set()
        thread.join()
    assert notes[0].startswith("Waiting for another index command on corpus 'c' (backend ")
    clean_state(db)
