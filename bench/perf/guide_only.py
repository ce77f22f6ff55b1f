"""One index scan instead of n + 1: candidates from the guide's scan alone, at 1M vectors.

    python bench/perf/guide_only.py [--size 1000000] [--queries 10]

``bench/perf/results/guide.md`` found that the guide's exact neighbour list alone holds the formula's
top 10 wherever the term lists and the guide together do. This benchmark checks that on the
real HNSW index of the scale corpus (kept by ``bench/perf/scale.py --keep``; built here if missing)
and measures what it saves. Per (shape, k), on the same queries in rotating order:

* ``terms+guide``: ``term_scans=True``, the plan before: one HNSW scan per positive term
  (depth ``default_depth``) plus the guide's (``guide_depth``);
* ``auto``: the default: the guide's scan alone at twice its depth where
  :func:`pglogic.engine.compile.guide_suffices` (no positive OR), else ``terms+guide``;
* ``guide``: ``term_scans=False``: the guide's scan alone for every shape (OR too);
* ``floor``: one plain HNSW query per positive term at the ``terms+guide`` plan's depth and
  ``ef_search``, summed: what ``bench/perf/scale.py`` calls the floor;

with p50 / p95 latency (ms) and recall@10 against exact evaluation (NumPy over all vectors).

``--real``: the same plans on the real corpora of ``bench/quality/quality.py`` (database
``bench_quality``, all-MiniLM-L6-v2, label-derived queries): recall@10 of each plan against
the engine's exact evaluation (``exact=True``), per query shape class.
Results: ``bench/perf/results/guide_only.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    machine,
    machine_md,
    md_table,
    percentile,
    server_dsn,
    wait_idle,
    write_results,
)
from bench.lib.harness import (
    FILTER_MASK,
    Vectors,
    exact_top,
    index_plan,
    kept_database,
    recall,
    set_local,
    shapes,
)
from bench.lib.synthetic import DIM, make_dataset, make_queries
from pglogic.engine.compile import SearchOptions
from pglogic.query import parse, positive_terms
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect
from pglogic.store.search import search

RESULTS_DIR = Path(__file__).resolve().parent / "results"

PLANS: dict[str, dict[str, Any]] = {
    "terms+guide": {"term_scans": True},
    "auto": {},
    "guide": {"term_scans": False},
}

REAL_DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")


def real_part(base: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Recall@10 of each plan against exact evaluation on the quality benchmark's corpora."""
    from psycopg.conninfo import make_conninfo

    from bench.lib.benchlib import SHARED_DATA
    from pglogic.embed.registry import get_query_embedder
    from pglogic.engine.plans import guide_suffices
    from pglogic.eval.data import load_dataset
    from pglogic.eval.derive import derive_queries

    rows: list[dict[str, Any]] = []
    with connect(make_conninfo(base, dbname="bench_quality")) as conn:
        conn.autocommit = True
        for name in REAL_DATASETS:
            corpus = get_corpus(conn, f"eval_{name}")
            emb = get_query_embedder(corpus.model)
            queries = [q for q in derive_queries(load_dataset(SHARED_DATA / name)).queries
                       if q.n_terms > 1 and positive_terms(q.tree)]  # fmt: skip
            rec: dict[tuple[str, str], list[float]] = {}
            for q in queries:
                cls = "AND / NOT" if guide_suffices(q.tree) else "with OR"
                exact = search(conn, corpus, q.tree, embedder=emb,
                               options=SearchOptions(k=10, exact=True))  # fmt: skip
                truth = [h.row_id for h in exact.hits]
                for p, kw in PLANS.items():
                    res = search(conn, corpus, q.tree, embedder=emb,
                                 options=SearchOptions(k=10, **kw))  # fmt: skip
                    rec.setdefault((cls, p), []).append(
                        recall([h.row_id for h in res.hits], truth, 10)
                    )
            for cls in ("AND / NOT", "with OR"):
                n = len(rec.get((cls, "auto"), []))
                if n:
                    row = {"dataset": name, "class": cls, "queries": n}
                    row |= {p: round(float(np.mean(rec[(cls, p)])), 3) for p in PLANS}
                    rows.append(row)
                    print(row, flush=True)
    md = [
        "",
        "## Real corpora: recall@10 against exact evaluation",
        "",
        "The `bench/quality/quality.py` corpora (all-MiniLM-L6-v2, HNSW m=16, ef_construction=64), every "
        "label-derived query of two or more terms, k = 10; `AND / NOT`: queries where the guide "
        "suffices (`auto` scans the guide alone), `with OR`: the rest (`auto` = `terms+guide`).",
        "",
    ]
    md += md_table(["dataset", "queries", "class", *PLANS],
                   [[r["dataset"], r["queries"], r["class"], *(r[p] for p in PLANS)]
                    for r in rows]).splitlines()  # fmt: skip
    return rows, md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--terms", default="2,3,5,8")
    ap.add_argument("--ks", default="10,100")
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--data", default="manifold")
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--max-wait", type=float, default=600, help="seconds to wait for an idle CPU")
    ap.add_argument("--out", default="guide_only", help="results name under bench/results/")
    ap.add_argument("--real", action="store_true", help="also the real corpora of bench/quality")
    ap.add_argument("--real-only", action="store_true", help="only the real corpora")
    args = ap.parse_args()
    base = server_dsn(DEFAULT_HOME, args.dsn)
    if args.real_only:
        real_rows, real_md = real_part(base)
        write_results(args.out, {"real": real_rows}, "\n".join(real_md), results_dir=RESULTS_DIR)
        return
    name, dsn = kept_database(base, args.size, args.data, args.seed)
    if dsn is None:
        raise SystemExit(
            f"No kept corpus {name}: run bench/perf/scale.py --sizes {args.size} --keep"
        )
    idle = wait_idle(args.max_wait)
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
                opts = {p: SearchOptions(k=k, **kw) for p, kw in PLANS.items()}
                plan = index_plan(conn, corpus, tree, opts["terms+guide"])
                depth = int(plan.params["depth"])
                gdepth = int(plan.params.get("gdepth", depth))
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
                        rec[p].append(recall([h.row_id for h in res.hits], truths[qi][:k], 10))
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
        "# Candidates from the guide's scan alone (`bench/perf/guide_only.py`)",
        "",
        machine_md(machine(dsn)),
        "",
        f"{args.size:,} `{args.data}` vectors (the `bench/perf/scale.py` corpus, HNSW m=16, "
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
    real_rows: list[dict[str, Any]] = []
    if args.real:
        real_rows, real_md = real_part(base)
        md += real_md
    result = {
        "size": args.size,
        "data": args.data,
        "queries": args.queries,
        "idle": idle,
        "machine": machine(dsn),
        "db": name,
        "rows": rows,
        "real": real_rows,
    }
    write_results(args.out, result, "\n".join(md), results_dir=RESULTS_DIR)


if __name__ == "__main__":
    main()
