"""NSFL operators: fuzzy logic over atomic *and fused* similarities, for any query tree (no I/O).

The NSFL paper scores a document with its cosine similarities to the atoms (``S_A``, ``S_B``),
to the *fused* query, the operands joined into one string and embedded as a whole (``S_AB``:
"A and B", "A but not B"), and to the monolithic question ``S_M``. Its operators, for its six
templates (raw cosine similarities, no truth map):

==============  ==================================================================================
A ∧ B           ``S_AB`` if ``S_AB > S_A + S_B`` (reinforcement trigger) else ``2·S_AB − max(S_A, S_B)``
A ∧ ¬B          ``S_AB`` if ``S_AB < S_A`` and ``S_AB < S_B`` (departure trigger)
                else ``S_A − S̃_B·(S_AB − S_A)``, with ``S̃_B = S_B / (max S_B over the pool + ε)``
A ∨ B           ``min(S_AB, S_M)`` if ``S_AB < S_A`` and ``S_AB < S_B`` (noise floor)
                else ``max(S_A, S_B, S_AB, S_M)``
A ∧ B ∧ C       ``S_ABC`` if ``S_ABC > S_A + S_B + S_C`` else ``2·S_ABC − max(S_A, S_B, S_C)``
A ∧ B ∧ ¬C      ``S_A∧B − S̃_C·(S_ABC − S_AB)`` (``S_A∧B``: the A ∧ B row)
A ∨ B ∨ C       as A ∨ B over three atoms
==============  ==================================================================================

"The pool" is the set of documents being ranked: the candidates of the statement (or every
document in exact mode), so ``S̃`` is a window ``max(x) OVER ()`` over them in SQL.

How pglogic generalises them to any tree (nesting, more atoms). ``S(N)`` is a node's score,
``F(N)`` the similarity to the node's fused text (:func:`pglogic.query.to_text`: "a and b but
not c", "(a or b) but not c", positives first: :func:`fused_text`); for a term ``S = F = `` its
similarity.

* **AND** with positive operands ``P1..Pn`` and negated operands ``¬N1..¬Nm`` (in the order
  written; the positives are taken first):

  - positive part: ``n = 1``: ``S0 = S(P1)``, ``F0 = F(P1)``; ``n ≥ 2``: ``F0 = F(P1 ∧ … ∧ Pn)``,
    ``S0 = F0`` if ``F0 > Σ S(Pi)`` else ``2·F0 − max S(Pi)`` (the A ∧ B row with n atoms);
  - then each negation in turn, with ``Fj = F(P1 ∧ … ∧ Pn ∧ ¬N1 ∧ … ∧ ¬Nj)``:
    ``Sj = Fj`` if ``Fj < F(j−1)`` and ``Fj < S(Nj)`` (the departure trigger)
    else ``S(j−1) − S̃(Nj)·(Fj − F(j−1))``.
    With one positive atom and one negation this is exactly A ∧ ¬B (``F0 = S_A``); with
    A ∧ B ∧ ¬C exactly the paper's row plus the same departure trigger;
  - no positive operand (``¬A ∧ ¬B``): ``min_j (1 − S̃(Nj))``.

* **OR** with operands ``C1..Cn`` (any polarity): ``min(F, M)`` if ``F < S(Ci)`` for every i,
  else ``max(S(C1), …, S(Cn), F, M)``, where ``F = F(OR node)`` and ``M`` is the monolithic
  question's similarity at the root (the question given with the query, else the root's fused
  text) and ``F`` itself below the root (a sub-clause has no question of its own). The question
  (or the root's fused text) is always scored: its HNSW scan finds the NSFL modes' candidates.

* **NOT** outside an AND (``A ∨ ¬B``, a negated root): ``1 − S̃(N)``.

* ``S̃(N) = S(N) / (max over the pool of S(N) + ε)`` for any node, ε = :data:`EPSILON`.

Each rule is written once against an algebra (:class:`NsflAlgebra`): the NumPy face computes
the reference over an array of documents (the array is the pool), the SQL face builds the
expression in layers: every node's score is a column of its own layer (``n0``, ``n1``, …), so a
pool maximum is always a window over a column and windows never nest.

Example (one document of a two-document pool; the paper's A ∧ ¬B):
    >>> from pglogic.query import parse
    >>> sims = {"a": [0.6, 0.5], "b": [0.5, 0.1], "a but not b": [0.55, 0.45]}
    >>> evaluate_nsfl_numpy(parse('"a" AND NOT "b"'), sims).round(4)  # 0.6 − (0.5/0.5)·(0.55 − 0.6)
    array([0.65, 0.51])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.engine.operators import Algebra, NumpyAlgebra, OperatorFamily, SqlAlgebra
from pglogic.engine.strategy import Score, Strategy
from pglogic.errors import QueryError
from pglogic.query import And, Match, Node, Not, Or, Term, terms, to_text
from pglogic.query.ast import flatten

__all__ = [
    "EPSILON",
    "NSFL",
    "NSFL_RERANK",
    "LayeredSql",
    "NsflAlgebra",
    "NumpyNsfl",
    "SqlValue",
    "evaluate_nsfl",
    "evaluate_nsfl_numpy",
    "fused_text",
    "monolithic",
    "nsfl_score",
    "nsfl_texts",
    "positives_first",
    "scored_texts",
]

T = TypeVar("T")
FloatArray = npt.NDArray[np.float64]

EPSILON = 1e-6
"""ε of the pool normalisation ``S̃ = S / (max S + ε)``."""


class NsflAlgebra(Algebra[T], Protocol[T]):
    """An :class:`~pglogic.engine.operators.Algebra` with what NSFL's rules need besides arithmetic."""

    def where_lt(self, pairs: Sequence[tuple[T, T]], then: T, otherwise: T) -> T:
        """``then`` where ``a < b`` for every pair ``(a, b)``, else ``otherwise``."""
        ...

    def pool_max(self, x: T) -> T:
        """The maximum of ``x`` over the pool (every document being ranked)."""
        ...

    def bind(self, x: T) -> T:
        """Mark ``x`` as a node's score (SQL: a column of its own layer; NumPy: ``x``)."""
        ...


class NumpyNsfl(NumpyAlgebra):
    """The NumPy face: arrays over documents; the array is the pool.

    Example:
        >>> alg = NumpyNsfl()
        >>> alg.where_lt([(np.array([1.0, 3.0]), np.array([2.0, 2.0]))], alg.const(1.0),
        ...              alg.const(0.0))
        array([1., 0.])
        >>> alg.pool_max(np.array([0.2, 0.7]))
        array([0.7, 0.7])
    """

    def where_lt(
        self,
        pairs: Sequence[tuple[FloatArray, FloatArray]],
        then: FloatArray,
        otherwise: FloatArray,
    ) -> FloatArray:
        """Elementwise choice."""
        mask = np.logical_and.reduce([np.asarray(a) < np.asarray(b) for a, b in pairs])
        return np.asarray(np.where(mask, then, otherwise), dtype=np.float64)

    def pool_max(self, x: FloatArray) -> FloatArray:
        """``max(x)`` broadcast over the documents."""
        arr = np.asarray(x, dtype=np.float64)
        return arr if arr.size == 0 else np.full_like(arr, arr.max())

    def bind(self, x: FloatArray) -> FloatArray:
        """Identity."""
        return x


@dataclass(frozen=True)
class SqlValue:
    """A SQL expression and the layer of the newest column it reads (0: the ``sims`` rows)."""

    expr: sql.Composable
    level: int
    column: bool = False


_SQL = SqlAlgebra()


@dataclass
class LayeredSql:
    """The SQL face: builds the score in layers of columns (see :meth:`ctes`).

    Example:
        >>> alg = LayeredSql()
        >>> s = alg.bind(alg.sub(alg.leaf("s0"), alg.pool_max(alg.leaf("s1"))))
        >>> print(alg.ctes("sims")[0].as_string(None))
        "l1" AS (SELECT *, ("s0" - max("s1") OVER ()) AS "n0" FROM "sims")
    """

    layers: list[list[tuple[str, sql.Composable]]] = field(default_factory=list)

    def leaf(self, column: str) -> SqlValue:
        """A similarity column of the ``sims`` rows."""
        return SqlValue(sql.Identifier(column), 0, True)

    @staticmethod
    def _level(xs: Sequence[SqlValue]) -> int:
        return max((x.level for x in xs), default=0)

    def const(self, value: float) -> SqlValue:
        """A constant."""
        return SqlValue(_SQL.const(value), 0)

    def add(self, xs: Sequence[SqlValue]) -> SqlValue:
        """``(a + b + ...)``."""
        return SqlValue(_SQL.add([x.expr for x in xs]), self._level(xs))

    def mul(self, xs: Sequence[SqlValue]) -> SqlValue:
        """``(a * b * ...)``."""
        return SqlValue(_SQL.mul([x.expr for x in xs]), self._level(xs))

    def sub(self, a: SqlValue, b: SqlValue) -> SqlValue:
        """``(a - b)``."""
        return SqlValue(_SQL.sub(a.expr, b.expr), self._level([a, b]))

    def div(self, a: SqlValue, b: SqlValue) -> SqlValue:
        """``(a / b)``."""
        return SqlValue(_SQL.div(a.expr, b.expr), self._level([a, b]))

    def least(self, xs: Sequence[SqlValue]) -> SqlValue:
        """``LEAST(...)``."""
        return SqlValue(_SQL.least([x.expr for x in xs]), self._level(xs))

    def greatest(self, xs: Sequence[SqlValue]) -> SqlValue:
        """``GREATEST(...)``."""
        return SqlValue(_SQL.greatest([x.expr for x in xs]), self._level(xs))

    def exp(self, x: SqlValue) -> SqlValue:
        """``exp(x)``."""
        return SqlValue(_SQL.exp(x.expr), x.level)

    def power(self, x: SqlValue, exponent: float) -> SqlValue:
        """``power(x, exponent)``."""
        return SqlValue(_SQL.power(x.expr, exponent), x.level)

    def where_lt(self, pairs: Sequence[tuple[SqlValue, SqlValue]], then: SqlValue,
                 otherwise: SqlValue) -> SqlValue:  # fmt: skip
        """``CASE WHEN a < b AND ... THEN then ELSE otherwise END``."""
        cond = sql.SQL(" AND ").join(sql.SQL("{} < {}").format(a.expr, b.expr) for a, b in pairs)
        expr = sql.SQL("CASE WHEN {} THEN {} ELSE {} END").format(cond, then.expr, otherwise.expr)
        values = [v for pair in pairs for v in pair] + [then, otherwise]
        return SqlValue(expr, self._level(values))

    def pool_max(self, x: SqlValue) -> SqlValue:
        """``max(column) OVER ()``: ``x`` is bound to a column first, so windows never nest."""
        col = self.bind(x)
        return SqlValue(sql.SQL("max({}) OVER ()").format(col.expr), col.level)

    def bind(self, x: SqlValue) -> SqlValue:
        """Give ``x`` a column ``n<i>`` in the layer after the newest column it reads."""
        if x.column:
            return x
        layer = x.level + 1
        while len(self.layers) < layer:
            self.layers.append([])
        name = f"n{sum(len(cols) for cols in self.layers)}"
        self.layers[layer - 1].append((name, x.expr))
        return SqlValue(sql.Identifier(name), layer, True)

    def ctes(self, source: str) -> list[sql.Composable]:
        """One CTE per layer, ``l1`` reading ``source``, ``l2`` reading ``l1``...

        The last one (:meth:`last`) holds every column; an empty list when nothing was bound.
        """
        out: list[sql.Composable] = []
        prev = source
        for i, cols in enumerate(self.layers, start=1):
            name = f"l{i}"
            select = sql.SQL(", ").join(
                sql.SQL("{} AS {}").format(expr, sql.Identifier(col)) for col, expr in cols
            )
            out.append(
                sql.SQL("{} AS (SELECT *, {} FROM {})").format(
                    sql.Identifier(name), select, sql.Identifier(prev)
                )
            )
            prev = name
        return out

    def last(self, source: str) -> str:
        """The name of the relation that has every column (``source`` when there is no layer)."""
        return f"l{len(self.layers)}" if self.layers else source


def positives_first(node: Node) -> Node:
    """``node`` with every AND's negated operands moved after its positive ones (in order).

    Example:
        >>> from pglogic.query import parse
        >>> str(positives_first(parse('NOT "b" AND "a" OR "c"')))
        '"a" AND NOT "b" OR "c"'
    """
    if isinstance(node, Term | Match):
        return node
    if isinstance(node, Not):
        return Not(positives_first(node.child))
    children = [positives_first(c) for c in flatten(node)]
    if isinstance(node, Or):
        return Or(tuple(children))
    ordered = [c for c in children if not isinstance(c, Not)]
    return And(tuple(ordered + [c for c in children if isinstance(c, Not)]))


def fused_text(node: Node) -> str:
    """The fused query of a node: its formula as one string, positives first
    (:func:`pglogic.query.to_text` of :func:`positives_first`).

    Example:
        >>> from pglogic.query import parse
        >>> fused_text(parse('NOT "wheat" AND "grain"'))
        'grain but not wheat'
    """
    return to_text(positives_first(node))


def evaluate_nsfl(
    tree: Node, leaf: Callable[[str], T], alg: NsflAlgebra[T], question: str | None = None
) -> T:
    """Score ``tree`` with NSFL's rules in any algebra; ``leaf(text)`` is the similarity to a
    term's or a fused text's embedding. ``question`` is the monolithic question (default: the
    root's fused text).

    Example:
        >>> from pglogic.query import parse
        >>> sims = {"a": 0.1, "b": 0.2, "a or b": 0.05, "q": 0.4}
        >>> float(evaluate_nsfl(parse('"a" OR "b"'), lambda t: np.float64(sims[t]), NumpyNsfl(),
        ...                     question="q"))  # noise floor: min(S_AB, S_M)
        0.05
    """
    one = alg.const(1.0)

    def fused(node: Node) -> T:
        return leaf(fused_text(node))

    def tilde(x: T) -> T:
        return alg.div(x, alg.add([alg.pool_max(x), alg.const(EPSILON)]))

    def walk(node: Node, root: bool) -> T:
        if isinstance(node, Term):
            return leaf(node.text)
        if isinstance(node, Match):
            raise QueryError(f"NSFL scores no lexical term ({node})")
        if isinstance(node, Not):
            return alg.bind(alg.sub(one, tilde(walk(node.child, False))))
        children = flatten(node)
        if isinstance(node, Or):
            s = [walk(c, False) for c in children]
            f = fused(node)
            m = leaf(question or fused_text(node)) if root else f
            return alg.bind(
                alg.where_lt([(f, si) for si in s], alg.least([f, m]), alg.greatest([*s, f, m]))
            )
        positives = [c for c in children if not isinstance(c, Not)]
        negations = [c.child for c in children if isinstance(c, Not)]
        if not positives:
            return alg.bind(alg.least([alg.sub(one, tilde(walk(n, False))) for n in negations]))
        if len(positives) == 1:
            score, f = walk(positives[0], False), fused(positives[0])
        else:
            parts = [walk(p, False) for p in positives]
            f = fused(And(tuple(positives)))
            weak = alg.sub(alg.mul([alg.const(2.0), f]), alg.greatest(parts))
            score = alg.where_lt([(alg.add(parts), f)], f, weak)
        prefix: list[Node] = list(positives)
        for neg in negations:
            s_n = walk(neg, False)
            prefix.append(Not(neg))
            f_j = fused(And(tuple(prefix)))
            smoothed = alg.sub(score, alg.mul([tilde(s_n), alg.sub(f_j, f)]))
            score = alg.where_lt([(f_j, f), (f_j, s_n)], f_j, smoothed)
            f = f_j
        return alg.bind(score)

    return walk(tree, True)


def scored_texts(tree: Node, question: str | None = None) -> list[str]:
    """Every text NSFL scores a document against: the terms (in :func:`terms` order), then the
    fused texts and the monolithic question (``question``, else the root's fused text; its
    HNSW scan generates the candidates of the NSFL modes), each once.

    Example:
        >>> from pglogic.query import parse
        >>> scored_texts(parse('"a" AND "b" AND NOT "c"'))
        ['a', 'b', 'c', 'a and b', 'a and b but not c']
        >>> scored_texts(parse('"a" OR "b"'), question="a or else b")
        ['a', 'b', 'a or b', 'a or else b']
        >>> scored_texts(parse('"a" AND "b"'), question="both a and b")
        ['a', 'b', 'a and b', 'both a and b']
    """
    seen: dict[str, None] = dict.fromkeys(terms(tree))

    def leaf(text: str) -> FloatArray:
        seen.setdefault(text)
        return np.zeros(1)

    evaluate_nsfl(tree, leaf, NumpyNsfl(), question)
    seen.setdefault(question or fused_text(tree))
    return list(seen)


def evaluate_nsfl_numpy(
    tree: Node, sims: Mapping[str, npt.ArrayLike], question: str | None = None
) -> FloatArray:
    """NSFL scores of documents (the pool): ``sims[text]`` has one similarity per document for
    every text of :func:`scored_texts`. ``KeyError`` names a missing text.

    Example:
        >>> from pglogic.query import parse
        >>> sims = {"a": [0.3, 0.1], "b": [0.2, 0.3], "a and b": [0.6, 0.2]}
        >>> evaluate_nsfl_numpy(parse('"a" AND "b"'), sims).round(4)  # trigger; 2·S_AB − max
        array([0.6, 0.1])
    """

    def leaf(text: str) -> FloatArray:
        if text not in sims:
            raise KeyError(f"No similarities given for {text!r}")
        return np.asarray(sims[text], dtype=np.float64)

    return np.asarray(evaluate_nsfl(tree, leaf, NumpyNsfl(), question), dtype=np.float64)


def monolithic(tree: Node, question: str | None) -> str:
    """The NSFL modes' monolithic question, whose scan finds their candidates: ``question``,
    else the formula's fused text.

    Example:
        >>> from pglogic.query import parse
        >>> monolithic(parse('"a" AND NOT "b"'), None), monolithic(parse('"a"'), "q")
        ('a but not b', 'q')
    """
    return question or fused_text(tree)


def nsfl_texts(tree: Node, question: str | None, phrases: Sequence[str]) -> list[str]:
    """The strategy's scored texts: :func:`scored_texts` (NSFL has no AND texts).

    Example:
        >>> from pglogic.query import parse
        >>> nsfl_texts(parse('"a" OR "b"'), None, [])
        ['a', 'b', 'a or b']
    """
    return scored_texts(tree, question)


def nsfl_score(
    tree: Node,
    index: Mapping[str, int],
    lexical: Mapping[str, int],
    family: OperatorFamily,
    truth: str,
    question: str | None,
) -> Score:
    """NSFL's score in layers of CTEs over ``sims`` (:class:`LayeredSql`), the columns
    ``s{i}`` of the texts of :func:`scored_texts`.

    Example:
        >>> from pglogic.engine.operators import resolve_family
        >>> from pglogic.query import parse
        >>> index = {t: i for i, t in enumerate(scored_texts(parse('"a" AND "b"')))}
        >>> score, layers, rel = nsfl_score(parse('"a" AND "b"'), index, {},
        ...                                 resolve_family("product"), "clamp", None)
        >>> len(layers) > 0, rel != "sims"
        (True, True)
    """
    alg = LayeredSql()
    score = evaluate_nsfl(tree, lambda t: alg.leaf(f"s{index[t]}"), alg, question).expr
    return score, alg.ctes("sims"), alg.last("sims")


NSFL = Strategy(
    mode="nsfl", texts=nsfl_texts, score=nsfl_score, needs_positive=False, question=monolithic
)
"""Mode ``nsfl``: NSFL's score; candidates from the terms', the question's and the guide's scans."""
NSFL_RERANK = Strategy(
    mode="nsfl-rerank", texts=nsfl_texts, score=nsfl_score, needs_positive=False, guided=False,
    rerank=True, question=monolithic,
)  # fmt: skip
"""Mode ``nsfl-rerank``: NSFL's score over the top K of the question's scan alone."""
