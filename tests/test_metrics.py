"""Retrieval metrics (pglogic.eval.metrics) on hand-computed cases; no database."""

from __future__ import annotations

import math

import pytest
import pytrec_eval
from scipy.stats import wilcoxon

from pglogic.eval.metrics import (
    METRICS,
    Paired,
    aggregate,
    evaluate_run,
    kept_traps,
    mean,
    paired_test,
)


def test_metric_names_in_order() -> None:
    assert METRICS == ("ndcg@10", "mrr@10", "map@100", "recall@100", "negrecall@10")


def test_hand_computed_small_case() -> None:
    s = evaluate_run({"q": ["a", "c", "b"]}, {"q": {"a", "b"}})["q"]
    assert set(s) == set(METRICS)
    assert s["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))
    assert s["mrr@10"] == pytest.approx(1.0)
    assert s["map@100"] == pytest.approx((1 + 2 / 3) / 2)
    assert s["recall@100"] == pytest.approx(1.0)
    assert math.isnan(s["negrecall@10"])


def test_first_relevant_at_rank_two() -> None:
    s = evaluate_run({"q": ["x", "a", "y"]}, {"q": {"a", "b", "c"}})["q"]
    assert s["mrr@10"] == pytest.approx(0.5)
    assert s["ndcg@10"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3) + 0.5))
    assert s["map@100"] == pytest.approx((1 / 2) / 3)
    assert s["recall@100"] == pytest.approx(1 / 3)


def test_mrr_is_cut_at_ten() -> None:
    ranked = [f"n{i:02d}" for i in range(10)] + ["rel"]
    s = evaluate_run({"q": ranked}, {"q": {"rel"}})["q"]
    assert s["mrr@10"] == 0.0
    assert s["ndcg@10"] == 0.0
    assert s["recall@100"] == pytest.approx(1.0)
    assert s["map@100"] == pytest.approx(1 / 11)
    # trec_eval's own recip_rank is not cut: it would say 1/11.
    scores = {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}
    trec = pytrec_eval.RelevanceEvaluator({"q": {"rel": 1}}, {"recip_rank"}).evaluate({"q": scores})
    assert trec["q"]["recip_rank"] == pytest.approx(1 / 11)


def test_cutoff_at_one_hundred() -> None:
    ranked = [f"n{i:03d}" for i in range(100)] + ["rel"]
    s = evaluate_run({"q": ranked}, {"q": {"rel"}})["q"]
    assert s["recall@100"] == 0.0
    assert s["map@100"] == 0.0


def test_negrecall() -> None:
    s = evaluate_run({"q": ["a", "c", "b"]}, {"q": {"a", "b"}}, {"q": {"c", "x"}})["q"]
    assert s["negrecall@10"] == pytest.approx(0.5)
    # Relevance metrics are unaffected by the negatives.
    assert s["mrr@10"] == pytest.approx(1.0)
    assert s["recall@100"] == pytest.approx(1.0)


def test_negrecall_is_cut_at_ten() -> None:
    ranked = [f"n{i:02d}" for i in range(10)] + ["trap"]
    s = evaluate_run({"q": ranked}, {"q": {"n00"}}, {"q": {"trap"}})["q"]
    assert s["negrecall@10"] == 0.0


def test_query_without_negatives_is_nan_and_skipped() -> None:
    per_query = evaluate_run(
        {"q1": ["a", "c"], "q2": ["b", "d"], "q3": ["e"]},
        {"q1": {"a"}, "q2": {"b"}, "q3": {"e"}},
        {"q1": {"c"}, "q2": {"zz"}, "q3": set()},
    )
    assert per_query["q1"]["negrecall@10"] == pytest.approx(1.0)
    assert per_query["q2"]["negrecall@10"] == 0.0
    assert math.isnan(per_query["q3"]["negrecall@10"])
    agg = aggregate(per_query)
    assert list(agg) == list(METRICS)
    assert agg["negrecall@10"] == pytest.approx(0.5)
    assert agg["ndcg@10"] == pytest.approx(1.0)
    assert math.isnan(aggregate(per_query, ["q3"])["negrecall@10"])
    assert aggregate(per_query, ["q2", "q3"])["negrecall@10"] == 0.0


def test_empty_and_missing_runs_score_zero() -> None:
    per_query = evaluate_run(
        {"empty": [], "ok": ["a"]},
        {"empty": {"a"}, "missing": {"a"}, "ok": {"a"}},
        {"empty": {"t"}, "missing": {"t"}},
    )
    assert set(per_query) == {"empty", "missing", "ok"}
    for qid in ("empty", "missing"):
        assert per_query[qid] == {m: 0.0 for m in METRICS}
    assert per_query["ok"]["ndcg@10"] == pytest.approx(1.0)
    assert aggregate(per_query)["recall@100"] == pytest.approx(1 / 3)


def test_every_relevant_qid_is_scored_and_others_ignored() -> None:
    per_query = evaluate_run({"q": ["a"], "extra": ["b"]}, {"q": {"a"}, "nojudged": set()})
    assert set(per_query) == {"q", "nojudged"}
    assert per_query["nojudged"]["ndcg@10"] == 0.0


def test_given_order_is_kept_not_doc_id_order() -> None:
    # Reverse alphabetical order: trec_eval would reorder ties by doc id.
    ranked = ["z", "y", "x", "b", "a"]
    s = evaluate_run({"q": ranked}, {"q": {"z"}})["q"]
    assert s["mrr@10"] == pytest.approx(1.0)
    assert s["ndcg@10"] == pytest.approx(1.0)
    s = evaluate_run({"q": ranked}, {"q": {"a"}})["q"]
    assert s["mrr@10"] == pytest.approx(1 / 5)
    assert s["map@100"] == pytest.approx(1 / 5)
    # Relevant after ten reverse-ordered non-relevant documents stays outside the top 10.
    ranked = [f"z{9 - i}" for i in range(10)] + ["a"]
    assert evaluate_run({"q": ranked}, {"q": {"a"}})["q"]["mrr@10"] == 0.0


def test_duplicate_doc_ids_keep_first_position() -> None:
    s = evaluate_run({"q": ["x", "a", "x", "b"]}, {"q": {"b"}})["q"]
    assert s["mrr@10"] == pytest.approx(1 / 3)


def test_mean_skips_nan() -> None:
    assert mean([1.0, math.nan, 0.0]) == pytest.approx(0.5)
    assert math.isnan(mean([]))
    assert math.isnan(mean([math.nan, math.nan]))


def test_aggregate_subset_and_unknown_qids() -> None:
    per_query = {"q1": {"ndcg@10": 1.0}, "q2": {"ndcg@10": 0.0}}
    assert aggregate(per_query) == {"ndcg@10": pytest.approx(0.5)}
    assert aggregate(per_query, ["q1", "nope"]) == {"ndcg@10": 1.0}
    assert math.isnan(aggregate(per_query, [])["ndcg@10"])
    assert aggregate({}) == {}


def test_paired_test_matches_scipy() -> None:
    # Differences b - a: 0.125, 0.25, -0.375, 0.5, 0.625, 0.75 and a zero one (q7).
    a = {"q1": 0.0, "q2": 0.25, "q3": 0.5, "q4": 0.0, "q5": 0.25, "q6": 0.0, "q7": 0.5}
    b = {"q1": 0.125, "q2": 0.5, "q3": 0.125, "q4": 0.5, "q5": 0.875, "q6": 0.75, "q7": 0.5}
    # Unusable pairs: missing on one side, NaN on one side.
    a["only_a"] = 0.0
    b["only_b"] = 1.0
    a["nan"], b["nan"] = math.nan, 0.5
    r = paired_test(a, b)
    qids = [f"q{i}" for i in range(1, 8)]
    expected = wilcoxon(
        [b[q] for q in qids], [a[q] for q in qids], zero_method="wilcox", alternative="two-sided"
    )
    assert isinstance(r, Paired)
    assert r.n == 7
    assert r.mean_a == pytest.approx(sum(a[q] for q in qids) / 7)
    assert r.mean_b == pytest.approx(sum(b[q] for q in qids) / 7)
    assert r.delta == pytest.approx(r.mean_b - r.mean_a)
    assert r.statistic == pytest.approx(float(expected.statistic))
    assert r.p_value == pytest.approx(float(expected.pvalue))
    # q7 is dropped as a zero difference; the only negative one has rank 3 of 6, so W = 3.
    # Exact two-sided p: subsets of {1..6} summing to <= 3 are {}, {1}, {2}, {3}, {1,2}.
    assert r.statistic == pytest.approx(3.0)
    assert r.p_value == pytest.approx(2 * 5 / 64)
    # Two-sided: swapping sides changes the sign of delta only.
    s = paired_test(b, a)
    assert s.delta == pytest.approx(-r.delta)
    assert s.p_value == pytest.approx(r.p_value)


def test_paired_test_degenerate_cases() -> None:
    same = {"q1": 0.2, "q2": 0.4, "q3": 0.6}
    r = paired_test(same, dict(same))
    assert (r.n, r.delta, r.statistic, r.p_value) == (3, 0.0, 0.0, 1.0)
    r = paired_test({"q1": 0.2}, {"q1": 0.9})
    assert (r.n, r.statistic, r.p_value) == (1, 0.0, 1.0)
    assert r.delta == pytest.approx(0.7)
    r = paired_test({"q1": 0.2, "q2": math.nan}, {"q2": 0.3, "q3": 0.1})
    assert (r.n, r.statistic, r.p_value) == (0, 0.0, 1.0)
    assert math.isnan(r.mean_a) and math.isnan(r.mean_b) and math.isnan(r.delta)


def test_kept_traps_counts_only_the_baselines_top_ten_traps() -> None:
    baseline = {
        "q1": ["t1", "a", "t2", "b", "t1"] + [f"x{i}" for i in range(6)] + ["t3"],  # t3: 11th
        "q2": ["a", "b"],
        "q3": ["t9"],
        "q4": ["t1"],
    }
    run = {"q1": ["t2", "t3", "t4"], "q2": ["t1"], "q3": ["t9"]}
    negatives = {
        "q1": {"t1", "t2", "t3", "t4"},
        "q2": {"t1"},
        "q3": {"t9"},
        "q4": {"t1"},
        "q5": set(),
    }
    kept = kept_traps(run, baseline, negatives)
    assert kept["q1"] == pytest.approx(0.5)  # of t1, t2 (t3 is 11th, t4 absent) the run keeps t2
    assert math.isnan(kept["q2"])  # the baseline's top 10 holds no trap
    assert kept["q3"] == 1.0
    assert kept["q4"] == 0.0  # a missing run keeps nothing
    assert "q5" not in kept  # a query without negatives is not scored
    assert kept_traps(baseline, baseline, negatives)["q1"] == 1.0
    # a document ranked twice counts once: t2 is the baseline's 9th distinct document
    twice = {"q": ["t1", "t1", "t1"] + [f"y{i}" for i in range(7)] + ["t2"]}
    assert kept_traps({"q": ["t2"]}, twice, {"q": {"t1", "t2"}}) == {"q": 0.5}
