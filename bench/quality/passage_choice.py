"""Which passage score should be the default: exact scoring, chosen leaving one corpus out.

Over every document of each real shared corpus (the corpora ``eval_<dataset>`` of
``bench/quality/passages_quality.py --subsets all``), every derived query (30 per template, or
``--per-template``) is scored
exactly in NumPy with the default family and its AND texts. A candidate says how a term's
similarity comes from a document's passages, separately for formulas with a NOT and without:

* ``max`` (today's default): the best passage, for every text of every formula;
* ``documents``: the document's own vector (one vector per document);
* ``blend``: a negated term the best passage, a positive text the mean of the best passage and
  the document's own vector, in every formula;
* ``NOT: own w, else max``: in a formula with a NOT, a negated term takes the best passage and a
  positive text ``w`` × the document's own vector + (1 − w) × the best passage; a formula
  without NOT takes the best passage (``w`` = 1: the positive texts of a NOT formula use the
  document's own vector; ``w`` = 0.5 is ``blend-not``); ``…, else blend``: a formula without
  NOT blends;
* ``max`` and the ``NOT: own w, else max`` (w ≥ 0.5) with a stronger NOT, ``(1 − x)^γ`` for
  γ 1.5, 1.75 and 2 (the default family's is 1.25).

The choice is :func:`exact.leave_one_out` with :func:`exact.objective`, the rule every
default was chosen by: per held-out corpus, the candidate with the best mean nDCG@10 minus the
NegRecall penalty on the other two, refused when NOT queries lose more than 0.01 nDCG@10 against
``max`` on a tuning corpus. Dense retrieval's figures are ``frontier.json``'s (the same 30 per
template); with another ``--per-template``, the question scored exactly against every
document's own vector on the same queries. Paired Wilcoxon tests of every candidate against
``max``.

    .venv/bin/python bench/quality/passage_choice.py --dsn "$DSN"        # ~3 minutes
    .venv/bin/python bench/quality/passage_choice.py --dsn "$DSN" --per-template 50
    .venv/bin/python bench/quality/passage_choice.py --render [--conclusions FILE]

Writes ``bench/quality/results/passage_choice.{json,md}`` (``passage_choice_p50.{json,md}`` with 50).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import SHARED_DATA, machine_line, md_table
from bench.lib.exact import (
    CUT,
    KEEP,
    PENALTY,
    PER_TEMPLATE,
    REAL,
    Variant,
    leave_one_out,
    objective,
    score_variants,
)
from pglogic.eval.data import load_dataset
from pglogic.eval.metrics import paired_test

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "passage_choice"
BASE = "max"
K = 100
WEIGHTS = (0.25, 0.5, 0.75, 1.0)
GAMMA = 1.25  # the default family's NOT power, (1 − x)^1.25
STRONGER = (1.5, 1.75, 2.0)
LOCO_HEADER = ["held-out corpus", "chosen on the other two", "nDCG@10 (Δ max)", "NOT nDCG@10",
               "no-NOT nDCG@10", "NegRecall@10 / dense"]  # fmt: skip
TEST_HEADER = ["dataset", "candidate", "nDCG@10", "NOT nDCG@10", "no-NOT nDCG@10",
               "NOT NegRecall@10 ↓"]  # fmt: skip


def candidates() -> dict[str, tuple[float, float, float, float]]:
    """name -> (own-vector weight of a positive text in a NOT formula, of a text in a formula
    without NOT, of a negated term; the rest of each is the best passage's; the NOT's power γ)."""
    out = {"max": (0.0, 0.0, 0.0, GAMMA), "documents": (1.0, 1.0, 1.0, GAMMA),
           "blend": (0.5, 0.5, 0.0, GAMMA)}  # fmt: skip
    for w in WEIGHTS:  # (w = 0.5: the engine's blend-not)
        out["blend-not" if w == 0.5 else f"NOT: own {w:g}, else max"] = (w, 0.0, 0.0, GAMMA)
        out[f"NOT: own {w:g}, else blend"] = (w, 0.5, 0.0, GAMMA)
    for g in STRONGER:
        out[f"max, NOT γ={g:g}"] = (0.0, 0.0, 0.0, g)
        for w in WEIGHTS[1:]:
            name = "blend-not" if w == 0.5 else f"NOT: own {w:g}, else max"
            out[f"{name}, NOT γ={g:g}"] = (w, 0.0, 0.0, g)
    return out


def _mix(w_not: float, w_plain: float, w_neg: float) -> Variant:
    """A text's similarity: its own-vector weight by role, the rest its best passage's."""

    def variant(values: dict[str, np.ndarray], negated: bool, has_not: bool) -> np.ndarray:
        w = w_neg if negated else (w_not if has_not else w_plain)
        return w * values["documents"] + (1 - w) * values["max"]

    return variant


def run_dataset(dsn: str, name: str, per_template: int) -> dict[str, Any]:
    """Per candidate: the summary row of :func:`exact.objective` and per-query metrics."""
    cands = candidates()
    sc = score_variants(
        dsn, load_dataset(SHARED_DATA / name), per_template,
        {c: _mix(*w[:3]) for c, w in cands.items()},
        {c: f"and=product,or=max,not=complement^{w[3]:g}" for c, w in cands.items()},
    )  # fmt: skip
    nots, plain, mean, per = sc.with_not, sc.without, sc.mean, sc.per
    rows = {
        c: {
            "ndcg": mean(c, "ndcg@10", nots + plain),
            "not_ndcg": mean(c, "ndcg@10", nots),
            "plain_ndcg": mean(c, "ndcg@10", plain),
            "negrecall": mean(c, "negrecall@10", nots),
        }
        for c in cands
    }
    tests = {}
    for c in cands:
        if c == BASE:
            continue
        for label, qids, metric in (
            ("ndcg", nots + plain, "ndcg@10"),
            ("not_ndcg", nots, "ndcg@10"),
            ("plain_ndcg", plain, "ndcg@10"),
            ("negrecall", nots, "negrecall@10"),
        ):
            r = paired_test(
                {q: per[BASE][q][metric] for q in qids}, {q: per[c][q][metric] for q in qids}
            )
            tests[f"{c} | {label}"] = {"delta": r.delta, "p": r.p_value, "n": r.n}
    return {"dataset": name, "documents": len(sc.ids), "with_not": len(nots),
            "without_not": len(plain), "rows": rows, "tests": tests,
            "dense": sc.dense}  # fmt: skip


def choose(data: dict[str, Any]) -> dict[str, Any]:
    """Leave one corpus out, and the choice on all three."""
    by = {d["dataset"]: d["rows"] for d in data["datasets"]}
    table = {c: {n: by[n][c] for n in REAL} for c in candidates()}
    dense = data["dense"]
    loco = leave_one_out(table, dense, BASE)
    overall = max(table, key=lambda m: objective(table[m], dense, table[BASE]))
    scores = {c: objective(table[c], dense, table[BASE]) for c in table}
    return {"loco": loco, "chosen_on_all": overall, "objective": scores}


def to_markdown(data: dict[str, Any]) -> str:
    """The results file."""
    by = {d["dataset"]: d for d in data["datasets"]}
    dense = data["dense"]
    n = data.get("per_template", PER_TEMPLATE)
    dense_note = (
        " (dense retrieval's over the same queries, every document's own vector scored)"
        if n != PER_TEMPLATE
        else ""
    )
    out = [
        "# Which passage score: exact scoring, leave one corpus out (`bench/quality/passage_choice.py`)",
        "",
        f"- {data['machine_line']}",
        "- Exact NumPy scoring over every document of each corpus, default family with its AND "
        f"texts, {n} derived queries per template, all-MiniLM-L6-v2. Cells: nDCG@10 over all "
        "queries / NegRecall@10 on queries with NOT as a share of dense retrieval's"
        f"{dense_note}; J: "
        f"`exact.objective` on all three (mean nDCG@10 − {PENALTY} × mean excess of "
        f"NegRecall / dense over {CUT}); ✗: NOT queries lose more than {KEEP} nDCG@10 against "
        "`max` on some corpus. *own w*: the weight of the document's own vector in a positive "
        "text's similarity, the rest the best passage's; a negated term always takes the best "
        "passage (except `documents`).",
        "",
    ]
    if data.get("conclusions"):
        out += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    rows = [["dense"] + [f"{dense[n]['ndcg']:.3f} / 1.00" for n in REAL] + [""]]
    for c, j in sorted(data["objective"].items(), key=lambda x: -x[1]):  # (refused ones last)
        cells = [f"`{c}`"]
        for n in REAL:
            r = by[n]["rows"][c]
            cells.append(f"{r['ndcg']:.3f} / {r['negrecall'] / dense[n]['negrecall']:.2f}")
        if math.isinf(j):  # refused by the rule: J without it, marked
            j = objective({n: by[n]["rows"][c] for n in REAL}, dense, None)
            cells.append(f"{j:.3f} ✗")
        else:
            cells.append(f"{j:.3f}")
        rows.append(cells)
    out += [md_table(["candidate", *REAL, "J (all three)"], rows), ""]
    out += ["## Leave one corpus out", ""]
    lrows = []
    for held, v in data["loco"].items():
        h, b = v["held_out"], by[held]["rows"][BASE]
        lrows.append([
            held, f"`{v['chosen']}`", f"{h['ndcg']:.3f} ({h['ndcg'] - b['ndcg']:+.3f})",
            f"{h['not_ndcg']:.3f} ({h['not_ndcg'] - b['not_ndcg']:+.3f})",
            f"{h['plain_ndcg']:.3f} ({h['plain_ndcg'] - b['plain_ndcg']:+.3f})",
            f"{h['negrecall'] / dense[held]['negrecall']:.2f} "
            f"(max {b['negrecall'] / dense[held]['negrecall']:.2f})",
        ])  # fmt: skip
    out += [
        md_table(LOCO_HEADER, lrows),
        "",
        f"Chosen on all three: `{data['chosen_on_all']}`.",
        "",
        "## Every candidate against `max` (paired Wilcoxon, unadjusted)",
        "",
    ]
    trows = []
    for n in REAL:
        for c in candidates():
            if c == BASE:
                continue
            cells = [n, f"`{c}`"]
            for m in ("ndcg", "not_ndcg", "plain_ndcg", "negrecall"):
                t = by[n]["tests"][f"{c} | {m}"]
                cells.append(f"{by[n]['rows'][c][m]:.3f} ({t['delta']:+.3f}, p {t['p']:.2g})")
            trows.append(cells)
    out += [
        md_table(TEST_HEADER, trows),
        "",
    ]
    return "\n".join(out) + "\n"


def main() -> None:
    """Run (or ``--render``) and write ``bench/quality/results/passage_choice.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dsn", required=False)
    ap.add_argument(
        "--per-template",
        type=int,
        default=PER_TEMPLATE,
        help=f"derived queries per template (default {PER_TEMPLATE}; another number writes "
        f"{NAME}_p<N>.{{json,md}})",
    )
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--conclusions", type=Path)
    args = ap.parse_args()
    stem = NAME if args.per_template == PER_TEMPLATE else f"{NAME}_p{args.per_template}"
    jp, mp = RESULTS_DIR / f"{stem}.json", RESULTS_DIR / f"{stem}.md"
    if args.render:
        data = json.loads(jp.read_text())
    else:
        frontier = json.loads((RESULTS_DIR / "frontier.json").read_text())
        data = {"machine_line": machine_line(), "dense": frontier["dense"],
                "per_template": args.per_template, "datasets": []}  # fmt: skip
        for name in REAL:
            data["datasets"].append(run_dataset(args.dsn, name, args.per_template))
            print(name, {c: round(r["ndcg"], 3) for c, r in data["datasets"][-1]["rows"].items()},
                  flush=True)  # fmt: skip
        if args.per_template != PER_TEMPLATE:  # frontier.md's dense run has 30 per template
            data["dense"] = {d["dataset"]: d["dense"] for d in data["datasets"]}
    data.pop("choice", None)  # (written by an earlier version: now the keys of choose())
    data.update(choose(data))
    if args.conclusions:
        data["conclusions"] = args.conclusions.read_text()
    prov = provenance.of(data)  # this run's, or (--render) the one the JSON holds
    jp.write_text(json.dumps(provenance.record(data, prov), indent=1) + "\n")
    mp.write_text(provenance.stamp(to_markdown(data), prov))
    print(mp.read_text())


if __name__ == "__main__":
    main()
