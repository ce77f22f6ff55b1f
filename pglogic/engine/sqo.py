"""Spherical query optimisation (SQO, from the NSFL paper): a formula becomes one query vector.

A logical query scores a document through its similarities to the term vectors. SQO asks the
reverse question: which unit vector ``x`` would itself score best on the formula? Its
similarities ``x·t`` to the (normalised) term vectors go through the same truth map and operators
as a document's, giving an objective ``F(x)`` on the unit sphere, which SQO climbs by Riemannian
gradient ascent:

1. start at the normalised mean of the positive terms' vectors (plus, when ``seed`` is given, a
   tiny deterministic perturbation of norm ``JITTER`` drawn from ``numpy.random.default_rng(seed)``,
   which moves the start off saddle points such as the exact middle of two OR terms);
2. gradient: ``∇F(x) = Σ_t ∂F/∂s_t · t`` (chain rule through the similarities), where ``∂F/∂s_t``
   comes from central differences in similarity space (two evaluations per term, all in one call
   of the operators' NumPy face), so any operator family and truth map works;
3. project the gradient onto the sphere's tangent space at ``x`` (``g − (g·x)x``), step
   ``x ← normalise(x + lr·g)``;
4. keep the best point seen; stop after ``max_steps`` steps, or when ``patience`` steps in a row
   improve the best objective by less than ``tol``, or when the tangent gradient vanishes.

The paper's settings are the defaults (:data:`PAPER`): lr 0.2, at most 100 steps, patience 10,
tolerance 1e-6. The result is a plain HNSW query vector (``sqo`` mode) or the candidate
generator of a reranking (``sqo-rerank``); :mod:`pglogic.engine.guide` uses the same ascent with its own
settings (log F, shorter patience) to find extra candidates for the fuzzy engine.

Pure: no I/O. Deterministic: the same inputs and seed give the same vector, bit for bit.

Example:
    >>> import numpy as np
    >>> from pglogic.query import parse
    >>> v = {"a": np.array([1.0, 0.0, 0.0]), "b": np.array([0.0, 1.0, 0.0]),
    ...      "c": np.array([0.6, 0.0, 0.8])}
    >>> res = optimise(parse('"a" AND "b" AND NOT "c"'), v)
    >>> bool(res.vector @ v["a"] > 0.5 and res.vector @ v["b"] > 0.5), res.objective > res.start
    (True, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.engine.operators import OperatorFamily, TruthMap, evaluate_numpy
from pglogic.engine.strategy import Score, Strategy, fuzzy_score, fuzzy_texts
from pglogic.query import Node, positive_terms, terms

__all__ = [
    "JITTER",
    "PAPER",
    "SQO",
    "SQO_RERANK",
    "Settings",
    "SqoResult",
    "optimise",
    "sqo_score",
    "sqo_vector",
]

JITTER = 1e-3
"""Norm of the seeded perturbation of the starting point."""

_H = 1e-4  # finite-difference step in similarity space


@dataclass(frozen=True)
class Settings:
    """Ascent settings. ``log`` climbs log F instead of F (same maximum, livelier gradient).

    Example:
        >>> PAPER.lr, PAPER.max_steps, PAPER.patience, PAPER.tol
        (0.2, 100, 10, 1e-06)
    """

    lr: float = 0.2
    max_steps: int = 100
    patience: int = 10
    tol: float = 1e-6
    log: bool = False


PAPER = Settings()
"""The NSFL paper's settings: lr 0.2, ≤ 100 steps, patience 10, tolerance 1e-6, objective F."""


@dataclass(frozen=True)
class SqoResult:
    """The optimised unit vector (float32), its objective, the start's objective, steps taken.

    Example:
        >>> SqoResult(np.ones(2, dtype=np.float32), 0.5, 0.25, 3).steps
        3
    """

    vector: npt.NDArray[np.float32]
    objective: float
    start: float
    steps: int


FloatMat = npt.NDArray[np.float64]


def _unit_rows(tree: Node, vectors: Mapping[str, npt.ArrayLike]) -> tuple[list[str], FloatMat]:
    names = terms(tree)
    mat = np.stack([np.asarray(vectors[t], dtype=np.float64) for t in names])
    mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
    return names, mat


def optimise(
    tree: Node,
    vectors: Mapping[str, npt.ArrayLike],
    family: OperatorFamily | str | None = None,
    truth: TruthMap | str = "clamp",
    *,
    settings: Settings = PAPER,
    seed: int | None = 0,
) -> SqoResult:
    """Climb the formula's score on the unit sphere; see the module docstring for the method.

    ``vectors`` maps every term of ``tree`` to its embedding (``KeyError`` when one is missing).
    Returns the best point seen, so the objective is never below the start's.

    Example:
        >>> from pglogic.query import parse
        >>> v = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0])}
        >>> res = optimise(parse('"a" AND "b"'), v, seed=None)
        >>> np.round(res.vector, 3), res.steps
        (array([0.707, 0.707], dtype=float32), 0)
    """
    names, mat = _unit_rows(tree, vectors)
    n = len(names)
    pos = [names.index(t) for t in positive_terms(tree)] or list(range(n))
    x = mat[pos].mean(axis=0)
    if np.linalg.norm(x) < 1e-9:  # opposite positive terms: start from the first one
        x = mat[pos[0]].copy()
    x /= np.linalg.norm(x)
    if seed is not None:
        noise = np.random.default_rng(seed).standard_normal(x.shape[0])
        x = x + JITTER * noise / np.linalg.norm(noise)
        x /= np.linalg.norm(x)
    # rows: the point, then +h and -h on each similarity (central differences)
    offsets = np.vstack([np.zeros(n), _H * np.eye(n), -_H * np.eye(n)])

    def score_and_grad(point: FloatMat) -> tuple[float, FloatMat]:
        sims = mat @ point + offsets
        f = evaluate_numpy(tree, {t: sims[:, i] for i, t in enumerate(names)}, family, truth)
        if settings.log:
            f = np.log(np.maximum(f, 1e-12))
        dfds = (f[1 : n + 1] - f[n + 1 :]) / (2 * _H)
        return float(f[0]), mat.T @ dfds

    best_x, (best_f, grad) = x, score_and_grad(x)
    start, stale, steps = best_f, 0, 0
    for _ in range(settings.max_steps):
        riemannian = grad - (grad @ x) * x  # tangent to the sphere at x
        if np.linalg.norm(riemannian) < 1e-12:
            break
        x = x + settings.lr * riemannian
        x /= np.linalg.norm(x)
        steps += 1
        f, grad = score_and_grad(x)
        if f > best_f + settings.tol:
            best_x, best_f, stale = x, f, 0
        else:
            stale += 1
            if stale >= settings.patience:
                break
    return SqoResult(best_x.astype(np.float32), best_f, start, steps)


def sqo_vector(
    tree: Node,
    vectors: Mapping[str, npt.ArrayLike],
    family: OperatorFamily | str | None = None,
    truth: TruthMap | str = "clamp",
    seed: int | None = 0,
) -> npt.NDArray[np.float32]:
    """The SQO query vector with the paper's settings (:func:`optimise` with :data:`PAPER`).

    Example:
        >>> from pglogic.query import parse
        >>> v = {"a": np.array([1.0, 0.0]), "b": np.array([0.6, 0.8])}
        >>> x = sqo_vector(parse('"a" AND NOT "b"'), v)
        >>> bool(x @ v["a"] > 0.7 and x @ v["b"] < 0.1)
        True
    """
    return optimise(tree, vectors, family, truth, settings=PAPER, seed=seed).vector


def sqo_score(
    tree: Node,
    index: Mapping[str, int],
    lexical: Mapping[str, int],
    family: OperatorFamily,
    truth: str,
    question: str | None,
) -> Score:
    """Mode ``sqo``'s score: the similarity to the SQO vector (column ``sq``).

    Example:
        >>> from pglogic.engine.operators import resolve_family
        >>> from pglogic.query import parse
        >>> score, layers, rel = sqo_score(parse('"a" AND "b"'), {}, {}, resolve_family("product"),
        ...                                "clamp", None)
        >>> score.as_string(None), layers, rel
        ('"sq"', [], 'sims')
    """
    return sql.Identifier("sq"), [], "sims"


SQO = Strategy(
    mode="sqo", texts=fuzzy_texts, score=sqo_score, needs_positive=False, guided=False,
    along_vector=True, vector_kind="sqo", vector_column="sq",
)  # fmt: skip
"""Mode ``sqo``: one k-NN scan along the SQO vector, ranked by the similarity to it."""
SQO_RERANK = Strategy(
    mode="sqo-rerank", texts=fuzzy_texts, score=fuzzy_score, needs_positive=False, guided=False,
    rerank=True, along_vector=True, vector_kind="sqo",
)  # fmt: skip
"""Mode ``sqo-rerank``: the SQO vector's top K, ranked by the fuzzy formula."""
