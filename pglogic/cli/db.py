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
from pglogic.errors import InvalidInput

_EXAMPLES = ("pglogic db upgrade", "pglogic db current", "pglogic db downgrade -1",
             "pglogic db downgrade base --yes", "pglogic db grants",
             "pglogic db sql > install.sql")  # fmt: skip
#: Relative revisions (-1, +1) are arguments, not options.
_RELATIVE_OK = {"ignore_unknown_options": True}


@click.group(epilog=example(*_EXAMPLES))
def db() -> None:
    """Apply or inspect the schema migrations (Alembic, shipped with the package)."""


@db.command(
    "upgrade",
    context_settings=_RELATIVE_OK,
    epilog=example("pglogic db upgrade", "pglogic db upgrade 0017", "pglogic db upgrade +1"),
)
@click.argument("revision", default="head")
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the database up to REVISION (default: head; +1: one revision up)."""
    from pglogic.store import migrate

    api = ui.api(ctx)
    migrate.check_revision(revision)
    at, target = migrate.current(api.dsn), migrate.resolve(api.dsn, revision)
    if at is not None and target is not None and target < at:  # (ids are sequential)
        raise InvalidInput(
            f"The database is at revision {at}, newer than {target}: an upgrade never goes "
            f"down; pglogic db downgrade {target} does"
        )
    api.upgrade(revision)
    console.print(f"Schema at revision {migrate.current(api.dsn)}")
    if not migrate.reader_role_exists(api.dsn):
        console.print(
            "Note: the role pglogic_reader does not exist (this role may not create roles), so "
            "no read-only grants were made: a superuser runs CREATE ROLE pglogic_reader "
            "NOLOGIN, then pglogic db grants",
            markup=False,
        )


@db.command(
    "downgrade",
    context_settings=_RELATIVE_OK,
    epilog=example(
        "pglogic db downgrade -1             # one revision down",
        "pglogic db downgrade 0018",
        "pglogic db downgrade base --yes     # removes pglogic and every corpus",
        "pglogic db downgrade base --cascade # ... and objects of yours that depend on it",
    ),
)
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--cascade", is_flag=True,
    help="Down to base: also drop the objects outside schema pglogic that depend on it "
    "(listed first); without it such a downgrade is refused.",
)  # fmt: skip
@click.pass_context
def db_downgrade(ctx: click.Context, revision: str, yes: bool, cascade: bool) -> None:
    """Migrate the database down to REVISION (-1: one revision down; base: remove pglogic).

    A step that would drop registry rows an upgrade could not bring back (passage layouts,
    lexical indexes, stored calibrations, the term cache) is refused, saying what to remove
    first; nothing is applied then.
    """
    from pglogic.store import migrate

    api = ui.api(ctx)
    migrate.check_revision(revision)  # before asking
    if migrate.current(api.dsn) is None:
        raise InvalidInput("pglogic is not installed in this database: nothing to downgrade")
    target = migrate.resolve(api.dsn, revision)
    if target is not None and target != revision:
        migrate.check_revision(target)  # (-1 may name a squashed revision)
    warning = "This can drop data"
    if target is None:  # base
        corpora = migrate.installed_corpora(api.dsn)
        outside = migrate.outside_dependents(api.dsn)
        listed = ", ".join(f"{n} ({d:,} documents)" for n, d in corpora) or "none"
        console.print(f"Base drops schema pglogic with every corpus: {listed}", markup=False)
        if outside:
            console.print("Objects outside schema pglogic that depend on it:", markup=False)
            for what in outside:
                console.print(f"  {what}", markup=False)
            if not cascade:
                raise InvalidInput(
                    f"Refusing to drop schema pglogic: {len(outside)} object(s) outside it "
                    "depend on it (listed above); drop or change them first, or add --cascade "
                    "to drop them too"
                )
            warning = f"This drops every corpus and the {len(outside)} object(s) listed above"
        else:
            warning = "This drops every corpus"
    if not yes:
        click.confirm(f"Downgrade the schema to {target or 'base'}? {warning}", abort=True)
    migrate.downgrade(api.dsn, target or "base", cascade=cascade)
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
    epilog=example(
        "pglogic db sql > install.sql",
        "pglogic db sql --from 0004 > upgrade.sql",
        "pglogic db sql 0017 --from 0018 > downgrade.sql",
    ),
)
@click.option(
    "--from", "start", metavar="REVISION",
    help="Write the migration of a database at REVISION (default: an empty database).",
)  # fmt: skip
@click.argument("revision", default="head")
def db_sql(start: str | None, revision: str) -> None:
    """Print the migration to REVISION (default: head) as one script for psql; no database
    needed. Below --from it is a downgrade.

    From an empty database this is sql/install.sql: psql "$DSN" -v ON_ERROR_STOP=1 -f FILE.
    """
    from pglogic.store import migrate

    click.echo(migrate.upgrade_sql(start, revision), nl=False)


@db.command(
    "grants",
    epilog=example(
        "pglogic db grants",
        "psql -c 'CREATE ROLE app_search LOGIN IN ROLE pglogic_reader'",
    ),
)
@click.pass_context
def db_grants(ctx: click.Context) -> None:
    """(Re)apply the read-only role pglogic_reader and its grants: after a restore into a fresh
    cluster, or after corpora were created by another role.

    Creates the role when it is missing (needs CREATEROLE), then grants USAGE on schema pglogic,
    SELECT on every table in it (corpora and the version table included) and EXECUTE on its
    functions.
    """
    from pglogic.store import migrate

    api = ui.api(ctx)
    tables = migrate.apply_grants(api.dsn)
    console.print(f"pglogic_reader may read {tables} tables of schema pglogic and search")
