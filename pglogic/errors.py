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
        """Return the message, the query and a caret under the offending column."""
        line = self.query.replace("\n", " ")
        return f"{self.message}\n  {line}\n  {' ' * (self.column - 1)}^"


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
