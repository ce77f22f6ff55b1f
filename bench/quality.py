"""Retrieval quality on every shared dataset: ``pglogic eval`` per dataset plus one summary.

Runs :func:`pglogic.evaluate.evaluate_dataset` (the code path of ``pglogic eval``) on each
directory of ``../shared/data`` and writes ``bench/quality/<dataset>/results.{md,json}`` and its
plots, then ``bench/quality/summary.{md,json}``: the headline numbers of every dataset (the
default engine ``pglogic[product-max]`` against dense retrieval and the baselines, queries with and
without NOT) and the targets of the issue, checked.

    .venv/bin/python bench/quality.py                       # all four datasets (~20 min)
    .venv/bin/python bench/quality.py --only limit_small    # one dataset

Options: ``--home`` (embedded server home, default /tmp/plbench) or ``--dsn``; the corpora
``eval_<dataset>`` are kept in database ``bench_quality`` so a rerun embeds nothing again.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import SHARED_DATA, host, server_dsn

from pglogic import PgLogic, migrate
from pglogic.derive import derive_queries
from pglogic.evaldata import load_dataset
from pglogic.evaluate import (
    DENSE,
    HEADLINE,
    evaluate_dataset,
    with_not,
    without_not,
)
from pglogic.metrics import aggregate
from pglogic.report import clean_json, key_methods, md_table, targets, write_report

OUT = Path(__file__).resolve().parent / "quality"
DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704", "limit_small")
DATABASE = "bench_quality"


def database(dsn: str) -> str:
    """DSN of the (kept) database ``bench_quality``, created and migrated when missing."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
        if exists.fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    target = psycopg.conninfo.make_conninfo(dsn, dbname=DATABASE)
    migrate.upgrade(target)
    return target


def headline(name: str, result: Any) -> dict[str, Any]:
    """The summary row of one dataset."""
    nots = result.subset(with_not)
    without = result.subset(without_not)
    row: dict[str, Any] = {"dataset": name, "queries": len(result.queries)}
    row["with_not"] = len(nots)
    row["without_not"] = len(without)
    for label, qids in (("not", nots), ("plain", without)):
        for m in key_methods(result):  # dense, the default engine, the baselines, ...
            agg = aggregate(result.per_query[m], qids)
            row.setdefault(label, {})[m] = {
                "ndcg@10": agg["ndcg@10"],
                "negrecall@10": agg["negrecall@10"],
            }
    sig = result.significance.get(HEADLINE, {})
    row["p_value"] = {k: v.p_value for k, v in sig.items()}
    row["targets"] = {k: v["met"] for k, v in targets(result).items()}
    return row


def summary_md(rows: list[dict[str, Any]], machine: str) -> str:
    """The cross-dataset Markdown summary."""
    out = [
        "# Retrieval quality: pglogic vs dense retrieval on the shared datasets",
        "",
        f"Machine: {machine}. Model all-MiniLM-L6-v2; top 100 per query; per-dataset reports in "
        "`bench/quality/<dataset>/results.md`. NegRecall@10: lower is better.",
        "",
    ]
    header = [
        "dataset", "NOT queries", "dense nDCG@10", "pglogic nDCG@10", "dense NegRecall@10",
        "pglogic NegRecall@10", "no-NOT queries", "dense nDCG@10", "pglogic nDCG@10",
    ]  # fmt: skip
    body = []
    for r in rows:
        n, p = r["not"], r["plain"]
        body.append(
            [
                r["dataset"],
                str(r["with_not"]),
                f"{n[DENSE]['ndcg@10']:.3f}",
                f"{n[HEADLINE]['ndcg@10']:.3f}",
                f"{n[DENSE]['negrecall@10']:.3f}",
                f"{n[HEADLINE]['negrecall@10']:.3f}",
                str(r["without_not"]),
                f"{p[DENSE]['ndcg@10']:.3f}",
                f"{p[HEADLINE]['ndcg@10']:.3f}",
            ]
        )
    out += md_table(header, body)
    out += [f"## Targets ({HEADLINE} vs dense)", ""]
    names = list(rows[0]["targets"]) if rows else []
    out += md_table(
        ["dataset", *names],
        [
            [r["dataset"], *("met" if r["targets"][t] else "**missed**" for t in names)]
            for r in rows
        ],
    )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("/tmp/plbench"))
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--only", action="append", help="dataset name (repeatable)")
    ap.add_argument("--per-template", type=int, default=None)
    args = ap.parse_args()
    api = PgLogic(database(server_dsn(args.home, args.dsn)))
    rows = []
    for name in args.only or DATASETS:
        ds = load_dataset(SHARED_DATA / name)
        kw = {} if args.per_template is None else {"per_template": args.per_template}
        derived = derive_queries(ds, **kw)

        def progress(done: int, total: int, name: str = name) -> None:
            if done % 50 == 0 or done == total:
                print(f"  {name}: {done}/{total} queries", flush=True)

        print(f"{name}: {len(derived.queries)} queries", flush=True)
        result = evaluate_dataset(api, ds, derived=derived, on_query=progress)
        write_report(result, OUT / name)
        rows.append(headline(name, result))
        print((OUT / name / "results.md").read_text().split("## Per template")[0], flush=True)
    if not args.only:
        (OUT / "summary.json").write_text(json.dumps(clean_json(rows), indent=1) + "\n")
        h = host()
        machine = f"{h['cpu_model']}, {h['nproc']} cores, {h['mem_total_gib']} GiB RAM"
        (OUT / "summary.md").write_text(summary_md(rows, machine) + "\n")
        print((OUT / "summary.md").read_text())


if __name__ == "__main__":
    main()
