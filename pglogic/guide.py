"""The guide vector: one query direction that scores high on the whole formula (no I/O).

Candidates of a logical query come from one HNSW scan per positive term. The documents that
score best on a *combination* (``"a" AND "b" AND NOT "c"``) are rarely near the top of any one
term's list: their rank there grows with the corpus (at 1M synthetic vectors the 10 best of a
3-term AND sit at rank 243 in the median query, of a 3-term NOT query at 350:
``bench/results/guide.md``). One more scan along a direction that itself scores high on the
formula finds them within the first few dozen (14 and 23).

That direction is found as in the spherical query optimisation (SQO) of the NSFL paper:
Riemannian gradient ascent on the unit sphere of the formula's score of a unit vector x (its
similarities to the term vectors go through the same truth map and operators as a document's),
from the normalised mean of the positive terms' vectors, learning rate 0.2, at most 100 steps.
Two changes, since the guide only has to point into the right neighbourhood: it ascends log F
(same maximum; the gradient of a product of many small truth values no longer vanishes) and
stops after 5 steps without an improvement of 1e-4 in log F (the paper: 10 steps, 1e-6). It
costs 0.25-2.4 ms per query, median per shape (``bench/results/guide.md``). The gradient is the chain rule
through the similarities, with the formula's derivative by central differences in similarity
space (two evaluations per term, batched in one call of the operators' NumPy face), so any
operator family works. Deterministic: no random start.

Example:
    >>> import numpy as np
    >>> from pglogic.query import parse
    >>> v = {"a": np.array([1.0, 0.0, 0.0]), "b": np.array([0.0, 1.0, 0.0]),
    ...      "c": np.array([0.6, 0.0, 0.8])}
    >>> g = guide_vector(parse('"a" AND "b" AND NOT "c"'), v)
    >>> bool(g @ v["a"] > 0.5 and g @ v["b"] > 0.5 and g @ v["c"] < g @ v["a"])
    True
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from pglogic.operators import OperatorFamily, evaluate_numpy
from pglogic.query import Node, positive_terms, terms

LEARNING_RATE = 0.2
MAX_STEPS = 100
PATIENCE = 5
TOLERANCE = 1e-4
_H = 1e-4  # finite-difference step in similarity space


def guide_vector(
    tree: Node,
    vectors: Mapping[str, npt.ArrayLike],
    family: OperatorFamily | str | None = None,
    truth: str = "clamp",
) -> npt.NDArray[np.float32]:
    """A unit vector that maximises the formula's score, starting from the positive terms' mean.

    Returns the best point seen (never worse than the start). Raises ``KeyError`` for a term
    without a vector.

    Example:
        >>> import numpy as np
        >>> from pglogic.query import parse
        >>> v = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0])}
        >>> np.round(guide_vector(parse('"a" AND "b"'), v), 3)
        array([0.707, 0.707], dtype=float32)
    """
    names = terms(tree)
    mat = np.stack([np.asarray(vectors[t], dtype=np.float64) for t in names])
    mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
    n = len(names)
    pos = [names.index(t) for t in positive_terms(tree)] or list(range(n))
    x = mat[pos].mean(axis=0)
    if np.linalg.norm(x) < 1e-9:  # opposite positive terms: start from the first one
        x = mat[pos[0]].copy()
    x /= np.linalg.norm(x)
    # rows: the point, then +h and -h on each similarity (central differences)
    offsets = np.vstack([np.zeros(n), _H * np.eye(n), -_H * np.eye(n)])

    def score_and_grad(point: npt.NDArray[np.float64]) -> tuple[float, npt.NDArray[np.float64]]:
        sims = mat @ point + offsets
        f = evaluate_numpy(tree, {t: sims[:, i] for i, t in enumerate(names)}, family, truth)
        # ascend log F: the same maximum, and a gradient that does not vanish when F is a
        # product of many small truth values
        logf = np.log(np.maximum(f, 1e-12))
        dfds = (logf[1 : n + 1] - logf[n + 1 :]) / (2 * _H)
        return float(logf[0]), mat.T @ dfds

    best_x, (best_f, grad) = x, score_and_grad(x)
    stale = 0
    for _ in range(MAX_STEPS):
        riemannian = grad - (grad @ x) * x  # tangent to the sphere at x
        if np.linalg.norm(riemannian) < 1e-12:
            break
        x = x + LEARNING_RATE * riemannian
        x /= np.linalg.norm(x)
        f, grad = score_and_grad(x)
        if f > best_f + TOLERANCE:
            best_x, best_f, stale = x, f, 0
        else:
            stale += 1
            if stale >= PATIENCE:
                break
    return best_x.astype(np.float32)
