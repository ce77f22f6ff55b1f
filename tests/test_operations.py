"""What a DBA relies on: where the version table lives, downgrades that lose nothing silently,
index repair that leaves other people's indexes alone, grants that can be applied again,
permission errors in one sentence, replication slots, and the rolling-deploy window.

Each test here failed before the fix it covers (docs/operations.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from pglogic import PgLogic
from pglogic.cli import cli
from pglogic.errors import PermissionDenied, SchemaError
from pglogic.store import corpus as corpora
from pglogic.store import indexes, migrate
from pglogic.store.db import connect
from pglogic.store.passages import PassageLayout
from tests.conftest import cli_in_process
from tests.test_install import run_as_psql

pytestmark = pytest.mark.db


def where_version_table(dsn: str) -> list[str]:
    with connect(dsn, autocommit=True, vector=False) as c:
        return [
            str(r[0])
            for r in c.execute(
                "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.relname = 'pglogic_alembic_version' ORDER BY 1"
            )
        ]


def invoke(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--dsn", dsn, *args])


@pytest.fixture
def reader(dsn: str) -> Iterator[str]:
    """A login role in pglogic_reader on ``dsn``'s server (dropped afterwards): its name."""
    name = f"reader_{uuid.uuid4().hex[:8]}"
    with connect(dsn, autocommit=True, vector=False) as c:
        c.execute(
            sql.SQL("CREATE ROLE {} LOGIN IN ROLE pglogic_reader").format(sql.Identifier(name))
        )
    yield name
    drop_roles(dsn, [name])


def drop_roles(dsn: str, roles: list[str]) -> None:
    with connect(dsn, autocommit=True, vector=False) as c:
        for name in roles:
            c.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
            c.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


# -- the version table ---------------------------------------------------------------------------


def test_the_version_table_lives_in_schema_pglogic(dsn: str) -> None:
    assert where_version_table(dsn) == ["pglogic"]
    assert migrate.current(dsn) == migrate.head()


def test_a_migrator_with_its_own_search_path_leaves_one_table_every_role_finds(
    empty_dsn: str,
) -> None:
    """Before 0018 the table landed in the first schema of the migrator's search_path, and every
    other role saw no pglogic. A pglogic at 0017 installed that way is adopted on upgrade."""
    name = f"mig_{uuid.uuid4().hex[:8]}"
    ident = sql.Identifier(name)
    with connect(empty_dsn, autocommit=True, vector=False) as c:
        dbname = c.info.dbname
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident))
        c.execute(
            sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(sql.Identifier(dbname), ident)
        )
        c.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident, ident))
        c.execute(sql.SQL("ALTER ROLE {} SET search_path = {}, public").format(ident, ident))
    mig = make_conninfo(empty_dsn, user=name)
    try:
        migrate.upgrade(mig, "0017")  # as an earlier pglogic did: the table in its own schema
        assert where_version_table(empty_dsn) == [name]
        assert migrate.current(empty_dsn) == "0017"  # found by every role, wherever it is
        migrate.upgrade(mig)
        assert where_version_table(empty_dsn) == ["pglogic"]
        assert migrate.current(empty_dsn) == migrate.head() == migrate.current(mig)
        migrate.downgrade(mig, "0017")  # where the pglogic of 0017 looks for it again
        assert where_version_table(empty_dsn) == [name]
    finally:
        with connect(empty_dsn, autocommit=True, vector=False) as c:
            c.execute(sql.SQL("DROP SCHEMA IF EXISTS pglogic CASCADE"))
        drop_roles(empty_dsn, [name])


def test_a_public_version_table_of_an_earlier_install_moves_into_the_schema(
    empty_dsn: str,
) -> None:
    migrate.upgrade(empty_dsn, "0017")
    assert where_version_table(empty_dsn) == ["public"]
    result = invoke(empty_dsn, "db", "upgrade")
    assert result.exit_code == 0, result.output
    assert where_version_table(empty_dsn) == ["pglogic"]
    assert f"Schema at revision {migrate.head()}" in result.output


# -- downgrades ----------------------------------------------------------------------------------


def test_downgrade_base_lists_outside_dependents_and_refuses_without_cascade(dsn: str) -> None:
    with connect(dsn, autocommit=True) as c:
        corpora.create_corpus(c, "news", model="m", dim=3, lexical=None)
        c.execute("CREATE VIEW public.recent AS SELECT name FROM pglogic.corpora")
        c.execute("CREATE TABLE public.notes (id int, corpus int REFERENCES pglogic.corpora(id))")
    result = invoke(dsn, "db", "downgrade", "base", "--yes")
    assert result.exit_code != 0
    assert "news (0 documents)" in result.output
    assert "view public.recent" in result.output
    assert "constraint notes_corpus_fkey on public.notes" in result.output
    assert "add --cascade" in str(result.exception)
    assert migrate.current(dsn) == migrate.head()  # nothing applied
    with pytest.raises(SchemaError, match="dropping schema pglogic would also drop"):
        migrate.downgrade(dsn, "base")  # the migration itself refuses too (Python, alembic)

    result = invoke(dsn, "db", "downgrade", "base", "--yes", "--cascade")
    assert result.exit_code == 0, result.output
    with connect(dsn, autocommit=True, vector=False) as c:
        row = c.execute(
            "SELECT to_regnamespace('pglogic'), to_regclass('public.recent'),"
            " (SELECT count(*) FROM pg_constraint WHERE conrelid = 'public.notes'::regclass)"
        ).fetchone()
    assert row == (None, None, 0)
    assert where_version_table(dsn) == []  # no empty version table left behind
    assert migrate.current(dsn) is None


def test_db_sql_writes_a_real_downgrade_script(dsn: str) -> None:
    below = migrate.resolve(dsn, "-1")
    assert below is not None
    script = migrate.upgrade_sql(migrate.head(), below)
    assert script.startswith(f"-- pglogic's schema from revision {migrate.head()} down to {below}")
    run_as_psql(dsn, script)
    assert migrate.current(dsn) == below
    run_as_psql(dsn, migrate.upgrade_sql(below))
    assert migrate.current(dsn) == migrate.head()


def test_relative_revisions_on_the_command_line(dsn: str) -> None:
    head = migrate.head()
    result = invoke(dsn, "db", "downgrade", "-1", "--yes")
    assert result.exit_code == 0, result.output
    below = migrate.current(dsn)
    assert below is not None and below < head
    result = invoke(dsn, "db", "upgrade", "+1")
    assert result.exit_code == 0, result.output
    assert migrate.current(dsn) == head


# -- indexes -------------------------------------------------------------------------------------


def test_index_repair_touches_only_pglogic_indexes(dsn: str) -> None:
    with connect(dsn, autocommit=True) as c:
        corpus = corpora.create_corpus(
            c, "docs", model="m", dim=3, lexical=None, passages=PassageLayout(128, 16, "words")
        )
        c.execute(
            sql.SQL(
                "INSERT INTO {} (external_id, title, text, text_hash, row_hash, embedding)"
                " VALUES ('a', 'A', 'same', '\\x00', '\\x00', '[1,0,0]'),"
                " ('b', 'B', 'same', '\\x00', '\\x00', '[0,1,0]')"
            ).format(corpus.table)
        )
        passages = sql.Identifier("pglogic", f"{corpus.table_name}_passages")
        c.execute(sql.SQL("CREATE INDEX dba_ord ON {} (ord)").format(passages))
        c.execute(sql.SQL("CREATE INDEX dba_ord_new ON {} (ord, doc_id)").format(passages))
        with pytest.raises(psycopg.errors.UniqueViolation):  # a DBA's failed build: invalid
            c.execute(
                sql.SQL("CREATE UNIQUE INDEX CONCURRENTLY dba_u ON {} (text)").format(corpus.table)
            )
        notes: list[str] = []
        done = corpora.repair_indexes(c, "docs", note=notes.append)
        found = {ix.name: ix.valid for ix in indexes._indexes(c, corpus).values()}
        found_p = {
            ix.name for ix in indexes._indexes(c, corpus, f"{corpus.table_name}_passages").values()
        }
    assert found["dba_u"] is False  # left alone, and said so
    assert "Index dba_u is invalid but not pglogic's: left alone" in notes
    assert {"dba_ord", "dba_ord_new"} <= found_p  # not swapped
    assert not any("dba_" in d for d in done)


# -- roles and grants ----------------------------------------------------------------------------


def test_db_grants_reapplies_the_reader_grants(dsn: str, reader: str) -> None:
    with connect(dsn, autocommit=True) as c:
        corpus = corpora.create_corpus(c, "docs", model="m", dim=3, lexical=None)
        table = f"pglogic.{corpus.table_name}"
        c.execute(sql.SQL("REVOKE SELECT ON {} FROM pglogic_reader").format(corpus.table))
        c.execute("REVOKE SELECT ON pglogic.pglogic_alembic_version FROM pglogic_reader")
    result = invoke(dsn, "db", "grants")
    assert result.exit_code == 0, result.output
    assert "pglogic_reader may read" in result.output
    with connect(dsn, autocommit=True, vector=False) as c:
        row = c.execute(
            "SELECT has_table_privilege('pglogic_reader', %s, 'SELECT'),"
            " has_table_privilege('pglogic_reader', 'pglogic.pglogic_alembic_version', 'SELECT'),"
            " has_table_privilege('pglogic_reader', %s, 'INSERT')",
            (table, table),
        ).fetchone()
    assert row == (True, True, False)
    result = invoke(make_conninfo(dsn, user=reader), "db", "grants")  # it would grant nothing
    assert isinstance(result.exception, PermissionDenied)
    assert str(result.exception).startswith(f"Role {reader} cannot grant on schema pglogic")


def test_a_reader_gets_one_sentence_naming_the_privilege(dsn: str, reader: str) -> None:
    with connect(dsn, autocommit=True, vector=False) as c:
        owner = c.execute("SELECT current_user").fetchone()
    out = cli_in_process("--dsn", make_conninfo(dsn, user=reader), "corpus", "create", "news",
                  "--model", "all-MiniLM-L6-v2")  # fmt: skip
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith(f"Error: Role {reader} is a member of pglogic_reader, which may ")
    assert "(permission denied for table corpora)" in out.stderr
    assert f"run this as {owner[0] if owner else ''}, the owner" in out.stderr


def test_a_writer_gets_the_grant_it_lacks(dsn: str) -> None:
    """A role that is no reader: the sentence names the privilege, the table and its owner."""
    from pglogic.store.db import permission_message

    name = f"etl_{uuid.uuid4().hex[:8]}"
    with connect(dsn, autocommit=True, vector=False) as c:
        c.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        c.execute(sql.SQL("GRANT USAGE ON SCHEMA pglogic TO {}").format(sql.Identifier(name)))
        owner = c.execute("SELECT current_user").fetchone()
    role_dsn = make_conninfo(dsn, user=name)
    try:
        with (
            connect(role_dsn, autocommit=True, vector=False) as c,
            pytest.raises(psycopg.errors.InsufficientPrivilege) as info,
        ):
            c.execute("INSERT INTO pglogic.corpora (name, table_name) VALUES ('x', 'y')")
        message = permission_message(info.value, role_dsn)
    finally:
        drop_roles(dsn, [name])
    assert message.startswith(f"Role {name} lacks SELECT, INSERT, UPDATE, DELETE on table ")
    assert f"{owner[0] if owner else ''} (the owner) or a superuser can grant it" in message


# -- replicas ------------------------------------------------------------------------------------


def test_server_drop_slot(dsn: str) -> None:
    slot = f"pglogic_gone_{uuid.uuid4().hex[:8]}"
    with connect(dsn, autocommit=True, vector=False) as c:
        c.execute("SELECT pg_create_physical_replication_slot(%s)", (slot,))
    result = invoke(dsn, "server", "drop-slot", slot, "--yes")
    assert result.exit_code == 0, result.output
    assert f"Dropped replication slot {slot}" in result.output
    with connect(dsn, autocommit=True, vector=False) as c:
        gone = c.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        assert gone.fetchone() is None
    result = invoke(dsn, "server", "drop-slot", slot, "--yes")
    assert result.exit_code != 0 and "No replication slot" in str(result.exception)


# -- the rolling-deploy window ------------------------------------------------------------------


def _pretend_newer(dsn: str, oldest_code: str) -> None:
    """The database as a newer pglogic (revision 9999) would leave it."""
    with connect(dsn, autocommit=True, vector=False) as c:
        c.execute("UPDATE pglogic.pglogic_alembic_version SET version_num = '9999'")
        c.execute("INSERT INTO pglogic.schema_compat VALUES ('9999', %s)", (oldest_code,))


def test_code_works_with_a_newer_schema_that_says_so(dsn: str) -> None:
    _pretend_newer(dsn, migrate.head())
    state = migrate.schema_state(dsn)
    assert state.usable and not state.behind
    with connect(dsn, autocommit=True) as c:
        corpora.create_corpus(c, "docs", model="m", dim=3, lexical=None)
    with PgLogic(dsn).connect() as conn:  # the schema check passes; the SQL function works
        rows = conn.execute(
            "SELECT count(*) FROM pglogic.search(%s, %s)",
            ("docs", Jsonb({"tree": {"term": "x", "vector": [1, 0, 0]}})),
        )
        assert rows.fetchone() == (0,)


def test_code_refuses_a_newer_schema_that_needs_newer_code(dsn: str) -> None:
    _pretend_newer(dsn, "9999")
    with pytest.raises(SchemaError, match="upgrade the pglogic package here"):
        PgLogic(dsn).connect()


def test_the_window_to_an_older_schema(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Code at head against a database one revision down: usable when the head revision is
    marked compatible with its previous one, else refused saying what to run."""
    head = migrate.head()
    migrate.downgrade(dsn, "-1")
    below = migrate.current(dsn)
    assert migrate.schema_state(dsn).usable == migrate.compatible_with_previous(head)
    monkeypatch.setattr(migrate, "compatible_with_previous", lambda revision: False)
    with pytest.raises(SchemaError, match=f"at schema revision {below}.*run 'pglogic db upgrade'"):
        PgLogic(dsn).connect()
    monkeypatch.setattr(migrate, "compatible_with_previous", lambda revision: True)
    assert migrate.schema_state(dsn).usable
    with PgLogic(dsn).connect() as conn:
        assert conn.execute("SELECT count(*) FROM pglogic.corpora").fetchone() == (0,)


def test_each_revision_records_its_window(dsn: str) -> None:
    """From 0018 on, each revision's row in pglogic.schema_compat follows its file's flag."""
    with connect(dsn, autocommit=True, vector=False) as c:
        rows = dict(c.execute("SELECT revision, oldest_code FROM pglogic.schema_compat").fetchall())
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate._config())
    for rev in script.walk_revisions():
        if rev.revision < "0018":
            continue
        want = rev.down_revision if migrate.compatible_with_previous(rev.revision) else rev.revision
        assert rows[rev.revision] == want


def test_a_corpus_whose_table_is_missing_is_named(dsn: str) -> None:
    """After a restore that failed halfway (a -n pglogic dump without the vector extension)."""
    with connect(dsn, autocommit=True) as c:
        corpus = corpora.create_corpus(c, "docs", model="m", dim=3, lexical=None)
        c.execute(sql.SQL("DROP TABLE {}").format(corpus.table))
    result = invoke(dsn, "corpus", "list")
    assert isinstance(result.exception, SchemaError)
    assert "table pglogic.corpus_1 is missing" in str(result.exception)
    result = invoke(dsn, "corpus", "drop", "docs", "--yes")
    assert result.exit_code == 0, result.output


def test_a_reader_may_run_db_upgrade_when_there_is_nothing_to_do(dsn: str, reader: str) -> None:
    """Before, the first statement (CREATE SCHEMA IF NOT EXISTS) needed CREATE on the database."""
    result = invoke(make_conninfo(dsn, user=reader), "db", "upgrade")
    assert result.exit_code == 0, result.output
    assert f"Schema at revision {migrate.head()}" in result.output


def test_a_missing_vector_extension_is_named(dsn: str) -> None:
    with connect(dsn, autocommit=True) as c:
        corpora.create_corpus(c, "docs", model="m", dim=3, lexical=None)
        c.execute("DROP EXTENSION vector CASCADE")
    result = invoke(dsn, "search", "docs", '"x"')
    assert isinstance(result.exception, SchemaError)
    assert "the vector extension is not" in str(result.exception)


def test_a_reader_search_skips_the_term_cache_without_a_word(
    dsn: str, reader: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A reader's search stores no new term vectors (it may not), and says nothing about it:
    before, psycopg logged "error ignored terminating <Pipeline ...>" on stderr."""
    from pglogic.store.term_cache import remember_term_vectors

    with connect(dsn, autocommit=True) as c:
        corpora.create_corpus(c, "docs", model="m", dim=3, lexical=None)
    with connect(make_conninfo(dsn, user=reader)) as conn:
        corpus = corpora.get_corpus(conn, "docs")
        with caplog.at_level("WARNING"):
            written = remember_term_vectors(conn, corpus, {"a": [1.0, 0, 0], "b": [0, 1.0, 0]})
    assert written == 0
    assert not [r for r in caplog.records if r.name.startswith("psycopg")]
