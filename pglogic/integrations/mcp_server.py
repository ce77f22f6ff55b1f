"""pglogic's search as tools for agents, over the Model Context Protocol (``pglogic mcp``).

The server (the official ``mcp`` SDK's :class:`~mcp.server.MCPServer`) offers the tools
``search``, ``compile``, ``list_corpora``, ``describe_corpus``, ``get_documents`` and, when an
LLM endpoint is configured (``PGLOGIC_LLM_BASE_URL``...), ``ask``. It searches as ``pglogic serve`` does: through
a read-only :class:`~pglogic.api.PgLogic` (every transaction ``READ ONLY``, as the
``pglogic_reader`` role where the login role may take it: :class:`Backend`), so an agent can
read corpora but change nothing. The query language's rules are in the tools' descriptions; a
query that does not parse, an unknown corpus or a bad option comes back as a tool error whose
text is pglogic's message (a syntax error with its column and a caret under it).

Example:
    >>> from pglogic.integrations.http.backend import Backend, ServeConfig
    >>> server = create_server(Backend(ServeConfig(llm_env={})))  # doctest: +SKIP
    >>> sorted(t.name for t in asyncio.run(server.list_tools()))  # doctest: +SKIP
    ['compile', 'describe_corpus', 'list_corpora', 'search']
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from pglogic.errors import PglogicError, PlainTextWarning, QuerySyntaxError

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from pglogic.integrations.http.backend import Backend

__all__ = ["LANGUAGE", "create_server", "grouped"]

#: The arguments' schemas, with their words for an agent.
Corpus = Annotated[str, Field(description="A corpus name (list_corpora)")]
Query = Annotated[str, Field(description="A logical query (see the tool's description)")]

#: The query language, as every tool that takes a query says it.
LANGUAGE = (
    "The query language: quoted terms are semantic (each is embedded; a document is ranked by "
    'how well it matches them): "vitamin D benefits" AND NOT "bone health". Combine terms with '
    "AND, OR, NOT and parentheses; NOT binds tighter than AND, AND tighter than OR, so "
    '"a" OR "b" AND NOT "c" is "a" OR ("b" AND (NOT "c")) (compile shows the grouping). At '
    "most 32 terms; a query needs a term that is not negated. A semantic NOT lowers the rank of "
    'documents about the term; match:word and match:"a phrase" are lexical terms, true when '
    "the document's words match, so NOT match:wheat drops every document with the word wheat "
    "(a word inside a path or URL is not a word of its own): for a certain exclusion write both, "
    'NOT ("X11" OR match:"X Window"). Text without quotes runs as one plain dense search of the '
    "whole text, which cannot exclude anything."
)
#: The most hits a tool returns.
MAX_K = 100
K = Annotated[int, Field(description=f"How many hits: 1 to {MAX_K}",
                         json_schema_extra={"minimum": 1, "maximum": MAX_K})]  # fmt: skip
Filters = Annotated[
    list[str] | None,
    Field(description='Metadata conditions that must all hold: "key=value", "key>=number", '
          '"key!=value", or a JSON object for containment; describe_corpus lists the keys'),
]  # fmt: skip


def _error(exc: PglogicError) -> str:
    """pglogic's message for a tool error (a syntax error with the query and a caret)."""
    return exc.pretty() if isinstance(exc, QuerySyntaxError) else str(exc)


def _filters(filters: list[str] | None) -> tuple[Any, ...]:
    from pglogic.engine.filters import parse_filter

    return tuple(parse_filter(f) for f in filters or ())


def _understood(query: str, tree: Any) -> dict[str, Any]:
    """How pglogic reads ``query``: logical (and how it groups), or one plain dense term, with
    a note when the text seems to ask for logic (:func:`pglogic.query.plain_text_note`)."""
    from pglogic.query import Term, plain_text_note

    if isinstance(tree, Term) and '"' not in query:
        out: dict[str, Any] = {"query": tree.text, "logical": False}
        if note := plain_text_note(query):
            out["note"] = note
        return out
    return {"query": str(tree), "logical": True, "grouped": grouped(tree)}


def grouped(tree: Any) -> str:
    """``tree`` with a parenthesis around every AND and OR inside another node: how the
    operators bind, written out.

    Example:
        >>> from pglogic.query import parse
        >>> grouped(parse('"a" OR "b" AND NOT "c"'))
        '"a" OR ("b" AND NOT "c")'
    """
    from pglogic.query import And, Not, Or

    def inner(node: Any) -> str:
        text = grouped(node)
        return f"({text})" if isinstance(node, And | Or) else text

    if isinstance(tree, Not):
        return "NOT " + inner(tree.child)
    if isinstance(tree, And | Or):
        op = " AND " if isinstance(tree, And) else " OR "
        return op.join(inner(c) for c in tree.children)
    return str(tree)


def _hits(result: Any) -> list[dict[str, Any]]:
    return [
        {
            "rank": i,
            "id": h.external_id,
            "title": h.title,
            "score": round(h.score, 6),
            "similarities": {t: round(s, 6) for t, s in h.similarities.items()},
            "metadata": h.metadata or {},
            "snippet": h.snippet,
            **({"lexical": h.lexical} if h.lexical else {}),
        }
        for i, h in enumerate(result.hits, 1)
    ]


def create_server(backend: Backend, *, name: str = "pglogic") -> MCPServer:
    """The MCP server of ``backend`` (its read-only :class:`~pglogic.api.PgLogic`), with the
    ``ask`` tool when the backend has an LLM endpoint.

    Example:
        >>> from pglogic.integrations.http.backend import Backend, ServeConfig
        >>> create_server(Backend(ServeConfig(llm_env={}))).name  # doctest: +SKIP
        'pglogic'
    """
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    import pglogic

    server: MCPServer = MCPServer(
        name=name,
        version=pglogic.__version__,
        instructions="Logical semantic search over PostgreSQL corpora (read-only). "
        "list_corpora first, then search a corpus with a logical query. " + LANGUAGE,
    )
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)

    def guarded(call: Any) -> Any:
        try:
            with warnings.catch_warnings():  # (the answer's note says it)
                warnings.simplefilter("ignore", PlainTextWarning)
                return call()
        except PglogicError as exc:
            raise ToolError(_error(exc)) from None

    @server.tool(
        description="Search a corpus with a logical query; the k best documents, each with its "
        "score, each term's similarity and a snippet (the passage that decided it). "
        + LANGUAGE
        + " filters: metadata conditions that "
        'must all hold, like "kind=changelog", "year>=1990" or a JSON object '
        '\'{"labels": ["grain"]}\' (containment); a key no document has matches nothing.',
        annotations=read_only,
    )
    def search(corpus: Corpus, query: Query, k: K = 10, filters: Filters = None) -> dict[str, Any]:
        if not 1 <= k <= MAX_K:
            raise ToolError(f"Invalid k={k}: from 1 to {MAX_K}")
        config = backend.config

        def run() -> Any:
            return backend.api.search(
                corpus, query, k=k, filters=_filters(filters), timeout=config.timeout,
                remember_terms=False, snippet=True,
            )  # fmt: skip

        result = guarded(run)
        return {**_understood(query, result.tree), "hits": _hits(result)}

    @server.tool(
        description="Check a logical query without running it: its canonical form, its "
        "semantic and lexical terms, or the syntax error with its column. " + LANGUAGE,
        annotations=read_only,
    )
    def compile(query: Query) -> dict[str, Any]:
        from pglogic.query import matches, terms, to_tree

        tree = guarded(lambda: to_tree(query))
        return {**_understood(query, tree), "terms": list(terms(tree)),
                "lexical": list(matches(tree))}  # fmt: skip

    @server.tool(
        description="The corpora this server searches: name, embedding model, documents.",
        annotations=read_only,
    )
    def list_corpora() -> list[dict[str, Any]]:
        return [
            {
                "name": c.name,
                "description": c.description,
                "model": c.model,
                "documents": c.documents,
            }
            for c in guarded(backend.api.list_corpora)
        ]

    @server.tool(
        description="One corpus in detail: its model and dimension, documents, index, lexical "
        "index (for match: terms), passages, and the metadata keys its documents have (for "
        "filters), each with its JSON types and a few example values.",
        annotations=read_only,
    )
    def describe_corpus(name: Corpus) -> dict[str, Any]:
        info = guarded(lambda: backend.api.corpus_info(name))
        corpus = guarded(lambda: backend.api.corpus(name))
        return {
            "name": info.name,
            "description": info.description,
            "model": info.model,
            "dimension": info.dim,
            "documents": info.documents,
            "embedded": info.embedded,
            "index": info.index_name,
            "lexical_index": corpus.lexical_config,
            "passages": None if info.passage_layout is None else info.passage_layout.describe(),
            "metadata_keys": guarded(lambda: backend.api.metadata_keys(name)),
        }

    @server.tool(
        description="Documents of a corpus by id (the ids search returns): title, text, "
        "metadata; an id no document has is listed as missing.",
        annotations=read_only,
    )
    def get_documents(corpus: Corpus, ids: list[str]) -> dict[str, Any]:
        found = guarded(lambda: backend.api.get_documents(corpus, ids))
        have = {d.id for d in found}
        return {
            "documents": [
                {"id": d.id, "title": d.title, "text": d.text, "metadata": d.metadata}
                for d in found
            ],
            "missing": [i for i in ids if i not in have],
        }

    if backend.llm_configured():

        @server.tool(
            description="Ask a corpus a question in plain language: an LLM writes the logical "
            "query (shown in the answer, with what its checks changed), pglogic runs it.",
            annotations=read_only,
        )
        def ask(corpus: Corpus, question: str, k: K = 10) -> dict[str, Any]:
            if not 1 <= k <= MAX_K:
                raise ToolError(f"Invalid k={k}: from 1 to {MAX_K}")

            def run() -> Any:
                return backend.api.ask(corpus, question, k=k, llm=backend.llm_config(),
                                       remember_terms=False, snippet=True)  # fmt: skip

            asked = guarded(run)
            return {"query": asked.query, "model_query": asked.rewrite.model_query,
                    "changed_by_checks": list(asked.rewrite.repairs), "fallback": asked.fallback,
                    "hits": _hits(asked.search)}  # fmt: skip

    return server
