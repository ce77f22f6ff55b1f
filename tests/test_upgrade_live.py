"""Upgrade in place under load: searches through ``pglogic.search()`` while the schema moves from
the revision before head to head.

A database at ``head-1`` (:func:`pglogic.store.migrate.upgrade`) gets data in every kind of
pglogic table (:func:`fill`): a corpus with one vector per document and its HNSW index, a corpus
with a passage layout (its passage table and the passages' HNSW index), a lexical index on each,
term cache entries (every AND's phrase, and the terms of queries sent without vectors) and stored
calibrations (one for a corpus, one for the model). A fixed query set (:func:`query_set`: 1, 3
and 8 terms; AND / OR / NOT; k 10 and 100; lexical terms, cached terms, a calibrated truth, a
metadata filter) runs through the SQL function, as the clients of a rolling deploy do: the
Python API refuses a schema at a revision other than its own, the SQL function is the contract.
Then 8 clients search without pause while :func:`pglogic.store.migrate.upgrade` runs
(:func:`upgrade_under_load`) and :class:`LockSampler` reads ``pg_locks`` (``granted = false``)
every 10 ms from its own connection: no search may fail, none may return another ranking than
before the upgrade, no backend may wait on a lock for a second, and afterwards every query ranks
as before (same ids, scores to 1e-6), but for the queries whose defaults a revision changed
(:data:`CHANGED_DEFAULTS`).

The helpers are also the body of ``bench/upgrade_live.py`` (20,000 documents, client processes,
several rounds), which imports them from here: tests never import bench/.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from pglogic.embed.passages import Span
from pglogic.engine.calibration import Calibration
from pglogic.engine.conjunction import and_texts
from pglogic.query import And, Match, Node, Not, Or, Term, parse
from pglogic.store import migrate
from pglogic.store.calibration_store import save_calibration
from pglogic.store.corpus import build_index, create_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.passages import PassageLayout, write_passages
from pglogic.store.readers import Record
from pglogic.store.term_cache import remember_term_vectors

#: The embedding model the synthetic corpora (and their term cache rows) are registered with.
MODEL = "synthetic"
CORPORA = ("plain", "passages")
#: The statement every client runs: the SQL function, as an application at any revision does.
SEARCH = "SELECT external_id, score FROM pglogic.search(%s, %s::jsonb)"
#: Words of the documents' texts; ``wheat`` is the lexical term of the query set.
WORDS = ("wheat", "corn", "coffee", "copper", "sugar", "cotton", "rubber", "cocoa")
SCORE_TOLERANCE = 1e-6
#: Revision -> names of the queries of :func:`query_set` whose defaults that revision changes
#: (their rankings may differ after an upgrade through it). 0017 and 0018 change none. Older
#: revisions did (0014 ``not_context`` and 0015 ``not_mention``: the queries with a NOT; 0012 and
#: 0013 ``passage_score``; 0006 ``and_text``): list them here before starting a run below 0016.
CHANGED_DEFAULTS: dict[str, frozenset[str]] = {}

Ranking = list[tuple[str, float]]


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


# -- the data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    """What :func:`fill` loads: the plain corpus's vectors, each passage document's passages,
    cluster labels (they choose the texts' words) and the query terms' vectors."""

    plain: np.ndarray  # (documents, dim), unit rows
    plain_labels: np.ndarray
    passages: list[np.ndarray]  # per document: (its passages, dim), unit rows
    passage_labels: np.ndarray
    #: (corpus, group, n) -> n term vectors near one topic of that corpus's data
    term_vectors: Callable[[str, str, int], list[np.ndarray]] = field(repr=False)


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def doc_text(i: int, label: int) -> str:
    """A document's text: two words chosen by its cluster (``wheat`` in about a quarter)."""
    n = len(WORDS)
    return f"document {i} about {WORDS[label % n]} and {WORDS[(label // n) % n]}"


def small_data(seed: int, *, dim: int = 48, docs: int = 1500, passage_docs: int = 600) -> Data:
    """Seeded clustered vectors for the test: 60 centres, points near them."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((60, dim)))

    def near(labels: np.ndarray, spread: float) -> np.ndarray:
        noise = rng.standard_normal((len(labels), dim)) / np.sqrt(dim)
        return unit(centres[labels] + spread * noise)

    plain_labels = rng.integers(0, len(centres), docs)
    passage_labels = rng.integers(0, len(centres), passage_docs)
    passages = []
    for label in passage_labels:  # 1-3 passages, the first near the document's cluster
        others = rng.integers(0, len(centres), int(rng.integers(0, 3)))
        passages.append(near(np.concatenate([[label], others]), 0.8))

    def term_vectors(corpus: str, group: str, n: int) -> list[np.ndarray]:
        r = np.random.default_rng([seed, *group.encode()])
        picks = r.choice(len(centres), size=n, replace=False)
        return list(unit(centres[picks] + 0.3 * r.standard_normal((n, dim)) / np.sqrt(dim)))

    return Data(near(plain_labels, 0.8), plain_labels, passages, passage_labels, term_vectors)


def fill(dsn: str, data: Data, queries: list[Query]) -> dict[str, Any]:
    """Put data in every kind of pglogic table; return the row count of each table in schema
    ``pglogic`` and the time each step took.

    Corpus ``plain``: one vector per document, lexical index (english), HNSW index. Corpus
    ``passages``: a passage layout, 1-3 passages per document (the document's own vector is
    their normalised mean), lexical index, HNSW indexes on both tables. The term cache holds
    the queries' AND phrases and the terms of their queries without vectors
    (:func:`term_cache_rows`); a calibration is stored for ``plain`` and one for the model.
    """
    dim = data.plain.shape[1]
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    with connect(dsn) as conn:
        plain = create_corpus(conn, "plain", model=MODEL, dim=dim)
        records = (
            Record(f"d{i}", doc_text(i, int(label)), None, {"g": i % 100}, vec)
            for i, (vec, label) in enumerate(zip(data.plain, data.plain_labels, strict=True))
        )
        ingest_records(conn, plain, records, embedder=None, batch_size=5000)
        steps["plain_load_s"] = time.perf_counter() - t0
        steps["plain_hnsw_s"] = build_index(conn, "plain")
        layout = PassageLayout(64, 16, MODEL)
        pas = create_corpus(conn, "passages", model=MODEL, dim=dim, passages=layout)
        t1 = time.perf_counter()
        texts = [doc_text(i, int(label)) for i, label in enumerate(data.passage_labels)]
        records = (
            Record(f"p{i}", texts[i], None, {"g": i % 100}, unit(vecs.mean(axis=0)))
            for i, vecs in enumerate(data.passages)
        )
        ingest_records(conn, pas, records, embedder=None, batch_size=5000)
        for lo in range(0, len(data.passages), 2000):  # the passages (ingest wrote one each)
            batch = [
                (f"p{i}", [Span(0, len(texts[i]), 8)] * len(data.passages[i]), data.passages[i])
                for i in range(lo, min(lo + 2000, len(data.passages)))
            ]
            write_passages(conn, pas, batch)
            conn.commit()
        steps["passages_load_s"] = time.perf_counter() - t1
        steps["passages_hnsw_s"] = build_index(conn, "passages")
        save_calibration(conn, MODEL, Calibration(0.35, 12.0, "corpus", 0, None),
                         corpus_id=plain.id, source="upgrade_live")  # fmt: skip
        save_calibration(conn, MODEL, Calibration(0.3, 9.0, "corpus", 0, None),
                         source="upgrade_live")  # fmt: skip
        remember_term_vectors(conn, plain, term_cache_rows(queries))
        conn.commit()
        conn.autocommit = True
        assert pas.passage_table is not None
        for table in (plain.table, pas.table, pas.passage_table):
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
        rows = table_rows(conn)
    return {"rows": rows, "steps_s": {k: round(v, 2) for k, v in steps.items()}}


def table_rows(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """The exact row count of every table in schema ``pglogic``."""
    names = [
        str(r[0])
        for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'pglogic' AND c.relkind IN ('r', 'p') ORDER BY 1"
        )
    ]
    out = {}
    for name in names:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("pglogic", name))
        ).fetchone()
        out[name] = int(row[0]) if row else 0
    return out


# -- the query set --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """One query of the fixed set, as the SQL function's JSON (:meth:`body`)."""

    name: str
    corpus: str
    text: str  # in the query language
    k: int
    vectors: Mapping[str, np.ndarray] = field(repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)
    cached: bool = False  # the terms go without vectors: the function reads the term cache

    def body(self) -> str:
        """The query JSON: the tree with each term's vector (none when ``cached``), k, options.
        Written here, not by ``pglogic.engine.render.search_json``: that writes for the head's
        function, and the clients send the same JSON before and after the upgrade."""
        given = {} if self.cached else self.vectors
        return json.dumps({"tree": tree_json(parse(self.text), given), "k": self.k, **self.options})


def tree_json(node: Node, vectors: Mapping[str, np.ndarray]) -> Any:
    """A parsed query as the SQL function's tree, with the terms' vectors from ``vectors``."""
    if isinstance(node, Term):
        if node.text not in vectors:
            return {"term": node.text}
        return {"term": node.text, "vector": [float(x) for x in vectors[node.text]]}
    if isinstance(node, Match):
        return {"match": node.text}
    if isinstance(node, Not):
        return {"op": "not", "arg": tree_json(node.child, vectors)}
    op = "and" if isinstance(node, And) else "or"
    assert isinstance(node, And | Or)
    return {"op": op, "args": [tree_json(c, vectors) for c in node.children]}


def query_set(term_vectors: Callable[[str, str, int], list[np.ndarray]]) -> list[Query]:
    """The fixed queries, per corpus: 1 term; AND / OR / NOT (last half negated) of 3 and of 8
    terms; each at k 10 and 100; then, at k 10, a lexical term under AND and under NOT, a
    formula of cached terms (no vectors sent), a calibrated truth and a metadata filter."""
    out = []
    for corpus in CORPORA:
        for n in (1, 3, 8):
            names = [f"{corpus}-{n}{chr(97 + i)}" for i in range(n)]
            vecs = dict(zip(names, term_vectors(corpus, f"{corpus}{n}", n), strict=True))
            quoted = [f'"{t}"' for t in names]
            if n == 1:
                shapes = {"1 term": quoted[0]}
            else:
                half = (n + 1) // 2
                shapes = {
                    f"AND {n}": " AND ".join(quoted),
                    f"OR {n}": " OR ".join(quoted),
                    f"NOT {n}": " AND ".join(quoted[:half] + [f"NOT {t}" for t in quoted[half:]]),
                }
            for shape, text in shapes.items():
                for k in (10, 100):
                    out.append(Query(f"{corpus} {shape} k={k}", corpus, text, k, vecs))
        a, b, c = names = [f"{corpus}-x{s}" for s in "abc"]
        vecs = dict(zip(names, term_vectors(corpus, f"{corpus}x", 3), strict=True))
        extras = [
            ("lexical AND", f'"{a}" AND match:"wheat"', {}, False),
            ("lexical NOT", f'"{a}" AND "{b}" AND NOT match:"wheat"', {}, False),
            ("cached terms", f'("{a}" OR "{b}") AND NOT "{c}"', {}, True),
            ("calibrated", f'"{a}" AND "{b}"', {"truth": "calibrated"}, False),
            ("filtered", f'"{a}" AND NOT "{c}"',
             {"filters": [{"key": "g", "op": "<", "value": 10}]}, False),
        ]  # fmt: skip
        for shape, text, options, cached in extras:
            out.append(Query(f"{corpus} {shape} k=10", corpus, text, 10, vecs, options, cached))
    return out


def term_cache_rows(queries: Iterable[Query]) -> dict[str, np.ndarray]:
    """The term cache the query set needs: each AND's phrase (the function scores it, and these
    queries send no vector for it), the normalised mean of the vectors of the terms it names;
    and the terms of the queries sent without vectors."""
    out: dict[str, np.ndarray] = {}
    for q in queries:
        if q.cached:
            out.update(q.vectors)
        for phrase in and_texts(parse(q.text)):
            members = [
                v
                for t, v in q.vectors.items()
                if re.search(rf"(?<!\w){re.escape(t)}(?!\w)", phrase)
            ]
            out[phrase] = unit(np.mean(members, axis=0))
    return out


# -- searching ------------------------------------------------------------------------------------


def ranking(conn: psycopg.Connection[Any], corpus: str, body: str) -> Ranking:
    return [(str(r[0]), float(r[1])) for r in conn.execute(SEARCH, (corpus, body))]


def rankings(dsn: str, queries: Iterable[Query]) -> dict[str, Ranking]:
    """Every query's ranking (ids and scores) through the SQL function, on a new connection."""
    with connect(dsn, autocommit=True, vector=False) as conn:
        return {q.name: ranking(conn, q.corpus, q.body()) for q in queries}


def difference(want: Ranking, got: Ranking) -> str | None:
    """How ``got`` differs from ``want`` (ids, then scores to :data:`SCORE_TOLERANCE`), or None."""
    if [i for i, _ in got] != [i for i, _ in want]:
        at = next(
            (n for n, (x, y) in enumerate(zip(want, got, strict=False)) if x[0] != y[0]), None
        )
        at = min(len(want), len(got)) if at is None else at
        return f"ids differ from rank {at + 1} ({len(got)} rows, {len(want)} before)"
    worst = max((abs(x[1] - y[1]) for x, y in zip(want, got, strict=True)), default=0.0)
    if worst > SCORE_TOLERANCE:
        return f"scores differ by up to {worst:.3g}"
    return None


def differences(
    before: Mapping[str, Ranking], after: Mapping[str, Ranking], skip: Iterable[str] = ()
) -> dict[str, str]:
    """Query name -> how its ranking changed, for every query not in ``skip``."""
    left_out = set(skip)
    out = {}
    for name, want in before.items():
        if name not in left_out and (diff := difference(want, after[name])) is not None:
            out[name] = diff
    return out


def max_score_change(before: Mapping[str, Ranking], after: Mapping[str, Ranking]) -> float:
    """The largest change of a score between two runs of the same query set (same ids)."""
    return max(
        (abs(x[1] - y[1]) for n in before for x, y in zip(before[n], after[n], strict=False)),
        default=0.0,
    )


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
            if name in expected and (diff := difference(expected[name], got)) is not None:
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
    data = small_data(seed=5)
    queries = query_set(data.term_vectors)
    filled = fill(empty_dsn, data, queries)
    assert filled["rows"] and all(n > 0 for n in filled["rows"].values()), filled["rows"]
    before = rankings(empty_dsn, queries)
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
    assert differences(before, rankings(empty_dsn, queries), skip) == {}


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
