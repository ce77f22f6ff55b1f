"""Migrations down and up again on a database with data in it lose nothing.

Two histories: pglogic's own (every step above the first, whatever revisions exist: data, and
the schema's catalog back at head) and an application's history that uses pglogic's corpus
operations on a corpus full of documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from psycopg import sql

from pglogic.embed.registry import get_embedder
from pglogic.engine.calibration import Calibration
from pglogic.errors import SchemaError
from pglogic.store import admin, calibration_store, migrate
from pglogic.store.corpus import build_index, create_corpus, get_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_records
from pglogic.store.lexical import drop_lexical_index
from pglogic.store.passages import PassageLayout
from pglogic.store.readers import Record
from pglogic.store.term_cache import cache_terms
from tests.conftest import squashed_revisions
from tests.test_alembic_ops import make_env
from tests.test_install import catalog, diff, revisions

pytestmark = [pytest.mark.db, pytest.mark.model]

A = "all-MiniLM-L6-v2"
B = "sentence-transformers/all-MiniLM-L6-v2"


def docs(n: int) -> list[Record]:
    return [
        Record(f"d{i}", f"Note {i}: {['rain', 'markets', 'music'][i % 3]} today.", f"T{i}",
               {"i": i, "tags": ["x", str(i % 2)]})
        for i in range(n)
    ]  # fmt: skip


def populate(conn: Connection) -> None:
    """Two corpora: one plain and indexed, one with a second (backfilled, indexed) model."""
    minilm = get_embedder(A)
    for name, n in (("plain", 12), ("switched", 8)):
        create_corpus(conn, name, model=A, dim=384, description=f"{name} corpus")
        ingest_records(conn, get_corpus(conn, name), docs(n), embedder=minilm)
        build_index(conn, name, m=8, ef_construction=32)
    admin.add_embedding(conn, "switched", model=B, dim=384)
    admin.backfill_embedding(conn, "switched", model=B, embedder=get_embedder(B))
    admin.build_embedding_index(conn, "switched", model=B)
    admin.switch_embedding(conn, "switched", model=B)


#: Tables whose rows are the migrations' own (their bookkeeping, the engine's defaults they
#: write), not data.
BOOKKEEPING = ("pglogic_alembic_version", "schema_compat", "defaults")


def registry(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table in schema pglogic other than the corpora's own (registry,
    passage layouts, lexical indexes, calibrations, term cache, ...), as text."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with connect(dsn) as c:
        tables = [
            str(r[0])
            for r in c.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'pglogic'::regnamespace"
                " AND relkind IN ('r', 'p') AND relname NOT LIKE 'corpus\\_%' ORDER BY 1"
            )
        ]
        for table in tables:
            if table in BOOKKEEPING:
                continue
            rows = c.execute(
                sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(
                    sql.Identifier("pglogic", table)
                )
            ).fetchall()
            if rows:  # an empty table and a missing one hold the same: nothing
                out[table] = rows
    return out


def snapshot(dsn: str) -> dict[str, Any]:
    """Every corpus row (vectors as text), every other pglogic table, the corpus indexes."""
    with connect(dsn) as c:
        out: dict[str, Any] = {
            "corpora": c.execute(
                "SELECT id, name, table_name, description, created_at FROM pglogic.corpora"
                " ORDER BY id"
            ).fetchall(),
            "embeddings": c.execute(
                "SELECT id, corpus_id, model, dim, distance, column_name, is_active, index_name,"
                " index_params, created_at FROM pglogic.embeddings ORDER BY id"
            ).fetchall(),
            "indexes": c.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'pglogic'"
                " AND tablename LIKE 'corpus\\_%' ORDER BY 1"
            ).fetchall(),
        }
        for _, _, table, _, _ in out["corpora"]:
            cols = [
                r[0]
                for r in c.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
                    " AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (f"pglogic.{table}",),
                )
            ]
            select = sql.SQL("SELECT {} FROM {} ORDER BY id").format(
                sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(x)) for x in cols),
                sql.Identifier("pglogic", table),
            )
            out[table] = (cols, c.execute(select).fetchall())
    out["registry"] = registry(dsn)
    return out


def fill_registry(dsn: str) -> None:
    """A row in each registry table that a downgrade could drop: a lexical index (the
    corpora have one already), a stored calibration and a term cache entry."""
    with connect(dsn) as conn:
        cal = Calibration(0.3, 12.0, "logistic", 10, 0.9)
        calibration_store.save_calibration(conn, A, cal, source="test")
        cache_terms(conn, get_corpus(conn, "plain"), ["rain"], embedder=get_embedder(A))


#: What a refused downgrade says to remove first, and how this test does it.
FIXES = {
    "pglogic.lexical_indexes": lambda conn: [
        drop_lexical_index(conn, get_corpus(conn, n)) for n in ("plain", "switched")
    ],
    "pglogic.calibration": lambda conn: conn.execute("DELETE FROM pglogic.calibration"),
    "pglogic.term_cache": lambda conn: conn.execute("DELETE FROM pglogic.term_cache"),
}


def test_every_pglogic_migration_step_round_trips_with_data(dsn: str) -> None:
    """Down one step and up again, from every revision: every pglogic table is as before, or
    the downgrade refuses (nothing applied), naming the rows it would lose and what to remove
    first; with that removed, the round trips go on below it."""
    with connect(dsn) as conn:
        populate(conn)
    fill_registry(dsn)
    before = snapshot(dsn)
    assert len(before["corpus_1"][1]) == 12 and len(before["corpus_2"][1]) == 8
    assert "embedding_2" in before["corpus_2"][0]
    assert {"lexical_indexes", "calibration", "term_cache"} <= set(before["registry"])

    schema = catalog(dsn)
    script = ScriptDirectory(str(migrate.script_location()))
    steps = [r for r in script.walk_revisions() if r.down_revision is not None]
    assert [r.revision for r in reversed(steps)] == revisions()[1:]  # every step
    assert migrate.current(dsn) == migrate.head()
    refused = []
    # newest first: from head down to just below each step, then back up; a revision that 0017
    # squashed is no stop, so below 0017 the one step down goes to 0001
    squashed = set(squashed_revisions())
    targets = [r.down_revision for r in steps if r.down_revision not in squashed]
    assert targets[-2:] == ["0017", "0001"]
    for down in targets:
        assert isinstance(down, str), f"merge revisions are not expected here: {down}"
        while True:
            try:
                migrate.downgrade(dsn, down)
            except SchemaError as exc:
                table = next((t for t in FIXES if f"would drop {t}," in str(exc)), None)
                assert table is not None, f"downgrade to {down}: unexpected {exc}"
                assert migrate.current(dsn) == migrate.head() and snapshot(dsn) == before
                refused.append((down, table))
                with connect(dsn) as conn:
                    FIXES[table](conn)
                    conn.commit()
                before, schema = snapshot(dsn), catalog(dsn)  # the corpora changed
                continue
            break
        assert migrate.current(dsn) == down
        assert snapshot(dsn) == before, f"downgrade to {down} changed data"
        migrate.upgrade(dsn, "head")
        assert snapshot(dsn) == before, f"upgrade {down} -> head changed data"
        again = catalog(dsn)
        assert again == schema, (f"down to {down} and up: the schema changed", diff(again, schema))
    assert refused == [  # (by 0007, 0004 and 0002 on the way down)
        ("0001", "pglogic.lexical_indexes"),
        ("0001", "pglogic.calibration"),
        ("0001", "pglogic.term_cache"),
    ]
    assert migrate.current(dsn) == migrate.head()
    with connect(dsn) as conn:  # and the corpora still work
        assert get_corpus(conn, "switched").column == "embedding_2"


def test_a_downgrade_refuses_to_orphan_passages(dsn: str) -> None:
    """A corpus split into passages: below 0009 nothing could read its passage table, so the
    downgrade refuses and changes nothing."""
    with connect(dsn) as conn:
        create_corpus(conn, "long", model=A, dim=384, passages=PassageLayout(128, 16, "words"))
    before = snapshot(dsn)
    assert before["registry"]["passage_layouts"]
    with pytest.raises(
        SchemaError, match=r"would drop pglogic\.passage_layouts, which holds 1 row"
    ):
        migrate.downgrade(dsn, "0001")
    assert migrate.current(dsn) == migrate.head() and snapshot(dsn) == before


def test_corpus_operations_round_trip_with_data(dsn: str, tmp_path: Path) -> None:
    """An application revision adds a model to a corpus full of documents; down removes only it."""
    with connect(dsn) as conn:
        create_corpus(conn, "docs", model=A, dim=384)
        ingest_records(conn, get_corpus(conn, "docs"), docs(30), embedder=get_embedder(A))
        build_index(conn, "docs")
    before = snapshot(dsn)
    revision = f"""
    def upgrade():
        op.add_corpus_embedding("docs", {B!r}, 384)
        op.backfill_corpus_embedding("docs", {B!r}, batch_size=7)
        op.create_corpus_hnsw_index("docs", model={B!r})

    def downgrade():
        op.drop_corpus_hnsw_index("docs", model={B!r})
        op.drop_corpus_embedding("docs", {B!r})
    """
    cfg = make_env(tmp_path / "app", dsn, {"e1": (None, revision)})

    command.upgrade(cfg, "head")
    up = snapshot(dsn)
    cols, rows = up["corpus_1"]
    assert cols[-1] == "embedding_2" and all(r[-1] is not None for r in rows)
    assert [r[:-1] for r in rows] == before["corpus_1"][1]  # the rest untouched
    assert ("corpus_1_embedding_2_hnsw",) in [(i[0],) for i in up["indexes"]]

    command.downgrade(cfg, "base")
    assert snapshot(dsn) == before  # documents, original vectors, registry, index

    command.upgrade(cfg, "head")  # and up again: the same vectors come back
    again = snapshot(dsn)
    assert again["corpus_1"] == up["corpus_1"]
    assert [e[2:9] for e in again["embeddings"]] == [e[2:9] for e in up["embeddings"]]
