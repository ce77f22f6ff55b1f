"""How to run a logical search: :class:`SearchOptions`, the scoring :data:`MODES` and their bounds.

The planning heuristics (:mod:`pglogic.engine.plans`) and the compiler
(:mod:`pglogic.engine.compile`, which re-exports these names) both read the options.

Example:
    >>> opts = SearchOptions(k=5, mode="nsfl")
    >>> opts.k, opts.mode in MODES, DEFAULT_RERANK_DEPTH <= MAX_EF_SEARCH
    (5, True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pglogic.engine import defaults
from pglogic.engine.conjunction import DEFAULT_AND_TEXT
from pglogic.engine.filters import Filter
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, DEFAULT_NOT_MENTION
from pglogic.engine.operators import DEFAULT_FAMILY, OperatorFamily

#: pgvector's upper bound for hnsw.ef_search.
MAX_EF_SEARCH = 1000
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
