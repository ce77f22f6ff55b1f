"""Score calibration (pure math and pair sampling; no database, no embedding model)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pglogic.eval.calibrate import Calibration, fit_corpus, fit_logistic, label_pairs


def _logistic_sample(
    tau: float, lam: float, n: int, seed: int, lo: float = 0.0, hi: float = 0.8
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    s = rng.uniform(lo, hi, n)
    p = 1.0 / (1.0 + np.exp(-(s - tau) * lam))
    return s, rng.random(n) < p


# --- fit_logistic ---------------------------------------------------------------------------


@pytest.mark.parametrize(("tau", "lam"), [(0.45, 15.0), (0.3, 40.0), (0.55, 8.0)])
def test_recovers_known_parameters_without_balance(tau: float, lam: float) -> None:
    s, y = _logistic_sample(tau, lam, 20_000, seed=1)
    cal = fit_logistic(s, y, balance=False)
    assert cal.method == "logistic"
    assert cal.n_pairs == 20_000
    assert cal.tau == pytest.approx(tau, abs=0.02)
    assert cal.lam == pytest.approx(lam, rel=0.1)


def test_balance_shifts_tau_by_the_log_odds_of_the_base_rate() -> None:
    # Rare positives: tau = 0.6 on s ~ U(0, 0.8).
    tau, lam = 0.6, 20.0
    s, y = _logistic_sample(tau, lam, 40_000, seed=2)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    assert n_pos < n_neg / 2
    plain = fit_logistic(s, y, balance=False)
    balanced = fit_logistic(s, y, balance=True)
    assert plain.tau == pytest.approx(tau, abs=0.02)
    # Equal class weights add log(n_neg / n_pos) to the intercept; the slope is unchanged.
    assert balanced.tau < plain.tau
    assert balanced.tau == pytest.approx(tau - math.log(n_neg / n_pos) / lam, abs=0.02)
    assert balanced.lam == pytest.approx(plain.lam, rel=0.05)
    assert balanced.auc == plain.auc


def test_balance_makes_the_fit_invariant_to_duplicating_negatives() -> None:
    s, y = _logistic_sample(0.5, 12.0, 4_000, seed=3)
    neg = ~y
    s3 = np.concatenate([s, s[neg], s[neg]])
    y3 = np.concatenate([y, y[neg], y[neg]])
    a, b = fit_logistic(s, y), fit_logistic(s3, y3)
    assert b.tau == pytest.approx(a.tau, abs=1e-4)
    assert b.lam == pytest.approx(a.lam, rel=1e-3)
    # Without balance, three times as many negatives push tau up.
    assert fit_logistic(s3, y3, balance=False).tau > fit_logistic(s, y, balance=False).tau + 0.02


def test_separable_pairs_give_a_finite_steep_fit() -> None:
    cal = fit_logistic([0.1, 0.2, 0.3, 0.4], [False, False, True, True])
    assert cal.tau == pytest.approx(0.25, abs=1e-6)
    assert math.isfinite(cal.lam) and cal.lam > 50
    assert cal.auc == 1.0


def test_fit_is_deterministic() -> None:
    s, y = _logistic_sample(0.4, 10.0, 2_000, seed=4)
    assert fit_logistic(s, y) == fit_logistic(s.copy(), y.copy())


def test_error_no_positives() -> None:
    with pytest.raises(ValueError) as e:
        fit_logistic([0.1, 0.2, 0.3], [False, False, False])
    assert str(e.value) == "fit_logistic: no positive pairs (every relevant is False)"


def test_error_no_negatives() -> None:
    with pytest.raises(ValueError) as e:
        fit_logistic([0.1, 0.2, 0.3], [1, 1, 1])
    assert str(e.value) == "fit_logistic: no negative pairs (every relevant is True)"


def test_error_negative_slope() -> None:
    with pytest.raises(ValueError) as e:
        fit_logistic([0.1, 0.2, 0.3, 0.4, 0.5], [1, 1, 0, 1, 0])
    msg = str(e.value)
    assert msg.startswith("fit_logistic: similarity does not predict relevance (fitted slope w = -")
    assert msg.endswith(" <= 0)")


def test_error_constant_similarity() -> None:
    with pytest.raises(ValueError) as e:
        fit_logistic([0.3, 0.3, 0.3], [1, 0, 0])
    assert str(e.value) == (
        "fit_logistic: similarity does not predict relevance (all similarities are equal)"
    )


def test_error_bad_shapes_and_values() -> None:
    with pytest.raises(ValueError, match="1-D arrays of equal length"):
        fit_logistic([0.1, 0.2], [True])
    with pytest.raises(ValueError, match="1-D arrays of equal length"):
        fit_logistic([[0.1, 0.2]], [[True, False]])
    with pytest.raises(ValueError, match="must be finite"):
        fit_logistic([0.1, float("nan")], [True, False])


def test_auc_hand_case() -> None:
    # Positives 0.2, 0.5, 0.9; negatives 0.1, 0.5, 0.6, 0.7.
    # Pairs won: 0.2 beats 1; 0.5 beats 1 and ties 1 (½); 0.9 beats 4 → 6.5 of 12.
    cal = fit_logistic(
        [0.2, 0.5, 0.9, 0.1, 0.5, 0.6, 0.7], [True, True, True, False, False, False, False]
    )
    assert cal.auc == pytest.approx(6.5 / 12)


# --- Calibration ----------------------------------------------------------------------------


def test_truth_monotone_bounded_and_half_at_tau() -> None:
    cal = Calibration(tau=0.35, lam=25.0, method="logistic", n_pairs=10, auc=0.8)
    s = np.linspace(-1.0, 1.0, 401)
    t = cal.truth(s)
    assert t.dtype == np.float64 and t.shape == s.shape
    assert np.all(np.diff(t) > 0)
    assert np.all((t > 0) & (t < 1))
    assert float(cal.truth(0.35)) == 0.5


def test_truth_is_stable_for_large_arguments() -> None:
    cal = Calibration(tau=0.0, lam=1e6, method="logistic", n_pairs=2, auc=1.0)
    with np.errstate(all="raise"):
        t = cal.truth([-1.0, -1e-3, 1e-3, 1.0, -1e300, 1e300])
    assert np.all(np.isfinite(t))
    assert t.tolist()[0] == 0.0 and t.tolist()[3] == 1.0
    assert t.tolist()[4:] == [0.0, 1.0]
    assert 0.0 <= t[1] < 1e-300 and 1.0 - 1e-15 < t[2] <= 1.0


def test_truth_keeps_shape() -> None:
    cal = Calibration(tau=0.3, lam=10.0, method="corpus", n_pairs=0, auc=None)
    assert cal.truth(np.zeros((2, 3))).shape == (2, 3)
    assert cal.truth(0.3).shape == ()


def test_round_trip_through_dict_and_json() -> None:
    for cal in (
        Calibration(tau=0.4123, lam=17.5, method="logistic", n_pairs=2200, auc=0.91),
        Calibration(tau=0.2, lam=33.0, method="corpus", n_pairs=0, auc=None),
    ):
        d = cal.to_dict()
        assert set(d) == {"tau", "lam", "method", "n_pairs", "auc"}
        assert Calibration.from_dict(d) == cal
        assert Calibration.from_dict(json.loads(json.dumps(d))) == cal


def test_round_trip_of_fitted_values() -> None:
    s, y = _logistic_sample(0.45, 15.0, 1_000, seed=5)
    cal = fit_logistic(s, y)
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal


def test_from_dict_rejects_missing_and_unknown_keys() -> None:
    with pytest.raises(ValueError) as e:
        Calibration.from_dict({"tau": 0.1, "lam": 2.0, "method": "corpus", "n_pairs": 0, "x": 1})
    assert str(e.value) == ("Calibration.from_dict: missing keys ['auc'], unknown keys ['x']")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lam": 0.0}, "lam must be finite and > 0"),
        ({"lam": -3.0}, "lam must be finite and > 0"),
        ({"tau": float("nan")}, "tau must be finite"),
        ({"method": "isotonic"}, "method must be one of"),
        ({"n_pairs": -1}, "n_pairs must be >= 0"),
        ({"auc": 1.5}, r"auc must be in \[0, 1\]"),
    ],
)
def test_calibration_validates(kwargs: dict[str, object], match: str) -> None:
    base: dict[str, object] = {
        "tau": 0.3,
        "lam": 10.0,
        "method": "logistic",
        "n_pairs": 5,
        "auc": 0.7,
    }
    with pytest.raises(ValueError, match=match):
        Calibration(**{**base, **kwargs})  # type: ignore[arg-type]


# --- fit_corpus -----------------------------------------------------------------------------


def test_fit_corpus_on_a_synthetic_sample() -> None:
    rng = np.random.default_rng(6)
    # Mostly unrelated documents plus a thin tail of related ones, like MiniLM similarities.
    s = np.concatenate([rng.normal(0.08, 0.06, 19_800), rng.normal(0.45, 0.08, 200)])
    cal = fit_corpus(s)
    assert cal.method == "corpus" and cal.n_pairs == 0 and cal.auc is None
    assert cal.tau == pytest.approx(float(np.quantile(s, 0.99)), abs=1e-12)
    assert float(cal.truth(np.quantile(s, 0.99))) == pytest.approx(0.5)
    assert float(cal.truth(np.median(s))) < 0.05
    assert float(cal.truth(s.max())) > 0.9
    # The documented rule: the two anchors hold, and at least one of them exactly.
    med, top = np.quantile(s, [0.5, 0.999])
    t_med, t_top = float(cal.truth(med)), float(cal.truth(top))
    assert t_med <= 1 / (1 + math.exp(4)) + 1e-12
    assert t_top >= 1 / (1 + math.exp(-4)) - 1e-12
    assert min(abs(t_med - 1 / (1 + math.exp(4))), abs(t_top - 1 / (1 + math.exp(-4)))) < 1e-9


def test_fit_corpus_top_fraction_and_matrix_input() -> None:
    rng = np.random.default_rng(7)
    m = rng.normal(0.1, 0.05, (20, 1000))  # many terms × sampled documents, pooled
    cal = fit_corpus(m, top_fraction=0.05)
    assert cal.tau == pytest.approx(float(np.quantile(m.ravel(), 0.95)), abs=1e-12)
    assert float(cal.truth(np.median(m))) < 0.05
    assert float(cal.truth(m.max())) > 0.9


def test_fit_corpus_errors() -> None:
    with pytest.raises(ValueError, match=r"top_fraction must be in \(0, 0.5\)"):
        fit_corpus(np.linspace(0, 1, 1000), top_fraction=0.0)
    with pytest.raises(ValueError) as e:
        fit_corpus(np.linspace(0, 1, 50))
    assert (
        str(e.value) == "fit_corpus: need at least 100 similarities for top_fraction=0.01, got 50"
    )
    with pytest.raises(ValueError, match="too concentrated"):
        fit_corpus(np.full(1000, 0.2))
    with pytest.raises(ValueError, match="must be finite"):
        fit_corpus(np.r_[np.linspace(0, 1, 1000), np.inf])


# --- label_pairs ----------------------------------------------------------------------------

# Ten documents in 3-D (unit rows); labels: "cat" on 0-3, "dog" on 3-6, "fish" on nothing.
_DOCS = np.array(
    [
        [1.0, 0.0, 0.0],
        [0.8, 0.6, 0.0],
        [0.6, 0.8, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.6, 0.8],
        [0.0, 0.0, 1.0],
        [0.0, -1.0, 0.0],
        [-1.0, 0.0, 0.0],
        [0.0, 0.0, -1.0],
        [-0.6, -0.8, 0.0],
    ]
)
_LABELS: list[set[str]] = [
    {"cat"},
    {"cat"},
    {"cat"},
    {"cat", "dog"},
    {"dog"},
    {"dog"},
    {"dog"},
    set(),
    {"bird"},
    set(),
]
_TERMS = {"a cat": [3.0, 0.0, 0.0], "a dog": [0.0, 2.0, 0.0], "a fish": [0.0, 0.0, 1.0]}
_LABEL_OF_TERM = {"a cat": "cat", "a dog": "dog", "a fish": "fish"}


def test_label_pairs_exact_counts_and_membership() -> None:
    s, rel = label_pairs(
        {"a cat": _TERMS["a cat"]},
        _DOCS,
        _LABELS,
        _LABEL_OF_TERM,
        negatives_per_positive=1,
        seed=0,
        max_positives_per_label=3,
    )
    assert s.dtype == np.float64 and rel.dtype == np.bool_
    assert rel.tolist() == [True] * 3 + [False] * 3
    # "a cat" is (1, 0, 0): similarity = first coordinate; rows with distinct values only.
    cat_docs = {0, 1, 2, 3}
    pos, neg = s[rel], s[~rel]
    allowed_pos = {float(_DOCS[i, 0]) for i in cat_docs}
    assert set(pos.tolist()) <= allowed_pos and len(set(pos.tolist())) == 3
    assert all(x in {float(_DOCS[i, 0]) for i in range(10) if i not in cat_docs} for x in neg)


def test_label_pairs_every_positive_carries_the_label() -> None:
    s, rel = label_pairs(
        {"a dog": _TERMS["a dog"]}, _DOCS, _LABELS, _LABEL_OF_TERM, negatives_per_positive=1
    )
    # dog: docs 3-6 are the 4 positives (all taken, in index order); 4 negatives out of 6.
    assert rel.tolist() == [True] * 4 + [False] * 4
    sims = _DOCS @ np.array([0.0, 1.0, 0.0])
    assert np.allclose(s[rel], sims[[3, 4, 5, 6]])
    non_dog = [float(sims[i]) for i in range(10) if "dog" not in _LABELS[i]]
    for x in s[~rel].tolist():
        assert any(math.isclose(x, y) for y in non_dog)
        non_dog.remove(next(y for y in non_dog if math.isclose(x, y)))  # each drawn once


def test_label_pairs_by_index_with_distinct_similarities() -> None:
    # A term whose similarity to every document is distinct identifies each sampled row.
    rng = np.random.default_rng(0)
    n, d = 60, 8
    docs = rng.normal(size=(n, d))
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    labels = [{"x"} if i % 5 == 0 else {"y"} for i in range(n)]  # 12 with "x"
    v = rng.normal(size=d)
    sims = docs @ (v / np.linalg.norm(v))
    assert len(np.unique(np.round(sims, 12))) == n
    s, rel = label_pairs(
        {"the x": v},
        docs,
        labels,
        {"the x": "x"},
        negatives_per_positive=3,
        seed=11,
        max_positives_per_label=5,
    )
    assert int(rel.sum()) == 5 and int((~rel).sum()) == 15
    idx = [int(np.argmin(np.abs(sims - x))) for x in s]
    assert np.allclose(sims[idx], s)
    assert all("x" in labels[i] for i, r in zip(idx, rel, strict=True) if r)
    assert all("x" not in labels[i] for i, r in zip(idx, rel, strict=True) if not r)
    assert len(set(idx)) == 20  # no document drawn twice
    pos_idx, neg_idx = [i for i, r in zip(idx, rel, strict=True) if r], idx[5:]
    assert pos_idx == sorted(pos_idx) and neg_idx == sorted(neg_idx)
    # Deterministic for a seed; another seed draws another sample.
    again = label_pairs(
        {"the x": v},
        docs,
        labels,
        {"the x": "x"},
        negatives_per_positive=3,
        seed=11,
        max_positives_per_label=5,
    )
    assert np.array_equal(again[0], s) and np.array_equal(again[1], rel)
    other = label_pairs(
        {"the x": v},
        docs,
        labels,
        {"the x": "x"},
        negatives_per_positive=3,
        seed=12,
        max_positives_per_label=5,
    )
    assert not np.array_equal(other[0], s)


def test_label_pairs_all_terms_defaults_and_term_order() -> None:
    s, rel = label_pairs(_TERMS, _DOCS, _LABELS, _LABEL_OF_TERM)
    # Defaults (10 negatives per positive, 200 positives max) take every document here:
    # "a cat" 4 pos + 6 neg, "a dog" 4 pos + 6 neg, "a fish" nothing (no document has "fish").
    assert s.size == 20
    assert rel.tolist() == ([True] * 4 + [False] * 6) * 2
    cat = _DOCS @ np.array([1.0, 0.0, 0.0])
    dog = _DOCS @ np.array([0.0, 1.0, 0.0])
    expected = np.concatenate(
        [cat[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]], dog[[3, 4, 5, 6, 0, 1, 2, 7, 8, 9]]]
    )
    assert np.allclose(s, expected)
    # Mapping order does not matter: terms are processed sorted.
    reordered = dict(reversed(list(_TERMS.items())))
    s2, rel2 = label_pairs(reordered, _DOCS, _LABELS, _LABEL_OF_TERM, seed=3)
    assert np.array_equal(s2, s) and np.array_equal(rel2, rel)


def test_label_pairs_no_pairs_and_errors() -> None:
    s, rel = label_pairs({"a fish": _TERMS["a fish"]}, _DOCS, _LABELS, _LABEL_OF_TERM)
    assert s.shape == (0,) and rel.shape == (0,) and rel.dtype == np.bool_
    with pytest.raises(ValueError, match="term 'a cow' has no entry in label_of_term"):
        label_pairs({"a cow": [1.0, 0.0, 0.0]}, _DOCS, _LABELS, _LABEL_OF_TERM)
    with pytest.raises(ValueError, match="has 10 rows but doc_labels has 9"):
        label_pairs(_TERMS, _DOCS, _LABELS[:9], _LABEL_OF_TERM)
    with pytest.raises(ValueError, match="expected \\(3,\\)"):
        label_pairs({"a cat": [1.0, 0.0]}, _DOCS, _LABELS, _LABEL_OF_TERM)
    with pytest.raises(ValueError, match="is zero"):
        label_pairs({"a cat": [0.0, 0.0, 0.0]}, _DOCS, _LABELS, _LABEL_OF_TERM)


def test_label_pairs_feed_fit_logistic() -> None:
    # End to end on synthetic embeddings: label documents lie near their label's vector.
    rng = np.random.default_rng(8)
    d, n = 16, 600
    centers = rng.normal(size=(4, d))
    which = rng.integers(0, 4, n)
    docs = centers[which] + 1.5 * rng.normal(size=(n, d))
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    labels = [{f"L{k}"} for k in which]
    terms = {f"t{k}": centers[k] for k in range(4)}
    s, rel = label_pairs(terms, docs, labels, {f"t{k}": f"L{k}" for k in range(4)}, seed=1)
    cal = fit_logistic(s, rel)
    assert cal.n_pairs == s.size and cal.auc is not None and cal.auc > 0.9
    assert float(cal.truth(s[rel]).mean()) > 0.7 > 0.3 > float(cal.truth(s[~rel]).mean())
