"""An ingest really interrupted (SIGKILL, Ctrl-C) keeps what it committed and resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pglogic import PgLogic
from pglogic.store.db import connect
from tests.conftest import cli_in_process

pytestmark = [pytest.mark.db, pytest.mark.model]

N = 500
BATCH = 5


def _corpus_file(tmp_path: Path) -> Path:
    topics = ["coffee", "oil", "gold", "wheat", "interest rates", "shipping", "steel", "sugar"]
    path = tmp_path / "docs.jsonl"
    with path.open("w") as fh:
        for i in range(N):
            text = f"Report {i} on {topics[i % len(topics)]} markets and prices."
            fh.write(json.dumps({"id": f"doc-{i}", "text": text}) + "\n")
    return path


def _count(dsn: str) -> int:
    with connect(dsn) as c:
        row = c.execute("SELECT count(*) FROM pglogic.corpus_1").fetchone()
        assert row is not None
        return int(row[0])


def _default_sigint() -> None:
    # A job started in the background without job control (`cmd &` in a script, nohup) inherits
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler: Ctrl-C as a user at
    # a terminal sends it must reach the ingest however the test run itself was started.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(dsn: str, path: Path) -> subprocess.Popen[str]:
    exe = Path(sys.executable).with_name("pglogic")
    return subprocess.Popen(
        [str(exe), "--dsn", dsn, "ingest", "c", str(path), "--batch-size", str(BATCH)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint,
    )  # fmt: skip


def _wait_for_rows(dsn: str, proc: subprocess.Popen[str], at_least: int) -> None:
    deadline = time.monotonic() + 300
    with connect(dsn, autocommit=True, vector=False) as watcher:
        while True:
            row = watcher.execute("SELECT count(*) FROM pglogic.corpus_1").fetchone()
            if row is not None and row[0] >= at_least:
                return
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "ingest made no progress"
            time.sleep(0.01)


def _resume(dsn: str, path: Path, committed: int) -> None:
    """The same command again (in this process: the interrupted one was the real script)."""
    res = cli_in_process("--dsn", dsn, "ingest", "c", str(path), "--batch-size", str(BATCH))
    out = res.stdout
    assert res.returncode == 0, res.stderr
    assert f"{N:,} records: {N - committed:,} inserted, 0 updated, {committed:,} unchanged" in out
    assert f"{N - committed:,} embedded" in out
    assert _count(dsn) == N


def test_killed_ingest_keeps_whole_batches_and_resumes(dsn: str, tmp_path: Path) -> None:
    PgLogic(dsn).create_corpus("c")
    path = _corpus_file(tmp_path)
    proc = _start(dsn, path)
    _wait_for_rows(dsn, proc, 10 * BATCH)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    committed = _count(dsn)
    assert 0 < committed < N
    assert committed % BATCH == 0  # only whole batches were committed
    _resume(dsn, path, committed)


def test_ctrl_c_says_what_was_kept_and_resumes(dsn: str, tmp_path: Path) -> None:
    PgLogic(dsn).create_corpus("c")
    path = _corpus_file(tmp_path)
    proc = _start(dsn, path)
    _wait_for_rows(dsn, proc, 10 * BATCH)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "Interrupted:" in err and "run the same command again to resume" in err
    assert "Traceback" not in err
    committed = _count(dsn)
    assert 0 < committed < N and committed % BATCH == 0
    _resume(dsn, path, committed)
