"""Compile a logical query tree into one parameterised SQL statement (no I/O).

Statement shape (approximate mode)::

    WITH c0 AS MATERIALIZED (SELECT id, 1 - (embedding <=> %(v0)s) AS s0, ..., sn
                             FROM corpus WHERE <filter>                        -- one per
                             ORDER BY embedding <=> %(v0)s LIMIT %(depth)s),   -- positive term
         c1 AS MATERIALIZED (... ORDER BY embedding <=> %(v1)s ...),
         g  AS MATERIALIZED (... ORDER BY embedding <=> %(vg)s LIMIT %(gdepth)s),  -- guide
         sims AS (SELECT id, s0, ..., sn FROM c0 UNION ... FROM c1 UNION ... FROM g)
    SELECT id, external_id, title, metadata, score, s0, ..., sn     -- columns of the top k only
    FROM (SELECT id, <fuzzy expression over s0..sn> AS score, s0, ..., sn
          FROM sims ORDER BY score DESC, id LIMIT %(k)s) top JOIN corpus ...

Each HNSW CTE is served by the corpus's HNSW index. Only terms of positive polarity (under an
even number of NOTs) generate candidates: "far from X" cannot be served by an index. Identical
terms share one CTE and one vector. A query of two or more terms also scans along its guide
vector (:mod:`pglogic.guide`, computed from the term vectors by
:meth:`CompiledQuery.with_vectors`), which finds the documents that score best on the whole
formula. Exact mode scores every (filtered) document instead.
Session settings (``hnsw.ef_search``, iterative scans) are returned separately and applied with
``SET LOCAL`` in the same transaction (:func:`set_local`).

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
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.corpus import Corpus
from pglogic.errors import InvalidInput, QueryError
from pglogic.filters import Filter, filters_sql
from pglogic.guide import guide_vector
from pglogic.operators import DEFAULT_FAMILY, OperatorFamily, resolve_family, to_sql
from pglogic.query import Node, Term, positive_terms, terms

#: pgvector's upper bound for hnsw.ef_search.
MAX_EF_SEARCH = 1000
#: Placeholder names of the guide vector and of its scan's depth.
GUIDE = "vg"
GUIDE_DEPTH = "gdepth"


def default_depth(k: int, n_terms: int) -> int:
    """Per-term candidate depth: grows with k and with the number of candidate terms.

    Example:
        >>> default_depth(10, 1), default_depth(10, 3), default_depth(100, 2)
        (100, 174, 1000)
    """
    return max(k, min(MAX_EF_SEARCH, max(100, math.ceil(10 * k * math.sqrt(n_terms)))))


def guide_depth(k: int, depth: int) -> int:
    """Default depth of the guide's scan: the terms' depth, and at least a 4-term query's.

    A query with one positive term gets depth 100 for k = 10; its guide needs about 200 to hold
    the formula's top 10 at 1M vectors (``bench/results/guide.md``, NOT 2).

    Example:
        >>> guide_depth(10, 100), guide_depth(10, 283)
        (200, 283)
    """
    return max(depth, default_depth(k, 4))


#: Cost of one tuple of a filtered (iterative) HNSW scan / one row of a sequential scan, measured
#: on 100k vectors in bench/scale.py (AND 3, k=10: 10% filter 60 ms iterative vs 64 ms exact; 1%
#: filter 181 ms vs 66 ms). A filtered scan visits about depth / selectivity tuples per term.
EXACT_SWITCH = 17


def prefer_exact(matching_rows: float, k: int, candidate_terms: int) -> bool:
    """Whether scoring every row that passes a filter beats filtered HNSW scans.

    The T index scans visit about T * depth / selectivity tuples; the exact plan scans every
    row once. They cost the same when the matching rows = EXACT_SWITCH * T * depth.

    Example:
        >>> prefer_exact(1_000, 10, 3), prefer_exact(10_000, 10, 3)
        (True, False)
    """
    depth = default_depth(k, candidate_terms)
    return matching_rows <= EXACT_SWITCH * candidate_terms * depth


_SETTING = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def set_local(settings: Mapping[str, str]) -> list[sql.Composed]:
    """``SET LOCAL name = 'value'`` statements for a compiled query's settings.

    ``SET LOCAL`` (rather than ``set_config``) is what Citus propagates to the shards' workers
    inside a distributed transaction. SET takes no parameters: names come from pglogic's own
    list and must look like ``name`` or ``prefix.name`` (else ValueError); values are
    ``sql.Literal``.

    Example:
        >>> print(set_local({"hnsw.ef_search": "100"})[0].as_string(None))
        SET LOCAL hnsw.ef_search = '100'
    """
    out = []
    for name, value in settings.items():
        if not _SETTING.fullmatch(name):
            raise ValueError(f"Invalid setting name {name!r}")
        out.append(sql.SQL("SET LOCAL {} = {}").format(sql.SQL(name), sql.Literal(value)))
    return out


@dataclass(frozen=True)
class SearchOptions:
    """How to run a logical search.

    ``operators`` is a preset name (``itlr``, ``godel``, ...) or a spec like
    ``and=min,or=max,not=complement``; ``truth`` maps cosine similarity to [0, 1] (``clamp``).
    ``depth`` (per-term candidates) and ``ef_search`` default from k and the number of terms.
    ``guide`` adds one more candidate scan along :func:`pglogic.guide.guide_vector` (queries of
    two or more terms): it finds the documents that score best on the combination, which sit
    deep in every single term's list.

    Example:
        >>> SearchOptions(k=5, operators="godel").k
        5
    """

    k: int = 10
    operators: str | OperatorFamily = DEFAULT_FAMILY
    truth: str = "clamp"
    exact: bool = False
    depth: int | None = None
    ef_search: int | None = None
    filters: Sequence[Filter] = field(default_factory=tuple)
    iterative_scan: bool = True
    guide: bool = True


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
    param_prefix: str = ""
    tree: Node | None = None
    truth: str = "clamp"

    @property
    def guide_param(self) -> str | None:
        """The placeholder of the guide vector (``vg``), or None when the statement has none."""
        name = f"{self.param_prefix}{GUIDE}"
        return name if f"{self.param_prefix}{GUIDE_DEPTH}" in self.params else None

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
            params[f"{self.param_prefix}v{i}"] = np.asarray(vectors[t], dtype=np.float32)
        if self.guide_param is not None:
            params[self.guide_param] = self.guide_vector(vectors)
        return params

    def guide_vector(self, vectors: Mapping[str, npt.ArrayLike]) -> np.ndarray:
        """The guide vector for these term vectors (see :mod:`pglogic.guide`).

        Example:
            >>> compiled.guide_vector({"a": vec_a, "b": vec_b})  # doctest: +SKIP
            array([0.12, ...], dtype=float32)
        """
        if self.tree is None:
            raise QueryError("This compiled query has no tree to compute a guide vector from")
        return guide_vector(self.tree, vectors, self.family, self.truth)


@dataclass(frozen=True)
class Source:
    """What a query searches: a table with an id column and an embedding column.

    ``alias`` names the table inside the statement (``d`` for corpora); None refers to it by its
    own name, so that SQL written against the table (e.g. an application's filters) fits in.
    ``columns`` are extra columns returned after the id.

    Example:
        >>> src = Source(sql.Identifier("public", "articles"), None, "id", "embedding", 384, ())
        >>> src.ref.as_string(None)
        '"public"."articles"'
    """

    table: sql.Composable
    alias: str | None
    id: str
    embedding: str
    dim: int
    columns: tuple[str, ...] = ("external_id", "title", "metadata")

    @classmethod
    def for_corpus(cls, corpus: Corpus) -> Source:
        """The source for a pglogic corpus (table ``pglogic.corpus_<id>``, alias ``d``).

        Example:
            >>> c = Corpus(1, "news", "corpus_1", "m", 384, "cosine", "embedding", None, None)
            >>> Source.for_corpus(c).alias
            'd'
        """
        return cls(corpus.table, "d", "id", corpus.column, corpus.dim)

    @property
    def ref(self) -> sql.Composable:
        """How columns are qualified: the alias, or the table itself."""
        return sql.Identifier(self.alias) if self.alias else self.table

    def col(self, name: str) -> sql.Composable:
        """A qualified column of the source."""
        return sql.SQL("{}.{}").format(self.ref, sql.Identifier(name))

    @property
    def from_(self) -> sql.Composable:
        """The FROM item: ``table alias`` or just ``table``."""
        if self.alias:
            return sql.SQL("{} {}").format(self.table, sql.Identifier(self.alias))
        return self.table


def _final(
    src: Source, score: sql.Composable, sim_cols: Sequence[sql.Identifier], k: sql.Composable
) -> sql.Composable:
    """The ranking step over ``sims``: the top k by score, then their columns (late fetch).

    Only the k winners are joined back to the table for ``src.columns`` (title, metadata...),
    so the candidate rows stay narrow.
    """
    idc = sql.Identifier(src.id)
    sims = sql.SQL(", ").join(sim_cols)
    top = sql.SQL(
        "SELECT {id}, {score} AS score, {sims} FROM sims ORDER BY score DESC, {id} LIMIT {k}"
    ).format(id=idc, score=score, sims=sims, k=k)
    if not src.columns:
        return top
    return sql.SQL(
        "SELECT {cols}, top.score, {top_sims}\nFROM ({top}) top JOIN {from_} ON {id} = top.{idc}\n"
        "ORDER BY top.score DESC, top.{idc}"
    ).format(
        cols=sql.SQL(", ").join([src.col(src.id), *(src.col(c) for c in src.columns)]),
        top_sims=sql.SQL(", ").join(sql.SQL("top.{}").format(c) for c in sim_cols),
        top=top,
        from_=src.from_,
        id=src.col(src.id),
        idc=idc,
    )


def compile_query(
    tree: Node,
    target: Corpus | Source,
    options: SearchOptions | None = None,
    *,
    server_has_iterative_scan: bool = True,
    extra_where: sql.Composable | None = None,
    param_prefix: str = "",
    filter_selectivity: float | None = None,
) -> CompiledQuery:
    """Compile ``tree`` for a corpus (or any :class:`Source`) into one statement.

    ``extra_where`` is ANDed into every candidate CTE (and the exact scan) next to the metadata
    filters; ``param_prefix`` prefixes every placeholder name (to embed the statement in another
    one). Raises :class:`QueryError` when no term can generate candidates and ``exact`` is off.

    Without iterative scans (pgvector < 0.8) a filtered query over-fetches: ``hnsw.ef_search``
    becomes ``depth / filter_selectivity`` (the fraction of rows the filter keeps; 1000, the
    maximum, when unknown), since such a scan stops after ``ef_search`` tuples.

    Example:
        >>> from pglogic.query import parse
        >>> corpus = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> compile_query(parse('NOT "a"'), corpus)
        Traceback (most recent call last):
        pglogic.errors.QueryError: The query has no positive term to find candidates with (every term is negated); rerun with exact=True (--exact) to scan every document
    """
    src = target if isinstance(target, Source) else Source.for_corpus(target)
    opts = options or SearchOptions()
    if opts.k < 1:
        raise InvalidInput(f"Invalid k={opts.k}: must be at least 1")
    family = resolve_family(opts.operators) if isinstance(opts.operators, str) else opts.operators
    pre = param_prefix

    def ph(name: str) -> sql.Placeholder:
        return sql.Placeholder(pre + name)

    def distance(vector: str) -> sql.Composable:
        """Cosine distance of the embedding to the vector bound to placeholder ``vector``."""
        return sql.SQL("{} <=> {}::vector({})").format(
            src.col(src.embedding), ph(vector), sql.Literal(src.dim)
        )

    all_terms = terms(tree)
    cand_terms = positive_terms(tree)
    index_of = {t: i for i, t in enumerate(all_terms)}
    sim_col = {t: sql.Identifier(f"s{i}") for t, i in index_of.items()}
    score = to_sql(tree, lambda t: sim_col[t], family, opts.truth)
    where, fparams = filters_sql(opts.filters, src.col("metadata"), prefix=pre + "f")
    if extra_where is not None:
        where = sql.SQL("{} AND ({})").format(where, extra_where)
    params: dict[str, Any] = dict(fparams)
    params[pre + "k"] = opts.k
    settings: dict[str, str] = {}

    sims = sql.SQL(", ").join(
        sql.SQL("1 - ({}) AS {}").format(distance(f"v{i}"), sim_col[t]) for t, i in index_of.items()
    )
    idc = sql.Identifier(src.id)
    final = _final(src, score, [sim_col[t] for t in all_terms], ph("k"))

    if opts.exact:
        statement = sql.SQL(
            "WITH sims AS (SELECT {id}, {sims} FROM {from_} WHERE {emb} IS NOT NULL AND {where})\n"
            "{final}"
        ).format(
            id=src.col(src.id), sims=sims, from_=src.from_, emb=src.col(src.embedding),
            where=where, final=final,
        )  # fmt: skip
        return CompiledQuery(
            statement, params, all_terms, [], settings, family, pre, tree, opts.truth
        )

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
    guided = opts.guide and not isinstance(tree, Term) and len(all_terms) > 1
    gdepth = guide_depth(opts.k, depth) if opts.depth is None else depth
    scan_depth = max(depth, gdepth) if guided else depth
    if scan_depth > MAX_EF_SEARCH and not (server_has_iterative_scan and opts.iterative_scan):
        raise InvalidInput(f"depth={depth} is above {MAX_EF_SEARCH} without iterative scans")
    default_ef = min(MAX_EF_SEARCH, max(40, scan_depth))
    ef = opts.ef_search if opts.ef_search is not None else default_ef
    if not 1 <= ef <= MAX_EF_SEARCH:
        raise InvalidInput(f"Invalid ef_search={ef}: pgvector accepts 1 to {MAX_EF_SEARCH}")
    filtered = bool(opts.filters) or extra_where is not None
    iterative = server_has_iterative_scan and opts.iterative_scan
    if filtered and not iterative and opts.ef_search is None:
        # Over-fetch (pgvector < 0.8): the index scan stops after ef_search tuples and the filter
        # is applied to those, so ask for depth / selectivity of them (all 1000 when unknown).
        want = depth / filter_selectivity if filter_selectivity else MAX_EF_SEARCH
        ef = min(MAX_EF_SEARCH, max(ef, math.ceil(want)))
    settings["hnsw.ef_search"] = str(ef)
    if iterative and (filtered or scan_depth > ef):
        settings["hnsw.iterative_scan"] = "relaxed_order"
    params[pre + "depth"] = depth
    if guided:
        params[pre + GUIDE_DEPTH] = gdepth

    if isinstance(tree, Term):
        # One term: the score is a monotone map (a TruthMap) of its similarity, so the k nearest
        # documents are the answer: a plain k-NN scan, no candidate union.
        statement = sql.SQL(
            "WITH sims AS MATERIALIZED (SELECT {id}, {sims} FROM {from_} WHERE {where}"
            " ORDER BY {dist} LIMIT {k})\n{final}"
        ).format(
            id=src.col(src.id), sims=sims, from_=src.from_, where=where, dist=distance("v0"),
            k=ph("k"), final=final,
        )  # fmt: skip
        del params[pre + "depth"]  # ef_search alone sets how far the scan looks
        return CompiledQuery(
            statement, params, all_terms, cand_terms, settings, family, pre, tree, opts.truth
        )

    # Every candidate CTE computes all the similarities on the rows its index scan fetched
    # anyway: no second lookup of each candidate (by primary key) in a table that may not fit
    # in memory. A document found by two terms gets the same values twice; UNION keeps one.
    def scan(name: str, vector: str, limit: str) -> sql.Composable:
        """A candidate CTE: the HNSW scan along ``vector`` with every term's similarity."""
        return sql.SQL(
            "{name} AS MATERIALIZED (SELECT {id}, {sims} FROM {from_} WHERE {where}"
            " ORDER BY {dist} LIMIT {limit})"
        ).format(
            name=sql.Identifier(name),
            id=src.col(src.id),
            sims=sims,
            from_=src.from_,
            where=where,
            dist=distance(vector),
            limit=ph(limit),
        )

    scans = [(f"c{index_of[t]}", f"v{index_of[t]}", "depth") for t in cand_terms]
    if guided:
        scans.append(("g", GUIDE, GUIDE_DEPTH))
    ctes = [scan(*s) for s in scans]
    cte_names = [name for name, _, _ in scans]
    cols = sql.SQL(", ").join([idc, *(sim_col[t] for t in all_terms)])
    union = sql.SQL(" UNION ").join(
        sql.SQL("SELECT {} FROM {}").format(cols, sql.Identifier(name)) for name in cte_names
    )
    statement = sql.SQL("WITH {ctes},\nsims AS ({union})\n{final}").format(
        ctes=sql.SQL(",\n").join(ctes), union=union, final=final
    )
    return CompiledQuery(
        statement, params, all_terms, cand_terms, settings, family, pre, tree, opts.truth
    )
