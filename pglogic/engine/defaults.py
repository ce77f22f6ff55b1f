"""The engine's tuned defaults, each written once.

Every value here was chosen by a benchmark (named beside it) and is read by the Python engine
from this module. The SQL function ``pglogic.search`` reads the same values from the table
``pglogic.defaults`` (:data:`SQL`: option name → value), which the migrations fill; a test
checks that a database upgraded to the head holds exactly :data:`SQL`. Changing a default is
one value here plus a revision that updates its row (``pglogic.defaults``) and the results
that depend on it; :func:`fingerprint` names the set of values a results file was measured
with.

Example:
    >>> SQL["and_text"], SQL["not_mention"]
    (4, 0.4)
    >>> len(fingerprint())
    12
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

__all__ = [
    "AND_TEXT",
    "DEPTH_FLOOR",
    "DEPTH_PER_K",
    "EXACT",
    "EXACT_SWITCH",
    "GUIDE",
    "GUIDE_ONLY_FACTOR",
    "GUIDE_TERMS",
    "ITERATIVE_SCAN",
    "LEXICAL",
    "MODE",
    "NOT_CONTEXT",
    "NOT_MENTION",
    "NOT_POWER",
    "OPERATORS",
    "PASSAGES",
    "PASSAGE_SCORE",
    "SQL",
    "TRUTH",
    "K",
    "fingerprint",
]

K: Final = 10
"""Hits returned."""

EXACT: Final = False
"""Whether to score every document instead of the planned index scans."""

GUIDE: Final = True
"""Whether a query of two or more terms scans along its guide vector too."""

ITERATIVE_SCAN: Final = True
"""Whether filtered HNSW scans continue until they have enough rows (pgvector >= 0.8)."""

PASSAGES: Final = True
"""Whether a corpus with passages is searched through them."""

OPERATORS: Final = "product-max-strong"
"""The operator family (:data:`pglogic.engine.operators.PRESETS`): product, max and
``complement^NOT_POWER``, the best family on the three real labelled corpora
(``bench/quality/summary.md``) with a NOT strong enough to keep dense retrieval's traps out
(``bench/quality/results/frontier.md``)."""

NOT_POWER: Final = 1.25
"""The default family's NOT exponent, chosen leaving one corpus out
(``bench/quality/results/frontier.md``)."""

TRUTH: Final = "clamp"
"""The similarity-to-truth map: ``max(0, min(1, s))``."""

MODE: Final = "fuzzy"
"""The scoring mode (:data:`pglogic.engine.options.MODES`)."""

LEXICAL: Final = "crisp"
"""A lexical term's truth (:data:`pglogic.engine.options.LEXICAL`): 1 when the words match."""

AND_TEXT: Final = 4
"""The weight of an AND's own text in a plain conjunction (beside a NOT: one), chosen leaving
one corpus out in ``bench/quality/results/frontier.md``. Weight 2 removes Reuters' gap to the
methods without AND texts but puts LIMIT-small's conjunctions significantly below dense
retrieval (``bench/quality/results/family_losses.md``)."""

PASSAGE_SCORE: Final = "blend-not-or"
"""How a document's passages make a text's similarity (:data:`pglogic.engine.options.
PASSAGE_SCORES`), chosen leaving one corpus out (``bench/quality/passage_choice.py``, then
``bench/quality/family_losses.py`` for the tenth of the own vector in a disjunction)."""

NOT_CONTEXT: Final = 0.5
"""λ: how much of its context a negated term's vector loses
(``bench/quality/results/not_projection.md``)."""

NOT_MENTION: Final = 0.4
"""A negated term's similarity floor for the documents that mention it as a phrase, chosen
leaving one corpus out (``bench/quality/results/not_mention.md``)."""

DEPTH_FLOOR: Final = 100
"""The least per-term candidate depth (:func:`pglogic.engine.plans.default_depth`)."""

DEPTH_PER_K: Final = 10
"""Per-term candidates per hit asked for, times √(candidate terms)
(:func:`pglogic.engine.plans.default_depth`)."""

GUIDE_TERMS: Final = 4
"""The guide's scan is at least as deep as a query of this many terms
(:func:`pglogic.engine.plans.guide_depth`, ``bench/perf/results/guide.md``)."""

GUIDE_ONLY_FACTOR: Final = 2
"""The guide's scan, when it is the only one, goes this many times deeper
(:func:`pglogic.engine.plans.guide_only_depth`)."""

EXACT_SWITCH: Final = 17
"""Cost of one tuple of a filtered (iterative) HNSW scan / one row of a sequential scan,
measured on 100k vectors in ``bench/perf/scale.py`` (AND 3, k=10: 10% filter 60 ms iterative
vs 64 ms exact; 1% filter 181 ms vs 66 ms): :func:`pglogic.engine.plans.prefer_exact`."""

SQL: Final[dict[str, object]] = {
    "k": K,
    "exact": EXACT,
    "guide": GUIDE,
    "iterative_scan": ITERATIVE_SCAN,
    "passages": PASSAGES,
    "operators": OPERATORS,
    "truth": TRUTH,
    "mode": MODE,
    "lexical": LEXICAL,
    "and_text": AND_TEXT,
    "passage_score": PASSAGE_SCORE,
    "not_context": NOT_CONTEXT,
    "not_mention": NOT_MENTION,
    "depth_floor": DEPTH_FLOOR,
    "depth_per_k": DEPTH_PER_K,
    "guide_terms": GUIDE_TERMS,
    "guide_only_factor": GUIDE_ONLY_FACTOR,
    "exact_switch": EXACT_SWITCH,
}
"""The table ``pglogic.defaults`` (name → value): ``pglogic.search``'s option defaults under
the options' names, then the planner's constants."""

_ALL: Final[dict[str, object]] = {**SQL, "not_power": NOT_POWER}


def fingerprint() -> str:
    """Twelve hex digits naming this set of defaults: a results file records it, and a test
    tells a result measured under other defaults from a current one.

    Example:
        >>> fingerprint() == fingerprint() and all(c in "0123456789abcdef" for c in fingerprint())
        True
    """
    text = json.dumps(_ALL, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
