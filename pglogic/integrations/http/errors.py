"""Errors of the HTTP API: one JSON shape, ``{"error": {"type": ..., "message": ...}}``, and the
status code of every library error.

Example:
    >>> error_body("unknown_corpus", "Unknown corpus 'x'")
    {'error': {'type': 'unknown_corpus', 'message': "Unknown corpus 'x'"}}
"""

from __future__ import annotations

from typing import Any

from pglogic.errors import (
    ConfigError,
    DatabaseUnavailable,
    EmbeddingError,
    InvalidInput,
    LLMError,
    PglogicError,
    QueryError,
    QuerySyntaxError,
    SchemaError,
    SearchTimeout,
    UnknownCorpus,
)

__all__ = ["ApiError", "error_body", "from_pglogic_error"]


class ApiError(Exception):
    """An error answered as JSON with ``status``, ``type`` and a message (plus ``extra``).

    Example:
        >>> ApiError(503, "llm_unavailable", "No LLM endpoint configured").status
        503
    """

    def __init__(self, status: int, kind: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.extra = extra


def error_body(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of every error.

    Example:
        >>> error_body("unknown_corpus", "Unknown corpus 'x'")
        {'error': {'type': 'unknown_corpus', 'message': "Unknown corpus 'x'"}}
    """
    return {"error": {"type": kind, "message": message, **extra}}


def from_pglogic_error(exc: PglogicError) -> ApiError:
    """The HTTP answer to a library error.

    Example:
        >>> from pglogic.query import parse
        >>> try:
        ...     parse('"a" AND NOT')
        ... except QuerySyntaxError as e:
        ...     err = from_pglogic_error(e)
        >>> err.status, err.kind, err.extra["column"], err.extra["position"]
        (400, 'query_syntax', 9, 8)
    """
    msg = str(exc)
    if isinstance(exc, QuerySyntaxError):
        return ApiError(400, "query_syntax", exc.message, column=exc.column,
                        position=exc.column - 1, query=exc.query)  # fmt: skip
    if isinstance(exc, UnknownCorpus):
        return ApiError(404, "unknown_corpus", msg)
    if isinstance(exc, SearchTimeout):
        return ApiError(503, "timeout", msg)
    if isinstance(exc, DatabaseUnavailable | SchemaError):
        return ApiError(503, "database_unavailable", msg)
    if isinstance(exc, LLMError):
        return ApiError(503, "llm_error", msg)
    if isinstance(exc, EmbeddingError):
        return ApiError(503, "embedding_unavailable", msg)
    if isinstance(exc, QueryError):
        return ApiError(400, "query_error", msg)
    if isinstance(exc, InvalidInput | ConfigError):
        return ApiError(400, "invalid_input", msg)
    return ApiError(400, "error", msg)
