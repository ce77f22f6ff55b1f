"""Changing a corpus's embedding model without downtime: add, backfill, index, switch, drop."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from pglogic import PgLogic
from pglogic.embed.registry import get_embedder, get_query_embedder
from pglogic.engine.compile import SearchOptions
from pglogic.errors import EmbeddingError, InvalidInput, UnknownCorpus
from pglogic.store import admin
from pglogic.store.admin import AdminError
from pglogic.store.corpus import build_index, create_corpus, get_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import search

pytestmark = [pytest.mark.db, pytest.mark.model]

A = "all-MiniLM-L6-v2"
B = "sentence-transformers/all-MiniLM-L6-v2"  # the same packaged model under another name
TOPICS = ["coffee", "crude oil", "gold", "wheat", "interest rates", "shipping", "steel", "sugar"]


def records(n: int, start: int = 0) -> list[Record]:
    return [
        Record(
            f"d{i}",
            f"Report {i} on {TOPICS[i % len(TOPICS)]} markets, prices and trade.",
            f"{TOPICS[i % len(TOPICS)].title()} {i}" if i % 3 else None,
        )
        for i in range(start, start + n)
    ]


def setup_corpus(conn: Connection, minilm: Any, name: str = "c", n: int = 40) -> None:
    create_corpus(conn, name, model=A, dim=384)
    ingest_records(conn, get_corpus(conn, name), records(n), embedder=minilm, batch_size=16)
    build_index(conn, name)


def vectors(conn: Connection, column: str, table: str = "corpus_1") -> dict[str, Any]:
    rows = conn.execute(
        f"SELECT external_id, {column} FROM pglogic.{table} ORDER BY id"  # test-only SQL
    ).fetchall()
    conn.rollback()
    return {r[0]: None if r[1] is None else r[1].to_numpy() for r in rows}


@pytest.fixture
def db(dsn: str) -> Iterator[Connection]:
    with connect(dsn) as c:
        yield c


def test_switch_step_by_step_with_refusals(db: Connection, minilm: Any) -> None:
    setup_corpus(db, minilm)
    [e] = admin.list_embeddings(db, "c")
    assert (e.model, e.column, e.active, e.embedded, e.documents) == (A, "embedding", True, 40, 40)
    assert e.index_name == "corpus_1_embedding_hnsw" and e.index_valid and e.ready

    new = admin.add_embedding(db, "c", model=B, dim=384)
    assert (new.column, new.active, new.embedded, new.missing) == ("embedding_2", False, 0, 40)
    assert get_corpus(db, "c").column == "embedding"  # searches still use the old column
    db.commit()

    with pytest.raises(AdminError) as exc:
        admin.switch_embedding(db, "c", model=B)
    assert str(exc.value) == (
        "Refusing to switch corpus 'c' to 'sentence-transformers/all-MiniLM-L6-v2': 40 documents"
        " have no 'sentence-transformers/all-MiniLM-L6-v2' vector yet; run: pglogic embedding"
        " backfill c --model sentence-transformers/all-MiniLM-L6-v2"
    )

    # an interrupted backfill keeps its committed batches and resumes with the NULL rows only
    emb_b = get_embedder(B)
    seen: list[tuple[int, int]] = []

    def interrupt(done: int, n: int) -> None:
        seen.append((done, n))
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        admin.backfill_embedding(db, "c", model=B, embedder=emb_b, batch_size=8, on_batch=interrupt)
    assert seen == [(8, 8), (16, 8)]
    assert admin.get_embedding(db, "c", B).embedded == 16
    totals: list[int] = []
    assert (
        admin.backfill_embedding(
            db, "c", model=B, embedder=emb_b, batch_size=8, on_start=totals.append
        )
        == 24
    )
    assert totals == [24]
    assert admin.backfill_embedding(db, "c", model=B, embedder=emb_b) == 0  # nothing left
    old, fresh = vectors(db, "embedding"), vectors(db, "embedding_2")
    for key, v in old.items():  # same model, so the backfilled vectors equal the ingested ones
        assert float(np.dot(v, fresh[key])) > 0.999

    with pytest.raises(
        AdminError,
        match=r"column embedding_2 has no valid HNSW index; run: "
        r"pglogic embedding index c --model sentence-transformers/all-MiniLM-L6-v2",
    ):
        admin.switch_embedding(db, "c", model=B)
    admin.build_embedding_index(db, "c", model=B, m=8, ef_construction=32)
    info = admin.switch_embedding(db, "c", model=B)
    assert info.active and info.ready and info.index_params == {"m": 8, "ef_construction": 32}
    c = get_corpus(db, "c")
    assert (c.column, c.model, c.index_name) == ("embedding_2", B, "corpus_1_embedding_2_hnsw")
    db.commit()
    assert admin.switch_embedding(db, "c", model=B).active  # already active: a no-op

    with pytest.raises(
        AdminError,
        match=r"Refusing to drop 'sentence-transformers/all-MiniLM-L6-v2': "
        r"it is the active embedding of corpus 'c'; switch first",
    ):
        admin.drop_embedding(db, "c", model=B)
    admin.switch_embedding(db, "c", model=A)  # switching back works while the old column is kept
    assert get_corpus(db, "c").column == "embedding"
    admin.switch_embedding(db, "c", model=B)
    admin.drop_embedding(db, "c", model=A)
    assert [(e.model, e.column, e.active) for e in admin.list_embeddings(db, "c")] == [
        (B, "embedding_2", True)
    ]
    cols = {r[0] for r in db.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'pglogic.corpus_1'::regclass"
        " AND attnum > 0 AND NOT attisdropped").fetchall()}  # fmt: skip
    assert "embedding" not in cols and "embedding_2" in cols
    idx = {r[0] for r in db.execute("SELECT indexname FROM pg_indexes WHERE schemaname='pglogic'")}
    assert "corpus_1_embedding_hnsw" not in idx and "corpus_1_embedding_2_hnsw" in idx
    db.commit()
    hits = search(db, get_corpus(db, "c"), '"gold" AND NOT "steel"', embedder=emb_b).hits
    assert len(hits) == 10 and "gold" in hits[0].title.lower()

    # the next new column takes the next free name, even the first one is gone
    assert admin.add_embedding(db, "c", model=A, dim=384).column == "embedding_3"


def test_errors_are_one_sentence(db: Connection, minilm: Any) -> None:
    setup_corpus(db, minilm, n=5)
    admin.add_embedding(db, "c", model=B, dim=384)
    with pytest.raises(
        AdminError,
        match=r"^Corpus 'c' already has an embedding for model "
        r"'sentence-transformers/all-MiniLM-L6-v2' \(column embedding_2\)$",
    ):
        admin.add_embedding(db, "c", model=B, dim=384)
    with pytest.raises(
        AdminError,
        match=r"^Corpus 'c' has no embedding for model 'x'; it has: "
        r"'all-MiniLM-L6-v2', 'sentence-transformers/all-MiniLM-L6-v2'$",
    ):
        admin.switch_embedding(db, "c", model="x")
    with pytest.raises(InvalidInput, match="Invalid dimension 0"):
        admin.add_embedding(db, "c", model="y", dim=0)
    with pytest.raises(UnknownCorpus, match="Unknown corpus 'nope'"):
        admin.add_embedding(db, "nope", model="y", dim=3)
    with pytest.raises(EmbeddingError, match="Embedder 'all-MiniLM-L6-v2' given to backfill"):
        admin.backfill_embedding(db, "c", model=B, embedder=minilm)
    with pytest.raises(InvalidInput, match="Invalid m=1"):
        admin.build_embedding_index(db, "c", model=B, m=1)
    db.execute("SELECT 1")  # an open transaction: CONCURRENTLY cannot run
    with pytest.raises(AdminError, match="cannot run inside a transaction"):
        admin.build_embedding_index(db, "c", model=B)
    db.rollback()
    # the failed statements left nothing behind
    assert [e.column for e in admin.list_embeddings(db, "c")] == ["embedding", "embedding_2"]


def test_a_busy_table_times_out_instead_of_blocking_searches(
    dsn: str, db: Connection, minilm: Any
) -> None:
    setup_corpus(db, minilm, n=5)
    with connect(dsn) as holder:
        holder.execute("SELECT count(*) FROM pglogic.corpus_1")  # open transaction holds a lock
        with pytest.raises(
            AdminError, match=r"^Could not lock the table of corpus 'c' within 100ms"
        ):
            admin.add_embedding(db, "c", model=B, dim=384, lock_timeout="100ms")
        holder.rollback()
    assert len(admin.list_embeddings(db, "c")) == 1


def test_index_rebuild_and_invalid_leftovers(db: Connection, minilm: Any) -> None:
    setup_corpus(db, minilm, n=20)
    admin.add_embedding(db, "c", model=B, dim=384)
    admin.backfill_embedding(db, "c", model=B, embedder=get_embedder(B))
    admin.build_embedding_index(db, "c", model=B)
    oid = db.execute("SELECT 'pglogic.corpus_1_embedding_2_hnsw'::regclass::oid").fetchone()
    db.rollback()
    admin.build_embedding_index(db, "c", model=B, m=12, ef_construction=40)  # rebuild, swapped in
    e = admin.get_embedding(db, "c", B)
    assert e.index_valid and e.index_params == {"m": 12, "ef_construction": 40}
    assert db.execute("SELECT 'pglogic.corpus_1_embedding_2_hnsw'::regclass::oid").fetchone() != oid
    # what an interrupted CREATE INDEX CONCURRENTLY leaves: an invalid index; switch refuses it
    db.execute(
        "UPDATE pg_index SET indisvalid = false"
        " WHERE indexrelid = 'pglogic.corpus_1_embedding_2_hnsw'::regclass"
    )
    db.commit()
    assert not admin.get_embedding(db, "c", B).index_valid
    with pytest.raises(AdminError, match="has no valid HNSW index"):
        admin.switch_embedding(db, "c", model=B)
    admin.build_embedding_index(db, "c", model=B)  # drops the invalid one and builds again
    assert admin.get_embedding(db, "c", B).index_valid
    assert admin.switch_embedding(db, "c", model=B).active
    admin.drop_embedding_index(db, "c", model=A)
    a = admin.get_embedding(db, "c", A)
    assert (a.index_name, a.index_valid) == (None, False)
    admin.build_embedding_index(db, "c", model=A, concurrently=False)
    assert admin.get_embedding(db, "c", A).index_valid
    idx = db.execute(
        "SELECT count(*) FROM pg_indexes WHERE schemaname = 'pglogic' AND indexname LIKE '%hnsw%'"
    ).fetchone()
    assert idx == (2,)


def test_ingest_fills_every_embedding_column(db: Connection, minilm: Any) -> None:
    setup_corpus(db, minilm, n=10)
    admin.add_embedding(db, "c", model=B, dim=384)
    admin.add_embedding(db, "c", model="not-installed-model", dim=384)
    corpus = get_corpus(db, "c")
    changed = Record("d1", "A completely different text about volcanoes.", "Volcanoes")
    stats = ingest_records(db, corpus, [changed, *records(5, start=10)], embedder=minilm)
    assert (stats.inserted, stats.updated) == (5, 1)
    b, nope, a = vectors(db, "embedding_2"), vectors(db, "embedding_3"), vectors(db, "embedding")
    filled = {k for k, v in b.items() if v is not None}
    assert filled == {"d1", *(f"d{i}" for i in range(10, 15))}  # new and changed rows
    for k in filled:
        assert float(np.dot(a[k], b[k])) > 0.999
    assert float(np.dot(b["d1"], minilm.embed([changed.embed_text])[0])) > 0.999
    assert all(v is None for v in nope.values())  # no model here: NULL, never stale
    # a switch started while rows were being ingested: the NULL rows are backfilled
    assert admin.backfill_embedding(db, "c", model=B, embedder=get_embedder(B)) == 9
    # the old active column is filled too by an ingest after the switch
    admin.build_embedding_index(db, "c", model=B)
    admin.switch_embedding(db, "c", model=B)
    ingest_records(db, get_corpus(db, "c"), records(1, start=20), embedder=get_embedder(B))
    assert vectors(db, "embedding")["d20"] is not None


def test_searches_keep_working_during_a_model_switch(dsn: str, minilm: Any) -> None:
    k = 5
    queries = ['"coffee" AND NOT "sugar"', "gold prices", '("wheat" OR "steel") AND NOT "shipping"']
    with connect(dsn) as conn:
        setup_corpus(conn, minilm, name="live", n=200)
    get_query_embedder(B).embed(["warm up"])  # load the second model before the race starts

    stop = threading.Event()
    errors: list[BaseException] = []
    log: list[tuple[int, float, str, int]] = []  # worker, start time, column used, hits
    lock = threading.Lock()

    def worker(i: int) -> None:
        api = PgLogic(dsn)
        n = 0
        try:
            with connect(dsn) as conn:
                while not stop.is_set():
                    q = queries[n % len(queries)]
                    n += 1
                    started = time.monotonic()
                    if i == 0:  # the Python API: a new connection per search
                        res = api.search("live", q, k=k)
                    else:  # the library on a long-lived connection
                        corpus = get_corpus(conn, "live")
                        conn.commit()
                        res = search(
                            conn, corpus, q, embedder=get_query_embedder(corpus.model),
                            options=SearchOptions(k=k),
                        )  # fmt: skip
                    sql_text = res.compiled.as_string()
                    column = "embedding_2" if '"embedding_2"' in sql_text else "embedding"
                    with lock:
                        log.append((i, started, column, len(res.hits)))
        except BaseException as exc:
            errors.append(exc)

    def wait_for_queries(after: float, each: int = 2) -> None:
        deadline = time.monotonic() + 120
        while True:
            with lock:
                counts = [sum(1 for w, t, _, _ in log if w == i and t > after) for i in range(3)]
            if min(counts) >= each or errors:
                return
            assert time.monotonic() < deadline, f"workers stalled: {counts}"
            time.sleep(0.01)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        wait_for_queries(0)
        with connect(dsn) as conn:
            t_add = time.monotonic()
            admin.add_embedding(conn, "live", model=B, dim=384)
            # documents ingested during the switch get vectors for both models
            ingest_records(conn, get_corpus(conn, "live"), records(20, start=200), embedder=minilm)
            assert admin.get_embedding(conn, "live", B).embedded == 20
            wait_for_queries(time.monotonic())
            assert (
                admin.backfill_embedding(
                    conn, "live", model=B, embedder=get_embedder(B), batch_size=32
                )
                == 200
            )
            wait_for_queries(time.monotonic())
            admin.build_embedding_index(conn, "live", model=B)
            wait_for_queries(time.monotonic())
            admin.switch_embedding(conn, "live", model=B)
            t_switch = time.monotonic()
            assert get_corpus(conn, "live").column == "embedding_2"
            conn.commit()
            wait_for_queries(t_switch)  # every client has picked up the switch
            admin.drop_embedding(conn, "live", model=A)
            wait_for_queries(time.monotonic())
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not errors, errors
    assert all(n == k for _, _, _, n in log)
    before = [c for _, t, c, _ in log if t < t_add]
    during = [c for _, t, c, _ in log if t_add <= t < t_switch]
    after = [c for _, t, c, _ in log if t > t_switch]
    assert before and set(before) == {"embedding"}
    assert len(during) >= 6  # searches ran while the column was added, filled and indexed
    assert after and set(after) == {"embedding_2"}


def test_cli_embedding_commands(
    dsn: str, db: Connection, minilm: Any, capsys: Any, monkeypatch: Any
) -> None:
    from pglogic import cli as cli_module
    from pglogic.cli import ui

    monkeypatch.setattr(ui.console, "_width", 200)  # keep rich from wrapping lines

    def run(*args: str, code: int = 0) -> str:
        with pytest.raises(SystemExit) as exc:
            cli_module.main(["--dsn", dsn, *args])
        out = capsys.readouterr()
        assert exc.value.code == code, out.err
        text = out.out if code == 0 else out.err
        return " ".join(re.sub("[\u2500-\u257f]", " ", text).split())  # no table borders

    setup_corpus(db, minilm, name="news", n=12)
    assert "all-MiniLM-L6-v2 384 embedding yes 12/12 corpus_1_embedding_hnsw" in run(
        "embedding", "list", "news"
    )
    assert run("embedding", "add", "news", "--model", B) == (
        f"Added column embedding_2 ({B}, 384-d) to corpus 'news'; 12 documents to backfill"
    )
    assert run("embedding", "add", "news", "--model", A, "--dim", "768", code=2) == (
        "Error: Model 'all-MiniLM-L6-v2' makes 384-d vectors, not 768-d"
    )
    assert run("embedding", "switch", "news", "--model", B, code=2) == (
        f"Error: Refusing to switch corpus 'news' to '{B}': 12 documents have no '{B}' vector"
        f" yet; run: pglogic embedding backfill news --model {B}"
    )
    assert run("embedding", "backfill", "news", "--model", B, "--batch-size", "5") == (
        f"Backfilled 12 {B} vectors in corpus 'news'"
    )
    built = run("embedding", "index", "news", "--model", B, "--m", "8", "--ef-construction", "32")
    assert built.startswith(
        f"Built HNSW index corpus_1_embedding_2_hnsw on embedding_2 ({B}; m=8, ef_construction=32)"
    )
    assert run("embedding", "switch", "news", "--model", B) == (
        f"Corpus 'news' now searches with {B} (embedding_2); all-MiniLM-L6-v2 (embedding) is"
        " kept until: pglogic embedding drop news --model all-MiniLM-L6-v2"
    )
    assert run("embedding", "switch", "news", "--model", B) == (
        f"Corpus 'news' already searches with {B} (embedding_2)"
    )
    assert run("embedding", "drop", "news", "--model", B, "--yes", code=2).startswith(
        f"Error: Refusing to drop '{B}': it is the active embedding of corpus 'news'"
    )
    assert run("embedding", "drop", "news", "--model", A, code=2) == (
        "Error: Refusing to drop 'all-MiniLM-L6-v2' of 'news' without confirmation: pass --yes"
    )
    assert run("embedding", "drop", "news", "--model", A, "--yes") == (
        "Dropped column embedding (all-MiniLM-L6-v2) of corpus 'news'"
    )
    listing = run("embedding", "list", "news")
    assert f"{B} 384 embedding_2 yes 12/12 corpus_1_embedding_2_hnsw" in listing
    assert "all-MiniLM-L6-v2 384 embedding " not in listing
    assert run("search", "news", "gold", "-k", "3", "--json").count('"id"') == 3
    assert run("embedding", "backfill", "nope", "--model", B, code=2) == (
        "Error: Unknown corpus 'nope'; existing: news"
    )
