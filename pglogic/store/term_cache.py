"""Term embeddings stored in the database (``pglogic.term_cache``), for SQL-only applications.

``pglogic.search(corpus, query jsonb)`` needs a vector for every term; an application that cannot
embed text itself sends terms without vectors, and the function looks them up in
``pglogic.term_cache`` by the corpus's model. :func:`cache_terms` fills that table (run it from
Python, e.g. at deploy time, for the terms an application uses). :meth:`pglogic.PgLogic.search`
(so ``pglogic search``) reads it too, and adds the terms it had to embed: the table holds the
terms users searched (``pglogic calibrate --from-corpus`` fits on them), and a search whose terms
are all cached loads no model. Every vector is the query side of the corpus's model.

A query's AND phrases are cached with its terms: ``pglogic.search`` scores each AND's own text
too (``"and_text"``, 4 by default) and looks its vector up the same way.

Example:
    >>> with connect(dsn) as conn:  # doctest: +SKIP
    ...     cache_terms(conn, get_corpus(conn, "news"), '"oil prices" AND NOT "natural gas"')
    ['oil prices', 'natural gas']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from psycopg import errors, sql

from pglogic.embed.base import Embedder
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, scored_terms
from pglogic.engine.render import vector_literal
from pglogic.engine.source import Corpus
from pglogic.errors import EmbeddingError, InvalidInput
from pglogic.query import Node, to_tree
from pglogic.store.db import Connection, require_schema

__all__ = ["cache_terms", "cached_terms", "uncache_terms"]

TABLE = sql.Identifier("pglogic", "term_cache")


def _term_list(terms: str | Node | Iterable[str]) -> list[str]:
    if isinstance(terms, str):  # a query: its terms, then the AND phrases pglogic.search scores
        return scored_terms(to_tree(terms), DEFAULT_AND_TEXT)
    if not isinstance(terms, Iterable):
        return scored_terms(terms, DEFAULT_AND_TEXT)
    out = list(dict.fromkeys(terms))
    for t in out:
        if not isinstance(t, str) or not t.strip():
            raise InvalidInput(f"Invalid term {t!r}: a term is a non-blank string")
    return out


def embed_for_corpus(
    corpus: Corpus, texts: list[str], embedder: Embedder | None = None
) -> np.ndarray:
    """Embed ``texts`` with ``embedder`` (default: the corpus's model), float32 rows; an
    :class:`EmbeddingError` when its dimension is not the corpus's.

    Example:
        >>> embed_for_corpus(corpus, ["oil prices"]).shape  # doctest: +SKIP
        (1, 384)
    """
    emb = embedder if embedder is not None else get_query_embedder(corpus.model)
    if emb.dim != corpus.dim:
        raise EmbeddingError(
            f"Model {emb.name!r} makes {emb.dim}-d vectors; corpus {corpus.name!r} needs "
            f"{corpus.dim}-d ({corpus.model})"
        )
    return np.asarray(emb.embed(texts), dtype=np.float32)


def cache_terms(
    conn: Connection,
    corpus: Corpus,
    terms: str | Node | Iterable[str],
    *,
    embedder: Embedder | None = None,
) -> list[str]:
    """Embed ``terms`` with the corpus's model and store them in ``pglogic.term_cache``.

    Commits the connection's transaction (like :func:`pglogic.store.corpus.build_index`).

    ``terms`` is a query (text or tree: its terms are cached, and the phrase of each AND, which
    ``pglogic.search`` scores by default) or an iterable of term texts. Existing entries for the
    same model and term are replaced. Returns the cached terms.

    Example:
        >>> cache_terms(conn, corpus, ["oil prices", "natural gas"])  # doctest: +SKIP
        ['oil prices', 'natural gas']
        >>> cache_terms(conn, corpus, '"tin" AND "exports"')  # doctest: +SKIP
        ['tin', 'exports', 'tin and exports']
    """
    texts = _term_list(terms)
    if not texts:
        return []
    vectors = embed_for_corpus(corpus, texts, embedder)
    require_schema(conn)
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(
            sql.SQL(
                "INSERT INTO {} (model, term, embedding) VALUES (%s, %s, %s::vector) "
                "ON CONFLICT (model, term) DO UPDATE "
                "SET embedding = EXCLUDED.embedding, created_at = now()"
            ).format(TABLE),
            [(corpus.model, t, vector_literal(v)) for t, v in zip(texts, vectors, strict=True)],
        )
    if not conn.autocommit:
        conn.commit()
    return texts


def cached_term_vectors(
    conn: Connection, corpus: Corpus, terms: Sequence[str]
) -> dict[str, np.ndarray]:
    """The vectors of ``terms`` stored in ``pglogic.term_cache`` for the corpus's model (one query).

    :func:`pglogic.store.term_cache.cache_terms` stores them, keyed by model spec and term, as
    the query side of the corpus's model embeds them (the vectors ``search`` would compute).
    Only vectors of the corpus's dimension count. Terms not cached are absent from the result;
    so are all of them when the table is missing or not readable by this role. Leaves the
    connection's transaction state as it was (a savepoint inside a transaction).

    Example:
        >>> sorted(cached_term_vectors(conn, corpus, ["oil prices", "uncached"]))  # doctest: +SKIP
        ['oil prices']
    """
    if not terms:
        return {}
    stmt = sql.SQL(
        "SELECT term, embedding::real[] FROM {} "
        "WHERE model = %s AND term = ANY(%s) AND vector_dims(embedding) = %s"
    ).format(TABLE)
    try:
        with conn.transaction():
            rows = conn.execute(stmt, (corpus.model, list(terms), corpus.dim)).fetchall()
    except (errors.UndefinedTable, errors.InsufficientPrivilege, errors.UndefinedFunction):
        return {}
    return {str(r[0]): np.asarray(r[1], dtype=np.float32) for r in rows}


def remember_term_vectors(conn: Connection, corpus: Corpus, vectors: dict[str, Any]) -> int:
    """Store the query vectors of terms in ``pglogic.term_cache`` for the corpus's model.

    Best effort, for :func:`search`: entries already there are kept (``ON CONFLICT DO NOTHING``),
    and nothing is stored (0 returned) for a role that cannot write the table or a read-only
    transaction. Like :func:`cached_term_vectors` it leaves the transaction state as it was: a
    write inside the caller's transaction commits with it. Returns the number of rows written.

    Example:
        >>> remember_term_vectors(conn, corpus, {"oil prices": vec})  # doctest: +SKIP
        1
    """
    if not vectors:
        return 0
    # One statement (not executemany, whose pipeline logs a warning when a reader is refused).
    stmt = sql.SQL(
        "INSERT INTO {} (model, term, embedding) SELECT %s, t, v::vector"
        " FROM unnest(%s::text[], %s::text[]) AS x(t, v) ON CONFLICT (model, term) DO NOTHING"
    ).format(TABLE)
    terms = list(vectors)
    literals = [vector_literal(vectors[t]) for t in terms]
    try:
        with conn.transaction():
            cur = conn.execute(stmt, (corpus.model, terms, literals))
            return max(0, cur.rowcount)
    except (
        errors.InsufficientPrivilege,
        errors.ReadOnlySqlTransaction,
        errors.UndefinedTable,
        errors.CheckViolation,
    ):
        return 0


def cached_terms(conn: Connection, model: str) -> list[str]:
    """Return the terms cached for ``model``, sorted.

    Example:
        >>> cached_terms(conn, "all-MiniLM-L6-v2")  # doctest: +SKIP
        ['natural gas', 'oil prices']
    """
    rows = conn.execute(
        sql.SQL("SELECT term FROM {} WHERE model = %s ORDER BY term").format(TABLE), (model,)
    ).fetchall()
    return [str(r[0]) for r in rows]


def uncache_terms(conn: Connection, model: str, terms: Iterable[str] | None = None) -> int:
    """Delete cached terms of ``model`` (all of them when ``terms`` is None) and commit.

    Returns the number of rows deleted.

    Example:
        >>> uncache_terms(conn, "all-MiniLM-L6-v2", ["oil prices"])  # doctest: +SKIP
        1
    """
    with conn.transaction():
        if terms is None:
            cur = conn.execute(sql.SQL("DELETE FROM {} WHERE model = %s").format(TABLE), (model,))
        else:
            cur = conn.execute(
                sql.SQL("DELETE FROM {} WHERE model = %s AND term = ANY(%s)").format(TABLE),
                (model, list(terms)),
            )
    if not conn.autocommit:
        conn.commit()
    return cur.rowcount
