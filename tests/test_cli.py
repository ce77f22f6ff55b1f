"""The ``pglogic`` command: documented help, corpus management, and one-sentence errors."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from pglogic.cli import cli
from tests.conftest import cli_in_process, run_cli


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [prefix]
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out += _commands(cmd, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


@pytest.mark.parametrize("path", _commands(cli), ids=lambda p: " ".join(p) or "pglogic")
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    ctx = click.Context(cli, info_name="pglogic")
    cmd: click.Command = cli
    for name in path:
        assert isinstance(cmd, click.Group)
        sub = cmd.get_command(ctx, name)
        assert sub is not None
        ctx = click.Context(sub, info_name=name, parent=ctx)
        cmd = sub
    text = cmd.get_help(ctx)
    assert "Examples:" in text
    assert "pglogic " + " ".join(path) in text
    assert cmd.help or cmd.short_help, f"{path} has no description"


def test_every_command_is_in_the_readme_or_docs() -> None:
    root = Path(__file__).resolve().parents[1]
    text = "".join(p.read_text() for p in [root / "README.md", *sorted(root.glob("docs/*.md"))])
    for path in _commands(cli):
        if path:
            name = "pglogic " + " ".join(path)
            assert name in text, f"neither README.md nor docs/*.md mentions '{name}'"


@pytest.mark.db
def test_unreachable_postgres_is_one_sentence() -> None:
    out = run_cli("--dsn", "host=/nonexistent-dir dbname=x", "corpus", "list")
    assert out.returncode == 3
    assert out.stderr.startswith(
        "Error: Cannot connect to Postgres (host=/nonexistent-dir dbname=x)"
    )
    assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_password_is_not_printed() -> None:
    out = run_cli("--dsn", "postgresql://bob:s3cret@127.0.0.1:1/x", "corpus", "list")
    assert out.returncode == 3
    assert "s3cret" not in out.stderr and "bob:***@" in out.stderr


@pytest.mark.db
@pytest.mark.model
def test_corpus_commands_end_to_end(dsn: str, tmp_path: Path) -> None:
    def ok(*args: str) -> str:
        out = cli_in_process("--dsn", dsn, *args)
        assert out.returncode == 0, out.stderr
        return str(out.stdout)

    assert "No corpora yet" in ok("corpus", "list")
    assert (
        "Created corpus 'news' (all-MiniLM-L6-v2, 384-d, cosine; passages of 254 tokens, "
        "32 shared)" in ok("corpus", "create", "news", "--description", "Three stories")
    )
    data = tmp_path / "d.jsonl"
    data.write_text(
        "\n".join(
            json.dumps({"id": f"d{i}", "text": t})
            for i, t in enumerate(["Coffee harvest in Brazil", "Oil tanker attacked", "Gold price"])
        )
    )
    assert "3 records: 3 inserted, 0 updated, 0 unchanged" in ok("ingest", "news", str(data))
    assert "Built HNSW index (m=8, ef_construction=32)" in ok(
        "index", "news", "--m", "8", "--ef-construction", "32"
    )
    show = ok("corpus", "show", "news")
    assert "corpus_1_embedding_hnsw" in show and '"m": 8' in show
    assert "Three stories" in show  # (the description it was created with)
    assert "news" in ok("corpus", "list")
    hits = [
        json.loads(line) for line in ok("search", "news", "coffee beans", "--json").splitlines()
    ]
    assert hits[0]["id"] == "d0" and set(hits[0]["similarities"]) == {"coffee beans"}
    dense = cli_in_process("--dsn", dsn, "search", "news", "coffee AND NOT oil", "--json")
    assert dense.returncode == 0 and json.loads(dense.stdout.splitlines()[0])["similarities"] == {
        "coffee AND NOT oil": pytest.approx(json.loads(dense.stdout.splitlines()[0])["score"])
    }  # (runs as given: one dense term) and says how to write the logic
    assert "Warning: Without quotes" in dense.stderr and '"coffee" AND NOT "oil"' in dense.stderr

    refused = cli_in_process("--dsn", dsn, "corpus", "drop", "news", input="")
    assert refused.returncode == 2 and "pass --yes" in refused.stderr
    assert "Dropped corpus 'news'" in ok("corpus", "drop", "news", "--yes")

    for args, message in [
        (("corpus", "show", "news"), "Error: Unknown corpus 'news'; there are no corpora yet"),
        (
            ("corpus", "create", "x", "--model", "nope"),
            "Error: Embedding model 'nope' is not installed",
        ),
        (("corpus", "create", "bad name"), "Error: Invalid corpus name 'bad name'"),
        (("ingest", "news", str(data)), "Error: Unknown corpus 'news'"),
        # checked before asking "This can drop data" (and not an exit 3 after it)
        (("db", "downgrade", "nosuchrev"), "Error: Unknown revision 'nosuchrev': pglogic ships"),
    ]:
        out = cli_in_process("--dsn", dsn, *args)
        assert out.returncode == 2, out.stderr
        assert out.stderr.startswith(message), out.stderr
        assert "Traceback" not in out.stderr
    ok("corpus", "create", "x")
    dup = cli_in_process("--dsn", dsn, "corpus", "create", "x")
    assert dup.returncode == 2 and dup.stderr.startswith("Error: Corpus 'x' already exists")
