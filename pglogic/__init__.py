"""pglogic: logical semantic retrieval inside PostgreSQL.

Write ``"vitamin D benefits" AND NOT "bone health"``; pglogic embeds each quoted term and ranks
documents by a fuzzy-logic combination of per-term cosine similarities, computed by one SQL
statement over pgvector HNSW indexes.

Example:
    >>> from pglogic import PgLogic
    >>> PgLogic().search("news", '"oil" AND NOT "gas"').hits  # doctest: +SKIP
"""

from pglogic.api import PgLogic
from pglogic.compile import CompiledQuery, SearchOptions, compile_query
from pglogic.errors import PglogicError, QueryError, QuerySyntaxError
from pglogic.query import And, Node, Not, Or, Term, parse, to_string
from pglogic.search import Hit, SearchResult

__version__ = "0.1.0"

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
