"""Pseudo-relevance feedback on the query's terms: does it make NOT exclude more traps?

Issue 21 asks NOT to exclude 80% of the traps dense retrieval ranks in the top 10; arXiv stays
at 66% (``bench/quality/results/frontier.md``): a stronger NOT there costs the NOT queries more nDCG@10
than the traps it removes. The direction measured here changes the *vector* of a term instead
of the operator: Rocchio's pseudo-relevance feedback, unsupervised and computable inside the
statement (one more k-NN scan of m rows and pgvector's ``avg(vector)``):

    v' = normalise(v + β · ĉ),   ĉ = the normalised mean of the m documents nearest to v

For a negated term, v' would point at the cluster of documents that are about the term
(an arXiv category's papers) rather than at the words of its name. Candidates, every document
scored exactly in NumPy over the default engine (product AND, max OR, NOT (1 − x)^1.25, each
AND's own text at weight 4, 1 beside a NOT, ``bench/quality/results/frontier.md``):

* ``neg m=…, β=…``: feedback on the negated terms only;
* ``pos m=…, β=…``: feedback on the positive terms only (classic query expansion);
* ``pos (no NOT) m=…, β=…``: on the positive terms of queries without NOT only.

Also the separation itself: the ROC AUC, over every document, of each negated term's
similarity against its label (1: every labelled document above every other), raw and with
feedback (β = ∞: the centroid alone). The selection is leave one corpus out, with
``bench/quality/frontier.py``'s objective and rule (NOT queries may lose at most 0.01 nDCG@10).

    .venv/bin/python bench/studies/2026-11-26-feedback/feedback.py      # ~15 min the first time (embeds the corpora)
    .venv/bin/python bench/studies/2026-11-26-feedback/feedback.py --render --conclusions notes.md

Document vectors are the model's first window of each record's text (what a corpus without
passages holds), embedded here and cached under ``/tmp/pglogic-feedback``; no database.
Writes ``bench/studies/2026-11-26-feedback/feedback.{json,md}``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib.benchlib import machine_line, md_table, results_main
from bench.lib.exact import PER_TEMPLATE, REAL, leave_one_out, metrics, summary
from bench.lib.negation import auc
from bench.lib.prf import INF, Candidate, Corpus, load, negated_terms, score

RESULTS_DIR = Path(__file__).resolve().parent  # a study keeps its results beside it


def evaluate(c: Corpus, cand: Candidate) -> dict[str, float]:
    """nDCG@10 (all, NOT, no-NOT) and NegRecall@10 of the candidate on ``c``."""
    memo: dict[Any, np.ndarray] = {}
    res = {
        q["id"]: metrics(c.sims, q, score(c, q["tree"], cand, memo, has_not=bool(q["n_neg"])))
        for q in c.sims.queries
    }
    return summary(c.sims, res)


AUC_SETTINGS = {"raw": None, "m=10, β=0.5": (10, 0.5), "m=10, β=1": (10, 1.0),
                "m=20, β=2": (20, 2.0), "centroid of 10": (10, INF),
                "centroid of 50": (50, INF)}  # fmt: skip


def separation(c: Corpus) -> dict[str, float]:
    """Mean AUC of the negated terms' similarities for their labels, raw and with feedback."""
    where = {d: i for i, d in enumerate(c.sims.ids)}
    texts = sorted(set().union(*(negated_terms(q["tree"]) for q in c.sims.queries)))
    memo: dict[Any, np.ndarray] = {}
    out: dict[str, list[float]] = {k: [] for k in AUC_SETTINGS}
    for t in texts:
        if t not in c.label_of:
            continue
        positive = np.zeros(len(c.sims.ids), bool)
        positive[[where[d] for d in c.label_docs[c.label_of[t]] if d in where]] = True
        for name, fb in AUC_SETTINGS.items():
            s = c.feedback(t, *fb, memo) if fb else c.sims.s(t)
            out[name].append(auc(s, positive))
    return {k: float(np.mean(v)) for k, v in out.items()} | {"terms": float(len(out["raw"]))}


def candidates() -> list[Candidate]:
    """The grid: feedback on negated terms, on positive terms, on positive terms without NOT."""
    out = [Candidate()]
    for m in (5, 10, 20, 50):
        for beta in (0.5, 1.0, 2.0, 4.0):
            out.append(Candidate(neg=(m, beta)))
    for m in (10, 20):
        for beta in (0.5, 1.0):
            out += [Candidate(pos=(m, beta)), Candidate(pos=(m, beta), pos_without_not=True),
                    Candidate(neg=(m, beta), pos=(m, beta))]  # fmt: skip
    return out


def main() -> None:
    """Run the grid on the three real corpora; write ``bench/studies/2026-11-26-feedback/feedback.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    results_main("feedback", __doc__, run, markdown, results_dir=RESULTS_DIR)


def run() -> dict[str, Any]:
    """The measurements (see the module docstring)."""
    corpora = {n: load(n) for n in REAL}
    dense = {
        n: summary(c.sims, {q["id"]: metrics(c.sims, q, c.sims.s(q["text"]))
                            for q in c.sims.queries})
        for n, c in corpora.items()
    }  # fmt: skip
    table: dict[str, dict[str, dict[str, float]]] = {}
    for cand in candidates():
        table[cand.name] = {n: evaluate(c, cand) for n, c in corpora.items()}
        print(cand.name, {n: round(v["ndcg"], 3) for n, v in table[cand.name].items()}, flush=True)
    loco = leave_one_out(table, dense, Candidate().name)
    data = {"machine": machine_line(), "per_template": PER_TEMPLATE, "dense": dense,
            "candidates": table, "loco": loco,
            "auc": {n: separation(c) for n, c in corpora.items()}}  # fmt: skip
    return data


def markdown(data: dict[str, Any]) -> str:
    """The results as Markdown."""
    dense, table = data["dense"], data["candidates"]
    base = Candidate().name
    lines = [
        "# Pseudo-relevance feedback on the terms (`bench/studies/2026-11-26-feedback/feedback.py`)",
        "",
        f"Machine: {data['machine']}. Every document scored exactly (NumPy), "
        f"{data['per_template']} derived queries per template, all-MiniLM-L6-v2, the default "
        "engine; feedback moves a term's vector towards the mean of its m nearest documents, "
        "v' = normalise(v + β·ĉ). Cells: nDCG@10 over all queries / on NOT queries / on the "
        "others, and NegRecall@10 on NOT queries relative to dense retrieval's (goal ≤ 0.20).",
        "",
        "## Separation: does feedback make a negated term's similarity tell its label apart?",
        "",
        "Mean ROC AUC over the negated terms, of the similarity over every document against "
        "the term's label.",
        "",
    ]
    aucs = data["auc"]
    lines.append(
        md_table(
            ["corpus", "terms", *AUC_SETTINGS],
            [[n, f"{aucs[n]['terms']:.0f}", *(f"{aucs[n][k]:.3f}" for k in AUC_SETTINGS)]
             for n in REAL],
        )
    )  # fmt: skip
    lines += ["", "## Rankings", ""]
    rows = [["dense", *(f"{dense[n]['ndcg']:.3f} / {dense[n]['not_ndcg']:.3f} / "
                        f"{dense[n]['plain_ndcg']:.3f}, 1.00" for n in REAL)]]  # fmt: skip
    for name, per in table.items():
        rows.append(
            [name, *(f"{per[n]['ndcg']:.3f} / {per[n]['not_ndcg']:.3f} / "
                     f"{per[n]['plain_ndcg']:.3f}, {per[n]['negrecall'] / dense[n]['negrecall']:.2f}"
                     for n in REAL)]
        )  # fmt: skip
    lines.append(md_table(["candidate", *REAL], rows))
    lines += ["", "## Leave one corpus out (objective and rule of `bench/quality/frontier.py`)", ""]
    rows = []
    for held, v in data["loco"].items():
        h, b = v["held_out"], table[base][held]
        rows.append(
            [held, f"`{v['chosen']}`", f"{h['ndcg']:.3f} ({h['ndcg'] - b['ndcg']:+.3f})",
             f"{h['not_ndcg']:.3f} ({h['not_ndcg'] - b['not_ndcg']:+.3f})",
             f"{h['negrecall'] / dense[held]['negrecall']:.2f} "
             f"(default {b['negrecall'] / dense[held]['negrecall']:.2f})"]
        )  # fmt: skip
    lines.append(
        md_table(
            ["held-out corpus", "chosen on the other two", "nDCG@10 (Δ default)", "NOT nDCG@10",
             "NegRecall@10 / dense"],
            rows,
        )
    )  # fmt: skip
    if data.get("conclusions"):
        lines += ["", "## Conclusions", "", data["conclusions"].rstrip()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
