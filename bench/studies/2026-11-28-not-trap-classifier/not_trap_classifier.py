"""Can every label-free signal measured for NOT, *combined by a classifier trained on labels*,
tell a NOT query's traps from its answers? Exact scoring.

Each earlier bench measured one label-free signal against arXiv's traps (``not_limits``,
``not_signals``, ``not_separation``, ``feedback``, ``not_mention``, ``not_lexical_feedback``):
none lifts the within-query AUC of traps against relevant documents much above the
similarity's 0.75, and ``not_rank_signals``' ridge regression chose a γ per query, not a score per
document. This script asks the question that bounds them all: for each (NOT query, candidate
document), the features below, every one computable without labels; a classifier of *trap* (the
document carries the negated label) against *relevant*, fitted on labels:

* *leave one corpus out*: fitted on the other two real corpora, scored on the third: what a
  default learned here could carry to a corpus it has not seen;
* *within the corpus*: fitted on the same corpus, five folds grouped by the negated term (a term
  is never scored by a model that saw its labels): an upper bound for these features on that
  corpus, which no label-free rule could reach.

Features of a document d for a negated term t (its candidates: the 300 documents the positive
part ranks first, with the query's traps and relevant documents): the similarity as the
default takes it (*s*), its own vector's and its best and mean passage's; whether its words match
t (``not_mention``); s's percentile over the corpus and over the candidates, and its z-score over
the candidates; the positive part's percentile over the candidates; s minus the best positive
term's similarity; the mean s of d's 10 nearest documents; the lexical feedback score m
(``not_lexical_feedback``: corpus, p 10, n 30); the largest cosine between t and a positive term,
and s times it. Models: logistic regression (standardised, classes balanced) and gradient-boosted
trees; each query weighs the same.

On arXiv, whose labels list a paper's primary category first and its cross-lists after, the
traps are also split by whether the negated category is the paper's primary one: how many of each
kind dense retrieval and the default rank in their top 10 (NOT queries with one negated term),
and the similarity's AUC for each kind against the relevant documents.

Reported per corpus: the mean within-query AUC (traps against relevant), and the NOT queries'
nDCG@10 / NegRecall@10 when each candidate's negated similarity is replaced by the model's
probability of *trap* (the most probable, with several negated terms), NOT (1 − p)^γ, ranked
among the candidates; against the default ranked the same way.

    .venv/bin/python bench/studies/2026-11-28-not-trap-classifier/not_trap_classifier.py --dsn DSN     # ~5-15 min, 2 cores
    .venv/bin/python bench/studies/2026-11-28-not-trap-classifier/not_trap_classifier.py --render      # the Markdown from the JSON

``DSN``: the database holding ``eval_<dataset>`` with passages and a lexical index (as for
``not_mention.py``). Writes ``bench/studies/2026-11-28-not-trap-classifier/not_trap_classifier.{json,md}``.
"""

from __future__ import annotations

import gzip
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib.benchlib import SHARED_DATA, machine_line, md_table, results_main
from bench.lib.exact import REAL, mean_of, per_document, scored_runs
from bench.lib.negation import (
    Exact,
    auc,
    lexemes,
    load_exact,
    mentions,
    positive_part,
    signature,
    trap_auc,
)
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, DEFAULT_NOT_MENTION, with_context
from pglogic.engine.operators import evaluate_numpy
from pglogic.query import negated_only_terms, terms

RESULTS_DIR = Path(__file__).resolve().parent  # a study keeps its results beside it

NAME = "not_trap_classifier"
POOL = 300
K = 100
NEIGHBOURS = 10
FEEDBACK = (10, 30)  # not_lexical_feedback's "corpus, p 10, n 30"
FEATURES = (
    "s", "own vector", "best passage", "mean passage", "mention", "corpus percentile",
    "candidates' percentile", "candidates' z", "positive percentile", "s − best positive",
    "neighbours' s", "lexical m", "cos(t, positive)", "s × cos",
)  # fmt: skip
GAMMAS = (1.25, 2.0, 4.0)
MODELS = ("logistic", "trees")


@dataclass
class Query:
    """One NOT query's candidates: their rows in the corpus, the features of each negated term
    (``feats[t]``: candidates × :data:`FEATURES`), the labels, and what ranks them."""

    qid: str
    rows: np.ndarray
    ids: list[str]
    feats: dict[str, np.ndarray]
    trap: np.ndarray
    relevant: np.ndarray
    sims: dict[str, np.ndarray]
    tree: Any
    negated: list[str]
    dense_top: list[str]


def neighbours(docs: np.ndarray, k: int = NEIGHBOURS) -> np.ndarray:
    """Each document's ``k`` nearest other documents (cosine of the unit vectors).

    Example:
        >>> v = np.array([[1, 0], [0.9, 0.1], [0, 1]], np.float32)
        >>> neighbours(v / np.linalg.norm(v, axis=1, keepdims=True), 1).ravel().tolist()
        [1, 0, 1]
    """
    out = np.empty((len(docs), k), dtype=np.int64)
    for a in range(0, len(docs), 2048):
        c = docs[a : a + 2048] @ docs.T
        c[np.arange(len(c)), np.arange(a, a + len(c))] = -np.inf
        out[a : a + len(c)] = np.argsort(-c, axis=1)[:, :k]
    return out


def percentile(values: np.ndarray, among: np.ndarray) -> np.ndarray:
    """The share of ``among`` at or below each of ``values``.

    Example:
        >>> percentile(np.array([0.5, 2.0]), np.array([0.0, 1.0, 2.0, 3.0])).tolist()
        [0.25, 0.75]
    """
    s = np.sort(among)
    return np.searchsorted(s, values, side="right") / len(s)


def load(dsn: str, name: str) -> list[Query]:
    """Every NOT query of ``eval_<name>`` with traps and relevant documents, its candidates and
    their features."""
    ex: Exact = load_exact(dsn, name)
    pairs = [(q, tr) for q, tr in zip(ex.derived.queries, ex.trees, strict=True) if q.n_negations]
    texts = sorted({t for q, _ in pairs for t in terms(q.tree)})
    x, own = lexemes(dsn, name, ex.ids, texts)
    negs = sorted({t for q, _ in pairs for t in negated_only_terms(q.tree)})
    said = mentions(dsn, name, ex.ids, negs)
    nbr = neighbours(ex.docs)
    where = {d: i for i, d in enumerate(ex.ids)}
    everyone = np.arange(len(ex.ids))
    out = []
    for q, tree in pairs:
        rel = [where[d] for d in q.relevant if d in where]
        trap = [where[d] for d in q.negatives if d in where]
        negated = negated_only_terms(q.tree)
        if not (rel and trap and negated):
            continue
        sims = ex.similarities(q.tree, tree)
        pos = positive_part(tree, sims, negated)
        pool = np.argsort(-pos, kind="stable")[:POOL]
        rows = np.unique(np.r_[pool, trap, rel])
        positives = [t for t in terms(q.tree) if t not in negated and t in ex.vecs]
        projected = with_context(q.tree, {t: ex.vecs[t] for t in terms(tree)}, DEFAULT_NOT_CONTEXT)
        best_pos = np.max([sims[p] for p in positives], axis=0) if positives else 0 * pos
        leave_out = set().union(*(own[p] for p in positives)) if positives else set()
        feats = {}
        for t in negated:
            s = sims[t]
            parts = per_document(ex.docs @ projected[t], ex.pm @ projected[t], ex.starts)
            top = everyone[np.argsort(-s, kind="stable")[: FEEDBACK[0]]]
            sig = signature(x, top, everyone, FEEDBACK[1], leave_out)
            m = (x @ sig) / max(sig.sum(), 1e-9)
            cos = max((float(ex.vecs[t] @ ex.vecs[p]) for p in positives), default=0.0)
            sp = s[pool]
            feats[t] = np.column_stack([
                s[rows], parts["documents"][rows], parts["max"][rows], parts["mean"][rows],
                said[t][rows], percentile(s[rows], s), percentile(s[rows], sp),
                (s[rows] - sp.mean()) / max(sp.std(), 1e-9), percentile(pos[rows], pos[pool]),
                s[rows] - np.asarray(best_pos)[rows], s[nbr[rows]].mean(axis=1), m[rows],
                np.full(len(rows), cos), s[rows] * cos,
            ]).astype(np.float32)  # fmt: skip
        dense = ex.docs @ ex.vecs[q.text]
        out.append(Query(
            q.id, rows, [ex.ids[j] for j in rows], feats, np.isin(rows, trap), np.isin(rows, rel),
            {t: v[rows] for t, v in sims.items()}, tree, negated,
            [ex.ids[j] for j in np.argsort(-dense, kind="stable")[:K]],
        ))  # fmt: skip
    return out


def primary_split(dsn: str, name: str = "arxiv_0704") -> dict[str, Any]:
    """Traps whose negated category is the paper's primary one (its first label) against those
    that carry it as a cross-list only: how many dense retrieval and the default rank in their top
    10, and the default's negated similarity's AUC for each kind against the relevant documents
    (NOT queries with one negated term, both kinds of document)."""
    with gzip.open(SHARED_DATA / name / "corpus.jsonl.gz", "rt") as f:
        first = {r["id"]: r["labels"][0] for r in map(json.loads, f) if r["labels"]}
    ex = load_exact(dsn, name)
    negs = sorted({t for q in ex.derived.queries for t in negated_only_terms(q.tree)})
    said = mentions(dsn, name, ex.ids, negs)
    where = {d: i for i, d in enumerate(ex.ids)}
    top10 = {m: {"primary": 0, "cross-list": 0} for m in ("dense", "default")}
    aucs: dict[str, list[float]] = {"primary": [], "cross-list": []}
    count = {"primary": 0, "cross-list": 0}
    n = 0
    for q, tree in zip(ex.derived.queries, ex.trees, strict=True):
        negated = negated_only_terms(q.tree)
        if len(negated) != 1 or not (q.negatives and q.relevant):
            continue
        n += 1
        t = negated[0]
        kind = {d: "primary" if first[d] == q.term_labels[t] else "cross-list" for d in q.negatives}
        sims = ex.similarities(q.tree, tree)
        sims[t] = np.maximum(sims[t], DEFAULT_NOT_MENTION * said[t])
        default = evaluate_numpy(tree, sims, "and=product,or=max,not=complement^1.25")
        dense = ex.docs @ ex.vecs[q.text]
        for m, v in (("dense", dense), ("default", default)):
            for j in np.argsort(-v, kind="stable")[:10]:
                if ex.ids[j] in kind:
                    top10[m][kind[ex.ids[j]]] += 1
        rel = [where[d] for d in q.relevant]
        for k in aucs:
            grp = [where[d] for d in q.negatives if kind[d] == k]
            count[k] += len(grp)
            if grp:
                aucs[k].append(trap_auc(sims[t], grp, rel))
    return {"dataset": name, "queries": n, "traps": count, "top10": top10,
            "auc": {k: float(np.mean(v)) for k, v in aucs.items()}}  # fmt: skip


def training_rows(queries: list[Query]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, labels (1: trap) and weights (each query sums to 1) of the labelled
    candidates; for a document, the negated term it is most similar to."""
    xs, ys, ws = [], [], []
    for q in queries:
        keep = q.trap | q.relevant
        stack = np.stack([q.feats[t] for t in q.negated])  # terms × candidates × features
        pick = np.argmax(stack[:, :, 0], axis=0)
        f = stack[pick, np.arange(stack.shape[1])][keep]
        xs.append(f)
        ys.append(q.trap[keep].astype(int))
        ws.append(np.full(int(keep.sum()), 1.0 / int(keep.sum())))
    return np.concatenate(xs), np.concatenate(ys), np.concatenate(ws)


def fit(kind: str, queries: list[Query]) -> Any:
    """A classifier of traps against relevant documents, fitted on ``queries``."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y, w = training_rows(queries)
    w = w * np.where(y == 1, 0.5 / w[y == 1].sum(), 0.5 / w[y == 0].sum())  # classes balanced
    if kind == "logistic":
        model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
        model.fit(x, y, logisticregression__sample_weight=w)
    else:
        model = HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_depth=4,
                                               l2_regularization=1.0, random_state=0)  # fmt: skip
        model.fit(x, y, sample_weight=w)
    return model


def trap_probability(model: Any, q: Query) -> dict[str, np.ndarray]:
    """Each negated term's probability of *trap* for every candidate of ``q``."""
    return {t: model.predict_proba(q.feats[t])[:, 1] for t in q.negated}


def score(queries: list[Query], probs: dict[str, dict[str, np.ndarray]] | None,
          name: str) -> dict[str, Any]:  # fmt: skip
    """AUC, nDCG@10 and NegRecall@10 of ``probs`` (None: the default's floored similarity)."""
    runs: dict[str, dict[str, list[str]]] = {
        m: {} for m in (*(f"γ {g:g}" for g in GAMMAS), "dense")
    }
    aucs = []
    for q in queries:
        if probs is None:
            neg = {
                t: np.maximum(q.sims[t], DEFAULT_NOT_MENTION * q.feats[t][:, 4]) for t in q.negated
            }
        else:
            neg = probs[q.qid]
        best = np.max([neg[t] for t in q.negated], axis=0)
        keep = q.trap | q.relevant
        aucs.append(auc(best[keep], q.trap[keep]))
        for g in GAMMAS:
            s = evaluate_numpy(q.tree, q.sims | neg, f"and=product,or=max,not=complement^{g:g}")
            order = np.argsort(-s, kind="stable")[:K]
            runs[f"γ {g:g}"][q.qid] = [q.ids[j] for j in order]
        runs["dense"][q.qid] = q.dense_top
    fake = [_Labels(q) for q in queries]
    sc = scored_runs(name, fake, runs)
    qids = sc["with_not"]
    out: dict[str, Any] = {"auc": float(np.mean(aucs))}
    for m, per in sc["per"].items():
        out[m] = {"ndcg": mean_of(per, qids, "ndcg"), "negrecall": mean_of(per, qids, "negrecall")}
    return out


class _Labels:
    """What ``scored_runs`` reads of a derived query."""

    def __init__(self, q: Query) -> None:
        ids = q.ids
        self.id = q.qid
        self.tree = q.tree
        self.relevant = {ids[j] for j in np.flatnonzero(q.relevant)}
        self.negatives = {ids[j] for j in np.flatnonzero(q.trap)}
        self.n_negations = len(q.negated)


def folds(queries: list[Query], n: int = 5) -> list[list[int]]:
    """``n`` folds of the query numbers, grouped by the set of negated terms.

    Example:
        >>> class Q: pass
        >>> qs = [Q() for _ in range(4)]
        >>> for q, ns in zip(qs, (["a"], ["b"], ["a"], ["c"])): q.negated = ns
        >>> folds(qs, 2)
        [[0, 2, 3], [1]]
    """
    groups = sorted({tuple(q.negated) for q in queries})
    which = {g: i % n for i, g in enumerate(groups)}
    return [[i for i, q in enumerate(queries) if which[tuple(q.negated)] == f] for f in range(n)]


def evaluate(data: dict[str, list[Query]]) -> dict[str, Any]:
    """Per corpus: the default, and each model left one corpus out and within the corpus."""
    out: dict[str, Any] = {}
    for name, queries in data.items():
        res: dict[str, Any] = {"queries": len(queries), "default": score(queries, None, name)}
        others = [q for n, qs in data.items() if n != name for q in qs]
        for kind in MODELS:
            model = fit(kind, others)
            res[f"{kind}, other corpora"] = score(
                queries, {q.qid: trap_probability(model, q) for q in queries}, name
            )
            probs: dict[str, dict[str, np.ndarray]] = {}
            for f in folds(queries):
                inside = set(f)
                m = fit(kind, [q for i, q in enumerate(queries) if i not in inside])
                probs |= {queries[i].qid: trap_probability(m, queries[i]) for i in f}
            res[f"{kind}, this corpus (5 folds)"] = score(queries, probs, name)
        single = {}
        for j, feat in enumerate(FEATURES):
            single[feat] = float(np.mean([
                auc(np.max([q.feats[t][:, j] for t in q.negated], axis=0)[q.trap | q.relevant],
                    q.trap[q.trap | q.relevant]) for q in queries
            ]))  # fmt: skip
        res["feature_auc"] = single
        out[name] = res
        print(name, json.dumps({k: v for k, v in res.items() if k != "feature_auc"}), flush=True)
    return out


def to_markdown(data: dict[str, Any]) -> str:
    """The results page."""
    res = data["results"]
    names = list(res)
    lines = [
        "# NOT: every label-free signal, combined by a classifier trained on labels "
        "(`bench/studies/2026-11-28-not-trap-classifier/not_trap_classifier.py`)",
        "",
        f"{data['machine_line']}. Every document scored exactly (NumPy) at the default engine, "
        f"50 derived queries per template, all-MiniLM-L6-v2; NOT queries with both traps and "
        f"relevant documents; candidates: the {POOL} documents the positive part ranks first, "
        "with the query's traps and relevant documents, ranked among themselves. *AUC*: the mean "
        "over queries of the ROC AUC of the query's traps against its relevant documents. "
        "*default*: the negated similarity with the mention floor, as the default engine takes "
        "it; the models replace it by their probability of *trap*. NegRecall@10 / dense: the "
        "goal is ≤ 0.20.",
        "",
    ]
    if data.get("conclusions"):
        lines += ["## Conclusions", "", data["conclusions"].strip(), ""]
    lines += ["## Within-query AUC, and the NOT queries ranked", ""]
    head = ["corpus", "score", "AUC", *(f"γ {g:g}: nDCG@10 / NegRecall@10 / dense" for g in GAMMAS)]
    rows = []
    for n in names:
        dense = res[n]["default"]["dense"]["negrecall"]
        for k, v in res[n].items():
            if not isinstance(v, dict) or "auc" not in v:
                continue
            cells = [f"{v[f'γ {g:g}']['ndcg']:.3f} / {v[f'γ {g:g}']['negrecall'] / dense:.2f}"
                     for g in GAMMAS]  # fmt: skip
            rows.append([n, k, f"{v['auc']:.3f}", *cells])
    lines.append(md_table(head, rows))
    lines += ["", "Dense retrieval over the whole corpus: nDCG@10 / NegRecall@10 on the same "
              "queries:", ""]  # fmt: skip
    for n in names:
        d = res[n]["default"]["dense"]
        lines.append(f"- {n} ({res[n]['queries']} queries): {d['ndcg']:.3f} / {d['negrecall']:.3f}")
    if p := data.get("primary"):
        d, t = p["top10"]["dense"], p["top10"]["default"]
        lines += [
            "",
            f"## {p['dataset']}: traps of the primary category and of a cross-list",
            "",
            f"NOT queries with one negated term: {p['queries']}. A trap is *primary* when the "
            "negated category is the paper's primary one (its first label), *cross-list* when "
            "the paper carries it as a cross-list only.",
            "",
            md_table(
                ["traps", "all", "in dense's top 10", "in the default's top 10", "kept out",
                 "AUC against the relevant documents"],
                [[k, p["traps"][k], d[k], t[k], f"{1 - t[k] / d[k]:.0%}" if d[k] else "",
                  f"{p['auc'][k]:.3f}"] for k in ("primary", "cross-list")],
            ),
        ]  # fmt: skip
    lines += ["", "## Each feature alone: mean within-query AUC", ""]
    lines.append(md_table(["feature", *names],
                          [[f, *(f"{res[n]['feature_auc'][f]:.3f}" for n in names)]
                           for f in FEATURES]))  # fmt: skip
    return "\n".join(lines) + "\n"


def run(dsn: str) -> dict[str, Any]:
    """Load the real corpora of ``dsn``, fit and score every model; the arXiv split."""
    loaded = {n: load(dsn, n) for n in REAL}
    return {"machine_line": machine_line(), "results": evaluate(loaded),
            "primary": primary_split(dsn)}  # fmt: skip


def main() -> None:
    """The command line (see the module docstring)."""
    results_main(NAME, __doc__, run, to_markdown, dsn=True, results_dir=RESULTS_DIR)


if __name__ == "__main__":
    main()
