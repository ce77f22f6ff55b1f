"""The README and docs/*.md: every fenced block is checked against the real code.

- shell blocks (```sh, ```bash, ```console): each ``pglogic ...`` line names a real command of the
  click tree with options it has, each ``./run X`` a real subcommand of ./run, each
  ``.venv/bin/python FILE`` an existing file, and the whole block passes ``bash -n``;
- python blocks compile, and their ``import``/``from`` lines of pglogic import;
- a text block that shows a query error is exactly what the parser says;
- sql blocks call only ``pglogic.*`` functions that ``sql/*.sql`` defines; the README's and
  docs/sql-api.md's SQL runs against a real database with a small corpus ``news``;
- the JSON Schema of ``pglogic.search``'s input (docs/sql-api.md) accepts the documented examples
  and what :func:`pglogic.engine.render.search_json` writes, and rejects malformed input;
- every ``bench/...`` file the docs name exists.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from pglogic.cli import cli
from tests.conftest import expand_braces

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Files whose SQL blocks are run against a database (the others, e.g. Citus DDL, cannot be).
RUN_SQL = [ROOT / "README.md", ROOT / "docs" / "sql-api.md"]
BENCH_README = ROOT / "bench" / "README.md"
FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
SHELL = {"sh", "bash", "shell", "console"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    text: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(langs: set[str], paths: list[Path] = DOCS) -> list[Block]:
    out = []
    for path in paths:
        text = path.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) in langs:
                line = text.count("\n", 0, m.start()) + 2
                out.append(Block(path, line, m.group(1), m.group(2)))
    return out


def test_docs_have_blocks_of_each_kind() -> None:
    assert len(DOCS) >= 10, DOCS
    for langs in (SHELL, {"python"}, {"sql"}, {"json"}):
        assert blocks(langs), f"no {langs} block found"


# -- shell ---------------------------------------------------------------------------------------


def shell_lines(block: Block) -> Iterator[tuple[int, list[str]]]:
    """Logical lines of a shell block (continuations joined) as tokens, comments dropped."""
    text = block.text
    if block.lang == "console":  # only the commands after a prompt
        text = "\n".join(ln[2:] for ln in text.splitlines() if ln.startswith("$ "))
    lines = text.replace("\\\n", " ").splitlines()
    for i, line in enumerate(lines):
        tokens = shlex.split(line, comments=True)
        while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tokens[0]):
            tokens = tokens[1:]  # VAR=value prefixes
        if tokens and tokens[-1] == "&":
            tokens = tokens[:-1]
        if tokens:
            yield i, tokens


def _options(cmd: click.Command) -> dict[str, click.Parameter]:
    out: dict[str, click.Parameter] = {}
    for p in cmd.get_params(click.Context(cmd)):
        if isinstance(p, click.Option):
            for o in [*p.opts, *p.secondary_opts]:
                out[o] = p
    return out


def check_pglogic(args: list[str]) -> str:
    """Resolve ``pglogic ARGS`` in the real click tree; raise AssertionError on an unknown
    command or option. Returns the command path."""
    cmd: click.Command = cli
    name, parent, path = "pglogic", None, ["pglogic"]
    known = _options(cli)
    while True:
        ctx = cmd.make_context(name, list(args), parent=parent, resilient_parsing=True)
        if not isinstance(cmd, click.Group):
            break
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            break
        sub_name, sub, args = cmd.resolve_command(ctx, rest)
        assert sub is not None and sub_name is not None, (
            f"unknown command {' '.join(path)} {rest[0]}"
        )
        cmd, name, parent = sub, sub_name, ctx
        path.append(sub_name)
        known.update(_options(sub))
    # resilient parsing ignores unknown options: check every option token ourselves
    tokens = iter(args)
    for tok in tokens:
        if tok == "--":
            break
        if not tok.startswith("-") or tok == "-" or re.fullmatch(r"-\d[\d.e-]*", tok):
            continue
        opt = tok.split("=", 1)[0]
        assert opt in known, f"'{' '.join(path)}' has no option {opt}"
        p = known[opt]
        takes_value = isinstance(p, click.Option) and not p.is_flag and not p.count
        if takes_value and "=" not in tok and opt not in getattr(p, "secondary_opts", []):
            next(tokens, None)
    return " ".join(path)


def run_subcommands() -> set[str]:
    """The subcommands of ./run, from its case statement."""
    text = (ROOT / "run").read_text()
    body = text[text.index('case "$cmd" in') :]
    return set(re.findall(r"^\s*([a-z][a-z-]*)\)", body, re.M))


def test_called_functions() -> None:
    text = "CREATE TABLE pglogic.corpus_7 (id int); SELECT pglogic.or_max(1, 2) FROM pglogic.x"
    assert called_functions(text) == {"or_max"}


def test_check_pglogic_catches_mistakes() -> None:
    assert check_pglogic(["search", "news", '"a" AND NOT "b"', "--explain", "-k", "5"]) == (
        "pglogic search"
    )
    assert check_pglogic(["--dsn", "x", "db", "downgrade", "base", "--yes"]) == (
        "pglogic db downgrade"
    )
    assert check_pglogic(["search", "news", "q", "--no-guide", "--where=a=1"]) == "pglogic search"
    for bad in (["nosuch"], ["corpus", "nosuch"], ["search", "news", "q", "--bogus"]):
        with pytest.raises(AssertionError):
            check_pglogic(bad)
    assert {"demo", "test", "fast", "pglogic"} <= run_subcommands()


@pytest.mark.parametrize("block", blocks(SHELL), ids=str)
def test_shell_block(block: Block) -> None:
    subs = run_subcommands()
    for i, tokens in shell_lines(block):
        where = f"{block} (+{i}): {' '.join(tokens)}"
        head = Path(tokens[0]).name if tokens[0].endswith("/pglogic") else tokens[0]
        if head == "pglogic":
            check_pglogic(tokens[1:])
        elif head == "./run":
            assert len(tokens) > 1 and tokens[1] in subs, f"{where}: not a ./run subcommand"
            if tokens[1] == "pglogic":
                check_pglogic(tokens[2:])
        elif head.endswith("bin/python") and len(tokens) > 1 and tokens[1].endswith(".py"):
            assert (ROOT / tokens[1]).is_file(), f"{where}: no file {tokens[1]}"
    script = block.text
    if block.lang == "console":
        script = "\n".join(ln[2:] for ln in script.splitlines() if ln.startswith("$ "))
    out = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert out.returncode == 0, f"{block}: bash -n: {out.stderr}"


# -- python --------------------------------------------------------------------------------------


def pglogic_imports(tree: ast.AST) -> Iterator[tuple[str, list[str]]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "pglogic":
                    yield a.name, []
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] == "pglogic"
        ):
            yield node.module, [a.name for a in node.names]


@pytest.mark.parametrize("block", blocks({"python"}), ids=str)
def test_python_block(block: Block) -> None:
    tree = compile(block.text, str(block), "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    compile(tree, str(block), "exec")
    for module, names in pglogic_imports(tree):
        mod = importlib.import_module(module)
        for name in names:
            if not hasattr(mod, name):
                importlib.import_module(f"{module}.{name}")  # a submodule


# -- query errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block", [b for b in blocks({"text"}) if b.text.startswith("Error: ")], ids=str
)
def test_error_example_is_what_the_parser_says(block: Block) -> None:
    from pglogic.errors import QuerySyntaxError
    from pglogic.query import parse

    query = block.text.splitlines()[1].removeprefix("  ")
    with pytest.raises(QuerySyntaxError) as info:
        parse(query)
    assert "Error: " + info.value.pretty() == block.text.rstrip("\n")


# -- sql -----------------------------------------------------------------------------------------

SQL_FUNCTION = re.compile(r"\bpglogic\.([A-Za-z_][A-Za-z0-9_]*)\s*\(")
#: Words after which ``pglogic.name (`` is a table, not a function call.
NOT_A_CALL = re.compile(r"\b(TABLE|ON|INTO|FROM|JOIN|UPDATE|REFERENCES)\s+$", re.I)


def called_functions(text: str) -> set[str]:
    return {
        m.group(1) for m in SQL_FUNCTION.finditer(text) if not NOT_A_CALL.search(text[: m.start()])
    }


def sql_functions() -> set[str]:
    """The pglogic.* functions the SQL sources define."""
    out: set[str] = set()
    for f in sorted((ROOT / "sql").glob("*.sql")):
        out |= set(
            re.findall(
                r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+pglogic\.(\w+)", f.read_text(), re.I
            )
        )
    return out


@pytest.mark.parametrize("block", blocks({"sql"}), ids=str)
def test_sql_block_calls_existing_functions(block: Block) -> None:
    defined = sql_functions()
    assert {"search", "search_plan", "and_product"} <= defined
    used = called_functions(block.text)
    assert used <= defined, f"{block}: no such function pglogic.{sorted(used - defined)}"


#: The terms the runnable SQL examples use; the test caches a vector for each.
SQL_TERMS = ["crude oil", "natural gas"]


@pytest.fixture
def news_db(dsn: str) -> Iterator[Any]:
    """A migrated database with corpus 'news' (20 documents, random unit vectors, HNSW index)
    and term-cache vectors for SQL_TERMS."""
    import numpy as np

    from pglogic.store.corpus import build_index, create_corpus
    from pglogic.store.db import connect
    from pglogic.store.ingest import ingest_records
    from pglogic.store.readers import Record

    rng = np.random.default_rng(0)

    def unit(n: int) -> Any:
        v = rng.normal(size=(n, 384)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    with connect(dsn) as conn:
        corpus = create_corpus(conn, "news", model="all-MiniLM-L6-v2", dim=384)
        vecs = unit(20)
        records = [Record(f"d{i}", f"document {i}", f"title {i}", {}, vecs[i]) for i in range(20)]
        ingest_records(conn, corpus, records, embedder=None)
        build_index(conn, "news")
        for term, v in zip(SQL_TERMS, unit(len(SQL_TERMS)), strict=True):
            conn.execute(
                "INSERT INTO pglogic.term_cache (model, term, embedding) VALUES (%s, %s, %s)",
                (corpus.model, term, "[" + ",".join(map(str, v.tolist())) + "]"),
            )
        conn.commit()
        assert corpus.table_name == "corpus_1"  # the name the operator example uses
        yield conn


@pytest.mark.parametrize("block", blocks({"sql"}, RUN_SQL), ids=str)
def test_sql_block_runs(news_db: Any, block: Block) -> None:
    """Each statement runs (and is rolled back: the role example creates a cluster-wide role)."""
    try:
        with news_db.transaction(force_rollback=True):
            news_db.execute(block.text)
    finally:
        news_db.rollback()


# -- the JSON Schema of pglogic.search's input ---------------------------------------------------


def search_schema() -> dict[str, Any]:
    [schema] = [
        json.loads(b.text)
        for b in blocks({"json"}, [ROOT / "docs" / "sql-api.md"])
        if '"$schema"' in b.text
    ]
    return schema


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    assert ref.startswith("#/")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node  # type: ignore[no-any-return]


_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def tiny_validate(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> list[str]:
    """A small JSON Schema validator for the keywords the schema uses (jsonschema when the
    environment has it is used instead)."""
    if "$ref" in schema:
        return tiny_validate(value, _resolve(root, schema["$ref"]), root)
    errors: list[str] = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            return [f"{value!r} is not of type {types}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{value!r} != {schema['const']!r}")
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{value!r} does not match {schema['pattern']}")
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{value!r} is too short")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{value} > {schema['maximum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"fewer than {schema['minItems']} items")
        for item in value if "items" in schema else []:
            errors += tiny_validate(item, schema["items"], root)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"missing {k!r}" for k in schema.get("required", []) if k not in value]
        for k, v in value.items():
            if k in props:
                errors += tiny_validate(v, props[k], root)
            elif schema.get("additionalProperties") is False:
                errors.append(f"unexpected {k!r}")
    if "oneOf" in schema:
        ok = [s for s in schema["oneOf"] if not tiny_validate(value, s, root)]
        if len(ok) != 1:
            errors.append(f"{value!r} matches {len(ok)} of oneOf")
    if "anyOf" in schema and all(tiny_validate(value, s, root) for s in schema["anyOf"]):
        errors.append(f"{value!r} matches none of anyOf")
    if "not" in schema and not tiny_validate(value, schema["not"], root):
        errors.append(f"{value!r} matches what it must not")
    return errors


def schema_errors(value: Any) -> list[str]:
    schema = search_schema()
    try:
        import jsonschema  # type: ignore[import-untyped]
    except ImportError:
        return tiny_validate(value, schema, schema)
    validator = jsonschema.Draft202012Validator(schema)
    return [e.message for e in validator.iter_errors(value)]


def documented_inputs() -> list[Any]:
    """The JSON literals passed to pglogic.search / search_plan in the docs' SQL blocks."""
    out = []
    for b in blocks({"sql"}):
        for m in re.finditer(r"pglogic\.search(?:_plan)?\(\s*'[^']*'\s*,\s*'([^']*)'", b.text):
            out.append(json.loads(m.group(1)))
    return out


def test_search_schema_is_valid_json_schema() -> None:
    schema = search_schema()
    assert schema["$schema"].startswith("https://json-schema.org/draft/2020-12")
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.Draft202012Validator.check_schema(schema)


def test_search_schema_accepts_every_filter_form() -> None:
    from tests.test_filter_forms import ACCEPTED

    for filters, _ in ACCEPTED:
        assert schema_errors({"tree": {"term": "a"}, "filters": filters}) == [], filters


def test_search_schema_accepts_the_documented_examples() -> None:
    inputs = documented_inputs()
    assert len(inputs) >= 3
    for value in inputs:
        assert schema_errors(value) == [], value


@pytest.mark.parametrize(
    "query",
    [
        '"oil prices" AND "opec"',
        '"grain exports" OR "wheat harvest"',
        '("gold" OR "silver") AND NOT ("mining" OR "strike")',
        '"coffee" AND NOT NOT "brazil" AND NOT "cocoa"',
    ],
)
def test_search_schema_accepts_what_search_json_writes(query: str) -> None:
    from pglogic.engine.compile import SearchOptions
    from pglogic.engine.render import search_json
    from pglogic.query import parse, terms

    tree = parse(query)
    vectors = {t: [0.6, 0.8] for t in terms(tree)}
    for opts in (
        SearchOptions(),
        SearchOptions(k=25, operators="godel", truth="affine"),
        SearchOptions(k=7, depth=150, ef_search=50, operators="and=min,or=max,not=reciprocal"),
        SearchOptions(k=200, exact=True, truth="sigmoid:0.1857:18.76"),
    ):
        for value in (search_json(tree, opts), search_json(tree, opts, vectors)):
            assert schema_errors(value) == [], value
            assert schema_errors(value["tree"]) == []  # a bare tree is an input too


@pytest.mark.parametrize(
    "value",
    [
        {"tree": {"term": "a"}, "limit": 5},  # unknown option
        {"tree": {"op": "xor", "args": [{"term": "a"}, {"term": "b"}]}},
        {"tree": {"op": "and", "args": [{"term": "a"}]}},  # one operand
        {"tree": {"op": "not", "args": [{"term": "a"}, {"term": "b"}]}},
        {"tree": {"term": "  "}},
        {"tree": {"term": "a", "vector": {"x": 1}}},
        {"tree": {"term": "a"}, "k": 0},
        {"tree": {"term": "a"}, "k": "ten"},
        {"tree": {"term": "a"}, "operators": {"and": "max"}},
        {"tree": {"term": "a"}, "truth": "logistic"},
        {"tree": {"term": "a"}, "ef_search": 5000},
        {"k": 10},  # no tree
        ["a"],
        {"tree": {"term": "a"}, "filters": 5},
        {"tree": {"term": "a"}, "filters": "places"},
        {"tree": {"term": "a"}, "filters": [{"key": "places", "value": "usa"}]},
        {"tree": {"term": "a"}, "filters": [{"contains": ["usa"]}]},
        {"tree": {"term": "a"}, "filters": [["places=usa"]]},
    ],
)
def test_search_schema_rejects_malformed_input(value: Any) -> None:
    assert schema_errors(value) != []


# -- bench paths ---------------------------------------------------------------------------------

BENCH_PATH = re.compile(r"(?<![\w/])(?:bench/|results/)[A-Za-z0-9_./*{},<>-]*[A-Za-z0-9_*}>]")


@pytest.mark.parametrize("doc", [*DOCS, BENCH_README], ids=lambda p: str(p.relative_to(ROOT)))
def test_named_bench_files_exist(doc: Path) -> None:
    """A claim's source must be committed: every bench/... path a page names exists."""
    for raw in BENCH_PATH.findall(doc.read_text()):
        # placeholders such as bench/quality/<dataset>/results.md or results/NAME.json
        raw = re.sub(r"<[^>]*>|\b[A-Z][A-Z_]+\b", "*", raw)
        if raw.startswith("results/"):  # short for bench/results/
            raw = "bench/" + raw
        for path in expand_braces(raw):
            assert list(ROOT.glob(path)) or (ROOT / path).exists(), f"{doc.name}: no {path}"


def test_readme_is_a_landing_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 12_000
    for doc in [*DOCS, BENCH_README]:  # users cannot see the project's issues
        assert not re.search(r"\bissue\s*#?\d", doc.read_text(), re.I), doc


def test_cli_reference_is_current() -> None:
    """docs/cli.md is written from the click tree: regenerate it when a command changes."""
    from pglogic.cli.reference import reference

    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == reference(), (
        "docs/cli.md is stale: python -m pglogic.cli.reference > docs/cli.md"
    )
