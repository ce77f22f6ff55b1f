"""Light imports and a fast start: what loads when, the lazy command group, the term cache on
the search path, the schema check without Alembic, and no dependency warnings on the terminal.

Speed itself is measured in ``bench/perf/startup.py``; these tests check the causes (what is imported,
what is loaded), never a duration.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import click
import numpy as np
import pytest
from psycopg.conninfo import conninfo_to_dict

from pglogic.cli import COMMANDS, LazyGroup, cli

HEAVY = (
    "psycopg_pool",
    "torch",
    "sentence_transformers",
    "scipy",
    "matplotlib",
    "alembic",
    "sqlalchemy",
    "onnxruntime",
)


def loaded_after(statement: str, *modules: str) -> list[str]:
    """Which of ``modules`` a fresh Python has imported after running ``statement``."""
    probe = f"{statement}\nimport json, sys\nprint(json.dumps([m for m in {modules!r} if m in sys.modules]))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    found: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.slow
def test_the_query_language_and_the_engine_load_nothing_heavy() -> None:
    statement = "import pglogic.query, pglogic.engine.compile, pglogic.engine.render"
    assert loaded_after(statement, *HEAVY) == []


@pytest.mark.slow
def test_the_command_line_loads_no_library_until_a_command_runs() -> None:
    commands = tuple(f"pglogic.cli.{m}" for m in sorted({m for m, _, _ in COMMANDS.values()}))
    assert loaded_after("import pglogic.cli", *HEAVY, "psycopg", "numpy", *commands) == []
    help_run = "from pglogic.cli import cli\ncli.main(['--help'], standalone_mode=False)"
    assert loaded_after(help_run, *HEAVY, "psycopg", "numpy", *commands) == []
    compile_run = (
        "from pglogic.cli import cli\n"
        "cli.main(['compile', '\"a\" AND NOT \"b\"'], standalone_mode=False)"
    )
    assert loaded_after(compile_run, *HEAVY, "pglogic.cli.eval", "pglogic.api") == []


def _top_level_commands() -> dict[int, tuple[str, str]]:
    """Every command object defined in a command module and not a subcommand of another."""
    found: dict[int, tuple[str, str]] = {}
    subcommands: set[int] = set()
    for module in sorted({m for m, _, _ in COMMANDS.values()}):
        for attr, value in vars(importlib.import_module(f"pglogic.cli.{module}")).items():
            if isinstance(value, click.Command):
                found[id(value)] = (module, attr)
                if isinstance(value, click.Group):
                    subcommands.update(id(c) for c in value.commands.values())
    return {k: v for k, v in found.items() if k not in subcommands}


def test_the_command_table_names_every_command_with_its_own_summary() -> None:
    ctx = click.Context(cli, info_name="pglogic")
    registered = set()
    for name, (module, attr, summary) in COMMANDS.items():
        cmd = cli.get_command(ctx, name)
        assert cmd is getattr(importlib.import_module(f"pglogic.cli.{module}"), attr)
        assert cmd.name == name
        assert cmd.get_short_help_str(limit=10_000) == summary, f"update COMMANDS[{name!r}]"
        registered.add(id(cmd))
    missing = [v for k, v in _top_level_commands().items() if k not in registered]
    assert not missing, f"commands not in pglogic.cli.COMMANDS: {missing}"


def test_help_lists_every_command_like_an_eager_group() -> None:
    eager = click.Group("pglogic", help=cli.help, params=cli.params, epilog=cli.epilog)
    for name in COMMANDS:
        eager.add_command(cli.commands[name], name)
    lazy_help = cli.get_help(click.Context(cli, info_name="pglogic"))
    assert lazy_help == eager.get_help(click.Context(eager, info_name="pglogic"))
    for name in COMMANDS:
        assert f"\n  {name} " in lazy_help


def test_a_lazy_group_imports_on_demand() -> None:
    group = LazyGroup("g", lazy={"db": COMMANDS["db"], "models": COMMANDS["models"]})
    ctx = click.Context(group)
    assert group.list_commands(ctx) == ["db", "models"]
    assert group._loaded == {}  # listing imported nothing
    assert group.get_command(ctx, "db") is importlib.import_module("pglogic.cli.db").db
    assert list(group._loaded) == ["db"]
    assert group.get_command(ctx, "nope") is None
    assert sorted(group.commands) == ["db", "models"]  # walking the tree loads every command


def test_the_shipped_head_is_alembics() -> None:
    from pglogic.store import migrate

    assert migrate.shipped_head() == migrate.head()


@pytest.mark.slow
def test_a_migrated_database_is_used_without_importing_alembic(dsn: str) -> None:
    statement = f"from pglogic import PgLogic\nPgLogic({dsn!r}).list_corpora()"
    assert loaded_after(statement, "alembic", "sqlalchemy") == []


def test_an_old_schema_is_still_refused(empty_dsn: str) -> None:
    from pglogic import PgLogic
    from pglogic.errors import SchemaError
    from pglogic.store import migrate
    from pglogic.store.migrate import schema_at_head

    assert not schema_at_head(empty_dsn)
    migrate.upgrade(empty_dsn, "0001")
    assert not schema_at_head(empty_dsn)
    with pytest.raises(SchemaError, match="schema revision 0001"):
        PgLogic(empty_dsn).list_corpora()
    migrate.upgrade(empty_dsn)
    assert schema_at_head(empty_dsn)


# -- the term cache on the search path ------------------------------------------------------


class HashEmbedder:
    """8-d unit vectors from a hash of the text; records what it embeds."""

    loads = 0

    def __init__(self, name: str) -> None:
        HashEmbedder.loads += 1
        self.name, self.dim = name, 8
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(8)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), 8)


class NoModel:
    """A provider whose model must not load."""

    def __init__(self, name: str) -> None:
        raise AssertionError(f"model {name!r} was loaded")


@pytest.fixture
def hashed(dsn: str, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """Corpus 'c' of model 'hashed:v' with 30 documents; yields (dsn, the corpus)."""
    from pglogic.embed.registry import get_embedder, register_provider, unregister_provider
    from pglogic.store import corpus as corpora
    from pglogic.store.db import connect
    from pglogic.store.ingest import ingest_path

    words = ["grain", "wheat", "oil", "gas", "gold", "silver", "coffee", "sugar", "corn", "tin"]
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": f"{words[i % 10]} {words[(i * 3) % 10]} {i}"}) + "\n"
            for i in range(30)
        )
    )
    register_provider("hashed", HashEmbedder)
    try:
        with connect(dsn) as conn:
            c = corpora.create_corpus(conn, "c", model="hashed:v", dim=8)
            ingest_path(conn, c, data, embedder=get_embedder("hashed:v"))
        yield dsn, c
    finally:
        unregister_provider("hashed")


def test_a_search_of_cached_terms_loads_no_model(hashed: tuple[str, Any]) -> None:
    from pglogic import PgLogic
    from pglogic.embed.registry import register_provider
    from pglogic.engine.compile import SearchOptions
    from pglogic.store.db import connect
    from pglogic.store.search import search
    from pglogic.store.term_cache import cache_terms

    dsn, corpus = hashed
    query = '"grain" AND NOT "wheat"'
    reference = HashEmbedder("hashed:v")
    with connect(dsn) as conn:
        expected = search(conn, corpus, query, embedder=reference, options=SearchOptions(k=5))
        cache_terms(conn, corpus, ["grain", "wheat"], embedder=reference)
    register_provider("hashed", NoModel)  # forgets the loaded model; loading it now fails
    result = PgLogic(dsn).search("c", query, k=5)
    assert result.cached_terms == ("grain", "wheat")
    assert [(h.external_id, h.score) for h in result.hits] == [
        (h.external_id, h.score) for h in expected.hits
    ]
    with pytest.raises(AssertionError, match="was loaded"):  # an uncached term needs the model
        PgLogic(dsn).search("c", '"grain" AND NOT "gold"', k=5)


def test_only_the_terms_missing_from_the_cache_are_embedded_then_cached(
    hashed: tuple[str, Any],
) -> None:
    from pglogic import PgLogic
    from pglogic.embed.registry import get_query_embedder, register_provider
    from pglogic.store.db import connect
    from pglogic.store.term_cache import cache_terms, cached_terms

    dsn, corpus = hashed
    with connect(dsn) as conn:
        cache_terms(conn, corpus, ["grain"], embedder=HashEmbedder("hashed:v"))
    register_provider("hashed", HashEmbedder)  # a fresh model that records what it embeds
    first = PgLogic(dsn).search("c", '"grain" AND NOT "gold"', k=5)
    assert first.cached_terms == ("grain",)
    assert get_query_embedder("hashed:v").inner.engine.seen == ["gold"]  # type: ignore[attr-defined]
    with connect(dsn) as conn:  # the embedded term was cached, with the model's query vector
        assert cached_terms(conn, "hashed:v") == ["gold", "grain"]
    register_provider("hashed", NoModel)
    again = PgLogic(dsn).search("c", '"grain" AND NOT "gold"', k=5)  # no model now
    assert again.cached_terms == ("grain", "gold")
    assert [(h.external_id, h.score) for h in again.hits] == [
        (h.external_id, h.score) for h in first.hits
    ]


def test_remember_terms_off_and_read_only_roles_write_nothing(hashed: tuple[str, Any]) -> None:
    from pglogic import PgLogic
    from pglogic.store.db import connect
    from pglogic.store.search import search
    from pglogic.store.term_cache import cached_terms

    dsn, corpus = hashed
    PgLogic(dsn).search("c", '"oil" AND NOT "gas"', k=5, remember_terms=False)
    with connect(dsn) as conn:
        assert cached_terms(conn, "hashed:v") == []
        conn.execute("SET default_transaction_read_only = on")
        conn.commit()
        res = search(
            conn, corpus, '"oil" AND NOT "gas"', embedder=HashEmbedder("hashed:v"),
            use_term_cache=True, remember_terms=True,
        )  # fmt: skip
        assert res.hits and res.cached_terms == ()
        conn.execute("SET default_transaction_read_only = off")
        assert cached_terms(conn, "hashed:v") == []


def test_only_the_querys_own_terms_are_remembered(hashed: tuple[str, Any]) -> None:
    from pglogic import PgLogic
    from pglogic.store.db import connect
    from pglogic.store.term_cache import cached_terms

    dsn, _ = hashed
    res = PgLogic(dsn).search("c", '"oil" AND NOT "gas"', k=5, mode="nsfl")
    assert len(res.compiled.terms) > 2  # NSFL scores fused texts too
    with connect(dsn) as conn:
        assert cached_terms(conn, "hashed:v") == ["gas", "oil"]


def test_a_conjunctions_phrase_is_remembered_so_sql_needs_no_model(
    hashed: tuple[str, Any],
) -> None:
    """pglogic.search scores each AND's phrase by default and looks it up in the cache: a
    Python search remembers the phrases it embedded with the terms, and cache_terms of a query
    caches them, so the SQL function then runs the same query without a vector (it failed
    with "The AND text 'oil and gas' has no vector" before)."""
    from psycopg.types.json import Jsonb

    from pglogic import PgLogic
    from pglogic.engine.compile import SearchOptions
    from pglogic.engine.render import search_json
    from pglogic.query import parse
    from pglogic.store.db import connect
    from pglogic.store.term_cache import cache_terms, cached_terms, uncache_terms

    dsn, corpus = hashed
    hits = PgLogic(dsn).search("c", '"oil" AND "gas"', k=5).hits
    with connect(dsn) as conn:
        assert cached_terms(conn, "hashed:v") == ["gas", "oil", "oil and gas"]
        rows = conn.execute(
            "SELECT external_id, score FROM pglogic.search('c', %s)",
            (Jsonb(search_json(parse('"oil" AND "gas"'), SearchOptions(k=5))),),
        ).fetchall()
        assert [r[0] for r in rows] == [h.external_id for h in hits]
        assert all(abs(r[1] - h.score) < 1e-6 for r, h in zip(rows, hits, strict=True))
        uncache_terms(conn, "hashed:v")
        assert cache_terms(conn, corpus, '"tin" AND "corn" AND NOT "gold"',
                           embedder=HashEmbedder("hashed:v")) == [
            "tin", "corn", "gold", "tin and corn"]  # fmt: skip
        assert cache_terms(conn, corpus, ["tin", "corn"], embedder=HashEmbedder("hashed:v")) == [
            "tin", "corn"]  # a list of texts is cached as it is  # fmt: skip


def test_pglogic_search_takes_filters_as_text(hashed: tuple[str, Any]) -> None:
    """PgLogic.search parses text filters as ``--where`` does (an AttributeError before)."""
    from pglogic import PgLogic
    from pglogic.errors import InvalidInput

    dsn, _ = hashed
    pl = PgLogic(dsn)
    every = [h.external_id for h in pl.search("c", '"oil"', k=5).hits]
    assert [h.external_id for h in pl.search("c", '"oil"', k=5, filters=["{}"]).hits] == every
    assert pl.search("c", '"oil"', k=5, filters=["n>=0"]).hits == []  # no document has "n"
    with pytest.raises(InvalidInput, match='Invalid filter "n is 0": a filter is'):
        pl.search("c", '"oil"', filters=["n is 0"])


def test_cached_vectors_of_another_dimension_or_model_are_ignored(
    hashed: tuple[str, Any],
) -> None:
    from pglogic.store.db import connect
    from pglogic.store.term_cache import cached_term_vectors

    dsn, corpus = hashed
    with connect(dsn) as conn:
        conn.execute(
            "INSERT INTO pglogic.term_cache (model, term, embedding) VALUES "
            "('hashed:v', 'short', '[1,0,0]'), ('other', 'grain', '[1,0,0,0,0,0,0,0]'), "
            "('hashed:v', 'grain', '[0,1,0,0,0,0,0,0]')"
        )
        conn.commit()
        found = cached_term_vectors(conn, corpus, ["short", "grain", "none"])
        assert list(found) == ["grain"]
        assert found["grain"].tolist() == [0, 1, 0, 0, 0, 0, 0, 0]
        with conn.transaction():  # inside a transaction: a savepoint, the transaction goes on
            assert list(cached_term_vectors(conn, corpus, ["grain"])) == ["grain"]
            conn.execute("SELECT 1")


# -- no dependency warnings on the terminal ----------------------------------------------------


def run_quiet(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the console script with PYTHONWARNINGS and XDG_RUNTIME_DIR unset."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "XDG_RUNTIME_DIR")}
    exe = str(Path(sys.executable).with_name("pglogic"))
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.slow
def test_commands_print_no_dependency_warnings(pg_server: Any, dsn: str) -> None:
    if os.environ.get("PGLOGIC_TEST_DSN"):
        pytest.skip("the embedded server is not the one under test")
    host = str(conninfo_to_dict(pg_server.dsn).get("host") or "")
    home = Path(host).parent  # the server's data is <home>/pgdata
    status = run_quiet("--home", str(home), "server", "status")
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("running")
    assert "Warning" not in status.stderr, status.stderr
    listing = run_quiet("--dsn", dsn, "corpus", "list")
    assert listing.returncode == 0, listing.stderr
    assert "Warning" not in listing.stderr, listing.stderr


def test_model_loading_hides_library_warnings() -> None:
    import warnings

    from pglogic.embed.st import quiet_load

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_load():
            warnings.warn("a library's notice", UserWarning, stacklevel=1)
        warnings.warn("pglogic's own", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["pglogic's own"]
