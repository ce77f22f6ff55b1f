"""Baselines that ``pglogic eval`` compares the logical engine with (no I/O; SQL + vectors).

Every baseline runs in Postgres over the same HNSW index as the engine:

* **dense** — the whole question as one string (``"grain and wheat but not corn"``), embedded
  once, plain top-k. What a user of plain vector search gets. Built with :func:`single_vector`.
* **decomposed** — the BoolQuestions "decomposed query" baseline: one top-``2k`` HNSW list per
  term, then set algebra on those lists: AND = intersection with the scores added, OR = union
  with the maximum score, NOT = difference with the score subtracted. A document outside a
  term's top-``2k`` does not belong to that term's set (so ``NOT x`` keeps it); its score for
  the term is still its exact similarity. Documents come only from the union of the lists, so
  a formula whose every term is negated returns nothing. Built with :func:`compile_decomposed`.
* **geometric** — the NSFL paper's vector-arithmetic baselines: AND (and OR) by the normalised
  sum of the children's vectors, NOT by Gram–Schmidt projection of the positive part onto the
  orthogonal complement of the negated vectors; a NOT with nothing positive beside it is the
  antipode ``−x``. One query vector, plain top-k. Built with :func:`geometric_vector`.

Example:
    >>> import numpy as np
    >>> from pglogic.query import parse
    >>> v = {"a": np.array([1.0, 0.0]), "b": np.array([0.6, 0.8])}
    >>> np.round(geometric_vector(parse('"a" AND NOT "b"'), v), 3)
    array([ 0.8, -0.6], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.engine.compile import (
    MAX_EF_SEARCH,
    CompiledQuery,
    SearchOptions,
    Source,
    compile_query,
)
from pglogic.engine.operators import resolve_family
from pglogic.engine.source import Corpus
from pglogic.errors import QueryError
from pglogic.query import And, Match, Node, Not, Or, Term, terms

Vector = npt.NDArray[np.float32]

#: The placeholder term of a single-vector query (the vector is bound to it, not embedded).
QUERY_VECTOR = "query vector"


def _unit(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    norm = float(np.linalg.norm(x))
    return x / norm if norm > 1e-12 else x


def geometric_vector(tree: Node, vectors: Mapping[str, npt.ArrayLike]) -> Vector:
    """One query vector for ``tree`` by vector arithmetic (NSFL's geometric baselines).

    AND and OR: normalised sum of the children's vectors. NOT children of an AND are removed by
    projecting the sum onto the orthogonal complement of their (orthonormalised) vectors; when
    that leaves nothing (the positive part lies in their span) the sum stays. A NOT elsewhere is
    the antipode of its child.

    Example:
        >>> from pglogic.query import parse
        >>> v = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0])}
        >>> np.round(geometric_vector(parse('"a" AND "b"'), v), 3)
        array([0.707, 0.707], dtype=float32)
    """

    def walk(node: Node) -> npt.NDArray[np.float64]:
        if isinstance(node, Term):
            return _unit(np.asarray(vectors[node.text], dtype=np.float64))
        if isinstance(node, Not):
            return -walk(node.child)
        if isinstance(node, Or):
            return _unit(np.sum([walk(c) for c in node.children], axis=0))
        assert isinstance(node, And)
        pos = [walk(c) for c in node.children if not isinstance(c, Not)]
        neg = [walk(c.child) for c in node.children if isinstance(c, Not)]
        if not pos:  # nothing positive: the antipode of the negated part
            return _unit(-np.sum(neg, axis=0))
        q = _unit(np.sum(pos, axis=0))
        if neg:
            # orthonormal basis of the NOTs' span (SVD drops dependent directions; QR would not)
            u, sv, _ = np.linalg.svd(np.stack(neg, axis=1), full_matrices=False)
            basis = u[:, sv > 1e-8 * sv[0]]
            projected = q - basis @ (basis.T @ q)
            if float(np.linalg.norm(projected)) > 1e-6:
                q = _unit(projected)
        return q

    return walk(tree).astype(np.float32)


def single_vector(
    target: Corpus | Source, k: int, *, exact: bool = False, passages: bool = False
) -> CompiledQuery:
    """A plain top-k query for one vector, bound to the term :data:`QUERY_VECTOR`: over the
    documents' own vectors, or with ``passages`` (a corpus with passages) over each
    document's best passage (max-passage dense retrieval).

    Example:
        >>> c = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> single_vector(c, 10).terms
        ['query vector']
    """
    opts = SearchOptions(k=k, exact=exact, guide=False, passages=passages)
    return compile_query(Term(QUERY_VECTOR), target, opts)


def compile_decomposed(tree: Node, target: Corpus | Source, k: int) -> CompiledQuery:
    """The BoolQuestions decomposed-query baseline as one statement (see the module docstring).

    Columns are those of the engine's statements (id, external_id, title, metadata, score, one
    similarity per term), so :func:`pglogic.store.search.execute` runs it; ``hnsw.ef_search`` is set
    to the lists' depth ``2k``.

    Example:
        >>> from pglogic.query import parse
        >>> c = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> q = compile_decomposed(parse('"a" AND NOT "b"'), c, 50)
        >>> q.params["depth"], q.settings["hnsw.ef_search"]
        (100, '100')
    """
    src = target if isinstance(target, Source) else Source.for_corpus(target)
    depth = min(2 * k, MAX_EF_SEARCH)
    all_terms = terms(tree)
    index_of = {t: i for i, t in enumerate(all_terms)}
    idc = sql.Identifier(src.id)

    def distance(i: int) -> sql.Composable:
        return sql.SQL("{} <=> {}::vector({})").format(
            src.col(src.embedding), sql.Placeholder(f"v{i}"), sql.Literal(src.dim)
        )

    lists = [
        sql.SQL(
            "{name} AS MATERIALIZED (SELECT {id} FROM {from_} ORDER BY {dist} LIMIT %(depth)s)"
        ).format(
            name=sql.Identifier(f"l{i}"), id=src.col(src.id), from_=src.from_, dist=distance(i)
        )
        for i in range(len(all_terms))
    ]
    union = sql.SQL(" UNION ").join(
        sql.SQL("SELECT {} FROM {}").format(idc, sql.Identifier(f"l{i}"))
        for i in range(len(all_terms))
    )
    sim_cols = [sql.Identifier(f"s{i}") for i in range(len(all_terms))]
    member_cols = [sql.Identifier(f"m{i}") for i in range(len(all_terms))]
    per_term = sql.SQL(", ").join(
        sql.SQL("1 - ({}) AS {}, u.{} IN (SELECT {} FROM {}) AS {}").format(
            distance(i), sim_cols[i], idc, idc, sql.Identifier(f"l{i}"), member_cols[i]
        )
        for i in range(len(all_terms))
    )

    def member(node: Node) -> sql.Composable:
        if isinstance(node, Match):
            raise QueryError(f"The set-operation baseline has no lexical term ({node})")
        if isinstance(node, Term):
            return member_cols[index_of[node.text]]
        if isinstance(node, Not):
            return sql.SQL("(NOT {})").format(member(node.child))
        joiner = " AND " if isinstance(node, And) else " OR "
        return sql.SQL("({})").format(sql.SQL(joiner).join(member(c) for c in node.children))

    def score(node: Node) -> sql.Composable:
        if isinstance(node, Match):
            raise QueryError(f"The set-operation baseline has no lexical term ({node})")
        if isinstance(node, Term):
            return sim_cols[index_of[node.text]]
        if isinstance(node, Not):
            return sql.SQL("(- {})").format(score(node.child))
        if isinstance(node, And):
            return sql.SQL("({})").format(sql.SQL(" + ").join(score(c) for c in node.children))
        return sql.SQL("GREATEST({})").format(sql.SQL(", ").join(score(c) for c in node.children))

    sims = sql.SQL(", ").join(sim_cols)
    statement = sql.SQL(
        "WITH {lists},\nu AS ({union}),\n"
        "sims AS (SELECT u.{id}, {per_term} FROM u JOIN {from_} ON {src_id} = u.{id})\n"
        "SELECT {cols}, top.score, {top_sims}\n"
        "FROM (SELECT {id}, {score} AS score, {sims} FROM sims WHERE {member}"
        " ORDER BY score DESC, {id} LIMIT %(k)s) top JOIN {from_} ON {src_id} = top.{id}\n"
        "ORDER BY top.score DESC, top.{id}"
    ).format(
        lists=sql.SQL(",\n").join(lists),
        union=union,
        id=idc,
        per_term=per_term,
        from_=src.from_,
        src_id=src.col(src.id),
        cols=sql.SQL(", ").join([src.col(src.id), *(src.col(c) for c in src.columns)]),
        top_sims=sql.SQL(", ").join(sql.SQL("top.{}").format(c) for c in sim_cols),
        score=score(tree),
        sims=sims,
        member=member(tree),
    )
    settings = {"hnsw.ef_search": str(max(40, depth))}
    params = {"depth": depth, "k": k}
    family = resolve_family("itlr")
    return CompiledQuery(
        statement=statement, params=params, terms=all_terms, candidate_terms=all_terms,
        settings=settings, family=family, tree=tree,
    )  # fmt: skip
