"""One index scan instead of n + 1: candidates from the guide's scan alone, at 1M vectors.

    python bench/guide_only.py [--size 1000000] [--queries 10]

``bench/results/guide.md`` found that the guide's exact neighbour list alone holds the formula's
top 10 wherever the term lists and the guide together do. This benchmark checks that on the
real HNSW index of the scale corpus (kept by ``bench/scale.py --keep``; built here if missing)
and measures what it saves. Per (shape, k), on the same queries in rotating order:

* ``terms+guide``: the engine's default plan (one HNSW scan per positive term, plus the guide);
* ``guide``: ``SearchOptions(term_scans=False)``: the guide's scan alone, default depth;
* ``guide x2``: the same at twice the depth;
* ``floor``: one plain HNSW query per positive term (``LIMIT depth``, the default plan's
  depth and ``ef_search``), summed: the sum ``bench/scale.py`` calls the floor;

with p50 / p95 latency (ms) and recall@10 against exact evaluation (NumPy over all vectors).
Results: ``bench/results/guide_only.{json,md}``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from benchlib import (
    DEFAULT_HOME,
    machine,
    machine_md,
    md_table,
    percentile,
    server_dsn,
    wait_idle,
    write_results,
)
from psycopg import sql
from query import DIM, make_dataset, make_queries
from scale import (
    FILTER_MASK,
    Vectors,
    exact_top,
    index_plan,
    kept_database,
    recall,
    set_local,
    shapes,
)

from pglogic.compile import SearchOptions
from pglogic.corpus import get_corpus
from pglogic.db import connect
from pglogic.query import parse, positive_terms
from pglogic.search import search

PLANS: dict[str, dict[str, Any]] = {
    "terms+guide": {},
    "guide": {"term_scans": False},
    "guide x2": {"term_scans": False, "x2": True},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--terms", default="2,3,5,8")
    ap.add_argument("--ks", default="10,100")
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--data", default="manifold")
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--out", default="guide_only", help="results name under bench/results/")
    args = ap.parse_args()
    base = server_dsn(DEFAULT_HOME, args.dsn)
    name, dsn = kept_database(base, args.size, args.data, args.seed)
    if dsn is None:
        raise SystemExit(f"No kept corpus {name}: run bench/scale.py --sizes {args.size} --keep")
    idle = wait_idle(600)
    print(f"idle wait: {idle}", flush=True)
    data = make_dataset(args.size, args.seed, kind=args.data)
    mask = FILTER_MASK["none"](np.arange(args.size))
    ks = [int(k) for k in args.ks.split(",")]
    term_counts = [int(n) for n in args.terms.split(",")]
    rows: list[dict[str, Any]] = []
    emb = Vectors()
    with connect(dsn) as conn:
        conn.autocommit = True
        corpus = get_corpus(conn, "scale")
        for si, (shape, text) in enumerate(shapes(term_counts).items()):
            if shape == "1 term":
                continue
            tree = parse(text)
            n_terms = len(set(text.split('"')[1::2]))
            queries = make_queries(data, args.queries, n_terms, args.seed + 100 * si)
            truths = [exact_top(tree, data, v, mask, max(ks)) for v in queries]
            for k in ks:
                default = SearchOptions(k=k)
                plan = index_plan(conn, corpus, tree, default)
                depth = int(plan.params["depth"])
                gdepth = int(plan.params.get("gdepth", depth))
                opts = {
                    "terms+guide": default,
                    "guide": SearchOptions(k=k, term_scans=False),
                    "guide x2": SearchOptions(k=k, term_scans=False, depth=2 * gdepth),
                }
                floor_stmt = sql.SQL(
                    "SELECT id FROM {t} ORDER BY embedding <=> %(v)s::vector({dim}) LIMIT %(n)s"
                ).format(t=corpus.table, dim=sql.Literal(DIM))
                lat: dict[str, list[float]] = {p: [] for p in [*opts, "floor"]}
                rec: dict[str, list[float]] = {p: [] for p in opts}
                emb.current = queries[0]
                for o in opts.values():  # warm-up
                    search(conn, corpus, tree, embedder=emb, options=o)
                for qi, vecs in enumerate(queries):
                    emb.current = vecs
                    order = [*opts, "floor"]
                    order = order[qi % len(order) :] + order[: qi % len(order)]
                    for p in order:
                        if p == "floor":
                            t_sum = 0.0
                            for t in positive_terms(tree):
                                t0 = time.perf_counter()
                                with conn.pipeline(), conn.transaction():
                                    set_local(conn, plan.settings)
                                    conn.execute(floor_stmt, {"v": vecs[t], "n": depth}).fetchall()
                                t_sum += time.perf_counter() - t0
                            lat["floor"].append(t_sum)
                            continue
                        t0 = time.perf_counter()
                        res = search(conn, corpus, tree, embedder=emb, options=opts[p])
                        lat[p].append(time.perf_counter() - t0)
                        rec[p].append(recall([h.id for h in res.hits], truths[qi][:k], 10))
                row: dict[str, Any] = {
                    "shape": shape, "k": k, "positive_terms": len(positive_terms(tree)),
                    "depth": depth, "guide_depth": gdepth,
                    "ef_search": int(plan.settings["hnsw.ef_search"]),
                }  # fmt: skip
                for p, xs in lat.items():
                    row[f"{p} p50"] = round(percentile(xs, 50) * 1000, 2)
                    row[f"{p} p95"] = round(percentile(xs, 95) * 1000, 2)
                for p, xs in rec.items():
                    row[f"{p} recall@10"] = round(float(np.mean(xs)), 3)
                for p in opts:
                    row[f"{p} / floor"] = round(row[f"{p} p50"] / row["floor p50"], 2)
                rows.append(row)
                print(
                    f"{shape:7} k={k:<3} "
                    + "  ".join(
                        f"{p} {row[f'{p} p50']:.1f} ms r{row[f'{p} recall@10']:.3f}" for p in opts
                    )
                    + f"  floor {row['floor p50']:.1f} ms",
                    flush=True,
                )
    md = [
        "# Candidates from the guide's scan alone (`bench/guide_only.py`)",
        "",
        machine_md(machine(dsn)),
        "",
        f"{args.size:,} `{args.data}` vectors (the `bench/scale.py` corpus, HNSW m=16, "
        f"ef_construction=128), {args.queries} queries per shape, no filter. p50 ms "
        "(p95 in results JSON); recall@10 against exact evaluation of the formula; "
        "x floor = p50 / the floor's p50 (one plain HNSW query per positive term at the default "
        "plan's depth and ef_search).",
        "",
    ]
    headers = ["shape", "k", "depth / guide", "ef"]
    for p in PLANS:
        headers += [f"{p} ms", f"{p} recall@10", f"{p} x floor"]
    headers.append("floor ms")
    table = [
        [r["shape"], r["k"], f"{r['depth']} / {r['guide_depth']}", r["ef_search"]]
        + [x for p in PLANS for x in (r[f"{p} p50"], r[f"{p} recall@10"], r[f"{p} / floor"])]
        + [r["floor p50"]]
        for r in rows
    ]
    md += md_table(headers, table).splitlines()
    result = {
        "size": args.size,
        "data": args.data,
        "queries": args.queries,
        "idle": idle,
        "machine": machine(dsn),
        "db": name,
        "rows": rows,
    }
    write_results(args.out, result, "\n".join(md))


if __name__ == "__main__":
    main()
