"""Normalise a query tree once into a plan-ready value (no I/O).

Every fact of the tree that planning and rendering read is computed here, once per query: the
scoring strategy of the mode (:mod:`pglogic.engine.strategy`), the AND texts
(:mod:`pglogic.engine.conjunction`) and the tree the score is computed from, the scored texts
and their numbers, the lexical terms, the positive terms and matches (which generate
candidates), the negated terms whose mention floors their similarity, and, over passages, the
own vector's weight in each text's similarity. The result, :class:`PlanReady`, is immutable.

Example:
    >>> from pglogic.engine.options import SearchOptions
    >>> from pglogic.query import parse
    >>> ready = normalise(parse('"a" AND "b" AND NOT "c"'), SearchOptions())
    >>> ready.texts, ready.positive_terms, ready.layout
    (('a', 'b', 'c', 'a and b'), ('a', 'b'), (3,))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pglogic.engine.conjunction import and_texts, own_weights, with_and_texts
from pglogic.engine.nsfl import NSFL, NSFL_RERANK
from pglogic.engine.operators import OperatorFamily, resolve_family
from pglogic.engine.options import SearchOptions
from pglogic.engine.sqo import SQO, SQO_RERANK
from pglogic.engine.strategy import FUZZY, Strategy
from pglogic.errors import InvalidInput
from pglogic.query import (
    Node,
    Term,
    map_terms,
    matches,
    negated_only_terms,
    positive_matches,
    positive_terms,
    terms,
    to_string,
)

__all__ = ["STRATEGIES", "PlanReady", "normalise", "shape_of"]

#: The strategy of each search mode (:data:`pglogic.engine.options.MODES`).
STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {s.mode: s for s in (FUZZY, NSFL, NSFL_RERANK, SQO, SQO_RERANK)}
)


@dataclass(frozen=True, kw_only=True)
class PlanReady:
    """A query tree normalised for planning and rendering (:func:`normalise`).

    ``strategy`` is the effective mode's (the default, fuzzy, for a single term: every mode
    ranks it by its similarity); ``texts`` are the scored texts (``s{i}``, ``v{i}``), ``index``
    their numbers; ``lexical`` the lexical terms (``q{j}``, ``l{j}``), ``lexical_index`` theirs;
    ``mentions`` the numbers of the negated terms whose mention floors their similarity;
    ``score_tree`` the tree the score is computed from (with its AND texts); ``layout`` where
    each AND text sits among ``texts``; ``question`` the text of the strategy's question scan;
    ``own`` the own vector's weight in each scored text's similarity over passages (then one
    more, last, for the strategy's vector column), empty without passages.

    Example:
        >>> from pglogic.query import parse
        >>> ready = normalise(parse('"a" OR NOT "b"'), SearchOptions(mode="nsfl"))
        >>> ready.mode, ready.texts, ready.question
        ('nsfl', ('a', 'b', 'a or not b'), 'a or not b')
    """

    tree: Node
    strategy: Strategy
    family: OperatorFamily
    asked: str | None
    texts: tuple[str, ...]
    index: Mapping[str, int]
    lexical: tuple[str, ...]
    lexical_index: Mapping[str, int]
    positive_terms: tuple[str, ...]
    positive_matches: tuple[str, ...]
    n_terms: int
    mentions: tuple[int, ...]
    score_tree: Node
    layout: tuple[int, ...]
    question: str | None
    own: tuple[float, ...]

    @property
    def mode(self) -> str:
        """The effective mode (the strategy's)."""
        return self.strategy.mode

    @property
    def single(self) -> bool:
        """Whether the query is one term."""
        return isinstance(self.tree, Term)


def normalise(
    tree: Node, opts: SearchOptions, *, lexical_index: bool = False, passages: bool = False
) -> PlanReady:
    """Normalise ``tree`` for ``opts`` (:class:`PlanReady`), on a source with a lexical index
    (``lexical_index``) and passages (``passages``). Raises InvalidInput for operators that are
    no family and for lexical terms the strategy or the source cannot score.

    Example:
        >>> from pglogic.query import parse
        >>> normalise(parse('"a" AND NOT match:b'), SearchOptions())
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: match:'b' needs a lexical index, and this corpus has none: add it with `pglogic corpus lexical NAME`
        >>> normalise(parse('"a" AND NOT "b"'), SearchOptions(), lexical_index=True).mentions
        (1,)
    """
    family = resolve_family(opts.operators) if isinstance(opts.operators, str) else opts.operators
    strategy = FUZZY if isinstance(tree, Term) else STRATEGIES[opts.mode]
    asked = opts.question.strip() if opts.question and opts.question.strip() else None
    lexical = tuple(matches(tree))
    if lexical:
        if not strategy.lexical:
            raise InvalidInput(
                "Lexical terms (match:...) are scored in the fuzzy mode only, not in mode "
                f"{strategy.mode!r}"
            )
        if not lexical_index:
            raise InvalidInput(
                f"match:{lexical[0]!r} needs a lexical index, and this corpus has none: "
                "add it with `pglogic corpus lexical NAME`"
            )
    weight = opts.and_text if strategy.and_texts else 0
    phrases = and_texts(tree) if weight > 0 else []
    texts = tuple(strategy.texts(tree, asked, phrases))
    index = {t: i for i, t in enumerate(texts)}
    mentioned = strategy.lexical and opts.not_mention and lexical_index
    own: tuple[float, ...] = ()
    if passages:
        scored = [*texts, None] if strategy.vector_column else list(texts)
        own = tuple(own_weights(tree, scored, opts.passage_score))
    return PlanReady(
        tree=tree,
        strategy=strategy,
        family=family,
        asked=asked,
        texts=texts,
        index=MappingProxyType(index),
        lexical=lexical,
        lexical_index=MappingProxyType({t: j for j, t in enumerate(lexical)}),
        positive_terms=tuple(positive_terms(tree)),
        positive_matches=tuple(positive_matches(tree)),
        n_terms=len(terms(tree)),
        mentions=tuple(sorted(index[t] for t in negated_only_terms(tree))) if mentioned else (),
        score_tree=with_and_texts(tree, weight),
        layout=tuple(texts.index(p) for p in phrases),
        question=strategy.question(tree, asked) if strategy.question else None,
        own=own,
    )


def shape_of(tree: Node) -> str:
    """The query's shape: its canonical text with the distinct terms renamed ``0``, ``1``, ...
    in :func:`~pglogic.query.terms` order. Two queries of one shape compile to one statement.

    Example:
        >>> from pglogic.query import parse
        >>> shape_of(parse('"oil" AND NOT "gas" OR "oil"'))
        '"0" AND NOT "1" OR "0"'
    """
    index = {t: str(i) for i, t in enumerate(terms(tree))}
    lexical = {t: str(j) for j, t in enumerate(matches(tree))}
    return to_string(map_terms(tree, index.__getitem__, lexical.__getitem__))
