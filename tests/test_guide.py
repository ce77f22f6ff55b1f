"""Tests of the guide vector (pglogic.engine.guide): the direction of the extra candidate scan."""

from __future__ import annotations

import numpy as np
import pytest

from pglogic.engine.guide import guide_vector
from pglogic.engine.operators import evaluate_numpy
from pglogic.query import parse, positive_terms, terms

RNG = np.random.default_rng(7)


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def related_vectors(n: int, dim: int = 16, spread: float = 0.6) -> dict[str, np.ndarray]:
    """n unit vectors around a common direction (terms of one topic)."""
    centre = RNG.standard_normal(dim)
    return {f"t{i + 1}": unit(centre + spread * RNG.standard_normal(dim)) for i in range(n)}


def score_of(query: str, x: np.ndarray, vecs: dict[str, np.ndarray], family: str) -> float:
    tree = parse(query)
    sims = {t: np.array([float(unit(x) @ vecs[t])]) for t in terms(tree)}
    return float(evaluate_numpy(tree, sims, family)[0])


QUERIES = [
    '"t1" AND "t2"',
    '"t1" AND NOT "t2"',
    '"t1" AND "t2" AND NOT "t3"',
    '("t1" OR "t2") AND NOT "t3"',
    '"t1" AND "t2" AND "t3" AND "t4" AND NOT "t5" AND NOT "t6"',
]


@pytest.mark.parametrize("family", ["itlr", "godel", "lukasiewicz", "product"])
@pytest.mark.parametrize("query", QUERIES)
def test_guide_scores_at_least_as_high_as_the_positive_mean(query: str, family: str) -> None:
    tree = parse(query)
    vecs = related_vectors(len(terms(tree)))
    start = np.mean([vecs[t] for t in positive_terms(tree)], axis=0)
    g = guide_vector(tree, vecs, family)
    assert g.dtype == np.float32
    assert np.linalg.norm(g) == pytest.approx(1.0, abs=1e-5)
    assert score_of(query, g, vecs, family) >= score_of(query, start, vecs, family) - 1e-9


def test_not_moves_the_guide_away_from_the_negated_term() -> None:
    a = np.array([1.0, 0.0, 0.0])
    b = unit(np.array([0.8, 0.6, 0.0]))
    g = guide_vector(parse('"a" AND NOT "b"'), {"a": a, "b": b})
    # a·(1 - b) is larger at g than at a itself: g turned away from b, still close to a
    assert g @ b < a @ b
    assert g @ a > 0.5
    assert score_of('"a" AND NOT "b"', g, {"a": a, "b": b}, "itlr") > 1 - a @ b


def test_sum_or_guide_is_the_normalised_sum() -> None:
    """With OR = sum and all similarities in (0, 1), the score is x·(Σ v): maximal at Σ v."""
    vecs = related_vectors(3, spread=0.3)
    g = guide_vector(parse('"t1" OR "t2" OR "t3"'), vecs, "itlr")
    want = unit(sum(vecs.values()))
    assert float(g @ want) == pytest.approx(1.0, abs=1e-4)


def test_symmetric_and_gives_the_bisector() -> None:
    vecs = {"a": np.array([1.0, 0.0, 0.0]), "b": np.array([0.0, 1.0, 0.0])}
    g = guide_vector(parse('"a" AND "b"'), vecs)
    np.testing.assert_allclose(g, [np.sqrt(0.5), np.sqrt(0.5), 0.0], atol=1e-5)


def test_guide_is_deterministic_and_needs_every_vector() -> None:
    tree = parse('"t1" AND "t2" AND NOT "t3"')
    vecs = related_vectors(3)
    np.testing.assert_array_equal(guide_vector(tree, vecs), guide_vector(tree, vecs))
    with pytest.raises(KeyError):
        guide_vector(tree, {"t1": vecs["t1"], "t2": vecs["t2"]})


def test_opposite_positive_terms_start_from_the_first() -> None:
    vecs = {"a": np.array([1.0, 0.0]), "b": np.array([-1.0, 0.0])}
    g = guide_vector(parse('"a" OR "b"'), vecs)
    assert np.isfinite(g).all()
    assert np.linalg.norm(g) == pytest.approx(1.0, abs=1e-5)
