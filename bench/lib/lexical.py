"""Lexical terms (``match:``) in the benchmarks: which documents a phrase matches, and the synthetic
lexical corpus of ``bench/perf/lexical_latency.py`` (Zipf texts over a Reuters vocabulary) with the
helpers that pick its terms by document frequency, run its statements and read their plans.
"""

from __future__ import annotations

import gzip
import json
import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any

import numpy as np
from psycopg import sql

from bench.lib.benchlib import REUTERS
from bench.lib.synthetic import make_dataset, make_queries
from pglogic.engine.compile import LEXICAL_COLUMN, CompiledQuery, Source
from pglogic.engine.source import Corpus
from pglogic.store.db import Connection


def match_sets(conn: Connection, corpus: Corpus, texts: Sequence[str]) -> dict[str, set[str]]:
    """For each text: the external ids of the documents its phrase matches in the corpus's
    lexical index (the ``match:`` semantics: ``tsv @@ phraseto_tsquery(config, text)``); a text
    without a searchable word (stop words only) matches nothing.

    Example:
        >>> match_sets(conn, corpus, ["wheat"])["wheat"]  # doctest: +SKIP
        {'reuters-5', ...}
    """
    src = Source.for_corpus(corpus)
    stmt = sql.SQL(
        "SELECT {ext} FROM {frm} WHERE {tsv} @@ phraseto_tsquery(%s::regconfig, %s)"
    ).format(ext=src.col("external_id"), frm=src.from_, tsv=src.col(LEXICAL_COLUMN))
    out: dict[str, set[str]] = {}
    for text in texts:
        rows = conn.execute(stmt, (corpus.lexical_config, text)).fetchall()
        out[text] = {str(r[0]) for r in rows}
    return out


CORPUS = "lex"


LEVELS = (10, 100, 1_000, 10_000, 100_000)


ZIPF_S = 1.0


ZIPF_Q = 2.7


TEXT_CONFIG = "english"


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
        return [
            " ".join(words[e - m : e]) for e, m in zip(ends.tolist(), lens.tolist(), strict=True)
        ]

    def expected_df(self, rows: int) -> np.ndarray:
        """Each word's expected document frequency in ``rows`` documents (before stemming)."""
        sample = np.random.default_rng(0).choice(self.lengths, size=400).astype(np.float64)
        miss = np.zeros_like(self.p)
        for m in sample:
            miss += np.exp(m * np.log1p(-self.p))
        return rows * (1.0 - miss / len(sample))


def db_name(rows: int) -> str:
    return f"bench_lexical_{rows}"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def query_vectors(seed: int, n: int, salt: int) -> list[np.ndarray]:
    """``n`` query vectors near the cluster centres of the loaded data (``make_dataset`` draws
    its topics and centres first: a one-row isotropic dataset of the same seed has the same)."""
    centres = make_dataset(1, seed, kind="isotropic")
    return [q["t1"] for q in make_queries(centres, n, 1, seed + salt)]


def document_frequency(conn: Connection, corpus: Corpus, text: str) -> int:
    """How many documents match ``text`` (its words as a phrase), by the GIN index."""
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE tsv @@ phraseto_tsquery(%s::regconfig, %s)").format(
            corpus.table
        ),
        (TEXT_CONFIG, text),
    ).fetchone()
    conn.rollback()
    return int(row[0]) if row else 0


def pick_terms(conn: Connection, corpus: Corpus, vocab: Vocabulary, rows: int, per_level: int,
               seed: int) -> dict[str, list[tuple[str, int]]]:  # fmt: skip
    """Per level: ``per_level`` words whose measured document frequency is within a factor 1.4
    of it (candidates by their expected frequency), and phrases of two words of the top level."""
    from pglogic.store.lexical import lexical_problems

    expected = vocab.expected_df(rows)
    rng = np.random.default_rng(seed)
    out: dict[str, list[tuple[str, int]]] = {}
    for level in LEVELS:
        ranks = np.flatnonzero((expected > level / 1.2) & (expected < level * 1.2))
        rng.shuffle(ranks)
        chosen: list[tuple[str, int]] = []
        for r in ranks[: 8 * per_level].tolist():
            word = str(vocab.words[r])
            if lexical_problems(conn, TEXT_CONFIG, [word]):
                conn.rollback()
                continue
            df = document_frequency(conn, corpus, word)
            if level / 1.4 <= df <= level * 1.4 and all(df != d or w != word for w, d in chosen):
                chosen.append((word, df))
            if len(chosen) == per_level:
                break
        out[str(level)] = chosen
        log(f"level {level}: {chosen}")
    top = [w for w, _ in out[str(LEVELS[-1])]]
    phrases = [(f"{a} {b}", 0) for a, b in zip(top, top[1:] + top[:1], strict=True)]
    out["phrase"] = [(p, document_frequency(conn, corpus, p)) for p, _ in phrases]
    log(f"phrases: {out['phrase']}")
    return out


def run_text(conn: Connection, compiled: CompiledQuery, text: str, params: dict[str, Any]) -> Any:
    """Run ``text`` with the compiled query's settings, as ``search.execute`` does."""
    from pglogic.engine.compile import set_local

    with conn.pipeline(), conn.transaction():
        for stmt in set_local(compiled.settings):
            conn.execute(stmt)
        cur = conn.execute(text.encode(), params)
        rows = cur.fetchall()
    return rows


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def explain(conn: Connection, compiled: CompiledQuery, text: str, params: dict[str, Any]
            ) -> dict[str, Any]:  # fmt: skip
    """EXPLAIN (ANALYZE, BUFFERS) of ``text``: time, buffers, and what the scans read."""
    rows = run_text(conn, compiled, "EXPLAIN (ANALYZE, BUFFERS, VERBOSE, FORMAT JSON) " + text,
                    params)  # fmt: skip
    doc = rows[0][0]
    doc = doc[0] if isinstance(doc, list) else doc
    plan = doc["Plan"]
    out: dict[str, Any] = {
        "execution_ms": round(doc["Execution Time"], 3),
        "planning_ms": round(doc["Planning Time"], 3),
        "shared_hit": plan.get("Shared Hit Blocks", 0),
        "shared_read": plan.get("Shared Read Blocks", 0),
    }
    nodes = []
    for node in plan_nodes(plan):
        kind = node["Node Type"]
        buffers = node.get("Shared Hit Blocks", 0) + node.get("Shared Read Blocks", 0)
        removed = node.get("Rows Removed by Index Recheck", 0) + node.get(
            "Rows Removed by Filter", 0
        )
        loops = node.get("Actual Loops", 1) or 1
        node["Actual Rows"] = node.get("Actual Rows", 0) * loops  # per loop: all workers' rows
        removed *= loops
        nodes.append([kind, node["Actual Rows"], removed, buffers, node.get("Workers Launched")])
        if kind == "Gather Merge" or kind == "Gather":
            out["workers"] = node.get("Workers Launched", 0)
        if kind == "Bitmap Index Scan":
            out["gin_rows"] = out.get("gin_rows", 0) + node["Actual Rows"]
            out["gin_buffers"] = buffers
        elif kind in ("Bitmap Heap Scan", "Seq Scan", "Parallel Seq Scan"):
            out["scan"] = kind
            out["heap_rows"] = out.get("heap_rows", 0) + node["Actual Rows"]
            out["heap_blocks_exact"] = node.get("Exact Heap Blocks", 0)
            out["heap_blocks_lossy"] = node.get("Lossy Heap Blocks", 0)
            out["removed"] = removed
            out["heap_buffers"] = buffers
        elif kind == "Index Scan" and "hnsw" in node.get("Index Name", ""):
            out["scan"] = "HNSW"
            out["hnsw_rows"] = out.get("hnsw_rows", 0) + node["Actual Rows"]
            out["hnsw_buffers"] = buffers
        elif kind == "Sort":
            out["sort"] = node.get("Sort Method")
    out["nodes"] = nodes
    return out


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
