"""The SQL function against the Python search at scale: recall, agreement and latency.

    python bench/correctness/sql_parity.py [--size 1000000] [--queries 10] [--keep] [--reuse]
    python bench/correctness/sql_parity.py --passages 4 --size 100000   # a corpus with passages

On bench/perf/scale.py's synthetic corpus (clustered 384-d vectors, ``{"c": cluster, "g": i % 100}``
metadata, HNSW m = 16, ef_construction = 128, loaded by ``harness.load``: COPY through
``ingest_records``, then ``build_index``) in the database ``bench_sql_parity_<size>``, every query
shape of scale.py (1, 2, 3, 5, 8 terms; AND, OR, NOT), k = 10, without a filter and with the 1%
filter ``g = 0``, runs three ways at default options:

* ``python``: :func:`pglogic.store.search.search` (term vectors given through an embedder);
* ``sql+guide``: ``SELECT * FROM pglogic.search(corpus, query)`` with the JSON of
  :func:`pglogic.engine.render.search_json`, which carries the guide vector Python computes;
* ``sql``: the same without the guide vector (``"guide": true``): the function computes it.

The three run per query in rotating order (none always gets the cold cache). Per shape and
filter: recall@10 of each against the exact top 10 (NumPy over every vector, scale.py's
``exact_top``, with the AND texts and synthetic phrase vectors), how many queries returned the
same ids in the same order as ``python``, the mean overlap@10 with ``python`` (shared ids / 10),
and p50 latency.

``--passages P``: a corpus with passages instead (``pglogic.passage_layouts``, searched
through them by both paths): the same clustered data drawn per passage, the passages of one
topic shuffled and dealt to documents of 1 to P passages each (so a document spans several
clusters of its topic), each document's own vector its first passage (its first window), an
HNSW index on the passages too. The exact top 10 is then NumPy's formula over each document's
best passage per term (``max``, as the statement's ``GROUP BY``). Database
``bench_sql_parity_<size>_p<P>``, results ``bench/correctness/results/sql_parity_passages.{md,json}``.

``--keep`` leaves the database for ``--reuse`` (no load, no build; a kept database without the
whole corpus and its index is loaded again). Results: ``bench/correctness/results/sql_parity.{md,json}``,
one section per size (other sizes of the file are kept).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    cpu_busy,
    drop_database,
    fresh_database,
    machine,
    machine_md,
    md_table,
    percentile,
    phrase_vectors,
    server_dsn,
    truth_vectors,
    write_results,
)
from bench.lib.harness import (
    FILTER_MASK,
    FILTERS,
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    MemorySampler,
    Vectors,
    database_exists,
    exact_top,
    load,
    postmaster_pid,
    recall,
    shapes,
)
from bench.lib.synthetic import Dataset, make_dataset, make_queries
from pglogic.embed.passages import Span
from pglogic.engine.compile import SearchOptions
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, with_and_texts
from pglogic.engine.operators import DEFAULT_FAMILY, evaluate_numpy
from pglogic.engine.render import search_json
from pglogic.query import Node, parse
from pglogic.store.corpus import build_index, corpus_info, create_corpus, get_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_records
from pglogic.store.passages import PassageLayout, write_passages
from pglogic.store.readers import Record
from pglogic.store.search import search

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "sql_parity"
METHODS = ("python", "sql+guide", "sql")


class Passages:
    """A synthetic corpus with passages: ``data.vectors[i]`` is passage i, ``first[d]`` the
    index of document d's first passage (the passages of a document are consecutive;
    ``first[-1]`` is the number of passages)."""

    def __init__(self, data: Dataset, first: npt.NDArray[np.int64]) -> None:
        self.data = data
        self.first = first

    @property
    def documents(self) -> int:
        return len(self.first) - 1


def make_passages(documents: int, most: int, seed: int) -> Passages:
    """``documents`` documents of 1 to ``most`` passages (uniform): bench/perf/query.py's manifold
    data drawn per passage, each topic's passages shuffled and dealt to the documents in turn."""
    rng = np.random.default_rng(seed + 1)
    counts = rng.integers(1, most + 1, size=documents)
    data = make_dataset(int(counts.sum()), seed, kind="manifold")
    topic = data.labels // data.per_topic
    order = np.lexsort((rng.random(len(topic)), topic))  # by topic, shuffled within
    ordered = Dataset(data.topics, data.centres, data.per_topic, data.vectors[order],
                      data.labels[order])  # fmt: skip
    first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return Passages(ordered, first)


def load_passages(conn: Connection, corpus_data: Passages) -> tuple[Any, dict[str, Any]]:
    """Corpus ``scale`` with passages: each document's own vector its first passage, then its
    passages (``write_passages``), HNSW on both tables (scale.py's m and ef_construction)."""
    data, first = corpus_data.data, corpus_data.first
    corpus = create_corpus(conn, "scale", model="synthetic", dim=data.vectors.shape[1],
                           passages=PassageLayout(64, 0, "synthetic"))  # fmt: skip

    def records() -> Any:
        for d in range(corpus_data.documents):
            topic = int(data.labels[first[d]]) // data.per_topic
            meta = {"c": topic, "g": d % 100}
            yield Record(f"doc{d}", f"document {d} of topic {topic}", None, meta,
                         data.vectors[first[d]])  # fmt: skip

    t0 = time.perf_counter()
    ingest_records(conn, corpus, records(), embedder=None, batch_size=5000)
    batch = 5000
    for lo in range(0, corpus_data.documents, batch):
        docs = []
        for d in range(lo, min(lo + batch, corpus_data.documents)):
            n = int(first[d + 1] - first[d])
            docs.append((f"doc{d}", [Span(i, i + 1, 1) for i in range(n)],
                         data.vectors[first[d] : first[d + 1]]))  # fmt: skip
        with conn.transaction():
            write_passages(conn, corpus, docs)
    load_s = time.perf_counter() - t0
    build_s = build_index(conn, "scale", m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION,
                          maintenance_work_mem="4GB")  # fmt: skip
    conn.commit()
    conn.autocommit = True
    for table in (corpus.table, corpus.passage_table):
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    info = corpus_info(conn, "scale")
    assert info.passages is not None
    return get_corpus(conn, "scale"), {
        "load_s": round(load_s, 1),
        "passages": int(first[-1]),
        "hnsw_build_s": round(build_s, 1),
        "hnsw": f"m={HNSW_M}, ef_construction={HNSW_EF_CONSTRUCTION}",
        "table_mib": round((info.table_bytes + info.passages.table_bytes) / 2**20, 1),
        "index_mib": round((info.index_bytes + info.passages.index_bytes) / 2**20, 1),
    }


def exact_top_passages(
    tree: Node,
    corpus_data: Passages,
    vecs: dict[str, np.ndarray],
    mask: np.ndarray,
    k: int,
    and_text: int = DEFAULT_AND_TEXT,
) -> list[int]:
    """Ids (1-based, ingest order) of the exact top k over the masked documents, each text's
    similarity a document's best passage's (harness.exact_top over passages)."""
    vecs = truth_vectors(tree, vecs)
    names = sorted(vecs)
    sims = corpus_data.data.vectors @ np.stack([vecs[t] for t in names]).T
    best = np.maximum.reduceat(sims, corpus_data.first[:-1], axis=0)
    by_text = {t: best[:, i] for i, t in enumerate(names)}
    scores = evaluate_numpy(with_and_texts(tree, and_text), by_text, DEFAULT_FAMILY)
    scores = np.where(mask, scores, -np.inf)
    top = np.argpartition(-scores, k)[:k] if k < len(scores) else np.arange(len(scores))
    top = top[np.lexsort((top, -scores[top]))]
    return [int(i) + 1 for i in top if np.isfinite(scores[i])]


def overlap(got: list[int], ref: list[int], k: int = 10) -> float:
    """Shared ids of the two top k, over k (or over the longer list when both are shorter)."""
    n = max(len(got[:k]), len(ref[:k]))
    return len(set(got[:k]) & set(ref[:k])) / n if n else 1.0


def run_shapes(
    conn: Any, corpus: Any, data: Any, n_queries: int, seed: int
) -> list[dict[str, Any]]:
    """Every (shape, filter) row: recall, agreement with ``python`` and p50 of the three paths.
    ``data``: a Dataset (one vector per document) or :class:`Passages`."""
    emb = Vectors()
    passages = data if isinstance(data, Passages) else None
    if passages is not None:
        data = passages.data
    g = np.arange(len(data.vectors) if passages is None else passages.documents) % 100
    out: list[dict[str, Any]] = []
    turn = 0
    for si, (shape, text) in enumerate(shapes([1, 2, 3, 5, 8]).items()):
        tree = parse(text)
        n_terms = len(set(text.split('"')[1::2]))
        queries = make_queries(data, n_queries, n_terms, seed + 100 * si)
        for fname in ("none", "1%"):
            opts = SearchOptions(k=10, filters=FILTERS[fname])
            mask = FILTER_MASK[fname](g)
            rec: dict[str, list[float]] = {m: [] for m in METHODS}
            lat: dict[str, list[float]] = {m: [] for m in METHODS}
            same = {m: 0 for m in METHODS[1:]}
            ovl: dict[str, list[float]] = {m: [] for m in METHODS[1:]}
            for vecs in queries:
                if passages is None:
                    truth = exact_top(tree, data, vecs, mask, 10)
                else:
                    truth = exact_top_passages(tree, passages, vecs, mask, 10)
                with_guide = search_json(tree, opts, phrase_vectors(tree, vecs))
                without = {**with_guide, "guide": True}
                got: dict[str, list[int]] = {}
                order = METHODS[turn % 3 :] + METHODS[: turn % 3]
                turn += 1
                for method in order:
                    t0 = time.perf_counter()
                    if method == "python":
                        emb.current = vecs
                        res = search(conn, corpus, tree, embedder=emb, options=opts)
                        ids = [h.row_id for h in res.hits]
                    else:
                        query = with_guide if method == "sql+guide" else without
                        ids = [r[0] for r in conn.execute(
                            "SELECT id FROM pglogic.search(%s, %s)", (corpus.name, Jsonb(query)))]  # fmt: skip
                    lat[method].append(time.perf_counter() - t0)
                    got[method] = ids
                    rec[method].append(recall(ids, truth, 10))
                for m in METHODS[1:]:
                    same[m] += got[m] == got["python"]
                    ovl[m].append(overlap(got[m], got["python"]))
            n = len(queries)
            row = {"shape": shape, "filter": fname, "queries": n,
                   **{f"recall_{m}": round(float(np.mean(v)), 3) for m, v in rec.items()},
                   **{f"same_{m}": same[m] for m in same},
                   **{f"overlap_{m}": round(float(np.mean(v)), 3) for m, v in ovl.items()},
                   **{f"p50_ms_{m}": round(1000 * percentile(v, 50), 2) for m, v in lat.items()}}  # fmt: skip
            out.append(row)
            print(row, flush=True)
    return out


def markdown(results: dict[str, Any], name: str = NAME) -> str:
    """The result file: the machine, then one table per size (largest first)."""
    passages = name != NAME
    title, flag, unit, truth = "", "", "vectors", "NumPy over every vector"
    if passages:
        title, flag, unit = " over passages", " --passages", "documents"
        truth = ("NumPy over every passage, each term's similarity a document's best passage's; "
                 "both paths scan the passages' HNSW index")  # fmt: skip
    parts = [
        f"# The SQL function vs the Python search{title} (`bench/correctness/sql_parity.py{flag}`)",
        "",
        machine_md(results["machine"]),
        "",
        "bench/perf/scale.py's manifold data, k = 10, default options. *python*: "
        "`pglogic.store.search.search`; *sql+guide*: `pglogic.search` given the guide vector "
        "`search_json` computes; *sql*: the function computes the guide itself. recall@10 "
        f"against the exact top 10 ({truth}); *same* = queries with the same ids "
        "in the same order as python; *overlap* = mean shared ids of the top 10 with python / 10.",
    ]
    for size, r in sorted(results["sizes"].items(), key=lambda kv: -int(kv[0])):
        parts += ["", f"## {int(size):,} {unit}", ""]
        if r.get("note"):
            parts += [r["note"], ""]
        if r.get("load"):
            ld = r["load"]
            if ld.get("passages"):
                parts += [f"{ld['passages']:,} passages (1 to {r['most']} per document).", ""]
            parts += [f"Load {ld['load_s']} s, HNSW build {ld['hnsw_build_s']} s ({ld['hnsw']}), "
                      f"table {ld['table_mib']} MiB, index {ld['index_mib']} MiB. "
                      f"Queries: {r['query_s']} s of wall time; the CPU was "
                      f"{100 * r['cpu_busy_before']:.0f}% busy just before them.", ""]  # fmt: skip
        rows = []
        for q in r["rows"]:
            n = q["queries"]
            rows.append([q["shape"], q["filter"], q["recall_python"], q["recall_sql+guide"],
                         q["recall_sql"], f"{q['same_sql+guide']}/{n}", f"{q['same_sql']}/{n}",
                         q.get("overlap_sql+guide", ""), q.get("overlap_sql", ""),
                         q["p50_ms_python"], q["p50_ms_sql+guide"], q["p50_ms_sql"]])  # fmt: skip
        parts.append(md_table(["shape", "filter", "recall@10 python", "recall@10 sql+guide",
                               "recall@10 sql", "same sql+guide", "same sql",
                               "overlap sql+guide", "overlap sql", "p50 ms python",
                               "p50 ms sql+guide", "p50 ms sql"], rows))  # fmt: skip
        tot = {m: sum(q[f"same_{m}"] for q in r["rows"]) for m in METHODS[1:]}
        nq = sum(q["queries"] for q in r["rows"])
        ratio = {m: float(np.median([q[f"p50_ms_{m}"] / q["p50_ms_python"] for q in r["rows"]]))
                 for m in METHODS[1:]}  # fmt: skip
        parts += ["", f"Same ids in the same order as python: sql+guide {tot['sql+guide']}/{nq}, "
                  f"sql {tot['sql']}/{nq}. Median over the rows of p50 / python's p50: sql+guide "
                  f"{ratio['sql+guide']:.2f}, sql {ratio['sql']:.2f} (*sql* - *sql+guide* is the "
                  "guide ascent in PL/pgSQL: it grows with the terms of an AND / NOT; the OR "
                  "rows barely differ)."]  # fmt: skip
    return "\n".join(parts) + "\n"


def previous_sizes(name: str = NAME) -> dict[str, Any]:
    """The sizes of the results file (the first version held one size at the top level)."""
    path = RESULTS_DIR / f"{name}.json"
    if not path.exists():
        return {}
    old = json.loads(path.read_text())
    if "sizes" in old:
        return dict(old["sizes"])
    note = ("First run (query order fixed: python, sql+guide, sql), while `bench/correctness/reliability.py` "
            "ran its fault tests on the same 2 cores: latencies indicative only.")  # fmt: skip
    return {str(old["size"]): {"rows": old["rows"], "note": note}}


def complete(conn: Any, size: int, passages: int | None = None) -> bool:
    """Whether a kept database holds the whole corpus and its HNSW index (and ``passages``
    passages with theirs)."""
    try:
        info = corpus_info(conn, "scale")
    except Exception:
        conn.rollback()
        return False
    conn.commit()
    if passages is not None and (
        info.passages is None
        or info.passages.passages != passages
        or info.passages.index_bytes == 0
    ):
        return False
    return info.documents == size and info.index_bytes > 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--home", default=str(DEFAULT_HOME))
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--keep", action="store_true", help="keep bench_sql_parity_<size> for --reuse")
    ap.add_argument("--reuse", action="store_true", help="reuse the database of --keep")
    ap.add_argument("--passages", type=int, default=0, metavar="P",
                    help="a corpus with passages, 1 to P per document (0: none)")  # fmt: skip
    args = ap.parse_args()
    base = server_dsn(Path(args.home), args.dsn)
    name = NAME if not args.passages else f"{NAME}_passages"
    db_name = f"bench_{NAME}_{args.size}" + (f"_p{args.passages}" if args.passages else "")
    t_start = time.perf_counter()
    data: Dataset | Passages
    if args.passages:
        data = make_passages(args.size, args.passages, args.seed)
    else:
        data = make_dataset(args.size, args.seed, kind="manifold")
    print(f"dataset {args.size:,} in {time.perf_counter() - t_start:.0f} s", flush=True)
    n_passages = int(data.first[-1]) if isinstance(data, Passages) else None
    reused = False
    if args.reuse and database_exists(base, db_name):
        dsn = make_conninfo(base, dbname=db_name)
        with connect(dsn) as conn:
            reused = complete(conn, args.size, n_passages)
        if not reused:
            print(f"{db_name} is incomplete: loading again", flush=True)
    if not reused:
        dsn = fresh_database(base, db_name)
    sizes = previous_sizes(name)
    kept = sizes.get(str(args.size), {})
    try:
        with connect(dsn) as conn:
            if reused:
                corpus = get_corpus(conn, "scale")
                conn.commit()
                conn.autocommit = True
                loaded = kept.get("load") or {"reused": True}
            elif isinstance(data, Passages):
                corpus, loaded = load_passages(conn, data)
            else:
                mem = MemorySampler(postmaster_pid(conn))
                corpus, loaded = load(conn, data, mem)
                mem.stop()
            print(f"loaded {loaded} at {time.perf_counter() - t_start:.0f} s", flush=True)
            busy = cpu_busy()
            t0 = time.perf_counter()
            rows = run_shapes(conn, corpus, data, args.queries, args.seed)
            query_s = round(time.perf_counter() - t0, 1)
        sizes[str(args.size)] = {"load": loaded, "rows": rows, "query_s": query_s,
                                 "cpu_busy_before": round(busy, 3), "queries": args.queries,
                                 "seed": args.seed}  # fmt: skip
        if args.passages:
            sizes[str(args.size)]["most"] = args.passages
        results = {"machine": machine(base), "sizes": sizes}
        write_results(name, results, markdown(results, name), results_dir=RESULTS_DIR)
        print(f"done in {time.perf_counter() - t_start:.0f} s", flush=True)
    finally:
        if not args.keep:
            drop_database(base, db_name)


if __name__ == "__main__":
    main()
