"""The SQL function against the Python search at scale: recall, agreement and latency.

    python bench/sql_parity.py [--size 100000] [--queries 10] [--reuse] [--keep]

On bench/scale.py's synthetic corpus (clustered 384-d vectors, ``{"g": i % 100}`` metadata,
HNSW m = 16, ef_construction = 128), every query shape of scale.py (1, 2, 3, 5, 8 terms; AND,
OR, NOT), k = 10, without a filter and with the 1% filter ``g = 0``, runs three ways at default
options:

* ``python``: :func:`pglogic.store.search.search` (vectors given);
* ``sql+guide``: ``SELECT * FROM pglogic.search(corpus, query)`` with the JSON of
  :func:`pglogic.engine.render.search_json`, which carries the guide vector Python computes;
* ``sql``: the same without the guide vector (``"guide": true``): the function computes it.

Per shape: recall@10 of each against the exact top 10 (NumPy over every vector), how many of
the queries returned the same ids in the same order as ``python``, and p50 latency.
Results: ``bench/results/sql_parity.{md,json}``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from benchlib import (
    DEFAULT_HOME,
    fresh_database,
    machine,
    machine_md,
    md_table,
    percentile,
    server_dsn,
    write_results,
)
from psycopg.types.json import Jsonb
from query import make_dataset, make_queries
from scale import (
    FILTER_MASK,
    FILTERS,
    MemorySampler,
    Vectors,
    exact_top,
    kept_database,
    load,
    postmaster_pid,
    recall,
    shapes,
)

from pglogic.engine.compile import SearchOptions
from pglogic.engine.render import search_json
from pglogic.query import parse
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect
from pglogic.store.search import search


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--reuse", action="store_true", help="reuse the database of --keep")
    ap.add_argument("--keep", action="store_true", help="keep the database for --reuse")
    args = ap.parse_args()
    base = server_dsn(DEFAULT_HOME, None)
    data = make_dataset(args.size, args.seed, kind="manifold")
    name, kept = kept_database(base, args.size, "manifold", args.seed)
    dsn = kept if args.reuse and kept else fresh_database(base, name)
    with connect(dsn) as conn:
        if args.reuse and kept:
            corpus = get_corpus(conn, "scale")
            conn.commit()
            conn.autocommit = True
        else:
            corpus, _ = load(conn, data, MemorySampler(postmaster_pid(conn)))
        emb = Vectors()
        g = np.arange(len(data.vectors)) % 100
        rows: list[list[Any]] = []
        raw: list[dict[str, Any]] = []
        for si, (shape, text) in enumerate(shapes([1, 2, 3, 5, 8]).items()):
            tree = parse(text)
            n_terms = len(set(text.split('"')[1::2]))
            queries = make_queries(data, args.queries, n_terms, args.seed + 100 * si)
            for fname in ("none", "1%"):
                opts = SearchOptions(k=10, filters=FILTERS[fname])
                mask = FILTER_MASK[fname](g)
                rec: dict[str, list[float]] = {"python": [], "sql+guide": [], "sql": []}
                lat: dict[str, list[float]] = {"python": [], "sql+guide": [], "sql": []}
                same = {"sql+guide": 0, "sql": 0}
                for vecs in queries:
                    truth = exact_top(tree, data, vecs, mask, 10)
                    emb.current = vecs
                    t0 = time.perf_counter()
                    py = [h.id for h in search(conn, corpus, tree, embedder=emb, options=opts).hits]
                    lat["python"].append(time.perf_counter() - t0)
                    rec["python"].append(recall(py, truth, 10))
                    with_guide = search_json(tree, opts, vecs)
                    without = {**with_guide, "guide": True}
                    for method, query in (("sql+guide", with_guide), ("sql", without)):
                        t0 = time.perf_counter()
                        got = [r[0] for r in conn.execute(
                            "SELECT id FROM pglogic.search(%s, %s)", (corpus.name, Jsonb(query)))]  # fmt: skip
                        lat[method].append(time.perf_counter() - t0)
                        rec[method].append(recall(got, truth, 10))
                        same[method] += got == py
                n = len(queries)
                row = {"shape": shape, "filter": fname, "queries": n,
                       **{f"recall_{m}": round(float(np.mean(v)), 3) for m, v in rec.items()},
                       **{f"same_{m}": same[m] for m in same},
                       **{f"p50_ms_{m}": round(1000 * percentile(v, 50), 2) for m, v in lat.items()}}  # fmt: skip
                raw.append(row)
                rows.append([shape, fname, row["recall_python"], row["recall_sql+guide"],
                             row["recall_sql"], f"{same['sql+guide']}/{n}", f"{same['sql']}/{n}",
                             row["p50_ms_python"], row["p50_ms_sql+guide"], row["p50_ms_sql"]])  # fmt: skip
                print(rows[-1], flush=True)
    m = machine(base)
    table = md_table(["shape", "filter", "recall@10 python", "recall@10 sql+guide",
                      "recall@10 sql", "same ids+order sql+guide", "same ids+order sql",
                      "p50 ms python", "p50 ms sql+guide", "p50 ms sql"], rows)  # fmt: skip
    md = (f"# The SQL function vs the Python search (`bench/sql_parity.py`)\n\n{machine_md(m)}\n\n"
          f"{args.size:,} vectors (bench/scale.py's manifold data), k = 10, default options, "
          f"{args.queries} queries per shape and filter. *sql+guide*: `pglogic.search` given the "
          "guide vector `search_json` computes; *sql*: the function computes the guide itself.\n\n"
          + table + "\n")  # fmt: skip
    write_results("sql_parity", {"machine": m, "size": args.size, "rows": raw}, md)


if __name__ == "__main__":
    main()
