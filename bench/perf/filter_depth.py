"""Depth of the guide-only scan under a metadata filter, at 1M vectors (``guide_only_depth``).

    .venv/bin/python bench/perf/filter_depth.py            # 10% and 1% filters (about 10 min)
    .venv/bin/python bench/perf/filter_depth.py --render   # the Markdown from the committed JSON

Needs the database kept by ``bench/perf/scale.py --sizes 1000000 --keep``. For AND/NOT shapes (the
guide's scan alone) and a filter keeping 10% or 1% of the rows, runs ``search()`` with the
guide's scan forced to each depth (``SearchOptions(depth=d, term_scans=False)``, which also
skips the switch to exact scoring) and reports recall@10 against ``exact=True`` on the same
filter, and the p50 latency. The rule in ``guide_only_depth`` (``pglogic.engine``) rests on it.
Results: ``bench/perf/results/filter_depth.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    DEFAULT_HOME,
    machine_line,
    md_table,
    server_dsn,
    write_results,
)
from bench.lib.harness import FILTERS, Vectors, kept_database, shapes, timed_searches
from bench.lib.synthetic import make_dataset, make_queries
from pglogic.engine.compile import SearchOptions
from pglogic.query import parse
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect
from pglogic.store.search import search

RESULTS_DIR = Path(__file__).resolve().parent / "results"

SHAPES = ("NOT 2", "AND 2", "NOT 3", "AND 3", "AND 5", "NOT 8")
PLAN = {"10%": ((10, 100), (10, 20, 50, 100, 200, 400, 1000)), "1%": ((10,), (50, 100, 200, 400))}


def measure(dsn: str) -> list[dict[str, Any]]:
    data = make_dataset(20000, 11, kind="manifold")  # the query terms: centres of its topics
    out: list[dict[str, Any]] = []
    with connect(dsn, autocommit=True) as conn:
        corpus = get_corpus(conn, "scale")
        emb = Vectors()
        for shape in SHAPES:
            text = shapes([2, 3, 5, 8])[shape]
            tree = parse(text)
            queries = make_queries(data, 10, len(set(text.split('"')[1::2])), 4242)
            for fname, (ks, depths) in PLAN.items():
                for k in ks:
                    exact = SearchOptions(k=k, filters=FILTERS[fname], exact=True)
                    truths = []
                    for vecs in queries:
                        emb.current = vecs
                        hits = search(conn, corpus, tree, embedder=emb, options=exact).hits
                        truths.append([h.row_id for h in hits])
                    for depth in (d for d in depths if d >= k):
                        opts = SearchOptions(k=k, filters=FILTERS[fname], depth=depth,
                                             term_scans=False)  # fmt: skip
                        lat, rec = timed_searches(conn, corpus, tree, emb, opts, queries, truths)
                        row = {"shape": shape, "filter": fname, "k": k, "depth": depth,
                               "recall@10": round(float(np.mean(rec)), 3),
                               "p50_ms": round(float(np.median(lat)) * 1000, 1)}  # fmt: skip
                        print(row, flush=True)
                        out.append(row)
    return out


def markdown(machine: str, rows: list[dict[str, Any]]) -> str:
    body = [
        [r["shape"], r["filter"], r["k"], r["depth"], r["recall@10"], r["p50_ms"]] for r in rows
    ]
    return "\n".join([
        "# Guide-only scan depth under a filter (`bench/perf/filter_depth.py`)", "",
        f"Machine: {machine}. 1M `manifold` vectors (`bench/perf/scale.py`'s index), 10 queries per "
        "row, the guide's scan forced to `depth` rows; recall@10 against exact scoring of the "
        "same filtered formula. `guide_only_depth` picks 100 for k = 10 at 10% and 1% (400 "
        "without a filter).", "",
        md_table(["shape", "filter", "k", "depth", "recall@10", "p50 ms"], body),
    ]) + "\n"  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME)
    ap.add_argument("--dsn", default=None, help="the server (default: the embedded one)")
    ap.add_argument("--render", action="store_true", help="only rewrite the Markdown")
    args = ap.parse_args()
    path = RESULTS_DIR / "filter_depth.json"
    if args.render:
        saved = json.loads(path.read_text())
        write_results(
            "filter_depth",
            saved,
            markdown(saved["machine"], saved["rows"]),
            results_dir=RESULTS_DIR,
        )
        return
    _, dsn = kept_database(server_dsn(Path(args.home), args.dsn), 1_000_000, "manifold", 11)
    if dsn is None:
        ap.error("no kept 1M database: run bench/perf/scale.py --sizes 1000000 --keep first")
    rows = measure(dsn)
    write_results("filter_depth", {"machine": machine_line(), "rows": rows},
                  markdown(machine_line(), rows), results_dir=RESULTS_DIR)  # fmt: skip


if __name__ == "__main__":
    main()
