"""Loading, querying and checking a synthetic corpus: what ``bench/perf/scale.py`` and the benchmarks
built on its data share.

The corpus ``scale`` of ``make_dataset`` vectors (:func:`load`: ``ingest_records`` then
``build_index``), the kept databases ``bench_scale_<size>_<data>_<seed>`` (:func:`kept_database`),
the query shapes (:func:`shapes`), the metadata filters (:data:`FILTERS`, :data:`FILTER_MASK`),
given term vectors (:class:`Vectors`), the exact top k of a formula in NumPy (:func:`exact_top`),
recall, timed ``search()`` calls, the index plan of a query and the server's memory
(:class:`MemorySampler`). Moved out of ``bench/perf/scale.py``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import psutil
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.lib.benchlib import phrase_vectors, truth_vectors
from bench.lib.synthetic import DIM, Dataset
from pglogic.engine.compile import CompiledQuery, SearchOptions, compile_query
from pglogic.engine.compile import set_local as set_local_statements
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, with_and_texts
from pglogic.engine.filters import Comparison, Filter
from pglogic.engine.operators import DEFAULT_FAMILY, evaluate_numpy
from pglogic.engine.source import Corpus
from pglogic.query import Node
from pglogic.store.corpus import build_index, corpus_info, create_corpus, get_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import estimate_filter, search, server_has_iterative_scan

DB_NAME = "bench_scale"


#: HNSW build parameters of the benchmark corpora (pglogic's build_index defaults).
HNSW_M = 16


HNSW_EF_CONSTRUCTION = 128


FILTERS: dict[str, tuple[Filter, ...]] = {
    "none": (),
    "10%": (Comparison("g", "<", 10),),
    "1%": (Comparison("g", "=", 0),),
}


FILTER_MASK: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "none": lambda g: np.ones(len(g), dtype=bool),
    "10%": lambda g: g < 10,
    "1%": lambda g: g == 0,
}


def shapes(term_counts: Sequence[int]) -> dict[str, str]:
    """Shape name -> query text: AND / OR / NOT (last half negated) per number of terms."""
    out = {"1 term": '"t1"'}
    for n in term_counts:
        if n == 1:
            continue
        ts = [f'"t{i + 1}"' for i in range(n)]
        out[f"AND {n}"] = " AND ".join(ts)
        out[f"OR {n}"] = " OR ".join(ts)
        pos = (n + 1) // 2
        out[f"NOT {n}"] = " AND ".join(ts[:pos] + [f"NOT {t}" for t in ts[pos:]])
    return out


class Vectors:
    """An embedder that returns given vectors (the benchmark's query terms in ``current``);
    a text it does not know, an AND text such as ``t1 and t2``, gets the normalised mean of
    the vectors of the terms it contains (``benchlib.phrase_vectors``)."""

    name = "synthetic"
    dim = DIM

    def __init__(self) -> None:
        self.current: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = phrase_vectors(texts, self.current)
        return np.stack([vecs[t] for t in texts])


class MemorySampler:
    """Samples the summed PSS of the Postgres server's processes in a thread; peak per phase."""

    def __init__(self, postmaster_pid: int | None) -> None:
        self.proc = psutil.Process(postmaster_pid) if postmaster_pid else None
        self.phase = "idle"
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        if self.proc:
            self._thread.start()

    def _run(self) -> None:
        assert self.proc is not None
        while not self._stop.wait(0.25):
            total = 0
            for p in [self.proc, *self.proc.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_full_info().pss
            mib = total / 2**20
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), mib)

    def stop(self) -> None:
        self._stop.set()


def postmaster_pid(conn: Connection) -> int | None:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    conn.rollback()
    try:
        return psutil.Process(int(row[0])).ppid() if row else None
    except psutil.Error:
        return None


def load(conn: Connection, data: Dataset, mem: MemorySampler) -> tuple[Corpus, dict[str, Any]]:
    corpus = create_corpus(conn, "scale", model="synthetic", dim=DIM)

    def records() -> Any:
        for i, (vec, label) in enumerate(zip(data.vectors, data.labels, strict=True)):
            meta = {"c": int(label), "g": i % 100}
            yield Record(f"doc{i}", f"document {i} of cluster {label}", None, meta, vec)

    mem.phase = "load"
    t0 = time.perf_counter()
    ingest_records(conn, corpus, records(), embedder=None, batch_size=5000)
    load_s = time.perf_counter() - t0
    mem.phase = "hnsw build"
    build_s = build_index(conn, "scale", m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION,
                          maintenance_work_mem="4GB")  # fmt: skip
    mem.phase = "idle"
    conn.commit()
    conn.autocommit = True
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(corpus.table))
    info = corpus_info(conn, "scale")
    return get_corpus(conn, "scale"), {
        "load_s": round(load_s, 1),
        "load_rows_per_s": round(len(data.vectors) / load_s),
        "hnsw_build_s": round(build_s, 1),
        "hnsw": f"m={HNSW_M}, ef_construction={HNSW_EF_CONSTRUCTION}",
        "table_mib": round(info.table_bytes / 2**20, 1),
        "index_mib": round(info.index_bytes / 2**20, 1),
    }


def database_exists(dsn: str, name: str) -> bool:
    with connect(dsn) as conn:
        row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return row is not None


def kept_database(base: str, size: int, data: str, seed: int) -> tuple[str, str | None]:
    """The name of the database of (size, data, seed), and its DSN if ``--keep`` left it."""
    name = f"{DB_NAME}_{size}_{data}_{seed}"
    return name, make_conninfo(base, dbname=name) if database_exists(base, name) else None


def exact_top(
    tree: Node,
    data: Dataset,
    vecs: dict[str, np.ndarray],
    mask: np.ndarray,
    k: int,
    and_text: int = DEFAULT_AND_TEXT,
) -> list[int]:
    """Ids (1-based, ingest order) of the exact top k of the formula over the masked rows.

    The formula is the one the engine scores: each AND also scored against its own text
    (``and_text``, :mod:`pglogic.engine.conjunction`), with synthetic phrase vectors, and each
    term negated inside an AND against its context (``benchlib.truth_vectors``).
    """
    vecs = truth_vectors(tree, vecs)
    names = sorted(vecs)
    sims = data.vectors @ np.stack([vecs[t] for t in names]).T
    # the engine's default family: the one every statement of this benchmark compiles with
    by_text = {t: sims[:, i] for i, t in enumerate(names)}
    scores = evaluate_numpy(with_and_texts(tree, and_text), by_text, DEFAULT_FAMILY)
    scores = np.where(mask, scores, -np.inf)
    top = np.argpartition(-scores, k)[:k] if k < len(scores) else np.arange(len(scores))
    top = top[np.lexsort((top, -scores[top]))]
    return [int(i) + 1 for i in top if np.isfinite(scores[i])]


def recall(got: Sequence[int], truth: Sequence[int], k: int) -> float:
    want = set(truth[:k])
    return len(want & set(got[:k])) / len(want) if want else 1.0


def timed_searches(
    conn: Connection,
    corpus: Corpus,
    tree: Node,
    emb: Vectors,
    opts: SearchOptions,
    queries: Sequence[Any],
    truths: Sequence[Sequence[int]],
) -> tuple[list[float], list[float]]:
    """``search()`` once per query (its term vectors in ``emb``): seconds and recall@10 each."""
    lat, rec = [], []
    for vecs, truth in zip(queries, truths, strict=True):
        emb.current = vecs
        t0 = time.perf_counter()
        res = search(conn, corpus, tree, embedder=emb, options=opts)
        lat.append(time.perf_counter() - t0)
        rec.append(recall([h.row_id for h in res.hits], truth, 10))
    return lat, rec


def index_plan(conn: Connection, corpus: Corpus, tree: Node, opts: SearchOptions) -> CompiledQuery:
    """The index (HNSW) plan ``search()`` would compile: same depth, ef_search, guide, settings.

    (``search()`` itself may score very selective filters exactly instead; the baselines always
    get the index plan.)
    """
    iterative = server_has_iterative_scan(conn) and opts.iterative_scan
    selectivity = estimate_filter(conn, corpus, opts.filters)[0] if opts.filters else None
    return compile_query(tree, corpus, opts, server_has_iterative_scan=iterative,
                         filter_selectivity=selectivity)  # fmt: skip


def set_local(conn: Connection, settings: dict[str, str]) -> None:
    """``SET LOCAL name = value`` for every setting (as ``search.execute`` does)."""
    for stmt in set_local_statements(settings):
        conn.execute(stmt)
