"""A NOT whose strength follows the query: can the similarity distribution of the negated term
among the candidates say which queries want a strong NOT? Exact scoring.

``bench/studies/2026-11-26-not-limits/not_limits.md`` found that choosing each query's NOT strength γ with the labels
would keep 90–95% of dense retrieval's traps out and raise nDCG@10, but no label-free signal it
tried (the cosine between the positive and the negated terms, NOTs relative to the pool) says
which queries want the strong NOT. The issue names another direction: *a NOT whose strength
adapts per term from the similarity distribution*. This script measures it on the default engine
(passages with ``blend-not-or``, AND texts 4/1, ``not_context`` 0.5; every document scored
exactly in NumPy; 50 derived queries per template of the three real corpora).

For every NOT query, over its *pool* (the 100 documents of the corpus the formula's positive
part ranks first; through the index it would be the best of the candidates the scans bring),
the negated terms' similarity (their maximum per document)
gives seven signals that one statement could compute without labels: its mean, its standard
deviation, its skewness, Sarle's bimodality coefficient, Otsu's separability (the largest share
of its variance between two groups cut at a threshold), its correlation with the positive
part's score, and the largest cosine between a positive and a negated term's vectors.

* **Correlation**: Spearman's ρ of each signal with the change a strong NOT (γ 3.5 against the
  default's 1.25) makes to the query's nDCG@10 and NegRecall@10.
* **Switching**: γ 3.5 (or 2) on the share f of queries with the highest (or lowest) signal,
  the default's γ on the others; each switch's NOT nDCG@10 and NegRecall@10 / dense, and its
  *cost*: nDCG@10 lost per point of dense's traps removed, against the same cost of a uniform
  stronger γ. A signal that knows which queries want the strong NOT removes traps more cheaply.
* **Absolute rules** one statement can apply: γ 2, 3.5 or 6 for a negated term whose mean
  similarity over its pool is below τ (0.06–0.12), the default's γ otherwise.
* **Per NOT family**, each uniform γ and rule against the methods ``bench/quality`` measured
  through the index (``negation.family_tests``, Holm).
* **Leave one corpus out** among the uniform γs and the absolute rules (a switch by quantile
  needs the other queries), under ``exact.objective``'s rule (J; NOT queries may lose at
  most 0.01 nDCG@10) and under the same with no NOT family below a paper's method on a tuning
  corpus (as ``not_projection.py``).

    .venv/bin/python bench/studies/2026-11-27-not-signals/not_signals.py --dsn DSN [--only CORPUS]   # ~10-12 min, 2 cores
    .venv/bin/python bench/studies/2026-11-27-not-signals/not_signals.py --render        # the Markdown from the JSON

``DSN``: the database holding the corpora ``eval_<dataset>`` with passages (as for
``not_projection.py``). Writes ``bench/studies/2026-11-27-not-signals/not_signals.{json,md}``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib.benchlib import datasets_main, md_table
from bench.lib.exact import REAL, mean_of, scored_runs
from bench.lib.negation import (
    DEFAULT_GAMMA,
    NOT_FAMILIES,
    PAPERS,
    PER_TEMPLATE,
    POOL,
    family_tests,
    index_runs,
    leave_one_out,
    load_exact,
    loco_lines,
    losses,
    positive_part,
)
from pglogic.engine.conjunction import DEFAULT_AND_TEXT
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT
from pglogic.engine.operators import evaluate_numpy
from pglogic.eval.metrics import paired_test
from pglogic.query import negated_only_terms, terms

RESULTS_DIR = Path(__file__).resolve().parent  # a study keeps its results beside it

NAME = "not_signals"
K = 100
GAMMAS = (1.25, 1.5, 2.0, 3.5)
STRONG = (2.0, 3.5)
SHARES = (0.25, 0.5)
#: Rules one statement can apply: a negated term whose mean similarity over the pool is below
#: τ gets the strong γ, the others the default's (τ absolute, so it needs no other query).
THRESHOLDS = (0.06, 0.08, 0.1, 0.12)
RULE_GAMMAS = (2.0, 3.5, 6.0)


def rule_label(tau: float, gamma: float) -> str:
    """The label of the absolute rule (τ, γ)."""
    return f"γ {gamma:g} where the term's pool mean < {tau:g}"


RULES = [rule_label(t, g) for t in THRESHOLDS for g in RULE_GAMMAS]
SIGNALS = {
    "mean": "the negated similarity's mean over the pool",
    "std": "its standard deviation",
    "skewness": "its skewness",
    "bimodality": "Sarle's bimodality coefficient (skewness² + 1) / kurtosis",
    "Otsu": "the largest share of its variance between two groups cut at a threshold",
    "corr with positive": "its correlation with the positive part's score",
    "max cosine": "the largest cosine between a positive and a negated term's vectors",
}


def _signals(neg: np.ndarray, pos: np.ndarray, cosine: float) -> dict[str, float]:
    sd = float(neg.std()) + 1e-12
    z = (neg - neg.mean()) / sd
    skew, kurt = float((z**3).mean()), float((z**4).mean())
    s = np.sort(neg)
    cut = range(5, len(s) - 4)
    otsu = max(i / len(s) * (1 - i / len(s)) * (s[:i].mean() - s[i:].mean()) ** 2 for i in cut)
    return {
        "mean": float(neg.mean()),
        "std": float(neg.std()),
        "skewness": skew,
        "bimodality": (skew**2 + 1) / kurt,
        "Otsu": float(otsu / sd**2),
        "corr with positive": float(np.corrcoef(neg, pos)[0, 1]) if pos.std() > 0 else 0.0,
        "max cosine": cosine,
    }


def run_dataset(dsn: str, name: str) -> dict[str, Any]:
    """Per-query nDCG@10 / NegRecall@10 at each γ (all derived queries; the others score as
    the default) and dense retrieval's; each NOT query's signals."""
    ex = load_exact(dsn, name)
    derived, trees, ids, docs, vecs = ex.derived, ex.trees, ex.ids, ex.docs, ex.vecs
    runs: dict[str, dict[str, list[str]]] = {f"γ {g:g}": {} for g in [*GAMMAS, *RULE_GAMMAS]}
    runs["dense"] = {}
    runs.update({r: {} for r in RULES})
    signals: dict[str, dict[str, float]] = {}
    for q, tree in zip(derived.queries, trees, strict=True):
        sims = ex.similarities(q.tree, tree)
        negated = negated_only_terms(q.tree)
        for g in sorted({*GAMMAS, *RULE_GAMMAS}) if negated else (DEFAULT_GAMMA,):
            s = evaluate_numpy(tree, sims, f"and=product,or=max,not=complement^{g:g}")
            top = [ids[j] for j in np.argsort(-s, kind="stable")[:K]]
            for other in sorted({*GAMMAS, *RULE_GAMMAS}) if not negated else (g,):
                runs[f"γ {other:g}"][q.id] = top
        if not negated:
            for r in RULES:
                runs[r][q.id] = runs[f"γ {DEFAULT_GAMMA:g}"][q.id]
        dense = docs @ vecs[q.text]
        runs["dense"][q.id] = [ids[j] for j in np.argsort(-dense, kind="stable")[:K]]
        if negated:
            pos = positive_part(tree, sims, negated)
            pool = np.argsort(-pos, kind="stable")[:POOL]
            neg = np.max([np.clip(sims[t], 0.0, 1.0) for t in negated], axis=0)[pool]
            positive = [t for t in terms(q.tree) if t not in negated]
            cosine = max((float(vecs[a] @ vecs[b]) for a in positive for b in negated), default=0.0)
            signals[q.id] = _signals(neg, pos[pool], cosine)
            means = {t: float(np.clip(sims[t], 0.0, 1.0)[pool].mean()) for t in negated}
            done: dict[tuple[float, ...], list[str]] = {}
            for tau in THRESHOLDS:
                for g in RULE_GAMMAS:
                    per_term = tuple(g if means[t] < tau else DEFAULT_GAMMA for t in negated)
                    if per_term not in done:  # (1 − s')^1.25 = (1 − s)^γ_t: s' per term
                        bent = dict(sims)
                        for t, gt in zip(negated, per_term, strict=True):
                            bent[t] = 1 - (1 - np.clip(sims[t], 0.0, 1.0)) ** (gt / DEFAULT_GAMMA)
                        s = evaluate_numpy(
                            tree, bent, f"and=product,or=max,not=complement^{DEFAULT_GAMMA:g}"
                        )
                        done[per_term] = [ids[j] for j in np.argsort(-s, kind="stable")[:K]]
                    runs[rule_label(tau, g)][q.id] = done[per_term]
    out = scored_runs(name, derived.queries, runs)
    out["signals"] = signals
    return out


def _row(
    per: dict[str, dict[str, dict[str, float]]], choice: dict[str, str], d: dict[str, Any]
) -> dict[str, float]:
    """All-query nDCG@10, NOT queries' nDCG@10 and NegRecall@10 when query q is ranked by
    method ``choice[q]`` (the default's γ where absent)."""
    base = f"γ {DEFAULT_GAMMA:g}"
    mixed = {q: per[choice.get(q, base)][q] for q in d["family"]}
    nots = d["with_not"]
    return {"ndcg": mean_of(mixed, list(mixed), "ndcg"), "not_ndcg": mean_of(mixed, nots, "ndcg"),
            "negrecall": mean_of(mixed, nots, "negrecall")}  # fmt: skip


def analyse(d: dict[str, Any]) -> dict[str, Any]:
    """Correlations, uniform γs and every switch on one corpus."""
    per, sig = d["per"], d["signals"]
    qids = sorted(sig)
    base, strong = f"γ {DEFAULT_GAMMA:g}", "γ 3.5"

    def delta(key: str) -> np.ndarray:
        return np.array([per[strong][q][key] - per[base][q][key] for q in qids])

    dn, dr = delta("ndcg"), delta("negrecall")
    traps = ~np.isnan(dr)
    rho = {}
    for s in SIGNALS:
        v = np.nan_to_num(np.array([sig[q][s] for q in qids]))
        rho[s] = {"mean": float(v.mean()), "ndcg": float(spearmanr(v, dn).statistic),
                  "negrecall": float(spearmanr(v[traps], dr[traps]).statistic)}  # fmt: skip
    every = list(d["family"])
    rows = {f"uniform γ {g:g}": _row(per, {q: f"γ {g:g}" for q in every}, d)
            for g in sorted({*GAMMAS, *RULE_GAMMAS})}  # fmt: skip
    rows.update({r: _row(per, {q: r for q in every}, d) for r in RULES})
    for s in SIGNALS:
        v = np.nan_to_num(np.array([sig[q][s] for q in qids]))
        for sign, side in ((1, "highest"), (-1, "lowest")):
            for share in SHARES:
                pick = sign * v >= np.quantile(sign * v, 1 - share)
                for g in STRONG:
                    choice = {q: f"γ {g:g}" for q, p in zip(qids, pick, strict=True) if p}
                    rows[f"γ {g:g} on the {share:.0%} {side} {s}"] = _row(per, choice, d)
    nots = d["with_not"]
    dense = {"ndcg": mean_of(per["dense"], list(d["family"]), "ndcg"),
             "not_ndcg": mean_of(per["dense"], nots, "ndcg"),
             "negrecall": mean_of(per["dense"], nots, "negrecall")}  # fmt: skip
    default = rows[f"uniform γ {DEFAULT_GAMMA:g}"]
    for r in rows.values():
        r["nr_ratio"] = r["negrecall"] / dense["negrecall"]
        removed = (default["negrecall"] - r["negrecall"]) / dense["negrecall"]
        r["cost"] = (default["not_ndcg"] - r["not_ndcg"]) / removed if removed > 0 else float("nan")
    base_ndcg = {q: per[base][q]["ndcg"] for q in nots}
    idx = index_runs(d["dataset"])
    families: dict[str, dict[str, Any]] = {}
    for m in [f"uniform γ {g:g}" for g in sorted({*GAMMAS, *RULE_GAMMAS})] + RULES:
        run = m.removeprefix("uniform ")
        test = paired_test(base_ndcg, {q: per[run][q]["ndcg"] for q in nots})
        rows[m].update(delta=test.delta, p=test.p_value)
        families[m] = family_tests(d["family"], per[run], idx)
    return {"dataset": d["dataset"], "not_queries": len(qids), "dense": dense,
            "correlation": rho, "rows": rows, "families": families}  # fmt: skip


def choose(data: dict[str, Any]) -> dict[str, Any]:
    """Leave one corpus out with ``exact.objective`` among what one query can apply alone:
    the uniform γs and the absolute rules (a switch by quantile needs the other queries)."""
    by = {a["dataset"]: a for a in data["analysis"]}
    names = [m for m in by[REAL[0]]["rows"] if m.startswith("uniform") or m in RULES]
    return leave_one_out(
        names,
        lambda n, m: by[n]["rows"][m],
        lambda n, m: losses(by[n], m, PAPERS),
        lambda n: by[n]["dense"],
        f"uniform γ {DEFAULT_GAMMA:g}",
    )


def to_markdown(data: dict[str, Any]) -> str:
    """The results file."""
    an = data["analysis"]
    lines = [
        "# A NOT whose strength follows the query: signals from the similarity distribution "
        "(`bench/studies/2026-11-27-not-signals/not_signals.py`)",
        "",
        f"- {data['machine_line']}",
        f"- Exact NumPy scoring of every document, the default engine (passages with "
        f"`blend-not-or`, AND texts {DEFAULT_AND_TEXT}/1, `not_context` {DEFAULT_NOT_CONTEXT}), "
        f"{PER_TEMPLATE} derived queries per template, all-MiniLM-L6-v2. The *pool*: the "
        f"{POOL} documents the formula's positive part ranks first. NegRecall@10 / dense: the "
        "goal is ≤ 0.20. *Cost*: NOT queries' nDCG@10 lost per unit of NegRecall@10 / dense "
        f"removed, against the default (γ {DEFAULT_GAMMA:g}).",
        "",
    ]
    if data.get("conclusions"):
        lines += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    lines += ["## Correlation with what a strong NOT changes", "",
              f"Spearman's ρ over a corpus's NOT queries of each signal with the change of γ 3.5 "
              f"against γ {DEFAULT_GAMMA:g}: in nDCG@10 / in NegRecall@10 (queries with traps); "
              "the signal's mean in brackets. A useful signal would rank the queries where the "
              "strong NOT costs little nDCG@10 and removes many traps: opposite signs, on every "
              "corpus.", ""]  # fmt: skip
    rows = [[s, desc, *(f"{a['correlation'][s]['ndcg']:+.2f} / {a['correlation'][s]['negrecall']:+.2f} "
                        f"({a['correlation'][s]['mean']:.2f})" for a in an)]
            for s, desc in SIGNALS.items()]  # fmt: skip
    lines += [md_table(["signal", "what", *(a["dataset"] for a in an)], rows), ""]
    lines += ["## Uniform γ and switches", "",
              "NOT queries: nDCG@10 / NegRecall@10 ÷ dense's / cost. *on the 25% lowest "
              "mean*: the strong γ on the quarter of a corpus's NOT queries with the lowest "
              "signal (a quantile over the corpus: analysis only, one query cannot apply it); "
              "*where the term's pool mean < τ*: each negated term whose mean similarity over "
              "its query's pool is below τ gets the strong γ (an absolute rule one statement "
              "can apply). Switches and rules at least as cheap as the uniform γ of the same "
              "strength on every corpus are marked ✓.", ""]  # fmt: skip
    names = list(an[0]["rows"])
    rows = []
    for m in names:
        cells = [f"{a['rows'][m]['not_ndcg']:.3f} / {a['rows'][m]['nr_ratio']:.2f} / "
                 f"{a['rows'][m]['cost']:.2f}" for a in an]  # fmt: skip
        g = (
            None
            if m.startswith("uniform")
            else "uniform " + m.split(" on the ")[0].split(" where ")[0]
        )
        cheap = g is not None and all(
            a["rows"][m]["cost"] <= a["rows"][g]["cost"] for a in an
        )  # fmt: skip
        rows.append([m + (" ✓" if cheap else ""), *cells])
    lines += [md_table(["NOT", *(a["dataset"] for a in an)], rows), ""]
    lines += ["## NOT families against the methods measured through the index", "",
              "nDCG@10 per NOT template family; the methods of `bench/quality` (through the "
              "index, the same derived queries) significantly above it (Wilcoxon, Holm over "
              "the row's family × method tests), and its change on NOT queries against the "
              "default (Wilcoxon p).", ""]  # fmt: skip
    rows = []
    for m in an[0]["families"]:
        cells = []
        for a in an:
            fam = a["families"][m]
            worse = losses(a, m)
            r = a["rows"][m]
            p = f", p {r['p']:.2g}" if "p" in r and m != f"uniform γ {DEFAULT_GAMMA:g}" else ""
            cells.append(" / ".join(f"{fam[f]['ndcg']:.3f}" for f in NOT_FAMILIES)
                         + f" ({r.get('delta', 0.0):+.3f}{p})"
                         + (f"; **below: {'; '.join(worse)}**" if worse else ""))  # fmt: skip
        rows.append([m, *cells])
    lines += [md_table(["NOT", *(f"{a['dataset']}: {' / '.join(NOT_FAMILIES)}" for a in an)], rows), ""]  # fmt: skip
    lines += ["## Leave one corpus out", "",
              "`exact.objective`'s rule: J = mean nDCG@10 over all queries − 0.25 × the mean "
              "excess of NegRecall@10 / dense over 0.2, NOT queries losing at most 0.01 nDCG@10 "
              "against the default on a tuning corpus; among the uniform γs and the absolute "
              "rules. The second rule also excludes a candidate with a NOT family significantly "
              "below a paper's method on a tuning corpus (as `not_projection.md`).", ""]  # fmt: skip
    for rule, c in data["choice"].items():
        lines += loco_lines(rule, c)
    return "\n".join(lines)


def main() -> None:
    """Run (or ``--render``) and write ``bench/studies/2026-11-27-not-signals/not_signals.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    datasets_main(
        __doc__,
        NAME,
        REAL,
        lambda dsn, n: analyse(run_dataset(dsn, n)),
        choose,
        to_markdown,
        results_dir=RESULTS_DIR,
    )


if __name__ == "__main__":
    main()
