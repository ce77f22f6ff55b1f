"""The conjunction's own text: an AND is also scored as one phrase (no I/O).

Dense retrieval embeds "jacobian and robotic arm" as one phrase and ranks plain conjunctions
better than the product of two soft similarities (``bench/quality/results/frontier.md``). So, with
``and_text`` = w > 0, every AND node with two or more positive operands also scores each
document against the text of those operands as one phrase (:func:`pglogic.query.to_text`:
``jacobian and robotic arm``; negated operands are left out, their terms are scored as they
are), and that phrase's truth joins the AND ``w`` more times in a plain conjunction and once
in an AND that also has a negated operand (there a heavier phrase would outweigh the NOT): with
the product AND, ``AND(a, b) = a·b·f^w`` and ``AND(a, b, NOT c) = a·b·f·NOT(c)``. The phrase is
one more scored text: one more vector and one more similarity per candidate, no index scan
(candidates still come from the terms' and the guide's scans). ``w = 0`` scores the formula
alone.

Example:
    >>> from pglogic.query import parse, to_string
    >>> tree = parse('"jacobian" AND "robotic arm" AND NOT "welding"')
    >>> and_texts(tree)
    ['jacobian and robotic arm']
    >>> to_string(with_and_texts(tree, 2))  # beside a NOT: once
    '"jacobian" AND "robotic arm" AND NOT "welding" AND "jacobian and robotic arm"'
    >>> to_string(with_and_texts(parse('"jacobian" AND "robotic arm"'), 2))
    '"jacobian" AND "robotic arm" AND "jacobian and robotic arm" AND "jacobian and robotic arm"'
"""

from __future__ import annotations

from collections.abc import Sequence

from pglogic.engine import defaults
from pglogic.query import (
    And,
    Match,
    Node,
    Not,
    Or,
    Term,
    negated_only_terms,
    semantic_part,
    terms,
    to_text,
)

__all__ = [
    "DEFAULT_AND_TEXT",
    "MAX_AND_TEXT",
    "OWN_IN_DISJUNCTION",
    "and_texts",
    "negated_and_texts",
    "own_weights",
    "scored_terms",
    "with_and_texts",
    "with_phrases",
]

DEFAULT_AND_TEXT = defaults.AND_TEXT
"""The default weight of an AND's own text (:data:`pglogic.engine.defaults.AND_TEXT`)."""

OWN_IN_DISJUNCTION = 0.1
"""Under the passage score ``blend-not-or``, the document's own vector's weight beside the best
passage in a formula with neither a negated term nor an AND of two positive texts (a
disjunction, or one term; lexical terms count as neither): the choice of the fold that leaves
Stack Exchange out in ``bench/quality/results/family_losses.md`` (Stack Exchange's ``OR`` queries
ranked below one vector per document). The SQL function writes it as ``(best * 9 + own) / 10``."""

MAX_AND_TEXT = 10
"""The largest weight accepted."""


def _phrase(node: And) -> str | None:
    """The text of an AND's positive operands, when it has two or more (lexical terms left out:
    the phrase is embedded)."""
    positive = [
        p for c in node.children if not isinstance(c, Not) and (p := semantic_part(c)) is not None
    ]
    if len(positive) < 2:
        return None
    return to_text(And(tuple(positive)))


def and_texts(tree: Node) -> list[str]:
    """The phrases of every AND node with two or more positive operands, in tree order, once.

    Example:
        >>> from pglogic.query import parse
        >>> and_texts(parse('("a" AND "b" OR "c") AND "d"'))
        ['(a and b or c) and d', 'a and b']
        >>> and_texts(parse('"a" AND NOT "b" OR "c"'))
        []
    """
    return list(_and_text_polarity(tree))


def _and_text_polarity(tree: Node) -> dict[str, bool]:
    """Each phrase of :func:`and_texts` (in its order): True when one of its ANDs sits under an
    even number of NOTs."""
    positive: dict[str, bool] = {}

    def walk(node: Node, pos: bool) -> None:
        if isinstance(node, Term | Match):
            return
        if isinstance(node, Not):
            walk(node.child, not pos)
            return
        if isinstance(node, And):
            phrase = _phrase(node)
            if phrase is not None:
                positive[phrase] = positive.get(phrase, False) or pos
        for child in node.children:
            walk(child, pos)

    walk(tree, True)
    return positive


def negated_and_texts(tree: Node) -> list[str]:
    """The phrases of :func:`and_texts` whose every AND sits under an odd number of NOTs: the
    AND texts a passage score treats as negated (they keep their best passage).

    Example:
        >>> from pglogic.query import parse
        >>> negated_and_texts(parse('"a" AND NOT ("b" AND "c")'))
        ['b and c']
        >>> negated_and_texts(parse('"a" AND "b" AND NOT "c"'))
        []
    """
    return [p for p, pos in _and_text_polarity(tree).items() if not pos]


def own_weights(tree: Node, texts: Sequence[str | None], passage_score: str) -> list[float]:
    """The weight of the document's own vector in each of ``texts``' similarity (scored for
    ``tree``; None: a text of no polarity, e.g. SQO's guide), beside its best passage's, under
    ``passage_score``:

    * ``blend``, and ``blend-not`` / ``blend-not-or`` in a formula with a negated-only term:
      0.5 (the mean) for every text but the negated-only terms and the AND texts under NOTs only
      (they keep their best passage: 0);
    * ``blend-not-or`` in a formula with neither a negated-only term nor an AND of two positive
      texts (:func:`and_texts` empty: a disjunction, or one term): :data:`OWN_IN_DISJUNCTION`
      for every text;
    * otherwise (``max``, and plain conjunctions): 0.

    Example:
        >>> from pglogic.query import parse
        >>> tree = parse('"a" AND NOT ("b" AND "c")')
        >>> own_weights(tree, ["a", "b", "c", "b and c"], "blend-not-or")
        [0.5, 0.0, 0.0, 0.0]
        >>> own_weights(parse('"a" OR "b"'), ["a", "b"], "blend-not-or")
        [0.1, 0.1]
        >>> own_weights(parse('"a" AND "b"'), ["a", "b", "a and b"], "blend-not-or")
        [0.0, 0.0, 0.0]
    """
    negated = set(negated_only_terms(tree))
    if passage_score == "blend" or (passage_score in ("blend-not", "blend-not-or") and negated):
        negated |= set(negated_and_texts(tree)) - set(terms(tree))
        return [0.0 if t in negated else 0.5 for t in texts]
    if passage_score == "blend-not-or" and not negated and not and_texts(tree):
        return [OWN_IN_DISJUNCTION] * len(texts)
    return [0.0] * len(texts)


def with_and_texts(tree: Node, weight: int, beside_not: int | None = None) -> Node:
    """The tree the score is computed from: each AND (two or more positive operands) gets its
    phrase as ``weight`` more operands, or ``beside_not`` (default: one, at most ``weight``)
    when the AND has a negated operand too. ``weight = 0`` returns ``tree`` itself.

    Only the score uses this tree: candidates, the guide and the explanation use the user's.

    Example:
        >>> from pglogic.query import parse, to_string
        >>> to_string(with_and_texts(parse('"a" AND "b" OR "c"'), 1))
        '"a" AND "b" AND "a and b" OR "c"'
        >>> to_string(with_and_texts(parse('"a" AND "b" AND NOT "c"'), 2, beside_not=0))
        '"a" AND "b" AND NOT "c"'
    """
    if weight <= 0:
        return tree
    near_not = min(weight, 1) if beside_not is None else beside_not

    def walk(node: Node) -> Node:
        if isinstance(node, Term | Match):
            return node
        if isinstance(node, Not):
            return Not(walk(node.child))
        children = tuple(walk(c) for c in node.children)
        if isinstance(node, Or):
            return Or(children)
        assert isinstance(node, And)
        phrase = _phrase(node)
        if phrase is None:
            return And(children)
        negated = any(isinstance(c, Not) for c in node.children)
        return And(children + (Term(phrase),) * (near_not if negated else weight))

    return walk(tree)


def scored_terms(tree: Node, weight: int) -> list[str]:
    """Every text a document is scored against: the query's terms, then (weight > 0) the AND
    phrases that are not already terms.

    Example:
        >>> from pglogic.query import parse
        >>> scored_terms(parse('"a" AND "b"'), 2), scored_terms(parse('"a" AND "b"'), 0)
        (['a', 'b', 'a and b'], ['a', 'b'])
    """
    return with_phrases(terms(tree), and_texts(tree) if weight > 0 else [])


def with_phrases(query_terms: Sequence[str], phrases: Sequence[str]) -> list[str]:
    """``query_terms``, then the AND ``phrases`` that are not already terms (once each).

    Example:
        >>> with_phrases(["a", "b", "a and b"], ["a and b", "x"])
        ['a', 'b', 'a and b', 'x']
    """
    out = dict.fromkeys(query_terms)
    for phrase in phrases:
        out.setdefault(phrase)
    return list(out)
