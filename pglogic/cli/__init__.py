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

import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from pglogic.cli import admin, corpus, db, demo, llm, models, search, server
from pglogic.cli import eval as eval_cli
from pglogic.cli.ui import State, err_console, example
from pglogic.errors import PglogicError, QuerySyntaxError


@click.group(
    epilog=example(
        "pglogic demo",
        "pglogic corpus create news",
        "pglogic ingest news ../shared/data/reuters21578/corpus.jsonl.gz",
        "pglogic index news",
        'pglogic search news \'"grain" AND NOT "wheat"\' --explain',
        "PGLOGIC_DSN=postgresql://user:pw@127.0.0.1:5432/db pglogic db upgrade",
    )
)
@click.option(
    "--dsn",
    envvar="PGLOGIC_DSN",
    help="Postgres DSN (default: $PGLOGIC_DSN, else the embedded server).",
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
def cli(ctx: click.Context, dsn: str | None, home: Path | None) -> None:
    """pglogic: logical semantic retrieval inside PostgreSQL.

    Queries combine quoted terms with AND, OR, NOT and parentheses; each term is embedded and
    documents are ranked by a fuzzy-logic combination of per-term similarities.
    """
    if home is not None:  # fetched embedding models live under the home too (pglogic models)
        os.environ["PGLOGIC_HOME"] = str(home)
    ctx.obj = State(dsn, home)


for _command in (
    db.db,
    server.server_group,
    corpus.corpus,
    corpus.ingest,
    corpus.index,
    search.search,
    search.compile_cmd,
    demo.demo,
    *llm.COMMANDS,
    *eval_cli.COMMANDS,
    *admin.COMMANDS,
    *models.COMMANDS,
):
    cli.add_command(_command)


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
    sys.exit(0)


__all__ = ["cli", "main"]
