"""Ingest benchmark: embedding throughput, database load throughput, re-ingest, HNSW build.

    .venv/bin/python bench/perf/ingest.py            # ~10 min: model, 100k-row loads, HNSW build
    .venv/bin/python bench/perf/ingest.py --quick    # ~2 min smoke run (5k rows, 200 docs)
    .venv/bin/python bench/perf/ingest.py [--rows 100000] [--batch-sizes 256,1000,5000]
    .venv/bin/python bench/perf/ingest.py --providers   # every local model's embedding speed

Sections (each measured on its own):

- **embed**: the real all-MiniLM-L6-v2 (``pglogic.embed.registry.get_embedder``) on the first
  ``--embed-docs`` (2,000) Reuters-21578 documents (title + text, as ingest embeds them) at batch
  sizes 32/64/128, and on ``--embed-sentences`` (4,000) single sentences split from them:
  docs/s, sentences/s, tokens/s; plus an end-to-end ``ingest_path`` of Reuters with the model
  (model-bound).
- **load**: ``pglogic.store.ingest.ingest_records`` (binary COPY into staging + upsert, one commit per
  batch) of ``--rows`` records with precomputed random 384-d unit vectors (``embedder=None``),
  Reuters texts and metadata cycled with unique ids, per batch size; then the same records again
  (all unchanged: must be skipped). Goal: >= 20,000 rows/s.
- **diagnosis**: cProfile of the library path, table-layout experiments (pgvector's default
  ``STORAGE EXTERNAL`` for the embedding, ``toast_tuple_target = 8160``) and the prototype in
  ``bench/lib/fastload.py`` (the changes proposed for ``pglogic/store/ingest.py``), checked to
  leave exactly the same rows and counts as the library (also for edited records).
- **hnsw**: ``pglogic.store.corpus.build_index`` (m=16, ef_construction=64) on the loaded corpus:
  time and index size.

Results: ``bench/perf/results/ingest.json`` and ``bench/perf/results/ingest.md``.

``--providers`` runs only the embedding throughput of every local model (``pglogic models list``,
``pglogic.embed.registry.MODELS``: the passage side ingest uses, prefixes included) on the same Reuters
documents and sentences at batch sizes 8/32/64/128, one ``embed()`` call per batch:
``bench/perf/results/embed_providers.{json,md}``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import gzip
import json
import pstats
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    REUTERS,
    drop_database,
    fresh_database,
    machine,
    machine_md,
    md_table,
    server_dsn,
    timer,
    wait_idle,
    write_results,
)
from bench.lib.fastload import Phases, fast_ingest_records
from pglogic.engine.source import Corpus
from pglogic.store.corpus import build_index, corpus_info, create_corpus, drop_corpus, get_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_path, ingest_records
from pglogic.store.readers import Record

RESULTS_DIR = Path(__file__).resolve().parent / "results"

GOAL_ROWS_PER_S = 20_000
TOAST_TARGET = 8160
MODEL = "all-MiniLM-L6-v2"
DIM = 384
DB_NAME = "bench_ingest"


def load_docs() -> list[dict[str, Any]]:
    """The Reuters-21578 documents (10,789)."""
    with gzip.open(REUTERS, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def unit_vectors(n: int, seed: int = 0) -> np.ndarray:
    """``n`` random 384-d unit vectors (float32)."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, DIM), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def make_records(
    docs: list[dict[str, Any]], vectors: np.ndarray, *, as_tuple: bool = False
) -> list[Record]:
    """One record per vector: Reuters title/text/metadata cycled, unique external ids."""
    out = []
    for i, vec in enumerate(vectors):
        d = docs[i % len(docs)]
        meta = {k: v for k, v in d.items() if k not in ("id", "title", "text")}
        v: Any = tuple(vec.tolist()) if as_tuple else vec
        out.append(Record(f"{d['id']}#{i}", d["text"], d.get("title") or None, meta, v))
    return out


def new_corpus(
    conn: Any, name: str, storage: str | None = None, toast_target: int | None = None
) -> Corpus:
    """A fresh corpus made by ``create_corpus``; optionally change the embedding column's TOAST
    strategy (``storage``) or the table's ``toast_tuple_target`` (a bench-side experiment)."""
    corpus = create_corpus(conn, name, model=MODEL, dim=DIM)
    if storage:
        conn.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN {} SET STORAGE {}").format(
                corpus.table, corpus.embedding, sql.SQL(storage)
            )
        )
    if toast_target:
        conn.execute(
            sql.SQL("ALTER TABLE {} SET (toast_tuple_target = {})").format(
                corpus.table, sql.Literal(toast_target)
            )
        )
    conn.commit()
    return corpus


_STORAGE = {"p": "PLAIN", "m": "MAIN", "e": "EXTERNAL", "x": "EXTENDED"}


def table_options(conn: Any, corpus: Corpus) -> str:
    """The embedding column's storage and the table's reloptions, read from the catalog."""
    row = conn.execute(
        "SELECT a.attstorage, c.reloptions FROM pg_attribute a JOIN pg_class c ON c.oid ="
        " a.attrelid WHERE a.attrelid = to_regclass(%s) AND a.attname = %s",
        (f"pglogic.{corpus.table_name}", corpus.column),
    ).fetchone()
    conn.rollback()
    opts = f"embedding {_STORAGE.get(str(row[0]), row[0])}"
    return opts + (f", {', '.join(row[1])}" if row[1] else "")


def table_sizes(conn: Any, corpus: Corpus) -> dict[str, Any]:
    """Heap, TOAST and total size of a corpus table (bytes) and rows whose vector is TOASTed."""
    reg = f"pglogic.{corpus.table_name}"
    row = conn.execute(
        "SELECT pg_relation_size(c.oid), coalesce(pg_relation_size(c.reltoastrelid), 0),"
        " pg_total_relation_size(c.oid) FROM pg_class c WHERE c.oid = to_regclass(%s)",
        (reg,),
    ).fetchone()
    conn.rollback()
    return {"heap_bytes": row[0], "toast_bytes": row[1], "total_bytes": row[2]}


# --------------------------------------------------------------------------------------- embed


def split_sentences(text: str) -> list[str]:
    """A plain sentence splitter (end punctuation or newline)."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [p.strip() for p in parts if len(p.strip()) > 1]


def bench_embed(
    docs: list[dict[str, Any]], n_docs: int, n_sentences: int, batch_sizes: list[int]
) -> dict[str, Any]:
    """Documents/s and sentences/s of the real model at several batch sizes."""
    from pglogic.embed.registry import get_embedder

    with timer() as t_load:
        emb = get_embedder(MODEL).engine  # the sentence-transformers model, no prefix
    model = emb._model  # type: ignore[attr-defined]
    texts = [Record(d["id"], d["text"], d.get("title") or None).embed_text for d in docs[:n_docs]]
    max_len = int(model.max_seq_length)
    tok = model.tokenizer
    raw_tokens = [len(ids) for ids in tok(texts, add_special_tokens=True)["input_ids"]]
    tokens = sum(min(n, max_len) for n in raw_tokens)
    sentences = [s for t in texts for s in split_sentences(t)][:n_sentences]
    sent_tokens = sum(
        min(len(ids), max_len) for ids in tok(sentences, add_special_tokens=True)["input_ids"]
    )
    emb.embed(texts[:64])  # warm-up
    import torch

    result: dict[str, Any] = {
        "model": MODEL,
        "model_load_s": round(t_load[0], 2),
        "torch_threads": torch.get_num_threads(),
        "max_seq_length": max_len,
        "docs": len(texts),
        "doc_tokens_mean": round(tokens / len(texts), 1),
        "docs_truncated_pct": round(100 * sum(n > max_len for n in raw_tokens) / len(texts), 1),
        "sentences": len(sentences),
        "sentence_tokens_mean": round(sent_tokens / max(1, len(sentences)), 1),
        "runs": [],
    }
    old = emb.batch_size  # type: ignore[attr-defined]
    try:
        for bs in batch_sizes:
            emb.batch_size = bs  # type: ignore[attr-defined]
            with timer() as td:
                out = emb.embed(texts)
            assert out.shape == (len(texts), DIM)
            with timer() as ts:
                emb.embed(sentences)
            run = {
                "batch_size": bs,
                "docs_per_s": round(len(texts) / td[0], 1),
                "doc_tokens_per_s": round(tokens / td[0]),
                "docs_seconds": round(td[0], 2),
                "sentences_per_s": round(len(sentences) / ts[0], 1),
                "sentence_tokens_per_s": round(sent_tokens / ts[0]),
                "sentences_seconds": round(ts[0], 2),
            }
            print(f"  embed bs={bs}: {run}", flush=True)
            result["runs"].append(run)
    finally:
        emb.batch_size = old  # type: ignore[attr-defined]
    return result


PROVIDER_BATCHES = (8, 32, 64, 128)


def bench_providers(
    docs: list[dict[str, Any]], n_docs: int, n_sentences: int, specs: list[str]
) -> list[dict[str, Any]]:
    """Documents/s and sentences/s of each model's passage side, one ``embed()`` per batch."""
    from pglogic.embed.registry import get_embedder

    texts = [Record(d["id"], d["text"], d.get("title") or None).embed_text for d in docs[:n_docs]]
    sentences = [s for t in texts for s in split_sentences(t)][:n_sentences]
    rows: list[dict[str, Any]] = []
    for spec in specs:
        with timer() as t_load:
            emb = get_embedder(spec)
            emb.embed(texts[:8])  # load and warm up
        for bs in PROVIDER_BATCHES:
            timings = []
            for items in (texts, sentences):
                with timer() as t:
                    for i in range(0, len(items), bs):
                        out = emb.embed(items[i : i + bs])
                        assert out.shape[1] == emb.dim
                timings.append(t[0])
            row = {
                "model": spec, "dim": emb.dim, "load_s": round(t_load[0], 2),
                "batch_size": bs, "docs": len(texts), "sentences": len(sentences),
                "docs_per_s": round(len(texts) / timings[0], 1),
                "sentences_per_s": round(len(sentences) / timings[1], 1),
            }  # fmt: skip
            print(f"  {row}", flush=True)
            rows.append(row)
    return rows


def providers_markdown(rows: list[dict[str, Any]], machine_info: dict[str, Any]) -> str:
    out = [
        "# Embedding throughput per model (`bench/perf/ingest.py --providers`)",
        "",
        machine_md(machine_info),
        "",
        f"Reuters-21578 documents (title + text, as ingest embeds them; {rows[0]['docs']}) and "
        f"sentences split from them ({rows[0]['sentences']}); the passage side of each model "
        "(e5: `passage: ` prefix), one `embed()` call per batch, CPU only.",
        "",
    ]
    out += md_table(
        ["model", "dim", "load s", "batch", "docs/s", "sentences/s"],
        [[r["model"], r["dim"], r["load_s"], r["batch_size"], r["docs_per_s"],
          r["sentences_per_s"]] for r in rows],
    ).splitlines()  # fmt: skip
    return "\n".join(out)


def bench_end_to_end(db_dsn: str, n_docs: int) -> dict[str, Any]:
    """``ingest_path`` of the Reuters file with the real model (default batch size)."""
    from pglogic.embed.registry import get_embedder

    emb = get_embedder(MODEL)
    with connect(db_dsn) as conn:
        corpus = new_corpus(conn, "reuters_e2e")
        with timer() as t:
            stats = ingest_path(conn, corpus, REUTERS, embedder=emb, limit=n_docs)
        drop_corpus(conn, corpus.name)
    return {
        "docs": stats.seen,
        "inserted": stats.inserted,
        "seconds": round(t[0], 2),
        "docs_per_s": round(stats.seen / t[0], 1),
        "embed_share_pct": round(100 * stats.embed_seconds / t[0], 1),
        "load_share_pct": round(100 * stats.load_seconds / t[0], 1),
    }


# ---------------------------------------------------------------------------------------- load


def _run_load(
    conn: Any,
    corpus: Corpus,
    records: list[Record],
    batch_size: int,
    *,
    prototype: bool = False,
    pipeline: bool = False,
) -> dict[str, Any]:
    """Load ``records`` into an empty corpus, then load them again (unchanged)."""
    gc.collect()
    phases = Phases()
    with timer() as t:
        if prototype:
            stats = fast_ingest_records(
                conn, corpus, records, batch_size=batch_size, phases=phases, pipeline=pipeline
            )
        else:
            stats = ingest_records(conn, corpus, records, embedder=None, batch_size=batch_size)
    assert stats.inserted == len(records), stats
    with timer() as t2:
        if prototype:
            again = fast_ingest_records(
                conn, corpus, records, batch_size=batch_size, pipeline=pipeline
            )
        else:
            again = ingest_records(conn, corpus, records, embedder=None, batch_size=batch_size)
    assert again.unchanged == len(records) and again.changed == 0, again
    out: dict[str, Any] = {
        "rows": len(records),
        "batch_size": batch_size,
        "seconds": round(t[0], 3),
        "rows_per_s": round(len(records) / t[0]),
        "db_seconds": round(stats.load_seconds, 3),
        "client_seconds": round(t[0] - stats.load_seconds, 3),
        "reingest_seconds": round(t2[0], 3),
        "reingest_rows_per_s": round(len(records) / t2[0]),
        "reingest_skipped": again.unchanged,
        "table_options": table_options(conn, corpus),
        **table_sizes(conn, corpus),
    }
    if prototype:
        out["phases_s"] = {k: round(v, 3) for k, v in vars(phases).items() if isinstance(v, float)}
        out["fallbacks"] = phases.fallbacks
    return out


def fingerprint(conn: Any, corpus: Corpus) -> str:
    """md5 over every row's stored content (ids, texts, metadata, hashes, vectors)."""
    row = conn.execute(
        sql.SQL(
            "SELECT md5(string_agg(concat_ws('|', external_id, title, text, metadata::text,"
            " encode(text_hash, 'hex'), encode(row_hash, 'hex'), {col}::text), ',' ORDER BY"
            " external_id)) FROM {table}"
        ).format(col=corpus.embedding, table=corpus.table)
    ).fetchone()
    conn.rollback()
    return str(row[0])


def mutate(records: list[Record]) -> list[Record]:
    """Every 10th record with new metadata, every 10th (offset 5) with a new text and vector."""
    rng = np.random.default_rng(7)
    out = []
    for i, r in enumerate(records):
        if i % 10 == 0:
            r = Record(r.external_id, r.text, r.title, r.metadata | {"edited": i}, r.vector)
        elif i % 10 == 5:
            v = rng.standard_normal(DIM).astype(np.float32)
            r = Record(
                r.external_id, r.text + " (revised)", r.title, r.metadata, v / np.linalg.norm(v)
            )
        out.append(r)
    return out


def check_equivalence(conn: Any, records: list[Record]) -> dict[str, Any]:
    """Load, then load a mutated copy, with the library and with the prototype (pipelined);
    compare the counts and the stored rows."""
    changed = mutate(records)
    out: dict[str, Any] = {"rows": len(records)}
    prints = {}
    for name in ("library", "prototype"):
        corpus = new_corpus(conn, f"equiv_{name}")
        counts = []
        for recs in (records, changed):
            if name == "library":
                st = ingest_records(conn, corpus, recs, embedder=None, batch_size=1000)
            else:
                st = fast_ingest_records(conn, corpus, recs, batch_size=1000, pipeline=True)
            counts.append([st.inserted, st.updated, st.unchanged])
        out[f"{name}_counts"] = counts
        prints[name] = fingerprint(conn, corpus)
        drop_corpus(conn, corpus.name)
    out["same_counts"] = out["library_counts"] == out["prototype_counts"]
    out["same_rows"] = prints["library"] == prints["prototype"]
    return out


def profile_library(conn: Any, records: list[Record], batch_size: int) -> dict[str, Any]:
    """cProfile of the library path: time waiting for the server vs in Python, top functions."""
    corpus = new_corpus(conn, "profile")
    prof = cProfile.Profile()
    gc.collect()
    start = time.perf_counter()
    prof.enable()
    ingest_records(conn, corpus, records, embedder=None, batch_size=batch_size)
    prof.disable()
    wall = time.perf_counter() - start
    st = pstats.Stats(prof)
    entries = st.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in entries.values())
    wait = sum(
        v[2]
        for (file, _line, fn), v in entries.items()
        if fn in ("wait", "wait_c") and "psycopg" in file
    )
    top = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:14]
    drop_corpus(conn, corpus.name)
    return {
        "rows": len(records),
        "batch_size": batch_size,
        "wall_s_profiled": round(wall, 3),
        "rows_per_s_profiled": round(len(records) / wall),
        "psycopg_wait_s": round(wait, 3),
        "psycopg_wait_pct": round(100 * wait / total, 1),
        "top_tottime": [
            {
                "function": f"{Path(file).name}:{line}({fn})",
                "calls": v[1],
                "tottime_s": round(v[2], 3),
                "cumtime_s": round(v[3], 3),
            }
            for (file, line, fn), v in top
        ],
    }


# ---------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="rows per load run (default 100k)")
    ap.add_argument("--batch-sizes", default="256,1000,5000", help="ingest batch sizes")
    ap.add_argument("--embed-docs", type=int, default=2000, help="documents for the model runs")
    ap.add_argument("--embed-sentences", type=int, default=4000, help="sentences for the model")
    ap.add_argument("--e2e-docs", type=int, default=1000, help="docs for the end-to-end ingest")
    ap.add_argument("--quick", action="store_true", help="small smoke run (5k rows, 200 docs)")
    ap.add_argument("--skip-embed", action="store_true", help="skip the model sections")
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME, help="embedded server home")
    ap.add_argument("--dsn", default=None, help="an existing server instead of the embedded one")
    ap.add_argument("--idle-wait", type=float, default=300, help="max seconds to wait for idle CPU")
    ap.add_argument("--keep", action="store_true", help=f"keep the database {DB_NAME}")
    ap.add_argument(
        "--providers", action="store_true", help="only the throughput of every local model"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.rows = min(args.rows, 5000)
        args.embed_docs = min(args.embed_docs, 200)
        args.embed_sentences = min(args.embed_sentences, 400)
        args.e2e_docs = min(args.e2e_docs, 100)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    main_bs = 1000 if 1000 in batch_sizes else batch_sizes[0]

    dsn = server_dsn(args.home, args.dsn)
    if args.providers:
        from pglogic.embed.registry import MODELS

        info = machine(dsn)
        idle_p = wait_idle(args.idle_wait)
        rows = bench_providers(load_docs(), args.embed_docs, args.embed_sentences, list(MODELS))
        data = {"machine": info, "idle": idle_p, "rows": rows}
        name = "embed_providers_quick" if args.quick else "embed_providers"
        write_results(name, data, providers_markdown(rows, info), results_dir=RESULTS_DIR)
        return 0
    db_dsn = fresh_database(dsn, DB_NAME)
    results: dict[str, Any] = {
        "benchmark": "ingest",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "args": vars(args) | {"home": str(args.home)},
        "machine": machine(db_dsn),
        "goal_rows_per_s": GOAL_ROWS_PER_S,
    }
    docs = load_docs()
    print(f"machine: {results['machine']}", flush=True)

    idle: dict[str, Any] = {}
    results["idle"] = idle
    if not args.skip_embed:
        idle["embed"] = wait_idle(args.idle_wait)
        print("embedding throughput ...", flush=True)
        results["embed"] = bench_embed(docs, args.embed_docs, args.embed_sentences, [32, 64, 128])
        print("end-to-end ingest_path with the model ...", flush=True)
        results["end_to_end"] = bench_end_to_end(db_dsn, args.e2e_docs)
        print(f"  {results['end_to_end']}", flush=True)

    vectors = unit_vectors(args.rows)
    records = make_records(docs, vectors)
    loads: list[dict[str, Any]] = []
    idle["load"] = wait_idle(args.idle_wait)
    with connect(db_dsn) as conn:
        # 1. the library path, per batch size (tables as create_corpus makes them)
        for bs in batch_sizes:
            corpus = new_corpus(conn, f"lib_bs{bs}")
            run = {"variant": "library", "vector_input": "ndarray"}
            run |= _run_load(conn, corpus, records, bs)
            print(f"  load {run}", flush=True)
            loads.append(run)
            if bs != main_bs:
                drop_corpus(conn, corpus.name)
        # 2. vectors as tuples of floats (what the JSONL/CSV readers produce)
        n_tuple = min(args.rows, 30_000)
        tuple_records = make_records(docs, vectors[:n_tuple], as_tuple=True)
        corpus = new_corpus(conn, "lib_tuple")
        run = {"variant": "library", "vector_input": "tuple"}
        run |= _run_load(conn, corpus, tuple_records, main_bs)
        print(f"  load {run}", flush=True)
        loads.append(run)
        drop_corpus(conn, corpus.name)
        del tuple_records
        # 3. table layout experiments on the library path: pgvector's default EXTERNAL storage
        #    (vectors TOASTed), and rows kept whole in the heap (toast_tuple_target: no pglz
        #    compression of the text, no TOAST insert)
        for label, storage, target in (
            ("library, EXTERNAL", "EXTERNAL", None),
            ("library, toast_tuple_target", None, TOAST_TARGET),
        ):
            corpus = new_corpus(conn, f"lib_{storage or target}", storage, target)
            run = {"variant": label, "vector_input": "ndarray"}
            run |= _run_load(conn, corpus, records, main_bs)
            print(f"  load {run}", flush=True)
            loads.append(run)
            drop_corpus(conn, corpus.name)
        # 4. the prototype (bench/lib/fastload.py), as create_corpus makes the table and with
        #    toast_tuple_target; once with the next batch prepared in a thread
        for target in (None, TOAST_TARGET):
            for bs in batch_sizes:
                corpus = new_corpus(conn, f"proto_{target}_bs{bs}", None, target)
                label = "prototype" + (", toast_tuple_target" if target else "")
                run = {"variant": label, "vector_input": "ndarray"}
                run |= _run_load(conn, corpus, records, bs, prototype=True)
                print(f"  load {run}", flush=True)
                loads.append(run)
                if bs != main_bs or target:
                    drop_corpus(conn, corpus.name)
        corpus = new_corpus(conn, "proto_pipe", None, TOAST_TARGET)
        run = {"variant": "prototype, toast_tuple_target, pipeline", "vector_input": "ndarray"}
        run |= _run_load(conn, corpus, records, main_bs, prototype=True, pipeline=True)
        print(f"  load {run}", flush=True)
        loads.append(run)
        drop_corpus(conn, corpus.name)
        # 5. the prototype leaves the same rows as the library, also for changed records
        results["equivalence"] = check_equivalence(conn, records[: min(len(records), 5000)])
        print(f"  equivalence {results['equivalence']}", flush=True)
        results["load"] = loads
        # 6. where the library's time goes
        print("profiling the library path ...", flush=True)
        n_prof = min(args.rows, 20_000)
        results["profile"] = profile_library(conn, records[:n_prof], main_bs)
        print(f"  {results['profile']}", flush=True)
        del records
        gc.collect()

        # 7. HNSW build on the 100k corpora (library, prototype-loaded)
        hnsw = []
        idle["hnsw"] = wait_idle(args.idle_wait)
        for name in (f"lib_bs{main_bs}", f"proto_None_bs{main_bs}"):
            secs = build_index(conn, name, m=16, ef_construction=64)
            info = corpus_info(conn, name)
            run = {
                "corpus": name,
                "corpus_rows": info.documents,
                "table_options": table_options(conn, get_corpus(conn, name)),
                "m": 16,
                "ef_construction": 64,
                "seconds": round(secs, 2),
                "vectors_per_s": round(info.documents / secs),
                "index_bytes": info.index_bytes,
                "index_mib": round(info.index_bytes / 2**20, 1),
                "table_bytes": info.table_bytes,
            }
            print(f"  hnsw {run}", flush=True)
            hnsw.append(run)
        results["hnsw"] = hnsw

    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    # a smoke run never replaces the committed results
    jp, mp = write_results(
        "ingest_quick" if args.quick else "ingest",
        results,
        render(results),
        results_dir=RESULTS_DIR,
    )
    if not args.keep:
        drop_database(dsn, DB_NAME)
    print(f"wrote {jp} and {mp}")
    return 0


def render(r: dict[str, Any]) -> str:
    """The Markdown report."""
    out = [
        "# Ingest benchmark",
        "",
        f"Run {r['started']} with `{' '.join(['python bench/perf/ingest.py', *sys.argv[1:]])}`.",
        "",
        "## Machine",
        "",
        machine_md(r["machine"]),
        "- CPU busy (other processes; the machine is shared) before each section: "
        + ", ".join(f"{k} {v['cpu_busy_before']:.0%}" for k, v in r.get("idle", {}).items()),
        "",
    ]
    if "embed" in r:
        e = r["embed"]
        out += [
            f"## Embedding throughput ({e['model']}, CPU, {e['torch_threads']} torch threads)",
            "",
            f"{e['docs']} Reuters documents (title + text; mean {e['doc_tokens_mean']} tokens "
            f"after truncation to {e['max_seq_length']}, {e['docs_truncated_pct']}% truncated) "
            f"and {e['sentences']} single sentences split from them (mean "
            f"{e['sentence_tokens_mean']} tokens).",
            "",
            md_table(
                ["batch size", "docs/s", "doc tokens/s", "sentences/s", "sentence tokens/s"],
                [
                    [
                        x["batch_size"],
                        x["docs_per_s"],
                        x["doc_tokens_per_s"],
                        x["sentences_per_s"],
                        x["sentence_tokens_per_s"],
                    ]
                    for x in e["runs"]
                ],
            ),
            "",
        ]
    if "end_to_end" in r:
        x = r["end_to_end"]
        out += [
            f"End-to-end `ingest_path` of {x['docs']} Reuters documents with the model: "
            f"**{x['docs_per_s']} docs/s** ({x['embed_share_pct']}% of the time embedding, "
            f"{x['load_share_pct']}% loading).",
            "",
        ]
    goal = r["goal_rows_per_s"]
    out += [
        f"## Database load (precomputed 384-d vectors, goal ≥ {goal:,} rows/s)",
        "",
        "`db s` = COPY + upsert + commit (IngestStats.load_seconds); `client s` = the rest "
        "(hashing, lookup query, vector conversion). Re-ingest = the same rows again "
        "(all skipped as unchanged).",
        "",
        md_table(
            [
                "variant",
                "table",
                "vector input",
                "rows",
                "batch",
                "rows/s",
                "goal met",
                "db s",
                "client s",
                "re-ingest rows/s",
                "heap / TOAST MiB",
            ],
            [
                [
                    x["variant"],
                    x["table_options"],
                    x["vector_input"],
                    x["rows"],
                    x["batch_size"],
                    x["rows_per_s"],
                    "yes" if x["rows_per_s"] >= goal else "no",
                    x["db_seconds"],
                    x["client_seconds"],
                    x["reingest_rows_per_s"],
                    f"{x['heap_bytes'] / 2**20:.0f} / {x['toast_bytes'] / 2**20:.0f}",
                ]
                for x in r["load"]
            ],
        ),
        "",
    ]
    if "equivalence" in r:
        e = r["equivalence"]
        out += [
            f"Equivalence check ({e['rows']} rows loaded, then again with 10% metadata edits and "
            f"10% new texts/vectors): [inserted, updated, unchanged] library "
            f"{e['library_counts']}, prototype {e['prototype_counts']}; same counts: "
            f"{e['same_counts']}; identical stored rows: {e['same_rows']}.",
            "",
        ]
    p = r["profile"]
    out += [
        f"### Profile of the library path ({p['rows']} rows, batch {p['batch_size']}, cProfile)",
        "",
        f"{p['psycopg_wait_pct']}% of the profiled time is psycopg waiting for the server "
        f"({p['psycopg_wait_s']} s of {p['wall_s_profiled']} s).",
        "",
        md_table(
            ["function", "calls", "tottime s", "cumtime s"],
            [[x["function"], x["calls"], x["tottime_s"], x["cumtime_s"]] for x in p["top_tottime"]],
        ),
        "",
    ]
    protos = [x for x in r["load"] if x["variant"].startswith("prototype") and "phases_s" in x]
    if protos:
        out += [
            "### Prototype phases (seconds)",
            "",
            md_table(
                ["variant", "batch", *protos[0]["phases_s"].keys()],
                [[x["variant"], x["batch_size"], *x["phases_s"].values()] for x in protos],
            ),
            "",
        ]
    out += [
        "## HNSW build (m=16, ef_construction=64, maintenance_work_mem=1GB)",
        "",
        md_table(
            ["corpus", "rows", "table", "seconds", "vectors/s", "index MiB"],
            [
                [
                    x["corpus"],
                    x["corpus_rows"],
                    x["table_options"],
                    x["seconds"],
                    x["vectors_per_s"],
                    x["index_mib"],
                ]
                for x in r["hnsw"]
            ],
        ),
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
