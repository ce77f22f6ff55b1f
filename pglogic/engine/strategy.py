"""Scoring strategies: what a search mode changes in the pipeline, beside the default path.

The default strategy, :data:`FUZZY`, scores the formula with a fuzzy operator family over the
query's terms and AND texts (:mod:`pglogic.engine.conjunction`). The research modes are
strategies of their own, defined beside the modes' mathematics: NSFL's in
:mod:`pglogic.engine.nsfl`, SQO's in :mod:`pglogic.engine.sqo`. A strategy is a value: the
normaliser (:func:`pglogic.engine.normalise.normalise`) picks one per query, and the planner and
the renderer read it; none of them branches on a mode's name.

Example:
    >>> from pglogic.query import parse
    >>> FUZZY.texts(parse('"a" AND "b"'), None, ["a and b"])
    ['a', 'b', 'a and b']
    >>> FUZZY.needs_positive, FUZZY.guided, FUZZY.rerank
    (True, True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from psycopg import sql

from pglogic.engine.conjunction import with_phrases
from pglogic.engine.operators import OperatorFamily, to_sql
from pglogic.query import Node, terms

__all__ = ["FUZZY", "Score", "Strategy"]

#: The score expression, the CTE layers that compute it (over ``sims``) and the relation the
#: ranking step reads.
Score = tuple[sql.Composable, list[sql.Composable], str]


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """How one search mode scores and scans.

    ``texts(tree, question, phrases)`` are the scored texts (``s{i}``, ``v{i}``), ``phrases``
    the AND texts of :func:`pglogic.engine.conjunction.and_texts` (none outside the fuzzy
    mode); ``score(tree, index, lexical, family, truth, question)`` the score over their
    columns (:data:`Score`). ``needs_positive``: without a positive term the query is refused
    (outside exact mode); ``guided``: a query of two or more terms may scan along its guide;
    ``rerank``: one scan of K rows, reranked; ``question``: the text of one more candidate scan
    (``m``: NSFL's monolithic question); ``along_vector``: the only scan runs along the extra
    vector ``vg``, computed as ``vector_kind`` says (``sqo``); ``vector_column``: the similarity
    to ``vg`` is a scored column of that name; ``projects_negations``: a negated term's vector is
    bound against its context (``not_context``); ``and_texts``: an AND is also scored as one
    phrase (``and_text``); ``lexical``: lexical terms and the mentions of negated terms
    (``not_mention``) are scored.

    Example:
        >>> FUZZY.mode, FUZZY.projects_negations, FUZZY.question
        ('fuzzy', True, None)
    """

    mode: str
    texts: Callable[[Node, str | None, Sequence[str]], list[str]]
    score: Callable[
        [Node, Mapping[str, int], Mapping[str, int], OperatorFamily, str, str | None], Score
    ]
    needs_positive: bool = True
    guided: bool = True
    rerank: bool = False
    question: Callable[[Node, str | None], str] | None = None
    along_vector: bool = False
    vector_kind: str | None = None
    vector_column: str | None = None
    projects_negations: bool = False
    and_texts: bool = False
    lexical: bool = False


def fuzzy_texts(tree: Node, question: str | None, phrases: Sequence[str]) -> list[str]:
    """The fuzzy mode's scored texts: the query's terms, then its AND texts not already terms.

    Example:
        >>> from pglogic.query import parse
        >>> fuzzy_texts(parse('"a" AND "b"'), None, [])
        ['a', 'b']
    """
    return with_phrases(terms(tree), phrases)


def fuzzy_score(
    tree: Node,
    index: Mapping[str, int],
    lexical: Mapping[str, int],
    family: OperatorFamily,
    truth: str,
    question: str | None,
) -> Score:
    """The fuzzy formula over the columns ``s{i}`` (and the lexical truths ``l{j}``).

    Example:
        >>> from pglogic.engine.operators import resolve_family
        >>> from pglogic.query import parse
        >>> score, layers, rel = fuzzy_score(parse('"a"'), {"a": 0}, {}, resolve_family("product"),
        ...                                  "clamp", None)
        >>> layers, rel
        ([], 'sims')
    """
    score = to_sql(
        tree, lambda t: sql.Identifier(f"s{index[t]}"), family, truth,
        lambda t: sql.Identifier(f"l{lexical[t]}"),
    )  # fmt: skip
    return score, [], "sims"


FUZZY = Strategy(
    mode="fuzzy", texts=fuzzy_texts, score=fuzzy_score, projects_negations=True, and_texts=True,
    lexical=True,
)  # fmt: skip
"""The default strategy: the fuzzy formula over the terms and AND texts."""
