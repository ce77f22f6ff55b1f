"""NSFL operators (pglogic.engine.nsfl) against hand-computed values: the paper's six templates, each
branch of each trigger, and pglogic's generalisation to any tree. Pure: no database (the SQL face
runs in tests/test_modes.py)."""

from __future__ import annotations

import re

import pytest

from pglogic.engine.nsfl import (
    EPSILON,
    LayeredSql,
    evaluate_nsfl,
    evaluate_nsfl_numpy,
    scored_texts,
)
from pglogic.query import parse


def nsfl(query: str, sims: dict[str, list[float]], question: str | None = None) -> list[float]:
    return [float(x) for x in evaluate_nsfl_numpy(parse(query), sims, question)]


# -- the paper's six templates, both branches of each trigger -----------------------------------


def test_and_reinforcement_trigger_and_its_else_branch() -> None:
    # doc 0: S_AB = 0.7 > S_A + S_B = 0.5 -> S_AB; doc 1: 2·0.4 − max(0.3, 0.35) = 0.45
    sims = {"a": [0.2, 0.3], "b": [0.3, 0.35], "a and b": [0.7, 0.4]}
    assert nsfl('"a" AND "b"', sims) == pytest.approx([0.7, 0.45])


def test_and_not_departure_trigger_and_smoothed_not() -> None:
    # pool max of S_B = 0.5. doc 0: S_AB = 0.1 < S_A = 0.6 and < S_B = 0.2 -> S_AB.
    # doc 1: S_A − S̃_B·(S_AB − S_A) = 0.4 − (0.5/0.5)·(0.45 − 0.4) = 0.35
    # doc 2: 0.5 − (0.25/0.5)·(0.3 − 0.5) = 0.6
    sims = {"a": [0.6, 0.4, 0.5], "b": [0.2, 0.5, 0.25], "a but not b": [0.1, 0.45, 0.3]}
    got = nsfl('"a" AND NOT "b"', sims)
    m = 0.5 + EPSILON
    assert got == pytest.approx([0.1, 0.4 - (0.5 / m) * 0.05, 0.5 + (0.25 / m) * 0.2])


def test_or_noise_floor_and_max_with_the_question() -> None:
    # doc 0: S_AB = 0.1 below both atoms -> min(S_AB, S_M) = min(0.1, 0.3) = 0.1
    # doc 1: S_AB = 0.1 below both, S_M = 0.05 -> 0.05
    # doc 2: S_AB = 0.4 not below S_B = 0.5 -> max(0.2, 0.5, 0.4, 0.6) = 0.6
    sims = {
        "a": [0.2, 0.3, 0.2],
        "b": [0.4, 0.2, 0.5],
        "a or b": [0.1, 0.1, 0.4],
        "q": [0.3, 0.05, 0.6],
    }
    assert nsfl('"a" OR "b"', sims, question="q") == pytest.approx([0.1, 0.05, 0.6])


def test_or_without_a_question_uses_the_fused_text_as_monolithic() -> None:
    sims = {"a": [0.2, 0.3], "b": [0.4, 0.2], "a or b": [0.1, 0.35]}
    # doc 0: noise floor min(0.1, 0.1); doc 1: max(0.3, 0.2, 0.35, 0.35)
    assert nsfl('"a" OR "b"', sims) == pytest.approx([0.1, 0.35])


def test_three_atom_and() -> None:
    # doc 0: S_ABC = 0.9 > 0.2 + 0.3 + 0.1 -> 0.9; doc 1: 2·0.5 − max(0.3, 0.4, 0.2) = 0.6
    sims = {"a": [0.2, 0.3], "b": [0.3, 0.4], "c": [0.1, 0.2], "a and b and c": [0.9, 0.5]}
    assert nsfl('"a" AND "b" AND "c"', sims) == pytest.approx([0.9, 0.6])


def test_three_atom_and_not() -> None:
    # S_A∧B (the A ∧ B row): doc 0 2·0.5 − 0.4 = 0.6; doc 1: S_AB = 0.9 > 0.3 + 0.3 -> 0.9.
    # then S_A∧B − S̃_C·(S_ABC − S_AB), pool max of S_C = 0.4:
    # doc 0: 0.6 − (0.4/0.4)·(0.55 − 0.5) = 0.55; doc 1: 0.9 − (0.2/0.4)·(0.8 − 0.9) = 0.95
    sims = {
        "a": [0.4, 0.3],
        "b": [0.3, 0.3],
        "c": [0.4, 0.2],
        "a and b": [0.5, 0.9],
        "a and b but not c": [0.55, 0.8],
    }
    m = 0.4 + EPSILON
    expected = [0.6 - (0.4 / m) * 0.05, 0.9 + (0.2 / m) * 0.1]
    assert nsfl('"a" AND "b" AND NOT "c"', sims) == pytest.approx(expected)


def test_three_atom_or() -> None:
    sims = {
        "a": [0.2, 0.3],
        "b": [0.4, 0.1],
        "c": [0.3, 0.2],
        "a or b or c": [0.1, 0.25],
        "q": [0.15, 0.5],
    }
    # doc 0: 0.1 below all three -> min(0.1, 0.15); doc 1: not below a -> max(..., 0.5)
    assert nsfl('"a" OR "b" OR "c"', sims, question="q") == pytest.approx([0.1, 0.5])


# -- the generalisation ---------------------------------------------------------------------------


def test_two_negations_fold_in_order() -> None:
    # A ∧ ¬B ∧ ¬C: F0 = S_A; F1 = "a but not b"; F2 = "a but not b and not c"
    sims = {
        "a": [0.5, 0.5],
        "b": [0.2, 0.4],
        "c": [0.3, 0.1],
        "a but not b": [0.6, 0.55],
        "a but not b and not c": [0.62, 0.5],
    }
    mb, mc = 0.4 + EPSILON, 0.3 + EPSILON
    s1 = [0.5 - (0.2 / mb) * 0.1, 0.5 - (0.4 / mb) * 0.05]
    s2 = [s1[0] - (0.3 / mc) * 0.02, s1[1] - (0.1 / mc) * (0.5 - 0.55)]
    assert nsfl('"a" AND NOT "b" AND NOT "c"', sims) == pytest.approx(s2)


def test_negation_order_does_not_matter_for_which_is_positive() -> None:
    sims = {"a": [0.6, 0.4], "b": [0.2, 0.5], "a but not b": [0.5, 0.45]}
    assert nsfl('NOT "b" AND "a"', sims) == nsfl('"a" AND NOT "b"', sims)


def test_composite_positive_operand_uses_its_fused_text() -> None:
    # (A ∨ B) ∧ ¬C: S0 = S(A ∨ B), F0 = F("a or b"), F1 = "(a or b) but not c"
    sims = {
        "a": [0.3, 0.2],
        "b": [0.1, 0.4],
        "a or b": [0.35, 0.3],
        "c": [0.5, 0.25],
        "(a or b) but not c": [0.4, 0.28],
    }
    s_or = [0.35, 0.4]  # doc 0: max(0.3, 0.1, 0.35, 0.35); doc 1: max(0.2, 0.4, 0.3, 0.3)
    m = 0.5 + EPSILON
    expected = [s_or[0] - (0.5 / m) * (0.4 - 0.35), s_or[1] - (0.25 / m) * (0.28 - 0.3)]
    assert nsfl('("a" OR "b") AND NOT "c"', sims) == pytest.approx(expected)


def test_not_outside_an_and_is_the_smoothed_complement() -> None:
    sims = {"b": [0.2, 0.4]}
    m = 0.4 + EPSILON
    assert nsfl('NOT "b"', sims) == pytest.approx([1 - 0.2 / m, 1 - 0.4 / m])
    # ¬A ∧ ¬B: min of the smoothed complements
    sims2 = {"a": [0.1, 0.5], "b": [0.4, 0.2]}
    ma, mb = 0.5 + EPSILON, 0.4 + EPSILON
    expected = [min(1 - 0.1 / ma, 1 - 0.4 / mb), min(1 - 0.5 / ma, 1 - 0.2 / mb)]
    assert nsfl('NOT "a" AND NOT "b"', sims2) == pytest.approx(expected)


def test_nested_or_uses_its_own_fused_text_as_monolithic() -> None:
    # "a" AND ("b" OR "c") with a question: the inner OR must not see the question
    sims = {
        "a": [0.5],
        "b": [0.2],
        "c": [0.3],
        "b or c": [0.1],
        "a and (b or c)": [0.4],
        "q": [0.9],
    }
    inner = min(0.1, 0.1)  # noise floor with M = its own fused text, not the question's 0.9
    expected = 2 * 0.4 - max(0.5, inner)
    assert nsfl('"a" AND ("b" OR "c")', sims, question="q") == pytest.approx([expected])


def test_scored_texts_are_terms_then_fused_texts_each_once() -> None:
    tree = parse('("a" OR "b") AND NOT "c" AND "a"')
    assert scored_texts(tree) == [
        "a",
        "b",
        "c",
        "a or b",
        "(a or b) and a",
        "(a or b) and a but not c",
    ]
    assert scored_texts(parse('"x"')) == ["x"]
    assert scored_texts(parse('"a" OR "b"'), "a or b") == ["a", "b", "a or b"]


def test_missing_text_is_named() -> None:
    with pytest.raises(KeyError, match="a but not b"):
        evaluate_nsfl_numpy(parse('"a" AND NOT "b"'), {"a": [0.1], "b": [0.2]})


# -- the SQL face -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        '"a" AND NOT "b"',
        '"a" AND NOT ("b" AND NOT "c")',
        'NOT (NOT "a" OR "b") AND "c"',
        '("a" OR NOT "b") AND NOT ("c" OR "d" AND NOT "e")',
    ],
)
def test_sql_windows_never_nest_and_read_columns(query: str) -> None:
    tree = parse(query)
    texts = scored_texts(tree)
    alg = LayeredSql()
    root = evaluate_nsfl(tree, lambda t: alg.leaf(f"s{texts.index(t)}"), alg)
    ctes = [c.as_string(None) for c in alg.ctes("sims")]
    for cte in ctes:
        # every window is max(<one column>) OVER ()
        for arg in re.findall(r"max\((.*?)\) OVER \(\)", cte):
            assert re.fullmatch(r'"[sn]\d+"', arg), arg
    # each layer reads only columns defined before it
    defined = {f"s{i}" for i in range(len(texts))}
    for cte in ctes:
        body, new = cte.split(" FROM ")[0], re.findall(r'AS "(n\d+)"', cte)
        used = set(re.findall(r'"([sn]\d+)"', body)) - set(new)
        assert used <= defined, (used - defined, cte)
        defined |= set(new)
    assert root.column and root.expr.as_string(None).strip('"') in defined
