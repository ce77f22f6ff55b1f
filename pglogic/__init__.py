"""pglogic: logical semantic retrieval inside PostgreSQL.

Write ``"vitamin D benefits" AND NOT "bone health"``; pglogic embeds each quoted term and ranks
documents by a fuzzy-logic combination of per-term cosine similarities, computed by one SQL
statement over pgvector HNSW indexes.

The names below load on first use, so ``import pglogic.query`` stays light.

Example:
    >>> from pglogic import PgLogic
    >>> PgLogic().search("news", '"oil" AND NOT "gas"').hits  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> module that defines it.
_EXPORTS = {
    "PgLogic": "pglogic.api",
    "CompiledQuery": "pglogic.engine.compile",
    "SearchOptions": "pglogic.engine.compile",
    "compile_query": "pglogic.engine.compile",
    "Comparison": "pglogic.engine.filters",
    "Contains": "pglogic.engine.filters",
    "parse_filters": "pglogic.engine.filters",
    "Corpus": "pglogic.engine.source",
    "PglogicError": "pglogic.errors",
    "PlainTextWarning": "pglogic.errors",
    "ConfigError": "pglogic.errors",
    "CorpusExists": "pglogic.errors",
    "DatabaseUnavailable": "pglogic.errors",
    "EmbeddingError": "pglogic.errors",
    "InvalidInput": "pglogic.errors",
    "LLMError": "pglogic.errors",
    "PermissionDenied": "pglogic.errors",
    "QueryError": "pglogic.errors",
    "QuerySyntaxError": "pglogic.errors",
    "ReadOnlyServer": "pglogic.errors",
    "SchemaError": "pglogic.errors",
    "SearchTimeout": "pglogic.errors",
    "UnknownCorpus": "pglogic.errors",
    "LLMConfig": "pglogic.llm.client",
    "AskResult": "pglogic.llm.rewrite",
    "And": "pglogic.query",
    "Node": "pglogic.query",
    "Not": "pglogic.query",
    "Or": "pglogic.query",
    "Term": "pglogic.query",
    "parse": "pglogic.query",
    "to_string": "pglogic.query",
    "CorpusInfo": "pglogic.store.corpus",
    "IndexProgress": "pglogic.store.corpus",
    "Document": "pglogic.store.documents",
    "IngestStats": "pglogic.store.ingest",
    "Deciding": "pglogic.store.passages",
    "FieldMap": "pglogic.store.readers",
    "Hit": "pglogic.store.search",
    "SearchResult": "pglogic.store.search",
}

if TYPE_CHECKING:
    from pglogic.api import PgLogic
    from pglogic.engine.compile import CompiledQuery, SearchOptions, compile_query
    from pglogic.engine.filters import Comparison, Contains, parse_filters
    from pglogic.engine.source import Corpus
    from pglogic.errors import (
        ConfigError,
        CorpusExists,
        DatabaseUnavailable,
        EmbeddingError,
        InvalidInput,
        LLMError,
        PermissionDenied,
        PglogicError,
        QueryError,
        QuerySyntaxError,
        ReadOnlyServer,
        SchemaError,
        SearchTimeout,
        UnknownCorpus,
    )
    from pglogic.llm.client import LLMConfig
    from pglogic.llm.rewrite import AskResult
    from pglogic.query import And, Node, Not, Or, Term, parse, to_string
    from pglogic.store.corpus import CorpusInfo, IndexProgress
    from pglogic.store.documents import Document
    from pglogic.store.ingest import IngestStats
    from pglogic.store.passages import Deciding
    from pglogic.store.readers import FieldMap
    from pglogic.store.search import Hit, SearchResult


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pglogic' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "And",
    "AskResult",
    "Comparison",
    "CompiledQuery",
    "ConfigError",
    "Contains",
    "Corpus",
    "CorpusExists",
    "CorpusInfo",
    "DatabaseUnavailable",
    "Deciding",
    "Document",
    "EmbeddingError",
    "FieldMap",
    "Hit",
    "IndexProgress",
    "IngestStats",
    "InvalidInput",
    "LLMConfig",
    "LLMError",
    "Node",
    "Not",
    "Or",
    "PermissionDenied",
    "PgLogic",
    "PglogicError",
    "PlainTextWarning",
    "QueryError",
    "QuerySyntaxError",
    "ReadOnlyServer",
    "SchemaError",
    "SearchOptions",
    "SearchResult",
    "SearchTimeout",
    "Term",
    "UnknownCorpus",
    "__version__",
    "compile_query",
    "parse",
    "parse_filters",
    "to_string",
]
