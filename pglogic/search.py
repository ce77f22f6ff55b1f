"""Run logical (and plain) searches: parse, embed the terms in one batch, compile, execute.

A query text with no quote character is a plain semantic search for that text (one term);
anything else is parsed as a logical query.

Example:
    >>> res = search(conn, corpus, '"oil prices" AND NOT "natural gas"', embedder=emb)  # doctest: +SKIP
    >>> res.hits[0].title  # doctest: +SKIP
    'OPEC agrees on output ceiling'
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from pglogic.compile import CompiledQuery, SearchOptions, compile_query
from pglogic.corpus import Corpus
from pglogic.db import Connection, vector_version, version_tuple
from pglogic.embed import Embedder
from pglogic.errors import QueryError
from pglogic.query import Node, Term, parse


@dataclass(frozen=True)
class Hit:
    """One ranked document with its fuzzy score and each term's cosine similarity.

    Example:
        >>> Hit(1, "d1", None, 0.5, {"a": 0.5}).similarities["a"]
        0.5
    """

    id: int
    external_id: str
    title: str | None
    score: float
    similarities: dict[str, float]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class SearchResult:
    """Hits plus what produced them: the tree, the compiled statement and timings (seconds)."""

    tree: Node
    compiled: CompiledQuery
    hits: list[Hit]
    timings: dict[str, float] = field(default_factory=dict)


def to_tree(query: str | Node, *, max_terms: int = 32) -> Node:
    """Parse ``query`` as a logical query, or take it as one plain term.

    It is logical when it contains a double quote or starts with ``'``, ``(`` or ``NOT``; so
    ``children's books`` is plain text and ``'a' AND 'b'`` is logical.

    Example:
        >>> to_tree("oil prices")
        Term(text='oil prices')
        >>> to_tree("children's books")
        Term(text="children's books")
        >>> str(to_tree('"a" and not "b"'))
        '"a" AND NOT "b"'
    """
    if not isinstance(query, str):
        return query
    head = query.lstrip()[:4].upper()
    logical = '"' in query or head[:1] in ("'", "(") or head == "NOT " or head == "NOT("
    if not logical:
        text = query.strip()
        if not text:
            raise QueryError("Empty query")
        return Term(text)
    return parse(query, max_terms=max_terms)


_ITERATIVE: dict[str, bool] = {}


def server_has_iterative_scan(conn: Connection) -> bool:
    """True when the server's pgvector (>= 0.8) supports iterative index scans (cached per server).

    Example:
        >>> server_has_iterative_scan(conn)  # doctest: +SKIP
        True
    """
    key = f"{conn.info.host}:{conn.info.port}:{conn.info.dbname}"
    if key not in _ITERATIVE:
        version = vector_version(conn)
        _ITERATIVE[key] = version is not None and version_tuple(version) >= (0, 8)
    return _ITERATIVE[key]


def execute(conn: Connection, compiled: CompiledQuery, vectors: dict[str, object]) -> list[Hit]:
    """Run a compiled query with its ``SET LOCAL`` settings.

    Outside a transaction the query gets its own; inside the caller's transaction the previous
    values of the settings are restored afterwards, so they never outlive the query.

    Example:
        >>> execute(conn, compiled, {"a": vec})  # doctest: +SKIP
        [Hit(...), ...]
    """
    params = compiled.with_vectors(vectors)  # type: ignore[arg-type]
    with conn.transaction():
        saved: dict[str, str | None] = {}
        for name, value in compiled.settings.items():
            row = conn.execute(
                "SELECT current_setting(%s, true), set_config(%s, %s, true)", (name, name, value)
            ).fetchone()
            saved[name] = None if row is None or row[0] in (None, "") else str(row[0])
        rows = conn.execute(compiled.statement, params).fetchall()
        for name, old in saved.items():
            if old is None:  # not set before (pgvector not loaded yet): back to the default
                conn.execute(sql.SQL("RESET {}").format(sql.Identifier(name)))
            else:
                conn.execute("SELECT set_config(%s, %s, true)", (name, old))
    n = len(compiled.terms)
    return [
        Hit(
            int(r[0]),
            str(r[1]),
            r[2],
            float(r[4]),
            {t: float(v) for t, v in zip(compiled.terms, r[5 : 5 + n], strict=True)},
            r[3],
        )
        for r in rows
    ]


def search(
    conn: Connection,
    corpus: Corpus,
    query: str | Node,
    *,
    embedder: Embedder | Callable[[], Embedder],
    options: SearchOptions | None = None,
) -> SearchResult:
    """Search ``corpus`` with a logical query (or plain text) and return the ranked hits.

    Example:
        >>> search(conn, corpus, "vitamin D", embedder=emb).hits[:1]  # doctest: +SKIP
        [Hit(id=7, external_id='d7', title='...', score=0.61, similarities={'vitamin D': 0.61})]
    """
    opts = options or SearchOptions()
    t0 = time.perf_counter()
    tree = to_tree(query)
    compiled = compile_query(
        tree, corpus, opts, server_has_iterative_scan=server_has_iterative_scan(conn)
    )
    t1 = time.perf_counter()
    if not hasattr(embedder, "embed"):  # a factory: load the model only for a valid query
        embedder = embedder()
    matrix = embedder.embed(compiled.terms)
    vectors: dict[str, object] = dict(zip(compiled.terms, matrix, strict=True))
    t2 = time.perf_counter()
    hits = execute(conn, compiled, vectors)
    t3 = time.perf_counter()
    return SearchResult(
        tree, compiled, hits, {"compile": t1 - t0, "embed": t2 - t1, "database": t3 - t2}
    )
