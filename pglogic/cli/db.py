"""``pglogic db``: apply or inspect the schema migrations.

Example:
    $ pglogic db upgrade
    $ pglogic db current
    $ pglogic db sql > install.sql
"""

from __future__ import annotations

import click

from pglogic.cli import ui
from pglogic.cli.ui import console, example

_EXAMPLES = ("pglogic db upgrade", "pglogic db current", "pglogic db downgrade base --yes",
             "pglogic db sql > install.sql")  # fmt: skip


@click.group(epilog=example(*_EXAMPLES))
def db() -> None:
    """Apply or inspect the schema migrations (Alembic, shipped with the package)."""


@db.command("upgrade", epilog=example("pglogic db upgrade", "pglogic db upgrade 0001"))
@click.argument("revision", default="head")
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    from pglogic.store import migrate

    api = ui.api(ctx)
    api.upgrade(revision)
    console.print(f"Schema at revision {migrate.current(api.dsn)}")


@db.command("downgrade", epilog=example("pglogic db downgrade base --yes"))
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def db_downgrade(ctx: click.Context, revision: str, yes: bool) -> None:
    """Migrate the database down to REVISION ('base' removes pglogic and all corpora)."""
    from pglogic.store import migrate

    api = ui.api(ctx)
    migrate.check_revision(revision)  # before asking
    if not yes:
        click.confirm(f"Downgrade the schema to {revision}? This can drop data", abort=True)
    migrate.downgrade(api.dsn, revision)
    console.print(f"Schema at revision {migrate.current(api.dsn) or 'base'}")


@db.command("current", epilog=example("pglogic db current"))
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the database's schema revision and the newest one this pglogic ships."""
    from pglogic.store import migrate

    api = ui.api(ctx)
    console.print(f"current: {migrate.current(api.dsn) or 'none'}  head: {migrate.head()}")


@db.command(
    "sql",
    epilog=example("pglogic db sql > install.sql", "pglogic db sql --from 0004 > upgrade.sql"),
)
@click.option(
    "--from", "start", metavar="REVISION",
    help="Write the upgrade of a database at REVISION (default: an empty database).",
)  # fmt: skip
@click.argument("revision", default="head")
def db_sql(start: str | None, revision: str) -> None:
    """Print the upgrade to REVISION (default: head) as one script for psql; no database needed.

    From an empty database this is sql/install.sql: psql "$DSN" -v ON_ERROR_STOP=1 -f FILE.
    """
    from pglogic.store import migrate

    click.echo(migrate.upgrade_sql(start, revision), nl=False)
