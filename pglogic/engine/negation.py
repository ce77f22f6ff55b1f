"""NOT against its context: a negated term's vector without its AND's positive terms (no I/O).

A document about the positive terms of ``"grain" AND NOT "wheat"`` is close to "wheat" because
"grain" is: every grain story scores 0.3–0.6 against the negated term, and the NOT penalises
the relevant documents along with the traps. With ``not_context`` = λ > 0 the negated term's
vector ``b`` is scored as

    b' = normalise(b − λ · P b)

where ``P`` projects onto the span of its *context*: the positive terms that are children of
an AND in which the term is directly negated (``"grain"`` above; in ``"a" OR NOT "b" AND "c"``
the context of ``b`` is ``c``). A term negated under an OR or alone, one that also occurs
positively (it shares one similarity column), and lexical terms keep their vectors. λ = 1 is
Gram–Schmidt against the context (the geometric baseline's NOT, applied to the negated term
instead of the question); 0 scores the term as it is. The similarity column of a projected term
(``s{i}``, ``--explain``) is its similarity to ``b'``.

The default, λ = 0.5 (:data:`DEFAULT_NOT_CONTEXT`), was measured in
``bench/quality/results/not_projection.md``: +0.010 / +0.009 / +0.015 nDCG@10 on the NOT queries of
Reuters, Stack Exchange and arXiv (exact scoring, 50 per template), no NOT template family
significantly below a method of the papers, and as many of dense retrieval's traps kept out on
Reuters (slightly fewer on Stack Exchange and arXiv).

Example:
    >>> from pglogic.query import parse
    >>> contexts(parse('"grain" AND "corn" AND NOT "wheat"'))
    {'wheat': ('grain', 'corn')}
    >>> v = {"grain": [1.0, 0.0, 0.0], "wheat": [0.6, 0.8, 0.0]}
    >>> [round(float(x), 3) for x in with_context(parse('"grain" AND NOT "wheat"'), v, 1.0)["wheat"]]
    [0.0, 1.0, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from pglogic.engine import defaults
from pglogic.query import And, Node, Not, Or, Term, negated_only_terms
from pglogic.query.ast import flatten

__all__ = ["DEFAULT_NOT_CONTEXT", "DEFAULT_NOT_MENTION", "contexts", "projected", "with_context"]

DEFAULT_NOT_CONTEXT = defaults.NOT_CONTEXT
"""The default λ (:data:`pglogic.engine.defaults.NOT_CONTEXT`)."""

DEFAULT_NOT_MENTION = defaults.NOT_MENTION
"""The default ``SearchOptions.not_mention`` (:data:`pglogic.engine.defaults.NOT_MENTION`)."""


def contexts(node: Node) -> dict[str, tuple[str, ...]]:
    """Each negated-only term with a context → the positive terms of the ANDs that negate it
    directly, in order of first appearance (no term twice). Nested ANDs count as one (their
    operands spliced in, :func:`pglogic.query.flatten`), as a parsed query's are.

    Example:
        >>> from pglogic.query import parse
        >>> contexts(And((Term("a"), And((Term("c"), Not(Term("b")))))))  # as '"a" AND "c" AND NOT "b"'
        {'b': ('a', 'c')}
        >>> contexts(parse('"a" OR NOT "b" AND "c"'))
        {'b': ('c',)}
        >>> contexts(parse('NOT "b" OR "a"')), contexts(parse('"b" AND NOT "b"'))
        ({}, {})
        >>> contexts(parse('("a" AND NOT "x") OR ("c" AND NOT "x" AND "a")'))
        {'x': ('a', 'c')}
    """
    found: dict[str, list[str]] = {}

    def walk(n: Node) -> None:
        children = flatten(n) if isinstance(n, (And, Or)) else []  # nested ANDs spliced in
        if isinstance(n, And):
            positive = [c.text for c in children if isinstance(c, Term)]
            for c in children:
                if isinstance(c, Not) and isinstance(c.child, Term) and positive:
                    acc = found.setdefault(c.child.text, [])
                    acc.extend(t for t in positive if t not in acc)
        for c in children:
            walk(c)
        if isinstance(n, Not):
            walk(n.child)

    walk(node)
    negated = set(negated_only_terms(node))
    return {t: tuple(c) for t, c in found.items() if t in negated}


def projected(
    b: npt.ArrayLike, context: Sequence[npt.ArrayLike], lam: float
) -> npt.NDArray[np.float32]:
    """``normalise(b − λ · P b)``, P the projection onto the span of ``context`` (modified
    Gram–Schmidt in double precision, as the SQL function computes it; a context vector in the
    span of the ones before it, less than 1e-6 of its norm left, is skipped, and ``b`` is kept
    when less than 1e-6 of its norm would be left).

    Example:
        >>> [round(float(x), 3) for x in projected([1.0, 1.0, 0.0], [[1.0, 0.0, 0.0]], 1.0)]
        [0.0, 1.0, 0.0]
        >>> [round(float(x), 3) for x in projected([1.0, 1.0, 0.0], [[2.0, 0.0, 0.0]], 0.5)]
        [0.447, 0.894, 0.0]
    """
    v = np.asarray(b, dtype=np.float64)
    basis: list[npt.NDArray[np.float64]] = []
    for c in context:
        u = original = np.asarray(c, dtype=np.float64)
        for q in basis:
            u = u - float(q @ u) * q
        n = math.sqrt(float(u @ u))
        if n > 1e-6 * math.sqrt(float(original @ original)):
            basis.append(u / n)
    r = v.copy()
    for q in basis:
        r = r - lam * float(q @ v) * q
    n = math.sqrt(float(r @ r))
    if not basis or n <= 1e-6 * math.sqrt(float(v @ v)):
        return np.asarray(v, dtype=np.float32)
    return np.asarray(r / n, dtype=np.float32)


def with_context(
    node: Node, vectors: Mapping[str, npt.ArrayLike], lam: float
) -> dict[str, npt.ArrayLike]:
    """``vectors`` with each negated term that has a context replaced by :func:`projected`
    (λ = ``lam``; 0 returns them as they are). Terms whose vectors are missing are left to the
    caller's error.

    Example:
        >>> from pglogic.query import parse
        >>> v = {"a": [1.0, 0.0], "b": [0.6, 0.8]}
        >>> with_context(parse('"a" OR NOT "b"'), v, 1.0)["b"]  # no AND: as it is
        [0.6, 0.8]
    """
    out = dict(vectors)
    if not lam:
        return out
    for t, ctx in contexts(node).items():
        if t in vectors and all(c in vectors for c in ctx):
            out[t] = projected(vectors[t], [vectors[c] for c in ctx], lam)
    return out
