"""``pglogic eval DATASET --nl N`` end to end: a real HTTP chat server, Postgres and the model.

The chat server answers from the request: a question prompt gets a question that quotes the
formula, a rewrite prompt gets that formula back, a reasoning prompt gets a passage. So the
rewrite must come out exactly right, and pglogic on the rewrite must score exactly as pglogic on
the original formula: a check of the whole protocol's plumbing (sampling, three LLM stages over
HTTP, parsing, the five methods in Postgres, judging, the report).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_in_process
from openai_stub import ChatServer, Reply

from pglogic.eval.nl import NL_METHODS, QUESTION_SYSTEM, REASONING_SYSTEM
from pglogic.llm.grammar import grammar_text
from pglogic.llm.rewrite import SYSTEM_PROMPT
from pglogic.query import parse

ASKED = "Which documents match "


class EchoChatServer(ChatServer):
    """Answers each of the protocol's three prompts from the request itself."""

    def render(self, reply: Reply, payload: dict[str, Any]) -> Any:
        messages = payload["messages"]
        system, last = messages[0]["content"], messages[-1]["content"]
        if system == QUESTION_SYSTEM:
            content = ASKED + last.removeprefix("Query: ") + "?"
        elif system.startswith(SYSTEM_PROMPT):
            asked = last.removeprefix("Question: ").removeprefix(ASKED).removesuffix("?")
            content = grammar_text(parse(asked))  # parenthesised where AND and OR meet
        elif system == REASONING_SYSTEM:
            content = "Relevant documents discuss " + last
        else:
            content = "unexpected prompt"
        return super().render(Reply(content), payload)


@pytest.fixture
def chat() -> Iterator[EchoChatServer]:
    with EchoChatServer() as srv:
        srv.script(*(Reply() for _ in range(200)))
        yield srv


@pytest.mark.db
@pytest.mark.model
def test_eval_nl_end_to_end(
    dsn: str, shared_data: Path, tmp_path: Path, chat: EchoChatServer
) -> None:
    out = tmp_path / "nl"
    env = {"PGLOGIC_LLM_BASE_URL": chat.url, "PGLOGIC_LLM_MODEL": "echo"}
    res = cli_in_process(
        "--dsn", dsn, "eval", str(shared_data / "limit_small"), "--nl", "3", "--out", str(out),
        env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "Rewrite: exact 1.00, equivalent 1.00, fallback 0.00" in res.stdout
    doc = json.loads((out / "nl-results.json").read_text())
    assert doc["dataset"] == "limit_small" and doc["llm"] == "echo"
    items = doc["items"]
    assert 3 < len(items) <= 6  # up to 3 queries with NOT and 3 without
    assert any(i["n_negations"] > 0 for i in items) and any(i["n_negations"] == 0 for i in items)
    # three LLM calls per question (question, rewrite, reasoning), all over HTTP
    assert len(chat.requests) == 3 * len(items)
    for item in items:
        assert item["question"] == ASKED + item["formula"] + "?"
        # the rewrite is shown with every group in parentheses: the same tree as the formula
        assert parse(item["rewrite"]) == parse(item["formula"])
        assert item["exact"] and not item["fallback"]
        assert item["reasoning"].startswith("Relevant documents discuss")
        scores = item["ndcg@10"]
        assert set(scores) == set(NL_METHODS)
        assert scores["pglogic(rewrite)"] == scores["pglogic(formula)"]
    summary = doc["summary"]
    assert summary["rewrite"]["exact"] == 1.0
    for method in NL_METHODS:
        assert 0.0 <= summary["ndcg@10"][method] <= 1.0


def test_eval_nl_without_an_endpoint_is_a_clear_error(shared_data: Path, tmp_path: Path) -> None:
    env = {"PGLOGIC_LLM_BASE_URL": "", "PGLOGIC_LLM_MODEL": "", "OPENAI_API_KEY": "",
           "OPENAI_BASE_URL": ""}  # fmt: skip
    res = cli_in_process("eval", str(shared_data / "limit_small"), "--nl", "2", "--out",
                  str(tmp_path), env=env)  # fmt: skip
    assert res.returncode != 0
    assert "PGLOGIC_LLM_BASE_URL" in res.stderr + res.stdout
