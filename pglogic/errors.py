"""Error types. Every error a user can cause is a :class:`PglogicError` with one readable sentence.

The CLI prints ``str(error)`` (no traceback) and exits with :attr:`PglogicError.exit_code`.

Example:
    >>> try:
    ...     raise UnknownCorpus("Unknown corpus 'news'")
    ... except PglogicError as e:
    ...     print(e, e.exit_code)
    Unknown corpus 'news' 2
"""

from __future__ import annotations

import unicodedata


class PglogicError(Exception):
    """Base class for errors caused by input or environment, shown to users without a traceback."""

    exit_code: int = 2


class ConfigError(PglogicError):
    """Invalid configuration or options (bad DSN, bad flag values)."""


class DatabaseUnavailable(PglogicError):
    """Postgres cannot be reached, or lacks what pglogic needs (e.g. the vector extension)."""

    exit_code = 3


class ReadOnlyServer(DatabaseUnavailable):
    """A write (ingest, index, DDL, calibration, term cache, migration) sent to a read-only
    server: a hot-standby replica, or one with ``default_transaction_read_only``."""


class PermissionDenied(PglogicError):
    """The database role lacks a privilege the command needs (the message names it and who can
    grant it)."""

    exit_code = 3


class SchemaError(PglogicError):
    """The database schema is missing or at the wrong migration revision."""

    exit_code = 3


class UnknownCorpus(PglogicError):
    """A corpus name that does not exist."""


class CorpusExists(PglogicError):
    """A corpus name that already exists."""


class InvalidInput(PglogicError):
    """Bad input data: a record without text, non-UTF-8 bytes, a vector of the wrong dimension..."""


class EmbeddingError(PglogicError):
    """An embedding model that cannot be loaded or that produced unusable vectors."""


#: A query up to this long is shown whole by :meth:`QuerySyntaxError.pretty`; of a longer one,
#: this much before the column and after it.
_WHOLE, _BEFORE, _AFTER = 200, 120, 60


def _width(text: str) -> int:
    """Terminal columns of ``text``: two for a wide or full-width character, none for a combining
    mark or a zero-width format character, one otherwise."""
    return sum(
        0
        if unicodedata.category(c) in ("Mn", "Me", "Cf")
        else 2
        if unicodedata.east_asian_width(c) in ("W", "F")
        else 1
        for c in text
    )


class QuerySyntaxError(PglogicError):
    """A logical query that does not parse.

    ``column`` is 1-based; ``str(err)`` is the one-line message and :meth:`pretty` adds the query
    with a caret under the column.

    Example:
        >>> err = QuerySyntaxError("Unbalanced ) at col 5", query='"a" )', column=5)
        >>> print(err.pretty())
        Unbalanced ) at col 5
          "a" )
              ^
    """

    def __init__(self, message: str, *, query: str = "", column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.query = query
        self.column = column

    def pretty(self) -> str:
        """Return the message, the query and a caret under the offending column: control
        characters (tabs, newlines) shown as spaces, the caret placed by display width (a wide
        CJK character or emoji takes two columns, a combining mark none), and a long query cut
        to the part around the column.

        Example:
            >>> print(QuerySyntaxError("x", query='"日本"\tAND (', column=10).pretty())
            x
              "日本" AND (
                         ^
        """
        chars = [" " if unicodedata.category(c) == "Cc" else c for c in self.query]
        at = min(max(self.column - 1, 0), len(chars))
        start = 0 if len(chars) <= _WHOLE else max(0, at - _BEFORE)
        end = len(chars) if len(chars) <= _WHOLE else min(len(chars), start + _BEFORE + _AFTER)
        head = "…" if start > 0 else ""
        line = head + "".join(chars[start:end]) + ("…" if end < len(chars) else "")
        offset = _width(head) + sum(_width(c) for c in chars[start:at])
        return f"{self.message}\n  {line}\n  {' ' * offset}^"


class QueryError(PglogicError):
    """A query that parses but cannot be run as asked (e.g. no positive term without exact=True)."""


class LLMError(PglogicError):
    """The LLM endpoint failed: unreachable, too slow, refused the key, or answered an error.

    ``status`` is the HTTP status when the endpoint answered one; ``attempts`` the requests made.

    Example:
        >>> LLMError("Cannot reach the LLM endpoint http://127.0.0.1:8080/v1", attempts=3).exit_code
        3
    """

    exit_code = 3

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class SearchTimeout(PglogicError):
    """A search cancelled by the server after its ``timeout`` (``statement_timeout``)."""

    exit_code = 4


class PlainTextWarning(UserWarning):
    """A query without quotes that seems to ask for logic (AND, OR, NOT as words; "not",
    "without"): it runs as one plain dense search, and the warning says how to write the logic
    (:func:`pglogic.query.plain_text_note`).

    Example:
        >>> import warnings
        >>> warnings.simplefilter("error", PlainTextWarning)  # make it an error in tests
    """
