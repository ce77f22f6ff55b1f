"""Retrieval quality on every shared dataset: ``pglogic eval`` per dataset plus one summary.

Runs :func:`pglogic.eval.evaluate.evaluate_dataset` (the code path of ``pglogic eval``) on each
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
from benchlib import SHARED_DATA, machine_line, server_dsn

from pglogic import PgLogic
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.eval.evaluate import (
    DENSE,
    HEADLINE,
    calibrate_dataset,
    evaluate_dataset,
    with_not,
    without_not,
)
from pglogic.eval.metrics import aggregate
from pglogic.eval.report import breakdown, clean_json, key_methods, md_table, targets, write_report
from pglogic.store import migrate
from pglogic.store.calibration_store import truth_spec

OUT = Path(__file__).resolve().parent / "quality"
DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704", "limit_small")
DATABASE = "bench_quality"
MODES = ("pglogic-nsfl", "pglogic-nsfl-rerank", "pglogic-sqo", "pglogic-sqo-rerank")
TEMPLATE_METHODS = (DENSE, HEADLINE, *MODES, "geometric")
#: The supervised calibration of each dataset is fitted on another one (never on its own labels).
FIT_FROM = {
    "reuters21578": "stackexchange_cooking_robotics",
    "stackexchange_cooking_robotics": "reuters21578",
    "arxiv_0704": "reuters21578",
    "limit_small": "reuters21578",
}


def calibrations(api: PgLogic, name: str) -> dict[str, str]:
    """The calibrated maps evaluated on ``name``: a supervised fit from another dataset's
    labels, and the unsupervised fit from ``name``'s own similarity distribution (no labels)."""
    out = {}
    other = FIT_FROM[name]
    cal = calibrate_dataset(api, load_dataset(SHARED_DATA / other))
    out[f"fit:{other.split('_')[0]}"] = truth_spec(cal)
    own = calibrate_dataset(api, load_dataset(SHARED_DATA / name), unsupervised=True)
    out["unsupervised"] = truth_spec(own)
    print(f"  calibrations: {out}", flush=True)
    return out


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
    # the other modes and calibrated maps against the default engine (Wilcoxon, nDCG@10)
    row["modes"] = {
        m: {
            "ms": result.latency_ms[m],
            **{label: {"delta": p.delta, "p": p.p_value, "n": p.n} for label, p in t.items()},
        }
        for m, t in result.versus_headline.items()
    }
    row["modes"][HEADLINE] = {"ms": result.latency_ms[HEADLINE]}
    table = breakdown(result, lambda q: q.template if q.group == "nsfl" else None, result.methods)
    row["nsfl_templates"] = {
        t: {"queries": table[t]["queries"], **{m: table[t][m]["ndcg@10"] for m in TEMPLATE_METHODS}}
        for t in table
        if t is not None
    }
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
    out += [
        f"## Scoring modes and calibrated maps against the default engine ({HEADLINE})",
        "",
        "nDCG@10 of the method (Δ against the default engine on the same queries, Wilcoxon p); "
        "NegRecall@10 on queries with NOT; median ms per query after embedding (SQO: its ascent "
        "included). Calibrated maps: `fit:<dataset>` is a supervised fit on another dataset's "
        "labels, `unsupervised` the fit from the dataset's own similarity distribution.",
        "",
    ]
    body = []
    for r in rows:
        for m, v in r["modes"].items():
            cells = []
            for label, sub in (("with NOT", "not"), ("without NOT", "plain")):
                val = r[sub].get(m, {}).get("ndcg@10")
                test = v.get(label)
                shown = "—" if val is None else f"{val:.3f}"
                if test is not None:
                    shown += f" ({test['delta']:+.3f}, p={test['p']:.2g})"
                cells.append(shown)
            neg = r["not"].get(m, {}).get("negrecall@10")
            body.append(
                [r["dataset"], m, cells[0], "—" if neg is None else f"{neg:.3f}", cells[1],
                 f"{v['ms']:.1f}"]
            )  # fmt: skip
    out += md_table(
        ["dataset", "method", "NOT nDCG@10", "NegRecall@10", "no-NOT nDCG@10", "median ms"], body
    )
    out += [
        "## NSFL's six templates (nDCG@10)",
        "",
        "The paper's claim to check: its operators help A∧¬B and A∨B∨C most.",
        "",
    ]
    body = []
    for r in rows:
        for t, v in r["nsfl_templates"].items():
            body.append([r["dataset"], f"`{t}`", str(v["queries"]),
                         *(f"{v[m]:.3f}" for m in TEMPLATE_METHODS)])  # fmt: skip
    out += md_table(["dataset", "template", "queries", *TEMPLATE_METHODS], body)
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
        result = evaluate_dataset(
            api, ds, derived=derived, on_query=progress, calibrations=calibrations(api, name)
        )
        write_report(result, OUT / name)
        rows.append(headline(name, result))
        print((OUT / name / "results.md").read_text().split("## Per template")[0], flush=True)
    if not args.only:
        (OUT / "summary.json").write_text(json.dumps(clean_json(rows), indent=1) + "\n")
        machine = machine_line()
        (OUT / "summary.md").write_text(summary_md(rows, machine) + "\n")
        print((OUT / "summary.md").read_text())


if __name__ == "__main__":
    main()
