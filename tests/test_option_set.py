"""Every interface offers the search options of :class:`pglogic.engine.options.SearchOptions`, as
:data:`pglogic.engine.options.OPTIONS` declares them.

``OPTIONS`` declares each option once: its type, default (the field's, from
:mod:`pglogic.engine.defaults`), bounds, choices, help and the engine's words for a value it does
not take. The engine's checks (``check_options``, the plan's bounds of index scans), the CLI's
flags (help, click types and ranges, defaults), HTTP's request fields (description, bounds,
choices, default) and the keyword defaults of the SQLAlchemy helper and of ``PgLogic.search`` are
made from it; this module checks that they still are. Where nothing is made from it, it checks
them against it: the keys the SQL function accepts and the JSON Schema of docs/sql-api.md (each
option's minimum, maximum and choices; no default where a row of ``pglogic.defaults`` holds it),
and the SQL function's own checks, by running
every declared bound and the value just past it through the SQL function and the Python search
(both must take and refuse the same values; a database test).

Each interface either offers an option (under its own name where noted) or leaves it out on
purpose, saying why, below; and where it states an option's bounds, choices or default otherwise
than the declaration, it says why too. A new option fails this module until every interface has
it or says why not.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path
from typing import Any, get_args

import click
import psycopg
import pytest
from psycopg.types.json import Jsonb

from pglogic.api import PgLogic
from pglogic.cli import cli
from pglogic.engine import defaults
from pglogic.engine.compile import compile_query
from pglogic.engine.options import MAX_EF_SEARCH, OPTIONS, OptionSpec, SearchOptions
from pglogic.errors import PglogicError
from pglogic.integrations.http.routes import SearchRequest
from pglogic.integrations.sqlalchemy import logical_search
from pglogic.query import parse

ROOT = Path(__file__).resolve().parents[1]
OPTIONS_FIELDS = [f.name for f in dataclasses.fields(SearchOptions)]
NAMES = set(OPTIONS_FIELDS)

#: Options only the Python API and the CLI offer: the research modes' knobs (NSFL, SQO).
RESEARCH = {"question": "NSFL modes only", "rerank_depth": "reranking modes only",
            "seed": "SQO modes only"}  # fmt: skip


def cli_params() -> dict[str, click.Parameter]:
    return {p.name: p for p in cli.commands["search"].params if p.name}


def cli_options() -> set[str]:
    return set(cli_params())


def http_options() -> set[str]:
    return set(SearchRequest.model_fields)


def sqlalchemy_options() -> set[str]:
    return set(inspect.signature(logical_search).parameters)


def python_options() -> set[str]:
    return set(inspect.signature(PgLogic.search).parameters)


def sql_options() -> set[str]:
    text = (ROOT / "sql" / "search.sql").read_text(encoding="utf-8")
    found = re.search(r"allowed constant text\[\] := ARRAY\[(.*?)\];", text, re.S)
    assert found, "the SQL function's list of accepted keys"
    return set(re.findall(r"'(\w+)'", found.group(1)))


def schema_properties() -> dict[str, Any]:
    doc = (ROOT / "docs" / "sql-api.md").read_text(encoding="utf-8")
    block = re.search(r"```json\n(\{\s*\"\$schema\".*?)\n```", doc, re.S)
    assert block
    properties: dict[str, Any] = json.loads(block.group(1))["$defs"]["options"]["properties"]
    return properties


def schema_options() -> set[str]:
    return set(schema_properties())


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
            "iterative_scan": "always on",
            "guide": "planned",
            "term_scans": "planned",
            "mode": "fuzzy only (the statement is built by SQLAlchemy)",
            "timeout": "the application's own statement_timeout",
            "and_text": "not yet: the AND phrases need their vectors from the application",
        },
    ),
    "python PgLogic.search": (
        python_options,
        {},
        {"iterative_scan": "always on where the server has it (SearchOptions to force it off)"},
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
    assert set(left_out) <= NAMES, f"{interface}: leaves out options that do not exist"
    missing = {o for o in NAMES - set(left_out) if renamed.get(o, o) not in offered}
    assert not missing, f"{interface} lacks {sorted(missing)}: offer them or say why not here"
    stale = {o for o in left_out if renamed.get(o, o) in offered}
    assert not stale, f"{interface} offers {sorted(stale)} now: take them off its left-out list"


def test_the_sql_function_and_its_schema_accept_the_same_keys() -> None:
    assert sql_options() == schema_options()


# -- the declaration ------------------------------------------------------------------------------


def test_the_declaration_covers_exactly_the_fields_with_their_defaults() -> None:
    assert list(OPTIONS) == OPTIONS_FIELDS
    for f in dataclasses.fields(SearchOptions):
        spec = OPTIONS[f.name]
        assert spec.name == f.name
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        assert spec.default == default, f.name
        assert spec.help.strip(), f"{f.name} has no help"
        if spec.default is not None:
            assert isinstance(spec.default, spec.type) or f.name == "operators", f.name
        else:
            assert spec.nullable or f.name == "timeout" or spec.type is bool, f.name
        if spec.choices:
            assert spec.default in spec.choices, f.name
        if spec.minimum is not None and spec.maximum is not None:
            assert spec.minimum < spec.maximum, f.name
        if spec.default is not None and spec.type in (int, float):
            assert spec.refusal(spec.default) is None, f.name


def test_the_engine_refuses_what_the_declaration_refuses() -> None:
    """check_options and the plan say the declaration's words, with its bounds."""
    for value, exact, refused in _table(OPTIONS["not_context"]):
        _, message = _python("not_context", value, exact)
        assert (message is not None) == refused
    _, message = _python("k", MAX_EF_SEARCH + 1, False)
    assert message == OPTIONS["k"].index_refusal(MAX_EF_SEARCH + 1)
    _, message = _python("depth", 0, False)
    assert message is not None and message.startswith("Invalid depth=0: from 1 to 100,000 ")


# -- what the interfaces say about each option ---------------------------------------------------


def _bounds_of_click(t: click.ParamType) -> tuple[Any, Any, bool]:
    if isinstance(t, click.IntRange | click.FloatRange):
        assert t.min_open == t.max_open
        return t.min, t.max, t.min_open
    return None, None, False


@pytest.mark.parametrize("name", [n for n in OPTIONS_FIELDS if n != "iterative_scan"])
def test_the_cli_flags_are_the_declaration(name: str) -> None:
    spec = OPTIONS[name]
    param = cli_params()["where" if name == "filters" else name]
    assert isinstance(param, click.Option)
    assert param.help is not None and param.help.startswith(spec.help)
    given = cli.commands["search"].make_context("search", ["corpus", '"query"']).params
    assert given[param.name] == spec.default  # what the command gets when the flag is left out
    if spec.choices:
        assert isinstance(param.type, click.Choice)
        assert tuple(param.type.choices) == spec.choices
    elif spec.bounded:  # the bounds that hold in every search; the engine checks the others
        assert _bounds_of_click(param.type) == (spec.minimum, spec.maximum, spec.exclusive)
    elif spec.type in (int, float):
        assert param.type == click.INT if spec.type is int else param.type == click.FLOAT
    else:
        assert param.is_flag == (spec.type is bool), name
    for preset in spec.presets:
        assert preset in param.help, name


def _bounds_of_field(metadata: list[Any]) -> tuple[Any, Any, bool]:
    found = {k: getattr(m, k) for m in metadata for k in ("ge", "le", "gt", "lt") if hasattr(m, k)}
    exclusive = "gt" in found or "lt" in found
    return found.get("gt", found.get("ge")), found.get("lt", found.get("le")), exclusive


#: What HTTP states otherwise than the declaration, and why.
HTTP_OWN = {"filters": "filter texts and JSON objects ([] by default), parsed by the server"}


@pytest.mark.parametrize("name", sorted(http_options() & NAMES))
def test_the_http_fields_are_the_declaration(name: str) -> None:
    spec, info = OPTIONS[name], SearchRequest.model_fields[name]
    if name in HTTP_OWN:
        return
    assert info.default == spec.default
    assert info.description is not None and info.description.startswith(spec.help)
    if spec.bounded:
        assert _bounds_of_field(info.metadata) == (spec.minimum, spec.maximum, spec.exclusive)
    else:
        assert _bounds_of_field(info.metadata) == (None, None, False)
    choices = tuple(a for a in get_args(info.annotation) if isinstance(a, str))
    assert choices == spec.choices


#: Keyword defaults of the Python functions that differ from the declaration's, and why.
OWN_DEFAULTS = {
    ("sqlalchemy logical_search", "passages"): "the application's passage table (a mapped class, "
    "a Table or its name); None searches the documents' own vectors",
    ("sqlalchemy logical_search", "passage_score"): "None: blend-not-or with the documents' own "
    "embedding column, else max (there is no own vector to blend)",
}


@pytest.mark.parametrize(
    ("interface", "function"),
    [("sqlalchemy logical_search", logical_search), ("python PgLogic.search", PgLogic.search)],
)
def test_the_python_keywords_default_to_the_declaration(interface: str, function: Any) -> None:
    for name, parameter in inspect.signature(function).parameters.items():
        if name not in OPTIONS or (interface, name) in OWN_DEFAULTS:
            continue
        assert parameter.default == OPTIONS[name].default, f"{interface}: {name}"
        assert parameter.kind == inspect.Parameter.KEYWORD_ONLY, f"{interface}: {name}"


def _schema_facts(prop: dict[str, Any]) -> dict[str, Any]:
    """An option's bounds, choices and default in the JSON Schema (in it or in its oneOf)."""
    facts: dict[str, Any] = {"default": prop.get("default")}
    for branch in [prop, *prop.get("oneOf", [])]:
        for key in ("minimum", "maximum"):
            if key in branch:
                facts[key] = branch[key]
        if "enum" in branch:
            facts["choices"] = tuple(branch["enum"])
        if "const" in branch:
            facts["choices"] = (branch["const"],)
    return facts


#: What the JSON Schema (the SQL function) states otherwise than the declaration, and why.
SCHEMA_OWN = {("mode", "choices"): ("fuzzy",)}  # the SQL function has the fuzzy mode only


@pytest.mark.parametrize("name", sorted(schema_options() & NAMES))
def test_the_docs_schema_states_the_declaration(name: str) -> None:
    spec, facts = OPTIONS[name], _schema_facts(schema_properties()[name])
    default = list(spec.default) if isinstance(spec.default, tuple) else spec.default
    if name in defaults.SQL:  # the database's row (pglogic.defaults): the page names no value
        assert facts["default"] is None, "the schema's default: the row of pglogic.defaults"
    else:
        assert facts["default"] == default, "the schema's default"
    assert facts.get("minimum") == spec.minimum, "the schema's minimum"
    assert facts.get("maximum") == spec.maximum, "the schema's maximum"
    assert facts.get("choices", ()) == SCHEMA_OWN.get((name, "choices"), spec.choices)
    assert not spec.exclusive  # (the schema would say exclusiveMinimum)
    description = schema_properties()[name].get("description", "")
    for preset in spec.presets:
        assert preset in description, f"the schema's description of {name} names {preset}"
    if name == "truth":
        pattern = schema_properties()[name]["oneOf"][0]["pattern"]
        assert all(re.fullmatch(pattern, p) for p in spec.presets)


# -- the SQL function refuses what the Python search refuses --------------------------------------


def _table(spec: OptionSpec) -> list[tuple[Any, bool, bool]]:
    """(value, exact, refused) from the declaration: each bound, the value just past it, and for
    bounds of index scans the same values in an exact search (which ignores them)."""
    step = 1 if spec.type is int else 0.25
    rows: list[tuple[Any, bool, bool]] = []
    for bound, past in ((spec.minimum, -step), (spec.maximum, step)):
        if bound is None:
            continue
        # (past the index scans' maximum, a bound that holds in every search is an exact one's)
        exact = past > 0 and spec.index_maximum is not None
        rows += [(bound, exact, spec.exclusive), (bound + past, exact, True)]
        if spec.index_only:
            rows += [(bound + past, True, False)]
    if spec.index_maximum is not None:
        top = spec.index_maximum
        rows += [(top, False, False), (top + 1, False, True), (top + 1, True, False)]
        rows += [(spec.maximum, False, True)]
    rows += [(c, False, False) for c in spec.choices]
    if spec.choices:
        rows += [("bogus", False, True), (1, False, True)]
    return rows


#: Values the SQL function refuses in other words than Python's, and why.
SQL_OWN_WORDS = {
    ("k", 2**31): "the SQL function reads k as a 32-bit integer: not an integer",
    **{("mode", m): "the fuzzy mode only" for m in ("bogus", 1)},
}
#: Values the SQL function refuses where Python takes them, and why.
SQL_REFUSES = {("mode", m): "the fuzzy mode only" for m in OPTIONS["mode"].choices if m != "fuzzy"}

TREE = {"term": "a", "vector": [1.0, 0.0, 0.0]}


def _python(name: str, value: Any, exact: bool) -> tuple[bool, str | None]:
    from pglogic.engine.source import Corpus

    corpus = Corpus(1, "tiny", "corpus_1", "m", 3, "cosine", "embedding", None, None)
    opts = dataclasses.replace(SearchOptions(exact=exact), **{name: value})
    try:
        compile_query(parse('"a"'), corpus, opts)
    except PglogicError as e:
        return True, str(e)
    return False, None


@pytest.mark.db
def test_the_sql_function_takes_and_refuses_what_python_does(conn: psycopg.Connection[Any]) -> None:
    from pglogic.store.corpus import create_corpus

    create_corpus(conn, "tiny", model="m", dim=3, lexical=None)
    conn.commit()
    cases = [
        (spec.name, value, exact, refused)
        for spec in OPTIONS.values()
        if spec.name in sql_options()
        for value, exact, refused in _table(spec)
    ]
    assert {c[0] for c in cases} >= {"k", "depth", "ef_search", "and_text", "not_context",
                                     "not_mention", "lexical", "passage_score", "mode"}  # fmt: skip
    wrong = []
    for name, value, exact, refused in cases:
        py_refused, py_words = _python(name, value, exact)
        try:
            conn.execute("SELECT pglogic.search_plan('tiny', %s)",
                         (Jsonb({"tree": TREE, name: value, "exact": exact}),))  # fmt: skip
            sql_refused, sql_words = False, None
        except psycopg.errors.InvalidParameterValue as e:
            sql_refused, sql_words = True, e.diag.message_primary
        finally:
            conn.rollback()
        case = f"{name}={value!r}, exact={exact}"
        if py_refused != refused:
            wrong.append(f"{case}: Python {'refuses' if py_refused else 'takes'} it ({py_words})")
        if sql_refused != (refused or (name, value) in SQL_REFUSES):
            wrong.append(f"{case}: SQL {'refuses' if sql_refused else 'takes'} it ({sql_words})")
        elif refused and (name, value) not in SQL_OWN_WORDS:
            assert py_words is not None and sql_words is not None
            # the same words, but for the advice after ';' (exact=True / "exact": true)
            if py_words.split(";")[0] != sql_words.split(";")[0]:
                wrong.append(f"{case}: Python says {py_words!r}, SQL {sql_words!r}")
    assert not wrong, "\n".join(wrong)
