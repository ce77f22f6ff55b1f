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
vector (:mod:`pglogic.engine.guide`, computed from the term vectors by
:meth:`CompiledQuery.with_vectors`), which finds the documents that score best on the whole
formula. Where that scan alone suffices (:func:`guide_suffices`: no positive OR, e.g.
``"a" AND NOT "b"``), it is the statement's only index scan, at twice its depth, and the term
CTEs are left out. Where the terms' own top k suffice (:func:`union_suffices`: a disjunction of
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
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.engine.filters import Filter, filters_sql
from pglogic.engine.guide import guide_vector
from pglogic.engine.nsfl import LayeredSql, evaluate_nsfl, fused_text, scored_texts
from pglogic.engine.operators import DEFAULT_FAMILY, OperatorFamily, resolve_family, to_sql
from pglogic.engine.source import Corpus
from pglogic.engine.sqo import sqo_vector
from pglogic.errors import InvalidInput, QueryError
from pglogic.query import Node, Not, Or, Term, map_terms, positive_terms, terms, to_string

#: pgvector's upper bound for hnsw.ef_search.
MAX_EF_SEARCH = 1000
#: Placeholder names of the guide vector and of its scan's depth.
GUIDE = "vg"
GUIDE_DEPTH = "gdepth"
#: Placeholder of a reranking mode's candidate depth K.
RERANK_DEPTH = "rdepth"
#: Default K of the reranking modes (the NSFL paper reranks 1,000 candidates).
DEFAULT_RERANK_DEPTH = 1000

MODES: dict[str, str] = {
    "fuzzy": "fuzzy operators over the term similarities (candidates: each positive term's HNSW "
    "scan and the guide's)",
    "nsfl": "NSFL operators over term, fused-query and question similarities (candidates: the "
    "fuzzy mode's and the question's scan)",
    "nsfl-rerank": "NSFL operators over the top K of the question's HNSW scan (the NSFL paper's "
    "reranking)",
    "sqo": "spherical query optimisation: one optimised query vector, plain HNSW top k",
    "sqo-rerank": "the top K of the SQO vector's HNSW scan, reranked by the fuzzy formula",
}
"""Scoring modes by name (``SearchOptions.mode``, ``--mode``); ``fuzzy`` is the default."""


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


def guide_only_depth(k: int, selectivity: float | None = None) -> int:
    """Depth of the guide's scan when it is the only scan (:func:`guide_only_plan`).

    Twice :func:`guide_depth` without a filter (400 rows for k = 10). Under a filter that keeps
    a fraction s of the rows, the filtered top k are about the unfiltered top k / s, thinned:
    the depth is s times the unfiltered depth for k / s, and at least a single-term query's
    (:func:`default_depth`). At 1M vectors with a 10% filter, k = 10, depth 100 found the same
    top 10 as depth 400 (within 0.01 recall@10, six shapes) in a third of the time; with 1%,
    the same recall as 400 for every shape (``bench/results/filter_depth.md``).

    Example:
        >>> guide_only_depth(10), guide_only_depth(10, 0.5), guide_only_depth(10, 0.1)
        (400, 400, 100)
        >>> guide_only_depth(100), guide_only_depth(100, 0.1)
        (1000, 1000)
    """

    def unfiltered(n: int) -> int:
        return min(MAX_EF_SEARCH, 2 * guide_depth(n, default_depth(n, 1)))

    full = unfiltered(k)
    if selectivity is None or not 0 < selectivity < 1:
        return full
    thinned = math.ceil(selectivity * unfiltered(math.ceil(k / selectivity)))
    return max(default_depth(k, 1), min(full, thinned))


def guide_suffices(tree: Node) -> bool:
    """Whether the guide's scan alone finds the formula's best documents (no term scans).

    The guide (:func:`pglogic.engine.guide.guide_vector`) climbs to the one direction where the formula
    scores best. That direction holds the top documents of a conjunction, with or without NOTs,
    but not of a disjunction of positive terms: OR (``max``) is best near *each* of its
    operands, and the guide settles near one. So term scans stay wherever a positive OR (or an
    AND under an odd number of NOTs, which is one) joins two operands that each hold a positive
    term. Measured at 1M vectors in ``bench/results/guide_only.md``.

    Example:
        >>> from pglogic.query import parse
        >>> [guide_suffices(parse(q)) for q in ('"a" AND "b"', '"a" AND NOT ("b" OR "c")',
        ...                                     '"a" OR "b"', 'NOT (NOT "a" AND NOT "b")')]
        [True, True, False, False]
    """

    def walk(node: Node, positive: bool) -> tuple[bool, bool]:
        """(holds a root-positive term, has a disjunction of two such operands)."""
        if isinstance(node, Term):
            return positive, False
        if isinstance(node, Not):
            return walk(node.child, not positive)
        parts = [walk(child, positive) for child in node.children]
        holds = sum(h for h, _ in parts)
        disjunctive = isinstance(node, Or) == positive  # OR, or AND under a NOT
        return holds > 0, any(d for _, d in parts) or (disjunctive and holds >= 2)

    return not walk(tree, True)[1]


def union_suffices(tree: Node, family: OperatorFamily) -> bool:
    """Whether the union of each term's own top k holds the formula's top k (no guide scan).

    True for a disjunction of positive terms when the family's OR is ``max`` (the default
    family's): every truth map is non-decreasing, so a document whose best term ``t`` does not
    put it in ``t``'s own top k is outranked by those k documents, each scoring at least
    ``T(s_t)``. The candidates are then exactly those of n single-term queries (ties aside).

    Example:
        >>> from pglogic.query import parse
        >>> godel, itlr = resolve_family("godel"), resolve_family("itlr")
        >>> [union_suffices(parse(q), godel) for q in ('"a" OR "b" OR "c"', '"a" OR NOT "b"',
        ...                                            '"a" OR ("b" AND "c")', '"a"')]
        [True, False, False, False]
        >>> union_suffices(parse('"a" OR "b"'), itlr)  # or=sum: best between its operands
        False
    """

    def disjunction(node: Node) -> bool:
        return isinstance(node, Term) or (
            isinstance(node, Or) and all(disjunction(c) for c in node.children)
        )

    return family.or_.name == "max" and isinstance(tree, Or) and disjunction(tree)


def union_plan(tree: Node, opts: SearchOptions) -> bool:
    """Whether ``opts`` compiles ``tree`` to the terms' own top-k scans alone (no guide).

    The fuzzy mode's approximate plan where :func:`union_suffices`, unless ``opts.term_scans``
    forces a plan (True: the terms at full depth + the guide; False: the guide alone) or
    ``opts.guide`` is off (the terms at full depth).

    Example:
        >>> from pglogic.query import parse
        >>> union_plan(parse('"a" OR "b"'), SearchOptions())
        True
        >>> union_plan(parse('"a" OR "b"'), SearchOptions(operators="itlr"))
        False
    """
    if opts.exact or not opts.guide or opts.mode != "fuzzy" or opts.term_scans is not None:
        return False
    family = resolve_family(opts.operators) if isinstance(opts.operators, str) else opts.operators
    return union_suffices(tree, family)


def guide_only_plan(tree: Node, opts: SearchOptions) -> bool:
    """Whether ``opts`` compiles ``tree`` to the guide's scan alone (no scan per term).

    The fuzzy mode's approximate plan for two or more terms where :func:`guide_suffices`, unless
    ``opts.term_scans`` says otherwise (or ``opts.guide`` is off).

    Example:
        >>> from pglogic.query import parse
        >>> guide_only_plan(parse('"a" AND NOT "b"'), SearchOptions())
        True
        >>> guide_only_plan(parse('"a" AND NOT "b"'), SearchOptions(term_scans=True))
        False
    """
    if opts.exact or not opts.guide or opts.mode != "fuzzy" or len(terms(tree)) < 2:
        return False
    return guide_suffices(tree) if opts.term_scans is None else not opts.term_scans


def scan_plan(tree: Node, opts: SearchOptions) -> str:
    """Which index scans the approximate statement makes, as :func:`prefer_exact` costs them.

    ``guide`` (the guide's scan alone: :func:`guide_only_plan`), ``union`` (each term's top k:
    one term, or :func:`union_plan`) or ``terms`` (a scan per candidate term, plus the guide's).

    Example:
        >>> from pglogic.query import parse
        >>> [scan_plan(parse(q), SearchOptions()) for q in ('"a"', '"a" AND NOT "b"',
        ...                                                 '"a" OR "b"', '"a" OR ("b" AND "c")')]
        ['union', 'guide', 'union', 'terms']
    """
    if isinstance(tree, Term):
        return "union"
    if guide_only_plan(tree, opts):
        return "guide"
    return "union" if union_plan(tree, opts) else "terms"


#: Cost of one tuple of a filtered (iterative) HNSW scan / one row of a sequential scan, measured
#: on 100k vectors in bench/scale.py (AND 3, k=10: 10% filter 60 ms iterative vs 64 ms exact; 1%
#: filter 181 ms vs 66 ms). A filtered scan visits about depth / selectivity tuples per term.
EXACT_SWITCH = 17


def prefer_exact(
    matching_rows: float,
    k: int,
    candidate_terms: int,
    *,
    plan: str = "terms",
    selectivity: float = 1.0,
) -> bool:
    """Whether scoring every row that passes a filter beats filtered HNSW scans.

    The T index scans visit about T * depth / selectivity tuples; the exact plan scans every
    row once. They cost the same when the matching rows = EXACT_SWITCH * T * depth. ``plan``
    says which scans the approximate statement makes: ``terms`` (one per candidate term, plus
    the guide's), ``guide`` (the guide's scan alone, :func:`guide_only_depth` rows:
    :func:`guide_only_plan`) or ``union`` (one per term for k rows: :func:`scan_plan`). A
    union scan stops after k matching rows, k / ``selectivity`` tuples, but visits at least
    its ``ef_search`` (a single-term query's) tuples: depth = max(k, ef_search * selectivity).
    Measured at 1M vectors (``bench/results/scale_1m_union_first_run.md``): OR 8, k = 100
    with a 1% filter, exact 412 ms vs 585 ms for the scans; with 10%, 534 ms vs 115 ms.

    Example:
        >>> prefer_exact(1_000, 10, 3), prefer_exact(10_000, 10, 3)
        (True, False)
        >>> prefer_exact(10_000, 10, 5), prefer_exact(10_000, 10, 5, plan="guide")
        (True, False)
        >>> [prefer_exact(10_000, 100, t, plan="union", selectivity=0.01) for t in (5, 8)]
        [False, True]
    """
    depth = default_depth(k, candidate_terms)
    if plan == "guide":
        return matching_rows <= EXACT_SWITCH * guide_only_depth(k, selectivity)
    if plan == "union":
        union_depth = max(k, default_depth(k, 1) * selectivity)
        return matching_rows <= EXACT_SWITCH * candidate_terms * union_depth
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
    ``guide`` adds one more candidate scan along :func:`pglogic.engine.guide.guide_vector` (queries of
    two or more terms): it finds the documents that score best on the combination, which sit
    deep in every single term's list. ``term_scans`` says whether each positive term gets its
    own scan too: by default (None) only where the guide alone does not suffice
    (:func:`guide_suffices`: a positive OR); otherwise the guide's scan, at twice its depth, is
    the only index scan of the statement (fuzzy mode). A disjunction of terms under ``max``
    (:func:`union_suffices`) needs each term's top k only: k rows per term, no guide.
    ``True`` / ``False`` force the terms + the guide, or the guide alone.

    ``mode`` picks the scoring method (:data:`MODES`): ``nsfl`` and ``nsfl-rerank`` also score
    the fused query texts and ``question`` (the monolithic question; default: the formula as
    text, :func:`pglogic.query.to_text`), :mod:`pglogic.engine.nsfl`; ``sqo`` and ``sqo-rerank`` search
    along the vector of :mod:`pglogic.engine.sqo` (``seed`` makes it deterministic). ``rerank_depth``
    is K of the reranking modes (default 1000). NSFL scores raw cosine similarities, as the
    paper does: ``operators`` and ``truth`` then only steer the guide scan; the SQO modes climb
    (and ``sqo-rerank`` ranks by) the fuzzy formula with ``operators`` and ``truth``.

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
    term_scans: bool | None = None
    mode: str = "fuzzy"
    question: str | None = None
    rerank_depth: int | None = None
    seed: int = 0


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
        for i, t in enumerate(self.terms):
            if t not in vectors:
                raise QueryError(f"No vector for term {t!r}")
            params[f"{self.param_prefix}v{i}"] = np.asarray(vectors[t], dtype=np.float32)
        if self.guide_param is not None:
            params[self.guide_param] = self.guide_vector(vectors)
        return params

    def guide_vector(self, vectors: Mapping[str, npt.ArrayLike]) -> np.ndarray:
        """The guide vector (:mod:`pglogic.engine.guide`), or in the SQO modes the SQO vector
        (:mod:`pglogic.engine.sqo`), for these term vectors.

        Example:
            >>> compiled.guide_vector({"a": vec_a, "b": vec_b})  # doctest: +SKIP
            array([0.12, ...], dtype=float32)
        """
        if self.tree is None:
            raise QueryError("This compiled query has no tree to compute a guide vector from")
        if self.vector_kind == "sqo":
            return sqo_vector(self.tree, vectors, self.family, self.truth, self.seed)
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


def shape_of(tree: Node) -> str:
    """The query's shape: its canonical text with the distinct terms renamed ``0``, ``1``, ...
    in :func:`~pglogic.query.terms` order. Two queries of one shape compile to one statement.

    Example:
        >>> from pglogic.query import parse
        >>> shape_of(parse('"oil" AND NOT "gas" OR "oil"'))
        '"0" AND NOT "1" OR "0"'
    """
    index = {t: str(i) for i, t in enumerate(terms(tree))}
    return to_string(map_terms(tree, index.__getitem__))


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
        key = (shape_of(tree), target.table_name, target.column, target.dim, opts,
               server_has_iterative_scan, param_prefix, filter_selectivity)  # fmt: skip
        try:
            cached = _SHAPES.get(key)
        except TypeError:  # unhashable filter values (a Contains filter's dict)
            key, cached = None, None
        if key is not None and cached is not None:
            _SHAPES.move_to_end(key)
            hit = replace(
                cached, terms=terms(tree), tree=tree,
                candidate_terms=[] if not cached.candidate_terms else positive_terms(tree),
            )  # fmt: skip
            hit.__dict__["text"] = cached.text  # the rendered statement (a cached_property)
            return hit
    compiled = _compile(
        tree, target, opts, server_has_iterative_scan, extra_where, param_prefix,
        filter_selectivity,
    )  # fmt: skip
    if key is not None:
        _SHAPES[key] = compiled
        compiled.text  # noqa: B018 -- render once, now
        if len(_SHAPES) > SHAPE_CACHE_SIZE:
            _SHAPES.popitem(last=False)
    return compiled


def _compile(
    tree: Node,
    target: Corpus | Source,
    opts: SearchOptions,
    server_has_iterative_scan: bool,
    extra_where: sql.Composable | None,
    param_prefix: str,
    filter_selectivity: float | None,
) -> CompiledQuery:
    src = target if isinstance(target, Source) else Source.for_corpus(target)
    if opts.k < 1:
        raise InvalidInput(f"Invalid k={opts.k}: must be at least 1")
    if opts.mode not in MODES:
        raise InvalidInput(f"Unknown mode {opts.mode!r}: valid modes are {', '.join(MODES)}")
    family = resolve_family(opts.operators) if isinstance(opts.operators, str) else opts.operators
    pre = param_prefix
    single = isinstance(tree, Term)
    mode = "fuzzy" if single else opts.mode  # one term: every mode ranks by its similarity
    nsfl = mode.startswith("nsfl")
    sqo = mode.startswith("sqo")
    rerank = mode.endswith("-rerank")

    def ph(name: str) -> sql.Placeholder:
        return sql.Placeholder(pre + name)

    def distance(vector: str) -> sql.Composable:
        """Cosine distance of the embedding to the vector bound to placeholder ``vector``."""
        return sql.SQL("{} <=> {}::vector({})").format(
            src.col(src.embedding), ph(vector), sql.Literal(src.dim)
        )

    question = opts.question.strip() if opts.question and opts.question.strip() else None
    all_terms = scored_texts(tree, question) if nsfl else terms(tree)
    cand_terms = positive_terms(tree)
    index_of = {t: i for i, t in enumerate(all_terms)}
    sim_col = {t: sql.Identifier(f"s{i}") for t, i in index_of.items()}
    layers: list[sql.Composable] = []
    rel = "sims"
    if nsfl:
        alg = LayeredSql()
        score = evaluate_nsfl(tree, lambda t: alg.leaf(f"s{index_of[t]}"), alg, question).expr
        layers, rel = alg.ctes("sims"), alg.last("sims")
    elif mode == "sqo":
        score = sql.Identifier("sq")
    else:
        score = to_sql(tree, lambda t: sim_col[t], family, opts.truth)
    where, fparams = filters_sql(opts.filters, src.col("metadata"), prefix=pre + "f")
    if extra_where is not None:
        where = sql.SQL("{} AND ({})").format(where, extra_where)
    params: dict[str, Any] = dict(fparams)
    params[pre + "k"] = opts.k
    settings: dict[str, str] = {}

    sim_items = [
        sql.SQL("1 - ({}) AS {}").format(distance(f"v{i}"), sim_col[t]) for t, i in index_of.items()
    ]
    if mode == "sqo":  # the score: the similarity to the SQO vector
        sim_items.append(sql.SQL("1 - ({}) AS {}").format(distance(GUIDE), sql.Identifier("sq")))
    sims = sql.SQL(", ").join(sim_items)
    idc = sql.Identifier(src.id)
    final = _final(src, score, [sim_col[t] for t in all_terms], ph("k"), rel)
    if layers:
        final = sql.SQL("{}\n{}").format(sql.SQL(",\n").join(layers), final)

    def compiled(statement: sql.Composed, cands: list[str], kind: str | None) -> CompiledQuery:
        return CompiledQuery(
            statement, params, all_terms, cands, settings, family, pre, tree, opts.truth,
            mode, kind, opts.seed,
        )  # fmt: skip

    if opts.exact:
        statement = sql.SQL(
            "WITH sims AS (SELECT {id}, {sims} FROM {from_} WHERE {emb} IS NOT NULL AND {where})"
            "{sep}{final}"
        ).format(
            id=src.col(src.id), sims=sims, from_=src.from_, emb=src.col(src.embedding),
            where=where, sep=sql.SQL(",\n" if layers else "\n"), final=final,
        )  # fmt: skip
        return compiled(statement, [], "sqo" if mode == "sqo" else None)

    if not cand_terms and not (nsfl or sqo):
        raise QueryError(
            "The query has no positive term to find candidates with (every term is negated); "
            "rerun with exact=True (--exact) to scan every document"
        )
    if opts.k > MAX_EF_SEARCH:
        raise InvalidInput(
            f"k={opts.k} is above {MAX_EF_SEARCH}, the most an HNSW scan returns; use exact=True"
        )
    n_scans = len(cand_terms) + (1 if mode == "nsfl" else 0)
    depth = opts.depth if opts.depth is not None else default_depth(opts.k, max(1, n_scans))
    depth = max(depth, opts.k)
    rdepth = opts.rerank_depth if opts.rerank_depth is not None else DEFAULT_RERANK_DEPTH
    if rerank and not opts.k <= rdepth <= MAX_EF_SEARCH:
        raise InvalidInput(
            f"Invalid rerank_depth={rdepth}: from k={opts.k} to {MAX_EF_SEARCH} candidates"
        )
    guided = opts.guide and mode in ("fuzzy", "nsfl") and len(terms(tree)) > 1
    guide_only = guided and guide_only_plan(tree, opts)
    top_k_union = guided and union_plan(tree, opts)
    if top_k_union:  # each term's top k, at a single-term query's ef_search; no guide
        guided = False
        depth = opts.depth if opts.depth is not None else opts.k
    gdepth = guide_depth(opts.k, depth) if opts.depth is None else depth
    if guide_only and opts.depth is None:
        filtered_by = filter_selectivity if (opts.filters or extra_where is not None) else None
        gdepth = guide_only_depth(opts.k, filtered_by)
    if rerank:
        scan_depth = rdepth
    elif sqo:
        scan_depth = opts.k
    elif guide_only:
        scan_depth = gdepth  # the only scan
    else:
        scan_depth = max(depth, gdepth) if guided else depth
    if scan_depth > MAX_EF_SEARCH and not (server_has_iterative_scan and opts.iterative_scan):
        raise InvalidInput(f"depth={depth} is above {MAX_EF_SEARCH} without iterative scans")
    default_ef = min(MAX_EF_SEARCH, max(40, scan_depth))
    if top_k_union and opts.depth is None:
        default_ef = min(MAX_EF_SEARCH, max(40, default_depth(opts.k, 1)))
    ef = opts.ef_search if opts.ef_search is not None else default_ef
    if not 1 <= ef <= MAX_EF_SEARCH:
        raise InvalidInput(f"Invalid ef_search={ef}: pgvector accepts 1 to {MAX_EF_SEARCH}")
    filtered = bool(opts.filters) or extra_where is not None
    iterative = server_has_iterative_scan and opts.iterative_scan
    if filtered and not iterative and opts.ef_search is None:
        # Over-fetch (pgvector < 0.8): the index scan stops after ef_search tuples and the filter
        # is applied to those, so ask for depth / selectivity of them (all 1000 when unknown).
        rows = scan_depth if rerank or sqo or guide_only else depth
        if top_k_union and opts.depth is None:  # as many as a single-term query over-fetches
            rows = default_depth(opts.k, 1)
        want = rows / filter_selectivity if filter_selectivity else MAX_EF_SEARCH
        ef = min(MAX_EF_SEARCH, max(ef, math.ceil(want)))
    settings["hnsw.ef_search"] = str(ef)
    if iterative and (filtered or scan_depth > ef):
        settings["hnsw.iterative_scan"] = "relaxed_order"

    if single or sqo:
        # One term: the score is a monotone map (a TruthMap) of its similarity, so the k nearest
        # documents are the answer: a plain k-NN scan, no candidate union. SQO: the same along
        # the SQO vector (``sqo``), or its top K reranked by the formula (``sqo-rerank``).
        limit = "k"
        if rerank:
            limit = RERANK_DEPTH
            params[pre + RERANK_DEPTH] = rdepth
        statement = sql.SQL(
            "WITH sims AS MATERIALIZED (SELECT {id}, {sims} FROM {from_} WHERE {where}"
            " ORDER BY {dist} LIMIT {limit})\n{final}"
        ).format(
            id=src.col(src.id), sims=sims, from_=src.from_, where=where,
            dist=distance(GUIDE if sqo else "v0"), limit=ph(limit), final=final,
        )  # fmt: skip
        return compiled(statement, [] if sqo else cand_terms, "sqo" if sqo else None)

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

    monolithic = question or fused_text(tree)
    scans: list[tuple[str, str, str]] = []
    if mode == "nsfl-rerank":
        params[pre + RERANK_DEPTH] = rdepth
        scans.append(("m", f"v{index_of[monolithic]}", RERANK_DEPTH))
    elif guide_only:
        cand_terms = []  # the guide's scan alone finds the candidates
    else:
        params[pre + "depth"] = depth
        scans += [(f"c{index_of[t]}", f"v{index_of[t]}", "depth") for t in cand_terms]
        if nsfl:
            scans.append(("m", f"v{index_of[monolithic]}", "depth"))
    if guided:
        params[pre + GUIDE_DEPTH] = gdepth
        scans.append(("g", GUIDE, GUIDE_DEPTH))
    ctes = [scan(*s) for s in scans]
    cte_names = [name for name, _, _ in scans]
    cols = sql.SQL(", ").join([idc, *(sim_col[t] for t in all_terms)])
    union = sql.SQL(" UNION ").join(
        sql.SQL("SELECT {} FROM {}").format(cols, sql.Identifier(name)) for name in cte_names
    )
    statement = sql.SQL("WITH {ctes},\nsims AS ({union}){sep}{final}").format(
        ctes=sql.SQL(",\n").join(ctes), union=union,
        sep=sql.SQL(",\n" if layers else "\n"), final=final,
    )  # fmt: skip
    cands = [] if mode == "nsfl-rerank" else cand_terms
    return compiled(statement, cands, "guide" if guided else None)
