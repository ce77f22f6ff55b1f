"""Planning heuristics: which index scans a query's statement makes, and how deep.

Pure functions of the query tree and :class:`~pglogic.engine.options.SearchOptions`, used by
the compiler (:func:`pglogic.engine.compile.compile_query`) and, before it, by
:func:`pglogic.store.search.search` to choose between filtered HNSW scans and the exact plan
(:func:`prefer_exact`). A query of two or more terms scans along its guide vector
(:mod:`pglogic.engine.guide`); where that scan alone suffices (:func:`guide_suffices`) it is the
only one (:func:`guide_only_plan`, at :func:`guide_only_depth`); where the terms' own top k
suffice (:func:`union_suffices`) there is no guide (:func:`union_plan`); otherwise each positive
term gets a scan at :func:`default_depth` and the guide one at :func:`guide_depth`.

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

from pglogic.engine import defaults
from pglogic.engine.operators import OperatorFamily, resolve_family
from pglogic.engine.options import MAX_EF_SEARCH, SearchOptions
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
