"""A NOT whose strength follows the query, told by what a strong NOT would do to the ranking:
exact scoring.

``bench/studies/2026-11-27-not-signals/not_signals.md`` looked for a label-free signal in the negated term's similarity
over the candidates; the best (its mean) correlates with what a strong NOT changes at |ρ| ≤ 0.22
and moves too few traps for the goal. This script asks the ranking instead. For every NOT query
it ranks every document at the default's γ (1.25) and at stronger γs (2, 3.5, 6, 10; one γ for
every NOT of the query) and compares the top 10s, without labels:

* **overlap**: how many of the default's top 10 the strong NOT keeps in its top 10 (÷ 10);
* **keep**: the mean score of the formula's positive part over the strong NOT's top 10, as a
  share of the same over the default's (how much of what the user asked for it gives up);
* **coherence**: the change in the mean pairwise cosine of the top 10's document vectors;
* beside them, ``not_signals``' best signal: the negated term's mean similarity over the pool.

Then: Spearman's ρ of each signal with what γ 10 changes (nDCG@10, NegRecall@10); *rules* one
statement could apply (the strongest γ of a set whose overlap, or keep, is at least τ; the
default's γ otherwise); a *learned* choice (ridge regressions of each γ's gain in
nDCG@10 − NegRecall@10 on the signals, fitted on two corpora, applied to the third); the
*oracle* (each query's best γ by its labels, the upper bound); where the default's remaining
NegRecall@10 comes from (queries with one trap, and what uniform γ 10 cannot remove); the NOT
families against the methods measured through the index (``negation.family_tests``); and
the rule chosen leaving one corpus out (``exact.objective``: J, NOT queries may lose at most
0.01 nDCG@10 against the default).

    .venv/bin/python bench/studies/2026-11-27-not-rank-signals/not_rank_signals.py --dsn DSN [--only CORPUS]   # ~8 min, 1 core; ~5 with the corpora split over two --only runs
    .venv/bin/python bench/studies/2026-11-27-not-rank-signals/not_rank_signals.py --render [--conclusions FILE]

``DSN``: the database holding the corpora ``eval_<dataset>`` with passages (as for
``not_signals.py``). Writes ``bench/studies/2026-11-27-not-rank-signals/not_rank_signals.{json,md}``.
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
    NOT_FAMILIES,
    PAPERS,
    PER_TEMPLATE,
    family_tests,
    index_runs,
    leave_one_out,
    load_exact,
    losses,
    positive_part,
)
from pglogic.engine.conjunction import DEFAULT_AND_TEXT
from pglogic.engine.operators import evaluate_numpy
from pglogic.eval.metrics import paired_test
from pglogic.query import negated_only_terms

RESULTS_DIR = Path(__file__).resolve().parent  # a study keeps its results beside it

NAME = "not_rank_signals"
K = 100
POOL = 100
TOP = 10
BASE = 1.25
STRONG = (2.0, 3.5, 6.0, 10.0)
#: Rules: (signal, the strong γs it may pick, thresholds).
RULE_SETS = (
    ("overlap", (3.5,), (0.7, 0.8, 0.9)),
    ("overlap", (6.0,), (0.6, 0.7, 0.8, 0.9)),
    ("overlap", (10.0,), (0.6, 0.7, 0.8, 0.9)),
    ("overlap", (3.5, 10.0), (0.7, 0.8, 0.9)),
    ("keep", (3.5,), (0.9, 0.94, 0.96, 0.98)),
    ("keep", (6.0,), (0.86, 0.9, 0.94, 0.96)),
    ("keep", (10.0,), (0.86, 0.9, 0.92, 0.94, 0.96)),
    ("keep", (3.5, 10.0), (0.9, 0.92, 0.94, 0.96)),
)
SIGNALS = {
    "overlap": "the share of the default's top 10 that γ 10 keeps in its top 10",
    "keep": "the positive part's mean score over γ 10's top 10 ÷ over the default's",
    "coherence": "the change of the top 10's mean pairwise cosine, γ 10 against the default",
    "pool mean": "the negated terms' lowest mean similarity over the pool (`not_signals`)",
}
RIDGE = 10.0


def run_label(g: float) -> str:
    """The run of uniform γ ``g``."""
    return f"γ {g:g}"


def rule_label(signal: str, gammas: tuple[float, ...], tau: float) -> str:
    """The label of a rule: the strongest of ``gammas`` whose ``signal`` is ≥ ``tau``."""
    return f"the strongest γ of {'/'.join(f'{g:g}' for g in gammas)} with {signal} ≥ {tau:g}"


def _coherence(x: np.ndarray) -> float:
    g = x @ x.T
    return float((g.sum() - np.trace(g)) / (len(x) * (len(x) - 1)))


def run_dataset(dsn: str, name: str) -> dict[str, Any]:
    """Every query's ranking at each γ and dense retrieval's (queries without NOT as the
    default ranks them); each NOT query's signals per strong γ."""
    ex = load_exact(dsn, name)
    derived, ids, docs, vecs = ex.derived, ex.ids, ex.docs, ex.vecs
    gammas = (BASE, *STRONG)
    runs: dict[str, dict[str, list[str]]] = {run_label(g): {} for g in gammas}
    runs["dense"] = {}
    signals: dict[str, dict[str, dict[str, float]]] = {}
    for q, tree in zip(derived.queries, ex.trees, strict=True):
        sims = ex.similarities(q.tree, tree)
        negated = negated_only_terms(q.tree)
        dense = docs @ vecs[q.text]
        runs["dense"][q.id] = [ids[j] for j in np.argsort(-dense, kind="stable")[:K]]
        tops = {}
        for g in gammas if negated else (BASE,):
            s = evaluate_numpy(tree, sims, f"and=product,or=max,not=complement^{g:g}")
            tops[g] = np.argsort(-s, kind="stable")[:K]
        for g in gammas:
            runs[run_label(g)][q.id] = [ids[j] for j in tops.get(g, tops[BASE])]
        if not negated:
            continue
        pos = positive_part(tree, sims, negated)
        pool = np.argsort(-pos, kind="stable")[:POOL]
        base = tops[BASE][:TOP]
        sig: dict[str, dict[str, float]] = {}
        for g in STRONG:
            top = tops[g][:TOP]
            sig[run_label(g)] = {
                "overlap": len(set(base) & set(top)) / TOP,
                "keep": float(pos[top].mean() / max(float(pos[base].mean()), 1e-9)),
                "coherence": _coherence(docs[top]) - _coherence(docs[base]),
            }
        sig["pool mean"] = {
            "value": min(float(np.clip(sims[t], 0.0, 1.0)[pool].mean()) for t in negated)
        }
        signals[q.id] = sig
    out = scored_runs(name, derived.queries, runs)
    out["signals"] = signals
    out["traps"] = {q.id: len(q.negatives) for q in derived.queries if q.negatives}
    return out


def _signal(sig: dict[str, dict[str, float]], name: str) -> float:
    """One query's signal ``name`` (against γ 10 where it compares rankings)."""
    return sig["pool mean"]["value"] if name == "pool mean" else sig[run_label(10.0)][name]


def rule_choice(
    signals: dict[str, dict[str, dict[str, float]]],
    signal: str,
    gammas: tuple[float, ...],
    tau: float,
) -> dict[str, str]:
    """Each NOT query's run under a rule: the strongest of ``gammas`` whose ``signal`` is at
    least ``tau``, else the default's γ."""
    out = {}
    for q, sig in signals.items():
        ok = [g for g in gammas if sig[run_label(g)][signal] >= tau]
        out[q] = run_label(max(ok) if ok else BASE)
    return out


def _features(signals: dict[str, dict[str, dict[str, float]]], qids: list[str]) -> np.ndarray:
    cols = [(run_label(g), s) for g in STRONG for s in ("overlap", "keep", "coherence")]
    return np.array(
        [[signals[q][g][s] for g, s in cols] + [signals[q]["pool mean"]["value"]] for q in qids]
    )


def _gain(per: dict[str, dict[str, dict[str, float]]], run: str, qids: list[str]) -> np.ndarray:
    """Each query's nDCG@10 − NegRecall@10 (0 without traps) at ``run`` minus the default's."""
    base = per[run_label(BASE)]

    def value(m: dict[str, float]) -> float:
        nr = m["negrecall"]
        return m["ndcg"] - (0.0 if nr != nr else nr)

    return np.array([value(per[run][q]) - value(base[q]) for q in qids])


def learned(by: dict[str, dict[str, Any]], held: str) -> dict[str, str]:
    """The learned choice on ``held``: per strong γ, a ridge regression of the gain on the
    signals (standardised), fitted on the other real corpora; the γ of the highest predicted
    gain where it is positive (``by``: each corpus's per-query data)."""
    xs: list[np.ndarray] = []
    ys: dict[float, list[np.ndarray]] = {g: [] for g in STRONG}
    for n in REAL:
        if n == held:
            continue
        qids = sorted(by[n]["signals"])
        xs.append(_features(by[n]["signals"], qids))
        for g in STRONG:
            ys[g].append(_gain(by[n]["per"], run_label(g), qids))
    x = np.vstack(xs)
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    ridge = z.T @ z + RIDGE * np.eye(z.shape[1])
    w = {g: np.linalg.solve(ridge, z.T @ np.concatenate(ys[g])) for g in STRONG}
    qids = sorted(by[held]["signals"])
    zh = np.hstack([(_features(by[held]["signals"], qids) - mu) / sd, np.ones((len(qids), 1))])
    pred = np.stack([zh @ w[g] for g in STRONG], 1)
    return {q: run_label(STRONG[int(np.argmax(r))]) if r.max() > 0 else run_label(BASE)
            for q, r in zip(qids, pred, strict=True)}  # fmt: skip


def oracle(d: dict[str, Any]) -> dict[str, str]:
    """Each NOT query's best γ by its labels (nDCG@10 − NegRecall@10): the upper bound."""
    out = {}
    for q in d["signals"]:
        gains = {run_label(g): float(_gain(d["per"], run_label(g), [q])[0]) for g in STRONG}
        best = max(gains, key=lambda r: gains[r])
        out[q] = best if gains[best] > 0 else run_label(BASE)
    return out


def _row(
    d: dict[str, Any], choice: dict[str, str], idx: dict[str, dict[str, float]]
) -> dict[str, Any]:
    """All-query nDCG@10, NOT queries' nDCG@10 (Δ and Wilcoxon p against the default) and
    NegRecall@10 ÷ dense's when each NOT query is ranked by ``choice``; its NOT families
    against the methods through the index (``idx``: ``negation.index_runs``)."""
    per, nots = d["per"], d["with_not"]
    base = run_label(BASE)
    mixed = {q: per[choice.get(q, base)][q] for q in d["family"]}
    test = paired_test({q: per[base][q]["ndcg"] for q in nots}, {q: mixed[q]["ndcg"] for q in nots})
    negrecall = mean_of(mixed, nots, "negrecall")
    return {"ndcg": mean_of(mixed, list(mixed), "ndcg"), "not_ndcg": mean_of(mixed, nots, "ndcg"),
            "negrecall": negrecall, "nr_ratio": negrecall / _dense(d)["negrecall"],
            "delta": test.delta, "p": test.p_value,
            "families": family_tests(d["family"], mixed, idx)}  # fmt: skip


def _dense(d: dict[str, Any]) -> dict[str, float]:
    """Dense retrieval's NegRecall@10 over the NOT queries."""
    return {"negrecall": mean_of(d["per"]["dense"], d["with_not"], "negrecall")}


def analyse(d: dict[str, Any]) -> dict[str, Any]:
    """Correlations, uniform γs, rules and the oracle on one corpus; where the default's
    NegRecall@10 comes from."""
    per, sig = d["per"], d["signals"]
    qids = sorted(sig)
    strong = run_label(10.0)
    dn = np.array([per[strong][q]["ndcg"] - per[run_label(BASE)][q]["ndcg"] for q in qids])
    dr = np.array([per[strong][q]["negrecall"] - per[run_label(BASE)][q]["negrecall"]
                   for q in qids])  # fmt: skip
    traps = ~np.isnan(dr)
    rho = {}
    for s in SIGNALS:
        v = np.array([_signal(sig[q], s) for q in qids])
        rho[s] = {"mean": float(v.mean()), "ndcg": float(spearmanr(v, dn).statistic),
                  "negrecall": float(spearmanr(v[traps], dr[traps]).statistic)}  # fmt: skip
    idx = index_runs(d["dataset"])
    rows = {f"uniform {run_label(g)}": _row(d, {q: run_label(g) for q in qids}, idx)
            for g in (BASE, *STRONG)}  # fmt: skip
    for signal, gammas, taus in RULE_SETS:
        for tau in taus:
            choice = rule_choice(sig, signal, gammas, tau)
            rows[rule_label(signal, gammas, tau)] = _row(d, choice, idx)
    rows["oracle (labels)"] = _row(d, oracle(d), idx)
    nots = d["with_not"]
    base = per[run_label(BASE)]
    nr = {q: base[q]["negrecall"] for q in nots if base[q]["negrecall"] == base[q]["negrecall"]}
    total = sum(nr.values())
    one = sum(v for q, v in nr.items() if d["traps"][q] == 1)
    kept = sum(v for q, v in nr.items() if per[strong][q]["negrecall"] >= v > 0)
    sources = {"queries": len(nr), "with a trap in the top 10": sum(v > 0 for v in nr.values()),
               "one trap": sum(d["traps"][q] == 1 for q in nr),
               "share from one-trap queries": one / total if total else 0.0,
               "share γ 10 keeps": kept / total if total else 0.0}  # fmt: skip
    return {"dataset": d["dataset"], "not_queries": len(qids), "dense": _dense(d),
            "correlation": rho, "rows": rows, "sources": sources,
            "data": _kept(d)}  # fmt: skip


def _kept(d: dict[str, Any]) -> dict[str, Any]:
    """What :func:`choose` needs of the per-query data (the learned choice is fitted across
    corpora): every run on the NOT queries, the default's on all, rounded."""
    nots, base = set(d["with_not"]), run_label(BASE)
    per = {m: {q: {k: round(v, 4) for k, v in r.items()} for q, r in rows.items()
               if q in nots or m == base} for m, rows in d["per"].items()}  # fmt: skip
    signals = {q: {g: {k: round(v, 4) for k, v in s.items()} for g, s in sig.items()}
               for q, sig in d["signals"].items()}  # fmt: skip
    return {"family": d["family"], "with_not": d["with_not"], "per": per, "signals": signals}


def choose(data: dict[str, Any]) -> dict[str, Any]:
    """Leave one corpus out with ``exact.objective`` among the uniform γs and the rules, with
    and without the family rule of ``not_projection.md``; the learned choice per held-out
    corpus (it is fitted on the other two; the per-query data it needs are then dropped)."""
    by = {a["dataset"]: a for a in data["analysis"]}
    out = leave_one_out(
        [m for m in by[REAL[0]]["rows"] if not m.startswith("oracle")],
        lambda n, m: _brief(by[n]["rows"][m]),
        lambda n, m: _losses(by[n], m),
        lambda n: by[n]["dense"],
        f"uniform {run_label(BASE)}",
    )
    if all("data" in a for a in by.values()):
        raw = {n: a.pop("data") | {"dataset": n} for n, a in by.items()}
        out["learned"] = {}
        for held in REAL:
            r = _row(raw[held], learned(raw, held), index_runs(held))
            out["learned"][held] = _brief(r) | {"losses_there": _fam_losses(r)}
    else:  # --render: the per-query data were dropped once the learned choice was made
        out["learned"] = data["choice"]["learned"]
    return out


def _brief(r: dict[str, Any]) -> dict[str, float]:
    return {k: r[k] for k in ("ndcg", "not_ndcg", "negrecall", "nr_ratio", "delta", "p")}


def _fam_losses(r: dict[str, Any]) -> list[str]:
    return losses({"families": {"x": r["families"]}}, "x", PAPERS)


def _losses(a: dict[str, Any], m: str) -> list[str]:
    return _fam_losses(a["rows"][m])


def _cell(r: dict[str, Any]) -> str:
    p = f", p {r['p']:.2g}" if r["delta"] else ""
    return f"{r['not_ndcg']:.3f} ({r['delta']:+.3f}{p}) / {r['nr_ratio']:.2f}"


def to_markdown(data: dict[str, Any]) -> str:
    """The results file."""
    an = data["analysis"]
    lines = [
        "# A NOT whose strength follows the query, told by the ranking "
        "(`bench/studies/2026-11-27-not-rank-signals/not_rank_signals.py`)",
        "",
        f"- {data['machine_line']}",
        f"- Exact NumPy scoring of every document, the default engine (passages with "
        f"`blend-not-or`, AND texts {DEFAULT_AND_TEXT}/1, `not_context` 0.5), {PER_TEMPLATE} "
        f"derived queries per template, all-MiniLM-L6-v2; one γ for every NOT of a query. "
        f"NegRecall@10 / dense: the goal is ≤ 0.20. The *pool*: the {POOL} documents the "
        "formula's positive part ranks first.",
        "",
    ]
    if data.get("conclusions"):
        lines += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    lines += ["## Correlation with what γ 10 changes", "",
              f"Spearman's ρ over a corpus's NOT queries of each signal with the change of γ 10 "
              f"against γ {BASE:g}: in nDCG@10 / in NegRecall@10 (queries with traps); the "
              "signal's mean in brackets. A useful signal has opposite signs in the two, on "
              "every corpus.", ""]  # fmt: skip
    rows = [[s, desc, *(f"{a['correlation'][s]['ndcg']:+.2f} / "
                        f"{a['correlation'][s]['negrecall']:+.2f} ({a['correlation'][s]['mean']:.2f})"
                        for a in an)] for s, desc in SIGNALS.items()]  # fmt: skip
    lines += [md_table(["signal", "what", *(a["dataset"] for a in an)], rows), ""]
    lines += ["## Where the default's NegRecall@10 comes from", "",
              "NOT queries with traps; those with a trap in the default's top 10; those with a "
              "single trap document, and their share of the default's NegRecall@10 (a query "
              "with one trap in its top 10 counts 1); the share of it that uniform γ 10 "
              "cannot remove.", ""]  # fmt: skip
    keys = list(an[0]["sources"])
    rows = [[a["dataset"], *(f"{a['sources'][k]:.0%}" if isinstance(a["sources"][k], float)
                             else str(a["sources"][k]) for k in keys)] for a in an]  # fmt: skip
    lines += [md_table(["corpus", *keys], rows), ""]
    lines += ["## Uniform γ, rules and the oracle", "",
              "NOT queries: nDCG@10 (Δ against the default, Wilcoxon p) / NegRecall@10 ÷ "
              "dense's; **below**: NOT families significantly below a paper's method measured "
              "through the index (Holm).", ""]  # fmt: skip
    rows = []
    for m in an[0]["rows"]:
        cells = []
        for a in an:
            worse = _losses(a, m)
            cells.append(
                _cell(a["rows"][m]) + (f"; **below: {'; '.join(worse)}**" if worse else "")
            )
        rows.append([m, *cells])
    lines += [md_table(["NOT", *(a["dataset"] for a in an)], rows), ""]
    base = f"uniform {run_label(BASE)}"
    fams = "; ".join(
        a["dataset"] + " " + " / ".join(f"{a['rows'][base]['families'][f]['ndcg']:.3f}"
                                        for f in NOT_FAMILIES) for a in an)  # fmt: skip
    lines += [f"The default's {' / '.join(NOT_FAMILIES)}: {fams}.", ""]
    lines += ["## Leave one corpus out", "",
              "`exact.objective`'s rule (J = mean nDCG@10 over all queries − 0.25 × the mean "
              "excess of NegRecall@10 / dense over 0.2; NOT queries may lose at most 0.01 "
              "nDCG@10 against the default on a tuning corpus) among the uniform γs and the "
              "rules; the second also excludes a candidate with a NOT family significantly "
              "below a paper's method on a tuning corpus. *Learned*: the ridge choice fitted on "
              "the other two corpora.", ""]  # fmt: skip
    ch = data["choice"]
    for rule in ("J", "J, no NOT family below a paper's method"):
        c = ch[rule]
        rows = [[held, x["chosen"], _cell(x["held_out"]), "; ".join(x["losses_there"]) or "none"]
                for held, x in c["loco"].items()]  # fmt: skip
        lines += [f"**{rule}**", "", md_table(["held-out corpus", "chosen on the other two",
                  "NOT nDCG@10 / NegRecall@10 ÷ dense there", "NOT families below a paper's "
                  "method there"], rows), "", f"Chosen on all three: `{c['on_all']}`.", ""]  # fmt: skip
    rows = [[held, _cell(x), "; ".join(x["losses_there"]) or "none"]
            for held, x in ch["learned"].items()]  # fmt: skip
    lines += ["**Learned**", "", md_table(["held-out corpus", "NOT nDCG@10 / NegRecall@10 ÷ "
              "dense there", "NOT families below a paper's method there"], rows), ""]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    """Run (or ``--render``) and write ``bench/studies/2026-11-27-not-rank-signals/not_rank_signals.{json,md}``.

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
