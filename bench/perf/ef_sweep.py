"""Recall@10 vs ``hnsw.ef_search`` / depth at one corpus size (diagnostic for bench/perf/scale.py).

    python bench/perf/ef_sweep.py [--size 1000000] [--queries 20] [--data manifold]

Same data as ``scale.py`` (``synthetic.make_dataset``, seed 11; the database ``scale.py --keep``
left is reused). For 1-term, AND 3, OR 3 and NOT 3 queries (k = 10, no filter) it runs
``search`` with the library's defaults and with ``depth`` = ``ef_search`` = each value of
``--efs``, and reports recall@10 against exact NumPy evaluation and p50 latency. Results:
``bench/perf/results/ef_sweep.{json,md}`` (``ef_sweep_isotropic.*`` for ``--data isotropic``).

The script measures whatever index the kept database has: ``ef_sweep_efc64.md`` was measured on
a database whose index was built with ef_construction = 64, before the default became 128.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    drop_database,
    fresh_database,
    machine,
    machine_md,
    md_table,
    percentile,
    server_dsn,
    write_results,
)
from bench.lib.harness import MemorySampler, Vectors, exact_top, kept_database, load, timed_searches
from bench.lib.synthetic import make_dataset, make_queries
from pglogic.engine.compile import SearchOptions
from pglogic.query import parse
from pglogic.store.corpus import corpus_info, get_corpus
from pglogic.store.db import connect

RESULTS_DIR = Path(__file__).resolve().parent / "results"

SHAPES = {"1 term": '"t1"', "AND 3": '"t1" AND "t2" AND "t3"', "OR 3": '"t1" OR "t2" OR "t3"',
          "NOT 3": '"t1" AND "t2" AND NOT "t3"'}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--efs", default="100,200,400,800,1000")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--home", default=str(DEFAULT_HOME))
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--data", default="manifold", choices=["manifold", "isotropic"])
    args = ap.parse_args()
    base = server_dsn(Path(args.home), args.dsn)
    _, kept = kept_database(base, args.size, args.data, args.seed)
    dsn = kept or fresh_database(base, "bench_ef_sweep")
    rows: list[dict[str, Any]] = []
    try:
        with connect(dsn) as conn:
            data = make_dataset(args.size, args.seed, kind=args.data)
            if kept:
                corpus, loaded = get_corpus(conn, "scale"), {"reused": kept.split("dbname=")[-1]}
                params = corpus_info(conn, "scale").index_params or {}
                loaded["hnsw"] = ", ".join(f"{k}={v}" for k, v in params.items()) or None
                conn.commit()
            else:
                corpus, loaded = load(conn, data, MemorySampler(None))
            conn.autocommit = True
            print(f"loaded {loaded}", flush=True)
            mask = np.ones(len(data.vectors), dtype=bool)
            emb = Vectors()
            for si, (shape, text) in enumerate(SHAPES.items()):
                tree = parse(text)
                n = len(set(text.split('"')[1::2]))
                queries = make_queries(data, args.queries, n, args.seed + 1000 + si)
                truths = [exact_top(tree, data, v, mask, 10) for v in queries]
                for ef in [0, *(int(x) for x in args.efs.split(","))]:
                    opts = SearchOptions(k=10, depth=ef, ef_search=ef) if ef else SearchOptions()
                    lat, rec = timed_searches(conn, corpus, tree, emb, opts, queries, truths)
                    row = {"shape": shape, "ef_search=depth": ef or "default",
                           "recall@10": round(float(np.mean(rec)), 3),
                           "p50_ms": round(percentile(lat, 50) * 1000, 2)}  # fmt: skip
                    rows.append(row)
                    print(row, flush=True)
    finally:
        if not kept:
            drop_database(base, "bench_ef_sweep")
    result = {"machine": machine(base), "size": args.size, "data": args.data, "load": loaded,
              "rows": rows}  # fmt: skip
    md = "\n".join([
        f"# Recall vs ef_search at {args.size:,} vectors, {args.data} data (`bench/perf/ef_sweep.py`)",
        "", f"HNSW: {loaded.get('hnsw')}; default = the library's depth and ef_search (run first"
        " for each shape, so its latency includes reading that shape's neighbourhoods into"
        " shared buffers; the sweep is for recall).", "",
        machine_md(result["machine"]), "",
        md_table(["shape", "ef_search = depth", "recall@10", "p50 ms"],
                 [[r["shape"], r["ef_search=depth"], r["recall@10"], r["p50_ms"]] for r in rows]),
    ]) + "\n"  # fmt: skip
    write_results(
        "ef_sweep" if args.data == "manifold" else "ef_sweep_isotropic",
        result,
        md,
        results_dir=RESULTS_DIR,
    )


if __name__ == "__main__":
    main()
