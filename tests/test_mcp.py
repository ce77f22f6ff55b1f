"""``pglogic mcp`` through the official MCP SDK's own client, over stdio, against a real database
and the real model: the tools an agent sees, their answers (the same hits as the Python search),
errors as tool errors with pglogic's words, and a read-only server."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from pglogic import PgLogic
from tests.conftest import Server, reuters_database

pytestmark = [pytest.mark.db, pytest.mark.model]


@pytest.fixture(scope="module")
def news_dsn(pg_server: Server, minilm: Any) -> Iterator[str]:
    yield from reuters_database(pg_server, "t_mcp", 120)


def call_server(dsn: str, calls: list[tuple[str, dict[str, Any]]], errlog: Path) -> dict[str, Any]:
    """Start ``pglogic --dsn DSN mcp`` with the SDK's stdio client, list its tools and make
    ``calls`` in one session: {"tools": [...], "results": [(is_error, payload), ...]}."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PGLOGIC_LLM", "OPENAI"))}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from pglogic.cli import main; main()", "--dsn", dsn, "mcp"],
        env=env,
    )

    async def session() -> dict[str, Any]:
        with errlog.open("w") as err:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                tools = (await s.list_tools()).tools
                results = []
                for name, arguments in calls:
                    r = await s.call_tool(name, arguments)
                    text = "\n".join(c.text for c in r.content if hasattr(c, "text"))
                    payload = r.structured_content if not r.is_error else text
                    results.append((bool(r.is_error), payload))
        return {"tools": tools, "results": results}

    return anyio.run(session)


def test_an_agent_searches_through_the_mcp_tools(news_dsn: str, tmp_path: Path) -> None:
    query = '"oil prices" AND NOT "natural gas"'
    got = call_server(
        news_dsn,
        [
            ("list_corpora", {}),
            ("describe_corpus", {"name": "news"}),
            ("search", {"corpus": "news", "query": query, "k": 5}),
            ("search", {"corpus": "news", "query": query, "k": 5, "filters": ["places=usa"]}),
            ("compile", {"query": '"grain" OR "oil" AND NOT match:wheat'}),
            ("search", {"corpus": "news", "query": '"oil" AND (NOT', "k": 5}),
            ("search", {"corpus": "nope", "query": query}),
            ("search", {"corpus": "news", "query": query, "k": 0}),
            ("search", {"corpus": "news", "query": query, "filters": ["places"]}),
            ("get_documents", {"corpus": "news", "ids": ["reuters-5", "no-such-id"]}),
        ],
        tmp_path / "server.log",
    )
    # the tools (no LLM configured: no ask), each read-only, the language in the descriptions
    tools = {t.name: t for t in got["tools"]}
    assert set(tools) == {"search", "compile", "list_corpora", "describe_corpus", "get_documents"}
    assert all(t.annotations and t.annotations.read_only_hint for t in tools.values())
    assert "AND NOT" in (tools["search"].description or "")
    assert "match:" in (tools["compile"].description or "")
    results = got["results"]
    (e1, corpora), (e2, described), (e3, hits), (e4, filtered), (e5, compiled) = results[:5]
    assert not any([e1, e2, e3, e4, e5])
    assert [c["name"] for c in corpora["result"]] == ["news"]
    assert corpora["result"][0]["documents"] == 120
    assert described["documents"] == 120 and described["lexical_index"] == "english"
    assert described["metadata_keys"]["places"]["types"] == ["array"]  # what filters can name
    assert "usa" in described["metadata_keys"]["places"]["examples"]
    # the hits are the Python search's, in its order, with each term's similarity
    expected = PgLogic(news_dsn).search("news", query, k=5)
    assert [h["id"] for h in hits["hits"]] == [h.external_id for h in expected.hits]
    assert hits["logical"] and set(hits["hits"][0]["similarities"]) == {"oil prices", "natural gas"}
    assert all(h["snippet"] for h in hits["hits"])  # something to read
    usa = PgLogic(news_dsn).search("news", query, k=5, filters=["places=usa"])
    assert [h["id"] for h in filtered["hits"]] == [h.external_id for h in usa.hits]
    assert all("usa" in h["metadata"]["places"] for h in filtered["hits"])
    assert compiled["terms"] == ["grain", "oil"] and compiled["lexical"] == ["wheat"]
    assert compiled["grouped"] == '"grain" OR ("oil" AND NOT match:"wheat")'  # how it binds
    # errors are tool errors in pglogic's words: the syntax error with its column and a caret
    (bad_syntax, message), (unknown, missing), (bad_k, k_message), (bad_filter, f_message) = (
        results[5:9]
    )
    documents_error, documents = results[9]
    assert not documents_error and documents["missing"] == ["no-such-id"]
    assert [d["id"] for d in documents["documents"]] == ["reuters-5"]
    assert documents["documents"][0]["text"]
    assert bad_syntax and "col" in message and "^" in message, message
    assert unknown and "Unknown corpus 'nope'" in missing and "news" in missing
    assert bad_k and "Invalid k=0" in k_message
    assert bad_filter and "places" in f_message
    # read-only: the server said how it searches
    log = (tmp_path / "server.log").read_text()
    assert "read-only: True" in log and "corpora: news" in log, log


def test_the_tool_answers_are_json(news_dsn: str, tmp_path: Path) -> None:
    """What an agent reads: plain JSON, the query as pglogic understood it."""
    calls = [("compile", {"query": "oil AND gas"}), ("compile", {"query": "oil but not gas"})]
    got = call_server(news_dsn, calls, tmp_path / "log")
    (error, payload), (_, negated) = got["results"]
    assert not error
    json.dumps(payload)
    assert payload["logical"] is False and payload["query"] == "oil AND gas"  # unquoted: dense
    assert payload["note"].endswith('quote the terms: "oil" AND "gas"')
    assert "cannot exclude" in negated["note"]  # a lowercase "not" is a word of the text


def test_the_http_transport_is_local_unless_allowed(dsn: str) -> None:
    """No authentication: another machine's address is refused before anything starts."""
    from pglogic.cli import cli

    out = CliRunner().invoke(cli, ["--dsn", dsn, "mcp", "--http", "--host", "0.0.0.0"])
    assert out.exit_code == 2 and "--allow-remote" in out.output, out.output
