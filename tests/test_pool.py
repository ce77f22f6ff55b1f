"""The Python API under threads: one connection pool, prepared statements, custom plans, k rows.

Real Postgres + pgvector with HNSW indexes, hand-made 4-d vectors (these tests are about
execution, not retrieval quality); the terms' vectors sit in ``pglogic.term_cache``, so no
model is loaded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pglogic import PgLogic
from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.filters import parse_filter
from pglogic.engine.render import render
from pglogic.engine.source import Corpus
from pglogic.errors import SearchTimeout
from pglogic.query import parse
from pglogic.store.corpus import build_index, create_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import search
from pglogic.store.term_cache import remember_term_vectors

E = np.eye(4)
TERMS = {"A": E[0], "B": E[1], "C": E[2]}
# the AND texts of the default (pglogic.engine.conjunction), cached like the terms
TERMS["A and B"] = (E[0] + E[1]) / np.sqrt(2)
TERMS["B and C"] = (E[1] + E[2]) / np.sqrt(2)
N_DOCS = 3000
QUERIES = ['"A"', '"A" AND "B"', '"A" OR "B"', '"A" AND NOT "C"', '"A" OR ("B" AND "C")']


def records() -> list[Record]:
    rng = np.random.default_rng(3)
    out = []
    for i in range(N_DOCS):
        vec = E[i % 4] + 0.6 * rng.random(4)
        meta = {"g": i % 100, "site": "rare" if i % 500 == 1 else "common"}
        out.append(Record(f"d{i}", f"doc {i}", None, meta, tuple(map(float, vec))))
    return out


@pytest.fixture(scope="module")
def pool_db(pg_server: Any) -> Iterator[str]:
    import uuid

    from tests.conftest import TEMPLATE_DB

    name = f"t_pool_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    dsn = pg_server.dsn_for(name)
    with connect(dsn, autocommit=True) as conn:
        corpus = create_corpus(conn, "p", model="hand", dim=4)
        ingest_records(conn, corpus, records(), embedder=None)
        build_index(conn, "p")
        remember_term_vectors(conn, corpus, {t: v.astype(np.float32) for t, v in TERMS.items()})
        conn.execute("ANALYZE")
    try:
        yield dsn
    finally:
        janitor.drop()


def ids(pl: PgLogic, query: str, **kw: Any) -> list[str]:
    return [h.external_id for h in pl.search("p", query, remember_terms=False, **kw).hits]


def test_threads_share_one_pool_and_get_the_serial_results(pool_db: str) -> None:
    """8 threads, 3 connections: every search gives the serial answer, no error, and the
    server never sees more than the pool's connections (old code: one connection per call)."""
    with PgLogic(pool_db, pool_size=3) as pl:
        want = {q: ids(pl, q, k=10) for q in QUERIES}
        assert all(len(v) == 10 for v in want.values())
        errors: list[BaseException] = []
        wrong: list[str] = []
        peak = [0]
        stop = threading.Event()

        def watch() -> None:
            with connect(pool_db, autocommit=True) as conn:
                while not stop.is_set():
                    row = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        # not autovacuum or a search's parallel workers: connections only
                        " AND backend_type = 'client backend'"
                    ).fetchone()
                    peak[0] = max(peak[0], int(row[0]) if row else 0)
                    stop.wait(0.005)

        def work(n: int) -> None:
            try:
                for i in range(25):
                    q = QUERIES[(n + i) % len(QUERIES)]
                    if ids(pl, q, k=10) != want[q]:
                        wrong.append(q)
            except BaseException as exc:  # collected and asserted below
                errors.append(exc)

        watcher = threading.Thread(target=watch)
        watcher.start()
        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        watcher.join()
    assert errors == [] and wrong == []
    assert 1 <= peak[0] <= 3


def test_a_shape_searched_again_runs_as_a_prepared_statement(pool_db: str) -> None:
    with PgLogic(pool_db, pool_size=1) as pl:
        for _ in range(7):
            assert len(ids(pl, '"A" AND NOT "C"', k=5)) == 5
        with pl.pooled() as conn:  # the pool's one connection, the one that ran the searches
            row = conn.execute(
                "SELECT count(*) FROM pg_prepared_statements"
                " WHERE statement LIKE 'WITH %' AND statement LIKE '%ORDER BY score DESC%'"
            ).fetchone()
    assert row is not None and row[0] >= 1


def explain_execute(conn: psycopg.Connection[Any], values: list[Any]) -> str:
    args = sql.SQL(", ").join(sql.Literal(v) for v in values).as_string(conn)
    return "\n".join(r[0] for r in conn.execute("EXPLAIN EXECUTE s(" + args + ")"))


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("where", [None, "g<10"])
def test_the_sixth_run_of_a_prepared_statement_still_scans_the_hnsw_index(
    pool_db: str, query: str, where: str | None
) -> None:
    """After 5 runs PostgreSQL may plan a prepared statement generically (for any k, depth and
    filter value); those plans sort the whole table instead of scanning the HNSW index. The
    compiled settings force custom plans: the 6th-9th runs keep the index and the rows."""
    # (sequential scans discouraged, as on a large corpus: 3,000 rows are cheaper to sort)
    dsn = make_conninfo(pool_db, options="-c enable_seqscan=off")
    with connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT table_name FROM pglogic.corpora WHERE name = 'p'").fetchone()
        assert row is not None
        corpus = Corpus(1, "p", str(row[0]), "hand", 4, "cosine", "embedding", None, None)
        filters = (parse_filter(where),) if where else ()
        compiled = compile_query(parse(query), corpus, SearchOptions(k=10, filters=filters))
        assert compiled.settings["plan_cache_mode"] == "force_custom_plan"
        rendered = render(compiled, "numbered")
        values = rendered.values({t: v.astype(np.float32) for t, v in TERMS.items()})
        conn.execute("PREPARE s AS " + rendered.text)
        try:
            for name, value in compiled.settings.items():
                conn.execute("SELECT set_config(%s, %s, false)", (name, value))
            first = conn.execute(
                sql.SQL("EXECUTE s({})").format(sql.SQL(", ").join(map(sql.Literal, values)))
            ).fetchall()
            for _ in range(5):
                conn.execute(
                    sql.SQL("EXECUTE s({})").format(sql.SQL(", ").join(map(sql.Literal, values)))
                )
            for _ in range(3):  # the 7th-9th runs: still the custom plan with the index
                plan = explain_execute(conn, values)
                assert "_hnsw" in plan and "Index Scan using" in plan, plan
            again = conn.execute(
                sql.SQL("EXECUTE s({})").format(sql.SQL(", ").join(map(sql.Literal, values)))
            ).fetchall()
            assert again == first and len(first) == 10
        finally:
            conn.execute("DEALLOCATE s")


def no_model() -> Any:
    raise AssertionError("every term is in the term cache: no model is loaded")


def test_a_rare_filter_still_returns_k_rows(pool_db: str) -> None:
    """An iterative scan stops at hnsw.max_scan_tuples; under a filter that few rows pass it can
    end with fewer than k: search() then scores every matching row."""
    with connect(pool_db) as conn:
        row = conn.execute("SELECT table_name FROM pglogic.corpora WHERE name = 'p'").fetchone()
        assert row is not None
        corpus = Corpus(1, "p", str(row[0]), "hand", 4, "cosine", "embedding", None, None)
        conn.commit()
        conn.execute("SET hnsw.max_scan_tuples = 20")  # the scan gives up early
        conn.execute("SET enable_seqscan = off")  # (and the GIN index is not chosen either)
        conn.execute("SET enable_bitmapscan = off")
        conn.commit()
        opts = SearchOptions(k=5, filters=(parse_filter("site=rare"),), depth=5)
        res = search(conn, corpus, '"B"', embedder=no_model, options=opts, use_term_cache=True,
                     remember_terms=False)  # fmt: skip
    assert len(res.hits) == 5
    assert all(h.metadata["site"] == "rare" for h in res.hits)


def test_timeout_cancels_the_statement_with_a_clear_error(pool_db: str) -> None:
    with PgLogic(pool_db, pool_size=1) as pl:
        with pytest.raises(SearchTimeout, match=r"after its timeout of 0\.001 s"):
            # an exact scan of 3,000 rows takes longer than a millisecond
            for _ in range(20):
                pl.search("p", '"A" AND NOT "B"', exact=True, k=10, timeout=0.001)
        assert len(ids(pl, '"A"', k=3)) == 3  # the pooled connection is still good
