"""A NOT that also hears the words: a document that mentions the negated phrase is at least c
similar to it. Exact scoring.

Every label-free change to how the negated term's *similarity* is used (``not_signals.md``,
``not_separation.md``) meets the same wall: within a NOT query the similarity ranks the traps
above the answers with an AUC of only 0.75–0.87, so a stronger NOT removes answers with the
traps. ``lexical_quality.md`` showed another kind of evidence: where the label's name is a word
the documents use, 77–93% of the traps *mention* it and only 1–12% of the relevant documents
do, and ``NOT ("w" OR match:"w")`` kept 95–97% of dense retrieval's traps out of those queries.
That OR is crisp: it drops every relevant document that mentions the word. This script
measures a softer form that the default could apply to every negated term without the user
writing ``match:``:

    s'(t, d) = max(s(t, d), c · [d's words match t as a phrase])

(the ``match:`` semantics: ``tsv @@ phraseto_tsquery(config, t)`` in the corpus's lexical
index) for c from 0 (the default) to 1 (the crisp OR), at the default NOT (γ 1.25) and at γ 1.
A mention then costs a document at least the factor (1 − c)^γ; a name that no document
contains (arXiv's category names) changes nothing.

Every document of the real corpora is scored exactly (NumPy, the default engine: passages with
``blend-not-or``, AND texts 4/1, ``not_context`` 0.5), 50 derived queries per template; queries
without NOT do not change. Each variant is tested against the default on the NOT queries
(Wilcoxon), per NOT template family against the methods ``bench/quality`` measured through the
index (``negation.family_tests``, Holm), and chosen leaving one corpus out by
``exact.objective``'s rule (``negation.leave_one_out``). LIMIT-small, outside every fold,
is reported as a check.

    .venv/bin/python bench/quality/not_mention.py --dsn DSN [--only CORPUS]   # ~10 min, 2 cores
    .venv/bin/python bench/quality/not_mention.py --render        # the Markdown from the JSON

``DSN``: the database holding the corpora ``eval_<dataset>`` with passages and a lexical index
(``pglogic corpus lexical``), as for ``not_signals.py``. Writes
``bench/quality/results/not_mention.{json,md}``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
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
    loco_lines,
    losses,
    mentions,
)
from pglogic.engine.conjunction import DEFAULT_AND_TEXT
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT
from pglogic.engine.operators import evaluate_numpy
from pglogic.eval.metrics import paired_test
from pglogic.query import negated_only_terms

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "not_mention"
K = 100
DATASETS = (*REAL, "limit_small")
#: The mention's floor c, and NOT's γ (1.25: the default).
FLOORS = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)
GAMMAS = (1.25, 1.0)
DEFAULT = "c 0, γ 1.25"


def label(c: float, gamma: float) -> str:
    """The variant's name.

    Example:
        >>> label(0.4, 1.25)
        'c 0.4, γ 1.25'
    """
    return f"c {c:g}, γ {gamma:g}"


def run_dataset(dsn: str, name: str) -> dict[str, Any]:
    """Per-query nDCG@10 / NegRecall@10 of every variant (NOT queries) and of dense retrieval;
    how often the traps and the relevant documents mention a negated term."""
    ex = load_exact(dsn, name)
    negs = sorted({t for q in ex.derived.queries for t in negated_only_terms(q.tree)})
    said = mentions(dsn, name, ex.ids, negs)
    where = {d: i for i, d in enumerate(ex.ids)}
    runs: dict[str, dict[str, list[str]]] = {label(c, g): {} for g in GAMMAS for c in FLOORS}
    runs["dense"] = {}
    queries = [q for q in ex.derived.queries if q.n_negations]
    share: dict[str, list[float]] = {"traps": [], "relevant": []}
    for q, tree in zip(ex.derived.queries, ex.trees, strict=True):
        negated = negated_only_terms(q.tree)
        if not negated:
            continue
        raw = ex.similarities(q.tree, tree)
        said_any = np.max([said[t] for t in negated], axis=0)
        for key, docs in (("traps", q.negatives), ("relevant", q.relevant)):
            if rows := [where[d] for d in docs if d in where]:
                share[key].append(float(said_any[rows].mean()))
        for c in FLOORS:
            sims = raw | {t: np.maximum(raw[t], c * said[t]) for t in negated}
            for g in GAMMAS:
                s = evaluate_numpy(tree, sims, f"and=product,or=max,not=complement^{g:g}")
                runs[label(c, g)][q.id] = [ex.ids[j] for j in np.argsort(-s, kind="stable")[:K]]
        dense = ex.docs @ ex.vecs[q.text]
        runs["dense"][q.id] = [ex.ids[j] for j in np.argsort(-dense, kind="stable")[:K]]
    out = scored_runs(name, queries, runs)
    mentioned: dict[str, float] = {
        "negated terms": len(negs),
        "terms some document mentions": int(sum(bool(said[t].any()) for t in negs)),
    }
    for k, v in share.items():
        mentioned[f"{k} that mention a negated term (mean over queries)"] = float(np.mean(v))
    out["mentioned"] = mentioned
    return out


def analyse(d: dict[str, Any]) -> dict[str, Any]:
    """Every variant on the NOT queries (against the default and dense retrieval) and per NOT
    family against the methods measured through the index. ``ndcg`` (for the objective) is
    over the NOT queries: the others do not change."""
    per, nots = d["per"], d["with_not"]
    dense = {"negrecall": mean_of(per["dense"], nots, "negrecall"),
             "not_ndcg": mean_of(per["dense"], nots, "ndcg")}  # fmt: skip
    base = {q: per[DEFAULT][q]["ndcg"] for q in nots}
    idx = index_runs(d["dataset"])
    rows: dict[str, dict[str, float]] = {}
    families: dict[str, Any] = {}
    for m in per:
        if m == "dense":
            continue
        test = paired_test(base, {q: per[m][q]["ndcg"] for q in nots})
        nr = mean_of(per[m], nots, "negrecall")
        rows[m] = {"ndcg": mean_of(per[m], nots, "ndcg"), "not_ndcg": mean_of(per[m], nots, "ndcg"),
                   "negrecall": nr, "nr_ratio": nr / dense["negrecall"], "delta": test.delta,
                   "p": test.p_value}  # fmt: skip
        families[m] = family_tests(d["family"], per[m], idx)
    return {"dataset": d["dataset"], "not_queries": len(nots), "dense": dense, "rows": rows,
            "families": families, "mentioned": d["mentioned"]}  # fmt: skip


def choose(data: dict[str, Any]) -> dict[str, Any]:
    """Leave one real corpus out with ``exact.objective``'s rule (and with no NOT family
    below a paper's method on a tuning corpus); then the choices on LIMIT-small."""
    by = {a["dataset"]: a for a in data["analysis"]}
    names = list(by[REAL[0]]["rows"])
    out = leave_one_out(
        names,
        lambda n, m: by[n]["rows"][m],
        lambda n, m: losses(by[n], m, PAPERS),
        lambda n: by[n]["dense"],
        DEFAULT,
    )
    if "limit_small" in by:
        lim = by["limit_small"]
        for c in out.values():
            picks = sorted({x["chosen"] for x in c["loco"].values()} | {c["on_all"]})
            c["limit_small"] = {m: {**lim["rows"][m], "losses": losses(lim, m)} for m in picks}
    return out


def to_markdown(data: dict[str, Any]) -> str:
    """The results file."""
    an = data["analysis"]
    lines = [
        "# A NOT that also hears the words: a mention of the negated phrase as a floor on its "
        "similarity (`bench/quality/not_mention.py`)",
        "",
        f"- {data['machine_line']}",
        f"- Exact NumPy scoring of every document, the default engine (passages with "
        f"`blend-not-or`, AND texts {DEFAULT_AND_TEXT}/1, `not_context` {DEFAULT_NOT_CONTEXT}), "
        f"{PER_TEMPLATE} derived queries per template, all-MiniLM-L6-v2. *c, γ*: each negated "
        "term's similarity is max(s, c · [the document's words match the term as a phrase]) "
        "(the corpus's `english` lexical index, the `match:` semantics) under NOT (1 − x)^γ; "
        f"`{DEFAULT}` is the engine without the floor (the default before migration 0015). "
        "NegRecall@10 / dense: the goal is ≤ 0.20.",
        "",
    ]
    if data.get("conclusions"):
        lines += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    lines += ["## Who mentions the negated term", ""]
    keys = list(an[0]["mentioned"])
    rows = [[k, *(f"{a['mentioned'][k]:.0%}" if isinstance(a["mentioned"][k], float)
                  else str(a["mentioned"][k]) for a in an)] for k in keys]  # fmt: skip
    lines += [md_table(["", *(a["dataset"] for a in an)], rows), ""]
    lines += ["## NOT queries", "",
              "nDCG@10 (change against the default, Wilcoxon p) / NegRecall@10 ÷ dense's.", ""]  # fmt: skip
    rows = []
    for m in an[0]["rows"]:
        cells = []
        for a in an:
            r = a["rows"][m]
            p = "" if m == DEFAULT else f" ({r['delta']:+.3f}, p {r['p']:.2g})"
            cells.append(f"{r['not_ndcg']:.3f}{p} / {r['nr_ratio']:.2f}")
        rows.append([m, *cells])
    rows.append(["dense", *(f"{a['dense']['not_ndcg']:.3f} / 1.00" for a in an)])
    lines += [md_table(["variant", *(f"{a['dataset']} ({a['not_queries']})" for a in an)], rows), ""]  # fmt: skip
    lines += ["## NOT families against the methods measured through the index", "",
              "nDCG@10 per NOT template family; the methods of `bench/quality` (through the "
              "index, the same derived queries) significantly above it (Wilcoxon, Holm over "
              "the row's family × method tests).", ""]  # fmt: skip
    rows = []
    for m in an[0]["families"]:
        cells = []
        for a in an:
            worse = losses(a, m)
            cells.append(" / ".join(f"{a['families'][m][f]['ndcg']:.3f}" for f in NOT_FAMILIES)
                         + (f"; **below: {'; '.join(worse)}**" if worse else ""))  # fmt: skip
        rows.append([m, *cells])
    lines += [md_table(["variant", *(f"{a['dataset']}: {' / '.join(NOT_FAMILIES)}" for a in an)], rows), ""]  # fmt: skip
    lines += ["## Leave one corpus out", "",
              "`exact.objective`'s rule over the NOT queries: J = mean nDCG@10 − 0.25 × the "
              "mean excess of NegRecall@10 / dense over 0.2, NOT queries losing at most 0.01 "
              "nDCG@10 against the default on a tuning corpus. The second rule also excludes a "
              "variant with a NOT family significantly below a paper's method on a tuning "
              "corpus.", ""]  # fmt: skip
    for rule, c in data["choice"].items():
        lines += loco_lines(rule, c)
        for m, r in c.get("limit_small", {}).items():
            lines += [f"- LIMIT-small, `{m}`: NOT nDCG@10 {r['not_ndcg']:.3f} "
                      f"({r['delta']:+.3f}, p {r['p']:.2g}), NegRecall@10 / dense "
                      f"{r['nr_ratio']:.2f}; NOT families below a method there: "
                      f"{'; '.join(r['losses']) or 'none'}."]  # fmt: skip
        lines += [""]
    return "\n".join(lines)


def main() -> None:
    """Run (or ``--render``) and write ``bench/quality/results/not_mention.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    datasets_main(
        __doc__,
        NAME,
        DATASETS,
        lambda dsn, n: analyse(run_dataset(dsn, n)),
        choose,
        to_markdown,
        results_dir=RESULTS_DIR,
    )


if __name__ == "__main__":
    main()
