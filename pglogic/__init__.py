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
    "PglogicError": "pglogic.errors",
    "QueryError": "pglogic.errors",
    "QuerySyntaxError": "pglogic.errors",
    "And": "pglogic.query",
    "Node": "pglogic.query",
    "Not": "pglogic.query",
    "Or": "pglogic.query",
    "Term": "pglogic.query",
    "parse": "pglogic.query",
    "to_string": "pglogic.query",
    "Hit": "pglogic.store.search",
    "SearchResult": "pglogic.store.search",
}

if TYPE_CHECKING:
    from pglogic.api import PgLogic
    from pglogic.engine.compile import CompiledQuery, SearchOptions, compile_query
    from pglogic.errors import PglogicError, QueryError, QuerySyntaxError
    from pglogic.query import And, Node, Not, Or, Term, parse, to_string
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
    "CompiledQuery",
    "Hit",
    "Node",
    "Not",
    "Or",
    "PgLogic",
    "PglogicError",
    "QueryError",
    "QuerySyntaxError",
    "SearchOptions",
    "SearchResult",
    "Term",
    "__version__",
    "compile_query",
    "parse",
    "to_string",
]
