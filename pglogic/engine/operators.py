"""Fuzzy operator families, each operator defined once with a SQL face and a NumPy face.

An operator is a small generic function written against an :class:`Algebra` (constants, ``+``,
``*``, ``-``, ``/``, ``LEAST``, ``GREATEST``). Two algebras interpret the same definition:

* :class:`SqlAlgebra` builds a ``psycopg.sql.Composable`` (double precision expression) from child
  expressions; constants are rendered from Python floats, never from user data;
* :class:`NumpyAlgebra` computes float64 arrays elementwise over documents (the reference face,
  used by tests and by exact evaluation).

So the SQL and the NumPy results cannot drift apart:

    >>> from psycopg import sql
    >>> OR_OPS["probsum"].sql([sql.Identifier("s1"), sql.Identifier("s2")]).as_string(None)
    '(1.0 - ((1.0 - "s1") * (1.0 - "s2")))'
    >>> OR_OPS["probsum"].numpy([np.array([0.5]), np.array([0.5])])
    array([0.75])

Operators (n-ary ones take two or more children; all are associative, so flattening nested
ANDs/ORs never changes a score):

=========  ===============  ===================================================
kind       name             formula
=========  ===============  ===================================================
AND        ``product``      x·y·…            (default; ITLR's default)
AND        ``sum``          x+y+…
AND        ``min``          min(x, y, …)     (Gödel t-norm)
AND        ``lukasiewicz``  max(0, Σx − (n−1))
OR         ``sum``          x+y+…            (ITLR's default)
OR         ``max``          max(x, y, …)     (default; Gödel t-conorm)
OR         ``probsum``      1 − Π(1−x)       (probabilistic sum)
OR         ``lukasiewicz``  min(1, Σx)
NOT        ``complement``   1 − x            (default)
NOT        ``reciprocal``   1 / max(x, 1e-6)
=========  ===============  ===================================================

``reciprocal`` guards against division by zero: truth values below ``1e-6`` count as ``1e-6``, so
``NOT`` of a term with truth 0 scores ``1e6`` instead of failing (SQL:
``1.0 / GREATEST(x, 1e-06)``). Families using ``sum`` or ``reciprocal`` produce scores above 1:
a score is a ranking value, not a probability.

Score semantics: from similarity to truth
-----------------------------------------
Cosine similarity lies in [−1, 1] but fuzzy operators expect truth values in [0, 1]; a raw
negative similarity would flip the sign of a product (two "unrelated" terms would multiply into a
*positive* score). Every term's similarity therefore goes through a truth map (:data:`TRUTH_MAPS`)
before any operator sees it:

* ``clamp`` (default): ``max(0, min(1, s))``. With sentence embeddings such as all-MiniLM-L6-v2,
  unrelated texts score around 0 and negative similarity only ever means "not about this at all",
  so clamping loses no ranking information that matters and keeps products sign-stable;
* ``affine``: ``(s + 1) / 2``, a bijection of [−1, 1] onto [0, 1] that keeps the order among
  negative similarities too (but lifts unrelated documents to truth ≈ 0.5).

Both maps are monotone increasing, so ``NOT`` stays monotone decreasing in the similarity and
every term under an even number of NOTs can only raise a score.

Families
--------
An :class:`OperatorFamily` picks one AND, one OR and one NOT. :data:`PRESETS` names the common
ones and :func:`resolve_family` turns a user's spec into a family:

    >>> resolve_family("godel").and_.name
    'min'
    >>> resolve_family("and=min,not=reciprocal").name
    'and=min,or=max,not=reciprocal'
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.engine import defaults
from pglogic.errors import ConfigError, QueryError
from pglogic.query.ast import And, Match, Node, Not, Or, Term

__all__ = [
    "AND_OPS",
    "NOT_OPS",
    "OR_OPS",
    "PRESETS",
    "RECIPROCAL_FLOOR",
    "TRUTH_MAPS",
    "Algebra",
    "AndOp",
    "NaryOp",
    "NotOp",
    "NumpyAlgebra",
    "OperatorFamily",
    "OrOp",
    "SqlAlgebra",
    "TruthMap",
    "UnaryOp",
    "evaluate",
    "evaluate_numpy",
    "itlr_combinations",
    "resolve_family",
    "resolve_truth",
    "to_sql",
]

T = TypeVar("T")
FloatArray = npt.NDArray[np.float64]

RECIPROCAL_FLOOR = 1e-6
"""Truth values below this count as this much for the ``reciprocal`` NOT (no division by zero)."""


# -- algebras -----------------------------------------------------------------------------------


class Algebra(Protocol[T]):
    """The primitive operations an operator definition may use, over some value type ``T``.

    Example:
        >>> alg = NumpyAlgebra()
        >>> alg.sub(alg.const(1.0), np.array([0.25, 1.0]))
        array([0.75, 0.  ])
    """

    def const(self, value: float) -> T:
        """A constant (an internal number such as 1.0, never user data)."""
        ...

    def add(self, xs: Sequence[T]) -> T:
        """Sum of one or more values."""
        ...

    def mul(self, xs: Sequence[T]) -> T:
        """Product of one or more values."""
        ...

    def sub(self, a: T, b: T) -> T:
        """Difference ``a - b``."""
        ...

    def div(self, a: T, b: T) -> T:
        """Quotient ``a / b``."""
        ...

    def least(self, xs: Sequence[T]) -> T:
        """Smallest of one or more values."""
        ...

    def greatest(self, xs: Sequence[T]) -> T:
        """Largest of one or more values."""
        ...

    def exp(self, x: T) -> T:
        """``e ** x``."""
        ...

    def power(self, x: T, exponent: float) -> T:
        """``x ** exponent`` for ``x >= 0`` (an internal constant exponent)."""
        ...


def _nonempty(xs: Sequence[T]) -> Sequence[T]:
    if not xs:
        raise ValueError("An operator needs at least one operand")
    return xs


def _const_text(value: float) -> str:
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"SQL constants must be finite, got {value!r}")
    return repr(value)


class SqlAlgebra:
    """Builds double precision SQL expressions with :mod:`psycopg.sql`; every operation is
    parenthesized, so the result can be embedded anywhere.

    Example:
        >>> alg = SqlAlgebra()
        >>> x, y = sql.Identifier("x"), sql.Identifier("y")
        >>> alg.least([alg.const(1.0), alg.add([x, y])]).as_string(None)
        'LEAST(1.0, ("x" + "y"))'
    """

    def const(self, value: float) -> sql.Composable:
        """Render an internal constant as SQL text (``1.0``, ``1e-06``)."""
        return sql.SQL(_const_text(value))

    def _infix(self, op: str, xs: Sequence[sql.Composable]) -> sql.Composable:
        xs = _nonempty(xs)
        if len(xs) == 1:
            return xs[0]
        return sql.Composed([sql.SQL("("), sql.SQL(f" {op} ").join(xs), sql.SQL(")")])

    def _call(self, func: str, xs: Sequence[sql.Composable]) -> sql.Composable:
        xs = _nonempty(xs)
        if len(xs) == 1:
            return xs[0]
        return sql.Composed([sql.SQL(f"{func}("), sql.SQL(", ").join(xs), sql.SQL(")")])

    def add(self, xs: Sequence[sql.Composable]) -> sql.Composable:
        """``(a + b + ...)``."""
        return self._infix("+", xs)

    def mul(self, xs: Sequence[sql.Composable]) -> sql.Composable:
        """``(a * b * ...)``."""
        return self._infix("*", xs)

    def sub(self, a: sql.Composable, b: sql.Composable) -> sql.Composable:
        """``(a - b)``."""
        return self._infix("-", [a, b])

    def div(self, a: sql.Composable, b: sql.Composable) -> sql.Composable:
        """``(a / b)``."""
        return self._infix("/", [a, b])

    def least(self, xs: Sequence[sql.Composable]) -> sql.Composable:
        """``LEAST(a, b, ...)``."""
        return self._call("LEAST", xs)

    def greatest(self, xs: Sequence[sql.Composable]) -> sql.Composable:
        """``GREATEST(a, b, ...)``."""
        return self._call("GREATEST", xs)

    def exp(self, x: sql.Composable) -> sql.Composable:
        """``exp(x)``."""
        return sql.Composed([sql.SQL("exp("), x, sql.SQL(")")])

    def power(self, x: sql.Composable, exponent: float) -> sql.Composable:
        """``power(x, exponent)``."""
        return sql.Composed(
            [sql.SQL("power("), x, sql.SQL(", "), self.const(exponent), sql.SQL(")")]
        )


def _as_array(value: object) -> FloatArray:
    return np.asarray(value, dtype=np.float64)


class NumpyAlgebra:
    """Elementwise float64 arithmetic with broadcasting (constants are 0-d arrays).

    Example:
        >>> NumpyAlgebra().greatest([np.array([0.2, 0.9]), np.array([0.5, 0.1])])
        array([0.5, 0.9])
    """

    def const(self, value: float) -> FloatArray:
        """A 0-d float64 array."""
        return _as_array(float(value))

    def add(self, xs: Sequence[FloatArray]) -> FloatArray:
        """Elementwise sum, left to right."""
        return _as_array(functools.reduce(np.add, _nonempty(xs)))

    def mul(self, xs: Sequence[FloatArray]) -> FloatArray:
        """Elementwise product, left to right."""
        return _as_array(functools.reduce(np.multiply, _nonempty(xs)))

    def sub(self, a: FloatArray, b: FloatArray) -> FloatArray:
        """Elementwise ``a - b``."""
        return _as_array(np.subtract(a, b))

    def div(self, a: FloatArray, b: FloatArray) -> FloatArray:
        """Elementwise ``a / b``."""
        return _as_array(np.divide(a, b))

    def least(self, xs: Sequence[FloatArray]) -> FloatArray:
        """Elementwise minimum."""
        return _as_array(functools.reduce(np.minimum, _nonempty(xs)))

    def greatest(self, xs: Sequence[FloatArray]) -> FloatArray:
        """Elementwise maximum."""
        return _as_array(functools.reduce(np.maximum, _nonempty(xs)))

    def exp(self, x: FloatArray) -> FloatArray:
        """Elementwise ``e ** x``."""
        return _as_array(np.exp(x))

    def power(self, x: FloatArray, exponent: float) -> FloatArray:
        """Elementwise ``x ** exponent``."""
        return _as_array(np.power(x, exponent))


_SQL = SqlAlgebra()
_NUMPY = NumpyAlgebra()


# -- operators ----------------------------------------------------------------------------------


class NaryDefinition(Protocol):
    """An n-ary operator written once against any :class:`Algebra`."""

    def __call__(self, alg: Algebra[T], xs: Sequence[T], /) -> T:
        """Combine ``xs`` (one or more operands)."""
        ...


class UnaryDefinition(Protocol):
    """A unary operator written once against any :class:`Algebra`."""

    def __call__(self, alg: Algebra[T], x: T, /) -> T:
        """Transform ``x``."""
        ...


@dataclass(frozen=True)
class NaryOp:
    """An n-ary operator with its two faces.

    Example:
        >>> AND_OPS["product"].numpy([np.array([0.5, 1.0]), np.array([0.5, 0.0])])
        array([0.25, 0.  ])
    """

    name: str
    formula: str
    definition: NaryDefinition = field(repr=False)

    def sql(self, children: Sequence[sql.Composable]) -> sql.Composable:
        """SQL face: combine child expressions.

        Example:
            >>> AND_OPS["min"].sql([sql.Identifier("a"), sql.Identifier("b")]).as_string(None)
            'LEAST("a", "b")'
        """
        return self.definition(_SQL, list(children))

    def numpy(self, children: Sequence[npt.ArrayLike]) -> FloatArray:
        """NumPy face: combine arrays elementwise.

        Example:
            >>> OR_OPS["max"].numpy([[0.1, 0.7], [0.4, 0.2]])
            array([0.4, 0.7])
        """
        return self.definition(_NUMPY, [_as_array(c) for c in children])


class AndOp(NaryOp):
    """A conjunction (see :data:`AND_OPS`).

    Example:
        >>> AND_OPS["sum"].formula
        'x+y+…'
    """


class OrOp(NaryOp):
    """A disjunction (see :data:`OR_OPS`).

    Example:
        >>> OR_OPS["sum"].numpy([[0.25], [0.5]])
        array([0.75])
    """


@dataclass(frozen=True)
class UnaryOp:
    """A unary operator with its two faces.

    Example:
        >>> NOT_OPS["complement"].numpy([0.0, 0.25])
        array([1.  , 0.75])
    """

    name: str
    formula: str
    definition: UnaryDefinition = field(repr=False)

    def sql(self, child: sql.Composable) -> sql.Composable:
        """SQL face.

        Example:
            >>> NOT_OPS["reciprocal"].sql(sql.Identifier("s")).as_string(None)
            '(1.0 / GREATEST("s", 1e-06))'
        """
        return self.definition(_SQL, child)

    def numpy(self, child: npt.ArrayLike) -> FloatArray:
        """NumPy face.

        Example:
            >>> NOT_OPS["reciprocal"].numpy([0.0, 0.5])
            array([1.e+06, 2.e+00])
        """
        return self.definition(_NUMPY, _as_array(child))


class NotOp(UnaryOp):
    """A negation (see :data:`NOT_OPS`); monotone decreasing on [0, 1].

    Example:
        >>> NOT_OPS["complement"].formula
        '1 − x'
    """


class TruthMap(UnaryOp):
    """A monotone increasing map from cosine similarity in [−1, 1] to truth in [0, 1].

    Example:
        >>> TRUTH_MAPS["clamp"].numpy([-0.3, 0.4, 1.2])
        array([0. , 0.4, 1. ])
        >>> TRUTH_MAPS["affine"].numpy([-1.0, 0.0, 1.0])
        array([0. , 0.5, 1. ])
    """


def _and_product(alg: Algebra[T], xs: Sequence[T]) -> T:
    return alg.mul(xs)


def _sum(alg: Algebra[T], xs: Sequence[T]) -> T:
    return alg.add(xs)


def _and_min(alg: Algebra[T], xs: Sequence[T]) -> T:
    return alg.least(xs)


def _and_lukasiewicz(alg: Algebra[T], xs: Sequence[T]) -> T:
    return alg.greatest([alg.const(0.0), alg.sub(alg.add(xs), alg.const(len(xs) - 1))])


def _or_max(alg: Algebra[T], xs: Sequence[T]) -> T:
    return alg.greatest(xs)


def _or_probsum(alg: Algebra[T], xs: Sequence[T]) -> T:
    one = alg.const(1.0)
    return alg.sub(one, alg.mul([alg.sub(one, x) for x in xs]))


def _or_lukasiewicz(alg: Algebra[T], xs: Sequence[T]) -> T:
    return alg.least([alg.const(1.0), alg.add(xs)])


def _not_complement(alg: Algebra[T], x: T) -> T:
    return alg.sub(alg.const(1.0), x)


def _not_reciprocal(alg: Algebra[T], x: T) -> T:
    return alg.div(alg.const(1.0), alg.greatest([x, alg.const(RECIPROCAL_FLOOR)]))


#: The largest exponent of the ``complement^G`` NOT.
MAX_NOT_POWER = 100.0


def complement_power(exponent: float) -> NotOp:
    """The NOT ``(1 − x)^G``: the complement raised to ``G`` (``complement^G`` in a family spec).

    G > 1 makes NOT stronger: a document half as close to the negated term as to nothing keeps
    less of its score (``(1 − 0.5)^1.75 ≈ 0.30`` instead of 0.5), while documents far from it
    keep almost all of theirs. ``G = 1`` is ``complement``. The base is floored at 0 (families
    whose OR sums can push a truth above 1), so the power is always defined. SQL face:
    ``power(GREATEST((1.0 - x), 0.0), G)``.

    Example:
        >>> op = complement_power(1.75)
        >>> op.name, [round(float(v), 3) for v in op.numpy([0.0, 0.5, 1.2])]
        ('complement^1.75', [1.0, 0.297, 0.0])
        >>> op.sql(sql.Identifier("s")).as_string(None)
        'power(GREATEST((1.0 - "s"), 0.0), 1.75)'
    """
    g = float(exponent)
    if not (math.isfinite(g) and 0 < g <= MAX_NOT_POWER):
        raise ConfigError(
            f"The exponent of complement^G must be in (0, {MAX_NOT_POWER:g}], got {g}"
        )
    if g == 1.0:
        return NOT_OPS["complement"]

    def definition(alg: Algebra[T], x: T) -> T:
        base = alg.greatest([alg.sub(alg.const(1.0), x), alg.const(0.0)])
        return alg.power(base, g)

    return _PowerNot(f"complement^{g:g}", f"(1 − x)^{g:g}", definition)


class _ByName:
    """Operators made from parameters compare by name (their definitions are closures)."""

    name: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnaryOp) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


class _PowerNot(_ByName, NotOp):
    """A ``complement^G`` NOT (:func:`complement_power`)."""


def _truth_clamp(alg: Algebra[T], s: T) -> T:
    return alg.greatest([alg.const(0.0), alg.least([alg.const(1.0), s])])


def _truth_affine(alg: Algebra[T], s: T) -> T:
    return alg.div(alg.add([s, alg.const(1.0)]), alg.const(2.0))


AND_OPS: dict[str, AndOp] = {
    op.name: op
    for op in (
        AndOp("product", "x·y·…", _and_product),
        AndOp("sum", "x+y+…", _sum),
        AndOp("min", "min(x, y, …)", _and_min),
        AndOp("lukasiewicz", "max(0, Σx − (n−1))", _and_lukasiewicz),
    )
}
"""Conjunctions by name."""

OR_OPS: dict[str, OrOp] = {
    op.name: op
    for op in (
        OrOp("sum", "x+y+…", _sum),
        OrOp("max", "max(x, y, …)", _or_max),
        OrOp("probsum", "1 − Π(1−x)", _or_probsum),
        OrOp("lukasiewicz", "min(1, Σx)", _or_lukasiewicz),
    )
}
"""Disjunctions by name."""

NOT_OPS: dict[str, NotOp] = {
    op.name: op
    for op in (
        NotOp("complement", "1 − x", _not_complement),
        NotOp("reciprocal", "1 / max(x, 1e-6)", _not_reciprocal),
    )
}
"""Negations by name."""

TRUTH_MAPS: dict[str, TruthMap] = {
    op.name: op
    for op in (
        TruthMap("clamp", "max(0, min(1, s))", _truth_clamp),
        TruthMap("affine", "(s + 1) / 2", _truth_affine),
    )
}
"""Similarity-to-truth maps by name; ``clamp`` is the default."""

DEFAULT_TRUTH = defaults.TRUTH

#: exp() arguments are clamped to [−EXP_CAP, EXP_CAP]: Postgres raises on overflow (exp(710) >
#: max double) and on underflow (exp(−746) is below the smallest double).
EXP_CAP = 700.0


def sigmoid_truth(tau: float, lam: float) -> TruthMap:
    """The calibrated truth map σ((s − τ)·λ) of ITLR (see :mod:`pglogic.eval.calibrate` for fits).

    Its name ``sigmoid:TAU:LAMBDA`` is a spec :func:`resolve_truth` (``--truth``) accepts back.
    τ and λ become SQL constants rendered from floats (never text); λ must be positive so the map
    stays increasing (NOT stays decreasing). SQL face:
    ``1 / (1 + exp(LEAST(700, GREATEST(-700, (τ − s)·λ))))``.

    Example:
        >>> m = sigmoid_truth(0.2, 10.0)
        >>> m.name, [round(float(x), 3) for x in m.numpy([0.0, 0.2, 0.6])]
        ('sigmoid:0.2:10.0', [0.119, 0.5, 0.982])
        >>> resolve_truth(m.name) == m
        True
    """
    tau, lam = float(tau), float(lam)
    if not (math.isfinite(tau) and math.isfinite(lam) and lam > 0):
        raise ConfigError(
            f"A sigmoid truth map needs a finite tau and lambda > 0, got {tau}, {lam}"
        )

    def definition(alg: Algebra[T], s: T) -> T:
        one = alg.const(1.0)
        z = alg.mul([alg.sub(alg.const(tau), s), alg.const(lam)])
        z = alg.least([alg.const(EXP_CAP), alg.greatest([alg.const(-EXP_CAP), z])])
        return alg.div(one, alg.add([one, alg.exp(z)]))

    return _SigmoidMap(f"sigmoid:{tau!r}:{lam!r}", f"σ((s − {tau:g})·{lam:g})", definition)


class _SigmoidMap(_ByName, TruthMap):
    """A calibrated truth map (:func:`sigmoid_truth`)."""


# -- families -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OperatorFamily:
    """One AND, one OR and one NOT, with a name that :func:`resolve_family` accepts back.

    Example:
        >>> family = OperatorFamily(AND_OPS["min"], OR_OPS["max"], NOT_OPS["reciprocal"])
        >>> family.name
        'and=min,or=max,not=reciprocal'
        >>> resolve_family(family.name) == family
        True
    """

    and_: AndOp
    or_: OrOp
    not_: NotOp
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.spec)

    @property
    def spec(self) -> str:
        """The explicit ``and=...,or=...,not=...`` spec of this family.

        Example:
            >>> PRESETS["itlr"].spec
            'and=product,or=sum,not=complement'
        """
        return f"and={self.and_.name},or={self.or_.name},not={self.not_.name}"


def _family(and_: str, or_: str, not_: str, name: str = "") -> OperatorFamily:
    return OperatorFamily(AND_OPS[and_], OR_OPS[or_], NOT_OPS[not_], name)


#: The default family's NOT exponent (:data:`pglogic.engine.defaults.NOT_POWER`).
DEFAULT_NOT_POWER = defaults.NOT_POWER

PRESETS: dict[str, OperatorFamily] = {
    "product-max-strong": OperatorFamily(
        AND_OPS["product"], OR_OPS["max"], complement_power(DEFAULT_NOT_POWER), "product-max-strong"
    ),
    "product-max": _family("product", "max", "complement", "product-max"),
    "itlr": _family("product", "sum", "complement", "itlr"),
    "godel": _family("min", "max", "complement", "godel"),
    "lukasiewicz": _family("lukasiewicz", "lukasiewicz", "complement", "lukasiewicz"),
    "product": _family("product", "probsum", "complement", "product"),
}
"""Named families. ``product-max-strong`` (product, max, ``complement^1.25``) is the default:
``product-max`` (product, max, complement), the best family on the three real labelled corpora
(``bench/quality/summary.md``), with a slightly stronger NOT that keeps more of dense
retrieval's traps out of the top 10 without losing nDCG@10 on NOT queries
(``bench/quality/results/frontier.md``; chosen leaving one corpus out). ``itlr``
(product, sum, complement) is ITLR's default, best on their synthetic data (their Table 2); on
real data its sum-OR ranks documents that touch several of the OR's terms a little above documents
that are squarely about one of them, and loses 0.1–0.3 nDCG@10 on OR queries."""

DEFAULT_FAMILY = defaults.OPERATORS

_ITLR_AND = ("product", "sum", "min")
_ITLR_OR = ("sum", "max")
_ITLR_NOT = ("complement", "reciprocal")


def itlr_combinations() -> Iterator[OperatorFamily]:
    """Yield the 12 operator combinations studied by ITLR, named ``itlr[AND,OR,NOT]``.

    Example:
        >>> names = [f.name for f in itlr_combinations()]
        >>> len(names), names[0], names[-1]
        (12, 'itlr[product,sum,complement]', 'itlr[min,max,reciprocal]')
    """
    for and_ in _ITLR_AND:
        for or_ in _ITLR_OR:
            for not_ in _ITLR_NOT:
                yield _family(and_, or_, not_, f"itlr[{and_},{or_},{not_}]")


_KINDS: dict[str, tuple[str, Mapping[str, object]]] = {
    "and": ("AND", AND_OPS),
    "or": ("OR", OR_OPS),
    "not": ("NOT", NOT_OPS),
}


def _usage() -> str:
    return (
        f"use a preset ({', '.join(PRESETS)}) or and=NAME,or=NAME,not=NAME with AND in "
        f"{{{', '.join(AND_OPS)}}}, OR in {{{', '.join(OR_OPS)}}}, NOT in {{{', '.join(NOT_OPS)}, "
        "complement^G}"
    )


_POWER_NOT = re.compile(r"complement\^([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)")


def _not_op(name: str, spec: str) -> NotOp:
    """A NOT by name: a registered one or ``complement^G``."""
    if name in NOT_OPS:
        return NOT_OPS[name]
    power = _POWER_NOT.fullmatch(name)
    if power is None:
        _check_op("not", name, spec)
    assert power is not None
    try:
        return complement_power(float(power.group(1)))
    except ConfigError as exc:
        raise ConfigError(f"{exc} in operator family {spec!r}") from None


def _check_op(kind: str, name: str, spec: str) -> str:
    label, registry = _KINDS[kind]
    if kind == "not" and _POWER_NOT.fullmatch(name):
        return name
    if name not in registry:
        raise ConfigError(
            f"Unknown {label} operator {name!r} in operator family {spec!r}: "
            f"valid {label} operators are {', '.join(registry)}"
            + (", complement^G (G > 0)" if kind == "not" else "")
        )
    return name


def resolve_family(spec: str | OperatorFamily | None = None) -> OperatorFamily:
    """Turn a user's operator-family spec into an :class:`OperatorFamily`.

    Accepted forms (case-insensitive, spaces ignored): ``None`` or ``""`` for the default
    (``product-max-strong``); a preset name from :data:`PRESETS`; ``and=NAME,or=NAME,not=NAME`` with any
    parts left out taken from the default; the positional forms ``itlr[AND,OR,NOT]`` and
    ``itlr:AND/OR/NOT``. A NOT may be ``complement^G`` (:func:`complement_power`). Raises
    :class:`~pglogic.errors.ConfigError` listing the valid names.

    Example:
        >>> resolve_family(None).name, resolve_family(None).spec
        ('product-max-strong', 'and=product,or=max,not=complement^1.25')
        >>> resolve_family("itlr:min/max/reciprocal").name
        'itlr[min,max,reciprocal]'
        >>> resolve_family("and=min,not=complement^2").not_.formula
        '(1 − x)^2'
        >>> resolve_family("fuzzy")
        Traceback (most recent call last):
        ...
        pglogic.errors.ConfigError: Unknown operator family 'fuzzy': use a preset (product-max-strong, \
product-max, itlr, godel, lukasiewicz, product) or and=NAME,or=NAME,not=NAME with AND in {product, sum, \
min, lukasiewicz}, OR in {sum, max, probsum, lukasiewicz}, NOT in {complement, reciprocal, complement^G}
    """
    if isinstance(spec, OperatorFamily):
        return spec
    if spec is None or not spec.strip():
        return PRESETS[DEFAULT_FAMILY]
    text = re.sub(r"\s+", "", spec).lower()
    if text in PRESETS:
        return PRESETS[text]
    positional = re.fullmatch(r"itlr\[([^\]]*)\]", text) or re.fullmatch(r"itlr:(.*)", text)
    if positional:
        parts = re.split(r"[,/]", positional.group(1))
        if len(parts) != 3:
            raise ConfigError(
                f"Expected three operators (AND, OR, NOT) in operator family {spec!r}, "
                f"got {len(parts)}"
            )
        names = [_check_op(kind, name, spec) for kind, name in zip(_KINDS, parts, strict=True)]
        return OperatorFamily(
            AND_OPS[names[0]], OR_OPS[names[1]], _not_op(names[2], spec),
            name=f"itlr[{','.join(names)}]",
        )  # fmt: skip
    if "=" not in text:
        raise ConfigError(f"Unknown operator family {spec!r}: {_usage()}")
    chosen = {"and": "", "or": "", "not": ""}
    for part in text.split(","):
        kind, sep, name = part.partition("=")
        if not sep:
            raise ConfigError(f"Expected KIND=NAME, got {part!r} in operator family {spec!r}")
        if kind not in _KINDS:
            raise ConfigError(
                f"Unknown operator kind {kind!r} in operator family {spec!r}: expected and, or, not"
            )
        if chosen[kind]:
            raise ConfigError(f"Operator kind {kind!r} given twice in operator family {spec!r}")
        chosen[kind] = _check_op(kind, name, spec)
    default = PRESETS[DEFAULT_FAMILY]
    return OperatorFamily(
        AND_OPS[chosen["and"]] if chosen["and"] else default.and_,
        OR_OPS[chosen["or"]] if chosen["or"] else default.or_,
        _not_op(chosen["not"], spec) if chosen["not"] else default.not_,
    )


def resolve_truth(spec: str | TruthMap | None = None) -> TruthMap:
    """Turn a truth-map name into a :class:`TruthMap` (``None`` means ``clamp``).

    Besides the names in :data:`TRUTH_MAPS`, ``sigmoid:TAU:LAMBDA`` is a calibrated map
    (:func:`sigmoid_truth`). ``calibrated`` (the parameters stored for a corpus) needs the
    database: :func:`pglogic.store.calibration_store.resolve_stored_truth` turns it into
    ``sigmoid:TAU:LAMBDA`` first (searches do), so here it is an error.

    Example:
        >>> resolve_truth("affine").formula
        '(s + 1) / 2'
        >>> resolve_truth("sigmoid:0.19:18.8").formula
        'σ((s − 0.19)·18.8)'
        >>> resolve_truth("sigmoid")
        Traceback (most recent call last):
        ...
        pglogic.errors.ConfigError: Unknown truth map 'sigmoid': valid names are clamp, affine, \
or sigmoid:TAU:LAMBDA
        >>> resolve_truth("calibrated")
        Traceback (most recent call last):
        ...
        pglogic.errors.ConfigError: Truth map 'calibrated' uses the parameters stored for a \
corpus: search a corpus with it, or give sigmoid:TAU:LAMBDA
    """
    if isinstance(spec, TruthMap):
        return spec
    name = DEFAULT_TRUTH if spec is None or not spec.strip() else spec.strip().lower()
    if name in TRUTH_MAPS:
        return TRUTH_MAPS[name]
    if name == "calibrated":
        raise ConfigError(
            "Truth map 'calibrated' uses the parameters stored for a corpus: search a corpus "
            "with it, or give sigmoid:TAU:LAMBDA"
        )
    parts = name.split(":")
    if len(parts) == 3 and parts[0] == "sigmoid":
        try:
            tau, lam = float(parts[1]), float(parts[2])
        except ValueError:
            raise ConfigError(
                f"Invalid truth map {spec!r}: expected sigmoid:TAU:LAMBDA with two numbers"
            ) from None
        return sigmoid_truth(tau, lam)
    raise ConfigError(
        f"Unknown truth map {spec!r}: valid names are {', '.join(TRUTH_MAPS)}, or sigmoid:TAU:LAMBDA"
    )


# -- evaluation ---------------------------------------------------------------------------------


def evaluate(
    node: Node,
    leaf: Callable[[str], T],
    alg: Algebra[T],
    family: OperatorFamily,
    truth: TruthMap,
    match: Callable[[str], T] | None = None,
) -> T:
    """Evaluate a query tree in any algebra; ``leaf(text)`` gives a term's raw similarity.

    ``match(text)`` gives a lexical term's (:class:`~pglogic.query.Match`) truth value, already
    in [0, 1]: the truth map is for similarities and does not apply to it. A tree with a lexical
    term and no ``match`` is a :class:`~pglogic.errors.QueryError`.

    :func:`evaluate_numpy` and :func:`to_sql` are this function with the NumPy and SQL algebras.

    Example:
        >>> from pglogic.query import parse
        >>> sims = {"a": 0.5, "b": 0.25}
        >>> float(evaluate(parse('"a" AND NOT "b"'), lambda t: np.float64(sims[t]), NumpyAlgebra(),
        ...                PRESETS["itlr"], TRUTH_MAPS["clamp"]))
        0.375
    """

    def walk(current: Node) -> T:
        if isinstance(current, Term):
            return truth.definition(alg, leaf(current.text))
        if isinstance(current, Match):
            if match is None:
                raise QueryError(
                    f"Lexical term {current} cannot be scored here: it needs the document's words"
                )
            return match(current.text)
        if isinstance(current, Not):
            return family.not_.definition(alg, walk(current.child))
        children = [walk(child) for child in current.children]
        if isinstance(current, And):
            return family.and_.definition(alg, children)
        assert isinstance(current, Or)
        return family.or_.definition(alg, children)

    return walk(node)


def evaluate_numpy(
    node: Node,
    sims: Mapping[str, npt.ArrayLike],
    family: OperatorFamily | str | None = None,
    truth: TruthMap | str | None = DEFAULT_TRUTH,
    matches: Mapping[str, npt.ArrayLike] | None = None,
) -> FloatArray:
    """Score documents exactly: ``sims[text]`` holds one cosine similarity per document.

    ``family`` and ``truth`` accept the same specs as :func:`resolve_family` and
    :func:`resolve_truth`. Raises ``KeyError`` for a term missing from ``sims``. A NaN
    similarity (a zero vector's) counts as 0, as in the compiled SQL.

    Example (the ITLR paper's example with its operators, ``itlr``):
        >>> from pglogic.query import parse
        >>> tree = parse('("dog" OR "cat" AND "mouse") AND NOT "giraffe"')
        >>> sims = {"dog": [0.5, 0.1], "cat": [0.2, 0.9], "mouse": [0.5, 0.8],
        ...         "giraffe": [0.5, -0.3]}
        >>> evaluate_numpy(tree, sims, "itlr")  # (s_dog + s_cat·s_mouse)·(1 − s_giraffe)
        array([0.3 , 0.82])
        >>> evaluate_numpy(tree, sims, "product-max")  # max(s_dog, s_cat·s_mouse)·(1 − s_giraffe)
        array([0.25, 0.72])
        >>> evaluate_numpy(tree, sims).round(4)  # the default: … · (1 − s_giraffe)^1.25
        array([0.2102, 0.72  ])
    """

    def leaf(text: str) -> FloatArray:
        if text not in sims:
            raise KeyError(f"No similarities given for term {text!r}")
        # NaN (the cosine of a zero vector) is similar to nothing, as in the compiled SQL
        return np.nan_to_num(_as_array(sims[text]), nan=0.0)

    def match(text: str) -> FloatArray:
        if matches is None or text not in matches:
            raise KeyError(f"No truth values given for lexical term {text!r}")
        return _as_array(matches[text])

    fam, tm = resolve_family(family), resolve_truth(truth)
    return _as_array(evaluate(node, leaf, _NUMPY, fam, tm, None if matches is None else match))


def to_sql(
    node: Node,
    term_expr: Callable[[str], sql.Composable],
    family: OperatorFamily | str | None = None,
    truth: TruthMap | str | None = DEFAULT_TRUTH,
    match_expr: Callable[[str], sql.Composable] | None = None,
) -> sql.Composable:
    """Build the SQL score expression of a tree; ``term_expr(text)`` is the SQL expression of a
    term's cosine similarity (e.g. a column of a CTE), ``match_expr(text)`` that of a lexical
    term's truth value.

    Example:
        >>> from pglogic.query import parse
        >>> names = {"a": "s1", "b": "s2"}
        >>> expr = to_sql(parse('"a" AND NOT "b"'), lambda t: sql.Identifier(names[t]), "godel")
        >>> expr.as_string(None)
        'LEAST(GREATEST(0.0, LEAST(1.0, "s1")), (1.0 - GREATEST(0.0, LEAST(1.0, "s2"))))'
    """
    fam, tm = resolve_family(family), resolve_truth(truth)
    return evaluate(node, term_expr, _SQL, fam, tm, match_expr)
