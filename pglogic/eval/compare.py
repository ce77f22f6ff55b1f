"""Where one method loses to another: paired tests per template and per template family, with
Holm's correction for multiple comparisons (no I/O).

Ten queries per template cannot make a per-template p-value small, and thirty templates times a
dozen methods make hundreds of tests: some "significant" losses appear by chance alone. So every
table of :func:`compare` tests the base method (the default engine) against each other method on
each group of queries with the two-sided Wilcoxon signed-rank test of
:func:`pglogic.eval.metrics.paired_test`, then adjusts all the p-values of the table together
with :func:`holm` (family-wise error rate ``alpha``). A row is a *loss* when the base method's
mean is lower and the adjusted p-value is below ``alpha``; *lower* when its mean is lower but not
significantly so.

Template families (:func:`family_of`) group the templates by their logical shape:
``AND`` (conjunctions of positive terms), ``OR`` (disjunctions), ``AND+OR`` (both, no NOT),
``NOT in AND`` (NOT, no OR) and ``NOT with OR`` (NOT and OR).

Example:
    >>> holm({"a": 0.01, "b": 0.04, "c": 0.03})
    {'a': 0.03, 'b': 0.06, 'c': 0.06}
    >>> from pglogic.query import parse
    >>> family_of(parse('"a" AND NOT ("b" OR "c")'))
    'NOT with OR'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pglogic.eval.metrics import paired_test
from pglogic.query import And, Match, Node, Not, Or, Term

__all__ = [
    "ALPHA",
    "FAMILIES",
    "MIN_QUERIES",
    "Comparison",
    "compare",
    "family_of",
    "holm",
    "losses",
]

K = TypeVar("K", bound=Hashable)

ALPHA = 0.05
"""Family-wise error rate of each table's tests (after Holm's correction)."""

MIN_QUERIES = 5
"""Groups with fewer queries are not tested (shown, with p = 1)."""

FAMILIES = ("AND", "OR", "AND+OR", "NOT in AND", "NOT with OR", "single term")
"""Template families, in report order (:func:`family_of`)."""


def holm(p_values: Mapping[K, float]) -> dict[K, float]:
    """Holm–Bonferroni adjusted p-values (step-down, monotone, capped at 1).

    The i-th smallest of m p-values is multiplied by ``m - i`` (i from 0), and every adjusted
    value is at least the one before it, so "adjusted p < alpha" controls the family-wise error
    rate at alpha. NaN p-values count as 1.

    Example:
        >>> holm({"x": 0.001, "y": 0.02, "z": 0.5})
        {'x': 0.003, 'y': 0.04, 'z': 0.5}
    """
    items = sorted(p_values.items(), key=lambda kv: 1.0 if math.isnan(kv[1]) else kv[1])
    m = len(items)
    out: dict[K, float] = {}
    running = 0.0
    for i, (key, p) in enumerate(items):
        p = 1.0 if math.isnan(p) else p
        running = max(running, min(1.0, (m - i) * p))
        out[key] = float(f"{running:.12g}")
    return {key: out[key] for key in p_values}


def _kinds(node: Node) -> set[str]:
    if isinstance(node, Term | Match):
        return set()
    if isinstance(node, Not):
        return {"NOT"} | _kinds(node.child)
    own = {"AND"} if isinstance(node, And) else {"OR"} if isinstance(node, Or) else set()
    return own.union(*(_kinds(c) for c in node.children))


def family_of(tree: Node) -> str:
    """The template family of a formula (one of :data:`FAMILIES`).

    Example:
        >>> from pglogic.query import parse
        >>> [family_of(parse(q)) for q in ('"a" AND "b"', '"a" OR "b" AND "c"', '"a" AND NOT "b"')]
        ['AND', 'AND+OR', 'NOT in AND']
    """
    kinds = _kinds(tree)
    if "NOT" in kinds:
        return "NOT with OR" if "OR" in kinds else "NOT in AND"
    if kinds == {"AND"}:
        return "AND"
    if kinds == {"OR"}:
        return "OR"
    return "AND+OR" if kinds else "single term"


@dataclass(frozen=True)
class Comparison:
    """The base method against ``method`` on one group of queries (``delta`` = method − base).

    ``p`` is the Wilcoxon p-value, ``p_holm`` the same after Holm's correction over its table.
    """

    group: str
    method: str
    n: int
    base: float
    other: float
    delta: float
    p: float
    p_holm: float

    @property
    def loss(self) -> bool:
        """The base method is significantly worse (adjusted p below :data:`ALPHA`)."""
        return self.delta > 0 and self.p_holm < ALPHA

    @property
    def lower(self) -> bool:
        """The base method's mean is lower (significantly or not)."""
        return self.delta > 1e-12


def compare(
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
    groups: Mapping[str, Sequence[str]],
    base: str,
    methods: Iterable[str],
    metric: str = "ndcg@10",
) -> list[Comparison]:
    """Test ``base`` against every method on every group of query ids; Holm over the table.

    ``per_query[method][qid][metric]`` as in :class:`pglogic.eval.evaluate.EvalResult`. Groups
    with fewer than :data:`MIN_QUERIES` queries get p = 1 (they are too small to test).

    Example:
        >>> pq = {"base": {f"q{i}": {"ndcg@10": 0.2} for i in range(8)},
        ...       "dense": {f"q{i}": {"ndcg@10": 0.3 + i / 100} for i in range(8)}}
        >>> [c] = compare(pq, {"AND x2": [f"q{i}" for i in range(8)]}, "base", ["dense"])
        >>> c.loss, round(c.delta, 3), round(c.p_holm, 4)
        (True, 0.135, 0.0078)
    """
    raw: list[tuple[str, str, int, float, float, float]] = []
    for group, qids in groups.items():
        for m in methods:
            if m == base or m not in per_query:
                continue
            a = {q: per_query[base][q][metric] for q in qids}
            b = {q: per_query[m][q][metric] for q in qids}
            t = paired_test(a, b)
            p = t.p_value if t.n >= MIN_QUERIES else 1.0
            raw.append((group, m, t.n, t.mean_a, t.mean_b, p))
    adjusted = holm({i: row[5] for i, row in enumerate(raw)})
    return [
        Comparison(g, m, n, a, b, b - a, p, adjusted[i]) for i, (g, m, n, a, b, p) in enumerate(raw)
    ]


def losses(
    comparisons: Iterable[Comparison], keep: Callable[[Comparison], bool] | None = None
) -> list[Comparison]:
    """The comparisons where the base method's mean is lower, worst adjusted p first.

    Example:
        >>> rows = [Comparison("AND", "dense", 30, 0.2, 0.3, 0.1, 0.001, 0.02),
        ...         Comparison("OR", "dense", 30, 0.5, 0.4, -0.1, 0.001, 0.02)]
        >>> [(c.group, c.loss) for c in losses(rows)]
        [('AND', True)]
    """
    out = [c for c in comparisons if c.lower and (keep is None or keep(c))]
    return sorted(out, key=lambda c: (c.p_holm, -c.delta))
