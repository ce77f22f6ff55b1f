"""Render a plan into one parameterised statement (no I/O): one function per statement shape.

:func:`render_statement` writes the statement of a :class:`~pglogic.engine.plans.Plan` for a
normalised query (:class:`~pglogic.engine.normalise.PlanReady`) over a
:class:`~pglogic.engine.source.Source`, built only with :mod:`psycopg.sql`, and returns the
immutable :class:`~pglogic.engine.compiled.CompiledQuery`. What every shape shares (the select
list of every similarity, the filter, the ranking step) is made once, by :func:`statement_parts`.
The shapes: :func:`exact_statement` (every row scored), :func:`knn_statement` (one k-NN scan),
:func:`candidates_statement` (the candidate scans' union), and over passages
:func:`passage_exact_statement` and :func:`passage_statement`.

Example:
    >>> from pglogic.engine.normalise import normalise
    >>> from pglogic.engine.options import SearchOptions
    >>> from pglogic.engine.plans import plan_query
    >>> from pglogic.query import parse
    >>> src = Source(sql.Identifier("docs"), "d", "id", "embedding", 3, ())
    >>> opts = SearchOptions(k=5)
    >>> ready = normalise(parse('"a"'), opts)
    >>> q = render_statement(statement_parts(ready, opts, src), plan_query(ready, opts))
    >>> q.text.startswith("WITH sims AS MATERIALIZED"), q.text.endswith("LIMIT %(k)s")
    (True, True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from pglogic.engine.compiled import GUIDE, RERANK_DEPTH, TEXT_CONFIG, CompiledQuery
from pglogic.engine.conjunction import OWN_IN_DISJUNCTION
from pglogic.engine.filters import filters_sql
from pglogic.engine.normalise import PlanReady
from pglogic.engine.options import SearchOptions
from pglogic.engine.plans import Plan, Scan
from pglogic.engine.source import Source

__all__ = [
    "StatementParts",
    "candidates_statement",
    "exact_statement",
    "knn_statement",
    "passage_exact_statement",
    "passage_statement",
    "render_statement",
    "statement_parts",
]


@dataclass(frozen=True, kw_only=True)
class StatementParts:
    """What every statement of one query shares (:func:`statement_parts`).

    ``sims`` is the select list of every similarity, ``where`` the filter, ``final`` the
    ranking step (after the strategy's layers, if any; ``layered``), ``params`` the parameters
    every shape binds (the filter's values, ``k``, the text search configuration).

    Example:
        >>> from pglogic.engine.normalise import normalise
        >>> from pglogic.query import parse
        >>> src = Source(sql.Identifier("docs"), "d", "id", "embedding", 3, ())
        >>> opts = SearchOptions(k=5)
        >>> dict(statement_parts(normalise(parse('"a"'), opts), opts, src).params)
        {'k': 5}
    """

    ready: PlanReady
    opts: SearchOptions
    src: Source
    pre: str
    sims: sql.Composable
    where: sql.Composable
    final: sql.Composable
    layered: bool
    params: Mapping[str, Any]

    @property
    def sep(self) -> sql.SQL:
        """What joins the statement's CTEs to the ranking step (a comma before layers)."""
        return sql.SQL(",\n" if self.layered else "\n")

    def ph(self, name: str) -> sql.Placeholder:
        """The placeholder ``name``, prefixed."""
        return sql.Placeholder(self.pre + name)

    def distance(self, vector: str) -> sql.Composable:
        """Cosine distance of the embedding to the vector bound to placeholder ``vector``."""
        return _distance(self.src, self.pre, vector)

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


def statement_parts(
    ready: PlanReady,
    opts: SearchOptions,
    src: Source,
    extra_where: sql.Composable | None = None,
    pre: str = "",
) -> StatementParts:
    """The shared parts of ``ready``'s statements over ``src``: the scored texts'
    similarities, the score (the strategy's), the filter (``opts.filters`` and
    ``extra_where``) and the ranking step; ``pre`` prefixes every placeholder.

    Example:
        >>> from pglogic.engine.normalise import normalise
        >>> from pglogic.query import parse
        >>> src = Source(sql.Identifier("docs"), "d", "id", "embedding", 3, ())
        >>> opts = SearchOptions()
        >>> parts = statement_parts(normalise(parse('"a" AND "b"'), opts), opts, src, pre="p_")
        >>> parts.sims.as_string(None).count("AS"), list(parts.params)
        (3, ['p_k'])
    """
    strategy, index, mentions = ready.strategy, ready.index, ready.mentions
    score, layers, rel = strategy.score(
        ready.score_tree, index, ready.lexical_index, ready.family, opts.truth, ready.asked
    )
    where, fparams = filters_sql(opts.filters, src.col(src.metadata_column), prefix=pre + "f")
    if extra_where is not None:
        where = sql.SQL("{} AND ({})").format(where, extra_where)
    params: dict[str, Any] = dict(fparams)
    params[pre + "k"] = opts.k
    if ready.lexical or mentions:
        params[pre + TEXT_CONFIG] = src.text_config
    sim_items = [
        _similarity(src, pre, f"v{i}", f"s{i}", (i, opts.not_mention) if i in mentions else None)
        for i in index.values()
    ]
    if strategy.vector_column:  # a score: the similarity to the strategy's vector
        sim_items.append(_similarity(src, pre, GUIDE, strategy.vector_column))
    n_lex = len(ready.lexical)
    sim_items += [_lexical_truth(src, pre, j, opts.lexical) for j in range(n_lex)]
    sim_cols = [sql.Identifier(f"s{index[t]}") for t in ready.texts]
    sim_cols += [sql.Identifier(f"l{j}") for j in range(n_lex)]
    final = _final(src, score, sim_cols, sql.Placeholder(pre + "k"), rel)
    if layers:
        final = sql.SQL("{}\n{}").format(sql.SQL(",\n").join(layers), final)
    return StatementParts(
        ready=ready, opts=opts, src=src, pre=pre, sims=sql.SQL(", ").join(sim_items),
        where=where, final=final, layered=bool(layers), params=params,
    )  # fmt: skip


def render_statement(parts: StatementParts, plan: Plan) -> CompiledQuery:
    """The compiled query of ``plan``: its shape's statement (over passages when the source
    has them), with the shared parameters and the plan's.

    Example:
        >>> from pglogic.engine.normalise import normalise
        >>> from pglogic.engine.plans import plan_query
        >>> from pglogic.query import parse
        >>> src = Source(sql.Identifier("docs"), "d", "id", "embedding", 3, ())
        >>> opts = SearchOptions()
        >>> ready = normalise(parse('"a" OR "b"'), opts)
        >>> q = render_statement(statement_parts(ready, opts, src), plan_query(ready, opts))
        >>> q.candidate_terms, dict(q.params)
        (['a', 'b'], {'k': 10, 'depth': 10})
    """
    passages = parts.src.passages is not None
    if plan.shape == "exact":
        statement = passage_exact_statement(parts) if passages else exact_statement(parts)
    elif passages:
        statement = passage_statement(parts, plan.scans)
    elif plan.shape == "knn":
        statement = knn_statement(parts)
    else:
        statement = candidates_statement(parts, plan.scans)
    ready, opts, pre = parts.ready, parts.opts, parts.pre
    return CompiledQuery(
        statement=statement,
        params={**parts.params, **{pre + name: v for name, v in plan.params.items()}},
        terms=list(ready.texts),
        candidate_terms=list(plan.candidate_terms),
        settings=plan.settings,
        family=ready.family,
        param_prefix=pre,
        tree=ready.tree,
        truth=opts.truth,
        mode=ready.mode,
        vector_kind=plan.vector_kind,
        seed=opts.seed,
        lexical=ready.lexical,
        not_context=opts.not_context if ready.strategy.projects_negations else 0.0,
        mentions=ready.mentions,
    )


def exact_statement(parts: StatementParts) -> sql.Composed:
    """Exact mode: every (filtered) document is scored, no index scan.

    Example:
        >>> exact_statement(parts).as_string(None).startswith("WITH sims AS (SELECT")  # doctest: +SKIP
        True
    """
    src = parts.src
    return sql.SQL(
        "WITH sims AS (SELECT {id}, {sims} FROM {from_} WHERE {emb} IS NOT NULL AND {where})"
        "{sep}{final}"
    ).format(
        id=src.col(src.id), sims=parts.sims, from_=src.from_, emb=src.col(src.embedding),
        where=parts.where, sep=parts.sep, final=parts.final,
    )  # fmt: skip


def knn_statement(parts: StatementParts) -> sql.Composed:
    """One k-NN scan: a single term, or along the strategy's vector (its top k, or top K
    reranked).

    One term: the score is a monotone map (a TruthMap) of its similarity, so the k nearest
    documents are the answer: a plain k-NN scan, no candidate union. SQO: the same along the SQO
    vector (``sqo``), or its top K reranked by the formula (``sqo-rerank``).

    Example:
        >>> "ORDER BY" in knn_statement(parts).as_string(None)  # doctest: +SKIP
        True
    """
    src, strategy = parts.src, parts.ready.strategy
    limit = RERANK_DEPTH if strategy.rerank else "k"
    return sql.SQL(
        "WITH sims AS MATERIALIZED (SELECT {id}, {sims} FROM {from_}"
        " WHERE {emb} IS NOT NULL AND {where} ORDER BY {dist} LIMIT {limit})\n{final}"
    ).format(
        id=src.col(src.id), sims=parts.sims, from_=src.from_, emb=src.col(src.embedding),
        where=parts.where, dist=parts.distance(GUIDE if strategy.along_vector else "v0"),
        limit=parts.ph(limit), final=parts.final,
    )  # fmt: skip


def _scan_cte(parts: StatementParts, scan: Scan) -> sql.Composable:
    """A candidate CTE: the HNSW scan along ``scan.vector`` with every text's similarity.

    Every candidate CTE computes all the similarities on the rows its index scan fetched anyway:
    no second lookup of each candidate (by primary key) in a table that may not fit in memory.
    A document found by two scans gets the same values twice; UNION keeps one.
    """
    src, (name, vector, limit) = parts.src, scan
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


def candidates_statement(parts: StatementParts, scans: Sequence[Scan]) -> sql.Composed:
    """Candidate CTEs (per term, the question's, the guide's), their UNION, then the ranking.

    Example:
        >>> "UNION" in candidates_statement(parts, plan.scans).as_string(None)  # doctest: +SKIP
        True
    """
    ready = parts.ready
    ctes = [_scan_cte(parts, s) for s in scans]
    cols = sql.SQL(", ").join(
        [
            sql.Identifier(parts.src.id),
            *(sql.Identifier(f"s{ready.index[t]}") for t in ready.texts),
            *(sql.Identifier(f"l{j}") for j in range(len(ready.lexical))),
        ]
    )
    union = sql.SQL(" UNION ").join(
        sql.SQL("SELECT {} FROM {}").format(cols, sql.Identifier(s.name)) for s in scans
    )
    return sql.SQL("WITH {ctes},\nsims AS ({union}){sep}{final}").format(
        ctes=sql.SQL(",\n").join(ctes), union=union, sep=parts.sep, final=parts.final
    )


# -- passages -------------------------------------------------------------------------------------


#: The blend of a text's best passage's similarity and the document's own vector's, by the own
#: vector's weight (:func:`pglogic.engine.conjunction.own_weights`; the SQL function writes
#: the same text).
_BLEND = {0.5: "({} + {}) / 2", OWN_IN_DISJUNCTION: "({} * 9 + {}) / 10"}
assert OWN_IN_DISJUNCTION == 0.1, "_BLEND and sql/search.sql write a tenth: change all three"


def _passage_sims(
    parts: StatementParts, source: sql.Composable, where: sql.Composable
) -> sql.Composable:
    """The ``sims`` query over passages: every similarity the best over the document's passages
    of the documents of ``source`` (``GROUP BY`` the document), and the lexical truths (of the
    document's own words). A text with an own-vector weight (``PlanReady.own``,
    :func:`pglogic.engine.conjunction.own_weights`: with ``blend``, and ``blend-not`` /
    ``blend-not-or`` in a formula with a negated term, a positive text's similarity is the mean
    of that and the document's own vector's; with ``blend-not-or`` in a disjunction, a tenth of
    the own vector's) blends them. Whatever reads the document's own row (its vector for a
    blend; its words for a lexical truth or a mention's floor, :func:`_floored`) is added after
    the grouping, the documents joined again, so the grouping reads only the documents' ids (and
    what a filter tests) and never carries their vectors or words
    (``bench/perf/results/not_mention_latency.md``). With ``Source.own_nullable``, a row whose
    own vector is NULL takes its best passage alone."""
    src, pre, ready, opts = parts.src, parts.pre, parts.ready, parts.opts
    texts: list[tuple[str | None, str, str]] = [
        (t, f"v{i}", f"s{i}") for t, i in ready.index.items()
    ]
    if ready.strategy.vector_column:
        texts.append((None, GUIDE, ready.strategy.vector_column))
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
    weights = ready.own
    if not (any(weights) or ready.mentions or ready.lexical):
        return grouped
    outer: list[sql.Composable] = []
    for (t, v, n), w in zip(texts, weights, strict=True):
        col = sql.Identifier("b", n)
        if t is not None and ready.index[t] in ready.mentions:  # (never blended: negated-only)
            floored = _floored(col, src, pre, ready.index[t], opts.not_mention)
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
    outer += [_lexical_truth(src, pre, j, opts.lexical) for j in range(len(ready.lexical))]
    joined = 'SELECT {b_id}, {outer} FROM ({grouped}) "b" JOIN {from_} ON {id} = {b_id}'
    return sql.SQL(joined).format(
        b_id=sql.Identifier("b", src.id), outer=sql.SQL(", ").join(outer), grouped=grouped,
        from_=src.from_, id=src.col(src.id),
    )  # fmt: skip


def _passage_scan(parts: StatementParts, scan: Scan) -> sql.Composable:
    """A candidate CTE over the passages: the documents of the HNSW scan's nearest passages
    (a document may come more than once; the union keeps one). The documents' filter joins
    them in only when there is one."""
    src, (name, vector, limit) = parts.src, scan
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


def passage_exact_statement(parts: StatementParts) -> sql.Composed:
    """Exact mode over passages: every (filtered) document scored, each text's truth the best
    over its passages.

    Example:
        >>> "GROUP BY" in passage_exact_statement(parts).as_string(None)  # doctest: +SKIP
        True
    """
    sims = _passage_sims(parts, parts.src.from_, parts.where)
    return sql.SQL("WITH sims AS ({}){}{}").format(sims, parts.sep, parts.final)


def passage_statement(parts: StatementParts, scans: Sequence[Scan]) -> sql.Composed:
    """A search over passages: the candidate documents from ``scans`` of the passages (and
    the lexical scans of the documents), each term's truth the best over every passage of each
    candidate, then the formula and the top k.

    Example:
        >>> "cand AS" in passage_statement(parts, plan.scans).as_string(None)  # doctest: +SKIP
        True
    """
    src = parts.src
    ctes = [_passage_scan(parts, s) for s in scans]
    union = sql.SQL(" UNION ").join(
        sql.SQL("SELECT id FROM {}").format(sql.Identifier(s.name)) for s in scans
    )
    sims = _passage_sims(
        parts, sql.SQL("cand JOIN {} ON {} = cand.id").format(src.from_, src.col(src.id)),
        sql.SQL("TRUE"),
    )  # fmt: skip
    return sql.SQL("WITH {ctes},\ncand AS ({union}),\nsims AS ({sims}){sep}{final}").format(
        ctes=sql.SQL(",\n").join(ctes), union=union, sims=sims, sep=parts.sep, final=parts.final
    )


# -- the pieces of every shape --------------------------------------------------------------------


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


def _best_passage(src: Source, pre: str, vector: str) -> sql.Composable:
    """A document's best passage's similarity to ``vector`` (an aggregate over its passages)."""
    dist = sql.SQL("{}.{} <=> {}::vector({})").format(
        sql.Identifier("p"), sql.Identifier(src.passage_vector), sql.Placeholder(pre + vector),
        sql.Literal(src.dim),
    )  # fmt: skip
    return sql.SQL("max({})").format(_cosine(dist))
