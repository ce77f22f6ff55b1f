"""Run logical (and plain) searches: parse, embed the terms in one batch, compile, execute.

A query text with no quote character is a plain semantic search for that text (one term);
anything else is parsed as a logical query. With ``use_term_cache`` the terms' vectors are
first looked up in ``pglogic.term_cache`` (one query; see :mod:`pglogic.store.term_cache`) and
the model is loaded only for the terms not found there; with ``remember_terms`` too, the terms
it embedded are stored there, so the next search of them loads no model.

Example:
    >>> res = search(conn, corpus, '"oil prices" AND NOT "natural gas"', embedder=emb)  # doctest: +SKIP
    >>> res.hits[0].title  # doctest: +SKIP
    'OPEC agrees on output ceiling'
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from pglogic.embed.base import Embedder
from pglogic.engine.compile import (
    CompiledQuery,
    SearchOptions,
    Source,
    check_options,
    compile_query,
    set_local,
)
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, scored_terms
from pglogic.engine.filters import Filter, filters_sql
from pglogic.engine.plans import (
    estimate_from_sample,
    needs_exact_pass,
    prefer_exact,
    sample_percent,
    scan_plan,
)
from pglogic.engine.source import SCHEMA, Corpus
from pglogic.errors import EmbeddingError, InvalidInput, SearchTimeout
from pglogic.query import (
    Match,
    Node,
    matches,
    positive_terms,
    quote_term,
    to_tree,
)
from pglogic.query.ast import leaves
from pglogic.store.calibration_store import resolve_stored_truth
from pglogic.store.citus import PROPAGATE, distribution, table_stats, with_propagation
from pglogic.store.db import Connection, vector_version, version_tuple
from pglogic.store.documents import snippet as make_snippet
from pglogic.store.documents import texts_of
from pglogic.store.ingest import vector_problem
from pglogic.store.lexical import lexical_problems
from pglogic.store.passages import Deciding, deciding_passages
from pglogic.store.term_cache import cached_term_vectors, remember_term_vectors


@dataclass(frozen=True)
class Hit:
    """One ranked document with its fuzzy score and each term's cosine similarity.

    ``id`` is the document's external id (the one it was ingested with); ``row_id`` its row's
    internal id. ``text`` and ``snippet`` are filled when the search was asked for them.

    Example:
        >>> hit = Hit(7, "d1", None, 0.5, {"a": 0.5})
        >>> hit.id, hit.row_id, hit.similarities["a"]
        ('d1', 7, 0.5)
    """

    row_id: int
    id: str
    title: str | None
    score: float
    similarities: dict[str, float]
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Each lexical term's (``match:"..."``) truth value for the document.
    lexical: dict[str, float] = field(default_factory=dict)
    #: The document's text (``search(..., text=True)``).
    text: str | None = None
    #: The deciding passage's text, or the text's start (``search(..., snippet=True)``).
    snippet: str | None = None

    @property
    def external_id(self) -> str:
        """The document's external id: :attr:`id`, by its older name."""
        return self.id


@dataclass
class SearchResult:
    """Hits plus what produced them: the tree, the compiled statement and timings (seconds)."""

    tree: Node
    compiled: CompiledQuery
    hits: list[Hit]
    timings: dict[str, float] = field(default_factory=dict)
    #: The terms whose vectors came from ``pglogic.term_cache`` (the others were embedded).
    cached_terms: tuple[str, ...] = ()
    #: Per hit (its external id, :attr:`Hit.id`), the passage that decided each scored text's
    #: similarity (searches over passages with ``explain_passages``;
    #: :func:`pglogic.store.passages.deciding_passages`).
    passages: dict[str, list[Deciding]] = field(default_factory=dict)


_ITERATIVE: dict[str, bool] = {}


def server_has_iterative_scan(conn: Connection) -> bool:
    """True when the server's pgvector (>= 0.8) supports iterative index scans (cached per server).

    Example:
        >>> server_has_iterative_scan(conn)  # doctest: +SKIP
        True
    """
    key = f"{conn.info.host}:{conn.info.port}:{conn.info.dbname}"
    if key not in _ITERATIVE:
        version = vector_version(conn)
        _ITERATIVE[key] = version is not None and version_tuple(version) >= (0, 8)
    return _ITERATIVE[key]


def execute(conn: Connection, compiled: CompiledQuery, vectors: dict[str, object]) -> list[Hit]:
    """Run a compiled query with its ``SET LOCAL`` settings.

    Outside a transaction the query gets its own; inside the caller's transaction the previous
    values of the settings are restored afterwards, so they never outlive the query.

    Example:
        >>> execute(conn, compiled, {"a": vec})  # doctest: +SKIP
        [Hit(...), ...]
    """
    params = compiled.with_vectors(vectors)  # type: ignore[arg-type]
    # on a Citus coordinator the settings reach the workers (citus.propagate_set_commands)
    settings = with_propagation(conn, compiled.settings)
    names = list(settings)
    # Inside the caller's transaction SET LOCAL would outlive the query: save and restore.
    restore = conn.info.transaction_status != TransactionStatus.IDLE
    old = None
    if names and restore:
        calls = ", ".join(["current_setting(%s, true)"] * len(names))
        old = conn.execute("SELECT " + calls, names).fetchone()
    # One round trip for BEGIN, the SET LOCALs and the statement (pipeline mode).
    try:
        with conn.pipeline(), conn.transaction():
            for stmt in set_local(settings):
                conn.execute(stmt)
            rows = conn.execute(compiled.text, params).fetchall()  # rendered once per shape
            if old is not None:
                pairs = sorted(zip(names, old, strict=True), key=lambda p: p[0] in PROPAGATE)
                back = {n: v for n, v in pairs if v not in (None, "")}  # Citus's own last
                for stmt in set_local(back):
                    conn.execute(stmt)
                for name in names:
                    if name not in back:  # not set before (pgvector not loaded yet): the default
                        conn.execute(sql.SQL("RESET {}").format(sql.Identifier(*name.split("."))))
    except psycopg.errors.QueryCanceled as exc:
        limit = compiled.settings.get("statement_timeout")
        if limit is not None and "statement timeout" in str(exc):
            raise SearchTimeout(
                f"The search was cancelled after its timeout of {int(limit) / 1000:g} s "
                "(statement_timeout); raise --timeout, add a filter or lower k or depth"
            ) from None
        raise
    n, m = len(compiled.terms), len(compiled.lexical)
    return [
        Hit(
            int(r[0]),
            str(r[1]),
            r[2],
            float(r[4]),
            {t: float(v) for t, v in zip(compiled.terms, r[5 : 5 + n], strict=True)},
            r[3],
            {t: float(v) for t, v in zip(compiled.lexical, r[5 + n : 5 + n + m], strict=True)},
        )
        for r in rows
    ]


def search(
    conn: Connection,
    corpus: Corpus,
    query: str | Node,
    *,
    embedder: Embedder | Callable[[], Embedder],
    options: SearchOptions | None = None,
    use_term_cache: bool = False,
    remember_terms: bool | Callable[[Corpus, dict[str, Any]], object] = False,
    explain_passages: bool = False,
    text: bool = False,
    snippet: bool = False,
) -> SearchResult:
    """Search ``corpus`` with a logical query (or plain text) and return the ranked hits.

    ``embedder`` embeds the terms: an embedder of the corpus's model (query side), or a
    function returning one, called only when a term needs embedding. ``use_term_cache`` takes
    the vectors of the terms cached in ``pglogic.term_cache`` for the corpus's model
    (:func:`cached_term_vectors`) and embeds only the others: a search whose terms are all
    cached loads no model. Give it only with an embedder of the corpus's own model, whose
    vectors the cache holds (:meth:`pglogic.PgLogic.search` does). ``remember_terms`` then
    stores the query's terms it embedded there (:func:`remember_term_vectors`), once the
    statement has run; a function instead of True is given them (corpus, {term: vector}) to
    store elsewhere: :class:`pglogic.PgLogic` searching a read replica writes them on the
    primary. ``explain_passages`` (a corpus with passages) also finds, per hit and scored
    text, the passage that decided its similarity (``SearchResult.passages``): one more query.
    ``text`` fills each hit's :attr:`Hit.text` with the document's text, ``snippet`` its
    :attr:`Hit.snippet` with the deciding passage's text (the passage most similar to a
    positive term of the query; without passages, or a query without one, the text's start),
    at most :data:`pglogic.store.documents.SNIPPET_CHARS` characters: one or two more queries.

    Example:
        >>> search(conn, corpus, "vitamin D", embedder=emb).hits[:1]  # doctest: +SKIP
        [Hit(row_id=7, id='d7', title='...', score=0.61, similarities={'vitamin D': 0.61})]
        >>> res = search(conn, corpus, '"a" AND "b"', embedder=load, use_term_cache=True)  # doctest: +SKIP
        >>> res.cached_terms  # doctest: +SKIP
        ('a', 'b')
    """
    opts = options or SearchOptions()
    check_options(opts)  # before the filter estimate reads k
    opts = replace(opts, truth=resolve_stored_truth(conn, corpus, opts.truth))  # "calibrated"
    t0 = time.perf_counter()
    tree = to_tree(query)
    iterative = server_has_iterative_scan(conn) and opts.iterative_scan
    selectivity = None
    if opts.filters and not opts.exact:
        selectivity, matches = cached_filter_estimate(conn, corpus, opts.filters)
        n_cand = len(positive_terms(tree))
        plan = scan_plan(tree, opts)
        if (
            n_cand
            and opts.depth is None
            and prefer_exact(matches, opts.k, n_cand, plan=plan, selectivity=selectivity)
        ):
            opts = replace(opts, exact=True)  # so few rows pass: scoring them all is cheaper
    compiled = compile_query(
        tree, corpus, opts, server_has_iterative_scan=iterative, filter_selectivity=selectivity
    )
    if compiled.lexical:
        check_lexical_terms(conn, corpus, tree)
    t1 = time.perf_counter()
    found: dict[str, object] = {}
    if use_term_cache and compiled.terms:
        found.update(cached_term_vectors(conn, corpus, compiled.terms))
    missing = [t for t in compiled.terms if t not in found]
    if missing:
        if not hasattr(embedder, "embed"):  # a factory: load the model only for a valid query
            embedder = embedder()
        emb = cast(Embedder, embedder)
        if emb.dim != corpus.dim:
            raise EmbeddingError(
                f"Model {emb.name!r} makes {emb.dim}-d vectors but corpus "
                f"{corpus.name!r} stores {corpus.dim}-d vectors of {corpus.model!r}"
            )
        found.update(zip(missing, emb.embed(missing), strict=True))
    vectors: dict[str, object] = {t: found[t] for t in compiled.terms}
    for t, v in vectors.items():  # a model (or a cache row) that gave NaN or a zero vector
        problem = vector_problem(cast(Any, v), corpus.dim)
        if problem is not None:
            raise EmbeddingError(f"The vector of term {t!r} {problem}")
    cached = tuple(t for t in compiled.terms if t not in missing)
    t2 = time.perf_counter()
    hits = execute(conn, compiled, vectors)
    if remember_terms and missing:  # the query's terms and AND phrases, not NSFL's fused texts
        query_terms = set(scored_terms(tree, DEFAULT_AND_TEXT))  # (as cache_terms caches them)
        new = {t: found[t] for t in missing if t in query_terms}
        if callable(remember_terms):
            remember_terms(corpus, new)
        else:
            remember_term_vectors(conn, corpus, new)
    timings = {"compile": t1 - t0, "embed": t2 - t1}
    if needs_exact_pass(len(hits), opts.k, tree, exact=opts.exact):
        # the index scans found fewer than k rows: score every (matching) row instead
        timings["database_approximate"] = time.perf_counter() - t2
        compiled = compile_query(tree, corpus, replace(opts, exact=True))
        hits = execute(conn, compiled, vectors)
    timings["database"] = time.perf_counter() - t2
    deciding: dict[int, list[Deciding]] = {}
    over_passages = opts.passages and corpus.passage_table is not None and bool(hits)
    if over_passages and (explain_passages or snippet):
        scored = compiled.scored_vectors(vectors)  # type: ignore[arg-type]
        # the snippet's passage: the one most similar to a positive term of the query
        texts = compiled.terms if explain_passages else [
            t for t in positive_terms(tree) if t in scored
        ]  # fmt: skip
        with conn.transaction():
            deciding = deciding_passages(
                conn, corpus, [h.row_id for h in hits], texts,
                [cast(Any, scored[t]) for t in texts], snippet=160 if explain_passages else 0,
            )  # fmt: skip
    if text or snippet:
        hits = _with_texts(conn, corpus, hits, set(positive_terms(tree)), deciding, text, snippet)
    by_id = {h.row_id: h.id for h in hits}
    passages = {by_id[doc]: d for doc, d in deciding.items() if doc in by_id}
    if not explain_passages:
        passages = {}
    return SearchResult(tree, compiled, hits, timings, cached, passages)


def _with_texts(
    conn: Connection,
    corpus: Corpus,
    hits: list[Hit],
    positive: set[str],
    deciding: dict[int, list[Deciding]],
    text: bool,
    snippet: bool,
) -> list[Hit]:
    """The hits with their text and/or snippet: the deciding passage (the one most similar to
    a positive term: ``deciding``), else the text's start (:func:`pglogic.store.documents.snippet`)."""
    with conn.transaction():
        found = texts_of(conn, corpus, [h.row_id for h in hits])
    out = []
    for h in hits:
        title, body = found.get(h.row_id, (h.title, ""))
        cut = None
        if snippet:
            best = max((d for d in deciding.get(h.row_id, []) if d.term in positive),
                       key=lambda d: d.similarity, default=None)  # fmt: skip
            cut = (
                make_snippet(title, body, best.start, best.end)
                if best
                else make_snippet(title, body)
            )
        out.append(replace(h, text=body if text else None, snippet=cut))
    return out


def check_lexical_terms(conn: Connection, corpus: Corpus, tree: Node) -> None:
    """Refuse a lexical term that holds no searchable word in the corpus's configuration
    (only stop words or punctuation: it would match nothing), with its position.

    Example:
        >>> check_lexical_terms(conn, corpus, parse('"grain" AND NOT match:the'))  # doctest: +SKIP
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: match:"the" at col 19 has no word that the corpus's lexical index holds (english drops stop words and punctuation); use another word or a semantic term "the"
    """
    config = corpus.lexical_config
    if config is None:
        return
    bad = lexical_problems(conn, config, matches(tree))
    if not bad:
        return
    spans = {n.text: n.span for n in leaves(tree) if isinstance(n, Match)}
    text = bad[0]
    col = spans.get(text, (0, 0))[0] + 1
    where = f" at col {col}" if spans.get(text, (0, 0)) != (0, 0) else ""
    raise InvalidInput(
        f"{Match(text)}{where} has no word that the corpus's lexical index holds ({config} "
        f"drops stop words and punctuation); use another word or a semantic term "
        f"{quote_term(text)}"
    )


def estimate_selectivity(conn: Connection, corpus: Corpus, filters: Sequence[Filter]) -> float:
    """Estimate the fraction of the corpus's rows that pass ``filters`` from a block sample.

    Reads about 1,000 pages (``TABLESAMPLE SYSTEM``, fixed seed: :func:`sample_percent`), so it
    costs a few milliseconds at any corpus size; used to size the over-fetch on servers without
    iterative index scans. Returns 1.0 for an empty table or no filters.

    Example:
        >>> estimate_selectivity(conn, corpus, [Contains({"site": "cooking"})])  # doctest: +SKIP
        0.498
    """
    return estimate_filter(conn, corpus, filters)[0]


#: How long (seconds) :func:`search` reuses a filter's estimate, and how many it keeps.
FILTER_ESTIMATE_TTL = 60.0
FILTER_ESTIMATE_CACHE_SIZE = 1024
_ESTIMATES: OrderedDict[tuple[Any, ...], tuple[float, tuple[float, float]]] = OrderedDict()
_ESTIMATES_LOCK = threading.Lock()  # searches run in threads (PgLogic's pool)


def cached_filter_estimate(
    conn: Connection,
    corpus: Corpus,
    filters: Sequence[Filter],
    max_age: float = FILTER_ESTIMATE_TTL,
) -> tuple[float, float]:
    """:func:`estimate_filter`, reused for ``max_age`` seconds per database, corpus and filter.

    The estimate only chooses a plan (filtered index scans or scoring every matching row, and
    the over-fetch on old pgvector); results are correct either way. Reusing it saves two
    queries (the table's size and a 1,000-page sample: 3-4 ms at 1M rows) per filtered search.

    Example:
        >>> cached_filter_estimate(conn, corpus, [parse_filter("site=cooking")])  # doctest: +SKIP
        (0.498, 4980.0)
    """
    where, params = filters_sql(filters, sql.SQL("m"), prefix="f")
    key = (conn.info.host, conn.info.port, conn.info.dbname, corpus.table_name,
           where.as_string(None), json.dumps(params, sort_keys=True, default=str))  # fmt: skip
    now = time.monotonic()
    with _ESTIMATES_LOCK:
        hit = _ESTIMATES.get(key)
        if hit is not None and now - hit[0] <= max_age:
            _ESTIMATES.move_to_end(key)
            return hit[1]
    estimate = estimate_filter(conn, corpus, filters)  # (two threads may both estimate: fine)
    with _ESTIMATES_LOCK:
        _ESTIMATES[key] = (now, estimate)
        _ESTIMATES.move_to_end(key)
        if len(_ESTIMATES) > FILTER_ESTIMATE_CACHE_SIZE:
            _ESTIMATES.popitem(last=False)
    return estimate


def estimate_filter(
    conn: Connection, corpus: Corpus, filters: Sequence[Filter]
) -> tuple[float, float]:
    """Return (selectivity, estimated matching rows) of ``filters``; see estimate_selectivity.

    The table's size from ``pg_class`` (its shards' on a Citus coordinator), a sample of
    :func:`sample_percent` of it, and the arithmetic of :func:`estimate_from_sample`.

    Example:
        >>> estimate_filter(conn, corpus, [Contains({"site": "cooking"})])  # doctest: +SKIP
        (0.498, 4980.0)
    """
    row = conn.execute(
        "SELECT relpages, reltuples FROM pg_class WHERE oid = %s::regclass",
        (f"{SCHEMA}.{corpus.table_name}",),
    ).fetchone()
    pages = max(1, int(row[0])) if row else 1
    rows = max(0.0, float(row[1])) if row else 0.0
    if row and not row[0] and distribution(conn, corpus) is not None:
        pages, rows = table_stats(conn, corpus)  # Citus: the coordinator's own table is empty
        pages = max(1, pages)
    if not filters:
        return 1.0, rows
    percent = sample_percent(pages)
    src = Source.for_corpus(corpus)
    where, params = filters_sql(filters, src.col("metadata"), prefix="f")
    stmt = sql.SQL(
        "SELECT count(*) FILTER (WHERE {where}), count(*) FROM {from_}"
        " TABLESAMPLE SYSTEM ({percent}) REPEATABLE (0)"
    ).format(where=where, from_=src.from_, percent=sql.Placeholder("percent"))
    res = conn.execute(stmt, {**params, "percent": percent}).fetchone()
    return estimate_from_sample(int(res[0]), int(res[1]), rows) if res else (1.0, rows)
