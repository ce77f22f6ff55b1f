"""Tests of the fuzzy operators: known values, SQL rendering, SQL-vs-NumPy parity, family specs.

SQL parity is checked here by running the rendered expressions in an in-memory SQLite database
(with GREATEST and LEAST registered as functions), which needs no server; the database tests
repeat the check against PostgreSQL.
"""

from __future__ import annotations

import doctest
import itertools
import sqlite3
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg import sql

import pglogic.engine.operators as ops
from pglogic.engine.operators import (
    AND_OPS,
    NOT_OPS,
    OR_OPS,
    PRESETS,
    TRUTH_MAPS,
    OperatorFamily,
    evaluate_numpy,
    itlr_combinations,
    resolve_family,
    resolve_truth,
    to_sql,
)
from pglogic.errors import ConfigError, PglogicError
from pglogic.query import And, Node, Not, Or, Term, parse

ALL_FAMILIES = [*PRESETS.values(), *itlr_combinations()]
FAMILY_IDS = [f.name for f in ALL_FAMILIES]


def arr(*values: float) -> npt.NDArray[np.float64]:
    return np.array(values, dtype=np.float64)


def ident(text: str) -> sql.Composable:
    return sql.Identifier(text)


def render(expr: sql.Composable) -> str:
    return expr.as_string(None)


# -- known values -------------------------------------------------------------------------------

X, Y, Z = arr(0.5, 0.0, 1.0, 0.9), arr(0.4, 0.7, 1.0, 0.8), arr(0.2, 0.3, 1.0, 0.7)

NARY_CASES = [
    (AND_OPS["product"], [X, Y], [0.2, 0.0, 1.0, 0.72]),
    (AND_OPS["product"], [X, Y, Z], [0.04, 0.0, 1.0, 0.504]),
    (AND_OPS["sum"], [X, Y, Z], [1.1, 1.0, 3.0, 2.4]),
    (AND_OPS["min"], [X, Y, Z], [0.2, 0.0, 1.0, 0.7]),
    (AND_OPS["lukasiewicz"], [X, Y], [0.0, 0.0, 1.0, 0.7]),
    (AND_OPS["lukasiewicz"], [X, Y, Z], [0.0, 0.0, 1.0, 0.4]),
    (OR_OPS["sum"], [X, Y], [0.9, 0.7, 2.0, 1.7]),
    (OR_OPS["max"], [X, Y, Z], [0.5, 0.7, 1.0, 0.9]),
    (OR_OPS["probsum"], [X, Y], [0.7, 0.7, 1.0, 0.98]),
    (OR_OPS["probsum"], [X, Y, Z], [0.76, 0.79, 1.0, 0.994]),
    (OR_OPS["lukasiewicz"], [X, Y], [0.9, 0.7, 1.0, 1.0]),
]


@pytest.mark.parametrize(
    ("op", "operands", "expected"),
    NARY_CASES,
    ids=[f"{type(op).__name__}-{op.name}-{len(xs)}" for op, xs, _ in NARY_CASES],
)
def test_nary_known_values(
    op: ops.NaryOp, operands: list[npt.NDArray[np.float64]], expected: list[float]
) -> None:
    np.testing.assert_allclose(op.numpy(operands), expected, rtol=1e-12, atol=1e-12)


def test_not_known_values() -> None:
    np.testing.assert_allclose(NOT_OPS["complement"].numpy([0.0, 0.25, 1.0]), [1.0, 0.75, 0.0])
    np.testing.assert_allclose(NOT_OPS["reciprocal"].numpy([0.25, 0.5, 1.0]), [4.0, 2.0, 1.0])


def test_reciprocal_guard_at_zero() -> None:
    with np.errstate(all="raise"):  # no division-by-zero warning, no inf
        result = NOT_OPS["reciprocal"].numpy([0.0, 1e-9, 1e-6, 2e-6])
    np.testing.assert_allclose(result, [1e6, 1e6, 1e6, 5e5])
    assert render(NOT_OPS["reciprocal"].sql(ident("x"))) == '(1.0 / GREATEST("x", 1e-06))'
    # a negative similarity is clamped to 0 first, then guarded
    score = evaluate_numpy(Not(Term("a")), {"a": [-0.4]}, "itlr:product/sum/reciprocal")
    np.testing.assert_allclose(score, [1e6])


def test_truth_maps() -> None:
    sims = arr(-1.0, -0.3, 0.0, 0.4, 1.0, 1.2)
    np.testing.assert_allclose(TRUTH_MAPS["clamp"].numpy(sims), [0, 0, 0, 0.4, 1, 1])
    np.testing.assert_allclose(TRUTH_MAPS["affine"].numpy(sims), [0, 0.35, 0.5, 0.7, 1, 1.1])
    assert render(TRUTH_MAPS["clamp"].sql(ident("s"))) == 'GREATEST(0.0, LEAST(1.0, "s"))'
    assert render(TRUTH_MAPS["affine"].sql(ident("s"))) == '(("s" + 1.0) / 2.0)'


@settings(deadline=None)
@given(
    st.lists(st.floats(-1, 1), min_size=2, max_size=20),
    st.sampled_from(sorted(TRUTH_MAPS)),
    st.sampled_from(sorted(NOT_OPS)),
)
def test_truth_is_monotone_and_not_stays_decreasing(
    sims: list[float], truth: str, neg: str
) -> None:
    s = np.sort(np.array(sims))
    t = TRUTH_MAPS[truth].numpy(s)
    assert np.all(np.diff(t) >= 0)
    assert np.all((t >= 0) & (t <= 1))
    assert np.all(np.diff(NOT_OPS[neg].numpy(t)) <= 0)


def test_clamp_keeps_products_sign_stable() -> None:
    tree = parse('"a" AND "b"')
    sims = {"a": arr(-0.5, 0.5), "b": arr(-0.5, 0.5)}
    np.testing.assert_allclose(evaluate_numpy(tree, sims), [0.0, 0.25])  # raw would give 0.25 twice
    np.testing.assert_allclose(evaluate_numpy(tree, sims, truth="affine"), [0.0625, 0.5625])


@settings(deadline=None)
@given(st.lists(st.floats(0, 1), min_size=3, max_size=3))
def test_nary_operators_are_associative(values: list[float]) -> None:
    """Flattening nested ANDs/ORs in the parser must not change any score."""
    a, b, c = (arr(v) for v in values)
    for op in [*AND_OPS.values(), *OR_OPS.values()]:
        flat = op.numpy([a, b, c])
        np.testing.assert_allclose(op.numpy([op.numpy([a, b]), c]), flat, atol=1e-12)
        np.testing.assert_allclose(op.numpy([a, op.numpy([b, c])]), flat, atol=1e-12)


def test_single_and_empty_operands() -> None:
    for op in [*AND_OPS.values(), *OR_OPS.values()]:
        np.testing.assert_allclose(op.numpy([X]), X)
        with pytest.raises(ValueError):
            op.numpy([])
        with pytest.raises(ValueError):
            op.sql([])


# -- SQL rendering ------------------------------------------------------------------------------

SQL_RENDERINGS = {
    ("and", "product"): '("a" * "b" * "c")',
    ("and", "sum"): '("a" + "b" + "c")',
    ("and", "min"): 'LEAST("a", "b", "c")',
    ("and", "lukasiewicz"): 'GREATEST(0.0, (("a" + "b" + "c") - 2.0))',
    ("or", "sum"): '("a" + "b" + "c")',
    ("or", "max"): 'GREATEST("a", "b", "c")',
    ("or", "probsum"): '(1.0 - ((1.0 - "a") * (1.0 - "b") * (1.0 - "c")))',
    ("or", "lukasiewicz"): 'LEAST(1.0, ("a" + "b" + "c"))',
}


@pytest.mark.parametrize(("key", "expected"), SQL_RENDERINGS.items(), ids=map(str, SQL_RENDERINGS))
def test_sql_renderings(key: tuple[str, str], expected: str) -> None:
    kind, name = key
    registry: Mapping[str, ops.NaryOp] = AND_OPS if kind == "and" else OR_OPS
    assert render(registry[name].sql([ident("a"), ident("b"), ident("c")])) == expected
    assert render(NOT_OPS["complement"].sql(ident("a"))) == '(1.0 - "a")'


def test_paper_example_sql_and_value() -> None:
    tree = parse('("dog" OR "cat" AND "mouse") AND NOT "giraffe"')
    expr = to_sql(tree, lambda t: ident(f"s_{t}"), "itlr", truth=TRUTH_MAPS["clamp"])

    def c(column: str) -> str:
        return f'GREATEST(0.0, LEAST(1.0, "{column}"))'

    assert render(expr) == (
        f"(({c('s_dog')} + ({c('s_cat')} * {c('s_mouse')})) * (1.0 - {c('s_giraffe')}))"
    )
    sims = {"dog": arr(0.6, 0.0), "cat": arr(0.5, 0.9), "mouse": arr(0.4, 0.9)}
    sims["giraffe"] = arr(0.5, 0.1)
    expected = (sims["dog"] + sims["cat"] * sims["mouse"]) * (1 - sims["giraffe"])
    np.testing.assert_allclose(evaluate_numpy(tree, sims, "itlr"), expected)
    np.testing.assert_allclose(expected, [0.4, 0.729])
    # product-max: OR is the larger of its operands
    pm = np.maximum(sims["dog"], sims["cat"] * sims["mouse"]) * (1 - sims["giraffe"])
    np.testing.assert_allclose(evaluate_numpy(tree, sims, "product-max"), pm)
    # the default, product-max-strong: the same with NOT (1 - x)^1.25
    default = np.maximum(sims["dog"], sims["cat"] * sims["mouse"]) * (1 - sims["giraffe"]) ** 1.25
    np.testing.assert_allclose(evaluate_numpy(tree, sims), default)


def test_sql_never_contains_term_text() -> None:
    evil = "x'); DROP TABLE documents; --"
    tree = And((Term(evil), Not(Term("ok"))))
    names = {evil: "s1", "ok": "s2"}
    for family in ALL_FAMILIES:
        text = render(to_sql(tree, lambda t: ident(names[t]), family))
        assert "DROP" not in text
        assert '"s1"' in text and '"s2"' in text


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=FAMILY_IDS)
def test_family_sql_uses_expected_functions(family: OperatorFamily) -> None:
    tree = parse('("a" OR "b") AND NOT "c" AND "d"')
    text = render(to_sql(tree, ident, family))
    assert text.count("GREATEST(0.0, LEAST(1.0, ") == 4  # every term goes through the truth map
    operators = text.replace("GREATEST(0.0, LEAST(1.0, ", "")
    uses_least = family.and_.name == "min" or family.or_.name == "lukasiewicz"
    assert ("LEAST(" in operators) == uses_least
    assert ("1e-06" in text) == (family.not_.name == "reciprocal")


# -- SQL vs NumPy parity (SQLite stands in for PostgreSQL) --------------------------------------

TERMS = ["a", "b", "c", "d"]
RNG = np.random.default_rng(20250317)
SIMS: dict[str, npt.NDArray[np.float64]] = {
    t: np.concatenate([RNG.uniform(-1, 1, 40), arr(0.0, 1.0, -1.0, 1e-7)]) for t in TERMS
}


def sqlite_eval(
    expr: sql.Composable, sims: Mapping[str, npt.NDArray[np.float64]]
) -> npt.NDArray[np.float64]:
    con = sqlite3.connect(":memory:")
    try:
        con.create_function("GREATEST", -1, lambda *xs: max(xs), deterministic=True)
        con.create_function("LEAST", -1, lambda *xs: min(xs), deterministic=True)
        names = list(sims)
        cols = ", ".join(f'"{n}" REAL' for n in names)
        con.execute(f"CREATE TABLE d (i INTEGER PRIMARY KEY, {cols})")
        rows = zip(*(map(float, sims[n]) for n in names), strict=True)
        marks = ", ".join("?" for _ in names)
        con.executemany(f"INSERT INTO d VALUES (NULL, {marks})", rows)
        result = con.execute(f"SELECT {render(expr)} FROM d ORDER BY i").fetchall()
    finally:
        con.close()
    return np.array([r[0] for r in result], dtype=np.float64)


PARITY_QUERIES = [
    '"a"',
    '"a" AND "b"',
    '"a" AND "b" AND "c"',
    '"a" OR "b" OR "c"',
    '("a" OR "b" AND "c") AND NOT "d"',
    'NOT ("a" OR "b") OR NOT NOT "c" AND "d"',
    '("a" AND NOT "b") OR ("c" AND NOT "d") OR NOT ("a" AND "d")',
]


@pytest.mark.parametrize("truth", sorted(TRUTH_MAPS))
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=FAMILY_IDS)
def test_sql_face_matches_numpy_face(family: OperatorFamily, truth: str) -> None:
    for query in PARITY_QUERIES:
        tree = parse(query)
        expected = evaluate_numpy(tree, SIMS, family, truth)
        actual = sqlite_eval(to_sql(tree, ident, family, truth), SIMS)
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12, err_msg=query)


def _extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    lists = st.lists(children, min_size=2, max_size=3).map(tuple)
    return st.one_of(children.map(Not), lists.map(And), lists.map(Or))


trees = st.recursive(st.sampled_from(TERMS).map(Term), _extend, max_leaves=8)


@settings(deadline=None, max_examples=60)
@given(trees, st.sampled_from(ALL_FAMILIES), st.sampled_from(sorted(TRUTH_MAPS)))
def test_sql_numpy_parity_on_random_trees(tree: Node, family: OperatorFamily, truth: str) -> None:
    expected = evaluate_numpy(tree, SIMS, family, truth)
    actual = sqlite_eval(to_sql(tree, ident, family, truth), SIMS)
    np.testing.assert_allclose(actual, expected, rtol=1e-9, atol=1e-9)


# -- semantics every family must respect --------------------------------------------------------


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=FAMILY_IDS)
def test_and_not_pushes_down_documents_matching_the_excluded_term(family: OperatorFamily) -> None:
    tree = parse('"a" AND NOT "b"')
    # doc 0 is about a and b; doc 1 is about a only
    score = evaluate_numpy(tree, {"a": arr(0.8, 0.8), "b": arr(0.8, 0.1)}, family)
    if family.and_.name == "min" and family.not_.name == "reciprocal":
        # 1/x >= 1 for any truth x, so min(a, 1/b) == a: NOT is inert in this combination
        np.testing.assert_allclose(score, [0.8, 0.8])
    else:
        assert score[1] > score[0]


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=FAMILY_IDS)
def test_or_and_and_rank_as_expected(family: OperatorFamily) -> None:
    sims = {"a": arr(0.9, 0.0, 0.9, 0.0), "b": arr(0.0, 0.9, 0.9, 0.0)}
    either = evaluate_numpy(parse('"a" OR "b"'), sims, family)
    assert min(either[0], either[1], either[2]) > either[3]
    both = evaluate_numpy(parse('"a" AND "b"'), sims, family)
    assert both[2] > max(both[0], both[1]) or family.and_.name == "sum"
    assert both[2] > both[3]


def test_paper_example_with_godel_and_lukasiewicz() -> None:
    tree = parse('("dog" OR "cat" AND "mouse") AND NOT "giraffe"')
    sims = {"dog": arr(0.6), "cat": arr(0.5), "mouse": arr(0.4), "giraffe": arr(0.5)}
    np.testing.assert_allclose(evaluate_numpy(tree, sims, "godel"), [0.5])  # min(max(.6,.4),.5)
    np.testing.assert_allclose(evaluate_numpy(tree, sims, "lukasiewicz"), [0.1])  # .6+.5-1
    np.testing.assert_allclose(evaluate_numpy(tree, sims, "product"), [0.34])  # (1-.4*.8)*.5


def test_evaluate_numpy_missing_term() -> None:
    with pytest.raises(KeyError, match="No similarities given for term 'b'"):
        evaluate_numpy(parse('"a" AND "b"'), {"a": [0.5]})


# -- family specs -------------------------------------------------------------------------------


def test_presets() -> None:
    def parts(f: OperatorFamily) -> tuple[str, str, str]:
        return (f.and_.name, f.or_.name, f.not_.name)

    assert parts(PRESETS["product-max-strong"]) == ("product", "max", "complement^1.25")
    assert parts(PRESETS["product-max"]) == ("product", "max", "complement")
    assert parts(PRESETS["itlr"]) == ("product", "sum", "complement")
    assert parts(PRESETS["godel"]) == ("min", "max", "complement")
    assert parts(PRESETS["lukasiewicz"]) == ("lukasiewicz", "lukasiewicz", "complement")
    assert parts(PRESETS["product"]) == ("product", "probsum", "complement")
    assert resolve_family(None) is PRESETS["product-max-strong"]
    assert resolve_family("") is PRESETS["product-max-strong"]
    assert resolve_family(" Godel ") is PRESETS["godel"]
    assert resolve_family(PRESETS["product"]) is PRESETS["product"]


def test_itlr_combinations() -> None:
    combos = list(itlr_combinations())
    assert len(combos) == 12
    got = {(f.and_.name, f.or_.name, f.not_.name) for f in combos}
    want = set(
        itertools.product(["product", "sum", "min"], ["sum", "max"], ["complement", "reciprocal"])
    )
    assert got == want
    assert combos[0].name == "itlr[product,sum,complement]"


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=FAMILY_IDS)
def test_family_names_resolve_back(family: OperatorFamily) -> None:
    assert resolve_family(family.name) == family
    same = resolve_family(family.spec)
    assert (same.and_, same.or_, same.not_) == (family.and_, family.or_, family.not_)


@pytest.mark.parametrize(
    ("spec", "parts"),
    [
        ("and=min,or=max,not=reciprocal", ("min", "max", "reciprocal")),
        ("and=min", ("min", "max", "complement^1.25")),
        ("not=reciprocal", ("product", "max", "reciprocal")),
        (" OR = probsum , AND = lukasiewicz ", ("lukasiewicz", "probsum", "complement^1.25")),
        ("not=complement^2.5", ("product", "max", "complement^2.5")),
        ("not=complement^1", ("product", "max", "complement")),
        ("itlr:min/max/complement^3", ("min", "max", "complement^3")),
        ("itlr:min/max/complement", ("min", "max", "complement")),
        ("itlr[sum, max, reciprocal]", ("sum", "max", "reciprocal")),
    ],
)
def test_resolve_family_specs(spec: str, parts: tuple[str, str, str]) -> None:
    family = resolve_family(spec)
    assert (family.and_.name, family.or_.name, family.not_.name) == parts


USAGE = (
    "use a preset (product-max-strong, product-max, itlr, godel, lukasiewicz, product) or "
    "and=NAME,or=NAME,not=NAME with AND in {product, sum, min, lukasiewicz}, "
    "OR in {sum, max, probsum, lukasiewicz}, NOT in {complement, reciprocal, complement^G}"
)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fuzzy", f"Unknown operator family 'fuzzy': {USAGE}"),
        (
            "and=avg",
            "Unknown AND operator 'avg' in operator family 'and=avg': "
            "valid AND operators are product, sum, min, lukasiewicz",
        ),
        (
            "or=min",
            "Unknown OR operator 'min' in operator family 'or=min': "
            "valid OR operators are sum, max, probsum, lukasiewicz",
        ),
        (
            "and=min,not=negate",
            "Unknown NOT operator 'negate' in operator family 'and=min,not=negate': "
            "valid NOT operators are complement, reciprocal, complement^G (G > 0)",
        ),
        (
            "not=complement^0",
            "The exponent of complement^G must be in (0, 100], got 0.0 in operator family "
            "'not=complement^0'",
        ),
        (
            "not=complement^-1",
            "Unknown NOT operator 'complement^-1' in operator family 'not=complement^-1': "
            "valid NOT operators are complement, reciprocal, complement^G (G > 0)",
        ),
        (
            "xor=max",
            "Unknown operator kind 'xor' in operator family 'xor=max': expected and, or, not",
        ),
        ("and=min,and=product", "Operator kind 'and' given twice in operator family "
                                "'and=min,and=product'"),
        ("and=min,max", "Expected KIND=NAME, got 'max' in operator family 'and=min,max'"),
        (
            "itlr[min,max]",
            "Expected three operators (AND, OR, NOT) in operator family 'itlr[min,max]', got 2",
        ),
    ],
)  # fmt: skip
def test_bad_family_specs(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_family(spec)
    assert str(info.value) == message
    assert isinstance(info.value, PglogicError)


def test_resolve_truth() -> None:
    assert resolve_truth(None) is TRUTH_MAPS["clamp"]
    assert resolve_truth("Affine") is TRUTH_MAPS["affine"]
    with pytest.raises(
        ConfigError,
        match=r"^Unknown truth map 'sigmoid': valid names are clamp, affine, or sigmoid:TAU:LAMBDA$",
    ):
        resolve_truth("sigmoid")


def test_sigmoid_truth_map() -> None:
    m = resolve_truth("sigmoid:0.25:8")
    s = np.array([-1.0, 0.0, 0.25, 0.5, 1.0, 200.0, -200.0])
    want = 1 / (1 + np.exp(np.minimum(700.0, -(s - 0.25) * 8)))  # exp capped like the SQL
    np.testing.assert_allclose(m.numpy(s), want, rtol=1e-12)
    assert m.numpy([0.25])[0] == 0.5
    assert np.all(np.diff(m.numpy(np.linspace(-1, 1, 50))) > 0)  # increasing: NOT decreases
    assert render(m.sql(ident("s"))) == (
        '(1.0 / (1.0 + exp(LEAST(700.0, GREATEST(-700.0, ((0.25 - "s") * 8.0))))))'
    )
    assert resolve_truth(m.name) == m
    for bad, message in [
        ("sigmoid:0.2:-1", "A sigmoid truth map needs a finite tau and lambda > 0, got 0.2, -1.0"),
        (
            "sigmoid:x:1",
            "Invalid truth map 'sigmoid:x:1': expected sigmoid:TAU:LAMBDA with two numbers",
        ),
        ("sigmoid:0.2:inf", "A sigmoid truth map needs a finite tau and lambda > 0, got 0.2, inf"),
    ]:
        with pytest.raises(ConfigError) as info:
            resolve_truth(bad)
        assert str(info.value) == message


def test_doctests() -> None:
    result = doctest.testmod(ops)
    assert result.failed == 0
    assert result.attempted > 20


def test_public_api_has_docstrings_with_examples() -> None:
    for name in ops.__all__:
        obj = getattr(ops, name)
        if callable(obj):
            assert obj.__doc__ and ">>>" in obj.__doc__, name
