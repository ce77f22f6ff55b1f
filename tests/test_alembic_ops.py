"""pglogic's corpus operations inside an application's own Alembic history (its own env.py)."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import URL

from pglogic.embed.registry import get_embedder
from pglogic.errors import SchemaError
from pglogic.integrations.alembic_ops import (
    AddCorpusEmbeddingOp,
    AlembicOpError,
    CreateCorpusHnswIndexOp,
    CreateCorpusOp,
    DropCorpusEmbeddingOp,
    DropCorpusHnswIndexOp,
    DropCorpusOp,
    SwitchCorpusEmbeddingOp,
)
from pglogic.store import admin, migrate
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record

A = "all-MiniLM-L6-v2"
B = "sentence-transformers/all-MiniLM-L6-v2"

ENV_PY = """
from alembic import context
from sqlalchemy import create_engine, pool

import pglogic.integrations.alembic_ops  # noqa: F401  (registers op.create_corpus & co.)

config = context.config
engine = create_engine(config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
with engine.connect() as connection:
    context.configure(
        connection=connection,
        version_table="app_alembic_version",
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()
"""

#: The application's history: a corpus, its index, then a second model switched in.
REVISIONS = {
    "a1": (
        None,
        """
        def upgrade():
            op.create_corpus("news", model="all-MiniLM-L6-v2", dim=384, description="app corpus")
            op.create_corpus_hnsw_index("news")

        def downgrade():
            op.drop_corpus_hnsw_index("news")
            op.drop_corpus("news")
        """,
    ),
    "a2": (
        "a1",
        """
        NEW = "sentence-transformers/all-MiniLM-L6-v2"

        def upgrade():
            op.add_corpus_embedding("news", NEW, 384)
            op.backfill_corpus_embedding("news", NEW, batch_size=4)
            op.create_corpus_hnsw_index("news", model=NEW, m=8, ef_construction=32)

        def downgrade():
            op.drop_corpus_embedding("news", NEW)
        """,
    ),
    "a3": (
        "a2",
        """
        from pglogic.integrations.alembic_ops import SwitchCorpusEmbeddingOp

        SWITCH = SwitchCorpusEmbeddingOp(
            "news", "sentence-transformers/all-MiniLM-L6-v2", from_model="all-MiniLM-L6-v2"
        )

        def upgrade():
            op.invoke(SWITCH)

        def downgrade():
            op.invoke(SWITCH.reverse())
        """,
    ),
}


def sqlalchemy_url(dsn: str) -> str:
    """A ``postgresql+psycopg://`` URL for a libpq DSN (Unix socket hosts go in the query)."""
    info = conninfo_to_dict(dsn)
    query = {k: str(info[k]) for k in ("host", "port") if info.get(k)}
    url = URL.create(
        "postgresql+psycopg",
        username=str(info["user"]) if info.get("user") else None,
        password=str(info["password"]) if info.get("password") else None,
        database=str(info["dbname"]),
        query=query,
    )
    return url.render_as_string(hide_password=False)


def make_env(root: Path, dsn: str, revisions: dict[str, tuple[str | None, str]]) -> Config:
    """Write an Alembic environment under ``root`` and return its config."""
    (root / "versions").mkdir(parents=True)
    (root / "env.py").write_text(ENV_PY)
    for rev, (down, body) in revisions.items():
        head = (
            f'"""Revision {rev}."""\nfrom alembic import op\n\n'
            f"revision = {rev!r}\ndown_revision = {down!r}\n"
            "branch_labels = None\ndepends_on = None\n"
        )
        (root / "versions" / f"{rev}.py").write_text(head + textwrap.dedent(body))
    cfg = Config(stdout=io.StringIO())
    cfg.set_main_option("script_location", str(root))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(dsn).replace("%", "%%"))
    return cfg


def state(dsn: str) -> dict[str, Any]:
    with connect(dsn) as c:
        app = c.execute("SELECT to_regclass('public.app_alembic_version')").fetchone()
        version = (
            c.execute("SELECT version_num FROM app_alembic_version").fetchall() if app[0] else []
        )
        return {
            "corpora": c.execute("SELECT name, table_name, description FROM pglogic.corpora")
            .fetchall(),
            "embeddings": c.execute(
                "SELECT model, column_name, is_active, index_name FROM pglogic.embeddings"
                " ORDER BY id"
            ).fetchall(),
            "tables": [r[0] for r in c.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'pglogic' ORDER BY 1")],
            "indexes": [r[0] for r in c.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'pglogic'"
                " AND indexname LIKE '%hnsw%' ORDER BY 1")],
            "app_version": [r[0] for r in version],
            "pglogic_version": migrate.current(dsn),
        }  # fmt: skip


@pytest.mark.db
@pytest.mark.model
def test_upgrade_and_downgrade_an_application_history(dsn: str, tmp_path: Path) -> None:
    cfg = make_env(tmp_path / "app", dsn, REVISIONS)
    empty = state(dsn)
    assert empty["corpora"] == [] and empty["pglogic_version"] == migrate.head()

    command.upgrade(cfg, "a1")
    s = state(dsn)
    assert s["corpora"] == [("news", "corpus_1", "app corpus")]
    assert s["embeddings"] == [(A, "embedding", True, "corpus_1_embedding_hnsw")]
    assert "corpus_1" in s["tables"] and s["indexes"] == ["corpus_1_embedding_hnsw"]
    assert s["app_version"] == ["a1"] and s["pglogic_version"] == migrate.head()

    with connect(dsn) as conn:  # the application writes some documents
        docs = [Record(f"d{i}", f"Document {i} about topic {i % 3}.", None) for i in range(10)]
        ingest_records(conn, get_corpus(conn, "news"), docs, embedder=get_embedder(A))

    command.upgrade(cfg, "head")
    s = state(dsn)
    assert s["app_version"] == ["a3"]
    assert s["embeddings"] == [
        (A, "embedding", False, "corpus_1_embedding_hnsw"),
        (B, "embedding_2", True, "corpus_1_embedding_2_hnsw"),
    ]
    assert s["indexes"] == ["corpus_1_embedding_2_hnsw", "corpus_1_embedding_hnsw"]
    with connect(dsn) as conn:
        assert get_corpus(conn, "news").column == "embedding_2"
        e = admin.get_embedding(conn, "news", B)
        assert (e.documents, e.embedded, e.index_params) == (
            10,
            10,
            {"m": 8, "ef_construction": 32},
        )

    command.downgrade(cfg, "a2")  # switch back (the reverse operation)
    assert state(dsn)["embeddings"][0] == (A, "embedding", True, "corpus_1_embedding_hnsw")
    command.downgrade(cfg, "a1")  # the second column is gone, the documents stay
    s = state(dsn)
    assert s["embeddings"] == [(A, "embedding", True, "corpus_1_embedding_hnsw")]
    assert s["indexes"] == ["corpus_1_embedding_hnsw"]
    with connect(dsn) as conn:
        assert admin.get_embedding(conn, "news").embedded == 10

    command.downgrade(cfg, "base")
    s = state(dsn)
    assert (s["corpora"], s["embeddings"], s["indexes"]) == ([], [], [])
    assert "corpus_1" not in s["tables"]
    assert s["app_version"] == [] and s["pglogic_version"] == migrate.head()


@pytest.mark.db
def test_without_the_pglogic_schema_the_operations_say_what_to_run(
    empty_dsn: str, tmp_path: Path
) -> None:
    cfg = make_env(tmp_path / "app", empty_dsn, {"a1": REVISIONS["a1"]})
    with pytest.raises(SchemaError, match=r"pglogic schema is not installed here; run 'pglogic db"):
        command.upgrade(cfg, "head")
    migrate.upgrade(empty_dsn)  # what the message says
    command.upgrade(cfg, "head")
    assert state(empty_dsn)["corpora"] == [("news", "corpus_1", "app corpus")]


@pytest.mark.db
def test_a_failing_revision_rolls_back_its_corpus_ddl(dsn: str, tmp_path: Path) -> None:
    bad = """
    def upgrade():
        op.create_corpus("half", model="m", dim=3)
        op.add_corpus_embedding("half", "m2", 3)
        op.switch_corpus_embedding("half", "m2")  # refused: no index yet

    def downgrade():
        op.drop_corpus("half")
    """
    cfg = make_env(tmp_path / "app", dsn, {"b1": (None, bad)})
    with pytest.raises(admin.AdminError, match="Refusing to switch corpus 'half' to 'm2'"):
        command.upgrade(cfg, "head")
    s = state(dsn)
    assert (s["corpora"], s["app_version"]) == ([], [])
    assert "corpus_1" not in s["tables"]


def test_reverse_operations() -> None:
    assert isinstance(CreateCorpusOp("n", "m", 3).reverse(), DropCorpusOp)
    create = DropCorpusOp("n", "m", 3, "d").reverse()
    assert (create.name, create.model, create.dim, create.description) == ("n", "m", 3, "d")
    add = DropCorpusEmbeddingOp("n", "m", 3).reverse()
    assert isinstance(add, AddCorpusEmbeddingOp) and (add.model, add.dim) == ("m", 3)
    assert isinstance(AddCorpusEmbeddingOp("n", "m", 3).reverse(), DropCorpusEmbeddingOp)
    drop_idx = CreateCorpusHnswIndexOp("n", "m", m=8, concurrently=False).reverse()
    assert isinstance(drop_idx, DropCorpusHnswIndexOp) and not drop_idx.concurrently
    assert DropCorpusHnswIndexOp("n", "m").reverse().model == "m"
    back = SwitchCorpusEmbeddingOp("n", "new", from_model="old").reverse()
    assert (back.model, back.from_model) == ("old", "new")
    for op in (
        DropCorpusOp("n"),
        DropCorpusEmbeddingOp("n", "m"),
        SwitchCorpusEmbeddingOp("n", "m"),
    ):
        with pytest.raises(AlembicOpError, match="is reversible only with"):
            op.reverse()
