"""Spherical query optimisation (pglogic.engine.sqo): optimum against grid search on the circle, the
paper's stopping rules, determinism. Pure: no database (tests/test_modes.py runs the SQL)."""

from __future__ import annotations

import numpy as np
import pytest

from pglogic.engine.operators import evaluate_numpy
from pglogic.engine.sqo import PAPER, Settings, optimise, sqo_vector
from pglogic.query import parse

A = np.array([1.0, 0.0])
B = np.array([np.cos(1.2), np.sin(1.2)])


def circle_optimum(query: str, vectors: dict[str, np.ndarray]) -> float:
    """The angle on the unit circle with the best score, by grid search (0.0001 rad)."""
    angles = np.arange(-np.pi, np.pi, 1e-4)
    points = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    sims = {t: points @ v for t, v in vectors.items()}
    return float(angles[np.argmax(evaluate_numpy(parse(query), sims))])


@pytest.mark.parametrize("query", ['"a" AND "b"', '"a" AND NOT "b"', '"a" OR "b"'])
def test_sqo_finds_the_optimum_on_the_circle(query: str) -> None:
    vectors = {"a": A, "b": B}
    res = optimise(parse(query), vectors)
    angle = float(np.arctan2(res.vector[1], res.vector[0]))
    best = circle_optimum(query, vectors)
    # the ascent stops when a step gains < 1e-6: within a few hundredths of a radian
    assert abs(angle - best) < 0.03, (angle, best)
    assert res.objective >= res.start


def test_and_optimum_is_the_bisector() -> None:
    # cos(x)·cos(1.2 − x) is largest at x = 0.6
    x = sqo_vector(parse('"a" AND "b"'), {"a": A, "b": B})
    assert float(np.arctan2(x[1], x[0])) == pytest.approx(0.6, abs=0.01)


def test_objective_is_the_formula_score_of_the_vector() -> None:
    rng = np.random.default_rng(3)
    vectors = {t: rng.standard_normal(16) for t in "abc"}
    tree = parse('("a" OR "b") AND NOT "c"')
    res = optimise(tree, vectors)
    unit = {t: v / np.linalg.norm(v) for t, v in vectors.items()}
    score = evaluate_numpy(tree, {t: [float(res.vector @ v)] for t, v in unit.items()})
    assert float(score[0]) == pytest.approx(res.objective, abs=1e-6)
    assert float(np.linalg.norm(res.vector)) == pytest.approx(1.0, abs=1e-6)
    assert res.vector.dtype == np.float32


def test_paper_settings_and_stopping_rules() -> None:
    assert (PAPER.lr, PAPER.max_steps, PAPER.patience, PAPER.tol, PAPER.log) == (
        0.2, 100, 10, 1e-6, False,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    vectors = {t: rng.standard_normal(32) for t in "abcd"}
    tree = parse('"a" AND "b" AND NOT "c" OR "d"')
    assert optimise(tree, vectors, settings=Settings(max_steps=3)).steps <= 3
    # a tolerance nothing can meet: every step is stale, so it stops after `patience` steps
    stale = optimise(tree, vectors, settings=Settings(tol=10.0, patience=4))
    assert stale.steps == 4 and stale.objective == stale.start
    full = optimise(tree, vectors)
    assert 0 < full.steps <= 100 and full.objective > full.start


def test_deterministic_for_a_seed() -> None:
    rng = np.random.default_rng(1)
    vectors = {t: rng.standard_normal(384) for t in "abc"}
    tree = parse('"a" AND NOT "b" OR "c"')
    one = optimise(tree, vectors, seed=7).vector
    two = optimise(tree, vectors, seed=7).vector
    assert one.tobytes() == two.tobytes()
    other = optimise(tree, vectors, seed=8)
    assert other.vector.tobytes() != one.tobytes()
    # different seeds: different starts, about the same optimum
    assert other.objective == pytest.approx(optimise(tree, vectors, seed=7).objective, abs=0.02)
    # seed None: no perturbation of the start (the mean of the positive terms)
    flat = optimise(tree, vectors, seed=None, settings=Settings(max_steps=0))
    unit = [vectors[t] / np.linalg.norm(vectors[t]) for t in "ac"]
    mean = np.mean(unit, axis=0)
    np.testing.assert_allclose(flat.vector, mean / np.linalg.norm(mean), atol=1e-6)


def test_missing_vector_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        optimise(parse('"a" AND "b"'), {"a": A})
