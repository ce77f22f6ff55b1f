"""Abstract syntax tree of logical queries: frozen, n-ary :class:`Term`, :class:`Not`, :class:`And`
and :class:`Or` nodes.

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
    "Node",
    "Not",
    "Or",
    "Term",
    "flatten",
    "map_terms",
    "negated_only_terms",
    "positive_terms",
    "quote_term",
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
    if not isinstance(node, Term | Not | And | Or):
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


Node: TypeAlias = Term | Not | And | Or
"""Any query node."""


def _polarities(node: Node) -> dict[str, bool]:
    """Map each distinct term text (first-appearance order) to whether it occurs positively."""
    seen: dict[str, bool] = {}
    stack: list[tuple[Node, bool]] = [(node, True)]
    while stack:
        current, positive = stack.pop()
        if isinstance(current, Term):
            seen[current.text] = seen.get(current.text, False) or positive
        elif isinstance(current, Not):
            stack.append((current.child, not positive))
        else:
            stack.extend((child, positive) for child in reversed(current.children))
    return seen


def terms(node: Node) -> list[str]:
    """Return the distinct term texts of a tree in order of first appearance.

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


def map_terms(node: Node, fn: Callable[[str], str]) -> Node:
    """The same tree with every term's text replaced by ``fn(text)``.

    Example:
        >>> from pglogic.query import parse
        >>> str(map_terms(parse('"Oil" AND NOT "Gas"'), str.lower))
        '"oil" AND NOT "gas"'
    """
    if isinstance(node, Term):
        return Term(fn(node.text))
    if isinstance(node, Not):
        return Not(map_terms(node.child, fn))
    children = tuple(map_terms(c, fn) for c in node.children)
    return And(children) if isinstance(node, And) else Or(children)


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
