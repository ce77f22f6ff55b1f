"""Passages at scale: size, load and index build, ingest rate, query latency and recall of a
corpus of 1M passages against the single-vector layout of the same documents, and how deep a
passage scan must go to return k distinct documents.

    python bench/perf/passages_scale.py [--docs 250000] [--queries 30] [--keep] [--reuse] [--quick]
                                        [--phases ...] [--shapes ...]   # ~1 h on a busy 2-core machine

Data (deterministic, ``--seed``): documents shaped like long texts, made of the cluster centres
of ``synthetic.make_dataset`` (100 topics x 10 centres, 384-d). Each document has 1-8 passages
(1 + Binomial(7, 3/7): mean 4, 2% of one passage, 10% of two) on 2-3 clusters (1 for a one-passage
document): its first cluster at random, each other one a centre of the same topic with
probability 0.7, else any centre; passage 0, 1, 2 take the document's clusters in order and
the others one of them at random. A passage is a point of its cluster as in ``make_dataset``'s
``manifold`` data (the cluster's own 48-d subspace plus a little isotropic noise); the passages
of one document on one cluster share half of their within-cluster variance (one document's
passages on a topic resemble each other). The single-vector layout of a document is its first
passage's vector: what a model reading only the first window gives. Metadata
``{"c": first cluster, "g": i % 100}`` (the 10% filter is ``g < 10``).

Phases (results written after each to ``bench/perf/results/passages_scale.{json,md}``):

* ``ingest``: the real model (all-MiniLM-L6-v2, CPU) on ``--ingest-docs`` Reuters documents
  through ``ingest_path``, into a corpus with passages and into one without (ABBA order):
  documents/s, passages/s, the embedding's share of the time, truncated documents;
* ``load``: one corpus with passages (``create_corpus(..., passages=PassageLayout(254, 32))``);
  the documents through ``ingest_records`` with their first passage's vector (the corpus seen
  without its passages: a precomputed vector would be one passage of the whole text), then
  every passage with ``write_passages`` (binary COPY, 5,000 documents per transaction); then
  ``build_index(m=16, ef_construction=128, maintenance_work_mem=4GB)``, which builds the
  documents' and the passages' HNSW indexes (each one's build time from
  ``pg_stat_progress_create_index``); rows, table and index sizes;
* ``depth``: single-term queries: how many passages the scan must return for k = 10 and 100
  distinct documents (the HNSW scan fetched deep and sorted by distance; the exact order in
  NumPy), and how many distinct documents the engine's own scan at its default depth and
  settings returns (a shortfall: fewer than k);
* ``queries``: shapes 1 term, AND 2, OR 2, A AND NOT B, AND 3, A AND B AND NOT C,
  (A OR B) AND NOT C; k = 10, 100; no filter and the 10% filter; per query both layouts in
  rotating order through ``pglogic.store.search.search`` (vectors given): p50/p95 latency,
  recall@10 and recall@k against the exact top k of the same formula in NumPy (a document's
  similarity to a text is its best passage's; the AND texts of the engine at the default
  ``and_text``, the default operator family), rows returned, and for the single-vector layout
  also its recall against the passages' truth (what reading the first window only loses);
* ``plans``: the multi-term shapes over passages (k = 10, 100, no filter) with deeper scans
  (``depth=800``, ``1600``) and with a scan per term (``term_scans=True``): recall and latency;
* ``exact``: ``exact=True`` latency (and recall, a check of the NumPy truth) for the first
  ``--exact-queries`` queries of each shape, k = 10, no filter.

The machine is shared: every phase records the load average (1/5/15 min) at its start and end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    REUTERS,
    drop_database,
    fresh_database,
    machine,
    machine_md,
    md_table,
    percentile,
    server_dsn,
    truth_vectors,
    write_results,
)
from bench.lib.harness import (
    FILTERS,
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    MemorySampler,
    Vectors,
    index_plan,
    postmaster_pid,
    recall,
)
from bench.lib.synthetic import (
    DIM,
    MANIFOLD_NOISE,
    MANIFOLD_SPREAD,
    Dataset,
    make_dataset,
    make_queries,
)
from pglogic.embed.passages import Span
from pglogic.engine.compile import GUIDE_DEPTH, CompiledQuery, SearchOptions
from pglogic.engine.compile import set_local as set_local_statements
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, own_weights, with_and_texts
from pglogic.engine.filters import filters_sql
from pglogic.engine.operators import DEFAULT_FAMILY, evaluate_numpy
from pglogic.engine.options import DEFAULT_PASSAGE_SCORE
from pglogic.engine.source import Corpus
from pglogic.query import Node, parse
from pglogic.store.corpus import build_index, create_corpus, get_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_path, ingest_records
from pglogic.store.passages import PassageLayout, passage_layout, write_passages
from pglogic.store.readers import Record
from pglogic.store.search import search

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "passages_scale"
DB_NAME = "bench_passages_scale"
CORPUS = "passages"
LAYOUTS = ("passages", "single")
#: query shapes (``scale.py``'s names where it has the shape, so its 1M rows can be quoted)
SHAPES: dict[str, str] = {
    "1 term": '"t1"',
    "AND 2": '"t1" AND "t2"',
    "OR 2": '"t1" OR "t2"',
    "NOT 2": '"t1" AND NOT "t2"',
    "AND 3": '"t1" AND "t2" AND "t3"',
    "NOT 3": '"t1" AND "t2" AND NOT "t3"',
    "mixed 3": '("t1" OR "t2") AND NOT "t3"',
}
FILTER_NAMES = ("none", "10%")
#: document shape: passages 1 + Binomial(MAX - 1, p), mean MEAN
MAX_PASSAGES = 8
MEAN_PASSAGES = 4.0
SAME_TOPIC = 0.7  # probability that a document's further cluster is in its first one's topic
DOC_SHARE = 0.5  # within-cluster variance shared by one document's passages on that cluster
RANK = 48
#: the synthetic passage geometry (what the offsets would be with 5 characters per token)
PASSAGE_TOKENS, PASSAGE_OVERLAP, CHARS_PER_TOKEN = 254, 32, 5
PASSAGE_BATCH = 5000  # documents per write_passages transaction
DEPTH_FETCH = 5000  # passages fetched per deep scan in the depth phase


# ------------------------------------------------------------------------------------------ data


@dataclass
class Documents:
    """Synthetic documents: passages grouped by document (rows ``starts[i]`` to
    ``starts[i] + counts[i]`` are document i's, in order), their vectors in ``data.vectors``."""

    data: Dataset  # topics and centres (for make_queries); vectors = passages; labels = cluster
    doc_of: np.ndarray  # (passages,) document index of each passage
    starts: np.ndarray  # (documents,) first passage of each document
    counts: np.ndarray  # (documents,) passages per document
    clusters: np.ndarray  # (documents,) number of distinct clusters the document covers

    @property
    def n_docs(self) -> int:
        return len(self.starts)

    @property
    def n_passages(self) -> int:
        return len(self.doc_of)

    @property
    def first(self) -> np.ndarray:
        """The single-vector layout: each document's first passage's vector."""
        return self.data.vectors[self.starts]

    def summary(self) -> dict[str, Any]:
        hist = np.bincount(self.counts, minlength=MAX_PASSAGES + 1)[1:]
        chist = np.bincount(self.clusters, minlength=4)[1:]
        return {
            "documents": self.n_docs,
            "passages": self.n_passages,
            "passages_per_document_mean": round(float(self.counts.mean()), 3),
            "passages_per_document_hist": {str(i + 1): int(n) for i, n in enumerate(hist)},
            "clusters_per_document_hist": {str(i + 1): int(n) for i, n in enumerate(chist)},
        }


def _normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def make_documents(n_docs: int, seed: int, doc_share: float = DOC_SHARE) -> Documents:
    """The documents and passages of the module docstring; deterministic for ``seed``.
    ``doc_share``: the within-cluster variance one document's passages on a cluster share."""
    base = make_dataset(0, seed, kind="isotropic")  # topics and centres only
    centres, per = base.centres, base.per_topic
    rng = np.random.default_rng(seed + 1)
    p = (MEAN_PASSAGES - 1) / (MAX_PASSAGES - 1)
    counts = 1 + rng.binomial(MAX_PASSAGES - 1, p, size=n_docs)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    doc_of = np.repeat(np.arange(n_docs), counts)
    n_clu = np.minimum(counts, rng.integers(2, 4, size=n_docs))
    first = rng.integers(len(centres), size=n_docs)
    in_topic = (first // per)[:, None] * per + ((first % per)[:, None]
                                               + rng.integers(1, per, size=(n_docs, 2))) % per  # fmt: skip
    anywhere = rng.integers(len(centres), size=(n_docs, 2))
    extra = np.where(rng.random((n_docs, 2)) < SAME_TOPIC, in_topic, anywhere)
    doc_clusters = np.column_stack([first, extra])
    ords = np.arange(len(doc_of)) - starts[doc_of]
    nc = n_clu[doc_of]
    slot = np.where(ords < nc, ords, (rng.random(len(doc_of)) * nc).astype(np.int64))
    labels = doc_clusters[doc_of, slot]
    vectors = np.empty((len(doc_of), DIM), dtype=np.float32)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(len(centres) + 1))
    for c in range(len(centres)):
        members = order[bounds[c] : bounds[c + 1]]
        if not len(members):
            continue
        basis, _ = np.linalg.qr(rng.standard_normal((DIM, RANK)))
        _, inv = np.unique(doc_of[members], return_inverse=True)
        shared = rng.standard_normal((int(inv.max()) + 1, RANK))[inv]
        z = np.sqrt(doc_share) * shared + np.sqrt(1 - doc_share) * rng.standard_normal(
            (len(members), RANK)
        )
        iso = rng.standard_normal((len(members), DIM)) / np.sqrt(DIM)
        vectors[members] = _normalise(
            centres[c] + MANIFOLD_SPREAD * (z / np.sqrt(RANK)) @ basis.T + MANIFOLD_NOISE * iso
        )
    distinct = np.array([len(set(doc_clusters[i, : n_clu[i]])) for i in range(n_docs)])
    data = Dataset(base.topics, centres, per, vectors, labels)
    return Documents(data, doc_of, starts, counts, distinct)


def spans(n: int) -> list[Span]:
    """Synthetic offsets of ``n`` passages of 254 tokens sharing 32 (5 characters a token)."""
    step = (PASSAGE_TOKENS - PASSAGE_OVERLAP) * CHARS_PER_TOKEN
    return [Span(i * step, i * step + PASSAGE_TOKENS * CHARS_PER_TOKEN, PASSAGE_TOKENS)
            for i in range(n)]  # fmt: skip


# --------------------------------------------------------------------------------- bookkeeping


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def phase(results: dict[str, Any], name: str, mem: MemorySampler | None = None) -> Iterator[None]:
    """Record the load average at the start and end of a phase, and its wall time."""
    if mem is not None:
        mem.phase = name
    entry: dict[str, Any] = {"load_avg_start": load_avg(), "started": time.strftime("%H:%M:%S")}
    print(f"== {name} (load average {entry['load_avg_start']})", flush=True)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        entry["load_avg_end"] = load_avg()
        entry["wall_s"] = round(time.perf_counter() - t0, 1)
        results.setdefault("phases", {})[name] = entry
        if mem is not None:
            mem.phase = "idle"


def git_head() -> str:
    try:
        root = Path(__file__).resolve().parents[2]
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "pglogic"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        return head + (" (pglogic/ with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def ms(xs: Sequence[float]) -> dict[str, float]:
    return {"p50": round(percentile(xs, 50) * 1000, 2), "p95": round(percentile(xs, 95) * 1000, 2)}


def dist(xs: Sequence[float]) -> dict[str, float]:
    """min / p5 / p50 / p95 / max of counts."""
    if not xs:
        return {}
    return {"min": float(min(xs)), "p5": round(percentile(xs, 5), 1),
            "p50": round(percentile(xs, 50), 1), "p95": round(percentile(xs, 95), 1),
            "max": float(max(xs))}  # fmt: skip


class BuildWatch:
    """Polls ``pg_stat_progress_create_index`` for one backend: when each index was building."""

    def __init__(self, dsn: str, pid: int) -> None:
        self.dsn, self.pid = dsn, pid
        self.seen: dict[str, list[float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.perf_counter()
        self._thread.start()

    def _run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.wait(0.5):
                rows = conn.execute(
                    "SELECT relid::regclass::text, coalesce(nullif(index_relid, 0)::regclass::text,"
                    " '?') FROM pg_stat_progress_create_index WHERE pid = %s",
                    (self.pid,),
                ).fetchall()
                now = time.perf_counter() - self._t0
                for table, index in rows:
                    span = self.seen.setdefault(f"{index} on {table}", [now, now])
                    span[1] = now

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {k: round(b - a, 1) for k, (a, b) in self.seen.items()}


def relation_sizes(conn: Connection, table: str) -> dict[str, Any]:
    """Rows, table size (with TOAST) and each index's size of ``pglogic.<table>``, in MiB."""
    reg = f"pglogic.{table}"
    row = conn.execute(
        sql.SQL("SELECT count(*), pg_table_size(%s::regclass) FROM {}").format(
            sql.Identifier("pglogic", table)
        ),
        (reg,),
    ).fetchone()
    idx = conn.execute(
        "SELECT i.relname, pg_relation_size(i.oid) FROM pg_index x JOIN pg_class i"
        " ON i.oid = x.indexrelid WHERE x.indrelid = %s::regclass ORDER BY 2 DESC",
        (reg,),
    ).fetchall()
    conn.rollback()
    assert row is not None
    return {
        "rows": int(row[0]),
        "table_mib": round(int(row[1]) / 2**20, 1),
        "indexes_mib": {str(n): round(int(b) / 2**20, 1) for n, b in idx},
    }


# ------------------------------------------------------------------------------------------ load


def load(conn: Connection, dsn: str, docs: Documents, mem: MemorySampler,
         results: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """Create the corpus, load documents then passages, build both HNSW indexes."""
    layout = PassageLayout(PASSAGE_TOKENS, PASSAGE_OVERLAP, "synthetic (5 characters a token)")
    corpus = create_corpus(conn, CORPUS, model="synthetic", dim=DIM, passages=layout)
    first = docs.first

    def records() -> Iterator[Record]:
        for i in range(docs.n_docs):
            meta = {"c": int(docs.data.labels[docs.starts[i]]), "g": i % 100}
            text = f"document {i}: {docs.counts[i]} passages"
            yield Record(f"doc{i}", text, None, meta, first[i])  # type: ignore[arg-type]

    out: dict[str, Any] = {}
    with phase(results, "load documents", mem):
        t0 = time.perf_counter()
        # the corpus seen without its passage table: the documents alone (a given vector would
        # otherwise be written as one passage of the whole text, replaced just below)
        stats = ingest_records(conn, replace(corpus, passage_tokens=None), records(),
                               embedder=None, batch_size=5000)  # fmt: skip
        secs = time.perf_counter() - t0
    out["documents"] = {"rows": stats.inserted, "load_s": round(secs, 1),
                        "rows_per_s": round(stats.inserted / secs)}  # fmt: skip
    print(f"  documents {out['documents']}", flush=True)
    with phase(results, "load passages", mem):
        t0 = time.perf_counter()
        n = 0
        vecs = docs.data.vectors
        for lo in range(0, docs.n_docs, PASSAGE_BATCH):
            batch = [(f"doc{i}", spans(int(docs.counts[i])),
                      vecs[docs.starts[i] : docs.starts[i] + docs.counts[i]])
                     for i in range(lo, min(docs.n_docs, lo + PASSAGE_BATCH))]  # fmt: skip
            n += write_passages(conn, corpus, batch)
            conn.commit()
        secs = time.perf_counter() - t0
    out["passages"] = {"rows": n, "load_s": round(secs, 1), "rows_per_s": round(n / secs)}
    print(f"  passages {out['passages']}", flush=True)
    with phase(results, "hnsw build", mem):
        watch = BuildWatch(dsn, conn.info.backend_pid)
        build_s = build_index(conn, CORPUS, m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION,
                              maintenance_work_mem="4GB")  # fmt: skip
        out["index_builds_s"] = watch.stop()
    out["hnsw_build_total_s"] = round(build_s, 1)
    out["hnsw"] = f"m={HNSW_M}, ef_construction={HNSW_EF_CONSTRUCTION}"
    print(f"  built in {build_s:.0f} s: {out['index_builds_s']}", flush=True)
    with phase(results, "vacuum analyze", mem):
        conn.autocommit = True
        corpus = get_corpus(conn, CORPUS)
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(corpus.table))
        assert corpus.passage_table is not None
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(corpus.passage_table))
        conn.autocommit = False
    return out


def sizes(conn: Connection, corpus: Corpus) -> dict[str, Any]:
    return {
        "documents": relation_sizes(conn, corpus.table_name),
        "passages": relation_sizes(conn, f"{corpus.table_name}_passages"),
    }


# ------------------------------------------------------------------------------------ real model


def real_ingest(base: str, n_docs: int, rounds: int) -> list[dict[str, Any]]:
    """Reuters through ``ingest_path`` with all-MiniLM-L6-v2, with and without passages."""
    from pglogic.embed.registry import get_embedder

    emb = get_embedder("all-MiniLM-L6-v2")
    emb.embed(["a warm-up sentence for the model"] * 8)
    dsn = fresh_database(base, f"{DB_NAME}_ingest")
    out: list[dict[str, Any]] = []
    order = ["single", "passages", "passages", "single"][: 2 * rounds]
    try:
        with connect(dsn) as conn:
            for run, layout in enumerate(order):
                name = f"real-{layout}-{run}"
                lay = passage_layout(emb, None, None) if layout == "passages" else None
                corpus = create_corpus(conn, name, model="all-MiniLM-L6-v2", dim=emb.dim,
                                       passages=lay)  # fmt: skip
                la0 = load_avg()
                t0 = time.perf_counter()
                stats = ingest_path(conn, corpus, REUTERS, embedder=emb, limit=n_docs)
                wall = time.perf_counter() - t0
                row = {
                    "layout": layout, "run": run, "documents": stats.inserted,
                    "passages": stats.passages, "wall_s": round(wall, 2),
                    "docs_per_s": round(stats.inserted / wall, 1),
                    "passages_per_s": round(stats.passages / wall, 1) if stats.passages else None,
                    "embed_s": round(stats.embed_seconds, 2),
                    "load_s": round(stats.load_seconds, 2),
                    "embed_share": round(stats.embed_seconds / wall, 3),
                    "windows": stats.embedded,
                    "truncated": stats.truncated, "over_window": stats.over_window,
                    "split_documents": None, "load_avg_start": la0, "load_avg_end": load_avg(),
                }  # fmt: skip
                if layout == "passages":
                    c = get_corpus(conn, name)
                    assert c.passage_table is not None
                    r = conn.execute(sql.SQL(
                        "SELECT count(*) FILTER (WHERE n > 1) FROM (SELECT count(*) AS n FROM {}"
                        " GROUP BY doc_id) s").format(c.passage_table)).fetchone()  # fmt: skip
                    conn.rollback()
                    row["split_documents"] = int(r[0]) if r else None
                    # the whole text of each document, and each passage of a split one
                    row["windows"] = (
                        stats.inserted
                        + stats.passages
                        - (stats.inserted - (row["split_documents"] or 0))
                    )
                row["embed_ms_per_window"] = round(1000 * stats.embed_seconds / row["windows"], 2)
                out.append(row)
                print(f"  {row}", flush=True)
    finally:
        drop_database(base, f"{DB_NAME}_ingest")
    return out


# ---------------------------------------------------------------------------------------- truth


def exact_scores(tree: Node, docs: Documents, vecs: dict[str, np.ndarray], layout: str,
                 first: np.ndarray) -> np.ndarray:  # fmt: skip
    """The formula's exact score of every document: each text's similarity is the document's
    best passage's (``passages``) or its first passage's (``single``); the engine's AND texts
    (synthetic phrase vectors) and default family. Over passages, the default passage score
    (``own_weights``): in a formula with a negated term, a positive text's similarity is the
    mean of its best passage's and the document's own vector's (here its first passage's); in
    a disjunction or one term, 0.9 of the former and 0.1 of the latter. Each term negated
    inside an AND is scored against its context (``benchlib.truth_vectors``)."""
    vecs = truth_vectors(tree, vecs)
    names = sorted(vecs)
    q = np.stack([vecs[t] for t in names]).T.astype(np.float32)
    if layout == "passages":
        sims = np.maximum.reduceat(docs.data.vectors @ q, docs.starts, axis=0)
        weights = own_weights(tree, names, DEFAULT_PASSAGE_SCORE)
        if any(weights):
            own = first @ q
            for i, w in enumerate(weights):
                if w:
                    sims[:, i] = (1 - w) * sims[:, i] + w * own[:, i]
    else:
        sims = first @ q
    by_text = {t: sims[:, i] for i, t in enumerate(names)}
    return evaluate_numpy(with_and_texts(tree, DEFAULT_AND_TEXT), by_text, DEFAULT_FAMILY)


def top(scores: np.ndarray, mask: np.ndarray, k: int) -> list[int]:
    """Document indices of the top k of the masked scores (ties by index, as the engine by id)."""
    s = np.where(mask, scores, -np.inf)
    idx = np.argpartition(-s, k)[:k] if k < len(s) else np.arange(len(s))
    idx = idx[np.lexsort((idx, -s[idx]))]
    return [int(i) for i in idx if np.isfinite(s[i])]


# -------------------------------------------------------------------------------------- queries


def describe_plan(c: CompiledQuery) -> str:
    """The candidate scans of a compiled statement, e.g. ``2 x 10 (ef 100)`` or ``guide 400``."""
    parts = []
    if c.candidate_terms:
        n = len(c.candidate_terms)
        depth = c.params.get("depth", c.params.get("k"))  # a single-vector term: k nearest
        parts.append(f"{n} × {depth}" if n > 1 else f"{depth}")
    if c.guide_param and GUIDE_DEPTH in c.params:
        parts.append(f"guide {c.params[GUIDE_DEPTH]}")
    ef = c.settings.get("hnsw.ef_search")
    it = " iter" if c.settings.get("hnsw.iterative_scan") else ""
    return " + ".join(parts) + (f" (ef {ef}{it})" if ef else "")


def run_matrix(conn: Connection, corpus: Corpus, docs: Documents, ids: np.ndarray,
               n_queries: int, ks: Sequence[int], seed: int, rows: list[dict[str, Any]],
               save: Any, only: set[str] | None = None) -> None:  # fmt: skip
    """Every (shape, k, filter) with both layouts; ``rows`` grows, ``save()`` after each shape.
    ``only``: the shapes to run (the others keep their queries' seeds)."""
    emb = Vectors()
    first = docs.first
    g = np.arange(docs.n_docs) % 100
    masks = {"none": np.ones(docs.n_docs, dtype=bool), "10%": g < 10}
    pos = np.full(int(ids.max()) + 1, -1)
    pos[ids] = np.arange(len(ids))  # database id -> document index
    for si, (shape, text) in enumerate(SHAPES.items()):
        if only is not None and shape not in only:
            continue
        tree = parse(text)
        n_terms = len(set(text.split('"')[1::2]))
        queries = make_queries(docs.data, n_queries, n_terms, seed + 100 * si)
        t0 = time.perf_counter()
        truths: dict[tuple[str, str], list[list[int]]] = {}
        for vecs in queries:
            for layout in LAYOUTS:
                scores = exact_scores(tree, docs, vecs, layout, first)
                for fname, mask in masks.items():
                    truths.setdefault((layout, fname), []).append(top(scores, mask, max(ks)))
        print(f"  {shape}: truth in {time.perf_counter() - t0:.1f} s", flush=True)
        for k in ks:
            for fname in FILTER_NAMES:
                opts = {lay: SearchOptions(k=k, filters=FILTERS[fname], passages=lay == "passages")
                        for lay in LAYOUTS}  # fmt: skip
                plans = {lay: describe_plan(index_plan(conn, corpus, tree, opts[lay]))
                         for lay in LAYOUTS}  # fmt: skip
                conn.rollback()
                lat: dict[str, list[float]] = {lay: [] for lay in LAYOUTS}
                rec10: dict[str, list[float]] = {lay: [] for lay in LAYOUTS}
                reck: dict[str, list[float]] = {lay: [] for lay in LAYOUTS}
                got_n: dict[str, list[int]] = {lay: [] for lay in LAYOUTS}
                cross: list[float] = []  # the single layout's hits against the passages' truth
                for lay in LAYOUTS:  # warm-up
                    emb.current = queries[0]
                    search(conn, corpus, tree, embedder=emb, options=opts[lay])
                for qi, vecs in enumerate(queries):
                    emb.current = vecs
                    for lay in LAYOUTS[qi % 2 :] + LAYOUTS[: qi % 2]:
                        t = time.perf_counter()
                        res = search(conn, corpus, tree, embedder=emb, options=opts[lay])
                        lat[lay].append(time.perf_counter() - t)
                        got = [int(pos[h.row_id]) for h in res.hits]
                        truth = truths[(lay, fname)][qi]
                        got_n[lay].append(len(got))
                        rec10[lay].append(recall(got, truth, 10))
                        reck[lay].append(recall(got, truth, k))
                        if lay == "single":
                            cross.append(recall(got, truths[("passages", fname)][qi], 10))
                expected = min(k, min(len(t) for t in truths[("passages", fname)]))
                row: dict[str, Any] = {"shape": shape, "query": text, "k": k, "filter": fname}
                for lay in LAYOUTS:
                    row[lay] = {
                        "plan": plans[lay], "ms": ms(lat[lay]),
                        "recall@10": round(float(np.mean(rec10[lay])), 3),
                        f"recall@{k}": round(float(np.mean(reck[lay])), 3),
                        "min_rows": min(got_n[lay]),
                        "shortfalls": sum(n < expected for n in got_n[lay]),
                    }  # fmt: skip
                row["single"]["recall@10_vs_passage_truth"] = round(float(np.mean(cross)), 3)
                row["queries"] = len(queries)
                rows.append(row)
                p, s = row["passages"], row["single"]
                print(
                    f"  {shape:8} k={k:<3} {fname:4} passages {p['ms']['p50']:7.2f} ms "
                    f"r@10 {p['recall@10']:.3f} rows>={p['min_rows']} [{p['plan']}] | single "
                    f"{s['ms']['p50']:7.2f} ms r@10 {s['recall@10']:.3f} "
                    f"(vs passage truth {s['recall@10_vs_passage_truth']:.3f})",
                    flush=True,
                )
        save()


#: (shape, k) of the ``plans`` phase and the option variants tried there (passages only)
PLAN_SHAPES = ("AND 2", "NOT 2", "AND 3", "NOT 3", "mixed 3")
PLAN_VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "depth 800": {"depth": 800},
    "depth 1600": {"depth": 1600},
    "term scans": {"term_scans": True},
}


def plan_variants(conn: Connection, corpus: Corpus, docs: Documents, ids: np.ndarray,
                  n_queries: int, ks: Sequence[int], seed: int) -> list[dict[str, Any]]:  # fmt: skip
    """The multi-term shapes over passages (no filter) with deeper or per-term scans: recall
    and latency of each variant of :data:`PLAN_VARIANTS`, on the queries of ``queries``."""
    emb = Vectors()
    pos = np.full(int(ids.max()) + 1, -1)
    pos[ids] = np.arange(len(ids))
    mask = np.ones(docs.n_docs, dtype=bool)
    out = []
    for si, (shape, text) in enumerate(SHAPES.items()):
        if shape not in PLAN_SHAPES:
            continue
        tree = parse(text)
        n_terms = len(set(text.split('"')[1::2]))
        queries = make_queries(docs.data, n_queries, n_terms, seed + 100 * si)
        truths = [top(exact_scores(tree, docs, v, "passages", docs.first), mask, max(ks))
                  for v in queries]  # fmt: skip
        for k in ks:
            for name, extra in PLAN_VARIANTS.items():
                if "depth" in extra and extra["depth"] < k:
                    continue
                opts = SearchOptions(k=k, **extra)
                plan = describe_plan(index_plan(conn, corpus, tree, opts))
                emb.current = queries[0]
                search(conn, corpus, tree, embedder=emb, options=opts)  # warm-up
                secs, rec10, reck = [], [], []
                for vecs, truth in zip(queries, truths, strict=True):
                    emb.current = vecs
                    t = time.perf_counter()
                    res = search(conn, corpus, tree, embedder=emb, options=opts)
                    secs.append(time.perf_counter() - t)
                    got = [int(pos[h.row_id]) for h in res.hits]
                    rec10.append(recall(got, truth, 10))
                    reck.append(recall(got, truth, k))
                out.append({"shape": shape, "k": k, "variant": name, "plan": plan,
                            "ms": ms(secs), "recall@10": round(float(np.mean(rec10)), 3),
                            f"recall@{k}": round(float(np.mean(reck)), 3),
                            "queries": len(queries)})  # fmt: skip
                r = out[-1]
                print(
                    f"  plans {shape:8} k={k:<3} {name:11} [{plan}] {r['ms']['p50']} ms "
                    f"recall@10 {r['recall@10']} recall@k {r[f'recall@{k}']}",
                    flush=True,
                )
    return out


def exact_latency(conn: Connection, corpus: Corpus, docs: Documents, ids: np.ndarray,
                  n_queries: int, seed: int) -> list[dict[str, Any]]:  # fmt: skip
    """``exact=True`` (every document scored) for the first queries of each shape, k = 10."""
    emb = Vectors()
    first = docs.first
    pos = np.full(int(ids.max()) + 1, -1)
    pos[ids] = np.arange(len(ids))
    mask = np.ones(docs.n_docs, dtype=bool)
    out = []
    for si, (shape, text) in enumerate(SHAPES.items()):
        tree = parse(text)
        n_terms = len(set(text.split('"')[1::2]))
        queries = make_queries(docs.data, n_queries, n_terms, seed + 100 * si)
        row: dict[str, Any] = {"shape": shape, "queries": len(queries)}
        for lay in LAYOUTS:
            opts = SearchOptions(k=10, exact=True, passages=lay == "passages")
            secs, recs = [], []
            for vecs in queries:
                emb.current = vecs
                t = time.perf_counter()
                res = search(conn, corpus, tree, embedder=emb, options=opts)
                secs.append(time.perf_counter() - t)
                truth = top(exact_scores(tree, docs, vecs, lay, first), mask, 10)
                recs.append(recall([int(pos[h.row_id]) for h in res.hits], truth, 10))
            row[lay] = {"ms_p50": round(percentile(secs, 50) * 1000, 1),
                        "recall@10": round(float(np.mean(recs)), 3)}  # fmt: skip
        out.append(row)
        print(
            f"  exact {shape:8} passages {row['passages']['ms_p50']} ms "
            f"(recall {row['passages']['recall@10']}), single {row['single']['ms_p50']} ms "
            f"(recall {row['single']['recall@10']})",
            flush=True,
        )
    return out


# ---------------------------------------------------------------------------------------- depth


def needed(doc_seq: Sequence[int], k: int) -> int | None:
    """1-based position in ``doc_seq`` where the k-th distinct document first appears."""
    seen: set[int] = set()
    for i, d in enumerate(doc_seq):
        seen.add(d)
        if len(seen) == k:
            return i + 1
    return None


def depth_phase(conn: Connection, corpus: Corpus, docs: Documents, ids: np.ndarray,
                n_queries: int, ks: Sequence[int], seed: int) -> list[dict[str, Any]]:  # fmt: skip
    """Single-term passage scans: the depth for k distinct documents (HNSW and exact order),
    and the distinct documents of the engine's own scan at its default depth and settings."""
    assert corpus.passage_table is not None
    queries = make_queries(docs.data, n_queries, 1, seed + 999)
    tree = parse('"t1"')
    g = np.arange(docs.n_docs) % 100
    doc_mask = {"none": np.ones(docs.n_docs, dtype=bool), "10%": g < 10}
    out = []
    for fname in FILTER_NAMES:
        where, fparams = filters_sql(FILTERS[fname], sql.SQL("d.metadata"), prefix="f")
        join = sql.SQL(" JOIN {} d ON d.id = p.doc_id").format(corpus.table) if FILTERS[fname] \
            else sql.SQL("")  # fmt: skip
        deep = sql.SQL(
            "SELECT p.doc_id, p.embedding <=> %(v)s::vector({dim}) FROM {t} p{join}"
            " WHERE p.embedding IS NOT NULL AND {w} ORDER BY p.embedding <=> %(v)s::vector({dim})"
            " LIMIT %(n)s"
        ).format(t=corpus.passage_table, join=join, w=where, dim=sql.Literal(DIM))
        deep_settings = {"hnsw.ef_search": "1000", "hnsw.iterative_scan": "relaxed_order",
                         "hnsw.max_scan_tuples": "1000000"}  # fmt: skip
        pmask = doc_mask[fname][docs.doc_of]
        per_k: dict[int, dict[str, list[Any]]] = {k: {"hnsw": [], "exact": [], "default": [],
                                                      "first_k": [], "scan_ms": []}
                                                  for k in ks}  # fmt: skip
        plans: dict[int, tuple[str, int, dict[str, str]]] = {}
        for k in ks:
            c = index_plan(conn, corpus, tree, SearchOptions(k=k, filters=FILTERS[fname]))
            plans[k] = (describe_plan(c), int(c.params["depth"]), dict(c.settings))
        conn.rollback()
        for vecs in queries:
            v = vecs["t1"]
            with conn.transaction():
                for s in set_local_statements(deep_settings):
                    conn.execute(s)
                rows = conn.execute(deep, {**fparams, "v": v, "n": DEPTH_FETCH}).fetchall()
            rows.sort(key=lambda r: r[1])  # relaxed order: sort by distance
            hnsw_seq = [int(r[0]) for r in rows]
            sims = docs.data.vectors @ v
            sims = np.where(pmask, sims, -np.inf)
            best = np.argpartition(-sims, DEPTH_FETCH)[:DEPTH_FETCH]
            best = best[np.argsort(-sims[best], kind="stable")]
            exact_seq = [int(ids[docs.doc_of[i]]) for i in best]
            for k in ks:
                _, depth, settings = plans[k]
                per_k[k]["hnsw"].append(needed(hnsw_seq, k))
                per_k[k]["exact"].append(needed(exact_seq, k))
                per_k[k]["first_k"].append(len(set(exact_seq[:k])))
                t = time.perf_counter()
                with conn.transaction():
                    for s in set_local_statements(settings):
                        conn.execute(s)
                    got = conn.execute(deep, {**fparams, "v": v, "n": depth}).fetchall()
                per_k[k]["scan_ms"].append(time.perf_counter() - t)
                per_k[k]["default"].append(len({int(r[0]) for r in got}))
        for k in ks:
            plan, depth, _ = plans[k]
            d = per_k[k]
            not_reached = sum(x is None for x in d["hnsw"])
            out.append({
                "filter": fname, "k": k, "plan": plan, "default_depth": depth,
                "queries": len(queries),
                "needed_hnsw": dist([x for x in d["hnsw"] if x is not None]),
                "needed_hnsw_not_reached": not_reached,
                "needed_exact": dist([x for x in d["exact"] if x is not None]),
                "distinct_at_default": dist(d["default"]),
                "shortfalls_at_default": sum(x < k for x in d["default"]),
                "distinct_in_first_k_passages": dist(d["first_k"]),
                "default_scan_ms_p50": round(percentile(d["scan_ms"], 50) * 1000, 2),
                "fetch": DEPTH_FETCH,
            })  # fmt: skip
            r = out[-1]
            print(f"  depth {fname:4} k={k:<3} default {depth} -> distinct {r['distinct_at_default']}"
                  f" shortfalls {r['shortfalls_at_default']}; needed hnsw {r['needed_hnsw']},"
                  f" exact {r['needed_exact']}; distinct in first k {r['distinct_in_first_k_passages']}",
                  flush=True)  # fmt: skip
    return out


# ------------------------------------------------------------------------------------- markdown


def scale_reference() -> dict[tuple[str, int, str], dict[str, Any]]:
    """The rows of ``scale_1m.json`` (1M single vectors) by (shape, k, filter)."""
    path = RESULTS_DIR / "scale_1m.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    rows = data["sizes"].get("1000000", {}).get("queries", [])
    return {(r["shape"], r["k"], r["filter"]): r for r in rows}


def scale_load_reference() -> dict[str, Any]:
    path = RESULTS_DIR / "scale_1m.json"
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text())["sizes"].get("1000000", {}).get("load", {}))


def fmt_dist(d: dict[str, float]) -> str:
    if not d:
        return ""
    return f"{d['min']:.0f} / {d['p50']:.0f} / {d['p95']:.0f} / {d['max']:.0f}"


def markdown(res: dict[str, Any]) -> str:
    """The results file: the main run, then each variant (its sections one level down)."""
    text = body(res)
    for name, v in res.get("variants", {}).items():
        sub = body({k: x for k, x in v.items() if k != "runs"}, header=False)
        text += f"\n## Variant: {name}\n\n" + sub.replace("\n## ", "\n### ")
    return text


def body(res: dict[str, Any], header: bool = True) -> str:
    parts = []
    if header:
        parts += [
            "# Passages at scale (`bench/perf/passages_scale.py`)",
            "",
            machine_md(res["machine"]),
        ]
    for run in res.get("runs", []) if header else []:
        parts.append(f"- run {run['date']} at pglogic {run['commit']}: phases {run['phases']}; "
                     f"{run['docs']:,} documents, {run['queries']} queries per row, seed "
                     f"{run['seed']}, doc share {run.get('doc_share', DOC_SHARE)}, "
                     f"{run['ingest_docs']} real documents")  # fmt: skip
    parts.append("")
    ph = res.get("phases", {})
    if ph:
        parts += ["The machine is shared with other jobs (2 cores): load average (1 / 5 / 15 min) "
                  "at the start and end of each phase, and its wall time:", ""]  # fmt: skip
        parts.append(md_table(["phase", "started", "load avg start", "load avg end", "wall s"],
                              [[n, p.get("started", ""), " / ".join(map(str, p["load_avg_start"])),
                                " / ".join(map(str, p["load_avg_end"])), p["wall_s"]]
                               for n, p in ph.items()]))  # fmt: skip
        parts.append("")
    data = res.get("data")
    if data:
        parts += ["## Data", "",
                  f"{data['documents']:,} synthetic documents, {data['passages']:,} passages "
                  f"(mean {data['passages_per_document_mean']} per document; 384-d, "
                  "see the script's docstring). Passages per document: "
                  + ", ".join(f"{k}: {v:,}" for k, v in data["passages_per_document_hist"].items())
                  + "; distinct clusters per document: "
                  + ", ".join(f"{k}: {v:,}" for k, v in data["clusters_per_document_hist"].items())
                  + f". A document's passages on one cluster share {data.get('doc_share', DOC_SHARE)}"
                  " of their within-cluster variance. The single-vector layout is each document's "
                  "first passage's vector (the documents' own `embedding` column, searched with "
                  "`passages=False`).", ""]  # fmt: skip
    load_ = res.get("load")
    if load_:
        sz = res.get("sizes", {})
        parts += ["## Load and index", ""]
        rows = []
        builds = load_.get("index_builds_s", {})

        def build_of(suffix: str) -> Any:
            return next((v for k, v in builds.items() if k.split(" on ")[0].endswith(suffix)), "")

        for lay, table_key, hnsw_suffix in (("documents (single-vector)", "documents",
                                             "_embedding_hnsw"),
                                            ("passages", "passages", "_passages_embedding_hnsw")):  # fmt: skip
            s = sz.get(table_key, {})
            idx = s.get("indexes_mib", {})
            hnsw = next((v for k, v in idx.items() if k.endswith(hnsw_suffix)), "")
            other = round(sum(v for k, v in idx.items() if not k.endswith(hnsw_suffix)), 1)
            b = build_of("_passages_embedding_hnsw") if table_key == "passages" else next(
                (v for k, v in builds.items() if k.split(" on ")[0].endswith("_embedding_hnsw")
                 and "_passages_" not in k), "")  # fmt: skip
            lrow = load_[table_key]
            rows.append([lay, f"{s.get('rows', lrow['rows']):,}", lrow["load_s"],
                         f"{lrow['rows_per_s']:,}", b, s.get("table_mib", ""), hnsw, other])  # fmt: skip
        ref = res.get("scale_1m_load") or {}
        if ref:
            rows.append(["1M single vectors (`scale_1m.md`)", "1,000,000", ref.get("load_s"),
                         f"{ref.get('load_rows_per_s', 0):,}", ref.get("hnsw_build_s"),
                         ref.get("table_mib"), ref.get("index_mib"), ""])  # fmt: skip
        parts.append(md_table(["table", "rows", "load s", "rows/s", "HNSW build s", "table MiB",
                               "HNSW MiB", "other indexes MiB"], rows))  # fmt: skip
        parts += ["",
                  f"HNSW {load_['hnsw']}, `maintenance_work_mem` 4GB; `build_index` took "
                  f"{load_['hnsw_build_total_s']} s in all (both HNSW indexes, the metadata GIN "
                  "index, ANALYZE); each index's time from `pg_stat_progress_create_index`: "
                  + ", ".join(f"{k} {v} s" for k, v in builds.items()) + ". Documents loaded "
                  "through `ingest_records` (batch 5,000), passages through `write_passages` "
                  f"({PASSAGE_BATCH:,} documents per transaction). Index sizes: "
                  + "; ".join(f"{t}: " + ", ".join(f"{n} {v}" for n, v in s["indexes_mib"].items())
                              for t, s in sz.items()) + " (MiB).",
                  ""]  # fmt: skip
        if res.get("memory_peak_mib"):
            parts += ["Peak PSS of the Postgres processes per phase (MiB): "
                      + ", ".join(f"{k} {v}" for k, v in res["memory_peak_mib"].items()), ""]  # fmt: skip
    ing = res.get("ingest")
    if ing:
        parts += ["## Ingest with the model", "",
                  f"{ing[0]['documents']:,} Reuters documents through `ingest_path` with "
                  "all-MiniLM-L6-v2 (CPU, batch 256), into a corpus without passages (single) "
                  "and one with passages (254 tokens, 32 shared), in the order of the rows; "
                  "embed share = the model's part of the wall time.", ""]  # fmt: skip
        parts.append(md_table(["layout", "documents", "passages", "split documents", "wall s",
                               "documents/s", "passages/s", "windows embedded",
                               "embed ms / window", "embed share", "truncated",
                               "load avg (1 min)"],
                              [[r["layout"], r["documents"], r["passages"] or "",
                                r["split_documents"] if r["split_documents"] is not None else "",
                                r["wall_s"], r["docs_per_s"], r["passages_per_s"] or "",
                                r.get("windows", ""), r.get("embed_ms_per_window", ""),
                                f"{100 * r['embed_share']:.1f}%", r["truncated"],
                                f"{r['load_avg_start'][0]}–{r['load_avg_end'][0]}"]
                               for r in ing]))  # fmt: skip
        single = [r["docs_per_s"] for r in ing if r["layout"] == "single"]
        pas = [r["docs_per_s"] for r in ing if r["layout"] == "passages"]
        if single and pas:
            parts += ["", f"Documents/s with passages: {np.mean(pas):.1f} against "
                      f"{np.mean(single):.1f} without ({np.mean(pas) / np.mean(single):.2f}×)."]  # fmt: skip
        parts.append("")
    depth = res.get("depth")
    if depth:
        parts += ["## Depth for k distinct documents", "",
                  "Single-term queries over the passages. needed = how many passages, nearest "
                  "first, hold k distinct documents (min / p50 / p95 / max over the queries): "
                  f"from the HNSW scan (fetched {DEPTH_FETCH:,} deep with iterative scans, sorted "
                  "by distance) and from the exact order (NumPy). default = the engine's own scan "
                  "(the candidate CTE of its plan, at its depth and settings): distinct documents "
                  "it returns and the queries that got fewer than k. first k = distinct "
                  "documents among the first k passages (what a scan of depth k, the OR plan's "
                  "per-term depth, holds).", ""]  # fmt: skip
        parts.append(md_table(["filter", "k", "plan", "needed (HNSW)", "needed (exact)",
                               "default: distinct", "shortfalls", "first k: distinct",
                               "scan p50 ms"],
                              [[d["filter"], d["k"], d["plan"], fmt_dist(d["needed_hnsw"]),
                                fmt_dist(d["needed_exact"]), fmt_dist(d["distinct_at_default"]),
                                f"{d['shortfalls_at_default']}/{d['queries']}",
                                fmt_dist(d["distinct_in_first_k_passages"]),
                                d["default_scan_ms_p50"]] for d in depth]))  # fmt: skip
        parts.append("")
    q = res.get("queries")
    if q:
        ref = scale_reference()
        parts += ["## Queries", "",
                  "`search()` with vectors given, both layouts per query in rotating order. "
                  "Latency p50 / p95 ms; recall against the exact top k of the formula over the "
                  "same layout (NumPy); rows = fewest rows returned (shortfalls: queries with "
                  "fewer than k); plan = the candidate scans (depth, `ef_search`); vs passages = "
                  "the single layout's recall@10 against the passages' truth (what reading the "
                  "first window only loses); 1M vectors = `scale_1m.md`'s p50 for the same shape "
                  "over 1M single vectors.", ""]  # fmt: skip
        rows = []
        for r in q:
            p, s, k = r["passages"], r["single"], r["k"]
            rf = ref.get((r["shape"], k, r["filter"]))
            rows.append([r["shape"], k, r["filter"], p["plan"],
                         f"{p['ms']['p50']} / {p['ms']['p95']}", p["recall@10"], p[f"recall@{k}"],
                         f"{p['min_rows']} ({p['shortfalls']})", s["plan"],
                         f"{s['ms']['p50']} / {s['ms']['p95']}", s["recall@10"], s[f"recall@{k}"],
                         f"{s['min_rows']} ({s['shortfalls']})", s["recall@10_vs_passage_truth"],
                         rf["pglogic_ms"]["p50"] if rf else ""])  # fmt: skip
        parts.append(md_table(["shape", "k", "filter", "passages plan", "passages ms",
                               "recall@10", "recall@k", "rows", "single plan", "single ms",
                               "recall@10", "recall@k", "rows", "single vs passages",
                               "1M vectors p50"], rows))  # fmt: skip
        sup = res.get("superseded", [])
        reruns = sorted({r["rerun"] for r in q if r.get("rerun")})
        if sup:
            parts += ["", f"Rows re-run ({'; '.join(reruns)}) replace these, measured earlier "
                      "(the pglogic of the first run above):", ""]  # fmt: skip
            parts.append(md_table(["shape", "k", "filter", "passages plan", "passages ms",
                                   "recall@10", "recall@k", "rows", "single ms", "recall@10"],
                                  [[r["shape"], r["k"], r["filter"], r["passages"]["plan"],
                                    f"{r['passages']['ms']['p50']} / {r['passages']['ms']['p95']}",
                                    r["passages"]["recall@10"], r["passages"][f"recall@{r['k']}"],
                                    f"{r['passages']['min_rows']} ({r['passages']['shortfalls']})",
                                    f"{r['single']['ms']['p50']} / {r['single']['ms']['p95']}",
                                    r["single"]["recall@10"]] for r in sup]))  # fmt: skip
        ratios = [r["passages"]["ms"]["p50"] / r["single"]["ms"]["p50"] for r in q
                  if r["single"]["ms"]["p50"] > 0]  # fmt: skip
        if ratios:
            parts += ["", f"Passages p50 / single p50: {min(ratios):.2f}–{max(ratios):.2f}× "
                      f"(median {float(np.median(ratios)):.2f}×) over {len(ratios)} rows."]  # fmt: skip
        parts.append("")
    pv = res.get("plans")
    if pv:
        parts += ["## Deeper plans over passages", "",
                  "The multi-term shapes over passages, no filter, the same queries as above "
                  "with other options: `depth=N` (every scan, the guide's too, N rows), "
                  "`term_scans=True` (a scan per positive term beside the guide). p50 ms.", ""]  # fmt: skip
        parts.append(md_table(["shape", "k", "variant", "plan", "p50 / p95 ms", "recall@10",
                               "recall@k"],
                              [[v["shape"], v["k"], v["variant"], v["plan"],
                                f"{v['ms']['p50']} / {v['ms']['p95']}", v["recall@10"],
                                v[f"recall@{v['k']}"]] for v in pv]))  # fmt: skip
        parts.append("")
    ex = res.get("exact")
    if ex:
        parts += ["## Exact mode", "",
                  "`exact=True` (every document scored; passages: the best of every passage of "
                  "every document), k = 10, no filter, p50 ms; recall@10 against the NumPy "
                  "truth (a check of the truth: 1.0 expected).", ""]  # fmt: skip
        parts.append(md_table(["shape", "queries", "passages exact ms", "recall@10",
                               "single exact ms", "recall@10"],
                              [[e["shape"], e["queries"], e["passages"]["ms_p50"],
                                e["passages"]["recall@10"], e["single"]["ms_p50"],
                                e["single"]["recall@10"]] for e in ex]))  # fmt: skip
        parts.append("")
    return "\n".join(parts) + "\n"


def save(res: dict[str, Any], name: str) -> None:
    write_results(name, res, markdown(res), results_dir=RESULTS_DIR)


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--docs", type=int, default=250_000, help="documents (4 passages each on average)"
    )
    ap.add_argument("--queries", type=int, default=30, help="queries per (shape, k, filter)")
    ap.add_argument("--ks", default="10,100")
    ap.add_argument("--exact-queries", type=int, default=2)
    ap.add_argument("--depth-queries", type=int, default=100)
    ap.add_argument("--ingest-docs", type=int, default=1000, help="Reuters documents, real model")
    ap.add_argument("--ingest-rounds", type=int, default=2, choices=[1, 2],
                    help="1: single then passages; 2: ABBA")  # fmt: skip
    ap.add_argument("--phases", default="ingest,load,depth,queries,plans,exact",
                    help="phases to run (load is skipped with --reuse of a kept database)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--doc-share", type=float, default=DOC_SHARE,
                    help="within-cluster variance shared by a document's passages on one "
                    "cluster: 0 independent, near 1 near-duplicates")  # fmt: skip
    ap.add_argument("--home", default=str(DEFAULT_HOME))
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--results", default=NAME, help="bench/perf/results/<name>.{json,md}")
    ap.add_argument("--variant", metavar="NAME",
                    help="store this run's results as variant NAME beside the main ones "
                    "(e.g. other --docs or --doc-share)")  # fmt: skip
    ap.add_argument("--shapes", help="queries phase: only these shapes (comma-separated), "
                    "replacing their rows (the old ones kept as superseded)")  # fmt: skip
    ap.add_argument("--keep", action="store_true", help="keep the database for --reuse")
    ap.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    ap.add_argument("--reuse", action="store_true",
                    help="reuse the database a --keep run left (same --docs and --seed)")  # fmt: skip
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2,000 documents, 4 queries, 40 real documents")  # fmt: skip
    args = ap.parse_args()
    if args.render:
        res = json.loads((RESULTS_DIR / f"{args.results}.json").read_text())
        save(res, args.results)
        return
    if args.quick:
        args.docs, args.queries, args.ingest_docs, args.ingest_rounds = 2000, 4, 40, 1
        args.depth_queries, args.exact_queries = 10, 1
        if args.results == NAME:
            args.results = f"{NAME}_quick"
    phases = set(args.phases.split(","))
    ks = [int(x) for x in args.ks.split(",")]
    base = server_dsn(Path(args.home), args.dsn)
    res: dict[str, Any] = {"machine": machine(base), "scale_1m_load": scale_load_reference()}
    previous = RESULTS_DIR / f"{args.results}.json"
    old = json.loads(previous.read_text()) if previous.exists() else {}
    run = {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": git_head(), **vars(args)}
    res["runs"] = [*old.get("runs", []), run]
    for key in ("ingest", "load", "sizes", "depth", "queries", "plans", "exact", "data",
                "phases", "memory_peak_mib", "variants", "superseded"):  # fmt: skip
        if key in old:  # a partial re-run keeps what it does not redo
            res[key] = old[key]

    if "ingest" in phases:
        with phase(res, "real ingest"):
            res["ingest"] = real_ingest(base, args.ingest_docs, args.ingest_rounds)
        save(res, args.results)
    if not phases & {"load", "depth", "queries", "plans", "exact"}:
        return

    share = "" if args.doc_share == DOC_SHARE else f"_share{round(100 * args.doc_share)}"
    db_name = f"{DB_NAME}_{args.docs}_{args.seed}{share}"
    with psycopg.connect(base, autocommit=True) as c:
        exists = c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db_name,)).fetchone()
    out = res  # where this run's results go: the main ones or a variant's
    if args.variant:
        out = res.setdefault("variants", {}).setdefault(args.variant, {})
    reuse = bool(args.reuse and exists and out.get("load"))
    dsn = make_conninfo(base, dbname=db_name) if reuse else fresh_database(base, db_name)
    try:
        with phase(out, "generate data"):
            docs = make_documents(args.docs, args.seed, args.doc_share)
        out["data"] = {**docs.summary(), "doc_share": args.doc_share}
        print(f"  {out['data']}", flush=True)
        with connect(dsn) as conn:
            mem = MemorySampler(postmaster_pid(conn))
            if not reuse:
                out["load"] = load(conn, dsn, docs, mem, out)
            corpus = get_corpus(conn, CORPUS)
            out["sizes"] = sizes(conn, corpus)
            out["memory_peak_mib"] = {
                **out.get("memory_peak_mib", {}),
                **{k: round(v) for k, v in mem.peaks.items() if k != "idle"},
            }
            save(res, args.results)
            ext = conn.execute(sql.SQL("SELECT id, external_id FROM {}").format(corpus.table))
            ids = np.zeros(docs.n_docs, dtype=np.int64)
            for i, e in ext:
                ids[int(str(e)[3:])] = int(i)
            conn.rollback()
            conn.autocommit = True
            with phase(out, "warm-up", mem):  # read both HNSW indexes into the caches
                emb = Vectors()
                for vecs in make_queries(docs.data, 20, 1, args.seed + 5):
                    emb.current = vecs
                    for lay in LAYOUTS:
                        search(conn, corpus, '"t1"', embedder=emb,
                               options=SearchOptions(k=100, passages=lay == "passages"))  # fmt: skip
            if "depth" in phases:
                with phase(out, "depth", mem):
                    out["depth"] = depth_phase(conn, corpus, docs, ids, args.depth_queries, ks,
                                               args.seed)  # fmt: skip
                save(res, args.results)
            if "queries" in phases:
                rows: list[dict[str, Any]] = []
                only = set(args.shapes.split(",")) if args.shapes else None
                if only is None:
                    out["queries"] = rows
                with phase(out, "queries" if only is None else "queries (rerun)", mem):
                    run_matrix(conn, corpus, docs, ids, args.queries, ks, args.seed, rows,
                               lambda: save(res, args.results), only)  # fmt: skip
                if only is not None:  # replace those rows; keep the old ones as superseded
                    note = f"{run['date']} at {run['commit']}"
                    fresh = {(r["shape"], r["k"], r["filter"]): {**r, "rerun": note} for r in rows}
                    kept = []
                    for r in out.get("queries", []):
                        key = (r["shape"], r["k"], r["filter"])
                        if key in fresh:
                            out.setdefault("superseded", []).append(r)
                            kept.append(fresh.pop(key))
                        else:
                            kept.append(r)
                    out["queries"] = kept + list(fresh.values())
                save(res, args.results)
            if "plans" in phases:
                with phase(out, "plans", mem):
                    out["plans"] = plan_variants(conn, corpus, docs, ids, args.queries, ks,
                                                 args.seed)  # fmt: skip
                save(res, args.results)
            if "exact" in phases:
                with phase(out, "exact", mem):
                    out["exact"] = exact_latency(conn, corpus, docs, ids, args.exact_queries,
                                                 args.seed)  # fmt: skip
            mem.stop()
            out["memory_peak_mib"] = {
                **out.get("memory_peak_mib", {}),
                **{k: round(v) for k, v in mem.peaks.items() if k != "idle"},
            }
            save(res, args.results)
    finally:
        if not args.keep:
            drop_database(base, db_name)


if __name__ == "__main__":
    main()
