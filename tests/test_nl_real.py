"""Properties of the rewrites of bench/quality/nl/real, over the local model's recorded answers.

``bench/quality/nl/real/answers.jsonl`` keeps the model's raw answers (grammar mode) to the 269 real
questions of ``bench/quality/nl/real/questions.jsonl`` from the run quoted in the docs. Each answer is
replayed through what runs after the model (the grammar reader, the parser and the checks of
:mod:`pglogic.llm.wording`), so a change to any of them that would invert, drop or invent a NOT
fails here without a model:

* a question whose gold excludes something has a NOT over each excluded thing;
* a question whose negation word describes the situation (content negation) has no NOT, and no
  check ever adds one;
* no term is made of function words only;
* the judgements recorded in ``results.json`` are the ones the replay gives.

Where the recorded answer of the 1.5B model itself is wrong and no check can be sure of it (a
"without" folded into a term, a NOT over "rise" for "doesn't rise"), the question's test is an
expected failure naming the answer, strict: a change that fixes it must say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pglogic.errors import QuerySyntaxError
from pglogic.eval.rewrites import Gold, judge_rewrite, leaves
from pglogic.llm.rewrite import interpret
from pglogic.llm.wording import content_stems, question_names
from pglogic.query import Node

REAL = Path(__file__).resolve().parents[1] / "bench" / "quality" / "nl" / "real"


def _rows() -> list[dict[str, Any]]:
    answers = {
        r["id"]: r for r in map(json.loads, (REAL / "answers.jsonl").read_text().splitlines())
    }
    rows = [json.loads(line) for line in (REAL / "questions.jsonl").read_text().splitlines()]
    return [{**r, "answers": answers[r["id"]]["answers"]} for r in rows]


ROWS = _rows()


def replay(row: dict[str, Any], checks: bool = True) -> Node | None:
    """The query the last recorded answer gives (None: it does not parse, a fallback)."""
    try:
        return interpret(row["answers"][-1], row["question"], checks=checks).tree
    except QuerySyntaxError:
        return None


def _gold(row: dict[str, Any]) -> Gold:
    return Gold.read(row["gold"], row["alts"], row["negation"])


def _recorded() -> dict[str, dict[str, Any]]:
    runs = json.loads((REAL / "results.json").read_text())["runs"]["current"]["items"]
    return {it["id"]: it for split in ("dev", "test") for it in runs[split]}


RECORDED = _recorded()


def _known(row: dict[str, Any], errors: set[str]) -> Any:
    """The row, marked as an expected failure when the recorded run has one of ``errors``: the
    model's own answer (the checks left it alone, being unsure); strict, so a fix shows."""
    found = errors & set(RECORDED[row["id"]]["checked"]["errors"])
    if not found:
        return row
    reason = f"the model wrote {RECORDED[row['id']]['query']} ({', '.join(sorted(found))})"
    return pytest.param(row, marks=pytest.mark.xfail(strict=True, reason=reason), id=row["id"])


def test_every_question_has_a_recorded_answer() -> None:
    assert len(ROWS) == 269
    assert all(row["answers"] for row in ROWS)
    assert set(RECORDED) == {row["id"] for row in ROWS}


@pytest.mark.parametrize(
    "row",
    [_known(r, {"lost NOT", "inverted NOT"}) for r in ROWS if r["negation"] == "exclusion"],
    ids=lambda r: r["id"],
)
def test_an_exclusion_keeps_its_not(row: dict[str, Any]) -> None:
    tree = replay(row)
    assert tree is not None
    errors = judge_rewrite(tree, _gold(row), row["question"]).errors
    assert not {"lost NOT", "inverted NOT"} & set(errors), (row["question"], str(tree))


@pytest.mark.parametrize(
    "row",
    [_known(r, {"spurious NOT"}) for r in ROWS if r["negation"] == "content"],
    ids=lambda r: r["id"],
)
def test_content_negation_has_no_not(row: dict[str, Any]) -> None:
    tree = replay(row)
    if tree is None:  # a fallback searches the question as one plain term
        return
    assert not any(negated for _, negated in leaves(tree)), (row["question"], str(tree))


def test_no_check_adds_a_not_to_content_negation() -> None:
    for row in (r for r in ROWS if r["negation"] == "content"):
        model, checked = replay(row, checks=False), replay(row)
        if model is None or checked is None:
            continue
        negated = [sum(neg for _, neg in leaves(tree)) for tree in (model, checked)]
        assert negated[1] <= negated[0], (row["question"], str(model), str(checked))


def test_no_term_is_made_of_function_words() -> None:
    fillers = []
    for row in ROWS:
        tree = replay(row)
        names = question_names(row["question"])
        if tree is not None:
            fillers += [t for t, _ in leaves(tree) if not content_stems(t, names)]
    assert fillers == []


def test_the_recorded_judgements_are_the_replayed_ones() -> None:
    for row in ROWS:
        item = RECORDED[row["id"]]
        for variant, checks in (("model", False), ("checked", True)):
            j = judge_rewrite(replay(row, checks), _gold(row), row["question"])
            assert (j.exact, j.structural, list(j.errors)) == (
                item[variant]["exact"],
                item[variant]["structural"],
                item[variant]["errors"],
            ), (row["id"], variant)


def test_the_numbers_the_docs_quote_are_the_results() -> None:
    """README.md and docs/natural-language.md quote the frozen test half of results.json."""
    splits = json.loads((REAL / "results.json").read_text())["runs"]["current"]["splits"]
    root = REAL.parents[3]
    readme = " ".join((root / "README.md").read_text().split())
    doc = (root / "docs" / "natural-language.md").read_text()
    for split, bold in (("test", "**"), ("dev", "")):
        s = splits[split]["checked"]
        errors = s["errors"]["lost NOT"] + s["errors"]["inverted NOT"]
        row = (
            f"| {bold}{s['exact']:.3f}{bold} | {bold}{s['structural']:.3f}{bold} | "
            f"{s['exclusions_kept']} of {s['exclusions']} | {errors} | "
            f"{s['content_with_not']} of {s['content']} | {s['errors']['filler term']} |"
        )
        assert row in doc, row
        if split == "test":
            assert f"{s['questions']} held-out real questions" in readme
            assert f"right for {s['structural']:.3f}" in readme
            assert f"(exact {s['exact']:.3f}; {errors} NOTs lost or inverted)" in readme


def test_the_numbers_quoted_for_the_projects_own_sets_are_their_results() -> None:
    doc = " ".join((REAL.parents[3] / "docs" / "natural-language.md").read_text().split())
    for path in ("results.json", "heldout/results.json"):
        s = json.loads((REAL.parent / path).read_text())["hand"]["summary"]
        assert f"exact **{s['exact']:.3f}**, structural {s['structural']:.3f}" in doc, path
