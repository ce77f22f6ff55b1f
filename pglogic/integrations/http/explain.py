"""Why a hit ranks where it does: each scored text's truth value and each NOT's contribution.

A search returns every scored text's cosine similarity per hit (``Hit.similarities``: the
query's terms and, in fuzzy mode, each AND's own phrase). From them and the compiled query's
operator family and truth map this module recomputes the score with the operators' NumPy face
and, for every NOT of the formula, the score the hit would have had without it (that NOT taken
as true, 1.0): the difference is what the NOT took away. Where the recomputed score differs from
the database's (another mode, a lexical term), no contributions are given.

Example:
    >>> from pglogic.query import parse
    >>> from pglogic.engine.operators import resolve_family
    >>> e = explain_hit(parse('"a" AND NOT "b"'), {"a": 0.8, "b": 0.5}, 0.8 * 0.5 ** 1.25,
    ...                 resolve_family("product-max-strong"), "clamp", and_text=0)
    >>> e["nots"][0]["expr"], round(e["nots"][0]["without"], 3), round(e["nots"][0]["contribution"], 3)
    ('NOT "b"', 0.8, -0.464)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pglogic.engine.conjunction import and_texts, with_and_texts
from pglogic.engine.operators import NumpyAlgebra, OperatorFamily, resolve_truth
from pglogic.query import (
    And,
    Match,
    Node,
    Not,
    Or,
    Term,
    matches,
    negated_only_terms,
    positive_matches,
    positive_terms,
    terms,
)

__all__ = ["dense_text", "explain_hit", "lexical_roles", "term_roles"]

_ALG = NumpyAlgebra()
#: How far the recomputed score may be from the database's (float4 vectors, float8 scores).
TOLERANCE = 1e-4


def term_roles(tree: Node, scored: list[str]) -> dict[str, str]:
    """The role of every scored text: ``positive`` (raises the score), ``negated`` (only under
    a NOT), ``phrase`` (an AND's own text) or ``other`` (NSFL's fused texts and question).

    Example:
        >>> from pglogic.query import parse
        >>> term_roles(parse('"a" AND "b" AND NOT "c"'), ["a", "b", "c", "a and b"])
        {'a': 'positive', 'b': 'positive', 'c': 'negated', 'a and b': 'phrase'}
    """
    positive = set(positive_terms(tree))
    negated = set(negated_only_terms(tree))
    phrases = set(and_texts(tree))
    own = set(terms(tree))
    out = {}
    for t in scored:
        if t in positive:
            out[t] = "positive"
        elif t in negated:
            out[t] = "negated"
        elif t in phrases and t not in own:
            out[t] = "phrase"
        else:
            out[t] = "other"
    return out


def lexical_roles(tree: Node) -> dict[str, str]:
    """The role of every lexical term, by its canonical text (``match:"wheat"``, the key of its
    truth in an explanation): ``positive`` or ``negated``.

    Example:
        >>> from pglogic.query import parse
        >>> lexical_roles(parse('"a" AND NOT match:wheat'))
        {'match:"wheat"': 'negated'}
    """
    positive = set(positive_matches(tree))
    return {str(Match(t)): "positive" if t in positive else "negated" for t in matches(tree)}


def _only_fuzzy_nodes(node: Node) -> bool:
    if isinstance(node, Term | Match):
        return True
    if isinstance(node, Not):
        return _only_fuzzy_nodes(node.child)
    if isinstance(node, And | Or):
        return all(_only_fuzzy_nodes(c) for c in node.children)
    return False  # another leaf the NumPy face does not score here


def _nots(node: Node) -> list[Not]:
    out: list[Not] = []

    def walk(n: Node) -> None:
        if isinstance(n, Not):
            if n not in out:
                out.append(n)
            walk(n.child)
        elif isinstance(n, And | Or):
            for c in n.children:
                walk(c)

    walk(node)
    return out


def _score(
    node: Node,
    sims: Mapping[str, float],
    family: OperatorFamily,
    truth: Any,
    dropped: Not | None,
    lexical: Mapping[str, float] | None = None,
) -> float:
    def walk(n: Node) -> Any:
        if dropped is not None and n == dropped:
            return np.float64(1.0)
        if isinstance(n, Term):
            return truth.definition(_ALG, np.float64(sims[n.text]))
        if isinstance(n, Match):  # a lexical truth, used as it is
            return np.float64((lexical or {})[n.text])
        if isinstance(n, Not):
            return family.not_.definition(_ALG, walk(n.child))
        assert isinstance(n, And | Or)
        children = [walk(c) for c in n.children]
        op = family.and_ if isinstance(n, And) else family.or_
        return op.definition(_ALG, children)

    return float(np.asarray(walk(node), dtype=np.float64))


def explain_hit(
    tree: Node,
    similarities: Mapping[str, float],
    score: float,
    family: OperatorFamily,
    truth: str,
    *,
    and_text: int,
    lexical: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Per-text truth values and per-NOT contributions of one hit (fuzzy mode).

    ``lexical`` holds the hit's lexical terms' truths (``Hit.lexical``); they join ``truths``
    under their canonical text (``match:"wheat"``).

    Returns ``{"truths": {text: truth value}, "nots": [{"expr", "terms", "truth", "without",
    "contribution"}]}``; ``truth`` of a NOT is its value (the factor it multiplies by under a
    product), ``without`` the score with that NOT taken as true, ``contribution`` = score -
    without (negative: it pushed the hit down). ``nots`` is None when the recomputed score is
    not the database's.

    Example:
        >>> from pglogic.query import parse
        >>> from pglogic.engine.operators import resolve_family
        >>> explain_hit(parse('"a"'), {"a": 0.5}, 0.5, resolve_family("godel"), "clamp",
        ...             and_text=0)
        {'truths': {'a': 0.5}, 'nots': []}
    """
    tmap: Any = resolve_truth(truth)
    truths = {
        t: float(np.asarray(tmap.definition(_ALG, np.float64(s)))) for t, s in similarities.items()
    }
    lex = dict(lexical or {})
    truths.update({str(Match(t)): float(v) for t, v in lex.items()})
    scored = with_and_texts(tree, and_text)
    out: dict[str, Any] = {"truths": truths, "nots": None}
    if (
        not _only_fuzzy_nodes(scored)
        or any(t not in similarities for t in terms(scored))
        or any(t not in lex for t in matches(scored))
    ):
        return out
    full = _score(scored, similarities, family, tmap, None, lex)
    if not abs(full - score) <= TOLERANCE * max(1.0, abs(score)):
        return out
    nots = []
    for node in _nots(scored):
        without = _score(scored, similarities, family, tmap, node, lex)
        child = _score(node.child, similarities, family, tmap, None, lex)
        value = float(np.asarray(family.not_.definition(_ALG, np.asarray([child]))[0]))
        nots.append(
            {
                "expr": str(node),
                "terms": terms(node) + [str(Match(t)) for t in matches(node)],
                "truth": value,
                "without": without,
                "contribution": full - without,
            }
        )
    out["nots"] = nots
    return out


def dense_text(tree: Node) -> str:
    """The query as one plain string, what a dense search would be given.

    Example:
        >>> from pglogic.query import parse
        >>> dense_text(parse('"grain" AND NOT "wheat"'))
        'grain but not wheat'
    """
    from pglogic.query import to_text

    return to_text(tree)
