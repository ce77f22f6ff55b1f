"""Retrieval metrics for ``pglogic eval``: per-query scores, means and paired significance tests.

All metrics use binary relevance and are computed by ``pytrec_eval`` (the Python binding of
trec_eval, package ``pytrec-eval-terrier``); no formula is written out here. The significance
test is ``scipy.stats.wilcoxon``.

- ``ndcg@10``: normalised discounted cumulative gain of the top 10 (trec ``ndcg_cut.10``).
- ``mrr@10``: reciprocal rank of the first relevant document in the top 10, else 0 (trec
  ``recip_rank`` on the run cut to 10 documents, since trec_eval's ``recip_rank`` is not cut).
- ``map@100``: average precision over the top 100 (trec ``map_cut.100``).
- ``recall@100``: share of the relevant documents found in the top 100 (trec ``recall.100``).
- ``negrecall@10``: share of the query's negatives (trap documents that should be excluded)
  found in the top 10, as in BoolQuestions; **lower is better**. It is trec ``recall.10`` with
  the negatives as qrels, and NaN for queries without negatives (means skip NaN).
- ``kept_dense_traps@10`` (:func:`kept_traps`, added by ``pglogic eval``): of the traps that
  dense retrieval ranks in its top 10, the share a method's top 10 keeps; **lower is better**.
  Unlike NegRecall@10 it does not count the traps dense retrieval never reaches.

Runs are ranked lists of document ids, best first. trec_eval re-sorts a run by score (ties
broken by document id), so each list is given scores that keep its order exactly.

Example:
    >>> scores = evaluate_run({"q1": ["a", "c", "b"]}, {"q1": {"a", "b"}}, {"q1": {"c", "x"}})
    >>> round(scores["q1"]["map@100"], 4), scores["q1"]["negrecall@10"]
    (0.8333, 0.5)
    >>> aggregate(scores)["recall@100"]
    1.0
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pytrec_eval
from scipy.stats import wilcoxon

METRICS: tuple[str, ...] = ("ndcg@10", "mrr@10", "map@100", "recall@100", "negrecall@10")
"""Public metric names, in report order."""

DEPTH = 100
"""Only the first ``DEPTH`` documents of a run are evaluated (the deepest cut-off used)."""

# public name -> (trec measure requested, key in pytrec_eval's result)
_RELEVANT_MEASURES = {
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10"),
    "map@100": ("map_cut.100", "map_cut_100"),
    "recall@100": ("recall.100", "recall_100"),
}
_MRR = ("recip_rank", "recip_rank")
_NEGRECALL = ("recall.10", "recall_10")


def _scored(ranked: Sequence[str], depth: int) -> dict[str, float]:
    """Turn a ranked list into trec scores that keep its order (first occurrence wins).

    Example:
        >>> _scored(["b", "a", "b", "c"], 2)
        {'b': 2.0, 'a': 1.0}
    """
    docs: list[str] = []
    seen: set[str] = set()
    for doc in ranked:
        if doc not in seen:
            seen.add(doc)
            docs.append(doc)
            if len(docs) == depth:
                break
    n = len(docs)
    return {doc: float(n - rank) for rank, doc in enumerate(docs)}


def _qrels(judged: Mapping[str, Collection[str]]) -> dict[str, dict[str, int]]:
    """Binary qrels for the queries that have at least one judged document.

    Example:
        >>> _qrels({"q1": ["a"], "q2": []})
        {'q1': {'a': 1}}
    """
    return {qid: {doc: 1 for doc in docs} for qid, docs in judged.items() if docs}


def _trec(
    qrels: dict[str, dict[str, int]],
    run: dict[str, dict[str, float]],
    measures: Mapping[str, tuple[str, str]],
) -> dict[str, dict[str, float]]:
    """Evaluate ``run`` against ``qrels``; every qrels query gets every measure (0.0 if unranked).

    pytrec_eval silently drops queries missing from the run, so those are filled with 0.0.

    Example:
        >>> _trec({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": {"a": 1.0}}, {"r": ("recall.10", "recall_10")})
        {'q1': {'r': 1.0}, 'q2': {'r': 0.0}}
    """
    if not qrels:
        return {}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {trec for trec, _ in measures.values()})
    found = evaluator.evaluate({qid: run.get(qid, {}) for qid in qrels})
    return {
        qid: {name: float(found.get(qid, {}).get(key, 0.0)) for name, (_, key) in measures.items()}
        for qid in qrels
    }


def evaluate_run(
    run: Mapping[str, Sequence[str]],
    relevant: Mapping[str, Collection[str]],
    negatives: Mapping[str, Collection[str]] | None = None,
) -> dict[str, dict[str, float]]:
    """Score every query in ``relevant`` on all :data:`METRICS`.

    Args:
        run: query id -> ranked document ids, best first (only the first 100 matter).
        relevant: query id -> relevant document ids; defines which queries are scored.
        negatives: query id -> trap document ids for ``negrecall@10``; queries without
            negatives get NaN there.

    Returns:
        query id -> {metric name -> value}. A query with an empty or missing run scores 0.0.

    Example:
        >>> s = evaluate_run({"q1": ["a", "c", "b"], "q2": []}, {"q1": {"a", "b"}, "q2": {"z"}})
        >>> s["q1"]["mrr@10"], s["q1"]["recall@100"], s["q2"]["ndcg@10"], s["q2"]["negrecall@10"]
        (1.0, 1.0, 0.0, nan)
    """
    deep = {qid: _scored(docs, DEPTH) for qid, docs in run.items()}
    top10 = {qid: _scored(docs, 10) for qid, docs in run.items()}
    qrels = _qrels(relevant)
    by_relevant = _trec(qrels, deep, _RELEVANT_MEASURES)
    by_mrr = _trec(qrels, top10, {"mrr@10": _MRR})
    neg_qrels = _qrels({qid: (negatives or {}).get(qid, ()) for qid in relevant})
    by_negatives = _trec(neg_qrels, deep, {"negrecall@10": _NEGRECALL})

    out: dict[str, dict[str, float]] = {}
    for qid in relevant:
        scores = {name: 0.0 for name in METRICS}
        scores.update(by_relevant.get(qid, {}))
        scores.update(by_mrr.get(qid, {}))
        scores["negrecall@10"] = by_negatives.get(qid, {}).get("negrecall@10", math.nan)
        out[qid] = scores
    return out


KEPT_TRAPS = "kept_dense_traps@10"
"""Per-query metric of :func:`kept_traps`: the share of the trap documents a baseline ranks in
its top 10 that a run also ranks in its top 10 (**lower is better**; NaN when the baseline's top
10 holds no trap)."""


def kept_traps(
    run: Mapping[str, Sequence[str]],
    baseline: Mapping[str, Sequence[str]],
    negatives: Mapping[str, Collection[str]],
) -> dict[str, float]:
    """For each query with negatives, the share of the traps in ``baseline``'s top 10 that
    ``run``'s top 10 keeps (:data:`KEPT_TRAPS`).

    NegRecall@10 counts every trap of a top 10; this counts only those the baseline ranks there.
    The two differ when a run finds more of the formula's positive part than the baseline does:
    the traps among those extra documents were never in the baseline's top 10. A document
    ranked twice counts once, at its first place (as in :func:`evaluate_run`).

    Example:
        >>> kept_traps({"q": ["t1", "a", "t3"]}, {"q": ["t1", "t2", "b"]}, {"q": {"t1", "t2", "t3"}})
        {'q': 0.5}
        >>> kept_traps({"q": ["a"]}, {"q": ["b"]}, {"q": {"t"}})
        {'q': nan}
    """
    out: dict[str, float] = {}
    for qid, traps in negatives.items():
        if not traps:
            continue
        shown = [d for d in list(dict.fromkeys(baseline.get(qid, ())))[:10] if d in traps]
        kept = set(list(dict.fromkeys(run.get(qid, ())))[:10])
        out[qid] = sum(d in kept for d in shown) / len(shown) if shown else math.nan
    return out


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean that skips NaN; NaN when no value is left.

    Example:
        >>> mean([1.0, float("nan"), 0.0])
        0.5
        >>> mean([float("nan")])
        nan
    """
    kept = [v for v in values if not math.isnan(v)]
    return math.fsum(kept) / len(kept) if kept else math.nan


def aggregate(
    per_query: Mapping[str, Mapping[str, float]], qids: Iterable[str] | None = None
) -> dict[str, float]:
    """Mean of each metric over ``qids`` (default: all queries), skipping NaN.

    Metrics are those of :data:`METRICS` first, then any others found, in first-seen order.
    Queries in ``qids`` that are not in ``per_query`` are ignored.

    Example:
        >>> per_query = {"q1": {"ndcg@10": 1.0, "negrecall@10": float("nan")},
        ...              "q2": {"ndcg@10": 0.5, "negrecall@10": 0.25}}
        >>> aggregate(per_query)
        {'ndcg@10': 0.75, 'negrecall@10': 0.25}
        >>> aggregate(per_query, ["q1"])
        {'ndcg@10': 1.0, 'negrecall@10': nan}
    """
    chosen = [per_query[q] for q in (per_query if qids is None else qids) if q in per_query]
    names = [m for m in METRICS if any(m in s for s in per_query.values())]
    for scores in per_query.values():
        names.extend(m for m in scores if m not in names)
    return {name: mean(s[name] for s in chosen if name in s) for name in names}


@dataclass(frozen=True)
class Paired:
    """Outcome of :func:`paired_test` comparing system A with system B on one metric.

    Attributes:
        n: number of queries scored (non-NaN) by both systems.
        mean_a: mean of A over those queries.
        mean_b: mean of B over those queries.
        delta: ``mean_b - mean_a``.
        statistic: Wilcoxon signed-rank statistic (0.0 in degenerate cases).
        p_value: two-sided p-value (1.0 in degenerate cases).

    Example:
        >>> Paired(n=2, mean_a=0.5, mean_b=0.75, delta=0.25, statistic=0.0, p_value=0.5).delta
        0.25
    """

    n: int
    mean_a: float
    mean_b: float
    delta: float
    statistic: float
    p_value: float


def paired_test(a: Mapping[str, float], b: Mapping[str, float]) -> Paired:
    """Two-sided Wilcoxon signed-rank test of B against A over queries scored by both.

    Queries missing from either side or NaN on either side are left out. With fewer than two
    usable pairs, or when every difference is zero, the test is skipped: ``statistic`` is 0.0
    and ``p_value`` is 1.0. Zero differences are dropped (``zero_method="wilcox"``).

    Example:
        >>> a = {"q1": 0.1, "q2": 0.5, "q3": 0.3, "q4": 0.2, "q5": 0.9, "q6": 0.4}
        >>> b = {"q1": 0.3, "q2": 0.6, "q3": 0.2, "q4": 0.5, "q5": 1.0, "q6": 0.8}
        >>> r = paired_test(a, b)
        >>> r.n, round(r.delta, 4), r.statistic, r.p_value
        (6, 0.1667, 2.0, 0.125)
        >>> paired_test({"q1": 0.5}, {"q1": 0.7}).p_value
        1.0
    """
    qids = sorted(q for q in a.keys() & b.keys() if not (math.isnan(a[q]) or math.isnan(b[q])))
    xs = [a[q] for q in qids]
    ys = [b[q] for q in qids]
    mean_a, mean_b = mean(xs), mean(ys)
    statistic, p_value = 0.0, 1.0
    if len(qids) >= 2 and any(x != y for x, y in zip(xs, ys, strict=True)):
        result = wilcoxon(ys, xs, zero_method="wilcox", alternative="two-sided")
        statistic, p_value = float(result.statistic), float(result.pvalue)
        if math.isnan(p_value):
            statistic, p_value = 0.0, 1.0
    return Paired(
        n=len(qids),
        mean_a=mean_a,
        mean_b=mean_b,
        delta=mean_b - mean_a,
        statistic=statistic,
        p_value=p_value,
    )
