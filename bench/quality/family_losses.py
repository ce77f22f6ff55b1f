"""Where the default loses per template family, and which knob would remove it: exact scoring.

``bench/quality/summary.md`` with 50 derived queries per template found four template families
where the default of migration 0012 (AND text 4/1, passage score ``blend-not``) is significantly
below another method: on Reuters, plain conjunctions
(``AND``) against every method without the AND's own text (−0.012 nDCG@10) and ``NOT in AND``
against NSFL (−0.033), whose fused question text ("grain but not wheat") weighs in; on Stack
Exchange, ``OR`` against one vector per document (−0.015) and ``NOT with OR`` against a NOT of
γ 1 (−0.009). This script scores every document of the three real corpora exactly (NumPy, the
default layout: passages with the default passage score ``blend-not``), 50 derived queries per
template, for the candidates below and dense retrieval, and tests each against the default per
template family (two-sided Wilcoxon, Holm-adjusted per corpus over all those tests):

* **the AND's own text** at weight w in a plain conjunction and w' in an AND with a negated
  operand (the default: 4 and 1; w = 0, :data:`PLAIN`, is how every method of the evaluation
  without AND texts scores a plain conjunction);
* **the question's own text** (the whole formula as one phrase, NSFL's fused query) as one more
  factor of the score of queries with NOT, at weight q, with a stronger NOT (γ) to pay for
  the traps it lets back in;
* **the document's own vector in formulas without NOT**, at weight o beside the best passage
  (``blend-not``: 0), or only in formulas with neither a NOT nor an AND phrase (*in OR*: a
  disjunction, or one term);
* **NOT's γ in formulas with both a NOT and an OR** (*with OR g*; ``product-max`` is γ 1).

Then the choice, leaving one corpus out (:func:`choose`): ``exact.objective``'s rule, among
the candidates with no family significantly below :data:`PLAIN` on a tuning corpus (Holm over
the candidate's five families). Its choice, AND text 2/1 with the own vector at 0.1 in OR,
made LIMIT-small's conjunctions significantly worse than dense retrieval through the index, so
migration 0013 takes only the own vector in OR (:data:`CHOSEN`: passage score
``blend-not-or``); :data:`DEFAULT` stays the default of 0012 it was chosen against.

    .venv/bin/python bench/quality/family_losses.py --dsn DSN          # ~10 min, 2 cores
    .venv/bin/python bench/quality/family_losses.py --render           # the Markdown from the JSON

``DSN``: the database holding the corpora ``eval_<dataset>`` with passages that
``passages_quality.py --subsets all`` loaded (as for ``passage_choice.py``). Writes
``bench/quality/results/family_losses.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import SHARED_DATA, machine_line, md_table
from bench.lib.exact import REAL, load_corpus, mean_of, objective, per_document, scored_runs
from pglogic.config import DEFAULT_MODEL
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.conjunction import and_texts, own_weights, with_and_texts
from pglogic.engine.operators import evaluate_numpy
from pglogic.eval.compare import family_of, holm
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.eval.metrics import paired_test
from pglogic.query import negated_only_terms, terms

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "family_losses"
PER_TEMPLATE = 50
K = 100
FAMILIES = ("AND", "OR", "AND+OR", "NOT in AND", "NOT with OR")


@dataclass(frozen=True)
class Candidate:
    """AND text weights (plain, beside a NOT), the question's weight in NOT queries, NOT's γ."""

    and_plain: int
    and_not: int
    question: float
    gamma: float
    #: The document's own vector's weight in a text's similarity in a formula without NOT
    #: (``blend-not``: 0, the best passage alone).
    own_plain: float = 0.0
    #: The own vector's weight in a formula with neither a negated term nor an AND of two
    #: positive operands (a disjunction, or one term).
    own_or: float = 0.0
    #: NOT's γ in a formula with both a NOT and an OR (None: ``gamma``).
    gamma_or: float | None = None

    @property
    def label(self) -> str:
        out = f"AND text {self.and_plain}/{self.and_not}"
        if self.question:
            out += f", question {self.question:g}"
        if self.own_plain:
            out += f", own {self.own_plain:g} without NOT"
        if self.own_or:
            out += f", own {self.own_or:g} in OR"
        out += f", γ {self.gamma:g}"
        return out + (f" (with OR {self.gamma_or:g})" if self.gamma_or is not None else "")


#: The default of migration 0012, which every candidate is tested against.
DEFAULT = Candidate(4, 1, 0.0, 1.25)
#: The default since migration 0013 (passage score ``blend-not-or``; ``and_text`` stays 4).
CHOSEN = Candidate(4, 1, 0.0, 1.25, own_or=0.1)
CANDIDATES = (
    DEFAULT,
    Candidate(0, 0, 0.0, 1.25),
    Candidate(1, 1, 0.0, 1.25),
    Candidate(2, 1, 0.0, 1.25),
    Candidate(4, 0, 0.0, 1.25),
    Candidate(2, 0, 0.0, 1.25),
    Candidate(4, 1, 0.25, 1.25),
    Candidate(4, 1, 0.25, 1.5),
    Candidate(4, 1, 0.25, 2.0),
    Candidate(4, 1, 0.5, 2.0),
    Candidate(3, 1, 0.0, 1.25),
    Candidate(2, 1, 0.25, 1.5),
    Candidate(3, 1, 0.25, 1.5),
    Candidate(4, 1, 0.0, 1.25, 0.1),
    Candidate(4, 1, 0.0, 1.25, 0.25),
    Candidate(2, 1, 0.0, 1.25, 0.1),
    Candidate(2, 1, 0.0, 1.25, 0.25),
    Candidate(2, 1, 0.0, 1.25, own_or=0.1),
    Candidate(2, 1, 0.0, 1.25, own_or=0.25),
    Candidate(2, 1, 0.0, 1.25, own_or=0.5),
    Candidate(4, 1, 0.0, 1.25, own_or=0.25),
    Candidate(2, 0, 0.0, 1.25, own_or=0.25),
    Candidate(2, 1, 0.25, 1.5, own_or=0.25),
    Candidate(2, 1, 0.0, 1.25, own_or=0.1, gamma_or=1.0),
    Candidate(2, 1, 0.0, 1.25, own_or=0.1, gamma_or=1.1),
    CHOSEN,
)
#: Every method of the evaluation without AND texts scores a plain conjunction like this one.
PLAIN = Candidate(0, 0, 0.0, 1.25)


def run_dataset(dsn: str, name: str) -> dict[str, Any]:
    """Per-query nDCG@10 / NegRecall@10 of every candidate and of dense retrieval."""
    ds = load_dataset(SHARED_DATA / name)
    ids, docs, passages = load_corpus(dsn, f"eval_{name}")
    derived = derive_queries(ds, per_template=PER_TEMPLATE)
    trees = {c: [with_and_texts(q.tree, c.and_plain, c.and_not) for q in derived.queries]
             for c in CANDIDATES}  # fmt: skip
    texts = sorted({t for ts in trees.values() for tr in ts for t in terms(tr)}
                   | {q.text for q in derived.queries})  # fmt: skip
    vecs = dict(zip(texts, get_query_embedder(DEFAULT_MODEL).embed(texts), strict=True))
    pm = np.concatenate(passages)
    starts = np.cumsum([0] + [len(p) for p in passages[:-1]])
    values = {t: per_document(docs @ vecs[t], pm @ vecs[t], starts) for t in texts}
    runs: dict[str, dict[str, list[str]]] = {c.label: {} for c in CANDIDATES}
    runs["dense"] = {}
    for i, q in enumerate(derived.queries):
        has_not = bool(negated_only_terms(q.tree))
        disjunction = not has_not and not and_texts(q.tree)
        with_or = family_of(q.tree) == "NOT with OR"
        scored = sorted({t for c in CANDIDATES for t in terms(trees[c][i])} | {q.text})
        positive = {
            t: w > 0 for t, w in zip(scored, own_weights(q.tree, scored, "blend"), strict=True)
        }

        def sim(
            t: str, own: float = 0.0, has_not: bool = has_not, positive: dict[str, bool] = positive
        ) -> np.ndarray:
            v = values[t]  # blend-not: a positive text beside a NOT blends with the own vector
            if not has_not:  # (own: the own vector's weight in a formula without NOT)
                return own * v["documents"] + (1 - own) * v["max"] if own else v["max"]
            return (v["documents"] + v["max"]) / 2 if positive[t] else v["max"]

        for c in CANDIDATES:
            tree = trees[c][i]
            own = c.own_or if disjunction and c.own_or else c.own_plain
            gamma = c.gamma_or if with_or and c.gamma_or is not None else c.gamma
            scores = evaluate_numpy(
                tree,
                {t: sim(t, own) for t in terms(tree)},
                f"and=product,or=max,not=complement^{gamma:g}",
            )
            if c.question and has_not:
                scores = scores * np.clip(sim(q.text), 0.0, 1.0) ** c.question
            runs[c.label][q.id] = [ids[j] for j in np.argsort(-scores, kind="stable")[:K]]
        dense = docs @ vecs[q.text]
        runs["dense"][q.id] = [ids[j] for j in np.argsort(-dense, kind="stable")[:K]]
    return scored_runs(name, derived.queries, runs)


def analyse(d: dict[str, Any]) -> dict[str, Any]:
    """Per family: each candidate's mean and its test against the default (Holm over the
    corpus's family × candidate tests); all queries; NegRecall@10 of NOT queries / dense's."""
    per, fam = d["per"], d["family"]
    base = per[DEFAULT.label]
    cells: dict[str, dict[str, dict[str, Any]]] = {}
    raw: dict[tuple[str, str], float] = {}
    for f in FAMILIES:
        qids = [q for q, g in fam.items() if g == f]
        if not qids:
            continue
        cells[f] = {"n": {"queries": len(qids)}}
        for m in per:
            row: dict[str, Any] = {"ndcg": mean_of(per[m], qids, "ndcg")}
            if m != DEFAULT.label:
                r = paired_test(
                    {q: base[q]["ndcg"] for q in qids}, {q: per[m][q]["ndcg"] for q in qids}
                )
                row.update(delta=r.delta, p=r.p_value)
                raw[(f, m)] = r.p_value
            cells[f][m] = row
    for (f, m), p in holm(raw).items():
        cells[f][m]["p_holm"] = p
    # each candidate against PLAIN per family: the losses a method without AND texts would show
    plain = per[PLAIN.label]
    vs_plain: dict[tuple[str, str], float] = {}
    deltas: dict[tuple[str, str], float] = {}
    for f in cells:
        qids = [q for q, g in fam.items() if g == f]
        for c in CANDIDATES:
            if c == PLAIN:
                continue
            r = paired_test({q: plain[q]["ndcg"] for q in qids},
                            {q: per[c.label][q]["ndcg"] for q in qids})  # fmt: skip
            vs_plain[(f, c.label)], deltas[(f, c.label)] = r.p_value, r.delta
    below: dict[str, list[str]] = {c.label: [] for c in CANDIDATES}
    for c in CANDIDATES:  # Holm over each candidate's own families: the grid does not matter
        mine = {f: p for (f, m), p in vs_plain.items() if m == c.label}
        below[c.label] = [f for f, p in holm(mine).items()
                          if p < 0.05 and deltas[(f, c.label)] < 0]  # fmt: skip
    allq = list(fam)
    nots = d["with_not"]
    dense_nr = mean_of(per["dense"], nots, "negrecall")
    overall = {
        m: {"ndcg": mean_of(per[m], allq, "ndcg"), "not_ndcg": mean_of(per[m], nots, "ndcg"),
            "negrecall": mean_of(per[m], nots, "negrecall"),
            "nr_ratio": mean_of(per[m], nots, "negrecall") / dense_nr}
        for m in per
    }  # fmt: skip
    return {"dataset": d["dataset"], "families": cells, "overall": overall,
            "below_plain": below}  # fmt: skip


def choose(data: dict[str, Any]) -> dict[str, Any]:
    """Leave one corpus out with :func:`exact.objective` (NOT queries may lose at most
    :data:`exact.KEEP` against the default), among the candidates with no template family
    significantly below :data:`PLAIN` on a tuning corpus; and the choice on all three."""
    by = {a["dataset"]: a for a in data["analysis"]}
    table = {c.label: {n: by[n]["overall"][c.label] for n in REAL} for c in CANDIDATES}
    dense = {n: by[n]["overall"]["dense"] for n in REAL}

    def score(m: str, names: list[str]) -> float:
        if any(by[n]["below_plain"][m] for n in names):
            return -math.inf
        old = {n: table[DEFAULT.label][n] for n in names}
        return objective({n: table[m][n] for n in names}, {n: dense[n] for n in names}, old)

    loco: dict[str, Any] = {}
    for held in REAL:
        tune = [n for n in REAL if n != held]
        best = max(table, key=lambda m: score(m, tune))
        if score(best, tune) == -math.inf:  # every candidate excluded: no choice
            loco[held] = {"chosen": None, "held_out": None, "below_plain": []}
            continue
        loco[held] = {"chosen": best, "held_out": table[best][held],
                      "below_plain": by[held]["below_plain"][best]}  # fmt: skip
    scores = {m: score(m, list(REAL)) for m in table}
    best = max(scores, key=lambda m: scores[m])
    return {"loco": loco, "chosen_on_all": best if scores[best] > -math.inf else None,
            "J": scores}  # fmt: skip


def to_markdown(data: dict[str, Any]) -> str:
    """The results file."""
    out = [
        "# Where the default loses per template family: exact scoring (`bench/quality/family_losses.py`)",
        "",
        f"- {data['machine_line']}",
        f"- Exact NumPy scoring of every document, passages with `blend-not`, {PER_TEMPLATE} "
        "derived queries per template, all-MiniLM-L6-v2, AND = product, OR = max, NOT = "
        "(1 − x)^γ. *AND text w/w'*: the AND's own text at weight w in a plain conjunction and "
        "w' beside a NOT (4/1: the default of migration 0012, which every cell is tested "
        "against; 4/1, own 0.1 in OR: the default since 0013); *question q*: the question's "
        "own text as a factor s^q of the score of queries with NOT; *own o without NOT* / *in "
        "OR*: the document's own vector at weight o beside the best passage in every formula "
        "without NOT / in one with neither a NOT nor an AND phrase. Cells: mean nDCG@10, and the change against the "
        "default with its Holm-adjusted p (two-sided Wilcoxon; **bold**: p < 0.05).",
        "",
    ]
    if data.get("conclusions"):
        out += ["## Conclusions", "", data["conclusions"].strip(), ""]
    labels = [c.label for c in CANDIDATES]
    ch = data["choice"]
    out += [
        "## Leave one corpus out",
        "",
        "The rule of `frontier.md` (J = mean nDCG@10 − 0.25 × mean excess of NegRecall / "
        "dense over 0.2; NOT queries lose at most 0.01 nDCG@10 against the default), among "
        "the candidates with no template family significantly below *AND text 0/0* (how "
        "every method without AND texts scores a plain conjunction) on a tuning corpus "
        "(Holm over the candidate's five families).",
        "",
    ]
    rows = []
    for held, r in ch["loco"].items():
        h = r["held_out"]
        if h is None:
            rows.append([held, "none (every candidate excluded)", "", "", "", ""])
            continue
        rows.append([held, r["chosen"], f"{h['ndcg']:.3f}", f"{h['not_ndcg']:.3f}",
                     f"{h['nr_ratio']:.2f}", ", ".join(r["below_plain"]) or "none"])  # fmt: skip
    out += [md_table(["held-out corpus", "chosen on the other two", "nDCG@10", "NOT nDCG@10",
                      "NegRecall÷dense", "families below AND text 0/0 there"], rows), ""]  # fmt: skip
    out += [f"Chosen on all three: `{ch['chosen_on_all']}`.", ""]
    out += ["## All queries", ""]
    header = [
        "method",
        *[f"{a['dataset']}: nDCG@10 / NOT nDCG@10 / NegRecall÷dense" for a in data["analysis"]],
        "J (all three)",
        "families below AND text 0/0",
    ]
    rows = []
    for m in ["dense", *labels]:
        rows.append([m, *[
            f"{a['overall'][m]['ndcg']:.3f} / {a['overall'][m]['not_ndcg']:.3f} / "
            f"{a['overall'][m]['nr_ratio']:.2f}" for a in data["analysis"]
        ], "" if m == "dense" else f"{ch['J'][m]:.3f}",
        "" if m == "dense" else "; ".join(
            f"{a['dataset'][:7]}: {', '.join(a['below_plain'][m])}"
            for a in data["analysis"] if a["below_plain"][m]) or "none"])  # fmt: skip
    out += [md_table(header, rows), ""]
    for a in data["analysis"]:
        out += [f"## {a['dataset']}: per template family", ""]
        fams = list(a["families"])
        header = ["method", *[f"{f} ({a['families'][f]['n']['queries']})" for f in fams]]
        rows = []
        for m in [*labels, "dense"]:
            cells = []
            for f in fams:
                c = a["families"][f][m]
                if m == DEFAULT.label:
                    cells.append(f"{c['ndcg']:.3f}")
                    continue
                p = f"p {c['p_holm']:.2g}"
                cells.append(f"{c['ndcg']:.3f} ({c['delta']:+.3f}, "
                             + (f"**{p}**" if c["p_holm"] < 0.05 else p) + ")")  # fmt: skip
            rows.append([m, *cells])
        out += [md_table(header, rows), ""]
    return "\n".join(out) + "\n"


def main() -> None:
    """Run (or ``--render``) and write ``bench/quality/results/family_losses.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dsn")
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--conclusions", type=Path)
    args = ap.parse_args()
    jp, mp = RESULTS_DIR / f"{NAME}.json", RESULTS_DIR / f"{NAME}.md"
    if args.render:
        data = json.loads(jp.read_text())
    else:
        if not args.dsn:
            ap.error("--dsn is needed to run (or --render)")
        data = {"machine_line": machine_line(), "analysis": []}
        for name in REAL:
            data["analysis"].append(analyse(run_dataset(args.dsn, name)))
            print(name, "done", flush=True)
    data["choice"] = choose(data)
    if args.conclusions:
        data["conclusions"] = args.conclusions.read_text()
    prov = provenance.of(data)  # this run's, or (--render) the one the JSON holds
    jp.write_text(json.dumps(provenance.record(data, prov), indent=1) + "\n")
    mp.write_text(provenance.stamp(to_markdown(data), prov))
    print(mp.read_text())


if __name__ == "__main__":
    main()
