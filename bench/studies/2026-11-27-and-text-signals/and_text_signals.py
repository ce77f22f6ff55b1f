"""Plain conjunctions: can another form of the AND's own text, or a per-query signal, remove
Reuters' loss without giving back the other corpora's gains? Exact scoring.

``bench/quality/summary.md`` leaves one template family of a real corpus significantly below
another method: Reuters' ``AND`` (plain conjunctions), 0.460 against 0.472 for every method
without the AND's own text (ITLR, SQO-rerank, ``product-max``). ``family_losses.md`` showed that
the AND text's weight 4 is the cause and that weight 2 removes the loss, but puts LIMIT-small's
conjunctions significantly below dense retrieval. This script asks whether the AND text can be
used differently, or switched per query, so that both hold. For every plain conjunction of the
four shared datasets (50 derived queries per template; the default layout: every text's best
passage, as the default passage score ``blend-not-or`` scores a plain conjunction), it scores
every document exactly (NumPy) with:

* **the log-linear form of the default**, ``AND(a, b) = a·b·f^w`` (f: the phrase "a and b"),
  for w = 0 … 8 (4 is the default; 0 is how every method without AND texts ranks);
* **other combinations** of the terms and the phrase: the geometric mean g of the terms with
  the phrase added (``g + c·f``), their maximum (``max(g, f)``, a fallback to the phrase),
  Gödel's minimum with the phrase (``min · f^k``), the default's weight only in ANDs of at
  most three operands, and reciprocal rank fusion (k 60 or 10) of the product's ranking with
  the phrase's, or with the default's;
* **other phrases** in the default's form, ``a·b·f'^w`` (w 2 or 4): the terms joined by spaces,
  by commas, after "both" / "all of", and their centroid (the normalised sum of their vectors);
* **dense retrieval** (the question as one string against each document's own vector).

And it computes, per query, six signals that need no labels and that the SQL function could
compute from what one statement already has (the term and phrase vectors, the candidates'
similarities): the mean cosine between the terms, the smallest cosine between the phrase and a
term, the correlation between the phrase and the product over the product's top 200, the
overlap of their top 20, the *coverage* of the phrase's top 10 (its documents' weakest term
against the product's top 10's), and the number of operands. For each, the Spearman correlation
with the phrase's gain on that query (nDCG@10 at w = 4 minus at w = 0) says whether it could
tell the queries where the phrase helps from those where it hurts.

    .venv/bin/python bench/studies/2026-11-27-and-text-signals/and_text_signals.py --dsn DSN       # ~10 min, 2 cores
    .venv/bin/python bench/studies/2026-11-27-and-text-signals/and_text_signals.py --render        # the Markdown from the JSON

``DSN``: the database holding the corpora ``eval_<dataset>`` with passages (as for
``family_losses.py``). Writes ``bench/studies/2026-11-27-and-text-signals/and_text_signals.{json,md}``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib.benchlib import SHARED_DATA, datasets_main, md_table
from bench.lib.exact import REAL, load_corpus, mean_of, per_document, scored_runs
from pglogic.config import DEFAULT_MODEL
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, and_texts
from pglogic.eval.compare import family_of, holm
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.eval.metrics import paired_test
from pglogic.query import terms

RESULTS_DIR = Path(__file__).resolve().parent  # a study keeps its results beside it

NAME = "and_text_signals"
PER_TEMPLATE = 50
K = 100
DATASETS = (*REAL, "limit_small")
WEIGHTS = (0, 1, 2, 3, 4, 6, 8)
DEFAULT = f"a·b·f^{DEFAULT_AND_TEXT}"
PLAIN = "a·b·f^0"
Form = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _weighted(w: int) -> Form:
    return lambda a, f: a.prod(axis=0) * f**w


def _geo(a: np.ndarray) -> np.ndarray:
    return np.exp(np.log(a).mean(axis=0))


def _rrf(*scores: np.ndarray, k: int = 60) -> np.ndarray:
    """Reciprocal rank fusion: Σ 1 / (k + the document's rank by each score)."""
    out = np.zeros(len(scores[0]))
    for s in scores:
        rank = np.empty(len(s))
        rank[np.argsort(-s, kind="stable")] = np.arange(1, len(s) + 1)
        out += 1.0 / (k + rank)
    return out


#: Each form ranks the documents from the terms' similarities ``a`` (one row per operand,
#: clamped to [1e-6, 1]) and the phrase's ``f``.
FORMS: dict[str, Form] = {
    **{f"a·b·f^{w}": _weighted(w) for w in WEIGHTS},
    f"a·b·f^{DEFAULT_AND_TEXT} up to 3 operands": lambda a, f: (
        a.prod(axis=0) * f ** (DEFAULT_AND_TEXT if len(a) <= 3 else 0)
    ),
    "g + 0.5·f": lambda a, f: _geo(a) + 0.5 * f,
    "g + f": lambda a, f: _geo(a) + f,
    "g + 2·f": lambda a, f: _geo(a) + 2 * f,
    "max(g, f)": lambda a, f: np.maximum(_geo(a), f),
    "g·f²": lambda a, f: _geo(a) * f**2,
    "min·f": lambda a, f: a.min(axis=0) * f,
    "min·f²": lambda a, f: a.min(axis=0) * f**2,
    "min + f": lambda a, f: a.min(axis=0) + f,
    "rrf(a·b, f)": lambda a, f: _rrf(a.prod(axis=0), f),
    "rrf(a·b, f), k 10": lambda a, f: _rrf(a.prod(axis=0), f, k=10),
    f"rrf(a·b, a·b·f^{DEFAULT_AND_TEXT})": lambda a, f: _rrf(
        a.prod(axis=0), a.prod(axis=0) * f**DEFAULT_AND_TEXT
    ),
}
#: The same product, ``a·b·f'^w``, with another phrase f' in place of the AND's own text
#: ("a and b and c", how ``pglogic.engine.conjunction`` writes it): the terms joined by spaces,
#: by commas (", " and a last " and "), after "both"/"all of", or the normalised sum of the
#: terms' vectors (*centroid*: cos(d, Σv) / |Σv|, the terms' mean similarity up to a constant,
#: per passage).
PHRASES: dict[str, Callable[[list[str]], str | None]] = {
    "spaces": lambda ts: " ".join(ts),
    "commas": lambda ts: ", ".join(ts[:-1]) + " and " + ts[-1],
    "both / all of": lambda ts: (
        "both " + " and ".join(ts)
        if len(ts) == 2
        else "all of " + ", ".join(ts[:-1]) + " and " + ts[-1]
    ),
    "centroid": lambda ts: None,
}
TEXT_FORMS = tuple(f"a·b·f'^{w}, f' {k}" for k in PHRASES for w in (2, 4))
ALL_FORMS = (*FORMS, *TEXT_FORMS)
SIGNALS = {
    "terms' mean cosine": "the mean cosine between two terms' vectors",
    "phrase–term min cosine": "the smallest cosine between the phrase's vector and a term's",
    "phrase–product correlation": "Pearson correlation of f and the product over the "
    "product's top 200",
    "top-20 overlap": "the share of the product's top 20 in the phrase's top 20",
    "coverage of the phrase's top 10": "the mean weakest term of the phrase's top 10 ÷ "
    "that of the product's top 10",
    "operands": "the number of the AND's operands",
}


def _signals(a: np.ndarray, f: np.ndarray, tv: np.ndarray, fv: np.ndarray) -> dict[str, float]:
    prod, weakest = a.prod(axis=0), a.min(axis=0)
    pairs = [float(tv[i] @ tv[j]) for i in range(len(tv)) for j in range(i + 1, len(tv))]
    top = np.argsort(-prod)[:200]
    tp, tf = np.argsort(-prod)[:10], np.argsort(-f)[:10]
    return {
        "terms' mean cosine": float(np.mean(pairs)),
        "phrase–term min cosine": float((tv @ fv).min()),
        "phrase–product correlation": float(np.corrcoef(prod[top], f[top])[0, 1]),
        "top-20 overlap": len(set(np.argsort(-prod)[:20]) & set(np.argsort(-f)[:20])) / 20,
        "coverage of the phrase's top 10": float(weakest[tf].mean() / weakest[tp].mean()),
        "operands": float(len(tv)),
    }


def run_dataset(dsn: str, name: str) -> dict[str, Any]:
    """Per-query nDCG@10 of every form and of dense retrieval, and every signal, on the
    dataset's plain conjunctions."""
    ds = load_dataset(SHARED_DATA / name)
    ids, docs, passages = load_corpus(dsn, f"eval_{name}")
    queries = [
        q for q in derive_queries(ds, per_template=PER_TEMPLATE).queries
        if family_of(q.tree) == "AND"
    ]  # fmt: skip
    other = [p(terms(q.tree)) for q in queries for p in PHRASES.values()]
    texts = sorted({t for q in queries for t in [*terms(q.tree), *and_texts(q.tree), q.text]}
                   | {t for t in other if t is not None})  # fmt: skip
    vecs = dict(zip(texts, get_query_embedder(DEFAULT_MODEL).embed(texts), strict=True))
    pm = np.concatenate(passages)
    starts = np.cumsum([0] + [len(p) for p in passages[:-1]])
    best = {t: per_document(docs @ vecs[t], pm @ vecs[t], starts)["max"] for t in texts}
    runs: dict[str, dict[str, list[str]]] = {m: {} for m in [*ALL_FORMS, "dense"]}
    signals: dict[str, dict[str, float]] = {}
    for q in queries:
        ts, (phrase,) = terms(q.tree), and_texts(q.tree)
        a = np.clip(np.array([best[t] for t in ts]), 1e-6, 1.0)
        f = np.clip(best[phrase], 1e-6, 1.0)
        for m, form in FORMS.items():
            runs[m][q.id] = [ids[j] for j in np.argsort(-form(a, f), kind="stable")[:K]]
        for k, phrase_of in PHRASES.items():
            text = phrase_of(ts)
            if text is None:
                c = np.sum([vecs[t] for t in ts], axis=0)
                other_f = per_document(docs @ c, pm @ c, starts)["max"] / np.linalg.norm(c)
            else:
                other_f = best[text]
            for w in (2, 4):
                s = _weighted(w)(a, np.clip(other_f, 1e-6, 1.0))
                runs[f"a·b·f'^{w}, f' {k}"][q.id] = [
                    ids[j] for j in np.argsort(-s, kind="stable")[:K]
                ]
        dense = docs @ vecs[q.text]
        runs["dense"][q.id] = [ids[j] for j in np.argsort(-dense, kind="stable")[:K]]
        signals[q.id] = _signals(a, f, np.array([vecs[t] for t in ts]), vecs[phrase])
    out = scored_runs(name, queries, runs)
    out["signals"] = signals
    return out


def analyse(d: dict[str, Any]) -> dict[str, Any]:
    """Each form's mean and its tests against the default, the methods without AND texts and
    dense retrieval (Holm over the dataset's tests); each signal's correlation with the
    phrase's gain; the means by number of operands."""
    per, qids = d["per"], list(d["family"])
    ndcg = {m: {q: per[m][q]["ndcg"] for q in qids} for m in per}
    raw: dict[tuple[str, str], float] = {}
    deltas: dict[tuple[str, str], float] = {}
    for m in ALL_FORMS:
        for ref in (DEFAULT, PLAIN, "dense"):
            if m != ref:
                r = paired_test(ndcg[ref], ndcg[m])
                raw[(m, ref)], deltas[(m, ref)] = r.p_value, r.delta
    adjusted = holm(raw)
    forms = {
        m: {"ndcg": mean_of(per[m], qids, "ndcg"),
            **{ref: {"delta": deltas[(m, ref)], "p_holm": adjusted[(m, ref)]}
               for ref in (DEFAULT, PLAIN, "dense") if (m, ref) in raw}}
        for m in ALL_FORMS
    }  # fmt: skip
    gain = np.array([ndcg[DEFAULT][q] - ndcg[PLAIN][q] for q in qids])
    rho = {}
    for s in SIGNALS:
        values = np.array([d["signals"][q][s] for q in qids])
        rho[s] = {"mean": float(values.mean()),
                  "rho": float(spearmanr(values, gain).statistic)}  # fmt: skip
    by_n: dict[int, dict[str, float]] = {}
    for n in sorted({int(d["signals"][q]["operands"]) for q in qids}):
        mine = [q for q in qids if int(d["signals"][q]["operands"]) == n]
        by_n[n] = {"queries": len(mine),
                   **{m: mean_of(per[m], mine, "ndcg")
                      for m in (PLAIN, "a·b·f^2", DEFAULT, "a·b·f^8", "dense")}}  # fmt: skip
    return {"dataset": d["dataset"], "queries": len(qids),
            "dense": mean_of(per["dense"], qids, "ndcg"), "forms": forms, "signals": rho,
            "by_operands": by_n}  # fmt: skip


def choose(data: dict[str, Any]) -> dict[str, Any]:
    """Leave one real corpus out: the form with the best mean nDCG@10 of plain conjunctions on
    the two tuning corpora, among those significantly below neither the methods without AND
    texts nor dense retrieval on a tuning corpus; then how it does on the held-out corpus and
    on LIMIT-small."""
    by = {a["dataset"]: a for a in data["analysis"]}

    def loses(m: str, n: str) -> bool:
        cell = by[n]["forms"][m]
        return any(ref in cell and cell[ref]["p_holm"] < 0.05 and cell[ref]["delta"] < 0
                   for ref in (PLAIN, "dense"))  # fmt: skip

    out: dict[str, Any] = {}
    for held in REAL:
        tune = [n for n in REAL if n != held]
        kept = [m for m in ALL_FORMS if not any(loses(m, n) for n in tune)]
        best = max(kept, key=lambda m: float(np.mean([by[n]["forms"][m]["ndcg"] for n in tune])))
        out[held] = {"chosen": best, "held_out": by[held]["forms"][best]["ndcg"],
                     "loses_there": loses(best, held), "limit_small": by["limit_small"]["forms"][best]["ndcg"],
                     "loses_on_limit_small": loses(best, "limit_small")}  # fmt: skip
    return out


def _p(cell: dict[str, Any]) -> str:
    mark = "**" if cell["p_holm"] < 0.05 else ""
    return f"{cell['delta']:+.3f} ({mark}p {cell['p_holm']:.2g}{mark})"


def to_markdown(data: dict[str, Any]) -> str:
    """The results file."""
    an = data["analysis"]
    lines = [
        "# Plain conjunctions: other forms of the AND's own text, and per-query signals "
        "(`bench/studies/2026-11-27-and-text-signals/and_text_signals.py`)",
        "",
        f"- {data['machine_line']}",
        f"- Exact NumPy scoring of every document, every text's best passage (how the default "
        f"passage score scores a plain conjunction), {PER_TEMPLATE} derived queries per "
        "template, the template family `AND` only (no NOT, no OR), all-MiniLM-L6-v2. *a·b·f^w*: "
        "the product of the terms' similarities times the AND's phrase (f) at weight w "
        f"(the default: w = {DEFAULT_AND_TEXT}; w = 0 ranks as every method without AND texts); "
        "*a·b·f'^w, f' …*: the same with another phrase f' (the terms joined by spaces, by commas, "
        'after "both" / "all of", or their centroid, the normalised sum of their vectors); '
        "*g*: the terms' geometric mean; *min*: their minimum. Tests: two-sided Wilcoxon over "
        "the dataset's conjunctions, Holm-adjusted over all the dataset's tests; **bold**: "
        "adjusted p < 0.05.",
        "",
    ]
    if data.get("conclusions"):
        lines += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    lines += ["## Forms", "", "nDCG@10 of plain conjunctions; against the default, the form "
              "without AND texts and dense retrieval.", ""]  # fmt: skip
    for a in an:
        rows = [[m, f"{c['ndcg']:.3f}", *(_p(c[r]) if r in c else "" for r in (DEFAULT, PLAIN, "dense"))]
                for m, c in a["forms"].items()]  # fmt: skip
        rows.append(["dense", f"{a['dense']:.3f}", "", "", ""])
        lines += [f"### {a['dataset']} ({a['queries']} conjunctions)", "",
                  md_table(["form", "nDCG@10", f"vs {DEFAULT}", f"vs {PLAIN}", "vs dense"], rows), ""]  # fmt: skip
    lines += ["## By number of operands", "", "nDCG@10 of plain conjunctions with n operands.", ""]
    rows = [[a["dataset"], n, c["queries"], *(f"{c[m]:.3f}" for m in (PLAIN, "a·b·f^2", DEFAULT, "a·b·f^8", "dense"))]
            for a in an for n, c in a["by_operands"].items()]  # fmt: skip
    lines += [md_table(["dataset", "operands", "queries", PLAIN, "a·b·f^2", DEFAULT, "a·b·f^8", "dense"], rows), ""]  # fmt: skip
    lines += ["## Signals", "",
              f"Spearman correlation, over a dataset's conjunctions, of each signal with the "
              f"phrase's gain on the query (nDCG@10 of {DEFAULT} minus {PLAIN}); the signal's "
              "mean in brackets. A signal that could switch the phrase per query would "
              "correlate with the gain, with the same sign, on every dataset.", ""]  # fmt: skip
    rows = [[s, desc, *(f"{a['signals'][s]['rho']:+.2f} ({a['signals'][s]['mean']:.2f})" for a in an)]
            for s, desc in SIGNALS.items()]  # fmt: skip
    lines += [md_table(["signal", "what", *(a["dataset"] for a in an)], rows), ""]
    lines += ["## Leave one corpus out", "",
              "The form with the best mean nDCG@10 of plain conjunctions on the two tuning "
              f"corpora, among those significantly below neither {PLAIN} (the methods without "
              "AND texts) nor dense retrieval on a tuning corpus.", ""]  # fmt: skip
    rows = [[held, c["chosen"], f"{c['held_out']:.3f}", "yes" if c["loses_there"] else "no",
             f"{c['limit_small']:.3f}", "yes" if c["loses_on_limit_small"] else "no"]
            for held, c in data["choice"].items()]  # fmt: skip
    lines += [md_table(["held-out corpus", "chosen on the other two", "nDCG@10 there",
                        "significantly below a reference there", "LIMIT-small",
                        "significantly below a reference on LIMIT-small"], rows), ""]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    """Run (or ``--render``) and write ``bench/studies/2026-11-27-and-text-signals/and_text_signals.{json,md}``.

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
