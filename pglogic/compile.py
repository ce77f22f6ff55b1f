"""Compile a logical query tree into one parameterised SQL statement (no I/O).

Statement shape (approximate mode)::

    WITH c0 AS MATERIALIZED (SELECT id FROM corpus WHERE <filter>
                             ORDER BY embedding <=> %(v0)s LIMIT %(depth)s),   -- one per
         c1 AS MATERIALIZED (...),                                             -- positive term
         cand AS (SELECT id FROM c0 UNION SELECT id FROM c1),
         sims AS (SELECT d.id, ..., 1 - (d.embedding <=> %(v0)s) AS s0, ... FROM cand JOIN corpus d)
    SELECT id, external_id, title, <fuzzy expression over s0..sn> AS score, s0, ..., sn
    FROM sims ORDER BY score DESC, id LIMIT %(k)s

Each HNSW CTE is served by the corpus's HNSW index. Only terms of positive polarity (under an
even number of NOTs) generate candidates: "far from X" cannot be served by an index. Identical
terms share one CTE and one vector. Exact mode scores every (filtered) document instead.
Session settings (``hnsw.ef_search``, iterative scans) are returned separately and applied with
``set_config(..., true)`` (i.e. ``SET LOCAL``) in the same transaction.

Example:
    >>> from pglogic.query import parse
    >>> from pglogic.corpus import Corpus
    >>> corpus = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
    >>> q = compile_query(parse('"a" AND NOT "b"'), corpus)
    >>> q.terms, q.candidate_terms
    (['a', 'b'], ['a'])
    >>> "ORDER BY score DESC" in q.as_string()
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from psycopg import sql

from pglogic.corpus import Corpus
from pglogic.errors import InvalidInput, QueryError
from pglogic.filters import Filter, filters_sql
from pglogic.operators import OperatorFamily, resolve_family, to_sql
from pglogic.query import Node, positive_terms, terms

#: pgvector's upper bound for hnsw.ef_search.
MAX_EF_SEARCH = 1000


def default_depth(k: int, n_terms: int) -> int:
    """Per-term candidate depth: grows with k and with the number of candidate terms.

    Example:
        >>> default_depth(10, 1), default_depth(10, 3), default_depth(100, 2)
        (100, 173, 1000)
    """
    return max(k, min(MAX_EF_SEARCH, max(100, math.ceil(10 * k * math.sqrt(n_terms)))))


@dataclass(frozen=True)
class SearchOptions:
    """How to run a logical search.

    ``operators`` is a preset name (``itlr``, ``godel``, ...) or a spec like
    ``and=min,or=max,not=complement``; ``truth`` maps cosine similarity to [0, 1] (``clamp``).
    ``depth`` (per-term candidates) and ``ef_search`` default from k and the number of terms.

    Example:
        >>> SearchOptions(k=5, operators="godel").k
        5
    """

    k: int = 10
    operators: str | OperatorFamily = "itlr"
    truth: str = "clamp"
    exact: bool = False
    depth: int | None = None
    ef_search: int | None = None
    filters: Sequence[Filter] = field(default_factory=tuple)
    iterative_scan: bool = True


@dataclass(frozen=True)
class CompiledQuery:
    """A compiled statement: print it with :meth:`as_string`, run it with :attr:`params`.

    ``terms[i]`` is the text whose similarity is column ``s{i}`` and whose vector is ``v{i}``.
    ``settings`` are applied with ``set_config(name, value, true)`` before the statement.
    """

    statement: sql.Composed
    params: dict[str, Any]
    terms: list[str]
    candidate_terms: list[str]
    settings: dict[str, str]
    family: OperatorFamily

    def as_string(self, context: Any = None) -> str:
        """Render the statement (placeholders stay ``%(name)s``).

        Example:
            >>> compiled.as_string().startswith("WITH")  # doctest: +SKIP
            True
        """
        return self.statement.as_string(context)

    def with_vectors(self, vectors: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Return the parameters with term vectors bound to ``v0..vn``.

        Example:
            >>> params = compiled.with_vectors({"a": vec_a, "b": vec_b})  # doctest: +SKIP
        """
        params = dict(self.params)
        for i, t in enumerate(self.terms):
            if t not in vectors:
                raise QueryError(f"No vector for term {t!r}")
            params[f"v{i}"] = np.asarray(vectors[t], dtype=np.float32)
        return params


def _distance(column: sql.Composable, i: int, dim: int) -> sql.Composable:
    return sql.SQL("{} <=> {}::vector({})").format(
        column, sql.Placeholder(f"v{i}"), sql.Literal(dim)
    )


def compile_query(
    tree: Node,
    corpus: Corpus,
    options: SearchOptions | None = None,
    *,
    server_has_iterative_scan: bool = True,
) -> CompiledQuery:
    """Compile ``tree`` for ``corpus`` into one statement (see the module docstring).

    Raises :class:`QueryError` when no term can generate candidates and ``exact`` is off.

    Example:
        >>> from pglogic.query import parse
        >>> corpus = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> compile_query(parse('NOT "a"'), corpus)
        Traceback (most recent call last):
        pglogic.errors.QueryError: The query has no positive term to find candidates with (every term is negated); rerun with exact=True (--exact) to scan every document
    """
    opts = options or SearchOptions()
    if opts.k < 1:
        raise InvalidInput(f"Invalid k={opts.k}: must be at least 1")
    family = resolve_family(opts.operators) if isinstance(opts.operators, str) else opts.operators
    all_terms = terms(tree)
    cand_terms = positive_terms(tree)
    index_of = {t: i for i, t in enumerate(all_terms)}
    sim_col = {t: sql.Identifier(f"s{i}") for t, i in index_of.items()}
    score = to_sql(tree, lambda t: sim_col[t], family, opts.truth)
    table = corpus.table
    emb = sql.SQL("d.{}").format(corpus.embedding)
    where, params = filters_sql(opts.filters, sql.SQL("d.metadata"))
    params["k"] = opts.k
    settings: dict[str, str] = {}

    sims = sql.SQL(", ").join(
        sql.SQL("1 - ({}) AS {}").format(_distance(emb, i, corpus.dim), sim_col[t])
        for t, i in index_of.items()
    )
    out_cols = sql.SQL(", ").join(sim_col[t] for t in all_terms)

    if opts.exact:
        statement = sql.SQL(
            "WITH sims AS (SELECT d.id, d.external_id, d.title, d.metadata, {sims} FROM {table} d"
            " WHERE d.{col} IS NOT NULL AND {where})\n"
            "SELECT id, external_id, title, metadata, {score} AS score, {out} FROM sims\n"
            "ORDER BY score DESC, id LIMIT %(k)s"
        ).format(
            sims=sims, table=table, col=corpus.embedding, where=where, score=score, out=out_cols
        )
        return CompiledQuery(statement, params, all_terms, [], settings, family)

    if not cand_terms:
        raise QueryError(
            "The query has no positive term to find candidates with (every term is negated); "
            "rerun with exact=True (--exact) to scan every document"
        )
    if opts.k > MAX_EF_SEARCH:
        raise InvalidInput(
            f"k={opts.k} is above {MAX_EF_SEARCH}, the most an HNSW scan returns; use exact=True"
        )
    depth = opts.depth if opts.depth is not None else default_depth(opts.k, len(cand_terms))
    depth = max(depth, opts.k)
    if depth > MAX_EF_SEARCH and not (server_has_iterative_scan and opts.iterative_scan):
        raise InvalidInput(f"depth={depth} is above {MAX_EF_SEARCH} without iterative scans")
    ef = opts.ef_search if opts.ef_search is not None else min(MAX_EF_SEARCH, max(40, depth))
    if not 1 <= ef <= MAX_EF_SEARCH:
        raise InvalidInput(f"Invalid ef_search={ef}: pgvector accepts 1 to {MAX_EF_SEARCH}")
    settings["hnsw.ef_search"] = str(ef)
    if server_has_iterative_scan and opts.iterative_scan and (opts.filters or depth > ef):
        settings["hnsw.iterative_scan"] = "relaxed_order"
    params["depth"] = depth

    ctes = [
        sql.SQL(
            "{name} AS MATERIALIZED (SELECT d.id FROM {table} d WHERE {where}"
            " ORDER BY {dist} LIMIT %(depth)s)"
        ).format(
            name=sql.Identifier(f"c{index_of[t]}"),
            table=table,
            where=where,
            dist=_distance(emb, index_of[t], corpus.dim),
        )
        for t in cand_terms
    ]
    union = sql.SQL(" UNION ").join(
        sql.SQL("SELECT id FROM {}").format(sql.Identifier(f"c{index_of[t]}")) for t in cand_terms
    )
    statement = sql.SQL(
        "WITH {ctes},\n"
        "cand AS ({union}),\n"
        "sims AS (SELECT d.id, d.external_id, d.title, d.metadata, {sims} FROM cand JOIN {table} d"
        " ON d.id = cand.id)\n"
        "SELECT id, external_id, title, metadata, {score} AS score, {out} FROM sims\n"
        "ORDER BY score DESC, id LIMIT %(k)s"
    ).format(
        ctes=sql.SQL(",\n").join(ctes),
        union=union,
        sims=sims,
        table=table,
        score=score,
        out=out_cols,
    )
    return CompiledQuery(statement, params, all_terms, cand_terms, settings, family)
