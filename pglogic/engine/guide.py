"""The guide vector: one query direction that scores high on the whole formula (no I/O).

Candidates of a logical query come from one HNSW scan per positive term. The documents that
score best on a *combination* (``"a" AND "b" AND NOT "c"``) are rarely near the top of any one
term's list: their rank there grows with the corpus (at 1M synthetic vectors the 10 best of a
3-term AND sit at rank 243 in the median query, of a 3-term NOT query at 350:
``bench/perf/results/guide.md``). One more scan along a direction that itself scores high on the
formula finds them within the first few dozen (14 and 23).

That direction is found as in the spherical query optimisation (SQO) of the NSFL paper:
Riemannian gradient ascent on the unit sphere of the formula's score of a unit vector x (its
similarities to the term vectors go through the same truth map and operators as a document's),
from the normalised mean of the positive terms' vectors, learning rate 0.2, at most 100 steps.
Two changes, since the guide only has to point into the right neighbourhood: it ascends log F
(same maximum; the gradient of a product of many small truth values no longer vanishes) and
stops after 5 steps without an improvement of 1e-4 in log F (the paper: 10 steps, 1e-6). It
costs 0.25-2.4 ms per query, median per shape (``bench/perf/results/guide.md``). The gradient is
the chain rule through the similarities, with the formula's derivative by central differences in
similarity space (two evaluations per term, batched in one call of the operators' NumPy face), so
any operator family works. Deterministic: no random start.

Example:
    >>> import numpy as np
    >>> from pglogic.query import parse
    >>> v = {"a": np.array([1.0, 0.0, 0.0]), "b": np.array([0.0, 1.0, 0.0]),
    ...      "c": np.array([0.6, 0.0, 0.8])}
    >>> g = guide_vector(parse('"a" AND "b" AND NOT "c"'), v)
    >>> bool(g @ v["a"] > 0.4 and g @ v["b"] > 0.4 and g @ v["c"] < 0.1)
    True
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from pglogic.engine.operators import OperatorFamily
from pglogic.engine.sqo import Settings, optimise
from pglogic.query import Node

#: The guide's ascent: log F, and it stops early (the paper's SQO: F, patience 10, tol 1e-6).
GUIDE = Settings(lr=0.2, max_steps=100, patience=5, tol=1e-4, log=True)


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
    return optimise(tree, vectors, family, truth, settings=GUIDE, seed=None).vector
