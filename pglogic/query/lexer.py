"""Tokenizer for logical queries.

Tokens are quoted terms, lexical terms (``match:`` right before a quoted phrase or a bare word:
``match:"Basel III"``, ``match:SKU-4410``), the operators ``AND``, ``OR`` and ``NOT`` (any letter
case), parentheses and bare words (which the parser rejects with a helpful message). Whitespace,
newlines included, separates tokens and is otherwise ignored.

Terms are enclosed in double or single quotes. Inside a term, ``\\"``, ``\\'`` and ``\\\\``
stand for ``"``, ``'`` and ``\\``; any other backslash is kept as it is. The text of a term is
stripped of surrounding whitespace and must not be blank.

The lexer is lazy (:meth:`Lexer.next`), so the parser reports the leftmost error of a query.

    >>> [(t.kind.name, t.value) for t in tokenize('NOT "a" and (\\'b\\')')]
    [('NOT', 'NOT'), ('TERM', 'a'), ('AND', 'and'), ('LPAREN', '('), ('TERM', 'b'), ('RPAREN', ')')]
    >>> [(t.kind.name, t.value) for t in tokenize('match:"Basel III" OR MATCH:astro-ph.CO')]
    [('MATCH', 'Basel III'), ('OR', 'OR'), ('MATCH', 'astro-ph.CO')]
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pglogic.errors import QuerySyntaxError

__all__ = ["Lexer", "Token", "TokenKind", "tokenize"]

_KEYWORDS = {"and": "AND", "or": "OR", "not": "NOT"}
_ESCAPABLE = frozenset("\"'\\")
#: The prefix of a lexical term (any letter case), followed by ``:``.
MATCH_PREFIX = "match"
#: What ends a bare word after ``match:``.
_BARE_END = frozenset("()\"'")


class TokenKind(enum.Enum):
    """The kinds of tokens.

    Example:
        >>> TokenKind.TERM.name
        'TERM'
    """

    TERM = "term"
    MATCH = "lexical term"
    AND = "AND"
    OR = "OR"
    NOT = "NOT"
    LPAREN = "("
    RPAREN = ")"
    WORD = "word"
    EOF = "end of query"


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind, its value (unescaped term text, or the source text) and its offsets.

    ``start`` and ``end`` are 0-based offsets into the query (end exclusive); :attr:`col` is the
    1-based column used in error messages.

    Example:
        >>> Token(TokenKind.TERM, "a", 4, 7).col
        5
    """

    kind: TokenKind
    value: str
    start: int
    end: int

    @property
    def col(self) -> int:
        """1-based column of the first character of the token."""
        return self.start + 1


def _is_word_start(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_-"


class Lexer:
    """Lazy tokenizer: each call to :meth:`next` returns the next token, then ``EOF`` forever.

    Example:
        >>> lexer = Lexer('"a" OR')
        >>> [lexer.next().kind.name for _ in range(3)]
        ['TERM', 'OR', 'EOF']
    """

    def __init__(self, query: str) -> None:
        self.query = query
        self.pos = 0

    def _error(self, message: str, start: int) -> QuerySyntaxError:
        return QuerySyntaxError(f"{message} at col {start + 1}", query=self.query, column=start + 1)

    def next(self) -> Token:
        """Return the next token, raising :class:`QuerySyntaxError` on a lexical error.

        Example:
            >>> Lexer("  (").next()
            Token(kind=<TokenKind.LPAREN: '('>, value='(', start=2, end=3)
        """
        query, n = self.query, len(self.query)
        pos = self.pos
        while pos < n and query[pos].isspace():
            pos += 1
        if pos >= n:
            self.pos = n
            return Token(TokenKind.EOF, "", n, n)
        ch = query[pos]
        if ch == "(" or ch == ")":
            self.pos = pos + 1
            kind = TokenKind.LPAREN if ch == "(" else TokenKind.RPAREN
            return Token(kind, ch, pos, pos + 1)
        if ch == '"' or ch == "'":
            return self._term(pos, ch)
        if _is_word_start(ch):
            end = pos + 1
            while end < n and _is_word_char(query[end]):
                end += 1
            word = query[pos:end]
            if end < n and query[end] == ":":
                return self._prefixed(word, pos, end + 1)
            self.pos = end
            keyword = _KEYWORDS.get(word.lower()) if word.isascii() else None
            kind = TokenKind(keyword) if keyword else TokenKind.WORD
            return Token(kind, word, pos, end)
        raise self._error(f"Unexpected character {ch!r}", pos)

    def _prefixed(self, prefix: str, start: int, pos: int) -> Token:
        """A lexical term: ``match:`` (at ``start``) then a quoted phrase or a bare word at
        ``pos``; any other ``word:`` is an error."""
        query, n = self.query, len(self.query)
        if prefix.lower() != MATCH_PREFIX:
            raise self._error(
                f"Unknown term kind '{prefix}:' (a lexical term is match:\"...\")", start
            )
        if pos < n and query[pos] in "\"'":
            term = self._term(pos, query[pos])
            return Token(TokenKind.MATCH, term.value, start, term.end)
        end = pos
        while end < n and not query[end].isspace() and query[end] not in _BARE_END:
            end += 1
        if end == pos:
            raise self._error("Expected a word or a quoted phrase right after match:", start)
        if "\x00" in query[pos:end]:
            raise self._error("A term cannot contain a NUL character (\\x00)", pos)
        self.pos = end
        return Token(TokenKind.MATCH, query[pos:end], start, end)

    def _term(self, start: int, quote: str) -> Token:
        query, n = self.query, len(self.query)
        chars: list[str] = []
        pos = start + 1
        while True:
            if pos >= n:
                raise self._error(f"Missing closing {quote} for term starting", start)
            ch = query[pos]
            if ch == quote:
                break
            if ch == "\x00":  # PostgreSQL text cannot hold it: say where, before any SQL
                raise self._error("A term cannot contain a NUL character (\\x00)", pos)
            if ch == "\\" and pos + 1 < n and query[pos + 1] in _ESCAPABLE:
                chars.append(query[pos + 1])
                pos += 2
                continue
            chars.append(ch)
            pos += 1
        self.pos = pos + 1
        text = "".join(chars).strip()
        if not text:
            raise self._error("Empty term", start)
        return Token(TokenKind.TERM, text, start, pos + 1)


def tokenize(query: str) -> list[Token]:
    """Return all tokens of ``query`` (without the final ``EOF``).

    Example:
        >>> [t.value for t in tokenize("'it\\\\'s' OR \\"x\\"")]
        ["it's", 'OR', 'x']
    """
    lexer = Lexer(query)
    tokens: list[Token] = []
    while (token := lexer.next()).kind is not TokenKind.EOF:
        tokens.append(token)
    return tokens
