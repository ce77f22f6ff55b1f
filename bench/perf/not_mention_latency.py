"""What a NOT that hears the words costs: latency with ``not_mention`` 0.4 (the default) and 0.

The mention floor (``pglogic.engine.compile._floored``, migration 0015 for the SQL function)
changes the statement, not the plan's scans: each negated-only term's similarity column becomes
``GREATEST(similarity, CASE WHEN tsv @@ phraseto_tsquery(config, term) THEN 0.4 END)``, computed
on the candidate documents. What it adds is that match per candidate (reading, detoasting and
matching its ``tsv``). Over passages it is computed after the passages are grouped by
document, on the document's row joined again (since migration 0016; before, inside the
grouping, which then read the documents' heap rows instead of their ids alone).

``real``: on the corpora ``eval_<dataset>`` that ``bench/quality/quality.py`` keeps (database
``bench_quality`` of the embedded server in /tmp/plbench, or of ``$PGLOGIC_BENCH_DSN``'s server;
each has a lexical index and passages), the first 120 derived queries with a NOT of each real
corpus (30 per template), k = 100, each timed twice per setting, alternating which goes first:

* ``PgLogic.search`` end to end with cached term vectors;
* ``pglogic.search(corpus, query)`` with the JSON ``render.search_json`` writes (term vectors
  and the guide given, ``not_mention`` among the options).

It also counts the queries whose compiled statement floors a term (``CompiledQuery.mentions``
non-empty: a NOT whose term occurs nowhere positively), reads the plans of the first 10 of them
in both settings (EXPLAIN (ANALYZE, BUFFERS): buffers, the scans of the documents' table, the
documents grouped, Memoize and HashAggregate memory), and times the match alone over each
corpus's table (microseconds per document).

``scale``: on the synthetic corpus ``bench/perf/lexical_latency.py load`` builds (texts, vectors, a
lexical index; one vector per document, no passages), ``"a" AND NOT "t"`` where ``t`` is a
semantic term whose text is a vocabulary word of document frequency ~10, 100, 1k, 10k
(``lexical.pick_terms``), hand-made query vectors as there, the real compiled statements
(``compile_query`` + ``search.execute``, compiled per query as ``search()`` does), k = 10 and
100, the two settings alternating per query; then EXPLAIN (ANALYZE, BUFFERS) of one statement
per level, k and setting.

Writes ``bench/perf/results/not_mention_latency.{json,md}`` (each step keeps the other's results).

    .venv/bin/python bench/perf/lexical_latency.py load --rows 100000 \\
        --home /work/lexical-bench-100k --results scratch     # ~2 minutes; then move
    mv bench/perf/results/scratch.json /work/lexical-bench-100k/load.json   # (the load's facts)
    rm bench/perf/results/scratch.md
    .venv/bin/python bench/perf/not_mention_latency.py real     # ~3 minutes on 2 cores
    .venv/bin/python bench/perf/not_mention_latency.py scale    # ~1 minute (--rows, --home, --queries)
    .venv/bin/python bench/perf/not_mention_latency.py render --conclusions FILE
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import (
    DEFAULT_HOME,
    SHARED_DATA,
    cpu_busy,
    machine,
    machine_md,
    md_table,
    server_dsn,
    stats_ms,
    write_results,
)
from bench.lib.lexical import (
    CORPUS,
    LEVELS,
    Vocabulary,
    db_name,
    explain,
    pick_terms,
    plan_nodes,
    query_vectors,
    quoted,
    run_text,
)
from pglogic import PgLogic
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, scored_terms
from pglogic.engine.negation import DEFAULT_NOT_MENTION
from pglogic.engine.render import search_json
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.query import negated_only_terms, parse
from pglogic.store import server
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect
from pglogic.store.search import execute
from pglogic.store.term_cache import cached_term_vectors

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "not_mention_latency"
DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")
SETTINGS = (0.0, DEFAULT_NOT_MENTION)
QUERIES = 120
PATHS = ("PgLogic.search", "pglogic.search (SQL)")
SCALE_HOME = Path("/work/lexical-bench-100k")
SCALE_KS = (10, 100)
#: The queries per corpus whose plans are read (EXPLAIN), each in both settings.
EXPLAINED = 10


def paired_delta(on: list[float], off: list[float]) -> float:
    """The median of per-run differences ``on - off`` (the runs timed next to each other).

    Example:
        >>> paired_delta([2.0, 3.0, 5.0], [1.0, 1.0, 1.0])
        2.0
    """
    return statistics.median(a - b for a, b in zip(on, off, strict=True))


def _key(x: float) -> str:
    return f"{x:g}"


# -- the real corpora ---------------------------------------------------------------------------


def run_real() -> dict[str, Any]:
    """Median and p95 milliseconds per path and setting, and the share of queries the floor
    touches, per real corpus.

    Example:
        >>> run_real()["rows"]["arxiv_0704"]["with_mentions"]  # doctest: +SKIP
        120
    """
    base = server_dsn(DEFAULT_HOME, None)  # (or $PGLOGIC_BENCH_DSN's server)
    # kept and migrated by bench/quality/quality.py
    dsn = make_conninfo(base, dbname="bench_quality")
    api = PgLogic(dsn)
    out: dict[str, Any] = {"machine": machine(base), "cpu_busy_before": round(cpu_busy(), 3),
                           "queries": QUERIES, "k": 100, "rows": {}}  # fmt: skip
    for name in DATASETS:
        derived = derive_queries(load_dataset(SHARED_DATA / name), per_template=30)
        corpus = f"eval_{name}"
        queries = [q for q in derived.queries if q.n_negations][:QUERIES]
        info = api.corpus(corpus)
        compiled = {q.id: api.compile(corpus, q.tree, SearchOptions(k=100)) for q in queries}
        floored = [q.id for q in queries if compiled[q.id].mentions]
        with connect(dsn) as conn:
            for q in queries:  # the term vectors into the cache, the pages into memory
                for c in SETTINGS:
                    api.search(corpus, q.tree, k=100, not_mention=c)
            texts = sorted({t for q in queries for t in scored_terms(q.tree, DEFAULT_AND_TEXT)})
            vectors: dict[str, Any] = dict(cached_term_vectors(conn, info, texts))
            missing = [t for t in texts if t not in vectors]  # (AND texts are not cached)
            if missing:
                embedded = get_query_embedder(info.model).embed(missing)
                vectors.update(zip(missing, embedded, strict=True))
            bodies = {}
            for q in queries:
                for c in SETTINGS:
                    opts = SearchOptions(k=100, not_mention=c)
                    bodies[(q.id, c)] = Jsonb(search_json(q.tree, opts, vectors))
            conn.commit()
            for q in queries:  # the SQL function's statements warm too
                for c in SETTINGS:
                    conn.execute("SELECT * FROM pglogic.search(%s, %s)",
                                 (corpus, bodies[(q.id, c)])).fetchall()  # fmt: skip
                    conn.commit()
            times: dict[tuple[str, float], list[float]] = {
                (p, c): [] for p in PATHS for c in SETTINGS
            }
            busy = cpu_busy()
            for rep in range(2):
                for q in queries:
                    for c in SETTINGS if rep == 0 else SETTINGS[::-1]:
                        t0 = time.perf_counter()
                        api.search(corpus, q.tree, k=100, not_mention=c)
                        times[(PATHS[0], c)].append(1000 * (time.perf_counter() - t0))
                        t0 = time.perf_counter()
                        conn.execute("SELECT * FROM pglogic.search(%s, %s)",
                                     (corpus, bodies[(q.id, c)])).fetchall()  # fmt: skip
                        conn.commit()
                        times[(PATHS[1], c)].append(1000 * (time.perf_counter() - t0))
        on, off = _key(DEFAULT_NOT_MENTION), _key(0.0)
        row: dict[str, Any] = {
            "queries": len(queries),
            "with_mentions": len(floored),
            "templates": sorted({q.template for q in queries}),
            "cpu_busy_before_timing": round(busy, 3),
        }
        for path in PATHS:
            row[path] = {_key(c): stats_ms(times[(path, c)]) for c in SETTINGS}
            row[path]["paired_delta_ms"] = paired_delta(
                times[(path, DEFAULT_NOT_MENTION)], times[(path, 0.0)]
            )
            row[path]["delta_p50_ms"] = row[path][on]["p50_ms"] - row[path][off]["p50_ms"]
        row["explain"] = []
        with connect(dsn) as conn:  # what the plans read: the first floored queries
            for q in [q for q in queries if q.id in floored][:EXPLAINED]:
                for c in SETTINGS:
                    plan = api.compile(corpus, q.tree, SearchOptions(k=100, not_mention=c))
                    summary = plan_summary(conn, plan, vectors, info.table_name)
                    row["explain"].append({"query": q.id, "not_mention": c, **summary})
            row["match_us_per_document"] = match_cost(
                conn, info, negated_only_terms(queries[0].tree)[0]
            )
        out["rows"][name] = row
        print(name, row, flush=True)
    return out


def match_cost(conn: Any, corpus: Any, term: str, runs: int = 7) -> float:
    """Microseconds per document of the floor's match alone: a whole-table
    ``count(*) FILTER (WHERE tsv @@ phraseto_tsquery(config, term))`` (every ``tsv`` read,
    detoasted and matched) minus ``count(id)``, medians of ``runs``.

    Example:
        >>> match_cost(conn, api.corpus("eval_reuters21578"), "rice")  # doctest: +SKIP
        1.2
    """
    table = corpus.table
    plain = sql.SQL("SELECT count(id) FROM {}").format(table)
    match = sql.SQL(
        "SELECT count(*) FILTER (WHERE tsv @@ phraseto_tsquery(%s::regconfig, %s)) FROM {}"
    ).format(table)
    secs: dict[str, list[float]] = {"plain": [], "match": []}
    for _ in range(runs):
        for key, stmt, params in (
            ("plain", plain, ()),
            ("match", match, (corpus.lexical_config, term)),
        ):
            t0 = time.perf_counter()
            row = conn.execute(stmt, params).fetchone()
            secs[key].append(time.perf_counter() - t0)
            conn.rollback()
    count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()
    conn.rollback()
    n = int(count[0]) if count else 1
    assert row is not None
    return 1e6 * (statistics.median(secs["match"]) - statistics.median(secs["plain"])) / n


def plan_summary(conn: Any, compiled: Any, vectors: dict[str, Any], table: str) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, BUFFERS) of a compiled statement (run once just before): time, shared
    buffers, how it reads the documents' table (``Index Only Scan`` needs no heap row, so no
    ``tsv``), and the peak memory of its Memoize and HashAggregate nodes (the rows they keep).

    Example:
        >>> plan_summary(conn, compiled, vectors, "corpus_3")["doc_scans"]  # doctest: +SKIP
        ['Seq Scan', 'Index Only Scan', 'Index Scan']
    """
    params = compiled.with_vectors(vectors)
    run_text(conn, compiled, compiled.text, params)
    rows = run_text(conn, compiled, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + compiled.text,
                    params)  # fmt: skip
    doc = rows[0][0]
    doc = doc[0] if isinstance(doc, list) else doc
    plan = doc["Plan"]
    nodes = list(plan_nodes(plan))
    memory = {kind: sum(n.get("Peak Memory Usage", 0) for n in nodes if n["Node Type"] == kind)
              for kind in ("Memoize", "Aggregate")}  # fmt: skip
    return {
        "execution_ms": round(doc["Execution Time"], 3),
        "shared_hit": plan.get("Shared Hit Blocks", 0),
        "shared_read": plan.get("Shared Read Blocks", 0),
        "doc_scans": [n["Node Type"] for n in nodes if n.get("Relation Name") == table],
        "grouped_documents": sum(
            n.get("Actual Rows", 0) for n in nodes if n["Node Type"] == "Aggregate"
        ),
        "memoize_kb": memory["Memoize"],
        "aggregate_kb": memory["Aggregate"],
    }


# -- at scale -----------------------------------------------------------------------------------


def run_scale(rows: int, home: Path, queries: int, seed: int = 11,
              vocab_size: int = 1_000_000) -> dict[str, Any]:  # fmt: skip
    """Latency of ``"a" AND NOT "t"`` with ``not_mention`` 0.4 and 0 per document frequency of
    ``t``'s word and k, and the buffers of one EXPLAIN (ANALYZE, BUFFERS) per cell, on the corpus
    ``bench/perf/lexical_latency.py load --rows ROWS --home HOME`` built.

    Example:
        >>> run_scale(100_000, Path("/work/lexical-bench-100k"), 40)["latency"][0]  # doctest: +SKIP
        {'level': '10', 'k': 10, ...}
    """
    base = server.ensure_running(home)
    dsn = make_conninfo(base, dbname=db_name(rows))
    vocab = Vocabulary(vocab_size, seed)
    va = query_vectors(seed, queries, 101)
    vb = query_vectors(seed, queries, 202)
    out: dict[str, Any] = {"rows": rows, "queries": queries, "ks": list(SCALE_KS),
                           "machine": machine(base), "cpu_busy_before": round(cpu_busy(), 3),
                           "latency": [], "explain": []}  # fmt: skip
    load_json = home / "load.json"  # what `lexical_latency.py load` wrote (moved there)
    if load_json.exists():
        out["load"] = json.loads(load_json.read_text()).get("load")
    with connect(dsn) as conn:
        corpus = get_corpus(conn, CORPUS)
        conn.rollback()
        out["table"] = table_facts(conn, corpus.table, corpus.table_name)
        terms = pick_terms(conn, corpus, vocab, rows, 10, seed)
        out["terms"] = terms
        levels = [str(lv) for lv in LEVELS if terms.get(str(lv))]

        def run_one(i: int, word: str, k: int, c: float, explained: bool = False) -> Any:
            tree = parse(f'"a" AND NOT {quoted(word)}')
            compiled = compile_query(tree, corpus, SearchOptions(k=k, not_mention=c))
            vectors = {"a": va[i % queries], word: vb[i % queries]}
            if explained:
                return compiled, explain(conn, compiled, compiled.text,
                                         compiled.with_vectors(vectors))  # fmt: skip
            return execute(conn, compiled, vectors)

        for level in levels:
            words = [w for w, _ in terms[level]]
            for i in range(len(words)):  # warm-up: every word, cell and setting once
                for k in SCALE_KS:
                    for c in SETTINGS:
                        run_one(i, words[i], k, c)
            times: dict[tuple[int, float], list[float]] = {
                (k, c): [] for k in SCALE_KS for c in SETTINGS
            }
            mentioned: dict[tuple[int, float], list[int]] = {
                (k, c): [] for k in SCALE_KS for c in SETTINGS
            }
            busy = cpu_busy()
            for i in range(queries):
                word = words[i % len(words)]
                for k in SCALE_KS:
                    for c in SETTINGS if i % 2 == 0 else SETTINGS[::-1]:
                        t0 = time.perf_counter()
                        hits = run_one(i, word, k, c)
                        times[(k, c)].append(1000 * (time.perf_counter() - t0))
                        if i < len(words):  # how many hits mention the word (first pass)
                            mentioned[(k, c)].append(mentions(conn, corpus.table, hits, word))
            for k in SCALE_KS:
                on, off = times[(k, DEFAULT_NOT_MENTION)], times[(k, 0.0)]
                row = {"level": level, "k": k, "cpu_busy_before": round(busy, 3),
                       **{_key(c): stats_ms(times[(k, c)]) for c in SETTINGS},
                       "paired_delta_ms": paired_delta(on, off),
                       "hits_mentioning": {_key(c): statistics.fmean(mentioned[(k, c)])
                                           for c in SETTINGS}}  # fmt: skip
                out["latency"].append(row)
                print(row, flush=True)
            for k in SCALE_KS:
                for c in SETTINGS:
                    run_one(0, words[0], k, c)  # the same statement just before
                    _, plan = run_one(0, words[0], k, c, explained=True)
                    plan.pop("nodes", None)
                    out["explain"].append({"level": level, "term": words[0], "k": k,
                                           "not_mention": c, **plan})  # fmt: skip
    return out


def table_facts(conn: Any, table: sql.Composable, name: str) -> dict[str, Any]:
    """Sizes that decide what reading ``tsv`` costs: heap, TOAST, average ``tsv`` bytes.

    Example:
        >>> table_facts(conn, corpus.table, corpus.table_name)["toast_mib"]  # doctest: +SKIP
        0.0
    """
    row = conn.execute(
        sql.SQL(
            "SELECT count(*), avg(pg_column_size(tsv)), pg_relation_size(%s::regclass),"
            " coalesce(pg_total_relation_size(reltoastrelid), 0)"
            " FROM {}, pg_class WHERE pg_class.oid = %s::regclass GROUP BY 3, 4"
        ).format(table),
        (f"pglogic.{name}", f"pglogic.{name}"),
    ).fetchone()
    conn.rollback()
    return {"documents": int(row[0]), "avg_tsv_bytes": round(float(row[1])),
            "heap_mib": round(row[2] / 2**20, 1), "toast_mib": round(row[3] / 2**20, 1)}  # fmt: skip


def mentions(conn: Any, table: sql.Composable, hits: list[Any], word: str) -> int:
    """How many of ``hits`` have ``word`` in their words (the floor's match).

    Example:
        >>> mentions(conn, corpus.table, hits, "wheat")  # doctest: +SKIP
        0
    """
    row = conn.execute(
        sql.SQL(
            "SELECT count(*) FROM {} WHERE id = ANY(%s) AND tsv @@ phraseto_tsquery('english', %s)"
        ).format(table),
        ([h.row_id for h in hits], word),
    ).fetchone()
    conn.rollback()
    return int(row[0]) if row else 0


# -- the results --------------------------------------------------------------------------------


EXPLAIN_HEAD = ["level", "t", "k", "not_mention", "shared hit", "shared read", "execution ms",
                "planning ms"]  # fmt: skip


def _f(x: float) -> str:
    return f"{x:.2f}"


def markdown(data: dict[str, Any]) -> str:
    """The results file.

    Example:
        >>> print(markdown({}))  # doctest: +SKIP
    """
    on, off = _key(DEFAULT_NOT_MENTION), _key(0.0)
    out = ["# What a NOT that hears the words costs (`bench/perf/not_mention_latency.py`)", ""]
    real = data.get("real")
    if real:
        out += [
            "## The real corpora",
            "",
            machine_md(real["machine"]),
            f"- CPU busy before the run: {real['cpu_busy_before']:.0%} (before each corpus's "
            "timing: "
            + ", ".join(f"{r['cpu_busy_before_timing']:.0%}" for r in real["rows"].values())
            + "; the machine is shared: compare the settings within a row, which ran "
            "alternately)",
            f"- The first {real['queries']} derived queries with a NOT per corpus (30 per "
            f"template), k = {real['k']}, each run twice per setting, alternating the order; "
            "milliseconds. `PgLogic.search`: end to end with cached term vectors; "
            "`pglogic.search (SQL)`: the SQL function with the vectors and the guide given "
            "(`render.search_json`). Every corpus has a lexical index and passages. "
            "floored: the queries whose compiled statement floors a term (a negated-only term); "
            "paired Δ: the median of the differences between the two settings' runs of the "
            "same query timed next to each other.",
            "",
        ]
        body = []
        for name, r in real["rows"].items():
            for path in PATHS:
                a, b = r[path][off], r[path][on]
                body.append([name, path, f"{r['with_mentions']} / {r['queries']}",
                             _f(a["p50_ms"]), _f(b["p50_ms"]), f"{r[path]['delta_p50_ms']:+.2f}",
                             f"{r[path]['paired_delta_ms']:+.2f}",
                             _f(a["p95_ms"]), _f(b["p95_ms"])])  # fmt: skip
        head = ["corpus", "path", "floored", "not_mention 0 p50", f"{on} p50", "Δ p50",
                "paired Δ", "0 p95", f"{on} p95"]  # fmt: skip
        out += [md_table(head, body), ""]
        body = []
        for name, r in real["rows"].items():
            for c in SETTINGS:
                ps = [e for e in r.get("explain", []) if e["not_mention"] == c]
                if not ps:
                    continue
                med = lambda key, ps=ps: statistics.median(e[key] for e in ps)  # noqa: E731
                scans = Counter(" + ".join(e["doc_scans"]) for e in ps).most_common(1)[0][0]
                body.append([name, _key(c), len(ps), f"{med('grouped_documents'):.0f}",
                             f"{med('shared_hit'):.0f}",
                             f"{med('shared_read'):.0f}", _f(med("execution_ms")), scans,
                             f"{med('memoize_kb'):.0f}", f"{med('aggregate_kb'):.0f}"])  # fmt: skip
        if body:
            out += [
                f"What the statements read: EXPLAIN (ANALYZE, BUFFERS) of the first {EXPLAINED} "
                "floored queries per corpus through `PgLogic.search`'s statement, each run once "
                "just before, medians; documents' table: its scans in the plan (the most common "
                "plan); memory: peak kB of the Memoize and HashAggregate nodes; documents "
                "grouped: the candidate documents whose passages the statement groups (the rows "
                "the floor's match runs on). The match alone (a whole-table `count(*) FILTER "
                "(WHERE tsv @@ phraseto_tsquery(...))` minus `count(id)`, the first query's "
                "negated term) costs "
                + ", ".join(
                    f"{r['match_us_per_document']:.2f} µs per document on {n}"
                    for n, r in real["rows"].items()
                    if "match_us_per_document" in r
                )
                + ".",
                "",
                md_table(
                    [
                        "corpus",
                        "not_mention",
                        "n",
                        "documents grouped",
                        "shared hit",
                        "shared read",
                        "execution ms",
                        "documents' table",
                        "Memoize kB",
                        "HashAggregate kB",
                    ],
                    body,
                ),
                "",
            ]
    scale = data.get("scale")
    if scale:
        t = scale.get("table", {})
        ld = scale.get("load") or {}
        out += [
            f"## At scale: {scale['rows']:,} synthetic documents",
            "",
            machine_md(scale["machine"]),
            f"- CPU busy before the run: {scale['cpu_busy_before']:.0%} (before each level's "
            "timing in the table)",
            f"- The corpus of `bench/perf/lexical_latency.py load --rows {scale['rows']}` (synthetic "
            "384-d manifold vectors, Zipf texts over Reuters' words and compounds; "
            f"HNSW {ld.get('hnsw', '?')}): {t.get('documents', '?'):,} documents, **one vector "
            "per document, no passages**; heap "
            f"{t.get('heap_mib', '?')} MiB, TOAST {t.get('toast_mib', '?')} MiB, `tsv` "
            f"{t.get('avg_tsv_bytes', '?')} B per row on average.",
            f'- `"a" AND NOT "t"`: t a semantic term whose text is a word of the level\'s '
            "document frequency (`lexical.pick_terms`: 10 words per level within a "
            "factor 1.4), hand-made query vectors (`lexical.query_vectors`), compiled per "
            "query and run by `search.execute`; "
            f"{scale['queries']} runs per cell and setting after a warm-up, the two settings "
            "alternating which goes first; milliseconds. hits mentioning t: the mean number of "
            "the k hits whose words match t (over the level's 10 words), per setting.",
            "",
        ]
        body = []
        for r in scale["latency"]:
            a, b = r[off], r[on]
            hm = r["hits_mentioning"]
            body.append([f"~{int(r['level']):,}", r["k"], f"{r['cpu_busy_before']:.0%}",
                         _f(a["p50_ms"]), _f(b["p50_ms"]), f"{b['p50_ms'] - a['p50_ms']:+.2f}",
                         f"{r['paired_delta_ms']:+.2f}", _f(a["p95_ms"]), _f(b["p95_ms"]),
                         f"{hm[off]:.1f} → {hm[on]:.1f}"])  # fmt: skip
        head = ["t's document frequency", "k", "CPU busy", "not_mention 0 p50", f"{on} p50",
                "Δ p50", "paired Δ", "0 p95", f"{on} p95", f"hits mentioning t (0 → {on})"]  # fmt: skip
        out += [md_table(head, body), ""]
        body = []
        for e in scale["explain"]:
            body.append([f"~{int(e['level']):,}", e["term"], e["k"], _key(e["not_mention"]),
                         e["shared_hit"], e["shared_read"], _f(e["execution_ms"]),
                         _f(e["planning_ms"])])  # fmt: skip
        out += [
            "EXPLAIN (ANALYZE, BUFFERS) of one statement per level (its first word, the first "
            "query vectors), k and setting, each run once just before:",
            "",
            md_table(EXPLAIN_HEAD, body),
            "",
        ]
    if data.get("conclusions"):
        out += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("step", choices=["real", "scale", "render"])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--home", type=Path, default=SCALE_HOME)
    ap.add_argument("--queries", type=int, default=40, help="runs per cell and setting (scale)")
    ap.add_argument("--conclusions", type=Path, help="a Markdown file of conclusions to add")
    args = ap.parse_args()
    path = RESULTS_DIR / f"{NAME}.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    if args.step != "render":  # merged with this run: the file names it
        data = provenance.fresh(data)
    if args.step == "real":
        data["real"] = run_real()
    elif args.step == "scale":
        data["scale"] = run_scale(args.rows, args.home, args.queries)
    if args.conclusions:
        data["conclusions"] = args.conclusions.read_text()
    write_results(NAME, data, markdown(data), results_dir=RESULTS_DIR)
    print(markdown(data))


if __name__ == "__main__":
    main()
