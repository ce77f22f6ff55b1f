"""NOT against its context (pglogic.engine.negation): which terms move, and where to."""

from __future__ import annotations

import numpy as np
import pytest

from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.guide import guide_vector
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, contexts, projected, with_context
from pglogic.engine.source import Corpus
from pglogic.errors import InvalidInput
from pglogic.query import parse

SAMPLE = Corpus(1, "news", "corpus_1", "m", 4, "cosine", "embedding", None, None)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('"grain" AND NOT "wheat"', {"wheat": ("grain",)}),
        ('"grain" AND "corn" AND NOT "wheat" AND NOT "rice"',
         {"wheat": ("grain", "corn"), "rice": ("grain", "corn")}),
        ('"a" OR NOT "b" AND "c"', {"b": ("c",)}),
        ('NOT "b" AND NOT "c"', {}),  # no positive term beside them
        ('"a" OR NOT "b"', {}),  # under an OR: no context
        ('"a" AND NOT ("b" OR "c")', {}),  # not a term
        ('"a" AND NOT NOT "b" AND NOT "c"', {"c": ("a",)}),  # NOT NOT "b" is no term
        ('"a" AND NOT "a"', {}),  # also positive: one column, kept
        ('("a" AND NOT "x") OR ("c" AND NOT "x" AND "a")', {"x": ("a", "c")}),
        ('"a" AND ("b" OR "c") AND NOT "d"', {"d": ("a",)}),  # the OR is not a term
        ('match:wheat AND "a" AND NOT "d"', {"d": ("a",)}),  # lexical terms are not
        ('"a" AND NOT match:wheat', {}),
    ],
)  # fmt: skip
def test_contexts(query: str, expected: dict[str, tuple[str, ...]]) -> None:
    assert contexts(parse(query)) == expected


def test_projected_removes_lambda_of_the_span() -> None:
    rng = np.random.default_rng(0)
    a, c, b = rng.normal(size=(3, 16))
    full = projected(b, [a, c], 1.0)
    assert full.dtype == np.float32
    assert abs(float(full @ a)) < 1e-5 and abs(float(full @ c)) < 1e-5
    assert float(np.linalg.norm(full)) == pytest.approx(1.0, abs=1e-6)
    # λ: the component in the span shrinks to 1 - λ of b's, the rest is kept
    q, _ = np.linalg.qr(np.stack([a, c]).T)
    inside, outside = q @ (q.T @ b), b - q @ (q.T @ b)
    half = projected(b, [a, c], 0.5)
    expected = (0.5 * inside + outside) / np.linalg.norm(0.5 * inside + outside)
    assert np.allclose(half, expected, atol=1e-6)
    assert np.allclose(projected(b, [a, c], 0.0), b / np.linalg.norm(b), atol=1e-6)


def test_projected_skips_dependent_context_and_keeps_a_term_inside_the_span() -> None:
    a, b = np.array([1.0, 0.0, 0.0]), np.array([0.6, 0.8, 0.0])
    assert np.allclose(projected(b, [a, 2 * a], 1.0), [0.0, 1.0, 0.0])  # 2a adds nothing
    inside = np.array([3.0, 0.0, 0.0])
    assert np.array_equal(projected(inside, [a], 1.0), inside.astype(np.float32))
    assert np.array_equal(projected(b, [], 1.0), b.astype(np.float32))


def test_with_context_moves_negated_terms_with_a_context_only() -> None:
    v = {"a": [1.0, 0.0, 0.0], "b": [0.6, 0.8, 0.0], "c": [0.0, 0.6, 0.8]}
    tree = parse('"a" AND NOT "b" OR NOT "c"')
    out = with_context(tree, v, 1.0)
    assert out["a"] is v["a"] and out["c"] is v["c"]
    assert np.allclose(out["b"], [0.0, 1.0, 0.0])
    assert with_context(tree, v, 0.0) == v
    # a context term without a vector: left as it is (the caller reports the missing vector)
    assert with_context(tree, {"b": v["b"]}, 1.0) == {"b": v["b"]}


def test_compiled_query_binds_the_projected_vector_in_fuzzy_mode_only() -> None:
    vectors = {"a": np.array([1.0, 0, 0, 0]), "b": np.array([0.6, 0.8, 0, 0])}
    tree = parse('"a" AND NOT "b"')
    default = compile_query(tree, SAMPLE)
    assert default.not_context == DEFAULT_NOT_CONTEXT
    bound = default.with_vectors(vectors)
    b = bound[f"v{default.terms.index('b')}"]
    assert np.allclose(b, projected(vectors["b"], [vectors["a"]], DEFAULT_NOT_CONTEXT))
    # the guide is computed from the vectors the statement scores
    assert np.allclose(bound["vg"], compile_query(tree, SAMPLE).guide_vector(vectors), atol=0)
    scored = with_context(tree, vectors, DEFAULT_NOT_CONTEXT)  # independently of the class
    assert np.array_equal(bound["vg"], guide_vector(tree, scored, default.family, default.truth))
    assert not np.allclose(bound["vg"], guide_vector(tree, vectors, default.family, default.truth))
    off = compile_query(tree, SAMPLE, SearchOptions(not_context=0))
    assert np.array_equal(off.with_vectors(vectors)[f"v{off.terms.index('b')}"],
                          vectors["b"].astype(np.float32))  # fmt: skip
    assert not np.allclose(off.with_vectors(vectors)["vg"], bound["vg"])
    sqo = compile_query(tree, SAMPLE, SearchOptions(mode="sqo-rerank"))
    assert sqo.not_context == 0.0


@pytest.mark.parametrize("bad", [-0.1, 1.01, float("nan"), True, "0.5", None])
def test_bad_not_context_is_refused(bad: object) -> None:
    with pytest.raises(InvalidInput, match=r"Invalid not_context=.*a number from 0"):
        compile_query(parse('"a" AND NOT "b"'), SAMPLE, SearchOptions(not_context=bad))  # type: ignore[arg-type]


def test_cli_takes_not_context_and_refuses_it_out_of_range() -> None:
    from tests.conftest import cli_in_process

    bad = cli_in_process("compile", '"a" AND NOT "b"', "--not-context", "2")
    assert bad.returncode == 2 and "--not-context" in bad.stderr and "0<=x<=1" in bad.stderr
    ok = cli_in_process("compile", '"a" AND NOT "b"', "--not-context", "0")
    assert ok.returncode == 0, ok.stderr
    assert "--not-context" in cli_in_process("search", "--help").stdout
