"""Recursive-descent parser for the ITLR query grammar, one method per precedence level.

Grammar (precedence NOT > AND > OR, parentheses override it)::

    T → U (OR U)*          disjunction
    U → V (AND V)*         conjunction
    V → NOT V | W          negation (NOT NOT "x" is kept as two NOTs)
    W → term | match | ( T )   quoted term, lexical term (match:"...") or parenthesized query

Chains of the same operator are flattened into one n-ary node, also across parentheses. Every
error is a :class:`~pglogic.errors.QuerySyntaxError` whose message ends with the 1-based column of
the offending token; the lexer is lazy, so the leftmost error is reported.

    >>> print(parse('"dog" OR "cat" and "mouse"'))
    "dog" OR "cat" AND "mouse"
    >>> parse('"a" "b"')
    Traceback (most recent call last):
    ...
    pglogic.errors.QuerySyntaxError: Expected AND, OR or end of query at col 5
"""

from __future__ import annotations

import dataclasses
import re

from pglogic.errors import PglogicError, QueryError, QuerySyntaxError
from pglogic.query.ast import And, Match, Node, Not, Or, Term, quote_term
from pglogic.query.lexer import Lexer, Token, TokenKind

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_TERMS",
    "parse",
    "plain_text_note",
    "quoted_form",
    "to_tree",
]

DEFAULT_MAX_TERMS = 32
"""Default limit on the number of term occurrences in one query."""

DEFAULT_MAX_DEPTH = 100
"""Default limit on nesting: open parentheses plus NOTs enclosing any point of the query."""


class _Parser:
    def __init__(self, query: str, max_terms: int, max_depth: int) -> None:
        self.query = query
        self.max_terms = max_terms
        self.max_depth = max_depth
        self.lexer = Lexer(query)
        self.tok = self.lexer.next()
        self.depth = 0
        self.term_count = 0
        self.first_over_limit = 0

    # -- helpers -------------------------------------------------------------------------------

    def error(self, message: str, col: int, hint: str = "") -> QuerySyntaxError:
        text = f"{message} at col {col}{': ' + hint if hint else ''}"
        return QuerySyntaxError(text, query=self.query, column=col)

    def advance(self) -> Token:
        token = self.tok
        self.tok = self.lexer.next()
        return token

    def unexpected_word(self, token: Token) -> QuerySyntaxError:
        return self.error(f"Unexpected word '{token.value}'", token.col, "terms must be quoted")

    def after_operand(self, expected: str) -> QuerySyntaxError:
        """Error for a token that cannot follow a complete operand."""
        token = self.tok
        if token.kind is TokenKind.WORD:
            return self.unexpected_word(token)
        hint = "did you mean AND NOT?" if token.kind is TokenKind.NOT else ""
        return self.error(f"Expected AND, OR or {expected}", token.col, hint)

    # -- grammar -------------------------------------------------------------------------------

    def parse(self) -> Node:
        if not self.query.strip():
            raise QuerySyntaxError("Empty query", query=self.query, column=1)
        node = self.parse_or(None)
        token = self.tok
        if token.kind is TokenKind.RPAREN:
            raise self.error("Unbalanced )", token.col)
        if token.kind is not TokenKind.EOF:
            raise self.after_operand("end of query")
        if self.term_count > self.max_terms:
            raise self.error(
                f"Too many terms: {self.term_count} (limit is {self.max_terms})",
                self.first_over_limit,
            )
        return node

    def parse_or(self, after: Token | None) -> Node:
        items = [self.parse_and(after)]
        while self.tok.kind is TokenKind.OR:
            op = self.advance()
            items.append(self.parse_and(op))
        if len(items) == 1:
            return items[0]
        children: list[Node] = []
        for item in items:
            children.extend(item.children if isinstance(item, Or) else (item,))
        return Or(tuple(children), span=(items[0].span[0], items[-1].span[1]))

    def parse_and(self, after: Token | None) -> Node:
        items = [self.parse_not(after)]
        while self.tok.kind is TokenKind.AND:
            op = self.advance()
            items.append(self.parse_not(op))
        if len(items) == 1:
            return items[0]
        children: list[Node] = []
        for item in items:
            children.extend(item.children if isinstance(item, And) else (item,))
        return And(tuple(children), span=(items[0].span[0], items[-1].span[1]))

    def parse_not(self, after: Token | None) -> Node:
        if self.tok.kind is not TokenKind.NOT:
            return self.parse_atom(after)
        op = self.advance()
        self.depth += 1
        if self.depth > self.max_depth:
            raise self.error("NOTs nested too deeply", op.col)
        child = self.parse_not(op)
        self.depth -= 1
        return Not(child, span=(op.start, child.span[1]))

    def parse_atom(self, after: Token | None) -> Node:
        token = self.tok
        if token.kind is TokenKind.TERM or token.kind is TokenKind.MATCH:
            self.advance()
            self.term_count += 1
            if self.term_count == self.max_terms + 1:
                self.first_over_limit = token.col
            leaf = Term if token.kind is TokenKind.TERM else Match
            return leaf(token.value, span=(token.start, token.end))
        if token.kind is TokenKind.LPAREN:
            return self.parse_parenthesized()
        if token.kind is TokenKind.WORD:
            raise self.unexpected_word(token)
        if after is None:
            if token.kind is TokenKind.RPAREN:
                raise self.error("Unbalanced )", token.col)
            raise self.error("Expected a quoted term", token.col)
        col = after.col if token.kind is TokenKind.EOF else token.col
        raise self.error(f"Expected a quoted term after {after.kind.value}", col)

    def parse_parenthesized(self) -> Node:
        opening = self.advance()
        self.depth += 1
        if self.depth > self.max_depth:
            raise self.error("Parentheses nested too deeply", opening.col)
        inner = self.parse_or(opening)
        if self.tok.kind is TokenKind.EOF:
            raise self.error("Expected ) to close (", opening.col)
        if self.tok.kind is not TokenKind.RPAREN:
            raise self.after_operand(")")
        closing = self.advance()
        self.depth -= 1
        return dataclasses.replace(inner, span=(opening.start, closing.end))


def parse(
    query: str, *, max_terms: int = DEFAULT_MAX_TERMS, max_depth: int = DEFAULT_MAX_DEPTH
) -> Node:
    """Parse a logical query into its canonical tree.

    ``max_terms`` limits the number of term occurrences (each costs one similarity per candidate)
    and ``max_depth`` the nesting of parentheses and NOTs. Raises
    :class:`~pglogic.errors.QuerySyntaxError` on any malformed input, and nothing else.

    Example:
        >>> parse('("a" OR "b") AND NOT "c"')
        And(children=(Or(children=(Term(text='a'), Term(text='b'))), Not(child=Term(text='c'))))
        >>> parse('"a" AND NOT')
        Traceback (most recent call last):
        ...
        pglogic.errors.QuerySyntaxError: Expected a quoted term after NOT at col 9
    """
    if max_terms < 1 or max_depth < 0:
        raise ValueError("max_terms must be >= 1 and max_depth >= 0")
    return _Parser(query, max_terms, max_depth).parse()


_OPERATOR_WORD = re.compile(r"\b(AND|OR|NOT)\b")
_PARENS = re.compile(r"^(\(*)\s*(.*?)\s*(\)*)$", re.S)


def quoted_form(text: str) -> str | None:
    """The logical query a plain text (one that :func:`to_tree` takes as a single dense term)
    probably meant when it uses AND, OR or NOT as words: the same words with the operands
    quoted; None when it has no such word or the result would not parse. A suggestion to show,
    never a query to run in the text's place.

    Example:
        >>> print(quoted_form("grain AND NOT wheat"))
        "grain" AND NOT "wheat"
        >>> print(quoted_form("(gold OR silver) AND NOT mining stocks"))
        ("gold" OR "silver") AND NOT "mining stocks"
        >>> quoted_form("oil prices") is None, quoted_form("oil AND") is None
        (True, True)
    """
    parts = _OPERATOR_WORD.split(text)
    if len(parts) == 1:
        return None
    out: list[str] = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(part)
            continue
        m = _PARENS.match(part.strip())
        if m and m.group(2):
            out.append(m.group(1) + quote_term(m.group(2)) + m.group(3))
        elif m and (m.group(1) or m.group(3)):
            out.append(m.group(1) + m.group(3))
    suggestion = " ".join(out)
    try:
        parse(suggestion)
    except PglogicError:
        return None
    return suggestion


#: Words of plain text that ask to exclude something, which a dense search cannot do.
_EXCLUDING = re.compile(r"\b(not|without|except|excluding|besides|other than)\b", re.I)


def plain_text_note(query: str) -> str | None:
    """What to tell the caller when ``query`` seems to ask for logic but runs as one plain
    dense term (:func:`to_tree` reads it so): the quoted form when it uses AND, OR or NOT as
    words (:func:`quoted_form`), that a dense search cannot exclude when it says "not",
    "without", "except", ...; else None. The query runs as it was given either way.

    Example:
        >>> print(plain_text_note("grain AND NOT wheat"))
        Without quotes this is one plain dense search of the whole text; for the logic, quote the terms: "grain" AND NOT "wheat"
        >>> plain_text_note("oil prices") is None, plain_text_note('"a" AND "b"') is None
        (True, True)
    """
    try:
        if not isinstance(to_tree(query), Term) or '"' in query:
            return None
    except PglogicError:  # (not a query: its own error says so)
        return None
    if suggestion := quoted_form(query):
        return (
            "Without quotes this is one plain dense search of the whole text; for the logic, "
            f"quote the terms: {suggestion}"
        )
    if _EXCLUDING.search(query):
        return (
            "Without quotes this is one plain dense search of the whole text, which cannot "
            'exclude anything: write quoted terms with AND NOT, like "grain" AND NOT "wheat"'
        )
    return None


def to_tree(query: str | Node, *, max_terms: int = 32) -> Node:
    """Parse ``query`` as a logical query, or take it as one plain term.

    It is logical when it contains a double quote or starts with ``'``, ``(``, ``NOT`` or
    ``match:``; so ``children's books`` is plain text and ``'a' AND 'b'`` is logical.

    Example:
        >>> to_tree("oil prices")
        Term(text='oil prices')
        >>> to_tree("children's books")
        Term(text="children's books")
        >>> str(to_tree('"a" and not "b"'))
        '"a" AND NOT "b"'
        >>> to_tree("match:SKU-4410")
        Match(text='SKU-4410')
    """
    if not isinstance(query, str):
        if isinstance(query, And | Or | Not | Term | Match):
            return query
        raise QueryError(f"Invalid query {query!r}: expected a string or a query tree")
    head = query.lstrip()[:4].upper()
    logical = (
        '"' in query
        or head[:1] in ("'", "(")
        or head in ("NOT ", "NOT(")
        or query.lstrip()[:6].lower() == "match:"
    )
    if not logical:
        text = query.strip()
        if not text:
            raise QueryError("Empty query")
        if "\x00" in text:
            col = query.index("\x00") + 1
            raise QuerySyntaxError(
                f"A query cannot contain a NUL character (\\x00) at col {col}",
                query=query,
                column=col,
            )
        return Term(text)
    return parse(query, max_terms=max_terms)
