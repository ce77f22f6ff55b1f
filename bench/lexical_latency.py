"""Lexical terms (``match:"..."``) at scale: candidate latency by document frequency, against
HNSW candidates; pg_search (BM25) vs built-in full text; ingest cost of the lexical column.

    python bench/lexical_latency.py load      [--rows 1000000]   # data, indexes (long)
    python bench/lexical_latency.py measure   [--rows 1000000]   # latency, EXPLAIN, pg_search
    python bench/lexical_latency.py ingest    [--ingest-rows 100000]
    python bench/lexical_latency.py render                       # rewrite the .md from the .json

Data (deterministic for ``--seed``): ``--rows`` documents with synthetic 384-d vectors
(``query.make_dataset``, the ``manifold`` clusters of ``bench/scale.py``) and synthetic texts whose
words follow a Zipf law (p(r) ~ 1 / (r + 2.7), the Zipf-Mandelbrot fit of English) over a
vocabulary of ``--vocab`` words: the Reuters-21578 words ranked by their frequency in Reuters,
then compounds of two Reuters words (the rare names and codes of a large corpus; Reuters alone
has 29k words, and a 1M-document corpus has many more), document lengths drawn from Reuters'.
Query terms are words whose measured document frequency is within a factor ~1.4 of 10, 100,
1k, 10k, 100k documents.

``load`` creates database ``bench_lexical_<rows>`` on the embedded server under ``--home``
(default /work/lexical-bench), loads the rows without a lexical column (binary COPY,
``bench/fastload.py``), adds the lexical column and its GIN index
(``pglogic.store.lexical.add_lexical_index``), builds the HNSW index (m=16,
ef_construction=64) and, when pg_search loads, a bm25 index on ``(id, text)``; times and sizes
go to the results. ``measure`` runs, per document-frequency level, the real compiled statements
(``compile_query`` + ``search.execute``, k = 10, hand-made query vectors): the lexical term's
``x0`` CTE alone and the whole statement of ``match:t``, ``"a" AND match:t``,
``"a" AND NOT match:t``, ``"a" OR match:t``, against the same shapes with a semantic term
``"b"`` in place of ``match:t`` (HNSW candidates, its ``c`` CTE alone); EXPLAIN (ANALYZE,
BUFFERS) of the scans; then top-depth candidates by BM25 (pg_search) vs ``@@ ... ORDER BY
ts_rank_cd``. ``ingest`` loads ``--ingest-rows`` documents through
``pglogic.store.ingest.ingest_records`` into a corpus with and without the lexical column.

Results: ``bench/results/lexical_latency.{json,md}``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from benchlib import (
    REUTERS,
    RESULTS_DIR,
    cpu_busy,
    drop_database,
    fresh_database,
    machine,
    machine_md,
    md_table,
    phrase_vectors,
    summary_ms,
    write_results,
)
from psycopg import sql
from psycopg.conninfo import make_conninfo
from query import DIM, make_dataset, make_queries

from pglogic.engine.compile import CompiledQuery, SearchOptions, compile_query
from pglogic.engine.source import Corpus
from pglogic.query import parse
from pglogic.store import server
from pglogic.store.corpus import build_index, create_corpus, get_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_records
from pglogic.store.lexical import add_lexical_index, index_name
from pglogic.store.readers import Record
from pglogic.store.search import execute

NAME = "lexical_latency"
CORPUS = "lex"
DEFAULT_HOME = Path("/work/lexical-bench")
LEVELS = (10, 100, 1_000, 10_000, 100_000)
ZIPF_S = 1.0
ZIPF_Q = 2.7
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
TEXT_CONFIG = "english"
CHUNK = 20_000


# -- data ---------------------------------------------------------------------------------------


@cache
def reuters_words() -> tuple[list[str], np.ndarray]:
    """Reuters-21578's words (``[a-z]+`` of title + text, lower-cased), most frequent first,
    and its documents' lengths in words."""
    counts: Counter[str] = Counter()
    lengths = []
    with gzip.open(REUTERS, "rt") as f:
        for line in f:
            r = json.loads(line)
            words = re.findall(r"[a-z]+", f"{r.get('title') or ''} {r['text']}".lower())
            counts.update(words)
            lengths.append(len(words))
    ranked = [w for w, _ in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))]
    return ranked, np.array(lengths)


class Vocabulary:
    """The words of the synthetic texts, their Zipf probabilities, and the document lengths."""

    def __init__(self, size: int, seed: int) -> None:
        ranked, lengths = reuters_words()
        self.reuters = len(ranked)
        rng = np.random.default_rng(seed)
        base = [w for w in ranked if len(w) >= 3]
        seen = set(ranked)
        words = list(ranked)
        while len(words) < size:  # compounds of two Reuters words: the rare tail
            a = rng.integers(len(base), size=size)
            b = rng.integers(len(base), size=size)
            for i, j in zip(a.tolist(), b.tolist(), strict=True):
                w = base[i] + base[j]
                if w not in seen:
                    seen.add(w)
                    words.append(w)
                    if len(words) == size:
                        break
        self.words = np.array(words, dtype=object)
        p = 1.0 / (np.arange(1, size + 1) + ZIPF_Q) ** ZIPF_S
        self.p = p / p.sum()
        self.cdf = np.cumsum(self.p)
        self.cdf[-1] = 1.0
        self.lengths = np.maximum(lengths, 5)

    def texts(self, start: int, n: int, seed: int) -> list[str]:
        """The texts of documents ``start .. start + n`` (deterministic per chunk)."""
        rng = np.random.default_rng([seed, start])
        lens = rng.choice(self.lengths, size=n)
        ids = np.searchsorted(self.cdf, rng.random(int(lens.sum())), side="right")
        words = self.words[ids]
        ends = np.cumsum(lens)
        return [" ".join(words[e - m : e]) for e, m in zip(ends.tolist(), lens.tolist(), strict=True)]

    def expected_df(self, rows: int) -> np.ndarray:
        """Each word's expected document frequency in ``rows`` documents (before stemming)."""
        sample = np.random.default_rng(0).choice(self.lengths, size=400).astype(np.float64)
        miss = np.zeros_like(self.p)
        for m in sample:
            miss += np.exp(m * np.log1p(-self.p))
        return rows * (1.0 - miss / len(sample))


def records(vocab: Vocabulary, vectors: np.ndarray, labels: np.ndarray, seed: int,
            start: int = 0, prefix: str = "doc") -> Iterator[Record]:  # fmt: skip
    """The documents as records: text, metadata ``{"c": cluster, "g": i % 100}``, vector."""
    n = len(vectors)
    for s in range(0, n, CHUNK):
        texts = vocab.texts(start + s, min(CHUNK, n - s), seed)
        for i, text in enumerate(texts, start=s):
            meta = {"c": int(labels[i]), "g": (start + i) % 100}
            yield Record(f"{prefix}{start + i}", text, None, meta, vectors[i])


# -- the database -------------------------------------------------------------------------------


def db_name(rows: int) -> str:
    return f"bench_lexical_{rows}"


def base_dsn(args: argparse.Namespace) -> str:
    return args.dsn or server.ensure_running(Path(args.home))


#: The name of the result files (``--results``).
RESULTS = [NAME]


def load_json() -> dict[str, Any]:
    path = RESULTS_DIR / f"{RESULTS[0]}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def save(data: dict[str, Any]) -> None:
    write_results(RESULTS[0], data, markdown(data))


def relation_mib(conn: Connection, name: str) -> float:
    row = conn.execute("SELECT pg_relation_size(to_regclass(%s))", (name,)).fetchone()
    return round(int(row[0] or 0) / 2**20, 1) if row else 0.0


def table_mib(conn: Connection, name: str) -> float:
    row = conn.execute("SELECT pg_table_size(to_regclass(%s))", (name,)).fetchone()
    return round(int(row[0] or 0) / 2**20, 1) if row else 0.0


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cmd_load(args: argparse.Namespace) -> None:
    """Create the database, load the rows, add the lexical index, build HNSW and bm25."""
    from fastload import fast_ingest_records

    base = base_dsn(args)
    data = load_json()
    info: dict[str, Any] = {"rows": args.rows, "vocab": args.vocab, "seed": args.seed,
                            "cpu_busy_before": round(cpu_busy(), 3)}  # fmt: skip
    data.setdefault("machine", machine(base))
    data["load"] = info
    log(f"vectors ({args.rows:,})")
    ds = make_dataset(args.rows, args.seed, kind="manifold")
    vocab = Vocabulary(args.vocab, args.seed)
    dsn = fresh_database(base, db_name(args.rows))
    with connect(dsn) as conn:
        corpus = create_corpus(conn, CORPUS, model="synthetic", dim=DIM, lexical=None)
        log("load (no lexical column)")
        t0 = time.perf_counter()
        fast_ingest_records(conn, corpus, records(vocab, ds.vectors, ds.labels, args.seed),
                            batch_size=5000)  # fmt: skip
        info["load_s"] = round(time.perf_counter() - t0, 1)
        info["load_rows_per_s"] = round(args.rows / info["load_s"])
        conn.commit()
        conn.autocommit = True
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(corpus.table))
        info["table_mib_without_lexical"] = table_mib(conn, f"pglogic.{corpus.table_name}")
        conn.autocommit = False
        log(f"loaded in {info['load_s']} s; lexical column + GIN")
        steps: list[tuple[str, float]] = []
        t0 = time.perf_counter()
        corpus = add_lexical_index(conn, corpus, TEXT_CONFIG,
                                   on_step=lambda m: steps.append((m, time.perf_counter())))  # fmt: skip
        t1 = time.perf_counter()
        gin_start = next(t for m, t in steps if m.startswith("building"))
        info["lexical_total_s"] = round(t1 - t0, 1)
        info["lexical_column_s"] = round(gin_start - t0, 1)
        info["gin_build_s"] = round(t1 - gin_start, 1)
        conn.autocommit = True
        info["table_mib_with_lexical"] = table_mib(conn, f"pglogic.{corpus.table_name}")
        info["gin_mib"] = relation_mib(conn, f"pglogic.{index_name(corpus)}")
        row = conn.execute(
            sql.SQL("SELECT avg(pg_column_size(tsv)), avg(pg_column_size(text)),"
                    " avg(length(tsv)) FROM {}").format(corpus.table)  # fmt: skip
        ).fetchone()
        assert row is not None
        info["avg_tsv_bytes"], info["avg_text_bytes"] = round(float(row[0])), round(float(row[1]))
        info["avg_lexemes_per_doc"] = round(float(row[2]), 1)
        save(data)
        log(f"lexical: {info['lexical_total_s']} s (GIN {info['gin_build_s']} s); HNSW")
        info["cpu_busy_before_hnsw"] = round(cpu_busy(), 3)
        info["hnsw_build_s"] = round(
            build_index(conn, CORPUS, m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION,
                        maintenance_work_mem=args.maintenance_work_mem), 1)  # fmt: skip
        info["hnsw"] = f"m={HNSW_M}, ef_construction={HNSW_EF_CONSTRUCTION}"
        corpus = get_corpus(conn, CORPUS)
        conn.autocommit = True
        info["hnsw_mib"] = relation_mib(conn, f"pglogic.{corpus.index_name}")
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(corpus.table))
        save(data)
        log(f"HNSW {info['hnsw_build_s']} s; bm25")
        info["bm25"] = build_bm25(conn, corpus)
        save(data)
        log(f"bm25: {info['bm25']}")


def build_bm25(conn: Connection, corpus: Corpus) -> dict[str, Any]:
    """``CREATE EXTENSION pg_search`` and a bm25 index on (id, text) with an English stemmer;
    its build time and size, or the error."""
    out: dict[str, Any] = {}
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_search")
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_search'").fetchone()
        out["version"] = row[0] if row else None
        name = f"{corpus.table_name}_bm25"
        out["index"] = (
            f"CREATE INDEX {name} ON {corpus.table_name} USING bm25 "
            "(id, (text::pdb.simple('stemmer=english', 'stopwords_language=english')))"
            " WITH (key_field='id')"
        )
        out["cpu_busy_before"] = round(cpu_busy(), 3)
        t0 = time.perf_counter()
        conn.execute(
            sql.SQL(
                "CREATE INDEX {} ON {} USING bm25 (id, (text::pdb.simple('stemmer=english',"
                " 'stopwords_language=english'))) WITH (key_field='id')"
            ).format(sql.Identifier(name), corpus.table)
        )
        out["build_s"] = round(time.perf_counter() - t0, 1)
        out["mib"] = relation_mib(conn, f"pglogic.{name}")
    except psycopg.Error as exc:
        out["error"] = f"{type(exc).__name__}: {str(exc).strip()}"
    return out


# -- report -------------------------------------------------------------------------------------


def markdown(data: dict[str, Any]) -> str:
    return "# Lexical terms at scale (`bench/lexical_latency.py`)\n\n(in progress)\n" + json.dumps(
        data.get("load", {}), indent=1
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("step", choices=["load", "measure", "ingest", "render"])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--vocab", type=int, default=1_000_000, help="vocabulary size (words)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--home", default=str(DEFAULT_HOME))
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--maintenance-work-mem", default="3GB")
    ap.add_argument("--queries", type=int, default=60, help="queries per (level, shape)")
    ap.add_argument("--terms-per-level", type=int, default=10)
    ap.add_argument("--ingest-rows", type=int, default=100_000)
    ap.add_argument("--results", default=NAME, help="bench/results/<name>.{json,md}")
    args = ap.parse_args()
    RESULTS[0] = args.results
    {"load": cmd_load}[args.step](args)


if __name__ == "__main__":
    main()
