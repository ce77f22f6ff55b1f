"""Judging an LLM's rewrite of a real question: exact, equivalent, structural, and what went wrong.

A question's gold is one or more formulas (the first is the main one, the others equally right
readings of ambiguous term boundaries) or ``plain``: a question with no logic, rightly searched as
one dense term. The judgements:

* **exact** — for a plain gold: the rewrite is one term (its text is free: any single term is a
  dense search of the question). Otherwise the rewrite equals a gold formula once every term is
  reduced to its content words (:func:`pglogic.llm.wording.content_stems`: case, plural endings
  and function words do not count, so "a spring-form pan" equals "spring-form pan").
* **equivalent** — the same truth table as a gold formula, a rewritten term standing for the gold
  term with the same content words (a plain gold: exact).
* **structural** — each rewritten term is aligned to the gold term it shares the most content
  words with (a plain gold is one term: the question); a term that aligns to none (a filler term,
  an invented one) makes the rewrite wrong; then the truth tables must agree. Several rewritten
  terms may stand for one gold term: splitting a phrase is not an error of logic, dropping a NOT,
  turning an OR into an AND or grouping wrongly is.

:func:`errors` names what went wrong against the main gold (:data:`ERROR_KINDS`): a negated gold
term that is missing (*lost NOT*) or positive (*inverted NOT*), a NOT over something the gold keeps
positive (*spurious NOT*, e.g. content negation made an exclusion), an OR where the gold has none
or the reverse (*OR/AND swap*), wrong grouping of the right operators (*grouping*), a term made of
function words only (*filler term*), a term that aligns to no gold term (*unaligned term*), a gold
term nothing stands for (*missing term*).

Example:
    >>> from pglogic.query import parse
    >>> gold = Gold.read('"vegan desserts" AND NOT "coconut"')
    >>> j = judge_rewrite(parse('"vegan desserts" AND "don\\'t" AND "coconut"'), gold, "Vegan desserts that don't use coconut")
    >>> j.structural, j.errors
    (False, ('inverted NOT', 'filler term'))
    >>> judge_rewrite(parse('"vegan" AND "desserts" AND NOT "coconut"'), gold, "").structural
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pglogic.eval.nl import MAX_TRUTH_TERMS, same_truth_table
from pglogic.llm.wording import content_stems, question_names
from pglogic.query import And, Match, Node, Not, Or, Term, parse, to_string

#: The word that stands for a gold with no logic (one dense term).
PLAIN = "plain"

#: What :func:`errors` can report, in report order.
ERROR_KINDS = (
    "lost NOT",
    "inverted NOT",
    "spurious NOT",
    "OR/AND swap",
    "grouping",
    "filler term",
    "unaligned term",
    "missing term",
)


@dataclass(frozen=True)
class Gold:
    """A question's gold formulas (``None``: plain) and its kind of negation.

    ``negation`` is ``none``, ``exclusion`` (the main formula has a NOT) or ``content`` (a
    negation word that describes the situation: no NOT).

    Example:
        >>> g = Gold.read("plain", negation="content")
        >>> g.plain, g.negation
        (True, 'content')
    """

    formulas: tuple[Node | None, ...]
    negation: str = "none"

    @classmethod
    def read(cls, gold: str, alts: Sequence[str] = (), negation: str = "none") -> Gold:
        """Parse a gold and its alternatives (``plain`` or a query each).

        Example:
            >>> print(Gold.read('"a" OR "b"', ["plain"]).formulas[0])
            "a" OR "b"
        """
        return cls(tuple(None if g.strip() == PLAIN else parse(g) for g in (gold, *alts)), negation)

    @property
    def plain(self) -> bool:
        """Whether the main reading has no logic."""
        return self.formulas[0] is None


@dataclass(frozen=True)
class Judgement:
    """A rewrite judged against its gold (see the module's docstring).

    Example:
        >>> Judgement(True, True, True, ()).errors
        ()
    """

    exact: bool
    equivalent: bool
    structural: bool
    errors: tuple[str, ...]


def leaves(tree: Node, negated: bool = False) -> list[tuple[str, bool]]:
    """Every term occurrence (semantic and lexical) with whether an odd number of NOTs cover it.

    Example:
        >>> from pglogic.query import parse
        >>> leaves(parse('"a" AND NOT ("b" OR match:"c")'))
        [('a', False), ('b', True), ('c', True)]
    """
    if isinstance(tree, Term | Match):
        return [(tree.text, negated)]
    if isinstance(tree, Not):
        return leaves(tree.child, not negated)
    assert isinstance(tree, And | Or)
    return [leaf for c in tree.children for leaf in leaves(c, negated)]


def _has_or(tree: Node) -> bool:
    if isinstance(tree, Or):
        return True
    if isinstance(tree, Not):
        return _has_or(tree.child)
    if isinstance(tree, And):
        return any(_has_or(c) for c in tree.children)
    return False


def _key(text: str, names: frozenset[str] = frozenset()) -> str:
    words = content_stems(text, names)
    return " ".join(words) if words else " ".join(text.casefold().split())


def _canonical(tree: Node, names: frozenset[str]) -> str:
    def walk(node: Node) -> Node:
        if isinstance(node, Term | Match):
            return Term(_key(node.text, names))
        if isinstance(node, Not):
            return Not(walk(node.child))
        assert isinstance(node, And | Or)
        kids = tuple(walk(c) for c in node.children)
        return And(kids) if isinstance(node, And) else Or(kids)

    return to_string(walk(tree))


def align(term: str, gold_terms: Sequence[str], names: frozenset[str] = frozenset()) -> str | None:
    """The gold term ``term`` stands for: the one sharing the most content words (ties: the
    larger share of the gold term's words, then the first); None when it shares none.

    Example:
        >>> align("electric cars", ["reviews of electric cars", "Norway"])
        'reviews of electric cars'
        >>> align("get", ["work permit", "Brazilian passport"]) is None
        True
    """
    mine = set(content_stems(term, names))
    best: tuple[int, float, int] | None = None
    found = None
    for i, gold in enumerate(gold_terms):
        theirs = set(content_stems(gold, names)) or {_key(gold)}
        common = len(mine & theirs)
        if not common:
            continue
        score = (common, common / len(theirs), -i)
        if best is None or score > best:
            best, found = score, gold
    return found


def _same_table(rewritten: Node, gold: Node, mapping: Mapping[str, str]) -> bool:
    if len({t for t, _ in leaves(gold)}) > MAX_TRUTH_TERMS:
        return False
    return same_truth_table(rewritten, gold, mapping)


def _gold_tree(formula: Node | None, question: str) -> Node:
    return Term(question or "question") if formula is None else formula


def structural(rewritten: Node, gold: Node, names: frozenset[str] = frozenset()) -> bool:
    """Whether ``rewritten`` has ``gold``'s truth table once its terms are aligned (:func:`align`).

    Example:
        >>> from pglogic.query import parse
        >>> g = parse('("electric cars" OR "hybrid cars") AND "Norway"')
        >>> structural(parse('"electric cars" OR "hybrid cars" AND "Norway"'), g)
        False
        >>> structural(parse('("electric" OR "hybrid cars") AND "in Norway"'), g)
        True
    """
    gold_terms = list(dict.fromkeys(t for t, _ in leaves(gold)))
    mapping: dict[str, str] = {}
    for text, _ in leaves(rewritten):
        found = align(text, gold_terms, names)
        if found is None:
            return False
        mapping[text] = found
    return _same_table(rewritten, gold, mapping)


def errors(rewritten: Node, gold: Node, names: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """What is wrong in ``rewritten`` against ``gold`` (:data:`ERROR_KINDS`); () when structural.

    Example:
        >>> from pglogic.query import parse
        >>> errors(parse('"reviews of electric cars" OR "reviews of hybrid cars" AND "Norway"'),
        ...        parse('("electric cars" OR "hybrid cars") AND "Norway"'))
        ('grouping',)
        >>> errors(parse('"recipes with X" AND "Y"'), parse('"recipes with X" OR "recipes with Y"'))
        ('OR/AND swap',)
    """
    if structural(rewritten, gold, names):
        return ()
    gold_leaves = leaves(gold)
    gold_terms = list(dict.fromkeys(t for t, _ in gold_leaves))
    gold_negated = {t for t, neg in gold_leaves if neg}
    found: list[str] = []
    aligned: dict[str, list[bool]] = {}
    for text, negated in leaves(rewritten):
        target = align(text, gold_terms, names)
        if target is None:
            found.append("filler term" if not content_stems(text, names) else "unaligned term")
            continue
        aligned.setdefault(target, []).append(negated)
        if negated and target not in gold_negated:
            found.append("spurious NOT")
    for g in gold_terms:
        marks = aligned.get(g)
        if g in gold_negated:
            if not marks:
                found.append("lost NOT")
            elif not all(marks):
                found.append("inverted NOT")
        elif not marks:
            found.append("missing term")
    if not found:
        found.append("OR/AND swap" if _has_or(gold) != _has_or(rewritten) else "grouping")
    return tuple(k for k in ERROR_KINDS if k in found)


def judge_rewrite(rewritten: Node | None, gold: Gold, question: str) -> Judgement:
    """Exact, equivalent and structural judgements of ``rewritten`` (None: a fallback) and the
    errors against the main gold.

    Example:
        >>> from pglogic.query import parse
        >>> g = Gold.read("plain", negation="content")
        >>> judge_rewrite(parse('"bread not rise in the oven"'), g, "Why does my bread not rise in the oven?")
        Judgement(exact=True, equivalent=True, structural=True, errors=())
        >>> judge_rewrite(parse('"bread" AND NOT "rise in the oven"'), g, "Why does my bread not rise in the oven?").errors
        ('spurious NOT',)
    """
    if rewritten is None:
        return Judgement(False, False, False, ("missing term",))
    names = question_names(question)
    exact = equivalent = struct = False
    for formula in gold.formulas:
        if formula is None:
            one = isinstance(rewritten, Term | Match)
            exact = exact or one
            equivalent = equivalent or one
        else:
            same = _canonical(rewritten, names) == _canonical(formula, names)
            exact = exact or same
            if not equivalent:
                keys = {_key(t, names): t for t, _ in leaves(formula)}
                mapping = {
                    t: keys[_key(t, names)] for t, _ in leaves(rewritten) if _key(t, names) in keys
                }
                equivalent = len(mapping) == len({t for t, _ in leaves(rewritten)}) and (
                    _same_table(rewritten, formula, mapping)
                )
        struct = struct or structural(rewritten, _gold_tree(formula, question), names)
    found = () if struct else errors(rewritten, _gold_tree(gold.formulas[0], question), names)
    return Judgement(exact, equivalent or exact, struct or exact, found)


__all__ = [
    "ERROR_KINDS",
    "PLAIN",
    "Gold",
    "Judgement",
    "align",
    "errors",
    "judge_rewrite",
    "leaves",
    "structural",
]
