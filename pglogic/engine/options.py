"""How to run a logical search: :class:`SearchOptions`, the scoring :data:`MODES` and their bounds.

Each option is declared once, in :data:`OPTIONS` (an :class:`OptionSpec` per field of
:class:`SearchOptions`: its type, default, bounds, choices, help and the engine's words for a
value it does not take). The engine's checks (:func:`pglogic.engine.compile.check_options`, the
plan's bounds in :mod:`pglogic.engine.plans`), the CLI's flags, the HTTP request model and the
SQLAlchemy helper's keywords derive from it; ``tests/test_option_set.py`` checks them, the SQL
function ``pglogic.search`` and the JSON Schema of ``docs/sql-api.md`` against it.

The planning heuristics (:mod:`pglogic.engine.plans`) and the compiler
(:mod:`pglogic.engine.compile`, which re-exports these names) both read the options.

Example:
    >>> opts = SearchOptions(k=5, mode="nsfl")
    >>> opts.k, opts.mode in MODES, DEFAULT_RERANK_DEPTH <= MAX_EF_SEARCH
    (5, True, True)
    >>> OPTIONS["and_text"].minimum, OPTIONS["and_text"].maximum, OPTIONS["and_text"].default
    (0, 10, 4)
"""

from __future__ import annotations

import builtins
import dataclasses
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pglogic.engine import defaults
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, MAX_AND_TEXT
from pglogic.engine.filters import Filter
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, DEFAULT_NOT_MENTION
from pglogic.engine.operators import DEFAULT_FAMILY, PRESETS, TRUTH_MAPS, OperatorFamily

#: pgvector's upper bound for hnsw.ef_search.
MAX_EF_SEARCH = 1000
#: Default K of the reranking modes (the NSFL paper reranks 1,000 candidates).
DEFAULT_RERANK_DEPTH = 1000
#: The largest k (a 32-bit integer, as the SQL function reads it); above 1000 with exact=True.
MAX_K = 2**31 - 1
#: The deepest scan a statement may ask for (iterative scans go past ef_search): beyond it,
#: scoring every document (exact=True) is the cheaper and clearer plan.
MAX_DEPTH = 100_000
#: The longest timeout in seconds (``statement_timeout`` is a 32-bit number of milliseconds).
MAX_TIMEOUT = 2_147_483

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


#: How a document's passages make a semantic text's similarity (``SearchOptions.passage_score``).
PASSAGE_SCORES: dict[str, str] = {
    "blend-not-or": "blend-not, and in a formula with neither a NOT nor an AND (a disjunction or "
    "one term) a tenth of the document's own vector beside the best passage (the default: "
    "bench/quality/results/family_losses.md)",
    "blend-not": "in a formula with a NOT (a negated term), blend; in one without, max (fewer "
    "traps than max, the same ranking without NOT; bench/quality/results/passage_choice.md)",
    "max": "the best passage's, for every text (a NOT means: no passage is about it)",
    "blend": "a negated term: the best passage's; a positive text: the mean of the best passage's "
    "and the document's own vector's (less pull from long documents' many passages; "
    "bench/quality/results/passages_aggregate.md)",
}

#: The default passage score (:data:`pglogic.engine.defaults.PASSAGE_SCORE`).
DEFAULT_PASSAGE_SCORE = defaults.PASSAGE_SCORE

#: The truth values of a lexical term (``SearchOptions.lexical``).
LEXICAL: dict[str, str] = {
    "crisp": "1 when the document's words match, else 0 (exact inclusion and exclusion)",
    "rank": "the match's normalised rank ts_rank_cd(tsv, q, 32) = r / (r + 1), 0 without a match",
}


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
    (:func:`~pglogic.engine.plans.guide_suffices`: a positive OR); otherwise the guide's scan, at
    twice its depth, is the only index scan of the statement (fuzzy mode). A disjunction of terms
    under ``max`` (:func:`~pglogic.engine.plans.union_suffices`) needs each term's top k only:
    k rows per term, no guide. ``True`` / ``False`` force the terms + the guide, or the guide
    alone.

    ``mode`` picks the scoring method (:data:`MODES`): ``nsfl`` and ``nsfl-rerank`` also score
    the fused query texts and ``question`` (the monolithic question; default: the formula as
    text, :func:`pglogic.query.to_text`), :mod:`pglogic.engine.nsfl`; ``sqo`` and ``sqo-rerank`` search
    along the vector of :mod:`pglogic.engine.sqo` (``seed`` makes it deterministic). ``rerank_depth``
    is K of the reranking modes (default 1000). NSFL scores raw cosine similarities, as the
    paper does: ``operators`` and ``truth`` then only steer the guide scan; the SQO modes climb
    (and ``sqo-rerank`` ranks by) the fuzzy formula with ``operators`` and ``truth``.

    ``and_text`` (fuzzy mode) is the weight of each AND's own text
    (:mod:`pglogic.engine.conjunction`): the phrase of its positive operands is scored too and
    joins the AND that many more times (once in an AND with a negated operand); 0 scores the
    formula alone.

    ``lexical`` is the truth value of a lexical term (``match:"wheat"``, :data:`LEXICAL`):
    ``crisp`` is 1 for a document whose words match and 0 otherwise; ``rank`` is the match's
    normalised rank, ``ts_rank_cd(tsv, query, 32)`` = r / (r + 1), in [0, 1) and 0 without a
    match. Both are used as they are by every operator family (no truth map).

    ``passages`` (a corpus with passages, :mod:`pglogic.store.passages`): each term's truth for
    a document is its best passage's, found by HNSW scans of the passages; False searches the
    documents' own vectors (the first window of each, as a corpus without passages does).
    ``passage_score`` (:data:`PASSAGE_SCORES`) says how: the default ``blend-not-or`` averages
    a positive text's best passage with the document's own vector in a formula with a negated
    term, and adds a tenth of the own vector in a formula with neither a NOT nor an AND;
    ``blend-not`` does the former only, ``max`` never blends, ``blend`` in every formula.

    ``not_context`` (fuzzy mode, from 0 to 1) is λ of :mod:`pglogic.engine.negation`: a term
    negated inside an AND is scored against its vector without λ of the AND's positive terms
    (0: as it is).

    ``not_mention`` (fuzzy mode, from 0 to 1; a corpus with a lexical index, ``pglogic corpus
    lexical``): a negated term's similarity is at least this much for a document whose words
    match the term as a phrase (the ``match:`` semantics), ``max(s, not_mention)``. The default,
    0.4, was chosen leaving one corpus out in ``bench/quality/results/not_mention.md``; 0 scores the
    similarity alone.

    ``timeout`` (seconds) bounds the statement on the server (``SET LOCAL statement_timeout``):
    a search that runs longer is cancelled there and raises
    :class:`~pglogic.errors.SearchTimeout`.

    Example:
        >>> SearchOptions(k=5, operators="godel").k
        5
    """

    k: int = defaults.K
    operators: str | OperatorFamily = DEFAULT_FAMILY
    truth: str = defaults.TRUTH
    exact: bool = defaults.EXACT
    depth: int | None = None
    ef_search: int | None = None
    filters: Sequence[Filter] = field(default_factory=tuple)
    iterative_scan: bool = defaults.ITERATIVE_SCAN
    guide: bool = defaults.GUIDE
    term_scans: bool | None = None
    mode: str = defaults.MODE
    question: str | None = None
    rerank_depth: int | None = None
    seed: int = 0
    timeout: float | None = None
    and_text: int = DEFAULT_AND_TEXT
    lexical: str = defaults.LEXICAL
    passages: bool = defaults.PASSAGES
    passage_score: str = DEFAULT_PASSAGE_SCORE
    not_context: float = DEFAULT_NOT_CONTEXT
    not_mention: float = DEFAULT_NOT_MENTION


@dataclass(frozen=True, kw_only=True)
class OptionSpec:
    """One search option as every interface offers it: a field of :class:`SearchOptions`.

    ``type`` is the Python type of a value (``bool``, ``int``, ``float``, ``str``; ``tuple`` for
    the filters), ``default`` the field's default (from :mod:`pglogic.engine.defaults`), ``help``
    one or two sentences saying what it does. ``nullable``: None is a value (the plan, or another
    option, decides). A number lies from ``minimum`` to ``maximum``, both excluded when
    ``exclusive``. Some bounds hold only for a search with index scans: ``index_maximum`` (the
    most k such a search returns) and, when ``index_only``, ``minimum`` and ``maximum`` (an exact
    search ignores the option); the plan checks those (:meth:`index_refusal`), the options
    themselves the rest (:meth:`refusal`). ``choices`` are the only values of a closed set,
    ``presets`` the named values of an open one (other forms are described in ``help``).

    ``words`` are the engine's messages for a value it does not take, by case: ``type`` (not a
    number of the option's type), ``range`` (out of bounds; ``below`` and ``above`` when the two
    ends say different things), ``index`` (past ``index_maximum``), ``choice`` (not one of the
    choices). Each is a :meth:`str.format` template of ``name``, ``value``, ``minimum``,
    ``maximum``, ``index_maximum``, ``choices`` (comma-separated) and what the caller adds.

    Example:
        >>> spec = OPTIONS["not_context"]
        >>> spec.type, spec.default, spec.minimum, spec.maximum
        (<class 'float'>, 0.5, 0, 1)
        >>> spec.refusal(0.25) is None, spec.refusal(1.5)
        (True, "Invalid not_context=1.5: a number from 0 (the negated term as it is) to 1 (without its AND's positive terms)")
    """

    name: str
    type: builtins.type[object]
    default: object
    help: str
    nullable: bool = False
    minimum: int | float | None = None
    maximum: int | float | None = None
    exclusive: bool = False
    index_maximum: int | None = None
    index_only: bool = False
    choices: tuple[str, ...] = ()
    presets: tuple[str, ...] = ()
    words: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def bounded(self) -> bool:
        """Whether the option has a bound that holds in every search (not only with index scans).

        Example:
            >>> OPTIONS["k"].bounded, OPTIONS["depth"].bounded, OPTIONS["seed"].bounded
            (True, False, False)
        """
        return not self.index_only and (self.minimum is not None or self.maximum is not None)

    def refusal(self, value: object) -> str | None:
        """The engine's words for ``value`` when the option does not take it, else None: a value
        of another type (an ``int`` option takes integers, NumPy's too; a ``float`` option real
        numbers; never a bool), out of the bounds that hold in every search (:attr:`bounded`) or
        not one of the ``choices``. Options without bounds or choices are the caller's to check.

        Example:
            >>> OPTIONS["k"].refusal(0), OPTIONS["k"].refusal(2.5)
            ('Invalid k=0: must be at least 1', 'Invalid k=2.5: expected an integer')
            >>> OPTIONS["mode"].refusal("magic")
            "Unknown mode 'magic': valid modes are fuzzy, nsfl, nsfl-rerank, sqo, sqo-rerank"
            >>> OPTIONS["depth"].refusal(None), OPTIONS["depth"].refusal(0)  # the plan's bound
            (None, None)
        """
        if value is None and self.nullable:
            return None
        if self.choices:
            if isinstance(value, str) and value in self.choices:
                return None
            return self._say("choice", value)
        if self.minimum is None and self.maximum is None:
            return None
        if self.type is int:
            if not (isinstance(value, numbers.Integral) and not isinstance(value, bool)):
                return self._say("type", value)
        elif self.type is float:
            if not (isinstance(value, numbers.Real) and not isinstance(value, bool)):
                return self._say("type", value)
        else:
            return None
        if self.index_only:
            return None
        return self._bounds(value, self.minimum)

    def index_refusal(
        self, value: object, *, minimum: int | None = None, **context: Any
    ) -> str | None:
        """The engine's words for ``value`` in a search with index scans when the option's bounds
        for such a search refuse it (``index_maximum``; ``minimum`` and ``maximum`` of an
        ``index_only`` option, ``minimum`` replaced when given), else None. ``value`` has passed
        :meth:`refusal`; ``context`` fills the words' other fields.

        Example:
            >>> OPTIONS["k"].index_refusal(1001)
            'k=1001 is above 1000, the most an HNSW scan returns; use exact=True (--exact)'
            >>> OPTIONS["rerank_depth"].index_refusal(5, minimum=10, k=10)
            'Invalid rerank_depth=5: from k=10 to 1000 candidates'
            >>> OPTIONS["ef_search"].index_refusal(1000) is None
            True
        """
        if self.index_maximum is not None and value > self.index_maximum:  # type: ignore[operator]
            return self._say("index", value, **context)
        if not self.index_only or value is None:
            return None
        return self._bounds(value, self.minimum if minimum is None else minimum, **context)

    def _bounds(self, value: Any, minimum: int | float | None, **context: Any) -> str | None:
        """The words for a number out of ``minimum`` .. :attr:`maximum` (None: within)."""
        if minimum is not None and not (minimum < value if self.exclusive else minimum <= value):
            return self._say("below", value, **context)
        top = self.maximum
        if top is not None and not (value < top if self.exclusive else value <= top):
            return self._say("above", value, **context)
        return None

    def _say(self, case: str, value: object, **context: Any) -> str:
        """The words of ``case`` (``below`` and ``above`` fall back to ``range``) for ``value``."""
        fallback = {"below": "range", "above": "range"}.get(case, case)
        template = self.words.get(case) or self.words.get(fallback) or _WORDS[case]
        return template.format(
            name=self.name, value=value, minimum=self.minimum, maximum=self.maximum,
            index_maximum=self.index_maximum, choices=", ".join(self.choices), **context,
        )  # fmt: skip


_WORDS = {
    "type": "Invalid {name}={value!r}: expected an integer",
    "choice": "Unknown {name} {value!r}: valid values are {choices}",
}

#: The engine's advice when a bound of index scans refuses a value.
_USE_EXACT = "use exact=True (--exact)"


def _spec(
    name: str,
    type: builtins.type[object],
    help: str,
    words: Mapping[str, str] | None = None,
    **facts: Any,
) -> OptionSpec:
    """The :class:`OptionSpec` of field ``name`` of :class:`SearchOptions`, with its default."""
    f = next(f for f in dataclasses.fields(SearchOptions) if f.name == name)
    default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
    return OptionSpec(
        name=name, type=type, default=default, help=help,
        words=MappingProxyType(dict(words or {})), **facts,
    )  # fmt: skip


def _same(template: str) -> dict[str, str]:
    """The same words for a value of another type and one out of range."""
    return {"type": template, "range": template}


_DECLARED = (
    _spec(
        "k",
        int,
        f"Hits to return (at most {MAX_EF_SEARCH} unless exact).",
        minimum=1,
        maximum=MAX_K,
        index_maximum=MAX_EF_SEARCH,
        words={
            "below": "Invalid k={value}: must be at least {minimum}",
            "above": "Invalid k={value}: at most {maximum:,}",
            "index": "k={value} is above {index_maximum}, the most an HNSW scan returns; "
            + _USE_EXACT,
        },
    ),
    _spec(
        "operators",
        str,
        "Operator family: a preset (" + ", ".join(PRESETS) + ") or and=..,or=..,not=..",
        presets=tuple(PRESETS),
    ),
    _spec(
        "truth",
        str,
        f"Similarity-to-truth mapping: {', '.join(TRUTH_MAPS)}, sigmoid:TAU:LAMBDA, or "
        "calibrated (the fit stored for the corpus, else for its model).",
        presets=(*TRUTH_MAPS, "calibrated"),
    ),
    _spec("exact", bool, "Score every document (no index)."),
    _spec(
        "depth",
        int,
        f"Candidates per positive term (default from k; 1 to {MAX_DEPTH:,} unless exact).",
        nullable=True,
        minimum=1,
        maximum=MAX_DEPTH,
        index_only=True,
        words={
            "range": "Invalid depth={value}: from {minimum} to {maximum:,} candidates per "
            f"scan; {_USE_EXACT} to score every document"
        },
    ),
    _spec(
        "ef_search",
        int,
        f"hnsw.ef_search (default from depth; 1 to {MAX_EF_SEARCH}).",
        nullable=True,
        minimum=1,
        maximum=MAX_EF_SEARCH,
        index_only=True,
        words={"range": "Invalid ef_search={value}: pgvector accepts {minimum} to {maximum}"},
    ),
    _spec(
        "filters",
        tuple,
        "Metadata filters, all of which must hold: KEY=VALUE, KEY>=VALUE (=, !=, <, <=, >, >=), "
        'a JSON object the metadata must contain, or {"key": K, "op": OP, "value": V}.',
    ),
    _spec(
        "iterative_scan",
        bool,
        "Filtered HNSW scans go on until they have enough rows (pgvector 0.8 and later).",
    ),
    _spec(
        "guide",
        bool,
        "One more candidate scan along a direction optimised for the whole formula.",
    ),
    _spec(
        "term_scans",
        bool,
        "Force (or drop) the HNSW scan per positive term. Default: only for a query with a "
        "positive OR (an OR of terms under max: each term's top k, no guide); otherwise the "
        "guide's scan alone finds the candidates.",
        nullable=True,
    ),
    _spec(
        "mode",
        str,
        "Scoring: " + "; ".join(f"{name}: {what}" for name, what in MODES.items()) + ".",
        choices=tuple(MODES),
        words={"choice": "Unknown mode {value!r}: valid modes are {choices}"},
    ),
    _spec(
        "question",
        str,
        "The monolithic question the NSFL modes also score (default: the query as text).",
        nullable=True,
    ),
    _spec(
        "rerank_depth",
        int,
        f"K, the candidates the reranking modes rescore (default {DEFAULT_RERANK_DEPTH}; from k "
        f"to {MAX_EF_SEARCH}).",
        nullable=True,
        minimum=1,
        maximum=MAX_EF_SEARCH,
        index_only=True,
        words={"range": "Invalid rerank_depth={value}: from k={k} to {maximum} candidates"},
    ),
    _spec("seed", int, "Seed of the SQO ascent."),
    _spec(
        "timeout",
        float,
        "Cancel the statement on the server after this many seconds (statement_timeout).",
        nullable=True,
        minimum=0,
        maximum=MAX_TIMEOUT,
        exclusive=True,
        words=_same("Invalid timeout={value!r}: a positive number of seconds, below {maximum:,}"),
    ),
    _spec(
        "and_text",
        int,
        "Weight of each AND's own text: the phrase of its positive terms ('grain and "
        "shipping') is scored too and joins the AND this many times (once beside a NOT; fuzzy "
        "mode); 0: the formula alone.",
        minimum=0,
        maximum=MAX_AND_TEXT,
        words=_same("Invalid and_text={value!r}: a whole number from {minimum} to {maximum}"),
    ),
    _spec(
        "lexical",
        str,
        'Truth of a lexical term (match:word, match:"a phrase"): crisp is 1 when the '
        "document's words match, else 0 (exact exclusion under NOT); rank is the match's "
        "normalised ts_rank_cd.",
        choices=tuple(LEXICAL),
        words={"choice": "Unknown lexical truth {value!r}: valid values are {choices}"},
    ),
    _spec(
        "passages",
        bool,
        "On a corpus with passages: each term's truth is its best passage's (passage_score); "
        "off, the documents' own vectors (their first window).",
    ),
    _spec(
        "passage_score",
        str,
        "Over passages: each text's best passage (max); for positive texts the mean of it and "
        "the document's own vector (blend), or that only in formulas with a NOT (blend-not); "
        "blend-not-or also adds a tenth of the own vector in formulas with neither a NOT nor an "
        "AND (docs/passages.md).",
        choices=tuple(PASSAGE_SCORES),
        words={"choice": "Unknown passage score {value!r}: valid values are {choices}"},
    ),
    _spec(
        "not_context",
        float,
        "A term negated inside an AND is scored without this much of the AND's positive terms "
        "('grain' AND NOT 'wheat': 'wheat' minus its 'grain' part; fuzzy mode; "
        "docs/evaluation.md); 0: the negated term as it is.",
        minimum=0,
        maximum=1,
        words=_same(
            "Invalid not_context={value!r}: a number from {minimum} (the negated term as it is) "
            "to {maximum} (without its AND's positive terms)"
        ),
    ),
    _spec(
        "not_mention",
        float,
        "A negated term is at least this similar to a document whose words match it as a "
        "phrase ('grain' AND NOT 'wheat': a story that says 'wheat'; the corpus's lexical "
        "index, fuzzy mode; docs/evaluation.md); 0: the similarity alone.",
        minimum=0,
        maximum=1,
        words=_same(
            "Invalid not_mention={value!r}: a number from {minimum} (the similarity alone) to "
            "{maximum} (a mention makes the negated term fully true)"
        ),
    ),
)

OPTIONS: Mapping[str, OptionSpec] = MappingProxyType({spec.name: spec for spec in _DECLARED})
"""Every search option, declared once, by :class:`SearchOptions` field name (in field order)."""
