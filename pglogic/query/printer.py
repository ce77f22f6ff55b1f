"""Printers: the canonical text (the inverse of :func:`~pglogic.query.parser.parse`, defined
next to the nodes as ``str(node)`` uses it) and the natural-language text.

Terms are always double-quoted (``"`` and ``\\`` escaped with a backslash), operators are upper
case, tokens are separated by single spaces and parentheses appear only where precedence needs
them (an OR inside an AND, an AND or OR inside a NOT). Nested nodes of the same operator are printed
flat, which is the form the parser produces, so for every tree ``t``::

    to_string(parse(to_string(t))) == to_string(t)

and ``parse(to_string(t)) == t`` when ``t`` is canonical (no AND directly inside an AND, no OR
directly inside an OR).

    >>> from pglogic.query import parse
    >>> to_string(parse("(('a'))  or  not ('b' and \\"c\\")"))
    '"a" OR NOT ("b" AND "c")'
"""

from __future__ import annotations

from pglogic.query.ast import And, Match, Node, Not, Or, Term, flatten, quote_term, to_string

__all__ = ["quote_term", "to_string", "to_text"]


def to_text(tree: Node) -> str:
    """Render a formula as one natural-language string (the dense baseline's query, NSFL's fused query).

    AND → ``and``, OR → ``or``, a NOT directly under an AND → ``but not`` (``and not`` right
    after another negated operand, ``not`` as the first operand), any other NOT → ``not``;
    parentheses only where precedence needs them (an OR under an AND, an AND/OR under a NOT).

    Example:
        >>> from pglogic.query import parse
        >>> to_text(parse('"grain" AND "wheat" AND NOT "corn"'))
        'grain and wheat but not corn'
        >>> to_text(parse('"crude" OR "natural gas"'))
        'crude or natural gas'
        >>> to_text(parse('("a" OR "b") AND NOT "c" AND NOT "d" OR NOT ("e" AND "f")'))
        '(a or b) but not c and not d or not (e and f)'
    """
    if isinstance(tree, Term | Match):
        return tree.text
    if isinstance(tree, Not):
        inner = to_text(tree.child)
        return f"not ({inner})" if isinstance(tree.child, And | Or) else f"not {inner}"
    if isinstance(tree, Or):
        return " or ".join(to_text(child) for child in flatten(tree))
    parts: list[str] = []
    after_not = False
    for i, child in enumerate(flatten(tree)):
        if isinstance(child, Not):
            word = "not" if i == 0 else ("and not" if after_not else "but not")
            inner = to_text(child.child)
            parts.append(
                f"{word} ({inner})" if isinstance(child.child, And | Or) else f"{word} {inner}"
            )
            after_not = True
        else:
            inner = to_text(child)
            inner = f"({inner})" if isinstance(child, Or) else inner
            parts.append(inner if i == 0 else f"and {inner}")
            after_not = False
    return " ".join(parts)
