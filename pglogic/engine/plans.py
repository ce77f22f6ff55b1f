"""Planning heuristics: which index scans a query's statement makes, and how deep.

Pure functions of the query tree and :class:`~pglogic.engine.options.SearchOptions`, used by
the compiler (:func:`pglogic.engine.compile.compile_query`) and, before it, by
:func:`pglogic.store.search.search` to choose between filtered HNSW scans and the exact plan
(:func:`prefer_exact`). A query of two or more terms scans along its guide vector
(:mod:`pglogic.engine.guide`); where that scan alone suffices (:func:`guide_suffices`) it is the
only one (:func:`guide_only_plan`, at :func:`guide_only_depth`); where the terms' own top k
suffice (:func:`union_suffices`) there is no guide (:func:`union_plan`); otherwise each positive
term gets a scan at :func:`default_depth` and the guide one at :func:`guide_depth`.

:func:`plan_query` makes a statement's whole :class:`Plan` from a normalised query
(:class:`~pglogic.engine.normalise.PlanReady`): its shape, its scans, their depths and the
session settings, as one immutable value.

The policies every search path applies are here too, once: the filter estimate's arithmetic
(:func:`sample_percent`, :func:`estimate_from_sample`) and the exact pass that follows index
scans which found fewer than k rows (:func:`needs_exact_pass`).

Example:
    >>> from pglogic.query import parse
    >>> [scan_plan(parse(q), SearchOptions()) for q in ('"a" AND "b"', '"a" OR "b"')]
    ['guide', 'union']
    >>> default_depth(10, 2), guide_only_depth(10)
    (142, 400)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from pglogic.engine import defaults
from pglogic.engine.compiled import GUIDE, GUIDE_DEPTH, RERANK_DEPTH
from pglogic.engine.normalise import PlanReady
from pglogic.engine.operators import OperatorFamily, resolve_family
from pglogic.engine.options import (
    DEFAULT_RERANK_DEPTH,
    MAX_DEPTH,
    MAX_EF_SEARCH,
    OPTIONS,
    SearchOptions,
)
from pglogic.errors import InvalidInput, QueryError
from pglogic.query import (
    Match,
    Node,
    Not,
    Or,
    Term,
    positive_matches,
    positive_terms,
    terms,
)


def default_depth(k: int, n_terms: int) -> int:
    """Per-term candidate depth: grows with k and with the number of candidate terms.

    Example:
        >>> default_depth(10, 1), default_depth(10, 3), default_depth(100, 2)
        (100, 174, 1000)
    """
    per_term = math.ceil(defaults.DEPTH_PER_K * k * math.sqrt(n_terms))
    return max(k, min(MAX_EF_SEARCH, max(defaults.DEPTH_FLOOR, per_term)))


def guide_depth(k: int, depth: int) -> int:
    """Default depth of the guide's scan: the terms' depth, and at least a 4-term query's.

    A query with one positive term gets depth 100 for k = 10; its guide needs about 200 to hold
    the formula's top 10 at 1M vectors (``bench/perf/results/guide.md``, NOT 2).

    Example:
        >>> guide_depth(10, 100), guide_depth(10, 283)
        (200, 283)
    """
    return max(depth, default_depth(k, defaults.GUIDE_TERMS))


def guide_only_depth(k: int, selectivity: float | None = None) -> int:
    """Depth of the guide's scan when it is the only scan (:func:`guide_only_plan`).

    Twice :func:`guide_depth` without a filter (400 rows for k = 10). Under a filter that keeps
    a fraction s of the rows, the filtered top k are about the unfiltered top k / s, thinned:
    the depth is s times the unfiltered depth for k / s, and at least a single-term query's
    (:func:`default_depth`). At 1M vectors with a 10% filter, k = 10, depth 100 found the same
    top 10 as depth 400 (within 0.01 recall@10, six shapes) in a third of the time; with 1%,
    the same recall as 400 for every shape (``bench/perf/results/filter_depth.md``).

    Example:
        >>> guide_only_depth(10), guide_only_depth(10, 0.5), guide_only_depth(10, 0.1)
        (400, 400, 100)
        >>> guide_only_depth(100), guide_only_depth(100, 0.1)
        (1000, 1000)
    """

    def unfiltered(n: int) -> int:
        return min(MAX_EF_SEARCH, defaults.GUIDE_ONLY_FACTOR * guide_depth(n, default_depth(n, 1)))

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
    term. Measured at 1M vectors in ``bench/perf/results/guide_only.md``.

    Example:
        >>> from pglogic.query import parse
        >>> [guide_suffices(parse(q)) for q in ('"a" AND "b"', '"a" AND NOT ("b" OR "c")',
        ...                                     '"a" OR "b"', 'NOT (NOT "a" AND NOT "b")')]
        [True, True, False, False]
    """

    def walk(node: Node, positive: bool) -> tuple[bool, bool]:
        """(holds a root-positive term, has a disjunction of two such operands)."""
        if isinstance(node, Term | Match):
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


#: Cost of one tuple of a filtered HNSW scan / one row of a sequential scan
#: (:data:`pglogic.engine.defaults.EXACT_SWITCH`). A filtered scan visits about depth /
#: selectivity tuples per term.
EXACT_SWITCH = defaults.EXACT_SWITCH


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
    Measured at 1M vectors by the first run of the union plan (``bench/results/
    scale_1m_union_first_run.md`` of commit 9a5d423, since superseded by ``scale_1m.md``): OR 8,
    k = 100 with a 1% filter, exact 412 ms vs 585 ms for the scans; with 10%, 534 ms vs 115 ms.

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


def lexical_candidates_only(tree: Node) -> bool:
    """Whether every candidate of ``tree``'s approximate statement comes from lexical scans.

    True when no semantic term can raise the score (:func:`~pglogic.query.positive_terms`)
    but a lexical one can (:func:`~pglogic.query.positive_matches`): its scans of the lexical
    index find every matching document, so the candidates are all there is.

    Example:
        >>> from pglogic.query import parse
        >>> [lexical_candidates_only(parse(q)) for q in ('match:wheat AND NOT "b"', '"a"',
        ...                                              '"a" OR match:wheat')]
        [True, False, False]
    """
    return not positive_terms(tree) and bool(positive_matches(tree))


def needs_exact_pass(rows_found: int, k: int, tree: Node, *, exact: bool = False) -> bool:
    """Whether a search whose approximate statement returned ``rows_found`` rows runs again,
    scoring every (matching) row: the exact pass.

    When the index scans found fewer than k rows: under a rare filter an iterative scan stops
    at ``hnsw.max_scan_tuples``, an over-fetch (pgvector < 0.8) at ``ef_search`` rows, k
    passages may belong to fewer than k documents, and a corpus may hold fewer than k
    documents. The exact pass returns k rows whenever k match, and it is cheap when so few do.
    Not for a statement that was exact already, nor when every candidate comes from lexical
    scans (:func:`lexical_candidates_only`): those found every match, and the answer is the
    matches only, never every document scored to fill k. Applied by
    :func:`pglogic.store.search.search` and :func:`pglogic.integrations.sqlalchemy.execute`;
    ``pglogic.search`` (``sql/search.sql``) applies the same rule to its filtered, lexical and
    passage plans (``tests/test_policies.py``).

    Example:
        >>> from pglogic.query import parse
        >>> tree = parse('"a" AND NOT "b"')
        >>> needs_exact_pass(3, 10, tree), needs_exact_pass(10, 10, tree)
        (True, False)
        >>> needs_exact_pass(3, 10, parse('"a"'), exact=True)
        False
        >>> needs_exact_pass(1, 10, parse('match:wheat AND NOT "b"'))  # every match found
        False
    """
    return not exact and rows_found < k and not lexical_candidates_only(tree)


def sample_percent(pages: int, pages_read: int = 1000) -> float:
    """The ``TABLESAMPLE SYSTEM`` percentage that reads about ``pages_read`` of a table's
    ``pages`` (all of a smaller table): the filter estimate's sample.

    About 1,000 pages cost a few milliseconds at any corpus size
    (:func:`pglogic.store.search.estimate_filter`; ``pglogic._plan`` in ``sql/search.sql``
    samples the same share).

    Example:
        >>> sample_percent(500), sample_percent(4000), sample_percent(0)
        (100.0, 25.0, 100.0)
    """
    return min(100.0, 100.0 * pages_read / max(1, pages))


def estimate_from_sample(
    sample_matches: int, sample_rows: int, table_rows: float
) -> tuple[float, float]:
    """(selectivity, estimated matching rows) of a filter from a sample of the table.

    ``sample_matches`` of the ``sample_rows`` sampled rows pass the filter; ``table_rows`` is
    the planner's count of the table's rows (``pg_class.reltuples``). The selectivity counts at
    least one match, so a rare filter never looks impossible; the matching rows scale it to the
    table (at least the sample's size: statistics may lag behind the rows). An empty sample
    says nothing: selectivity 1 and every row. :func:`prefer_exact` decides with them.

    Example:
        >>> estimate_from_sample(250, 1000, 40_000.0)
        (0.25, 10000.0)
        >>> estimate_from_sample(0, 1000, 40_000.0)  # at least one match
        (0.001, 40.0)
        >>> estimate_from_sample(30, 100, 0.0), estimate_from_sample(0, 0, 7.0)
        ((0.3, 30.0), (1.0, 7.0))
    """
    if sample_rows <= 0:
        return 1.0, table_rows
    selectivity = max(sample_matches, 1) / sample_rows
    return selectivity, selectivity * max(table_rows, float(sample_rows))


@dataclass(frozen=True, kw_only=True)
class Depths:
    """How deep the statement's scans go (:func:`plan_query`).

    Example:
        >>> Depths(depth=142, rdepth=1000, gdepth=200, scan=200, guided=True, guide_only=False,
        ...        union=False).scan
        200
    """

    depth: int  # each term's scan (and the question's, in nsfl mode)
    rdepth: int  # K of the reranking modes
    gdepth: int  # the guide's scan
    scan: int  # the deepest scan the statement makes
    guided: bool  # there is a guide scan
    guide_only: bool  # the guide's scan is the only one (guide_only_plan)
    union: bool  # each term's top k, no guide (union_plan)


class Scan(NamedTuple):
    """One candidate scan: its CTE's name, the placeholder it scans along (a vector ``v{i}``,
    the guide ``vg``, or a lexical term's text ``q{j}``) and the placeholder of its LIMIT."""

    name: str
    vector: str
    limit: str


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What a statement does, before it is written: ``shape`` (``exact``: score every row;
    ``knn``: one k-NN scan, of a single term or along the SQO vector; ``candidates``: the
    candidate scans' union), its ``scans``, the depths bound to their LIMITs (``params``, by
    unprefixed placeholder name), the session ``settings``, the ``candidate_terms`` (the terms
    whose own scans find candidates) and the ``vector_kind`` of ``vg`` (``guide``, ``sqo`` or
    None).

    Example:
        >>> from pglogic.engine.normalise import normalise
        >>> from pglogic.query import parse
        >>> opts = SearchOptions()
        >>> plan = plan_query(normalise(parse('"a" AND NOT "b"'), opts), opts)
        >>> plan.shape, [s.name for s in plan.scans], dict(plan.params), plan.vector_kind
        ('candidates', ['g'], {'gdepth': 400}, 'guide')
    """

    shape: str
    scans: tuple[Scan, ...] = ()
    params: Mapping[str, int]
    settings: Mapping[str, str]
    candidate_terms: tuple[str, ...] = ()
    vector_kind: str | None = None
    depths: Depths | None = None


def plan_query(
    ready: PlanReady,
    opts: SearchOptions,
    *,
    passages: bool = False,
    passage_factor: float = 1.0,
    filtered: bool = False,
    iterative: bool = True,
    filter_selectivity: float | None = None,
) -> Plan:
    """The :class:`Plan` of a normalised query over a source with (``passages``, each document
    ``passage_factor`` passages deep) or without passages; ``filtered``: a filter restricts the
    rows; ``iterative``: the server runs iterative index scans. Raises QueryError when no term
    can generate candidates outside exact mode, InvalidInput past pgvector's bounds.

    Example:
        >>> from pglogic.engine.normalise import normalise
        >>> from pglogic.query import parse
        >>> opts = SearchOptions(k=5)
        >>> plan = plan_query(normalise(parse('"a"'), opts), opts)
        >>> plan.shape, dict(plan.params), dict(plan.settings)["hnsw.ef_search"]
        ('knn', {}, '100')
    """
    strategy = ready.strategy
    if opts.exact:
        kind = "sqo" if strategy.vector_column else None
        return Plan(shape="exact", params={}, settings=_final_settings({}, opts), vector_kind=kind)
    if strategy.needs_positive and not ready.positive_terms and not ready.positive_matches:
        raise QueryError(
            "The query has no positive term to find candidates with (every term is negated); "
            "rerun with exact=True (--exact) to scan every document"
        )
    d = _depths(ready, opts, passages, passage_factor, filtered, iterative, filter_selectivity)
    settings = _session_settings(ready, opts, d, filtered, iterative, filter_selectivity)
    params: dict[str, int] = {}
    cands = () if strategy.along_vector else ready.positive_terms
    kind = strategy.vector_kind if strategy.along_vector else None
    if passages and (ready.single or strategy.along_vector):
        # one scan; its nearest passages hold the k best documents, some more than once
        limit = RERANK_DEPTH if strategy.rerank else "depth"
        params[limit] = d.rdepth if strategy.rerank else max(d.depth, d.scan)
        scan = Scan("c0" if ready.single else "g", GUIDE if strategy.along_vector else "v0", limit)
        if iterative and params[limit] > int(settings.get("hnsw.ef_search", "40")):
            settings["hnsw.iterative_scan"] = "relaxed_order"
        return Plan(
            shape="knn", scans=(scan,), params=params, settings=_final_settings(settings, opts),
            candidate_terms=cands, vector_kind=kind, depths=d,
        )  # fmt: skip
    if ready.single or strategy.along_vector:
        scans: tuple[Scan, ...] = ()
        if strategy.rerank:
            params[RERANK_DEPTH] = d.rdepth
        return Plan(
            shape="knn", scans=scans, params=params, settings=_final_settings(settings, opts),
            candidate_terms=cands, vector_kind=kind, depths=d,
        )  # fmt: skip
    scans = _scans(ready, d, params)
    if (strategy.question and strategy.rerank) or d.guide_only:
        cands = ()
    return Plan(
        shape="candidates", scans=scans, params=params, settings=_final_settings(settings, opts),
        candidate_terms=cands, vector_kind="guide" if d.guided else None, depths=d,
    )  # fmt: skip


def _scans(ready: PlanReady, d: Depths, params: dict[str, int]) -> tuple[Scan, ...]:
    """The candidate scans (and their LIMITs, into ``params``): the question's alone (a
    reranking strategy with a question), or each positive term's and lexical term's (unless the
    guide's scan alone finds the candidates) and the question's; then the guide's."""
    strategy, index = ready.strategy, ready.index
    scans: list[Scan] = []
    if strategy.question and strategy.rerank:
        params[RERANK_DEPTH] = d.rdepth
        scans.append(Scan("m", f"v{index[ready.question or '']}", RERANK_DEPTH))
    elif not d.guide_only:  # (else the guide's scan alone finds the candidates)
        params["depth"] = d.depth
        scans += [Scan(f"c{index[t]}", f"v{index[t]}", "depth") for t in ready.positive_terms]
        lex = ready.lexical_index
        scans += [Scan(f"x{lex[t]}", f"q{lex[t]}", "depth") for t in ready.positive_matches]
        if strategy.question:
            scans.append(Scan("m", f"v{index[ready.question or '']}", "depth"))
    if d.guided:
        params[GUIDE_DEPTH] = d.gdepth
        scans.append(Scan("g", GUIDE, GUIDE_DEPTH))
    return tuple(scans)


def _final_settings(settings: Mapping[str, str], opts: SearchOptions) -> Mapping[str, str]:
    """The plan's settings, then ``plan_cache_mode`` and the statement timeout.

    A statement run often is prepared (psycopg, after 5 runs), and after 5 executions of a
    prepared statement PostgreSQL may switch to a generic plan, which knows neither k, the
    depths nor the filter values: its plans sort whole tables instead of scanning the HNSW
    index (tests/test_pool.py shows it). Every run is planned for its own values instead.
    """
    out = {**settings, "plan_cache_mode": "force_custom_plan", **_timeout_setting(opts)}
    return MappingProxyType(out)


def _depths(
    ready: PlanReady,
    opts: SearchOptions,
    passages: bool,
    passage_factor: float,
    filtered: bool,
    iterative: bool,
    filter_selectivity: float | None,
) -> Depths:
    """The plan's scans and depths; InvalidInput past pgvector's bounds."""
    tree, strategy = ready.tree, ready.strategy
    for name in ("k", "depth"):  # (the bounds OPTIONS declares for index scans)
        if (message := OPTIONS[name].index_refusal(getattr(opts, name))) is not None:
            raise InvalidInput(message)
    question_scan = 1 if strategy.question and not strategy.rerank else 0
    n_scans = len(ready.positive_terms) + len(ready.positive_matches) + question_scan
    depth = opts.depth if opts.depth is not None else default_depth(opts.k, max(1, n_scans))
    depth = max(depth, opts.k)
    rdepth = opts.rerank_depth if opts.rerank_depth is not None else DEFAULT_RERANK_DEPTH
    if strategy.rerank and (
        message := OPTIONS["rerank_depth"].index_refusal(rdepth, minimum=opts.k, k=opts.k)
    ):
        raise InvalidInput(message)
    guided = opts.guide and strategy.guided and not strategy.rerank and ready.n_terms > 1
    # A lexical term's matches are found by its own scan of the lexical index, and the guide
    # knows nothing of words: no plan that leaves the term scans out.
    guide_only = guided and not ready.positive_matches and guide_only_plan(tree, opts)
    union = guided and not ready.positive_matches and union_plan(tree, opts)
    if union:  # each term's top k, at a single-term query's ef_search; no guide
        guided = False
        depth = opts.depth if opts.depth is not None else opts.k
        if passages and opts.depth is None:
            # k passages may belong to fewer than k documents: a single-term query's depth
            depth = default_depth(opts.k, 1)
    gdepth = guide_depth(opts.k, depth) if opts.depth is None else depth
    if guide_only and opts.depth is None:
        gdepth = guide_only_depth(opts.k, filter_selectivity if filtered else None)
    if strategy.rerank:
        scan = rdepth
    elif strategy.along_vector:
        scan = opts.k
    elif guide_only:
        scan = gdepth  # the only scan
    else:
        scan = max(depth, gdepth) if guided else depth
    factor = passage_factor if passages else 1.0
    if factor > 1 and opts.depth is None and not (union or ready.single or strategy.rerank):
        # A document holds several passages: its formula's best documents sit that many times
        # deeper in the passages' scans (bench/perf/results/passages_scale.md, 4 passages per
        # document at 1M: AND 3 recall@10 0.825 at the documents' depth, 1.0 at four times it).
        cap = MAX_DEPTH if iterative else MAX_EF_SEARCH
        depth, gdepth = (min(cap, max(x, math.ceil(x * factor))) for x in (depth, gdepth))
        scan = max(scan, min(cap, math.ceil(scan * factor)))
    if scan > MAX_EF_SEARCH and not iterative:
        raise InvalidInput(f"depth={depth} is above {MAX_EF_SEARCH} without iterative scans")
    return Depths(
        depth=depth, rdepth=rdepth, gdepth=gdepth, scan=scan, guided=guided,
        guide_only=guide_only, union=union,
    )  # fmt: skip


def _session_settings(
    ready: PlanReady,
    opts: SearchOptions,
    d: Depths,
    filtered: bool,
    iterative: bool,
    filter_selectivity: float | None,
) -> dict[str, str]:
    """``hnsw.ef_search`` (over-fetching under a filter without iterative scans) and
    ``hnsw.iterative_scan``."""
    strategy = ready.strategy
    default_ef = min(MAX_EF_SEARCH, max(40, d.scan))
    if d.union and opts.depth is None:
        default_ef = min(MAX_EF_SEARCH, max(40, default_depth(opts.k, 1)))
    ef = opts.ef_search if opts.ef_search is not None else default_ef
    if (message := OPTIONS["ef_search"].index_refusal(ef)) is not None:
        raise InvalidInput(message)
    if filtered and not iterative and opts.ef_search is None:
        # Over-fetch (pgvector < 0.8): the index scan stops after ef_search tuples and the filter
        # is applied to those, so ask for depth / selectivity of them (all 1000 when unknown).
        along = strategy.rerank or strategy.along_vector or d.guide_only
        rows = d.scan if along else d.depth
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
    if (message := OPTIONS["timeout"].refusal(opts.timeout)) is not None:  # (as check_options)
        raise InvalidInput(message)
    return {"statement_timeout": str(max(1, round(opts.timeout * 1000)))}
