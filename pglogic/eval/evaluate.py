"""``pglogic eval``: run every method on a dataset's derived logical queries and score them.

Stages: :func:`pglogic.eval.data.load_dataset` reads a directory in the shared layout,
:func:`pglogic.eval.derive.derive_queries` derives logical queries with exact ground truth from its
labels, :func:`prepare_corpus` loads the documents into a corpus (embedding only what changed;
building the HNSW index when missing), :func:`run_methods` runs every method in Postgres and
:func:`pglogic.eval.metrics.evaluate_run` scores the rankings. :mod:`pglogic.eval.report` writes the
Markdown table, the JSON and the plots.

Methods (all return the top ``k`` = 100 documents, all through the corpus's HNSW index unless
the formula has no positive term, which the engine must score exactly):

* ``dense`` — the question as one string (:func:`pglogic.eval.derive.to_text`), plain top-k;
* ``pglogic[<family>]`` — the engine, one entry per operator family (:func:`default_families`:
  ITLR's 12 combinations, Łukasiewicz, product/probabilistic sum); ``pglogic[product-max]``
  (:data:`HEADLINE`) is the default, the one the targets are checked on;
* ``pglogic-nsfl``, ``pglogic-nsfl-rerank``, ``pglogic-sqo``, ``pglogic-sqo-rerank`` — the
  engine's other scoring modes (:data:`pglogic.engine.compile.MODES`; the NSFL modes get the query's
  natural-language text as the monolithic question, the SQO modes use the default family);
* ``pglogic[product-max|<label>]`` — the default family with a calibrated truth map
  (``calibrations``: label → ``sigmoid:TAU:LAMBDA`` spec, e.g. a supervised fit from another
  dataset or the unsupervised fit of :func:`calibrate_dataset`);
* ``decomposed`` and ``geometric`` — the BoolQuestions and NSFL baselines
  (:mod:`pglogic.eval.baselines`).

Example:
    >>> from pglogic.eval.data import load_dataset  # doctest: +SKIP
    >>> result = evaluate_dataset(PgLogic(), load_dataset(Path("../shared/data/limit_small")))  # doctest: +SKIP
    >>> result.summary["pglogic[itlr]"]["ndcg@10"]  # doctest: +SKIP
    0.83
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
from psycopg import sql

from pglogic.api import PgLogic
from pglogic.config import DEFAULT_MODEL
from pglogic.embed.registry import CachedEmbedder, get_query_embedder
from pglogic.engine.compile import MODES, CompiledQuery, SearchOptions, Source, compile_query
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, scored_terms
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, DEFAULT_NOT_MENTION
from pglogic.engine.operators import DEFAULT_FAMILY, PRESETS, OperatorFamily, itlr_combinations
from pglogic.engine.source import Corpus
from pglogic.errors import InvalidInput, UnknownCorpus
from pglogic.eval.baselines import QUERY_VECTOR, compile_decomposed, geometric_vector, single_vector
from pglogic.eval.calibrate import Calibration, fit_corpus, fit_logistic, label_pairs
from pglogic.eval.data import Dataset
from pglogic.eval.derive import Derived, EvalQuery, derive_queries
from pglogic.eval.metrics import (
    KEPT_TRAPS,
    METRICS,
    Paired,
    aggregate,
    evaluate_run,
    kept_traps,
    paired_test,
)
from pglogic.query import positive_terms
from pglogic.store.db import Connection
from pglogic.store.search import execute, server_has_iterative_scan

#: Documents retrieved per query (mAP@100 and Recall@100 need 100).
K = 100
DENSE = "dense"
#: On a corpus with passages: dense retrieval by each document's best passage, the default
#: engine over the documents' own vectors (what a single-vector corpus gives), and the default
#: engine with every text's similarity its best passage's (``passage_score="max"``).
DENSE_PASSAGES = "dense@passages"
HEADLINE_DOCUMENTS = "pglogic@documents"
HEADLINE_MAX = "pglogic@max"
DECOMPOSED = "decomposed"
GEOMETRIC = "geometric"
GIVEN = "given"
#: The engine's default family, tested against the dense baseline.
HEADLINE = f"pglogic[{DEFAULT_FAMILY}]"
#: The scoring modes besides ``fuzzy`` that an evaluation runs by default.
EVAL_MODES = tuple(m for m in MODES if m != "fuzzy")


def mode_method(mode: str) -> str:
    """The method name of a scoring mode.

    Example:
        >>> mode_method("nsfl"), mode_method("fuzzy")
        ('pglogic-nsfl', 'pglogic[product-max-strong]')
    """
    return HEADLINE if mode == "fuzzy" else f"pglogic-{mode}"


def calibrated_method(label: str) -> str:
    """The method name of the default family with a calibrated truth map labelled ``label``.

    Example:
        >>> calibrated_method("unsupervised")
        'pglogic[product-max-strong|unsupervised]'
    """
    return f"pglogic[{DEFAULT_FAMILY}|{label}]"


def with_not(q: EvalQuery) -> bool:
    """A derived query with at least one NOT (the dataset's own queries are counted apart).

    Example:
        >>> result.subset(with_not)  # doctest: +SKIP
    """
    return q.group != GIVEN and q.n_negations > 0


def without_not(q: EvalQuery) -> bool:
    """A derived query without NOT.

    Example:
        >>> result.subset(without_not)  # doctest: +SKIP
    """
    return q.group != GIVEN and q.n_negations == 0


def given(q: EvalQuery) -> bool:
    """One of the dataset's own queries (``queries.jsonl``).

    Example:
        >>> result.subset(given)  # doctest: +SKIP
    """
    return q.group == GIVEN


#: The query subsets reported apart and tested for significance.
SUBSETS: dict[str, Callable[[EvalQuery], bool]] = {
    "with NOT": with_not,
    "without NOT": without_not,
    "given": given,
}


def method_name(family: OperatorFamily) -> str:
    """The name of the engine's method with ``family``: a preset's name when one matches.

    Example:
        >>> method_name(PRESETS["godel"]), method_name(next(itlr_combinations()))
        ('pglogic[godel]', 'pglogic[itlr]')
        >>> from pglogic.engine.operators import resolve_family
        >>> method_name(resolve_family("and=product,or=max,not=complement"))
        'pglogic[product-max]'
    """
    for name, preset in PRESETS.items():
        if preset.spec == family.spec:
            return f"pglogic[{name}]"
    return f"pglogic[{family.spec}]"


def default_families() -> list[OperatorFamily]:
    """The default family, ITLR's 12 combinations and the other presets (no formula twice).

    Only the default family scores each AND's own text too (``and_text``, the engine's
    default), each negated term against its context (``not_context``) and its mention floor
    (``not_mention``); the others are the operators alone, as the papers define them
    (:func:`and_text_for`, :func:`not_context_for`, :func:`not_mention_for`), so
    ``pglogic[product-max]`` is the engine's previous default.

    Example:
        >>> [method_name(f) for f in default_families()[:2]], len(default_families())
        (['pglogic[product-max-strong]', 'pglogic[itlr]'], 15)
    """
    out: dict[str, OperatorFamily] = {}
    for fam in [PRESETS[DEFAULT_FAMILY], *itlr_combinations(), *PRESETS.values()]:
        out.setdefault(fam.spec, fam)
    return list(out.values())


def _is_default(family: OperatorFamily) -> bool:
    """Whether ``family`` is the engine's default family (the one the engine's own scoring
    options go with)."""
    return family.spec == PRESETS[DEFAULT_FAMILY].spec


def and_text_for(family: OperatorFamily) -> int:
    """The ``and_text`` weight an evaluation runs ``family`` with: the engine's default for the
    default family, 0 (the operators alone) for every other.

    Example:
        >>> and_text_for(PRESETS[DEFAULT_FAMILY]), and_text_for(PRESETS["product-max"])
        (4, 0)
    """
    return DEFAULT_AND_TEXT if _is_default(family) else 0


def not_context_for(family: OperatorFamily) -> float:
    """The ``not_context`` an evaluation runs ``family`` with: the engine's default for the
    default family, 0 (each negated term as it is) for every other, as the papers define them.

    Example:
        >>> not_context_for(PRESETS[DEFAULT_FAMILY]), not_context_for(PRESETS["itlr"])
        (0.5, 0.0)
    """
    return DEFAULT_NOT_CONTEXT if _is_default(family) else 0.0


def not_mention_for(family: OperatorFamily) -> float:
    """The ``not_mention`` an evaluation runs ``family`` with: the engine's default for the
    default family, 0 (the similarity alone) for every other, as the papers define them.

    Example:
        >>> not_mention_for(PRESETS[DEFAULT_FAMILY]), not_mention_for(PRESETS["itlr"])
        (0.4, 0.0)
    """
    return DEFAULT_NOT_MENTION if _is_default(family) else 0.0


def corpus_name_for(
    ds: Dataset, model: str, layout: tuple[bool, int | None, int | None] = (True, None, None)
) -> str:
    """The corpus an evaluation uses: ``eval_<dataset>`` (``_<model>`` unless the default;
    ``_1vec`` without passages, ``_p<tokens>o<overlap>`` for a passage size of its own).
    ``layout`` is (passages, passage_tokens, passage_overlap).

    Example:
        >>> from types import SimpleNamespace
        >>> corpus_name_for(SimpleNamespace(name="limit_small"), "all-MiniLM-L6-v2")
        'eval_limit_small'
        >>> corpus_name_for(SimpleNamespace(name="x"), "all-MiniLM-L6-v2", (True, 128, 16))
        'eval_x_p128o16'
    """
    base = f"eval_{ds.name}"
    if model != DEFAULT_MODEL:
        base += "_" + model
    passages, tokens, overlap = layout
    if not passages:
        base += "_1vec"
    elif tokens is not None or overlap is not None:
        base += f"_p{tokens or 'w'}o{overlap if overlap is not None else 'd'}"
    return "".join(ch if ch.isalnum() or ch in "_.-" else "-" for ch in base)[:63]


def prepare_corpus(
    api: PgLogic,
    ds: Dataset,
    name: str,
    model: str = DEFAULT_MODEL,
    *,
    on_ingest: Callable[[int, int], None] | None = None,
    layout: tuple[bool, int | None, int | None] = (True, None, None),
) -> Corpus:
    """Create/refresh corpus ``name`` from the dataset's corpus file; build its index if missing.

    Ingest is incremental: unchanged documents are neither embedded nor written again, so a
    second evaluation of the same dataset starts at once. ``on_ingest(done, total)`` reports
    progress. ``layout`` is (passages, passage_tokens, passage_overlap) of a new corpus; an
    existing one of another layout is refused.

    Example:
        >>> prepare_corpus(PgLogic(), ds, "eval_limit_small").name  # doctest: +SKIP
        'eval_limit_small'
    """
    passages, tokens, overlap = layout
    try:
        c = api.corpus(name)
    except UnknownCorpus:
        c = api.create_corpus(
            name, model=model, description=f"pglogic eval of {ds.path}", passages=passages,
            passage_tokens=tokens, passage_overlap=overlap,
        )  # fmt: skip
    if (
        (c.passage_tokens is not None) != passages
        or (tokens is not None and c.passage_tokens != tokens)
        or (overlap is not None and c.passage_overlap != overlap)
    ):
        have = (
            "one vector per document"
            if c.passage_tokens is None
            else (f"passages of {c.passage_tokens} tokens ({c.passage_overlap} shared)")
        )
        raise InvalidInput(
            f"Corpus {name!r} has {have}, not the layout asked for: choose another --corpus"
        )
    total = 0
    done = 0

    def start(n: int) -> None:
        nonlocal total
        total = n
        if on_ingest:
            on_ingest(0, n)

    def batch(_stats: Any, n: int) -> None:
        nonlocal done
        done += n
        if on_ingest:
            on_ingest(done, total)

    if c.model != model:
        raise InvalidInput(
            f"Corpus {name!r} uses model {c.model!r}, not {model!r}: choose another --corpus"
        )
    api.ingest(name, ds.corpus_file, on_start=start, on_batch=batch)
    info = api.corpus_info(name)
    if info.documents != len(ds.doc_ids):
        raise InvalidInput(
            f"Corpus {name!r} holds {info.documents:,} documents, the dataset {len(ds.doc_ids):,}:"
            " it has documents from elsewhere; drop it or choose another --corpus"
        )
    if info.index_name is None:
        api.build_index(name)
    return c


@dataclass
class EvalResult:
    """What :func:`evaluate_dataset` measured (serialised by :mod:`pglogic.eval.report`).

    ``per_query[method][qid][metric]``; ``summary[method][metric]`` over all queries;
    ``latency_ms[method]`` the median statement time; ``significance[method]`` the Wilcoxon
    test of nDCG@10 against ``dense`` per non-empty subset of :data:`SUBSETS`.
    """

    dataset: Dataset
    derived: Derived
    model: str
    k: int
    methods: list[str]
    per_query: dict[str, dict[str, dict[str, float]]]
    latency_ms: dict[str, float]
    seconds: float
    summary: dict[str, dict[str, float]] = field(default_factory=dict)
    significance: dict[str, dict[str, Paired]] = field(default_factory=dict)
    truth: str = "clamp"
    versus_headline: dict[str, dict[str, Paired]] = field(default_factory=dict)

    @property
    def queries(self) -> tuple[EvalQuery, ...]:
        """The evaluated queries."""
        return self.derived.queries

    def subset(self, keep: Callable[[EvalQuery], bool]) -> list[str]:
        """Ids of the queries for which ``keep`` is true.

        Example:
            >>> with_not = result.subset(lambda q: q.n_negations > 0)  # doctest: +SKIP
        """
        return [q.id for q in self.queries if keep(q)]


def _ranked(conn: Connection, compiled: CompiledQuery, vectors: Mapping[str, Any]) -> list[str]:
    return [h.external_id for h in execute(conn, compiled, dict(vectors))]


@dataclass
class _Runner:
    conn: Connection
    corpus: Corpus
    embedder: CachedEmbedder
    families: Sequence[OperatorFamily]
    k: int
    iterative: bool
    truth: str = "clamp"
    modes: Sequence[str] = EVAL_MODES
    calibrations: Mapping[str, str] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=dict)
    one: CompiledQuery = field(init=False)
    passages: bool = field(init=False)

    def __post_init__(self) -> None:
        # dense and geometric: the same plain top-k statement, compiled once per run
        self.one = single_vector(self.corpus, self.k)
        self.passages = self.corpus.passage_tokens is not None

    def timed(self, method: str, fn: Callable[[], list[str]]) -> list[str]:
        t0 = time.perf_counter()
        out = fn()
        self.times.setdefault(method, []).append(time.perf_counter() - t0)
        return out

    def family_options(self, family: OperatorFamily, exact: bool) -> SearchOptions:
        """The options ``family`` runs with: its AND texts and NOT contexts as the papers
        define it, or the engine's defaults for the default family.

        Example:
            >>> runner.family_options(PRESETS["itlr"], False).not_context  # doctest: +SKIP
            0.0
        """
        return SearchOptions(k=self.k, operators=family, exact=exact, truth=self.truth,
                             and_text=and_text_for(family),
                             not_context=not_context_for(family),
                             not_mention=not_mention_for(family))  # fmt: skip

    def run(self, q: EvalQuery) -> dict[str, list[str]]:
        term_list = scored_terms(q.tree, DEFAULT_AND_TEXT)  # the terms, then the AND texts
        vectors = dict(zip(term_list, self.embedder.embed(term_list), strict=True))
        dense_vec = self.embedder.embed([q.text])[0]
        one = self.one
        out: dict[str, list[str]] = {}
        out[DENSE] = self.timed(DENSE, partial(_ranked, self.conn, one, {QUERY_VECTOR: dense_vec}))
        exact = not positive_terms(q.tree)
        if self.passages:
            maxp = single_vector(self.corpus, self.k, passages=True)
            out[DENSE_PASSAGES] = self.timed(
                DENSE_PASSAGES, partial(_ranked, self.conn, maxp, {QUERY_VECTOR: dense_vec})
            )
            base = self.family_options(PRESETS[DEFAULT_FAMILY], exact)
            for name, opts in ((HEADLINE_DOCUMENTS, replace(base, passages=False)),
                               (HEADLINE_MAX, replace(base, passage_score="max"))):  # fmt: skip
                compiled = compile_query(
                    q.tree, self.corpus, opts, server_has_iterative_scan=self.iterative
                )
                out[name] = self.timed(name, partial(_ranked, self.conn, compiled, vectors))
        for fam in self.families:
            opts = self.family_options(fam, exact)
            compiled = compile_query(
                q.tree, self.corpus, opts, server_has_iterative_scan=self.iterative
            )
            name = method_name(fam)
            out[name] = self.timed(name, partial(_ranked, self.conn, compiled, vectors))
        for mode in self.modes:
            opts = SearchOptions(k=self.k, mode=mode, exact=exact, question=q.text)
            compiled = compile_query(
                q.tree, self.corpus, opts, server_has_iterative_scan=self.iterative
            )
            texts = compiled.terms  # NSFL: the fused texts and the question too
            vecs = dict(zip(texts, self.embedder.embed(texts), strict=True))
            name = mode_method(mode)
            out[name] = self.timed(name, partial(_ranked, self.conn, compiled, vecs))
        for label, spec in self.calibrations.items():
            opts = SearchOptions(k=self.k, exact=exact, truth=spec)
            compiled = compile_query(
                q.tree, self.corpus, opts, server_has_iterative_scan=self.iterative
            )
            name = calibrated_method(label)
            out[name] = self.timed(name, partial(_ranked, self.conn, compiled, vectors))
        dec = compile_decomposed(q.tree, self.corpus, self.k)
        out[DECOMPOSED] = self.timed(DECOMPOSED, partial(_ranked, self.conn, dec, vectors))
        geo = {QUERY_VECTOR: geometric_vector(q.tree, vectors)}
        out[GEOMETRIC] = self.timed(GEOMETRIC, partial(_ranked, self.conn, one, geo))
        return out


def run_methods(
    conn: Connection,
    corpus: Corpus,
    queries: Sequence[EvalQuery],
    *,
    families: Sequence[OperatorFamily] | None = None,
    k: int = K,
    embedder: CachedEmbedder | None = None,
    on_query: Callable[[int, int], None] | None = None,
    truth: str = "clamp",
    modes: Sequence[str] = EVAL_MODES,
    calibrations: Mapping[str, str] | None = None,
) -> tuple[dict[str, dict[str, list[str]]], dict[str, float]]:
    """Run every method on every query; return (rankings[method][qid], median ms per method).

    The median time of a method covers its whole query path after embedding: compiling, the
    SQO ascent in the SQO modes, the statement.

    Example:
        >>> runs, ms = run_methods(conn, corpus, derived.queries)  # doctest: +SKIP
        >>> runs["dense"]["itlr3-00-0001"][:3]  # doctest: +SKIP
        ['reuters-1', 'reuters-7', 'reuters-9']
    """
    runner = _Runner(
        conn,
        corpus,
        embedder or get_query_embedder(corpus.model),
        list(families) if families is not None else default_families(),
        k,
        server_has_iterative_scan(conn),
        truth,
        modes,
        dict(calibrations or {}),
    )
    runs: dict[str, dict[str, list[str]]] = {}
    for i, q in enumerate(queries):
        for method, ranking in runner.run(q).items():
            runs.setdefault(method, {})[q.id] = ranking
        if on_query:
            on_query(i + 1, len(queries))
    ms = {m: 1000 * statistics.median(ts) for m, ts in runner.times.items()}
    return runs, ms


def evaluate_dataset(
    api: PgLogic,
    ds: Dataset,
    *,
    model: str = DEFAULT_MODEL,
    corpus_name: str | None = None,
    derived: Derived | None = None,
    families: Sequence[OperatorFamily] | None = None,
    k: int = K,
    on_ingest: Callable[[int, int], None] | None = None,
    on_query: Callable[[int, int], None] | None = None,
    truth: str = "clamp",
    modes: Sequence[str] = EVAL_MODES,
    calibrations: Mapping[str, str] | None = None,
    layout: tuple[bool, int | None, int | None] = (True, None, None),
) -> EvalResult:
    """Evaluate every method on ``ds`` (derived queries by default) and summarise.

    ``layout`` (passages, passage_tokens, passage_overlap) is the corpus's: with passages
    (the default) every engine method scores each document's best passage per term, and three
    more methods compare the layouts and passage scores: :data:`DENSE_PASSAGES`,
    :data:`HEADLINE_DOCUMENTS` and :data:`HEADLINE_MAX`.

    ``truth`` is the engine's similarity-to-truth map (``clamp``, ``affine`` or a calibrated
    ``sigmoid:TAU:LAMBDA`` from :func:`calibrate_dataset`); the baselines do not use one.
    ``modes`` are the scoring modes run besides the families; ``calibrations`` adds the default
    family with each labelled truth map (:func:`calibrated_method`).

    Example:
        >>> res = evaluate_dataset(PgLogic(), load_dataset(Path("data/limit_small")))  # doctest: +SKIP
        >>> sorted(res.summary)[:2]  # doctest: +SKIP
        ['decomposed', 'dense']
    """
    t0 = time.perf_counter()
    derived = derived if derived is not None else derive_queries(ds)
    name = corpus_name or corpus_name_for(ds, model, layout)
    corpus = prepare_corpus(api, ds, name, model, on_ingest=on_ingest, layout=layout)
    with api.connect() as conn:
        runs, ms = run_methods(
            conn,
            corpus,
            derived.queries,
            families=families,
            k=k,
            on_query=on_query,
            truth=truth,
            modes=modes,
            calibrations=calibrations,
        )
    relevant = {q.id: q.relevant for q in derived.queries}
    negatives = {q.id: q.negatives for q in derived.queries}
    per_query = {m: evaluate_run(run, relevant, negatives) for m, run in runs.items()}
    if DENSE in runs:
        for m, run in runs.items():
            for qid, share in kept_traps(run, runs[DENSE], negatives).items():
                per_query[m][qid][KEPT_TRAPS] = share
    result = EvalResult(
        ds, derived, model, k, list(runs), per_query, ms, time.perf_counter() - t0, truth=truth
    )
    summarise(result)
    return result


def summarise(result: EvalResult) -> None:
    """Fill ``result.summary``, ``result.significance`` (Wilcoxon of nDCG@10 vs dense) and
    ``result.versus_headline`` (the same test of every other mode and calibrated map against
    the default engine, :data:`HEADLINE`).

    Example:
        >>> summarise(result); result.significance["pglogic[product-max]"]["with NOT"].p_value  # doctest: +SKIP
        1.2e-05
    """
    result.summary = {m: aggregate(result.per_query[m]) for m in result.methods}
    subsets = {label: result.subset(keep) for label, keep in SUBSETS.items()}
    subsets = {label: qids for label, qids in subsets.items() if qids}

    def tests(base: str, method: str) -> dict[str, Paired]:
        a, b = result.per_query[base], result.per_query[method]
        return {
            label: paired_test(
                {q: a[q]["ndcg@10"] for q in qids}, {q: b[q]["ndcg@10"] for q in qids}
            )
            for label, qids in subsets.items()
        }

    for m in result.methods:
        if DENSE in result.per_query and m != DENSE:
            result.significance[m] = tests(DENSE, m)
        layouts = (HEADLINE_DOCUMENTS, HEADLINE_MAX, DENSE_PASSAGES)
        if HEADLINE in result.per_query and (m.startswith("pglogic-") or "|" in m or m in layouts):
            result.versus_headline[m] = tests(HEADLINE, m)


def corpus_embeddings(conn: Connection, corpus: Corpus) -> tuple[list[str], np.ndarray]:
    """External ids and embedding matrix (float32, one row per document) of ``corpus``.

    Example:
        >>> ids, matrix = corpus_embeddings(conn, corpus)  # doctest: +SKIP
    """
    src = Source.for_corpus(corpus)
    stmt = sql.SQL("SELECT {}, {} FROM {} WHERE {} IS NOT NULL ORDER BY {}").format(
        src.col("external_id"),
        src.col(src.embedding),
        src.from_,
        src.col(src.embedding),
        src.col(src.id),
    )
    rows = conn.execute(stmt).fetchall()
    if not rows:
        raise InvalidInput(f"Corpus {corpus.name!r} has no embedded documents")
    matrix = np.stack([np.asarray(r[1].to_numpy(), dtype=np.float32) for r in rows])
    return [str(r[0]) for r in rows], matrix


def calibrate_dataset(
    api: PgLogic,
    ds: Dataset,
    *,
    model: str = DEFAULT_MODEL,
    corpus_name: str | None = None,
    unsupervised: bool = False,
    seed: int = 0,
    on_ingest: Callable[[int, int], None] | None = None,
) -> Calibration:
    """Fit σ((s − τ)·λ) for ``model`` from ``ds``'s labels (or, ``unsupervised``, from the
    similarity distribution of the label names to the documents; labels then only name terms).

    Pairs: each label's term text against the documents that carry the label and ten times as
    many that do not (:func:`pglogic.eval.calibrate.label_pairs`). The documents' embeddings come from
    the evaluation corpus (loaded like :func:`evaluate_dataset` does).

    Example:
        >>> cal = calibrate_dataset(PgLogic(), load_dataset(Path("../shared/data/reuters21578")))  # doctest: +SKIP
        >>> f"sigmoid:{cal.tau:.3f}:{cal.lam:.1f}"  # doctest: +SKIP
        'sigmoid:0.186:18.8'
    """
    name = corpus_name or corpus_name_for(ds, model)
    corpus = prepare_corpus(api, ds, name, model, on_ingest=on_ingest)
    with api.connect() as conn:
        ids, matrix = corpus_embeddings(conn, corpus)
    row_of = {doc: i for i, doc in enumerate(ds.doc_ids)}
    labels = [ds.labels[row_of[i]] for i in ids]
    names = sorted({label for doc in ds.labels for label in doc})
    texts = [ds.term_text[label] for label in names]
    vectors = get_query_embedder(model).embed(texts)
    if unsupervised:
        return fit_corpus(matrix @ vectors.T)
    term_vectors = dict(zip(texts, vectors, strict=True))
    label_of = dict(zip(texts, names, strict=True))
    s, y = label_pairs(term_vectors, matrix, labels, label_of, seed=seed)
    return fit_logistic(s, y)


__all__ = [
    "DECOMPOSED",
    "DENSE",
    "DENSE_PASSAGES",
    "EVAL_MODES",
    "GEOMETRIC",
    "HEADLINE",
    "HEADLINE_DOCUMENTS",
    "HEADLINE_MAX",
    "METRICS",
    "EvalResult",
    "K",
    "and_text_for",
    "calibrate_dataset",
    "calibrated_method",
    "corpus_embeddings",
    "corpus_name_for",
    "default_families",
    "evaluate_dataset",
    "method_name",
    "mode_method",
    "not_context_for",
    "not_mention_for",
    "prepare_corpus",
    "run_methods",
    "summarise",
]
