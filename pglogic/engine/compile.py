"""Compile a logical query tree into one parameterised SQL statement (no I/O).

Statement shape (approximate mode)::

    WITH c0 AS MATERIALIZED (SELECT id, 1 - (embedding <=> %(v0)s) AS s0, ..., sn
                             FROM corpus WHERE embedding IS NOT NULL AND <filter> -- one per
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
vector (:mod:`pglogic.engine.guide`, computed from the term vectors by
:meth:`CompiledQuery.with_vectors`), which finds the documents that score best on the whole
formula. Which scans a statement makes, and how deep, is decided in :mod:`pglogic.engine.plans`:
where the guide's scan alone suffices (``guide_suffices``: no positive OR, e.g.
``"a" AND NOT "b"``), it is the statement's only index scan, at twice its depth, and the term
CTEs are left out. Where the terms' own top k suffice (``union_suffices``: a disjunction of
positive terms under ``max``, e.g. ``"a" OR "b"``), each term's CTE fetches k rows, as a
single-term query does, and there is no guide. Exact mode scores every (filtered) document
instead.

Other modes (:data:`MODES`): ``nsfl`` adds the fused texts and the question as scored vectors,
one more candidate scan along the question, and computes the score in layers of CTEs over
``sims`` (:mod:`pglogic.engine.nsfl`); ``nsfl-rerank`` has the question's scan only (K rows); ``sqo``
is one k-NN scan along the SQO vector ``vg`` (:mod:`pglogic.engine.sqo`), ranked by the similarity to
it, and ``sqo-rerank`` the same scan of K rows ranked by the fuzzy formula.
Session settings (``hnsw.ef_search``, iterative scans) are returned separately and applied with
``SET LOCAL`` in the same transaction (:func:`set_local`).

:func:`compile_query` is a pipeline of pure stages, each handing the next an immutable value:
the tree is normalised once (:func:`pglogic.engine.normalise.normalise`: AND texts, scored
texts, polarities, mentions), planned (:func:`pglogic.engine.plans.plan_query`: scans, depths,
settings) and rendered (:mod:`pglogic.engine.statements`: one function per statement shape)
into a :class:`CompiledQuery` (:mod:`pglogic.engine.compiled`). The modes other than ``fuzzy``
are strategies (:mod:`pglogic.engine.strategy`) defined in :mod:`pglogic.engine.nsfl` and
:mod:`pglogic.engine.sqo`, which the stages read rather than branch on.

:class:`SearchOptions`, :data:`MODES`, :data:`MAX_EF_SEARCH` and :data:`DEFAULT_RERANK_DEPTH` live
in :mod:`pglogic.engine.options` and are re-exported here.

Example:
    >>> from pglogic.query import parse
    >>> from pglogic.store.corpus import Corpus
    >>> corpus = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
    >>> q = compile_query(parse('"a" AND NOT "b"'), corpus)
    >>> q.terms, q.candidate_terms, q.params["gdepth"]  # the guide's scan alone, 400 rows
    (['a', 'b'], [], 400)
    >>> q_or = compile_query(parse('"a" OR "b"'), corpus)  # each term's top k, no guide
    >>> q_or.candidate_terms, q_or.params["depth"], q_or.guide_param
    (['a', 'b'], 10, None)
    >>> compile_query(parse('"a" OR ("b" AND "c")'), corpus).guide_param  # a scan per term + guide
    'vg'
    >>> "ORDER BY score DESC" in q.as_string()
    True
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from psycopg import sql

from pglogic.engine.compiled import (
    GUIDE,
    GUIDE_DEPTH,
    RERANK_DEPTH,
    TEXT_CONFIG,
    CompiledQuery,
    ShapeCache,
)
from pglogic.engine.filters import Comparison, Contains
from pglogic.engine.normalise import normalise, shape_of
from pglogic.engine.operators import DEFAULT_FAMILY, OperatorFamily
from pglogic.engine.options import (
    DEFAULT_RERANK_DEPTH,
    MAX_DEPTH,
    MAX_EF_SEARCH,
    MODES,
    OPTIONS,
    SearchOptions,
)
from pglogic.engine.plans import plan_query
from pglogic.engine.source import LEXICAL_COLUMN, Corpus, Source, passage_factor
from pglogic.engine.statements import render_statement, statement_parts
from pglogic.errors import InvalidInput
from pglogic.query import Node

__all__ = [
    "DEFAULT_RERANK_DEPTH",
    "GUIDE",
    "GUIDE_DEPTH",
    "LEXICAL_COLUMN",
    "MAX_DEPTH",
    "MAX_EF_SEARCH",
    "MODES",
    "RERANK_DEPTH",
    "SHAPE_CACHE_SIZE",
    "TEXT_CONFIG",
    "CompiledQuery",
    "SearchOptions",
    "Source",
    "check_options",
    "compile_query",
    "passage_factor",
    "set_local",
    "shape_of",
]

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


#: Compiled statements kept per query shape (:func:`compile_query`'s cache).
SHAPE_CACHE_SIZE = 512
_SHAPES = ShapeCache(SHAPE_CACHE_SIZE)


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

    Statements are cached per query shape (:func:`shape_of`), corpus and options, so a query
    of a shape seen before costs no planning and no rendering (``CompiledQuery.text``); the
    NSFL modes, whose fused texts depend on the words, and targets other than a corpus are
    compiled every time.

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
    opts = options or SearchOptions()
    check_options(opts)
    src = (
        target if isinstance(target, Source) else Source.for_corpus(target, passages=opts.passages)
    )
    ready = normalise(
        tree, opts, lexical_index=src.lexical is not None and src.text_config is not None,
        passages=src.passages is not None,
    )  # fmt: skip
    key: tuple[Any, ...] | None = None
    if isinstance(target, Corpus) and extra_where is None and ready.question is None:
        key = (shape_of(tree), target.table_name, target.column, target.dim,
               target.lexical_config, target.passage_tokens, src.passage_factor, opts,
               server_has_iterative_scan, param_prefix, filter_selectivity, ready.layout)  # fmt: skip
        try:
            hit = _SHAPES.get(key, ready)
        except TypeError:  # unhashable filter values (a Contains filter's dict)
            key, hit = None, None
        if hit is not None:
            return hit
    parts = statement_parts(ready, opts, src, extra_where, param_prefix)
    plan = plan_query(
        ready, opts, passages=src.passages is not None, passage_factor=src.passage_factor,
        filtered=bool(opts.filters) or extra_where is not None,
        iterative=server_has_iterative_scan and opts.iterative_scan,
        filter_selectivity=filter_selectivity,
    )  # fmt: skip
    compiled = render_statement(parts, plan)
    if key is not None:
        _SHAPES.put(key, compiled)
    return compiled


def check_options(opts: SearchOptions) -> None:
    """Refuse (InvalidInput) what :data:`~pglogic.engine.options.OPTIONS` declares an option
    does not take (:meth:`~pglogic.engine.options.OptionSpec.refusal`: a k that is not a whole
    number from 1, a depth, ef_search or rerank_depth that is not whole, an unknown mode, an
    and_text weight, a not_context or a timeout out of range, an unknown lexical truth or passage
    score, ...), operators that are not a name, spec or family, and a filter that is not parsed.
    The bounds of index scans (k at most 1000, depth, ef_search, rerank_depth) are the plan's
    (:func:`pglogic.engine.plans.plan_query`): an exact search ignores them.

    Example:
        >>> check_options(SearchOptions(not_context=2))
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid not_context=2: a number from 0 (the negated term as it is) to 1 (without its AND's positive terms)
        >>> check_options(SearchOptions(k=2.5))
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid k=2.5: expected an integer
    """
    for spec in OPTIONS.values():
        message = spec.refusal(getattr(opts, spec.name))
        if message is not None:
            raise InvalidInput(message)
    if not isinstance(opts.operators, str | OperatorFamily):
        raise InvalidInput(
            f"Invalid operators={opts.operators!r}: a preset name (e.g. {DEFAULT_FAMILY!r}), a "
            "spec like 'and=min,or=max,not=complement' or an OperatorFamily"
        )
    for f in opts.filters:
        if not isinstance(f, Contains | Comparison):
            raise InvalidInput(
                f"Invalid filter {f!r}: expected a parsed filter, e.g. "
                "pglogic.engine.filters.parse_filters('places=usa')"
            )
