"""Tests of the query language: golden file, exact error texts, spans, helpers, properties."""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pglogic.errors import PglogicError
from pglogic.query import (
    And,
    Node,
    Not,
    Or,
    QuerySyntaxError,
    Term,
    negated_only_terms,
    parse,
    positive_terms,
    quote_term,
    terms,
    to_string,
)
from pglogic.query.lexer import TokenKind, tokenize

GOLDEN = Path(__file__).parent / "golden" / "parse.txt"

# -- golden file --------------------------------------------------------------------------------


def load_golden(path: Path) -> list[tuple[int, str, str]]:
    """Read ``(line number, query, expected)`` cases; the format is described in the file."""
    cases: list[tuple[int, str, str]] = []
    block: list[str] = []
    start = 0
    lines = path.read_text(encoding="utf-8").split("\n")
    for lineno, line in enumerate([*lines, ""], start=1):
        if not line.strip():
            if block:
                marker = next((i for i, b in enumerate(block) if b.startswith("=> ")), None)
                if marker is None or marker == 0:
                    raise ValueError(f"{path}:{start}: a case needs query lines, then '=> '")
                expected = "\n".join([block[marker][3:], *block[marker + 1 :]])
                cases.append((start, "\n".join(block[:marker]), expected))
                block = []
            continue
        if not block:
            if line.startswith("#"):
                continue
            start = lineno
        block.append(line)
    return cases


def run_case(query: str) -> str:
    """The golden output for one query: canonical print, or ``ERROR: message``."""
    try:
        return to_string(parse(query))
    except QuerySyntaxError as err:
        return f"ERROR: {err}"


GOLDEN_CASES = load_golden(GOLDEN)


def test_golden_file_has_enough_cases() -> None:
    assert len(GOLDEN_CASES) >= 40
    assert sum(expected.startswith("ERROR: ") for _, _, expected in GOLDEN_CASES) >= 20


@pytest.mark.parametrize(
    ("query", "expected"),
    [(q, e) for _, q, e in GOLDEN_CASES],
    ids=[f"line{n}" for n, _, _ in GOLDEN_CASES],
)
def test_golden(query: str, expected: str) -> None:
    assert run_case(query) == expected
    if not expected.startswith("ERROR: "):
        # the canonical form is a fixed point and means the same tree
        assert run_case(expected) == expected
        assert parse(expected) == parse(query)


# -- exact error texts --------------------------------------------------------------------------

ERRORS = [
    ('"a" AND NOT', "Expected a quoted term after NOT at col 9", 9),
    ('"a" AND "b" OR "unterminated', 'Missing closing " for term starting at col 16', 16),
    ("'oops", "Missing closing ' for term starting at col 1", 1),
    ('"a" AND ("b" OR "c")) OR "d"', "Unbalanced ) at col 21", 21),
    ('("a" AND "b"', "Expected ) to close ( at col 1", 1),
    ('"a" OR ""', "Empty term at col 8", 8),
    ('"a" AND " \n\t "', "Empty term at col 9", 9),
    ('"a" AND', "Expected a quoted term after AND at col 5", 5),
    ('"a" OR', "Expected a quoted term after OR at col 5", 5),
    ('"a" OR AND "b"', "Expected a quoted term after OR at col 8", 8),
    ('"a" "b"', "Expected AND, OR or end of query at col 5", 5),
    ('"a" AND foo', "Unexpected word 'foo' at col 9: terms must be quoted", 9),
    ("", "Empty query", 1),
    ("  \n\t ", "Empty query", 1),
    ('"a" & "b"', "Unexpected character '&' at col 5", 5),
    ('"a" AND \x00', "Unexpected character '\\x00' at col 9", 9),
    (" OR ".join(['"t"'] * 40), "Too many terms: 40 (limit is 32) at col 225", 225),
    ("(" * 10_000, "Parentheses nested too deeply at col 101", 101),
    ("NOT " * 10_000 + '"x"', "NOTs nested too deeply at col 401", 401),
]


@pytest.mark.parametrize(("query", "message", "column"), ERRORS)
def test_error_messages(query: str, message: str, column: int) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(query)
    assert str(info.value) == message
    assert info.value.message == message
    assert info.value.column == column
    assert info.value.query == query
    assert isinstance(info.value, PglogicError)


def test_error_pretty_shows_caret_under_column() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse('"a" AND\n"b" OR')
    assert info.value.pretty() == (
        'Expected a quoted term after OR at col 13\n  "a" AND "b" OR\n              ^'
    )


@pytest.mark.parametrize(
    ("query", "line", "caret"),
    [
        # the caret counts display columns: a CJK character or an emoji takes two
        ('"日本語" AND NOT "日本語', '"日本語" AND NOT "日本語', 17),
        ('"😀😀" AND (', '"😀😀" AND (', 11),
        # a tab is shown as one space, under which the caret counts it
        ('"a"\tAND\t\tNOT "b" AND (', '"a" AND  NOT "b" AND (', 21),
    ],
)
def test_the_caret_sits_under_the_column_for_wide_characters_and_tabs(
    query: str, line: str, caret: int
) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(query)
    _, shown, marker = info.value.pretty().split("\n")
    assert shown == "  " + line
    assert marker == "  " + " " * caret + "^"


def test_a_long_query_shows_the_part_around_the_error() -> None:
    """Not the whole query and 100,000 spaces before the caret."""
    query = '"' + "x" * 100_000 + '" AND ('
    with pytest.raises(QuerySyntaxError) as info:
        parse(query)
    _, shown, marker = info.value.pretty().split("\n")
    assert len(shown) < 200 and shown.startswith("  …x") and shown.endswith('x" AND (')
    assert len(marker) == len(shown)  # under the "(" that lacks its term
    assert info.value.column == len(query)


def test_too_many_terms_counts_occurrences_and_custom_limit() -> None:
    assert parse(" AND ".join(['"same"'] * 32)) == And(tuple([Term("same")] * 32))
    with pytest.raises(QuerySyntaxError, match=r"^Too many terms: 33 \(limit is 32\) at col 353$"):
        parse(" AND ".join(['"same"'] * 33))
    assert parse('"a" OR "b"', max_terms=2) == Or((Term("a"), Term("b")))
    with pytest.raises(QuerySyntaxError, match=r"^Too many terms: 3 \(limit is 2\) at col 17$"):
        parse('"a" OR "b" OR (("c"))', max_terms=2)


def test_syntax_error_wins_over_term_limit() -> None:
    with pytest.raises(QuerySyntaxError, match=r"^Expected a quoted term after OR"):
        parse('"a" OR "b" OR', max_terms=1)


def test_nesting_limit() -> None:
    deep = "(" * 100 + '"a"' + ")" * 100
    assert parse(deep) == Term("a")
    nots = "NOT " * 100 + '"a"'
    tree = parse(nots)
    depth = 0
    while isinstance(tree, Not):
        tree, depth = tree.child, depth + 1
    assert depth == 100
    assert parse('(("a"))', max_depth=2) == Term("a")
    with pytest.raises(QuerySyntaxError, match=r"^Parentheses nested too deeply at col 3$"):
        parse('((("a")))', max_depth=2)
    with pytest.raises(QuerySyntaxError, match=r"^NOTs nested too deeply at col 6$"):
        parse('(NOT NOT "a")', max_depth=2)
    with pytest.raises(ValueError):
        parse('"a"', max_terms=0)


@pytest.mark.parametrize(
    "query",
    ["(" * 10_000 + '"a"' + ")" * 10_000, "(NOT " * 5_000 + '"a"', "NOT (" * 5_000, ")" * 10_000],
)
def test_deep_inputs_raise_syntax_error_not_recursion_error(query: str) -> None:
    with pytest.raises(QuerySyntaxError):
        parse(query)


# -- trees --------------------------------------------------------------------------------------

A, B, C, D = Term("a"), Term("b"), Term("c"), Term("d")


@pytest.mark.parametrize(
    ("query", "tree"),
    [
        ('"a" AND "b" AND "c"', And((A, B, C))),
        ('("a" AND "b") AND "c"', And((A, B, C))),
        ('"a" AND ("b" AND "c")', And((A, B, C))),
        ('"a" OR "b" AND "c"', Or((A, And((B, C))))),
        ('("a" OR "b") AND "c"', And((Or((A, B)), C))),
        ('NOT "a" AND "b"', And((Not(A), B))),
        ('NOT ("a" AND "b")', Not(And((A, B)))),
        ('NOT NOT "a"', Not(Not(A))),
        ('"a" or "b" AND not "c" OR "d"', Or((A, And((B, Not(C))), D))),
        ("' a ' aNd \"b\"", And((A, B))),
    ],
)
def test_tree_shapes(query: str, tree: Node) -> None:
    assert parse(query) == tree


def test_spans_are_source_offsets_and_ignored_by_equality() -> None:
    query = '("a" OR "b") AND NOT "c"'
    tree = parse(query)
    assert isinstance(tree, And)
    assert tree.span == (0, len(query))
    first, second = tree.children
    assert isinstance(first, Or) and isinstance(second, Not)
    assert first.span == (0, 12)
    assert [c.span for c in first.children] == [(1, 4), (8, 11)]
    assert second.span == (17, 24)
    assert second.child.span == (21, 24)
    assert tree == And((Or((A, B)), Not(C)))
    assert hash(tree) == hash(And((Or((A, B)), Not(C))))
    assert "span" not in repr(tree)


def test_node_constructors_check_invariants() -> None:
    with pytest.raises(ValueError, match="at least two children"):
        And((A,))
    with pytest.raises(ValueError, match="at least two children"):
        Or(())
    with pytest.raises(ValueError, match="non-blank"):
        Term("   ")
    with pytest.raises(ValueError, match="surrounding spaces"):
        Term(" a")
    with pytest.raises(TypeError):
        Not("a")  # type: ignore[arg-type]
    node = And([A, B])  # type: ignore[arg-type]
    assert node.children == (A, B)
    assert node == And((A, B))


def test_terms_helpers() -> None:
    tree = parse('"a" AND NOT "b" AND NOT NOT "c" OR NOT ("d" OR "a") OR NOT "b"')
    assert terms(tree) == ["a", "b", "c", "d"]
    assert positive_terms(tree) == ["a", "c"]
    assert negated_only_terms(tree) == ["b", "d"]
    assert positive_terms(parse('NOT "x"')) == []
    assert negated_only_terms(parse('NOT "x" AND "x"')) == []


def test_printer() -> None:
    assert to_string(And((And((A, B)), C))) == '"a" AND "b" AND "c"'
    assert to_string(Or((Or((A, B)), And((C, D))))) == '"a" OR "b" OR "c" AND "d"'
    assert to_string(Not(Or((A, B)))) == 'NOT ("a" OR "b")'
    assert to_string(Not(Not(A))) == 'NOT NOT "a"'
    assert to_string(And((Not(And((A, B))), Or((C, D))))) == 'NOT ("a" AND "b") AND ("c" OR "d")'
    assert str(Term('back\\slash "q"')) == '"back\\\\slash \\"q\\""'
    assert quote_term("x") == '"x"'


def test_lexer_tokens() -> None:
    tokens = tokenize(' ("a b")\nand')
    kinds = [TokenKind.LPAREN, TokenKind.TERM, TokenKind.RPAREN, TokenKind.AND]
    assert [t.kind for t in tokens] == kinds
    assert [(t.start, t.end) for t in tokens] == [(1, 2), (2, 7), (7, 8), (9, 12)]
    assert tokens[1].value == "a b"


@pytest.mark.parametrize(
    "module",
    ["pglogic.query", "pglogic.query.ast", "pglogic.query.lexer", "pglogic.query.parser",
     "pglogic.query.printer"],
)  # fmt: skip
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0
    assert result.attempted > 0


def test_public_api_has_docstrings_with_examples() -> None:
    import pglogic.query as q

    for name in q.__all__:
        obj = getattr(q, name)
        if callable(obj) and not name.isupper() and name != "Node":
            assert obj.__doc__ and ">>>" in obj.__doc__, name


# -- properties ---------------------------------------------------------------------------------

_CHARS = st.one_of(st.characters(codec="utf-8"), st.sampled_from("\"'\\ ()\n"))
_CHUNKS = st.one_of(_CHARS, st.sampled_from(["AND", "not", '\\"', "\\\\"]))
term_texts = (
    st.lists(_CHUNKS, min_size=1, max_size=12)
    .map("".join)
    .map(str.strip)
    .filter(lambda t: bool(t) and "\x00" not in t)
)  # (NUL: refused)


def _extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    lists = st.lists(children, min_size=2, max_size=4).map(tuple)
    return st.one_of(children.map(Not), lists.map(And), lists.map(Or))


trees: st.SearchStrategy[Node] = st.recursive(term_texts.map(Term), _extend, max_leaves=12)


def canonical(node: Node) -> Node:
    """Flatten nested nodes of the same operator, as the parser does."""
    if isinstance(node, Term):
        return node
    if isinstance(node, Not):
        return Not(canonical(node.child))
    children: list[Node] = []
    for child in map(canonical, node.children):
        children.extend(child.children if type(child) is type(node) else (child,))
    return type(node)(tuple(children))


def walk(node: Node) -> Iterator[Node]:
    yield node
    if isinstance(node, Not):
        yield from walk(node.child)
    elif isinstance(node, And | Or):
        for child in node.children:
            yield from walk(child)


@settings(deadline=None)
@given(trees)
def test_print_parse_round_trip(tree: Node) -> None:
    text = to_string(tree)
    parsed = parse(text, max_terms=1000)
    assert parsed == canonical(tree)
    assert to_string(parsed) == text
    assert parse(to_string(canonical(tree)), max_terms=1000) == canonical(tree)


@settings(deadline=None)
@given(trees)
def test_every_span_reparses_to_its_node(tree: Node) -> None:
    text = to_string(tree)
    for node in walk(parse(text, max_terms=1000)):
        start, end = node.span
        assert parse(text[start:end], max_terms=1000) == node


def _check_random_text(text: str) -> None:
    try:
        tree = parse(text)
    except QuerySyntaxError as err:
        assert 1 <= err.column <= len(text) + 1
        assert f"col {err.column}" in str(err) or str(err) == "Empty query"
        err.pretty()
        return
    assert parse(to_string(tree)) == tree


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_random_text_only_raises_syntax_errors(text: str) -> None:
    _check_random_text(text)


_PIECES = ['"a"', "'b c'", '"x\\"y"', "AND", "or", "NOT", "(", ")", '"', "'", "\\", "foo", "&",
           " ", "\n", '""', "\x00", "é", "AND NOT"]  # fmt: skip


@settings(deadline=None, max_examples=300)
@given(st.lists(st.sampled_from(_PIECES), max_size=30).map(" ".join))
def test_token_soup_only_raises_syntax_errors(text: str) -> None:
    _check_random_text(text)


@pytest.mark.parametrize(
    ("query", "column"),
    [('"a\x00b"', 3), ("'\x00'", 2), ('"ok" AND "x\x00"', 12), ("plain\x00", 6)],
)
def test_nul_characters_are_refused_with_their_position(query: str, column: int) -> None:
    """PostgreSQL text cannot hold NUL: refused by the parser, before any SQL (it used to reach
    the database as a DataError from the driver)."""
    from pglogic.query import to_tree

    with pytest.raises(QuerySyntaxError, match="NUL character") as err:
        to_tree(query)
    assert err.value.column == column
