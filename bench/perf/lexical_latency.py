"""Lexical terms (``match:"..."``) at scale: candidate latency by document frequency, against
HNSW candidates; pg_search (BM25) vs built-in full text; ingest cost of the lexical column.

    python bench/perf/lexical_latency.py load      [--rows 1000000]   # data, indexes (~1 h, 2 busy cores)
    python bench/perf/lexical_latency.py measure   [--rows 1000000]   # latency, EXPLAIN, pg_search
    python bench/perf/lexical_latency.py ingest    [--ingest-rows 100000]
    python bench/perf/lexical_latency.py render                       # rewrite the .md from the .json

Data (deterministic for ``--seed``): ``--rows`` documents with synthetic 384-d vectors
(``synthetic.make_dataset``, the ``manifold`` clusters of ``bench/perf/scale.py``) and synthetic texts whose
words follow a Zipf law (p(r) ~ 1 / (r + 2.7), the Zipf-Mandelbrot fit of English) over a
vocabulary of ``--vocab`` words: the Reuters-21578 words ranked by their frequency in Reuters,
then compounds of two Reuters words (the rare names and codes of a large corpus; Reuters alone
has 29k words, and a 1M-document corpus has many more), document lengths drawn from Reuters'.
Query terms are words whose measured document frequency is within a factor ~1.4 of 10, 100,
1k, 10k, 100k documents.

``load`` creates database ``bench_lexical_<rows>`` on the embedded server under ``--home``
(default /work/lexical-bench), loads the rows without a lexical column (binary COPY,
``bench/lib/fastload.py``), adds the lexical column and its GIN index
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

Results: ``bench/perf/results/lexical_latency.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import (
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
from bench.lib.lexical import (
    CORPUS,
    LEVELS,
    TEXT_CONFIG,
    ZIPF_Q,
    Vocabulary,
    db_name,
    explain,
    log,
    pick_terms,
    query_vectors,
    quoted,
    run_text,
)
from bench.lib.synthetic import DIM, make_dataset
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

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "lexical_latency"
DEFAULT_HOME = Path("/work/lexical-bench")
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
CHUNK = 20_000


# -- data ---------------------------------------------------------------------------------------


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


def base_dsn(args: argparse.Namespace) -> str:
    return args.dsn or server.ensure_running(Path(args.home))


#: The name of the result files (``--results``).
RESULTS = [NAME]


def load_json(*, render: bool = False) -> dict[str, Any]:
    """The results so far; a step that measures merges into them without their provenance
    (the file then names this run), ``render`` keeps it."""
    path = RESULTS_DIR / f"{RESULTS[0]}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    return data if render else provenance.fresh(data)


def save(data: dict[str, Any]) -> None:
    write_results(RESULTS[0], data, markdown(data), results_dir=RESULTS_DIR)


def relation_mib(conn: Connection, name: str) -> float:
    row = conn.execute("SELECT pg_relation_size(to_regclass(%s))", (name,)).fetchone()
    return round(int(row[0] or 0) / 2**20, 1) if row else 0.0


def table_mib(conn: Connection, name: str) -> float:
    row = conn.execute("SELECT pg_table_size(to_regclass(%s))", (name,)).fetchone()
    return round(int(row[0] or 0) / 2**20, 1) if row else 0.0


def cmd_load(args: argparse.Namespace) -> None:
    """Create the database, load the rows, add the lexical index, build HNSW and bm25."""
    from bench.lib.fastload import fast_ingest_records

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
            sql.SQL(
                "SELECT avg(pg_column_size(tsv)), avg(pg_column_size(text)),"
                " avg(length(tsv)) FROM {}"
            ).format(corpus.table)
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
        row = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'pg_search'"
        ).fetchone()
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


# -- measurements -------------------------------------------------------------------------------


def cte_of(compiled: CompiledQuery, name: str) -> str:
    """``WITH <CTE name> SELECT count(*)``: the compiled statement's scan ``name`` alone."""
    text = compiled.text
    head = f'"{name}" AS MATERIALIZED ('
    if head not in text:
        head = f"{name} AS MATERIALIZED ("
    start = text.index(head)
    depth, end = 0, text.index("(", start)
    for end in range(end, len(text)):  # noqa: B020 - the scan goes on from the first "("
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            break
    return f'WITH {text[start : end + 1]} SELECT count(*) FROM "{name}"'


#: The query shapes: name -> (lexical text, semantic text); ``t`` is the term of the level.
SHAPES = {
    "t alone": ("match:{t}", '"b"'),
    '"a" AND t': ('"a" AND match:{t}', '"a" AND "b"'),
    '"a" AND NOT t': ('"a" AND NOT match:{t}', '"a" AND NOT "b"'),
    '"a" OR t': ('"a" OR match:{t}', '"a" OR "b"'),
}


def cmd_measure(args: argparse.Namespace) -> None:
    """Latency of lexical vs semantic candidates per document frequency; EXPLAIN; pg_search."""
    base = base_dsn(args)
    data = load_json()
    data.setdefault("machine", machine(base))
    dsn = make_conninfo(base, dbname=db_name(args.rows))
    vocab = Vocabulary(args.vocab, args.seed)
    va = query_vectors(args.seed, args.queries, 101)
    vb = query_vectors(args.seed, args.queries, 202)
    out: dict[str, Any] = {
        "queries": args.queries,
        "k": 10,
        "cpu_busy_before": round(cpu_busy(), 3),
    }
    data["measure"] = out
    with connect(dsn) as conn:
        corpus = get_corpus(conn, CORPUS)
        conn.rollback()
        terms = pick_terms(conn, corpus, vocab, args.rows, args.terms_per_level, args.seed)
        out["terms"] = terms
        opts = SearchOptions(k=10)
        compiled: dict[tuple[str, str], CompiledQuery] = {}
        for shape, (lex, sem) in SHAPES.items():
            compiled[(shape, "lexical")] = compile_query(parse(lex.format(t='"w"')), corpus, opts)
            compiled[(shape, "semantic")] = compile_query(parse(sem), corpus, opts)
        out["depths"] = {f"{s} / {kind}": {k: v for k, v in c.params.items() if "depth" in k}
                         for (s, kind), c in compiled.items()}  # fmt: skip
        out["settings"] = {f"{s} / {kind}": c.settings for (s, kind), c in compiled.items()}
        # the scans alone: the lexical x0 and the semantic c0 of "a" AND t (same statement), the
        # x0 of match:t alone, and the c0 of "b" alone
        scans = scan_statements(compiled)
        levels = [str(x) for x in LEVELS] + ["phrase"]
        results: list[dict[str, Any]] = []
        out["latency"] = results
        out["explain"] = []

        def vectors(i: int) -> dict[str, np.ndarray]:
            return phrase_vectors(["a and b"], {"a": va[i], "b": vb[i]})

        for level in levels:
            words = [w for w, _ in terms[level]]
            if not words:
                continue
            log(f"level {level}: {len(words)} terms")
            jobs: dict[str, Callable[[int], Any]] = {}
            for shape in SHAPES:
                for kind in ("lexical", "semantic"):
                    if kind == "semantic" and level != levels[0]:
                        continue  # the semantic side does not depend on the level
                    lex, sem = SHAPES[shape]

                    def job(i: int, lex: str = lex, sem: str = sem, kind: str = kind,
                            words: list[str] = words) -> Any:  # fmt: skip
                        # compiled per query as search() does (a cached shape: microseconds)
                        text = (
                            lex.format(t=quoted(words[i % len(words)]))
                            if kind == "lexical"
                            else sem
                        )
                        return execute(conn, compile_query(parse(text), corpus, opts), vectors(i))

                    jobs[f"{shape} / {kind}"] = job
            for label, (c, name) in scans.items():
                if not c.lexical and level != levels[0]:
                    continue
                text = cte_of(c, name)

                def scan(i: int, c: CompiledQuery = c, text: str = text,
                         words: list[str] = words) -> Any:  # fmt: skip
                    params = c.with_vectors(vectors(i))
                    if c.lexical:
                        params = {**params, "q0": words[i % len(words)]}
                    return run_text(conn, c, text, params)

                jobs[f"scan: {label}"] = scan
            timed = time_jobs(jobs, args.queries, len(words))
            for label, secs in timed.items():
                results.append({"level": level, "what": label, **summary_ms(secs)})
                log(f"  {label}: {summary_ms(secs)}")
            explain_level(conn, scans, level, words, level == levels[0], vectors, out)
            save(data)
        out["bm25_vs_tsvector"] = bm25_vs_tsvector(conn, corpus, terms, levels, args.queries)
        save(data)


def scan_statements(
    compiled: dict[tuple[str, str], CompiledQuery],
) -> dict[str, tuple[CompiledQuery, str]]:
    """The scans timed alone: the lexical ``x0`` and the HNSW ``c0`` of ``"a" AND match:t``
    (same statement), the ``x0`` of ``match:t`` alone, and the HNSW scan of ``"b"`` alone."""
    return {
        "x0 of match:t": (compiled[("t alone", "lexical")], "x0"),
        'x0 of "a" AND match:t': (compiled[('"a" AND t', "lexical")], "x0"),
        'c0 ("a", HNSW) of "a" AND match:t': (compiled[('"a" AND t', "lexical")], "c0"),
        'sims of "b" alone (HNSW, k)': (compiled[("t alone", "semantic")], "sims"),
    }


def explain_level(
    conn: Connection,
    scans: dict[str, tuple[CompiledQuery, str]],
    level: str,
    words: list[str],
    first: bool,
    vectors: Callable[[int], dict[str, np.ndarray]],
    out: dict[str, Any],
) -> None:
    """EXPLAIN (ANALYZE, BUFFERS) of each scan with the level's first 3 terms (the HNSW scan
    of "b" once), into ``out["explain"]``; the VERBOSE text of the first mixed ``x0`` into
    ``out["plan_text"]``."""
    for i in range(min(3, len(words))):
        for label, (c, name) in scans.items():
            if not c.lexical and (not first or i > 0):
                continue
            params = c.with_vectors(vectors(i))
            if c.lexical:
                params = {**params, "q0": words[i]}
            out["explain"].append({"level": level, "term": words[i] if c.lexical else None,
                                   "what": label, **explain(conn, c, cte_of(c, name), params)})  # fmt: skip
            if i == 0 and label.startswith('x0 of "a"'):
                rows = run_text(conn, c, "EXPLAIN (ANALYZE, BUFFERS, VERBOSE) "
                                + cte_of(c, name), params)  # fmt: skip
                out.setdefault("plan_text", {})[level] = [
                    re.sub(r"'\[[^\]]*\]'::vector", "'[…]'::vector", r[0]) for r in rows
                ]


def cmd_explain(args: argparse.Namespace) -> None:
    """The EXPLAIN part of ``measure`` again, on the terms it picked."""
    data = load_json()
    out = data["measure"]
    dsn = make_conninfo(base_dsn(args), dbname=db_name(args.rows))
    va = query_vectors(args.seed, args.queries, 101)
    vb = query_vectors(args.seed, args.queries, 202)
    opts = SearchOptions(k=10)

    def vectors(i: int) -> dict[str, np.ndarray]:
        return phrase_vectors(["a and b"], {"a": va[i], "b": vb[i]})

    with connect(dsn) as conn:
        corpus = get_corpus(conn, CORPUS)
        conn.rollback()
        compiled: dict[tuple[str, str], CompiledQuery] = {}
        for shape, (lex, sem) in SHAPES.items():
            compiled[(shape, "lexical")] = compile_query(parse(lex.format(t='"w"')), corpus, opts)
            compiled[(shape, "semantic")] = compile_query(parse(sem), corpus, opts)
        scans = scan_statements(compiled)
        out["explain"] = []
        out["plan_text"] = {}
        levels = [lv for lv, ts in out["terms"].items() if ts]
        for level in levels:
            words = [w for w, _ in out["terms"][level]]
            explain_level(conn, scans, level, words, level == levels[0], vectors, out)
            log(f"explained {level}")
    save(data)


def cmd_semantic(args: argparse.Namespace) -> None:
    """The semantic side again, after ``measure`` (whose semantic shapes ran first, with the
    least warm caches): every semantic shape and HNSW scan, ``--queries`` warm queries each."""
    data = load_json()
    out = data["measure"]
    dsn = make_conninfo(base_dsn(args), dbname=db_name(args.rows))
    va = query_vectors(args.seed, args.queries, 101)
    vb = query_vectors(args.seed, args.queries, 202)
    word = out["terms"][str(LEVELS[0])][0][0]
    opts = SearchOptions(k=10)

    def vectors(i: int) -> dict[str, np.ndarray]:
        return phrase_vectors(["a and b"], {"a": va[i], "b": vb[i]})

    with connect(dsn) as conn:
        corpus = get_corpus(conn, CORPUS)
        conn.rollback()
        jobs: dict[str, Callable[[int], Any]] = {}
        for shape, (_, sem) in SHAPES.items():
            jobs[f"{shape} / semantic"] = lambda i, sem=sem: execute(
                conn, compile_query(parse(sem), corpus, opts), vectors(i)
            )
        mixed = compile_query(parse(f'"a" AND match:{quoted(word)}'), corpus, opts)
        alone = compile_query(parse('"b"'), corpus, opts)
        for label, c, name in (
            ('c0 ("a", HNSW) of "a" AND match:t', mixed, "c0"),
            ('sims of "b" alone (HNSW, k)', alone, "sims"),
        ):
            text = cte_of(c, name)
            jobs[f"scan: {label}"] = lambda i, c=c, text=text: run_text(
                conn, c, text, c.with_vectors(vectors(i))
            )
        busy = cpu_busy()
        timed = time_jobs(jobs, args.queries, 10)
    out["semantic_rerun"] = {
        "cpu_busy_before": round(busy, 3),
        "rows": [{"what": label, **summary_ms(secs)} for label, secs in timed.items()],
    }
    for r in out["semantic_rerun"]["rows"]:
        log(f"  {r}")
    save(data)


def cmd_bm25_serial(args: argparse.Namespace) -> None:
    """pg_search's top-depth query again without parallel workers
    (``max_parallel_workers_per_gather = 0``): the plan ``measure`` timed is a Gather Merge over
    2 workers, whose start-up is part of its latency."""
    data = load_json()
    out = data["measure"]
    dsn = make_conninfo(base_dsn(args), dbname=db_name(args.rows))
    depth = out["bm25_vs_tsvector"]["depth"]
    rows = []
    with connect(dsn) as conn:
        conn.autocommit = True
        corpus = get_corpus(conn, CORPUS)
        conn.execute("SET max_parallel_workers_per_gather = 0")
        for level, ts in out["terms"].items():
            words = [w for w, _ in ts]
            if not words:
                continue
            op = "###" if level == "phrase" else "|||"
            q = sql.SQL(
                "SELECT id, pdb.score(id) FROM {t} WHERE text " + op + " %(q)s"
                " ORDER BY pdb.score(id) DESC LIMIT %(d)s"
            ).format(t=corpus.table)
            timed = time_jobs(
                {
                    "bm25": lambda i, q=q, ws=words: conn.execute(
                        q, {"q": ws[i % len(ws)], "d": depth}
                    ).fetchall()
                },
                args.queries,
                len(words),
            )
            rows.append({"level": level, **summary_ms(timed["bm25"])})
            log(f"  bm25 serial {rows[-1]}")
    out["bm25_serial"] = rows
    save(data)


def time_jobs(jobs: dict[str, Callable[[int], Any]], n: int, warm: int) -> dict[str, list[float]]:
    """Run every job ``warm`` times (warm-up), then ``n`` times each, in rotating order per
    query; the seconds of each timed run."""
    names = list(jobs)
    for i in range(warm):
        for name in names:
            jobs[name](i)
    out: dict[str, list[float]] = {name: [] for name in names}
    for i in range(n):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            t0 = time.perf_counter()
            jobs[name](i)
            out[name].append(time.perf_counter() - t0)
    return out


def bm25_vs_tsvector(conn: Connection, corpus: Corpus, terms: dict[str, list[tuple[str, int]]],
                     levels: Sequence[str], n: int, depth: int = 100) -> dict[str, Any]:  # fmt: skip
    """Top-``depth`` candidates of a word: BM25 (pg_search) vs ``@@`` + ``ts_rank_cd`` (GIN)."""
    conn.autocommit = True
    has = conn.execute(
        "SELECT 1 FROM pg_indexes WHERE schemaname = 'pglogic' AND indexname = %s",
        (f"{corpus.table_name}_bm25",),
    ).fetchone()
    out: dict[str, Any] = {"depth": depth, "rows": []}
    tsv_sql = sql.SQL(
        "SELECT id FROM {t} WHERE tsv @@ phraseto_tsquery(%(c)s::regconfig, %(q)s)"
        " ORDER BY ts_rank_cd(tsv, phraseto_tsquery(%(c)s::regconfig, %(q)s), 32) DESC, id"
        " LIMIT %(d)s"
    ).format(t=corpus.table)
    # a word: match (|||); a phrase: the phrase operator (###)
    bm25_word = sql.SQL(
        "SELECT id, pdb.score(id) FROM {t} WHERE text ||| %(q)s ORDER BY pdb.score(id) DESC"
        " LIMIT %(d)s"
    ).format(t=corpus.table)
    bm25_phrase = sql.SQL(
        "SELECT id, pdb.score(id) FROM {t} WHERE text ### %(q)s ORDER BY pdb.score(id) DESC"
        " LIMIT %(d)s"
    ).format(t=corpus.table)
    out["tsvector_sql"] = tsv_sql.as_string(conn)
    out["bm25_sql"] = bm25_word.as_string(conn)
    out["bm25_phrase_sql"] = bm25_phrase.as_string(conn)
    if not has:
        out["error"] = "no bm25 index (see load.bm25)"
        conn.autocommit = False
        return out
    for level in levels:
        words = [w for w, _ in terms[level]]
        if not words:
            continue
        bm = bm25_phrase if level == "phrase" else bm25_word
        jobs: dict[str, Callable[[int], Any]] = {
            "tsvector": lambda i, ws=words: conn.execute(
                tsv_sql, {"c": TEXT_CONFIG, "q": ws[i % len(ws)], "d": depth}
            ).fetchall(),
            "bm25": lambda i, bm=bm, ws=words: conn.execute(
                bm, {"q": ws[i % len(ws)], "d": depth}
            ).fetchall(),
        }
        timed = time_jobs(jobs, n, len(words))
        overlap = []
        for w in words:
            a = {r[0] for r in conn.execute(tsv_sql, {"c": TEXT_CONFIG, "q": w, "d": depth})}
            b = {r[0] for r in conn.execute(bm, {"q": w, "d": depth})}
            overlap.append(len(a & b) / max(1, min(len(a), len(b))))
        row = {"level": level, **{f"{k}_{m}": v for k, secs in timed.items()
                                  for m, v in summary_ms(secs).items()},
               "top_overlap": round(statistics.fmean(overlap), 3)}  # fmt: skip
        out["rows"].append(row)
        log(f"  bm25 vs tsvector {level}: {row}")
    conn.autocommit = False
    return out


#: Ingest variants: no lexical column; the column and its GIN index (what ``create_corpus``
#: makes); the column alone (its GIN index dropped: the cost of computing the words).
INGEST_VARIANTS = ("without", "with", "column")


def cmd_ingest(args: argparse.Namespace) -> None:
    """Rows/s of ``ingest_records`` (vectors given, default batch) into a corpus with and
    without the lexical column, alternating, twice each; and adding the column afterwards."""
    from pglogic.store.corpus import drop_corpus

    base = base_dsn(args)
    data = load_json()
    data.setdefault("machine", machine(base))
    n = args.ingest_rows
    vocab = Vocabulary(args.vocab, args.seed)
    ds = make_dataset(n, args.seed + 1, kind="isotropic")
    recs = list(records(vocab, ds.vectors, ds.labels, args.seed + 1, prefix="ing"))
    out: dict[str, Any] = {"rows": n, "runs": []}
    data["ingest"] = out
    name = "bench_lexical_ingest"
    dsn = fresh_database(base, name)
    try:
        with connect(dsn) as conn:
            for r in range(args.ingest_rounds):
                order = list(INGEST_VARIANTS) if r % 2 == 0 else list(reversed(INGEST_VARIANTS))
                for variant in order:
                    busy = cpu_busy()
                    corpus = create_corpus(conn, f"{variant}{r}", model="synthetic", dim=DIM,
                                           lexical=None if variant == "without" else TEXT_CONFIG)  # fmt: skip
                    if variant == "column":  # the tsvector column without its GIN index
                        conn.execute(
                            sql.SQL("DROP INDEX {}").format(
                                sql.Identifier("pglogic", index_name(corpus))
                            )
                        )
                        conn.commit()
                    t0 = time.perf_counter()
                    stats = ingest_records(conn, corpus, recs, embedder=None)
                    secs = time.perf_counter() - t0
                    conn.commit()
                    run = {"round": r, "lexical": variant, "s": round(secs, 1),
                           "rows_per_s": round(n / secs), "inserted": stats.inserted,
                           "table_mib": table_mib(conn, f"pglogic.{corpus.table_name}"),
                           "cpu_busy_before": round(busy, 3)}  # fmt: skip
                    conn.rollback()
                    if variant == "without" and r == 0:  # the other path: add the column later
                        t0 = time.perf_counter()
                        add_lexical_index(conn, corpus, TEXT_CONFIG)
                        run["add_lexical_after_s"] = round(time.perf_counter() - t0, 1)
                    out["runs"].append(run)
                    log(f"ingest {run}")
                    drop_corpus(conn, corpus.name)
                    conn.commit()
                    save(data)
    finally:
        drop_database(base, name)
    for variant in INGEST_VARIANTS:
        rates = [x["rows_per_s"] for x in out["runs"] if x["lexical"] == variant]
        out[f"median_rows_per_s_{variant}"] = round(statistics.median(rates))
    save(data)


# -- report -------------------------------------------------------------------------------------


#: The findings, written after the run (rendered under "What this means").
FINDINGS = """
The machine was shared: other helpers' jobs kept both cores 100% busy during the whole run
(`cpu_busy_before` in the JSON), so absolute times are inflated and p95s carry scheduling stalls
of ~90 ms even for 1 ms queries; medians, rows and buffers are the solid part, and the ratios.

- **A lexical candidate scan is cheap when the term is rare.** `x0` finds the term's documents
  in the GIN index (a handful of index pages) but the index gives no order: every matching row
  is fetched, its tsvector detoasted, ranked with `ts_rank_cd` (and, in a mixed statement, every
  semantic similarity of the statement computed) before the top depth is kept: ~4 buffers and
  15–30 µs per matching row. Up to ~100 matches it costs 1–2 ms, less than the HNSW scan of a
  semantic term (~10 ms at depth 142); at ~1k matches (0.1% of the corpus) 28 ms, about 3× an
  HNSW scan; at ~10k 0.2 s and at ~100k 1.3–1.7 s, and the whole statement follows. A phrase of
  two common words pays for every document holding both words (~20k rechecked for ~120
  matches: ~0.28 s).
- **Negated lexical terms cost nothing at any frequency**: `"a" AND NOT match:t` evaluates `t`
  on the HNSW candidates only (5–13 ms from 10 to 100k matches), cheaper than the semantic
  `"a" AND NOT "b"` (32 ms: the guide scan at depth 400).
- **pg_search's BM25 stays flat**: its top 100 cost 1.3 ms (10 matches) to 25 ms (100k
  matches) with parallel workers off, against 0.8 ms to 1.7 s for `@@` + `ts_rank_cd`: the
  same below ~100 matches, 5× faster at 1k, 25× at 10k, 68× at 100k, 40× for a phrase. Its
  default plan (Gather Merge over 2 workers) adds ~40 ms of worker start-up on this machine:
  set `max_parallel_workers_per_gather = 0` around it. Its index built in 236 s (563 MiB)
  against 994 s for the GIN index (542 MiB) plus 434 s to add the stored tsvector column, which
  grows the table from 3.0 to 5.4 GiB (1.6 KB of tsvector per row). The two rankings share
  little of their top 100 for frequent words (`top overlap`): ts_rank_cd has many ties and no
  document-length or rarity weighting.
- **Ingest**: with the lexical column and its GIN index, `ingest_records` loads ~2.1k rows/s
  against ~11.5k without (0.19×); the column alone (no GIN) ~4.3k: computing the words and
  maintaining the GIN index each take about half. Adding the column after a load is slower
  still (64 s for 100k rows, against ~40 s more inline).

So: lexical terms are the right tool for what they are for (names, codes, rare words: ≤ ~1k
matching documents, at or below the cost of a semantic term), and a negated lexical term is
free. A positive lexical term on a frequent word (≥ ~10k documents) is 20–150× the cost of an
HNSW scan with the built-in full text; there, either leave it to the other terms' candidates
(evaluate it only on them, as for negations) or use pg_search's BM25 where it exists.
"""


def _num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _ms(row: dict[str, Any] | None) -> str:
    return f"{_num(row['p50_ms'])} / {_num(row['p95_ms'])}" if row else ""


def _level_name(level: str) -> str:
    return "phrase (2 top-level words)" if level == "phrase" else f"~{int(level):,}"


def markdown(data: dict[str, Any]) -> str:
    """The results as Markdown."""
    out = ["# Lexical terms at scale (`bench/perf/lexical_latency.py`)", ""]
    if "machine" in data:
        out += [machine_md(data["machine"]), ""]
    load = data.get("load", {})
    meas = data.get("measure", {})
    if FINDINGS:
        out += ["## What this means", "", FINDINGS.strip(), ""]
    if load:
        out += [
            "## Data and build",
            "",
            f"{load['rows']:,} documents: synthetic 384-d vectors (`synthetic.make_dataset`, manifold "
            f"clusters) and synthetic texts: words drawn from a Zipf law p(r) ~ 1/(r + {ZIPF_Q}) over "
            f"{load['vocab']:,} words (the Reuters-21578 words by their Reuters frequency, then "
            "compounds of two Reuters words as the rare tail), lengths drawn from Reuters' "
            f"(mean 123 words); {load.get('avg_lexemes_per_doc', '?')} distinct lexemes per "
            f"document (`english`), text {load.get('avg_text_bytes', '?')} B, tsvector "
            f"{load.get('avg_tsv_bytes', '?')} B per row on average. CPU busy (other helpers' "
            f"jobs) before the load: {load.get('cpu_busy_before', 0):.0%}, before HNSW: "
            f"{load.get('cpu_busy_before_hnsw', 0):.0%}.",
            "",
        ]
        bm = load.get("bm25", {})
        rows = [
            [
                "load (binary COPY, no lexical column)",
                load.get("load_s"),
                "",
                f"table {load.get('table_mib_without_lexical')} MiB",
            ],
            [
                "lexical column (ALTER TABLE ... GENERATED STORED: table rewrite)",
                load.get("lexical_column_s"),
                "",
                f"table {load.get('table_mib_with_lexical')} MiB",
            ],
            ["GIN index on tsv", load.get("gin_build_s"), load.get("gin_mib"), ""],
            [f"HNSW ({load.get('hnsw')})", load.get("hnsw_build_s"), load.get("hnsw_mib"), ""],
        ]
        if "error" in bm:
            rows.append(["pg_search bm25 index", "", "", f"failed: {bm['error']}"])
        elif bm:
            rows.append(
                [
                    f"pg_search {bm.get('version')} bm25 index on (id, text), English "
                    "stemmer + stop words",
                    bm.get("build_s"),
                    bm.get("mib"),
                    f"CPU busy before {bm.get('cpu_busy_before', 0):.0%}",
                ]
            )
        out += [md_table(["step", "s", "index MiB", "note"], rows), ""]
    if meas:
        terms = meas["terms"]
        out += [
            "## Query terms by document frequency",
            "",
            md_table(
                ["level", "terms (measured document frequency)"],
                [
                    [_level_name(lv), ", ".join(f"{w} ({df:,})" for w, df in ts)]
                    for lv, ts in terms.items()
                    if ts
                ],
            ),
            "",
        ]
        lat = meas.get("latency", [])
        levels = [lv for lv in terms if terms[lv]]

        def find(level: str, what: str) -> dict[str, Any] | None:
            return next((r for r in lat if r["level"] == level and r["what"] == what), None)

        first = levels[0] if levels else ""
        rerun = {r["what"]: r for r in meas.get("semantic_rerun", {}).get("rows", [])}

        def sem(what: str) -> dict[str, Any] | None:
            """A semantic row: from the rerun after the lexical levels when there is one."""
            return rerun.get(what) or find(first, what)

        out += [
            f"## Latency (p50 / p95 ms over {meas['queries']} warm queries, k = 10)",
            "",
            "The scans alone (each compiled CTE run as `WITH <cte> SELECT count(*)`): the "
            "lexical term's `x0` (GIN index, its matches ranked by `ts_rank_cd`, top depth), in "
            '`match:t` (depth 100) and in `"a" AND match:t` (depth 142, also computing `"a"`\'s '
            "cosine similarity per row), against the HNSW scans of the same statements. "
            "The semantic side does not depend on t: "
            + (
                "it was measured again after the lexical levels, all caches warm "
                "(`semantic` step; the first pass is in the JSON)."
                if rerun
                else "measured once, with the first level."
            ),
            "",
            md_table(
                [
                    "t's document frequency",
                    "x0 of match:t",
                    'x0 of "a" AND match:t',
                    'HNSW c0 of "a" AND match:t (depth 142)',
                    'HNSW "b" alone (k = 10)',
                ],
                [
                    [
                        _level_name(lv),
                        _ms(find(lv, "scan: x0 of match:t")),
                        _ms(find(lv, 'scan: x0 of "a" AND match:t')),
                        _ms(sem('scan: c0 ("a", HNSW) of "a" AND match:t')),
                        _ms(sem('scan: sims of "b" alone (HNSW, k)')),
                    ]
                    for lv in levels
                ],
            ),
            "",
            "Whole statements (`compile_query` + `search.execute`, compiled per query as "
            '`search()` does): the semantic column has `"b"` in place of `match:t`.',
            "",
            md_table(
                ["shape", 'semantic ("b")', *(_level_name(lv) for lv in levels)],
                [
                    [
                        shape,
                        _ms(sem(f"{shape} / semantic")),
                        *(_ms(find(lv, f"{shape} / lexical")) for lv in levels),
                    ]
                    for shape in SHAPES
                ],
            ),
            "",
        ]
        plans = meas.get("explain", [])
        if plans:
            rows = []
            for label in ("x0 of match:t", 'x0 of "a" AND match:t'):
                for lv in levels:
                    ps = [p for p in plans if p["level"] == lv and p["what"] == label]
                    if not ps:
                        continue
                    med = lambda key, ps=ps: statistics.median(p.get(key, 0) for p in ps)  # noqa: E731
                    plan = ps[0].get("scan", "") + (
                        f" (parallel, {max(p.get('workers', 0) for p in ps)} workers in some)"
                        if any(p.get("workers") for p in ps)
                        else ""
                    )
                    rows.append([label, _level_name(lv), plan, med("gin_rows"),
                                 med("heap_rows"), med("removed"), med("heap_blocks_exact"),
                                 med("heap_blocks_lossy"), med("shared_hit") + med("shared_read"),
                                 ps[0].get("sort", ""), med("execution_ms")])  # fmt: skip
            for p in plans:
                if p.get("scan") == "HNSW" and p["level"] == first:
                    rows.append(
                        [
                            p["what"],
                            "",
                            "HNSW",
                            "",
                            p.get("hnsw_rows"),
                            "",
                            "",
                            "",
                            p["shared_hit"] + p["shared_read"],
                            "",
                            p["execution_ms"],
                        ]
                    )
            out += [
                "## What the scans read (EXPLAIN (ANALYZE, BUFFERS), median over the first 3 "
                "terms of each level)",
                "",
                md_table(
                    [
                        "scan",
                        "level",
                        "plan",
                        "GIN rows",
                        "heap rows",
                        "rechecked away",
                        "heap blocks exact",
                        "lossy",
                        "buffers (8 KiB)",
                        "sort",
                        "ms",
                    ],
                    rows,
                ),
                "",
            ]
        bv = meas.get("bm25_vs_tsvector")
        serial = {r["level"]: r for r in meas.get("bm25_serial", [])}
        if bv:
            out += [
                f"## pg_search (BM25) vs built-in full text: top {bv['depth']} candidates of a "
                "term (p50 / p95 ms)",
                "",
                f"- built-in: `{bv['tsvector_sql']}`",
                f"- pg_search: `{bv['bm25_sql']}` (a phrase: `{bv['bm25_phrase_sql']}`)",
                "",
            ]
            if "error" in bv:
                out += [f"Not measured: {bv['error']}.", ""]
            else:
                out += [
                    md_table(
                        [
                            "t's document frequency",
                            "tsvector + GIN, ts_rank_cd",
                            "pg_search BM25 (2 parallel workers)",
                            "pg_search BM25, no parallel workers",
                            "top overlap",
                        ],
                        [
                            [
                                _level_name(r["level"]),
                                f"{_num(r['tsvector_p50_ms'])} / {_num(r['tsvector_p95_ms'])}",
                                f"{_num(r['bm25_p50_ms'])} / {_num(r['bm25_p95_ms'])}",
                                _ms(serial.get(r["level"])),
                                r["top_overlap"],
                            ]
                            for r in bv["rows"]
                        ],
                    ),
                    "",
                    "The column without parallel workers was timed in a later step "
                    "(`bm25-serial`, `max_parallel_workers_per_gather = 0`); the other two "
                    "alternate per query. "
                    "top overlap: the share of the smaller top list found in the other (the two "
                    "rankings differ: ts_rank_cd counts cover density, BM25 weighs term "
                    "frequency by document length; ties are broken differently).",
                    "",
                ]
    ing = data.get("ingest")
    if ing:
        out += [
            f"## Ingest cost: {ing['rows']:,} documents through `ingest_records` (vectors given)",
            "",
            "lexical column: without = none; with = the generated tsvector column and its GIN "
            "index (what `create_corpus` makes); column = the column, its GIN index dropped.",
            "",
            md_table(
                [
                    "round",
                    "lexical column",
                    "s",
                    "rows/s",
                    "table MiB",
                    "CPU busy before",
                    "adding the column afterwards s",
                ],
                [
                    [
                        r["round"],
                        r["lexical"],
                        r["s"],
                        r["rows_per_s"],
                        r["table_mib"],
                        f"{r['cpu_busy_before']:.0%}",
                        r.get("add_lexical_after_s", ""),
                    ]
                    for r in ing["runs"]
                ],
            ),
            "",
        ]
        if "median_rows_per_s_with" in ing:
            w, wo = ing["median_rows_per_s_with"], ing["median_rows_per_s_without"]
            col = ing.get("median_rows_per_s_column")
            out += [
                f"Median: {wo:,} rows/s without the lexical column, {w:,} with it and its GIN "
                f"index ({w / wo:.2f}×)"
                + (f", {col:,} with the column but no GIN index ({col / wo:.2f}×)" if col else "")
                + ".",
                "",
            ]
    if meas.get("plan_text"):
        out += [
            "## Plans",
            "",
            'EXPLAIN (ANALYZE, BUFFERS, VERBOSE) of `x0` in `"a" AND match:t`, '
            "first term of each level:",
            "",
        ]
        for lv, lines in meas["plan_text"].items():
            lines = [re.sub(r"'\[[^\]]*\]'::vector", "'[…]'::vector", ln) for ln in lines]
            out += [f"{_level_name(lv)}:", "", "```", *lines, "```", ""]
    return "\n".join(out)


def cmd_render(args: argparse.Namespace) -> None:
    """Rewrite the Markdown from the JSON."""
    save(load_json(render=True))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "step",
        choices=["load", "measure", "semantic", "bm25-serial", "explain", "ingest", "render"],
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--vocab", type=int, default=1_000_000, help="vocabulary size (words)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--home", default=str(DEFAULT_HOME))
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--maintenance-work-mem", default="3GB")
    ap.add_argument("--queries", type=int, default=50, help="queries per (level, shape)")
    ap.add_argument("--terms-per-level", type=int, default=10)
    ap.add_argument("--ingest-rows", type=int, default=100_000)
    ap.add_argument("--ingest-rounds", type=int, default=2)
    ap.add_argument("--results", default=NAME, help="bench/perf/results/<name>.{json,md}")
    args = ap.parse_args()
    RESULTS[0] = args.results
    {
        "load": cmd_load,
        "measure": cmd_measure,
        "ingest": cmd_ingest,
        "render": cmd_render,
        "semantic": cmd_semantic,
        "bm25-serial": cmd_bm25_serial,
        "explain": cmd_explain,
    }[args.step](args)


if __name__ == "__main__":
    main()
