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

import math
import numbers
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.engine.conjunction import (
    MAX_AND_TEXT,
    OWN_IN_DISJUNCTION,
    and_texts,
    own_weights,
    scored_terms,
    with_and_texts,
)
from pglogic.engine.filters import Comparison, Contains, filters_sql
from pglogic.engine.guide import guide_vector
from pglogic.engine.negation import with_context
from pglogic.engine.nsfl import LayeredSql, evaluate_nsfl, fused_text, scored_texts
from pglogic.engine.operators import DEFAULT_FAMILY, OperatorFamily, resolve_family, to_sql
from pglogic.engine.options import (
    DEFAULT_RERANK_DEPTH,
    LEXICAL,
    MAX_EF_SEARCH,
    MODES,
    PASSAGE_SCORES,
    SearchOptions,
)
from pglogic.engine.plans import (
    default_depth,
    guide_depth,
    guide_only_depth,
    guide_only_plan,
    union_plan,
)
from pglogic.engine.source import Corpus
from pglogic.engine.sqo import sqo_vector
from pglogic.errors import InvalidInput, QueryError
from pglogic.query import (
    Node,
    Term,
    map_terms,
    matches,
    negated_only_terms,
    positive_matches,
    positive_terms,
    semantic_part,
    terms,
    to_string,
)

__all__ = [
    "DEFAULT_RERANK_DEPTH",
    "GUIDE",
    "GUIDE_DEPTH",
    "MAX_DEPTH",
    "MAX_EF_SEARCH",
    "MODES",
    "RERANK_DEPTH",
    "SHAPE_CACHE_SIZE",
    "CompiledQuery",
    "SearchOptions",
    "Source",
    "check_options",
    "compile_query",
    "set_local",
    "shape_of",
]

#: The deepest scan a statement may ask for (iterative scans go past ef_search): beyond it,
#: scoring every document (exact=True) is the cheaper and clearer plan.
MAX_DEPTH = 100_000
#: The largest k (a 32-bit integer, as the SQL function reads it); above 1000 with exact=True.
MAX_K = 2**31 - 1

#: Placeholder names of the guide vector and of its scan's depth.
GUIDE = "vg"
GUIDE_DEPTH = "gdepth"
#: Placeholder of a reranking mode's candidate depth K.
RERANK_DEPTH = "rdepth"
#: The ``tsvector`` column of a corpus's lexical index, and the placeholder of its text search
#: configuration.
LEXICAL_COLUMN = "tsv"
TEXT_CONFIG = "lcfg"


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
class CompiledQuery:
    """A compiled statement: print it with :meth:`as_string`, run it with :attr:`params`.

    ``terms[i]`` is the text whose similarity is column ``s{i}`` and whose vector is ``v{i}``
    (in NSFL modes the fused texts and the question follow the query's terms).
    ``settings`` are applied with ``set_config(name, value, true)`` before the statement.
    ``vector_kind`` says how the extra vector ``vg`` is computed from the term vectors:
    ``guide`` (:mod:`pglogic.engine.guide`), ``sqo`` (:mod:`pglogic.engine.sqo`) or None (no such vector).
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
    mode: str = "fuzzy"
    vector_kind: str | None = None
    seed: int = 0
    #: The lexical terms: ``lexical[j]`` is the text bound to ``q{j}``, its truth column ``l{j}``.
    lexical: tuple[str, ...] = ()
    #: λ of :mod:`pglogic.engine.negation` (fuzzy mode; 0 elsewhere): a negated term's vector
    #: is bound without that much of its AND's positive terms.
    not_context: float = 0.0
    #: The negated terms a mention floors (``SearchOptions.not_mention``), by their index i in
    #: :attr:`terms`: each one's text is bound to ``t{i}`` too, for its phrase match.
    mentions: tuple[int, ...] = ()

    @property
    def guide_param(self) -> str | None:
        """The placeholder of the guide (or SQO) vector ``vg``, or None when there is none."""
        return f"{self.param_prefix}{GUIDE}" if self.vector_kind else None

    @cached_property
    def text(self) -> str:
        """The statement rendered once (placeholders stay ``%(name)s``): what
        :func:`pglogic.store.search.execute` sends. Cached with the statement per query shape.

        Example:
            >>> compiled.text.startswith("WITH")  # doctest: +SKIP
            True
        """
        return self.statement.as_string(None)

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
        scored = self.scored_vectors(vectors)
        for i, t in enumerate(self.terms):
            if t not in scored:
                raise QueryError(f"No vector for term {t!r}")
            params[f"{self.param_prefix}v{i}"] = np.asarray(scored[t], dtype=np.float32)
        for j, text in enumerate(self.lexical):
            params[f"{self.param_prefix}q{j}"] = text
        for i in self.mentions:
            params[f"{self.param_prefix}t{i}"] = self.terms[i]
        if self.guide_param is not None:
            params[self.guide_param] = self._guide(scored)
        return params

    def scored_vectors(self, vectors: Mapping[str, npt.ArrayLike]) -> dict[str, npt.ArrayLike]:
        """The vectors the statement scores: each negated term's against its context
        (:func:`pglogic.engine.negation.with_context`, λ = :attr:`not_context`). Give it, and
        :meth:`with_vectors` and :meth:`guide_vector`, the embedder's vectors: a projected
        vector projected again moves further.

        Example:
            >>> compiled.scored_vectors({"a": vec_a, "b": vec_b})["b"]  # doctest: +SKIP
        """
        if self.tree is None or not self.not_context:
            return dict(vectors)
        return with_context(self.tree, vectors, self.not_context)

    def guide_vector(self, vectors: Mapping[str, npt.ArrayLike]) -> np.ndarray:
        """The guide vector (:mod:`pglogic.engine.guide`), or in the SQO modes the SQO vector
        (:mod:`pglogic.engine.sqo`), for these term vectors: the embedder's (it scores each
        negated term against its context itself, :meth:`scored_vectors`).

        Example:
            >>> compiled.guide_vector({"a": vec_a, "b": vec_b})  # doctest: +SKIP
            array([0.12, ...], dtype=float32)
        """
        return self._guide(self.scored_vectors(vectors))

    def _guide(self, scored: Mapping[str, npt.ArrayLike]) -> np.ndarray:
        """:meth:`guide_vector` from the vectors the statement scores (:meth:`scored_vectors`)."""
        tree = semantic_part(self.tree) if self.tree is not None else None
        if tree is None:
            raise QueryError("This compiled query has no tree to compute a guide vector from")
        if self.vector_kind == "sqo":
            return sqo_vector(tree, scored, self.family, self.truth, self.seed)
        return guide_vector(tree, scored, self.family, self.truth)


@dataclass(frozen=True)
class Source:
    """What a query searches: a table with an id column and an embedding column.

    ``alias`` names the table inside the statement (``d`` for corpora); None refers to it by its
    own name, so that SQL written against the table (e.g. an application's filters) fits in.
    ``columns`` are extra columns returned after the id. ``lexical`` is the ``tsvector`` column
    of its lexical index and ``text_config`` the text search configuration it was made with
    (both None: lexical terms are refused).

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
    lexical: str | None = None
    text_config: str | None = None
    #: The passage table (alias ``p``: a ``passage_doc`` column referencing ``id`` and the
    #: vector column ``passage_embedding``, None: named like ``embedding``), or None: one
    #: vector per row.
    passages: sql.Composable | None = None
    passage_doc: str = "doc_id"
    #: How much deeper the passages' scans go than a documents' scan of a multi-term query
    #: (:func:`passage_factor` of the passages per document).
    passage_factor: float = 1.0
    passage_embedding: str | None = None
    #: Whether a row with passages may lack its own vector (``embedding`` NULL): the blended
    #: passage scores then take its best passage alone. Set for an application's nullable
    #: column (SQLAlchemy); a pglogic corpus's active column is always filled, and its SQL
    #: function's statement stays the compiler's.
    own_nullable: bool = False

    @classmethod
    def for_corpus(cls, corpus: Corpus, *, passages: bool = True) -> Source:
        """The source for a pglogic corpus (table ``pglogic.corpus_<id>``, alias ``d``), with its
        passage table when it has one and ``passages`` is on.

        Example:
            >>> c = Corpus(1, "news", "corpus_1", "m", 384, "cosine", "embedding", None, None)
            >>> Source.for_corpus(c).alias
            'd'
        """
        lexical = LEXICAL_COLUMN if corpus.lexical_config is not None else None
        return cls(
            corpus.table, "d", "id", corpus.column, corpus.dim,
            lexical=lexical, text_config=corpus.lexical_config,
            passages=corpus.passage_table if passages else None,
            passage_factor=passage_factor(corpus.passages_per_document),
        )  # fmt: skip

    @property
    def passage_vector(self) -> str:
        """The passage table's vector column: ``passage_embedding``, else ``embedding``'s name.

        Example:
            >>> Source(sql.Identifier("a"), None, "id", "e", 3, (), passage_embedding="pe").passage_vector
            'pe'
        """
        return self.passage_embedding or self.embedding

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


def passage_factor(per_document: float | None) -> float:
    """How many times deeper the passages' scans of a multi-term query go than a documents'
    scan: the corpus's passages per document, in steps of a half, from 1 to 8 (1 when unknown).

    Example:
        >>> passage_factor(None), passage_factor(1.2), passage_factor(4.0), passage_factor(30)
        (1.0, 1.0, 4.0, 8.0)
    """
    if per_document is None or not per_document > 0:
        return 1.0
    return min(8.0, max(1.0, math.ceil(per_document * 2 - 0.5) / 2))


def _final(
    src: Source,
    score: sql.Composable,
    sim_cols: Sequence[sql.Identifier],
    k: sql.Composable,
    rel: str = "sims",
) -> sql.Composable:
    """The ranking step over ``rel``: the top k by score, then their columns (late fetch).

    Only the k winners are joined back to the table for ``src.columns`` (title, metadata...),
    so the candidate rows stay narrow.
    """
    idc = sql.Identifier(src.id)
    sims = sql.SQL(", ").join(sim_cols)
    top = sql.SQL(
        "SELECT {id}, {score} AS score, {sims} FROM {rel} ORDER BY score DESC, {id} LIMIT {k}"
    ).format(id=idc, score=score, sims=sims, k=k, rel=sql.Identifier(rel))
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


#: Compiled statements kept per query shape (:func:`compile_query`'s cache).
SHAPE_CACHE_SIZE = 512
_SHAPES: OrderedDict[tuple[Any, ...], CompiledQuery] = OrderedDict()
_SHAPES_LOCK = threading.Lock()  # searches run in threads (a pool): LRU updates are not atomic


def shape_of(tree: Node) -> str:
    """The query's shape: its canonical text with the distinct terms renamed ``0``, ``1``, ...
    in :func:`~pglogic.query.terms` order. Two queries of one shape compile to one statement.

    Example:
        >>> from pglogic.query import parse
        >>> shape_of(parse('"oil" AND NOT "gas" OR "oil"'))
        '"0" AND NOT "1" OR "0"'
    """
    index = {t: str(i) for i, t in enumerate(terms(tree))}
    lexical = {t: str(j) for j, t in enumerate(matches(tree))}
    return to_string(map_terms(tree, index.__getitem__, lexical.__getitem__))


def _cached(key: tuple[Any, ...], tree: Node, weight: int) -> CompiledQuery | None:
    """The cached statement of ``key``'s shape, for ``tree``'s words; None when not cached.

    Raises TypeError when the key is unhashable (a Contains filter's dict).
    """
    with _SHAPES_LOCK:
        cached = _SHAPES.get(key)
        if cached is None:
            return None
        _SHAPES.move_to_end(key)
    hit = replace(
        cached, terms=scored_terms(tree, weight), tree=tree,
        candidate_terms=[] if not cached.candidate_terms else positive_terms(tree),
        lexical=tuple(matches(tree)),
    )  # fmt: skip
    hit.__dict__["text"] = cached.text  # the rendered statement (a cached_property)
    return hit


def _remember(key: tuple[Any, ...], compiled: CompiledQuery) -> None:
    """Cache ``compiled`` (rendered once, now) under ``key``, dropping the oldest shape."""
    compiled.text  # noqa: B018 -- render once, now
    with _SHAPES_LOCK:
        _SHAPES[key] = compiled
        if len(_SHAPES) > SHAPE_CACHE_SIZE:
            _SHAPES.popitem(last=False)


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
    of a shape seen before costs no compiling and no rendering (``CompiledQuery.text``); the
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
    key: tuple[Any, ...] | None = None
    if isinstance(target, Corpus) and extra_where is None and not opts.mode.startswith("nsfl"):
        key = (shape_of(tree), target.table_name, target.column, target.dim,
               target.lexical_config, target.passage_tokens,
               passage_factor(target.passages_per_document), opts,
               server_has_iterative_scan, param_prefix, filter_selectivity,
               _layout(tree, opts))  # fmt: skip
        try:
            hit = _cached(key, tree, _and_weight(tree, opts))
        except TypeError:  # unhashable filter values (a Contains filter's dict)
            key, hit = None, None
        if hit is not None:
            return hit
    compiled = _compile(
        tree, target, opts, server_has_iterative_scan, extra_where, param_prefix,
        filter_selectivity,
    )  # fmt: skip
    if key is not None:
        _remember(key, compiled)
    return compiled


# -- the compiler ---------------------------------------------------------------------------------


def _compile(
    tree: Node,
    target: Corpus | Source,
    opts: SearchOptions,
    server_has_iterative_scan: bool,
    extra_where: sql.Composable | None,
    param_prefix: str,
    filter_selectivity: float | None,
) -> CompiledQuery:
    """Compile without the cache: the parts, then the exact scan, a k-NN scan or the candidates."""
    src = (
        target if isinstance(target, Source) else Source.for_corpus(target, passages=opts.passages)
    )
    check_options(opts)
    parts = _parts(tree, src, opts, extra_where, param_prefix)
    compiled = _plan(tree, opts, parts, server_has_iterative_scan, extra_where, filter_selectivity)
    # A statement run often is prepared (psycopg, after 5 runs), and after 5 executions of a
    # prepared statement PostgreSQL may switch to a generic plan, which knows neither k, the
    # depths nor the filter values: its plans sort whole tables instead of scanning the HNSW
    # index (tests/test_pool.py shows it). Every run is planned for its own values instead.
    parts.settings["plan_cache_mode"] = "force_custom_plan"
    parts.settings.update(_timeout_setting(opts))
    return compiled


def _plan(
    tree: Node,
    opts: SearchOptions,
    parts: _Parts,
    server_has_iterative_scan: bool,
    extra_where: sql.Composable | None,
    filter_selectivity: float | None,
) -> CompiledQuery:
    """The statement of the plan: the exact scan, a k-NN scan or the candidates."""
    if opts.exact:
        if parts.src.passages is not None:
            return _passage_statement(parts, None)
        return _exact_statement(parts)
    if not positive_terms(tree) and not positive_matches(tree) and not (parts.nsfl or parts.sqo):
        raise QueryError(
            "The query has no positive term to find candidates with (every term is negated); "
            "rerun with exact=True (--exact) to scan every document"
        )
    filtered = bool(opts.filters) or extra_where is not None
    iterative = server_has_iterative_scan and opts.iterative_scan
    depths = _depths(parts, filtered, iterative, filter_selectivity)
    parts.settings.update(_session_settings(parts, depths, filtered, iterative, filter_selectivity))
    if parts.src.passages is not None:
        return _passage_statement(parts, depths, iterative)
    if parts.single or parts.sqo:
        return _knn_statement(parts, depths)
    return _candidates_statement(parts, depths)


def _fraction(value: object) -> bool:
    """Whether ``value`` is a number from 0 to 1 (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    return 0 <= float(value) <= 1


def _whole(value: object) -> bool:
    """Whether ``value`` is an integer (a bool is not one; a NumPy integer is)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_options(opts: SearchOptions) -> None:
    """Refuse a k that is not a whole number from 1, a depth, ef_search or rerank_depth that is
    not whole, operators that are not a name, spec or family, a filter that is not parsed, an
    unknown mode, an and_text weight or a not_context out of range, an unknown lexical truth or
    passage score (InvalidInput).

    Example:
        >>> check_options(SearchOptions(not_context=2))
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid not_context=2: a number from 0 (the negated term as it is) to 1 (without its AND's positive terms)
        >>> check_options(SearchOptions(k=2.5))
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid k=2.5: expected an integer
    """
    for name in ("k", "depth", "ef_search", "rerank_depth"):
        value = getattr(opts, name)
        if not (_whole(value) or (value is None and name != "k")):
            raise InvalidInput(f"Invalid {name}={value!r}: expected an integer")
    if not isinstance(opts.operators, str | OperatorFamily):
        raise InvalidInput(
            f"Invalid operators={opts.operators!r}: a preset name (e.g. {DEFAULT_FAMILY!r}), a "
            "spec like 'and=min,or=max,not=complement' or an OperatorFamily"
        )
    for f in opts.filters:
        if not isinstance(f, Contains | Comparison):
            raise InvalidInput(
                f"Invalid filter {f!r}: expected a parsed filter, e.g. "
                "pglogic.engine.filters.parse_filter('places=usa')"
            )
    if opts.k < 1:
        raise InvalidInput(f"Invalid k={opts.k}: must be at least 1")
    if opts.k > MAX_K:
        raise InvalidInput(f"Invalid k={opts.k}: at most {MAX_K:,}")
    if (
        not isinstance(opts.and_text, int)
        or isinstance(opts.and_text, bool)
        or not 0 <= opts.and_text <= MAX_AND_TEXT
    ):
        raise InvalidInput(
            f"Invalid and_text={opts.and_text!r}: a whole number from 0 to {MAX_AND_TEXT}"
        )
    if opts.mode not in MODES:
        raise InvalidInput(f"Unknown mode {opts.mode!r}: valid modes are {', '.join(MODES)}")
    if opts.lexical not in LEXICAL:
        raise InvalidInput(
            f"Unknown lexical truth {opts.lexical!r}: valid values are {', '.join(LEXICAL)}"
        )
    if not _fraction(opts.not_context):
        raise InvalidInput(
            f"Invalid not_context={opts.not_context!r}: a number from 0 (the negated term as it "
            "is) to 1 (without its AND's positive terms)"
        )
    if not _fraction(opts.not_mention):
        raise InvalidInput(
            f"Invalid not_mention={opts.not_mention!r}: a number from 0 (the similarity alone) "
            "to 1 (a mention makes the negated term fully true)"
        )
    if opts.passage_score not in PASSAGE_SCORES:
        raise InvalidInput(
            f"Unknown passage score {opts.passage_score!r}: valid values are "
            f"{', '.join(PASSAGE_SCORES)}"
        )


@dataclass(frozen=True)
class _Parts:
    """What every statement of one compilation shares.

    ``mode`` is the effective mode (``fuzzy`` for a single term: every mode ranks it by its
    similarity); ``texts`` are the scored texts (``s{i}``, ``v{i}``), ``index`` their numbers;
    ``sims`` is the select list of every similarity, ``where`` the filter, ``final`` the ranking
    step (after the NSFL layers, if any). ``params`` and ``settings`` fill as the plan is made.
    """

    tree: Node
    opts: SearchOptions
    src: Source
    family: OperatorFamily
    pre: str
    mode: str
    question: str | None
    texts: list[str]
    index: dict[str, int]
    lexical: list[str]
    mentions: list[int]
    sims: sql.Composable
    where: sql.Composable
    final: sql.Composable
    layered: bool
    params: dict[str, Any]
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def single(self) -> bool:
        """Whether the query is one term."""
        return isinstance(self.tree, Term)

    @property
    def nsfl(self) -> bool:
        """Whether the mode is ``nsfl`` or ``nsfl-rerank``."""
        return self.mode.startswith("nsfl")

    @property
    def sqo(self) -> bool:
        """Whether the mode is ``sqo`` or ``sqo-rerank``."""
        return self.mode.startswith("sqo")

    @property
    def rerank(self) -> bool:
        """Whether the mode reranks the top K of one scan."""
        return self.mode.endswith("-rerank")

    @property
    def sep(self) -> sql.SQL:
        """What joins the statement's CTEs to the ranking step (a comma before NSFL layers)."""
        return sql.SQL(",\n" if self.layered else "\n")

    def ph(self, name: str) -> sql.Placeholder:
        """The placeholder ``name``, prefixed."""
        return sql.Placeholder(self.pre + name)

    def distance(self, vector: str) -> sql.Composable:
        """Cosine distance of the embedding to the vector bound to placeholder ``vector``."""
        return _distance(self.src, self.pre, vector)

    def result(self, statement: sql.Composed, cands: list[str], kind: str | None) -> CompiledQuery:
        """The compiled query of ``statement``, with candidate terms ``cands``."""
        return CompiledQuery(
            statement, self.params, self.texts, cands, self.settings, self.family, self.pre,
            self.tree, self.opts.truth, self.mode, kind, self.opts.seed, tuple(self.lexical),
            self.opts.not_context if self.mode == "fuzzy" else 0.0, tuple(self.mentions),
        )  # fmt: skip

    def tsquery(self, j: int) -> sql.Composable:
        """The ``tsquery`` of lexical term ``j``: its words as a phrase, in the corpus's
        configuration."""
        return _tsquery(self.pre, j)

    def matched(self, j: int) -> sql.Composable:
        """Whether the document's words match lexical term ``j`` (served by the GIN index)."""
        return sql.SQL("{} @@ {}").format(self.src.col(self.src.lexical or ""), self.tsquery(j))

    def rank(self, j: int) -> sql.Composable:
        """Lexical term ``j``'s normalised rank r / (r + 1) (``ts_rank_cd`` normalisation 32)."""
        return sql.SQL("ts_rank_cd({}, {}, 32)").format(
            self.src.col(self.src.lexical or ""), self.tsquery(j)
        )


def _tsquery(pre: str, j: int) -> sql.Composable:
    """Lexical term ``j``'s ``tsquery``: its words as a phrase, in the lexical index's
    configuration (placeholders ``q{j}`` and ``lcfg``)."""
    return sql.SQL("phraseto_tsquery({}::regconfig, {})").format(
        sql.Placeholder(pre + TEXT_CONFIG), sql.Placeholder(pre + f"q{j}")
    )


def _distance(src: Source, pre: str, vector: str) -> sql.Composable:
    """Cosine distance of ``src``'s embedding to the vector bound to placeholder ``vector``."""
    return sql.SQL("{} <=> {}::vector({})").format(
        src.col(src.embedding), sql.Placeholder(pre + vector), sql.Literal(src.dim)
    )


def _cosine(distance: sql.Composable) -> sql.Composable:
    """The cosine similarity of a cosine ``distance``, 0 where it is undefined.

    A zero vector has no direction: its cosine distance is NaN, and PostgreSQL orders NaN above
    every number, so ``GREATEST(0, LEAST(1, NaN))`` would make it fully true for every term.
    It is similar to nothing instead (0), as :func:`pglogic.engine.operators.evaluate_numpy`
    reads a NaN similarity.
    """
    return sql.SQL("coalesce(nullif(1 - ({}), 'NaN'), 0)").format(distance)


def _similarity(
    src: Source, pre: str, vector: str, name: str, mention: tuple[int, float] | None = None
) -> sql.Composable:
    """The select item ``name``: the cosine similarity to ``vector`` (:func:`_cosine`); with
    ``mention`` (scored term i, the floor), at least the floor where the document mentions the
    term (:func:`_floored`)."""
    expr = _cosine(_distance(src, pre, vector))
    if mention is not None:
        expr = _floored(expr, src, pre, *mention)
    return sql.SQL("{} AS {}").format(expr, sql.Identifier(name))


def _parts(
    tree: Node, src: Source, opts: SearchOptions, extra_where: sql.Composable | None, pre: str
) -> _Parts:
    """The shared parts: the scored texts, the score, the filter and the ranking step."""
    family = resolve_family(opts.operators) if isinstance(opts.operators, str) else opts.operators
    mode = "fuzzy" if isinstance(tree, Term) else opts.mode
    question = opts.question.strip() if opts.question and opts.question.strip() else None
    lexical = matches(tree)
    if lexical:
        _check_lexical(tree, src, mode)
    weight = _and_weight(tree, opts)
    texts = scored_texts(tree, question) if mode.startswith("nsfl") else scored_terms(tree, weight)
    index = {t: i for i, t in enumerate(texts)}
    lex_index = {t: j for j, t in enumerate(lexical)}
    mentions = sorted(index[t] for t in _mentioned(tree, src, mode, opts))
    score, layers, rel = _score(
        with_and_texts(tree, weight), mode, family, opts.truth, index, question, lex_index
    )
    where, fparams = filters_sql(opts.filters, src.col("metadata"), prefix=pre + "f")
    if extra_where is not None:
        where = sql.SQL("{} AND ({})").format(where, extra_where)
    params: dict[str, Any] = dict(fparams)
    params[pre + "k"] = opts.k
    if lexical or mentions:
        params[pre + TEXT_CONFIG] = src.text_config
    sim_items = [
        _similarity(src, pre, f"v{i}", f"s{i}", (i, opts.not_mention) if i in mentions else None)
        for i in index.values()
    ]
    if mode == "sqo":  # the score: the similarity to the SQO vector
        sim_items.append(_similarity(src, pre, GUIDE, "sq"))
    sim_items += [_lexical_truth(src, pre, j, opts.lexical) for j in range(len(lexical))]
    sim_cols = [sql.Identifier(f"s{index[t]}") for t in texts]
    sim_cols += [sql.Identifier(f"l{j}") for j in range(len(lexical))]
    final = _final(src, score, sim_cols, sql.Placeholder(pre + "k"), rel)
    if layers:
        final = sql.SQL("{}\n{}").format(sql.SQL(",\n").join(layers), final)
    return _Parts(
        tree, opts, src, family, pre, mode, question, texts, index, lexical, mentions,
        sql.SQL(", ").join(sim_items), where, final, bool(layers), params,
    )  # fmt: skip


def _check_lexical(tree: Node, src: Source, mode: str) -> None:
    """Refuse lexical terms outside the fuzzy mode and on a source without a lexical index."""
    if mode != "fuzzy":
        raise InvalidInput(
            f"Lexical terms (match:...) are scored in the fuzzy mode only, not in mode {mode!r}"
        )
    if src.lexical is None or src.text_config is None:
        first = matches(tree)[0]
        raise InvalidInput(
            f"match:{first!r} needs a lexical index, and this corpus has none: "
            "add it with `pglogic corpus lexical NAME`"
        )


def _mentioned(tree: Node, src: Source, mode: str, opts: SearchOptions) -> list[str]:
    """The negated terms whose mention floors their similarity (``not_mention``): every
    negated-only term in the fuzzy mode, on a source with a lexical index; else none."""
    if mode != "fuzzy" or not opts.not_mention or src.lexical is None or src.text_config is None:
        return []
    return negated_only_terms(tree)


def _floored(
    similarity: sql.Composable, src: Source, pre: str, i: int, floor: float
) -> sql.Composable:
    """Scored term ``i``'s ``similarity``, at least ``floor`` where the document's words match
    the term (its text bound to ``t{i}``) as a phrase, as ``match:`` does (``not_mention``);
    as it is elsewhere (GREATEST ignores the CASE's NULL)."""
    tsq = sql.SQL("phraseto_tsquery({}::regconfig, {})").format(
        sql.Placeholder(pre + TEXT_CONFIG), sql.Placeholder(pre + f"t{i}")
    )
    return sql.SQL("GREATEST({}, CASE WHEN {} @@ {} THEN {} END)").format(
        similarity, src.col(src.lexical or ""), tsq, sql.Literal(float(floor))
    )


def _lexical_truth(src: Source, pre: str, j: int, kind: str) -> sql.Composable:
    """The select item ``l{j}``: lexical term ``j``'s truth value (``crisp`` 1/0 or ``rank``)."""
    tsv, tsq = src.col(src.lexical or ""), _tsquery(pre, j)
    if kind == "rank":
        expr = sql.SQL("CASE WHEN {tsv} @@ {q} THEN ts_rank_cd({tsv}, {q}, 32) ELSE 0 END")
    else:
        expr = sql.SQL("CASE WHEN {tsv} @@ {q} THEN 1 ELSE 0 END")
    return sql.SQL("{}::float8 AS {}").format(expr.format(tsv=tsv, q=tsq), sql.Identifier(f"l{j}"))


def _and_weight(tree: Node, opts: SearchOptions) -> int:
    """The weight of the AND texts (:mod:`pglogic.engine.conjunction`): fuzzy mode only."""
    return opts.and_text if opts.mode == "fuzzy" and not isinstance(tree, Term) else 0


def _layout(tree: Node, opts: SearchOptions) -> tuple[int, ...]:
    """Where each AND text sits among the scored texts: a phrase equal to one of the query's
    terms shares its column, which depends on the words, not only on the shape."""
    weight = _and_weight(tree, opts)
    if not isinstance(weight, int) or weight <= 0:  # (an invalid weight is refused later)
        return ()
    texts = scored_terms(tree, weight)
    return tuple(texts.index(p) for p in and_texts(tree))


def _score(
    tree: Node,
    mode: str,
    family: OperatorFamily,
    truth: str,
    index: Mapping[str, int],
    question: str | None,
    lex_index: Mapping[str, int] | None = None,
) -> tuple[sql.Composable, list[sql.Composable], str]:
    """The score expression, the CTE layers that compute it (NSFL) and the relation it ranks."""
    if mode.startswith("nsfl"):
        alg = LayeredSql()
        score = evaluate_nsfl(tree, lambda t: alg.leaf(f"s{index[t]}"), alg, question).expr
        return score, alg.ctes("sims"), alg.last("sims")
    if mode == "sqo":
        return sql.Identifier("sq"), [], "sims"
    lex = lex_index or {}
    score = to_sql(
        tree, lambda t: sql.Identifier(f"s{index[t]}"), family, truth,
        lambda t: sql.Identifier(f"l{lex[t]}"),
    )  # fmt: skip
    return score, [], "sims"


@dataclass(frozen=True)
class _Depths:
    """How deep the statement's scans go (:func:`_depths`)."""

    depth: int  # each term's scan (and the question's, in nsfl mode)
    rdepth: int  # K of the reranking modes
    gdepth: int  # the guide's scan
    scan: int  # the deepest scan the statement makes
    guided: bool  # there is a guide scan
    guide_only: bool  # the guide's scan is the only one (pglogic.engine.plans.guide_only_plan)
    union: bool  # each term's top k, no guide (pglogic.engine.plans.union_plan)


def _depths(
    parts: _Parts, filtered: bool, iterative: bool, filter_selectivity: float | None
) -> _Depths:
    """The plan's scans and depths (:mod:`pglogic.engine.plans`); InvalidInput past pgvector's
    bounds."""
    opts, tree, mode = parts.opts, parts.tree, parts.mode
    if opts.k > MAX_EF_SEARCH:
        raise InvalidInput(
            f"k={opts.k} is above {MAX_EF_SEARCH}, the most an HNSW scan returns; use exact=True "
            "(--exact)"
        )
    if opts.depth is not None and not 1 <= opts.depth <= MAX_DEPTH:
        raise InvalidInput(
            f"Invalid depth={opts.depth}: from 1 to {MAX_DEPTH:,} candidates per scan; "
            "use exact=True (--exact) to score every document"
        )
    lexical_scans = len(positive_matches(tree))
    n_scans = len(positive_terms(tree)) + lexical_scans + (1 if mode == "nsfl" else 0)
    depth = opts.depth if opts.depth is not None else default_depth(opts.k, max(1, n_scans))
    depth = max(depth, opts.k)
    rdepth = opts.rerank_depth if opts.rerank_depth is not None else DEFAULT_RERANK_DEPTH
    if parts.rerank and not opts.k <= rdepth <= MAX_EF_SEARCH:
        raise InvalidInput(
            f"Invalid rerank_depth={rdepth}: from k={opts.k} to {MAX_EF_SEARCH} candidates"
        )
    guided = opts.guide and mode in ("fuzzy", "nsfl") and len(terms(tree)) > 1
    # A lexical term's matches are found by its own scan of the lexical index, and the guide
    # knows nothing of words: no plan that leaves the term scans out.
    guide_only = guided and not positive_matches(tree) and guide_only_plan(tree, opts)
    union = guided and not positive_matches(tree) and union_plan(tree, opts)
    if union:  # each term's top k, at a single-term query's ef_search; no guide
        guided = False
        depth = opts.depth if opts.depth is not None else opts.k
        if parts.src.passages is not None and opts.depth is None:
            # k passages may belong to fewer than k documents: a single-term query's depth
            depth = default_depth(opts.k, 1)
    gdepth = guide_depth(opts.k, depth) if opts.depth is None else depth
    if guide_only and opts.depth is None:
        gdepth = guide_only_depth(opts.k, filter_selectivity if filtered else None)
    if parts.rerank:
        scan = rdepth
    elif parts.sqo:
        scan = opts.k
    elif guide_only:
        scan = gdepth  # the only scan
    else:
        scan = max(depth, gdepth) if guided else depth
    factor = parts.src.passage_factor if parts.src.passages is not None else 1.0
    if factor > 1 and opts.depth is None and not (union or parts.single or parts.rerank):
        # A document holds several passages: its formula's best documents sit that many times
        # deeper in the passages' scans (bench/perf/results/passages_scale.md, 4 passages per
        # document at 1M: AND 3 recall@10 0.825 at the documents' depth, 1.0 at four times it).
        cap = MAX_DEPTH if iterative else MAX_EF_SEARCH
        depth, gdepth = (min(cap, max(x, math.ceil(x * factor))) for x in (depth, gdepth))
        scan = max(scan, min(cap, math.ceil(scan * factor)))
    if scan > MAX_EF_SEARCH and not iterative:
        raise InvalidInput(f"depth={depth} is above {MAX_EF_SEARCH} without iterative scans")
    return _Depths(depth, rdepth, gdepth, scan, guided, guide_only, union)


def _session_settings(
    parts: _Parts, d: _Depths, filtered: bool, iterative: bool, filter_selectivity: float | None
) -> dict[str, str]:
    """``hnsw.ef_search`` (over-fetching under a filter without iterative scans) and
    ``hnsw.iterative_scan``."""
    opts = parts.opts
    default_ef = min(MAX_EF_SEARCH, max(40, d.scan))
    if d.union and opts.depth is None:
        default_ef = min(MAX_EF_SEARCH, max(40, default_depth(opts.k, 1)))
    ef = opts.ef_search if opts.ef_search is not None else default_ef
    if not 1 <= ef <= MAX_EF_SEARCH:
        raise InvalidInput(f"Invalid ef_search={ef}: pgvector accepts 1 to {MAX_EF_SEARCH}")
    if filtered and not iterative and opts.ef_search is None:
        # Over-fetch (pgvector < 0.8): the index scan stops after ef_search tuples and the filter
        # is applied to those, so ask for depth / selectivity of them (all 1000 when unknown).
        rows = d.scan if parts.rerank or parts.sqo or d.guide_only else d.depth
        if d.union and opts.depth is None:  # as many as a single-term query over-fetches
            rows = default_depth(opts.k, 1)
        want = rows / filter_selectivity if filter_selectivity else MAX_EF_SEARCH
        ef = min(MAX_EF_SEARCH, max(ef, math.ceil(want)))
    settings = {"hnsw.ef_search": str(ef)}
    if iterative and (filtered or d.scan > ef):
        settings["hnsw.iterative_scan"] = "relaxed_order"
    return settings


def _timeout_setting(opts: SearchOptions) -> dict[str, str]:
    """``statement_timeout`` (milliseconds) for ``opts.timeout`` seconds; InvalidInput when it is
    not a positive number."""
    if opts.timeout is None:
        return {}
    if not (isinstance(opts.timeout, int | float) and 0 < opts.timeout < 2_147_483):
        raise InvalidInput(
            f"Invalid timeout={opts.timeout!r}: a positive number of seconds, below 2,147,483"
        )
    return {"statement_timeout": str(max(1, round(opts.timeout * 1000)))}


def _exact_statement(parts: _Parts) -> CompiledQuery:
    """Exact mode: every (filtered) document is scored, no index scan."""
    src = parts.src
    statement = sql.SQL(
        "WITH sims AS (SELECT {id}, {sims} FROM {from_} WHERE {emb} IS NOT NULL AND {where})"
        "{sep}{final}"
    ).format(
        id=src.col(src.id), sims=parts.sims, from_=src.from_, emb=src.col(src.embedding),
        where=parts.where, sep=parts.sep, final=parts.final,
    )  # fmt: skip
    return parts.result(statement, [], "sqo" if parts.mode == "sqo" else None)


def _knn_statement(parts: _Parts, d: _Depths) -> CompiledQuery:
    """One k-NN scan: a single term, or the SQO vector (its top k, or top K reranked).

    One term: the score is a monotone map (a TruthMap) of its similarity, so the k nearest
    documents are the answer: a plain k-NN scan, no candidate union. SQO: the same along the SQO
    vector (``sqo``), or its top K reranked by the formula (``sqo-rerank``).
    """
    src = parts.src
    limit = "k"
    if parts.rerank:
        limit = RERANK_DEPTH
        parts.params[parts.pre + RERANK_DEPTH] = d.rdepth
    statement = sql.SQL(
        "WITH sims AS MATERIALIZED (SELECT {id}, {sims} FROM {from_}"
        " WHERE {emb} IS NOT NULL AND {where} ORDER BY {dist} LIMIT {limit})\n{final}"
    ).format(
        id=src.col(src.id), sims=parts.sims, from_=src.from_, emb=src.col(src.embedding),
        where=parts.where,
        dist=parts.distance(GUIDE if parts.sqo else "v0"), limit=parts.ph(limit), final=parts.final,
    )  # fmt: skip
    cands = [] if parts.sqo else positive_terms(parts.tree)
    return parts.result(statement, cands, "sqo" if parts.sqo else None)


def _scans(parts: _Parts, d: _Depths) -> list[tuple[str, str, str]]:
    """The candidate CTEs as (name, vector placeholder, limit placeholder); binds the limits."""
    pre, params, index = parts.pre, parts.params, parts.index
    scans: list[tuple[str, str, str]] = []
    if parts.mode == "nsfl-rerank":
        params[pre + RERANK_DEPTH] = d.rdepth
        scans.append(("m", f"v{index[_monolithic(parts)]}", RERANK_DEPTH))
    elif not d.guide_only:  # (else the guide's scan alone finds the candidates)
        params[pre + "depth"] = d.depth
        scans += [(f"c{index[t]}", f"v{index[t]}", "depth") for t in positive_terms(parts.tree)]
        lex = {t: j for j, t in enumerate(parts.lexical)}
        scans += [(f"x{lex[t]}", f"q{lex[t]}", "depth") for t in positive_matches(parts.tree)]
        if parts.nsfl:
            scans.append(("m", f"v{index[_monolithic(parts)]}", "depth"))
    if d.guided:
        params[pre + GUIDE_DEPTH] = d.gdepth
        scans.append(("g", GUIDE, GUIDE_DEPTH))
    return scans


def _monolithic(parts: _Parts) -> str:
    """The NSFL modes' monolithic question: ``question``, else the formula's fused text."""
    return parts.question or fused_text(parts.tree)


def _scan_cte(parts: _Parts, name: str, vector: str, limit: str) -> sql.Composable:
    """A candidate CTE: the HNSW scan along ``vector`` with every text's similarity.

    Every candidate CTE computes all the similarities on the rows its index scan fetched anyway:
    no second lookup of each candidate (by primary key) in a table that may not fit in memory.
    A document found by two scans gets the same values twice; UNION keeps one.
    """
    src = parts.src
    if name.startswith("x"):  # a lexical term's matches, best ranked first (GIN index)
        j = int(name[1:])
        return sql.SQL(
            "{name} AS MATERIALIZED (SELECT {id}, {sims} FROM {from_}"
            " WHERE {emb} IS NOT NULL AND {where} AND {matched}"
            " ORDER BY {rank} DESC, {id} LIMIT {limit})"
        ).format(
            name=sql.Identifier(name), id=src.col(src.id), sims=parts.sims, from_=src.from_,
            emb=src.col(src.embedding), where=parts.where, matched=parts.matched(j),
            rank=parts.rank(j), limit=parts.ph(limit),
        )  # fmt: skip
    return sql.SQL(
        "{name} AS MATERIALIZED (SELECT {id}, {sims} FROM {from_}"
        " WHERE {emb} IS NOT NULL AND {where} ORDER BY {dist} LIMIT {limit})"
    ).format(
        name=sql.Identifier(name),
        id=src.col(src.id),
        sims=parts.sims,
        from_=src.from_,
        emb=src.col(src.embedding),
        where=parts.where,
        dist=parts.distance(vector),
        limit=parts.ph(limit),
    )


def _candidates_statement(parts: _Parts, d: _Depths) -> CompiledQuery:
    """Candidate CTEs (per term, the question's, the guide's), their UNION, then the ranking."""
    scans = _scans(parts, d)
    ctes = [_scan_cte(parts, *s) for s in scans]
    cols = sql.SQL(", ").join(
        [
            sql.Identifier(parts.src.id),
            *(sql.Identifier(f"s{parts.index[t]}") for t in parts.texts),
            *(sql.Identifier(f"l{j}") for j in range(len(parts.lexical))),
        ]
    )
    union = sql.SQL(" UNION ").join(
        sql.SQL("SELECT {} FROM {}").format(cols, sql.Identifier(name)) for name, _, _ in scans
    )
    statement = sql.SQL("WITH {ctes},\nsims AS ({union}){sep}{final}").format(
        ctes=sql.SQL(",\n").join(ctes), union=union, sep=parts.sep, final=parts.final
    )
    if parts.mode == "nsfl-rerank" or d.guide_only:
        cands: list[str] = []
    else:
        cands = positive_terms(parts.tree)
    return parts.result(statement, cands, "guide" if d.guided else None)


# -- passages -------------------------------------------------------------------------------------


def _best_passage(src: Source, pre: str, vector: str) -> sql.Composable:
    """A document's best passage's similarity to ``vector`` (an aggregate over its passages)."""
    dist = sql.SQL("{}.{} <=> {}::vector({})").format(
        sql.Identifier("p"), sql.Identifier(src.passage_vector), sql.Placeholder(pre + vector),
        sql.Literal(src.dim),
    )  # fmt: skip
    return sql.SQL("max({})").format(_cosine(dist))


#: The blend of a text's best passage's similarity and the document's own vector's, by the own
#: vector's weight (:func:`pglogic.engine.conjunction.own_weights`; the SQL function writes
#: the same text).
_BLEND = {0.5: "({} + {}) / 2", OWN_IN_DISJUNCTION: "({} * 9 + {}) / 10"}
assert OWN_IN_DISJUNCTION == 0.1, "_BLEND and sql/search.sql write a tenth: change all three"


def _passage_sims(parts: _Parts, source: sql.Composable, where: sql.Composable) -> sql.Composable:
    """The ``sims`` query over passages: every similarity the best over the document's passages
    of the documents of ``source`` (``GROUP BY`` the document), and the lexical truths (of the
    document's own words). A text with an own-vector weight (``own_weights``: with ``blend``,
    and ``blend-not`` / ``blend-not-or`` in a formula with a negated term, a positive text's
    similarity is the mean of that and the document's own vector's; with ``blend-not-or`` in
    a disjunction, a tenth of the own vector's) blends them. Whatever reads the document's own
    row (its vector for a blend; its words for a lexical truth or a mention's floor,
    :func:`_floored`) is added after the grouping, the documents joined again, so the grouping
    reads only the documents' ids (and what a filter tests) and never carries their vectors or
    words (``bench/perf/results/not_mention_latency.md``). With ``Source.own_nullable``, a row
    whose own vector is NULL takes its best passage alone."""
    src, pre = parts.src, parts.pre
    texts: list[tuple[str | None, str, str]] = [
        (t, f"v{i}", f"s{i}") for t, i in parts.index.items()
    ]
    if parts.mode == "sqo":
        texts.append((None, GUIDE, "sq"))
    inner = [
        sql.SQL("{} AS {}").format(_best_passage(src, pre, v), sql.Identifier(n))
        for _, v, n in texts
    ]
    p = sql.Identifier("p")
    grouped = sql.SQL(
        "SELECT {cols} FROM {source} JOIN {passages} p ON {p}.{doc} = {id}"
        " WHERE {emb} IS NOT NULL AND {where} GROUP BY {id}"
    ).format(
        cols=sql.SQL(", ").join([src.col(src.id), *inner]), id=src.col(src.id), source=source,
        passages=src.passages, p=p, doc=sql.Identifier(src.passage_doc),
        emb=sql.SQL("{}.{}").format(p, sql.Identifier(src.passage_vector)), where=where,
    )  # fmt: skip
    weights = own_weights(parts.tree, [t for t, _, _ in texts], parts.opts.passage_score)
    if not (any(weights) or parts.mentions or parts.lexical):
        return grouped
    outer: list[sql.Composable] = []
    for (t, v, n), w in zip(texts, weights, strict=True):
        col = sql.Identifier("b", n)
        if t is not None and parts.index[t] in parts.mentions:  # (never blended: negated-only)
            floored = _floored(col, src, pre, parts.index[t], parts.opts.not_mention)
            outer.append(sql.SQL("{} AS {}").format(floored, sql.Identifier(n)))
            continue
        if not w:
            outer.append(col)
            continue
        item: sql.Composable = sql.SQL(_BLEND[w]).format(col, _cosine(_distance(src, pre, v)))
        if src.own_nullable:  # no vector of its own: the best passage alone
            item = sql.SQL("CASE WHEN {} IS NULL THEN {} ELSE {} END").format(
                src.col(src.embedding), col, item
            )
        outer.append(sql.SQL("{} AS {}").format(item, sql.Identifier(n)))
    outer += [_lexical_truth(src, pre, j, parts.opts.lexical) for j in range(len(parts.lexical))]
    joined = 'SELECT {b_id}, {outer} FROM ({grouped}) "b" JOIN {from_} ON {id} = {b_id}'
    return sql.SQL(joined).format(
        b_id=sql.Identifier("b", src.id), outer=sql.SQL(", ").join(outer), grouped=grouped,
        from_=src.from_, id=src.col(src.id),
    )  # fmt: skip


def _passage_scan(parts: _Parts, name: str, vector: str, limit: str) -> sql.Composable:
    """A candidate CTE over the passages: the documents of the HNSW scan's nearest passages
    (a document may come more than once; the union keeps one). The documents' filter joins
    them in only when there is one."""
    src = parts.src
    if name.startswith("x"):  # a lexical term's matching documents (GIN index)
        j = int(name[1:])
        return sql.SQL(
            "{name} AS MATERIALIZED (SELECT {id} AS id FROM {from_}"
            " WHERE {where} AND {matched} ORDER BY {rank} DESC, {id} LIMIT {limit})"
        ).format(
            name=sql.Identifier(name), id=src.col(src.id), from_=src.from_, where=parts.where,
            matched=parts.matched(j), rank=parts.rank(j), limit=parts.ph(limit),
        )  # fmt: skip
    p = sql.Identifier("p")
    emb = sql.SQL("{}.{}").format(p, sql.Identifier(src.passage_vector))
    dist = sql.SQL("{} <=> {}::vector({})").format(emb, parts.ph(vector), sql.Literal(src.dim))
    doc = sql.SQL("{}.{}").format(p, sql.Identifier(src.passage_doc))
    join: sql.Composable = sql.SQL("")
    if parts.where.as_string(None) != "TRUE":
        join = sql.SQL(" JOIN {} ON {} = {}").format(src.from_, src.col(src.id), doc)
    return sql.SQL(
        "{name} AS MATERIALIZED (SELECT {doc} AS id FROM {passages} p{join}"
        " WHERE {emb} IS NOT NULL AND {where} ORDER BY {dist} LIMIT {limit})"
    ).format(
        name=sql.Identifier(name), doc=doc, passages=src.passages, join=join, emb=emb,
        where=parts.where, dist=dist, limit=parts.ph(limit),
    )  # fmt: skip


def _passage_statement(parts: _Parts, d: _Depths | None, iterative: bool = True) -> CompiledQuery:
    """A search over passages: the candidate documents from HNSW scans of the passages (and
    the lexical scans of the documents), each term's truth the best over every passage of each
    candidate, then the formula and the top k. ``d`` None: exact, every document scored."""
    src, pre = parts.src, parts.pre
    assert src.passages is not None
    if d is None:
        sims = _passage_sims(parts, src.from_, parts.where)
        statement = sql.SQL("WITH sims AS ({}){}{}").format(sims, parts.sep, parts.final)
        return parts.result(statement, [], "sqo" if parts.mode == "sqo" else None)
    if parts.single or parts.sqo:
        # one scan; its nearest passages hold the k best documents, some more than once
        limit = RERANK_DEPTH if parts.rerank else "depth"
        parts.params[pre + limit] = d.rdepth if parts.rerank else max(d.depth, d.scan)
        scans = [("c0" if parts.single else "g", GUIDE if parts.sqo else "v0", limit)]
        deepest = parts.params[pre + limit]
        ef = int(parts.settings.get("hnsw.ef_search", "40"))
        if iterative and deepest > ef:
            parts.settings["hnsw.iterative_scan"] = "relaxed_order"
    else:
        scans = _scans(parts, d)
    ctes = [_passage_scan(parts, *s) for s in scans]
    union = sql.SQL(" UNION ").join(
        sql.SQL("SELECT id FROM {}").format(sql.Identifier(name)) for name, _, _ in scans
    )
    sims = _passage_sims(
        parts, sql.SQL("cand JOIN {} ON {} = cand.id").format(src.from_, src.col(src.id)),
        sql.SQL("TRUE"),
    )  # fmt: skip
    statement = sql.SQL("WITH {ctes},\ncand AS ({union}),\nsims AS ({sims}){sep}{final}").format(
        ctes=sql.SQL(",\n").join(ctes), union=union, sims=sims, sep=parts.sep, final=parts.final
    )
    if parts.sqo:
        return parts.result(statement, [], "sqo")
    if parts.mode == "nsfl-rerank" or d.guide_only:
        cands: list[str] = []
    else:
        cands = positive_terms(parts.tree)
    return parts.result(statement, cands, "guide" if d.guided else None)
