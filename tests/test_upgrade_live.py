"""Upgrade in place under load: searches through ``pglogic.search()`` while the schema moves from
the revision before head to head.

A database at ``head-1`` (:func:`pglogic.store.migrate.upgrade`) gets data in every kind of
pglogic table (:func:`tests.every_table.fill`): a corpus with one vector per document and its
HNSW index, a corpus with a passage layout (its passage table and the passages' HNSW index), a
lexical index on each, term cache entries (every AND's phrase, and the terms of queries sent
without vectors) and stored calibrations (one for a corpus, one for the model). A fixed query set
(:func:`tests.every_table.query_set`: 1, 3 and 8 terms; AND / OR / NOT; k 10 and 100; lexical
terms, cached terms, a calibrated truth, a metadata filter, an exact query) runs through the SQL
function, as the clients of a rolling deploy do: the Python API refuses a schema at a revision
other than its own, the SQL function is the contract. Then 8 clients search without pause while
:func:`pglogic.store.migrate.upgrade` runs (:func:`upgrade_under_load`) and :class:`LockSampler`
reads ``pg_locks`` (``granted = false``) every 10 ms from its own connection: no search may fail,
none may return another ranking than before the upgrade, no backend may wait on a lock for a
second, and afterwards every query ranks as before (same ids, scores to 1e-6), but for the
queries whose defaults a revision changed (:data:`CHANGED_DEFAULTS`).

The helpers are also the body of ``bench/correctness/upgrade_live.py`` (20,000 documents, client processes,
several rounds), which imports them from here and from ``tests/every_table.py``: tests never
import bench/.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import psycopg

from pglogic.store import migrate
from pglogic.store.db import connect
from tests.every_table import (
    Query,
    Ranking,
    difference,
    differences,
    fill,
    query_set,
    ranking,
    small_data,
    sql_rankings,
)

#: How far a score may move across an upgrade (the revision may replace the scoring functions).
SCORE_TOLERANCE = 1e-6
#: Revision -> names of the queries of :func:`tests.every_table.query_set` whose defaults that
#: revision changes (their rankings may differ after an upgrade through it). 0017 and 0018 change
#: none. Older revisions did (0014 ``not_context`` and 0015 ``not_mention``: the queries with a
#: NOT; 0012 and 0013 ``passage_score``; 0006 ``and_text``), but they are squashed into 0017 and
#: no run starts at one of them (``pglogic.store.migrate.upgrade`` does not stop there).
CHANGED_DEFAULTS: dict[str, frozenset[str]] = {}


def changed_defaults(start: str | None, end: str) -> frozenset[str]:
    """The queries whose defaults a revision after ``start`` up to ``end`` changes.

    Example:
        >>> changed_defaults("0016", "0017")
        frozenset()
    """
    out: set[str] = set()
    for rev, names in CHANGED_DEFAULTS.items():
        if (start is None or rev > start) and rev <= end:
            out |= names
    return frozenset(out)


# -- the clients ----------------------------------------------------------------------------------


def client(
    dsn: str,
    jobs: list[tuple[str, str, str]],
    expected: Mapping[str, Ranking],
    first: int,
    stop: Any,
    ready: Any,
    out: Any,
) -> None:
    """One client: after one pass over ``jobs`` (name, corpus, query JSON) from job ``first``
    (its connection's plans warm), put its backend pid in ``ready``, then search without pause,
    in turn, until ``stop`` is set; put in ``out`` each search's start (epoch) and duration, the
    failed ones (time, query, error; the warm-up's too) and the ones whose ranking differs from
    ``expected``. Runs as a thread or as a forked process (``stop``, ``ready``, ``out``:
    threading or multiprocessing events and queues)."""
    searches: list[tuple[float, float]] = []
    errors: list[tuple[float, str, str]] = []
    wrong: list[tuple[float, str, str]] = []
    conn: psycopg.Connection[Any] | None = None
    pid = None

    def search(job: tuple[str, str, str], record: bool) -> None:
        nonlocal conn
        name, corpus, body = job
        if conn is None or conn.broken:
            conn = connect(dsn, autocommit=True, vector=False)
        t0, p0 = time.time(), time.perf_counter()
        try:
            got = ranking(conn, corpus, body)
        except psycopg.Error as exc:
            first_line = (str(exc).strip().splitlines() or [""])[0]
            errors.append((t0, name, f"{type(exc).__name__} [{exc.sqlstate}] {first_line}"))
            return
        if record:
            searches.append((t0, time.perf_counter() - p0))
            if name in expected:
                diff = difference(expected[name], got, tolerance=SCORE_TOLERANCE)
                if diff is not None:
                    wrong.append((t0, name, diff))

    try:
        conn = connect(dsn, autocommit=True, vector=False)
        pid = conn.info.backend_pid
        for i in range(first, first + len(jobs)):
            search(jobs[i % len(jobs)], record=False)
        ready.put(pid)
        i = first
        while not stop.is_set():
            search(jobs[i % len(jobs)], record=True)
            i += 1
    finally:
        if pid is None:  # could not connect: say so rather than leave the caller waiting
            ready.put(None)
        if conn is not None:
            conn.close()
        out.put({"pid": pid, "searches": searches, "errors": errors, "wrong": wrong})


# -- lock waits -----------------------------------------------------------------------------------

LOCK_WAITS = """
SELECT l.pid, l.locktype, l.mode,
       CASE WHEN l.relation IS NOT NULL THEN l.relation::regclass::text
            WHEN l.locktype = 'transactionid' THEN 'transaction ' || l.transactionid
            WHEN l.locktype = 'virtualxid' THEN 'virtual transaction ' || l.virtualxid
            WHEN l.classid IS NOT NULL THEN l.classid::regclass::text || ' ' || l.objid
            ELSE l.locktype END,
       extract(epoch FROM clock_timestamp() - l.waitstart)::float8,
       a.backend_type, left(a.query, 300), pg_blocking_pids(l.pid)
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE NOT l.granted AND a.datname = current_database() AND l.pid <> pg_backend_pid()
"""


class LockSampler(threading.Thread):
    """Reads the lock waits of the database's backends every ``interval`` seconds from its own
    connection (``pg_locks`` with ``granted = false`` joined with ``pg_stat_activity``).

    A wait is one backend waiting for one lock over consecutive samples; its length is the
    server's ``clock_timestamp() - waitstart`` at its last sample (PostgreSQL >= 14), or the time
    between its first and last sample while ``waitstart`` is not yet set. :meth:`summary` gives
    the longest wait, which lock and who held it."""

    def __init__(self, dsn: str, interval: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.dsn, self.interval = dsn, interval
        self._halt = threading.Event()
        self.waits: list[dict[str, Any]] = []
        self._open: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.samples: list[tuple[float, float]] = []  # (epoch, perf_counter) of each sample
        self.error: str | None = None

    def run(self) -> None:
        try:
            with connect(self.dsn, autocommit=True, vector=False) as conn:
                while not self._halt.is_set():
                    t = time.perf_counter()
                    self._sample(conn, t)
                    self._halt.wait(max(0.0, self.interval - (time.perf_counter() - t)))
        except psycopg.Error as exc:  # reported by summary(), never silently
            self.error = f"{type(exc).__name__}: {exc}"

    def _sample(self, conn: psycopg.Connection[Any], t: float) -> None:
        now = time.time()
        rows = conn.execute(LOCK_WAITS).fetchall()
        self.samples.append((now, t))
        seen = set()
        for pid, locktype, mode, target, waited, backend, query, blockers in rows:
            key = (pid, locktype, mode, target)
            seen.add(key)
            wait = self._open.get(key)
            if wait is None:
                holders = conn.execute(
                    "SELECT pid, backend_type, left(query, 300) FROM pg_stat_activity"
                    " WHERE pid = ANY(%s)",
                    (list(blockers or []),),
                ).fetchall()
                wait = {
                    "pid": pid, "lock": f"{mode} on {locktype} {target}", "backend": backend,
                    "query": query, "first_seen": now, "first_t": t, "wait_s": 0.0,
                    "blocked_by": [{"pid": h[0], "backend": h[1], "query": h[2]} for h in holders],
                }  # fmt: skip
                self._open[key] = wait
                self.waits.append(wait)
            wait["last_seen"] = now
            wait["wait_s"] = max(wait["wait_s"], waited or 0.0, t - wait["first_t"])
        for key in set(self._open) - seen:
            del self._open[key]

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def summary(self, lo: float = float("-inf"), hi: float = float("inf")) -> dict[str, Any]:
        """The waits seen between epochs ``lo`` and ``hi``: how many, the longest (seconds, which
        lock, the waiting and the holding statements), and how often the sampler looked."""
        waits = [w for w in self.waits if w["last_seen"] >= lo and w["first_seen"] <= hi]
        waits.sort(key=lambda w: -w["wait_s"])
        ts = [s[1] for s in self.samples if lo <= s[0] <= hi]
        gaps = np.diff(ts) if len(ts) > 1 else np.array([0.0])
        clean = [{k: v for k, v in w.items() if k != "first_t"} for w in waits[:10]]
        return {
            "samples": len(ts),
            "mean_interval_ms": round(float(np.mean(gaps)) * 1000, 2),
            "max_interval_ms": round(float(np.max(gaps)) * 1000, 2),
            "waits": len(waits),
            "longest_wait_s": round(waits[0]["wait_s"], 4) if waits else 0.0,
            "longest": clean,
            "sampler_error": self.error,
        }


# -- the upgrade under load -----------------------------------------------------------------------


def latency(durations: list[float]) -> dict[str, Any]:
    """Count, p50 / p99 / max in milliseconds."""
    if not durations:
        return {"searches": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    ms = np.asarray(durations) * 1000
    return {
        "searches": len(durations),
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "max_ms": round(float(ms.max()), 2),
    }


def upgrade_under_load(
    dsn: str,
    queries: list[Query],
    expected: Mapping[str, Ranking],
    *,
    clients: int = 8,
    processes: bool = False,
    settle: float = 1.0,
    revision: str = "head",
    skip: Iterable[str] = (),
) -> dict[str, Any]:
    """Upgrade the database of ``dsn`` to ``revision`` while ``clients`` threads (or forked
    processes) run the query set without pause, each on its own connection, and a
    :class:`LockSampler` watches; ``settle`` seconds of searches before and after.

    Returns the revisions, the upgrade's duration, the searches' latency before / during /
    after it (during: the searches that overlap it), the failed searches, the searches whose
    ranking differed from ``expected`` (but for the queries in ``skip``) and the lock waits.
    """
    jobs = [(q.name, q.corpus, q.body()) for q in queries]
    left_out = set(skip)
    want = {n: r for n, r in expected.items() if n not in left_out}
    ctx = mp.get_context("fork")
    stop: Any = ctx.Event() if processes else threading.Event()
    ready: Any = ctx.Queue() if processes else queue.Queue()
    out: Any = ctx.Queue() if processes else queue.Queue()
    make: Any = ctx.Process if processes else threading.Thread
    workers = [
        make(target=client, args=(dsn, jobs, want, i * len(jobs) // clients, stop, ready, out),
             daemon=True)
        for i in range(clients)
    ]  # fmt: skip
    for w in workers:
        w.start()
    sampler = LockSampler(dsn)
    start = migrate.current(dsn)
    try:
        pids = [ready.get(timeout=600) for _ in workers]
        sampler.start()
        time.sleep(settle)
        u0, p0 = time.time(), time.perf_counter()
        migrate.upgrade(dsn, revision)
        upgrade_s, u1 = time.perf_counter() - p0, time.time()
        time.sleep(settle)
    finally:
        stop.set()
        logs = [out.get(timeout=600) for _ in workers]
        for w in workers:
            w.join()
        if sampler.is_alive():
            sampler.stop()
    searches = [s for log in logs for s in log["searches"]]
    errors = sorted(e for log in logs for e in log["errors"])
    wrong = sorted(e for log in logs for e in log["wrong"])
    during = [d for t, d in searches if t <= u1 and t + d >= u0]
    locks = sampler.summary()
    client_pids = set(pids)
    return {
        "from_revision": start,
        "to_revision": migrate.current(dsn),
        "upgrade_s": round(upgrade_s, 3),
        "clients": clients,
        "client_kind": "processes" if processes else "threads",
        "queries": len(jobs),
        "searches": len(searches) + len(errors),
        "latency": {
            "before": latency([d for t, d in searches if t + d < u0]),
            "during": latency(during),
            "after": latency([d for t, d in searches if t > u1]),
        },
        "failed": len(errors),
        "failed_during": sum(1 for t, _, _ in errors if u0 <= t <= u1),
        "first_errors": [f"{n}: {m}" for _, n, m in errors[:5]],
        "wrong": len(wrong),
        "first_wrong": [f"{n}: {m}" for _, n, m in wrong[:5]],
        "locks": locks,
        "locks_during": sampler.summary(u0, u1),
        "client_lock_waits": sum(1 for w in sampler.waits if w["pid"] in client_pids),
        "longest_client_wait_s": round(
            max((w["wait_s"] for w in sampler.waits if w["pid"] in client_pids), default=0.0), 4
        ),
    }


# -- the test -------------------------------------------------------------------------------------


def test_upgrade_under_load_fails_no_search_and_keeps_every_ranking(empty_dsn: str) -> None:
    migrate.upgrade(empty_dsn, "head-1")
    start, head = migrate.current(empty_dsn), migrate.head()
    assert start is not None and start != head
    data = small_data(5, dim=48, docs=1500, passage_docs=600, clusters=60)
    queries = query_set(data.term_vectors)
    filled = fill(empty_dsn, data, queries, calibration_source="upgrade_live")
    assert filled["rows"] and all(n > 0 for n in filled["rows"].values()), filled["rows"]
    before = sql_rankings(empty_dsn, queries)
    assert all(len(before[q.name]) == q.k for q in queries), {n: len(r) for n, r in before.items()}
    skip = changed_defaults(start, head)

    res = upgrade_under_load(empty_dsn, queries, before, clients=8, settle=1.0, skip=skip)

    assert res["to_revision"] == head
    assert res["failed"] == 0, res["first_errors"]
    assert res["wrong"] == 0, res["first_wrong"]
    assert res["locks"]["sampler_error"] is None, res["locks"]["sampler_error"]
    assert res["locks"]["samples"] > 50, res["locks"]
    assert res["locks"]["longest_wait_s"] < 1.0, res["locks"]["longest"]
    assert res["latency"]["before"]["searches"] > 0 and res["latency"]["after"]["searches"] > 0
    assert res["latency"]["during"]["searches"] > 0, res
    after = sql_rankings(empty_dsn, queries)
    assert differences(before, after, skip, tolerance=SCORE_TOLERANCE) == {}


def test_the_lock_sampler_measures_a_wait_and_names_its_holder(dsn: str) -> None:
    """The instrument itself: a SELECT held 0.4 s behind a LOCK TABLE is seen, measured, named."""
    with (
        connect(dsn, autocommit=True, vector=False) as holder,
        connect(dsn, autocommit=True, vector=False) as waiter,
    ):
        holder.execute("CREATE TABLE held (x int)")
        sampler = LockSampler(dsn)
        sampler.start()
        reader = threading.Thread(target=lambda: waiter.execute("SELECT count(*) FROM held"))
        with holder.transaction():
            holder.execute("LOCK TABLE held IN ACCESS EXCLUSIVE MODE")
            reader.start()
            time.sleep(0.4)
        reader.join()
        sampler.stop()
    seen = sampler.summary()
    assert seen["waits"] == 1 and 0.3 < seen["longest_wait_s"] < 2.0, seen
    wait = seen["longest"][0]
    assert wait["lock"] == "AccessShareLock on relation held", wait
    assert "count(*)" in wait["query"] and "LOCK TABLE" in wait["blocked_by"][0]["query"], wait
