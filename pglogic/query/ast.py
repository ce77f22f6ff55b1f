"""Abstract syntax tree of logical queries: frozen, n-ary :class:`Term`, :class:`Match`,
:class:`Not`, :class:`And` and :class:`Or` nodes.

A :class:`Term` is semantic (its truth comes from the similarity of a document's embedding to the
term's), a :class:`Match` lexical (its truth comes from the document's words: written
``match:"wheat"``).

Every node carries a ``span`` (0-based ``(start, end)`` offsets into the source text, end
exclusive) that is ignored by ``==``, ``hash`` and ``repr``, so two trees compare equal when they
have the same structure, wherever they came from:

    >>> from pglogic.query import parse
    >>> parse('"a"  AND  "b"') == And((Term("a"), Term("b")))
    True
    >>> parse('("a" AND "b")').span
    (0, 13)

``And`` and ``Or`` are n-ary and hold at least two children. The parser flattens chains of the
same operator (``"a" AND ("b" AND "c")`` is one ``And`` with three children); this is the
canonical form, and every fuzzy operator in :mod:`pglogic.engine.operators` is associative, so flattening
never changes a score.

``Term.text`` is never blank and never has surrounding whitespace; the constructors check the
invariants that the printer relies on to round-trip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeAlias, cast

__all__ = [
    "And",
    "Match",
    "Node",
    "Not",
    "Or",
    "Term",
    "flatten",
    "leaves",
    "map_terms",
    "matches",
    "negated_only_terms",
    "positive_matches",
    "positive_terms",
    "quote_term",
    "semantic_part",
    "terms",
    "to_string",
]

Span: TypeAlias = tuple[int, int]


class _NodeBase:
    """Shared behaviour of all nodes: ``str(node)`` is the canonical query text."""

    __slots__ = ()

    def __str__(self) -> str:
        return to_string(cast("Node", self))


@dataclass(frozen=True)
class Term(_NodeBase):
    """A quoted search term; its score is the similarity of the document to ``text``.

    Example:
        >>> Term("vitamin D")
        Term(text='vitamin D')
        >>> print(Term('say "hi"'))
        "say \\"hi\\""
    """

    text: str
    span: Span = field(default=(0, 0), compare=False, hash=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Term text must be a str, not {type(self.text).__name__}")
        if not self.text or self.text != self.text.strip():
            raise ValueError(
                f"Term text must be non-blank without surrounding spaces: {self.text!r}"
            )


@dataclass(frozen=True)
class Match(_NodeBase):
    """A lexical term (``match:"wheat"``): true for the documents whose words match ``text``.

    ``text`` is a word or a phrase (its words in this order, next to each other), matched by
    PostgreSQL's full-text search with the corpus's text search configuration. Its truth value
    is 1 or 0 (``lexical="crisp"``), or the document's normalised rank (``lexical="rank"``).

    Example:
        >>> Match("SKU-4410")
        Match(text='SKU-4410')
        >>> print(Match("Basel III"))
        match:"Basel III"
    """

    text: str
    span: Span = field(default=(0, 0), compare=False, hash=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Match text must be a str, not {type(self.text).__name__}")
        if not self.text or self.text != self.text.strip():
            raise ValueError(
                f"Match text must be non-blank without surrounding spaces: {self.text!r}"
            )


@dataclass(frozen=True)
class Not(_NodeBase):
    """Negation of a subtree.

    Example:
        >>> print(Not(Term("bone health")))
        NOT "bone health"
        >>> print(Not(Not(Term("x"))))
        NOT NOT "x"
    """

    child: Node
    span: Span = field(default=(0, 0), compare=False, hash=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        _check_node(self.child)


def _children(kind: str, children: Iterable[Node]) -> tuple[Node, ...]:
    result = tuple(children)
    if len(result) < 2:
        raise ValueError(f"{kind} needs at least two children, got {len(result)}")
    for child in result:
        _check_node(child)
    return result


def _check_node(node: object) -> None:
    if not isinstance(node, Term | Match | Not | And | Or):
        raise TypeError(f"Expected a query node, not {type(node).__name__}")


@dataclass(frozen=True)
class And(_NodeBase):
    """Conjunction of two or more subtrees.

    Example:
        >>> print(And((Term("a"), Or((Term("b"), Term("c"))))))
        "a" AND ("b" OR "c")
    """

    children: tuple[Node, ...]
    span: Span = field(default=(0, 0), compare=False, hash=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", _children("And", self.children))


@dataclass(frozen=True)
class Or(_NodeBase):
    """Disjunction of two or more subtrees.

    Example:
        >>> print(Or((Term("a"), And((Term("b"), Term("c"))))))
        "a" OR "b" AND "c"
    """

    children: tuple[Node, ...]
    span: Span = field(default=(0, 0), compare=False, hash=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", _children("Or", self.children))


Node: TypeAlias = Term | Match | Not | And | Or
"""Any query node."""

Leaf: TypeAlias = Term | Match
"""A semantic or a lexical term."""


def _polarities(node: Node, kind: type[Leaf] = Term) -> dict[str, bool]:
    """Map each distinct text of the leaves of ``kind`` (first-appearance order) to whether it
    occurs positively."""
    seen: dict[str, bool] = {}
    stack: list[tuple[Node, bool]] = [(node, True)]
    while stack:
        current, positive = stack.pop()
        if isinstance(current, Term | Match):
            if isinstance(current, kind):
                seen[current.text] = seen.get(current.text, False) or positive
        elif isinstance(current, Not):
            stack.append((current.child, not positive))
        else:
            stack.extend((child, positive) for child in reversed(current.children))
    return seen


def terms(node: Node) -> list[str]:
    """Return the distinct (semantic) term texts of a tree in order of first appearance.

    Example:
        >>> from pglogic.query import parse
        >>> terms(parse('"a" AND NOT ("b" OR "a")'))
        ['a', 'b']
    """
    return list(_polarities(node))


def positive_terms(node: Node) -> list[str]:
    """Return the distinct terms that occur at least once under an even number of NOTs.

    These are the terms that can raise a document's score (every AND and OR operator is
    increasing and every NOT is decreasing), so only they can generate candidates.

    Example:
        >>> from pglogic.query import parse
        >>> positive_terms(parse('"a" AND NOT "b" AND NOT NOT "c" OR NOT "a"'))
        ['a', 'c']
    """
    return [text for text, positive in _polarities(node).items() if positive]


def negated_only_terms(node: Node) -> list[str]:
    """Return the distinct terms that occur only under an odd number of NOTs.

    Example:
        >>> from pglogic.query import parse
        >>> negated_only_terms(parse('"a" AND NOT "b" AND NOT NOT "c"'))
        ['b']
    """
    return [text for text, positive in _polarities(node).items() if not positive]


def matches(node: Node) -> list[str]:
    """Return the distinct lexical term (:class:`Match`) texts in order of first appearance.

    Example:
        >>> from pglogic.query import parse
        >>> matches(parse('"grain" AND NOT (match:wheat OR match:"durum wheat" OR match:wheat)'))
        ['wheat', 'durum wheat']
    """
    return list(_polarities(node, Match))


def positive_matches(node: Node) -> list[str]:
    """Return the distinct lexical terms that occur at least once under an even number of NOTs:
    the ones whose matching documents can raise a score, so they generate candidates.

    Example:
        >>> from pglogic.query import parse
        >>> positive_matches(parse('match:grain AND NOT match:wheat'))
        ['grain']
    """
    return [text for text, positive in _polarities(node, Match).items() if positive]


def map_terms(
    node: Node, fn: Callable[[str], str], match_fn: Callable[[str], str] | None = None
) -> Node:
    """The same tree with every term's text replaced by ``fn(text)`` (and every lexical term's
    by ``match_fn(text)``; lexical terms are kept as they are when it is None).

    Example:
        >>> from pglogic.query import parse
        >>> str(map_terms(parse('"Oil" AND NOT "Gas" OR match:Tax'), str.lower))
        '"oil" AND NOT "gas" OR match:"Tax"'
    """
    if isinstance(node, Term):
        return Term(fn(node.text))
    if isinstance(node, Match):
        return node if match_fn is None else Match(match_fn(node.text))
    if isinstance(node, Not):
        return Not(map_terms(node.child, fn, match_fn))
    children = tuple(map_terms(c, fn, match_fn) for c in node.children)
    return And(children) if isinstance(node, And) else Or(children)


def leaves(node: Node) -> list[Leaf]:
    """Every term and lexical term of the tree, in query order (repeats included).

    Example:
        >>> from pglogic.query import parse
        >>> [str(n) for n in leaves(parse('"a" AND NOT (match:b OR "a")'))]
        ['"a"', 'match:"b"', '"a"']
    """
    if isinstance(node, Term | Match):
        return [node]
    if isinstance(node, Not):
        return leaves(node.child)
    return [leaf for child in node.children for leaf in leaves(child)]


def semantic_part(node: Node) -> Node | None:
    """The tree without its lexical terms (None when nothing else is left): what the guide
    vector and the AND texts are computed from. An AND or OR left with one operand is that
    operand; a NOT of nothing is nothing.

    Example:
        >>> from pglogic.query import parse
        >>> print(semantic_part(parse('"grain" AND NOT match:wheat OR "corn" AND "oil"')))
        "grain" OR "corn" AND "oil"
        >>> semantic_part(parse('match:a OR NOT match:b')) is None
        True
    """
    if isinstance(node, Term):
        return node
    if isinstance(node, Match):
        return None
    if isinstance(node, Not):
        child = semantic_part(node.child)
        return None if child is None else Not(child)
    kept = [c for c in (semantic_part(child) for child in node.children) if c is not None]
    if not kept:
        return None
    if len(kept) == 1:
        return kept[0]
    return And(tuple(kept)) if isinstance(node, And) else Or(tuple(kept))


def quote_term(text: str) -> str:
    """Return ``text`` as a double-quoted query term, escaping ``\\`` and ``"``.

    Example:
        >>> print(quote_term('say "hi" \\\\o/'))
        "say \\"hi\\" \\\\o/"
    """
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def flatten(node: And | Or) -> list[Node]:
    """Children of ``node`` with nested nodes of the same class spliced in.

    Example:
        >>> flatten(And((And((Term("a"), Term("b"))), Term("c"))))
        [Term(text='a'), Term(text='b'), Term(text='c')]
    """
    result: list[Node] = []
    stack: list[Node] = list(reversed(node.children))
    while stack:
        child = stack.pop()
        if type(child) is type(node):
            assert isinstance(child, And | Or)
            stack.extend(reversed(child.children))
        else:
            result.append(child)
    return result


def to_string(node: Node) -> str:
    """Return the canonical text of a query tree.

    Example:
        >>> to_string(And((Or((Term("a"), Term("b"))), Not(Term("c")))))
        '("a" OR "b") AND NOT "c"'
        >>> to_string(Or((Term("a"), And((Term("b"), Term("c"))))))
        '"a" OR "b" AND "c"'
    """
    if isinstance(node, Term):
        return quote_term(node.text)
    if isinstance(node, Match):
        return "match:" + quote_term(node.text)
    if isinstance(node, Not):
        inner = to_string(node.child)
        return f"NOT ({inner})" if isinstance(node.child, And | Or) else f"NOT {inner}"
    if isinstance(node, And):
        parts = [
            f"({to_string(child)})" if isinstance(child, Or) else to_string(child)
            for child in flatten(node)
        ]
        return " AND ".join(parts)
    return " OR ".join(to_string(child) for child in flatten(node))
