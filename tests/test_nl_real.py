"""Properties of the rewrites of bench/nl/real, over the local model's recorded answers.

``bench/nl/real/answers.jsonl`` keeps the model's raw answers (grammar mode) to the 269 real
questions of ``bench/nl/real/questions.jsonl`` from the run quoted in the docs. Each answer is
replayed through what runs after the model (the grammar reader, the parser and the checks of
:mod:`pglogic.llm.wording`), so a change to any of them that would invert, drop or invent a NOT
fails here without a model:

* a question whose gold excludes something has a NOT over each excluded thing;
* a question whose negation word describes the situation (content negation) has no NOT;
* no term is made of function words only;
* the judgements recorded in ``results.json`` are the ones the replay gives.
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

REAL = Path(__file__).resolve().parents[1] / "bench" / "nl" / "real"


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


def test_every_question_has_a_recorded_answer() -> None:
    assert len(ROWS) == 269
    assert all(row["answers"] for row in ROWS)


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r["negation"] == "exclusion"], ids=lambda r: r["id"]
)
def test_an_exclusion_keeps_its_not(row: dict[str, Any]) -> None:
    tree = replay(row)
    assert tree is not None
    errors = judge_rewrite(tree, _gold(row), row["question"]).errors
    assert not {"lost NOT", "inverted NOT"} & set(errors), (row["question"], str(tree))


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r["negation"] == "content"], ids=lambda r: r["id"]
)
def test_content_negation_has_no_not(row: dict[str, Any]) -> None:
    tree = replay(row)
    assert tree is not None
    assert not any(negated for _, negated in leaves(tree)), (row["question"], str(tree))


def test_no_term_is_made_of_function_words() -> None:
    fillers = []
    for row in ROWS:
        tree = replay(row)
        names = question_names(row["question"])
        if tree is not None:
            fillers += [t for t, _ in leaves(tree) if not content_stems(t, names)]
    assert fillers == []


def test_the_recorded_judgements_are_the_replayed_ones() -> None:
    results = json.loads((REAL / "results.json").read_text())["runs"]["current"]["items"]
    for split in ("dev", "test"):
        for item in results[split]:
            row = next(r for r in ROWS if r["id"] == item["id"])
            for variant, checks in (("model", False), ("checked", True)):
                j = judge_rewrite(replay(row, checks), _gold(row), row["question"])
                assert (j.exact, j.structural) == (
                    item[variant]["exact"],
                    item[variant]["structural"],
                ), (item["id"], variant)
