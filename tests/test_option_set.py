"""Every interface offers the search options of :class:`pglogic.engine.options.SearchOptions`.

``SearchOptions`` declares the options (name, type, default, help in its docstring). The CLI's
``search``, HTTP's ``SearchRequest``, the SQLAlchemy helper's keywords, the keys the SQL function
accepts and the JSON Schema of docs/sql-api.md are checked against it: each either offers an
option (under its own name where noted) or leaves it out on purpose, saying why, below. A new
option fails this test until every interface has it or says why not.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest

from pglogic.cli import cli
from pglogic.engine.options import SearchOptions
from pglogic.integrations.http.routes import SearchRequest
from pglogic.integrations.sqlalchemy import logical_search

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = {f.name for f in dataclasses.fields(SearchOptions)}

#: Options only the Python API and the CLI offer: the research modes' knobs (NSFL, SQO).
RESEARCH = {"question": "NSFL modes only", "rerank_depth": "reranking modes only",
            "seed": "SQO modes only"}  # fmt: skip


def cli_options() -> set[str]:
    return {p.name for p in cli.commands["search"].params if p.name}


def http_options() -> set[str]:
    return set(SearchRequest.model_fields)


def sqlalchemy_options() -> set[str]:
    return set(inspect.signature(logical_search).parameters)


def sql_options() -> set[str]:
    text = (ROOT / "sql" / "search.sql").read_text(encoding="utf-8")
    found = re.search(r"allowed constant text\[\] := ARRAY\[(.*?)\];", text, re.S)
    assert found, "the SQL function's list of accepted keys"
    return set(re.findall(r"'(\w+)'", found.group(1)))


def schema_options() -> set[str]:
    doc = (ROOT / "docs" / "sql-api.md").read_text(encoding="utf-8")
    block = re.search(r"```json\n(\{\s*\"\$schema\".*?)\n```", doc, re.S)
    assert block
    return set(json.loads(block.group(1))["$defs"]["options"]["properties"])


#: interface: (its names, {option: its name for it}, {option: why it is left out})
INTERFACES = {
    "cli search": (
        cli_options,
        {"filters": "where"},
        {"iterative_scan": "always on: a knob for pgvector < 0.8 (Python, SQL)"},
    ),
    "http /v1/search": (
        http_options,
        {},
        {
            **RESEARCH,
            "depth": "planned from k and the terms; tuning stays server-side",
            "ef_search": "planned from k and the terms; tuning stays server-side",
            "iterative_scan": "always on",
            "guide": "planned; tuning stays server-side",
            "term_scans": "planned; tuning stays server-side",
        },
    ),
    "sqlalchemy logical_search": (
        sqlalchemy_options,
        {},
        {
            **RESEARCH,
            "filters": "the application's own WHERE on the select (pushed into the scans)",
            "iterative_scan": "always on",
            "guide": "planned",
            "term_scans": "planned",
            "mode": "fuzzy only (the statement is built by SQLAlchemy)",
            "timeout": "the application's own statement_timeout",
            "and_text": "not yet: the AND phrases need their vectors from the application",
        },
    ),
    "sql pglogic.search": (
        sql_options,
        {},
        {**RESEARCH, "timeout": "SET LOCAL statement_timeout in the caller's transaction"},
    ),
    "json schema (docs/sql-api.md)": (
        schema_options,
        {},
        {**RESEARCH, "timeout": "SET LOCAL statement_timeout in the caller's transaction"},
    ),
}


@pytest.mark.parametrize("interface", sorted(INTERFACES))
def test_each_interface_offers_each_option_or_says_why_not(interface: str) -> None:
    names, renamed, left_out = INTERFACES[interface]
    offered = names()
    assert set(left_out) <= OPTIONS, f"{interface}: leaves out options that do not exist"
    missing = {o for o in OPTIONS - set(left_out) if renamed.get(o, o) not in offered}
    assert not missing, f"{interface} lacks {sorted(missing)}: offer them or say why not here"
    stale = {o for o in left_out if renamed.get(o, o) in offered}
    assert not stale, f"{interface} offers {sorted(stale)} now: take them off its left-out list"


def test_the_sql_function_and_its_schema_accept_the_same_keys() -> None:
    assert sql_options() == schema_options()
