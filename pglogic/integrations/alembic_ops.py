"""Corpus DDL as Alembic operations, for an application's own Alembic history.

Importing this module registers ``op.create_corpus``, ``op.drop_corpus``,
``op.add_corpus_embedding``, ``op.drop_corpus_embedding``, ``op.backfill_corpus_embedding``,
``op.create_corpus_hnsw_index``, ``op.drop_corpus_hnsw_index`` and
``op.switch_corpus_embedding``. Each operation has a :meth:`reverse` where one is meaningful
(``DropCorpusOp`` and ``DropCorpusEmbeddingOp`` need ``model``/``dim`` for that).

The registry and corpus tables are created by pglogic's own migrations: run ``pglogic db
upgrade`` first (its version table is ``pglogic_alembic_version``, so it never collides with
yours); without it these operations raise :class:`~pglogic.errors.SchemaError`. They need a live
connection through the psycopg 3 driver (``postgresql+psycopg://``), not ``--sql`` mode. The
concurrent index build and the backfill run in ``autocommit_block()``, which commits what the
migration did before them; use ``transaction_per_migration=True`` in your env.py.

Example (a revision in your ``versions/``; import ``pglogic.integrations.alembic_ops`` in env.py)::

    def upgrade():
        op.create_corpus("news", model="all-MiniLM-L6-v2", dim=384)
        op.create_corpus_hnsw_index("news")

    def downgrade():
        op.drop_corpus("news")
"""

from __future__ import annotations

from typing import Any

import psycopg
from alembic.operations import MigrateOperation, Operations
from pgvector.psycopg import register_vector
from psycopg.pq import TransactionStatus

from pglogic.errors import PglogicError
from pglogic.store import admin
from pglogic.store import corpus as corpora
from pglogic.store.db import Connection, require_schema


class AlembicOpError(PglogicError):
    """A pglogic Alembic operation that cannot run here (offline mode, wrong driver, no reverse)."""


def _conn(operations: Operations) -> Connection:
    """The psycopg connection under Alembic's, in its transaction, with the schema checked."""
    if operations.get_context().as_sql:
        raise AlembicOpError(
            "pglogic corpus operations need a database connection; they cannot run in "
            "offline (--sql) mode"
        )
    raw = operations.get_bind().connection.dbapi_connection
    if not isinstance(raw, psycopg.Connection):
        raise AlembicOpError(
            "pglogic corpus operations need the psycopg 3 driver: use a "
            f"'postgresql+psycopg://' URL (got {type(raw).__module__})"
        )
    require_schema(raw)  # also opens the transaction that Alembic commits
    return raw


@Operations.register_operation("create_corpus")
class CreateCorpusOp(MigrateOperation):
    """``op.create_corpus(name, model, dim, description="")``; reverse: drop it.

    Example:
        >>> CreateCorpusOp("news", "all-MiniLM-L6-v2", 384).reverse().name
        'news'
    """

    def __init__(self, name: str, model: str, dim: int, description: str = "") -> None:
        self.name = name
        self.model = model
        self.dim = dim
        self.description = description

    @classmethod
    def create_corpus(
        cls, operations: Operations, name: str, model: str, dim: int, description: str = ""
    ) -> Any:
        """Create corpus ``name`` (table, registry rows) for ``dim``-d vectors of ``model``."""
        return operations.invoke(cls(name, model, dim, description))

    def reverse(self) -> DropCorpusOp:
        return DropCorpusOp(self.name, self.model, self.dim, self.description)


@Operations.register_operation("drop_corpus")
class DropCorpusOp(MigrateOperation):
    """``op.drop_corpus(name, model=None, dim=None)``; reversible when ``model`` and ``dim`` given.

    Example:
        >>> DropCorpusOp("news", "all-MiniLM-L6-v2", 384).reverse().dim
        384
    """

    def __init__(
        self, name: str, model: str | None = None, dim: int | None = None, description: str = ""
    ) -> None:
        self.name = name
        self.model = model
        self.dim = dim
        self.description = description

    @classmethod
    def drop_corpus(
        cls,
        operations: Operations,
        name: str,
        model: str | None = None,
        dim: int | None = None,
        description: str = "",
    ) -> Any:
        """Drop corpus ``name`` with its documents."""
        return operations.invoke(cls(name, model, dim, description))

    def reverse(self) -> CreateCorpusOp:
        if self.model is None or self.dim is None:
            raise AlembicOpError(
                f"drop_corpus({self.name!r}) is reversible only with model= and dim="
            )
        return CreateCorpusOp(self.name, self.model, self.dim, self.description)


@Operations.register_operation("add_corpus_embedding")
class AddCorpusEmbeddingOp(MigrateOperation):
    """``op.add_corpus_embedding(name, model, dim)``: a new inactive column; reverse: drop it.

    Example:
        >>> AddCorpusEmbeddingOp("news", "m2", 768).reverse().model
        'm2'
    """

    def __init__(self, name: str, model: str, dim: int) -> None:
        self.name = name
        self.model = model
        self.dim = dim

    @classmethod
    def add_corpus_embedding(cls, operations: Operations, name: str, model: str, dim: int) -> Any:
        """Add an empty, inactive embedding column for ``model`` to corpus ``name``."""
        return operations.invoke(cls(name, model, dim))

    def reverse(self) -> DropCorpusEmbeddingOp:
        return DropCorpusEmbeddingOp(self.name, self.model, self.dim)


@Operations.register_operation("drop_corpus_embedding")
class DropCorpusEmbeddingOp(MigrateOperation):
    """``op.drop_corpus_embedding(name, model, dim=None)``; refused for the active embedding.

    Example:
        >>> DropCorpusEmbeddingOp("news", "m2", 768).reverse().dim
        768
    """

    def __init__(self, name: str, model: str, dim: int | None = None) -> None:
        self.name = name
        self.model = model
        self.dim = dim

    @classmethod
    def drop_corpus_embedding(
        cls, operations: Operations, name: str, model: str, dim: int | None = None
    ) -> Any:
        """Drop the (inactive) ``model`` column of corpus ``name``."""
        return operations.invoke(cls(name, model, dim))

    def reverse(self) -> AddCorpusEmbeddingOp:
        if self.dim is None:
            raise AlembicOpError(
                f"drop_corpus_embedding({self.name!r}, {self.model!r}) is reversible only with dim="
            )
        return AddCorpusEmbeddingOp(self.name, self.model, self.dim)


@Operations.register_operation("backfill_corpus_embedding")
class BackfillCorpusEmbeddingOp(MigrateOperation):
    """``op.backfill_corpus_embedding(name, model, batch_size=256)``: embed the NULL rows.

    Runs in an autocommit block with one commit per batch, so a failed upgrade resumes. No
    reverse (dropping the column undoes it).

    Example:
        >>> BackfillCorpusEmbeddingOp("news", "m2").batch_size
        256
    """

    def __init__(self, name: str, model: str, batch_size: int = 256) -> None:
        self.name = name
        self.model = model
        self.batch_size = batch_size

    @classmethod
    def backfill_corpus_embedding(
        cls, operations: Operations, name: str, model: str, batch_size: int = 256
    ) -> Any:
        """Embed (with ``model``, loaded locally) every document lacking a ``model`` vector."""
        return operations.invoke(cls(name, model, batch_size))


@Operations.register_operation("create_corpus_hnsw_index")
class CreateCorpusHnswIndexOp(MigrateOperation):
    """``op.create_corpus_hnsw_index(name, model=None, m=16, ef_construction=128, concurrently=True)``.

    ``model`` None means the active embedding. Reverse: drop the index.

    Example:
        >>> CreateCorpusHnswIndexOp("news").reverse().concurrently
        True
    """

    def __init__(
        self,
        name: str,
        model: str | None = None,
        m: int = corpora.DEFAULT_M,
        ef_construction: int = corpora.DEFAULT_EF_CONSTRUCTION,
        concurrently: bool = True,
    ) -> None:
        self.name = name
        self.model = model
        self.m = m
        self.ef_construction = ef_construction
        self.concurrently = concurrently

    @classmethod
    def create_corpus_hnsw_index(
        cls,
        operations: Operations,
        name: str,
        model: str | None = None,
        m: int = corpora.DEFAULT_M,
        ef_construction: int = corpora.DEFAULT_EF_CONSTRUCTION,
        concurrently: bool = True,
    ) -> Any:
        """Build the HNSW cosine index of ``model``'s column (CONCURRENTLY by default)."""
        return operations.invoke(cls(name, model, m, ef_construction, concurrently))

    def reverse(self) -> DropCorpusHnswIndexOp:
        return DropCorpusHnswIndexOp(self.name, self.model, self.concurrently)


@Operations.register_operation("drop_corpus_hnsw_index")
class DropCorpusHnswIndexOp(MigrateOperation):
    """``op.drop_corpus_hnsw_index(name, model=None, concurrently=True)``; reverse: build it.

    Example:
        >>> DropCorpusHnswIndexOp("news", "m2").reverse().m
        16
    """

    def __init__(self, name: str, model: str | None = None, concurrently: bool = True) -> None:
        self.name = name
        self.model = model
        self.concurrently = concurrently

    @classmethod
    def drop_corpus_hnsw_index(
        cls, operations: Operations, name: str, model: str | None = None, concurrently: bool = True
    ) -> Any:
        """Drop the HNSW index of ``model``'s column, if any."""
        return operations.invoke(cls(name, model, concurrently))

    def reverse(self) -> CreateCorpusHnswIndexOp:
        return CreateCorpusHnswIndexOp(self.name, self.model, concurrently=self.concurrently)


@Operations.register_operation("switch_corpus_embedding")
class SwitchCorpusEmbeddingOp(MigrateOperation):
    """``op.switch_corpus_embedding(name, model, from_model=None)``: make ``model`` active.

    Refused while the column has NULLs or no index. Reverse (with ``from_model``): switch back.

    Example:
        >>> SwitchCorpusEmbeddingOp("news", "m2", from_model="m1").reverse().model
        'm1'
    """

    def __init__(self, name: str, model: str, from_model: str | None = None) -> None:
        self.name = name
        self.model = model
        self.from_model = from_model

    @classmethod
    def switch_corpus_embedding(
        cls, operations: Operations, name: str, model: str, from_model: str | None = None
    ) -> Any:
        """Make ``model`` the embedding that serves searches of corpus ``name``."""
        return operations.invoke(cls(name, model, from_model))

    def reverse(self) -> SwitchCorpusEmbeddingOp:
        if self.from_model is None:
            raise AlembicOpError(
                f"switch_corpus_embedding({self.name!r}, {self.model!r}) is reversible only "
                "with from_model="
            )
        return SwitchCorpusEmbeddingOp(self.name, self.from_model, self.model)


@Operations.implementation_for(CreateCorpusOp)
def _create_corpus(operations: Operations, op: CreateCorpusOp) -> None:
    corpora.create_corpus(
        _conn(operations), op.name, model=op.model, dim=op.dim, description=op.description
    )


@Operations.implementation_for(DropCorpusOp)
def _drop_corpus(operations: Operations, op: DropCorpusOp) -> None:
    corpora.drop_corpus(_conn(operations), op.name)


@Operations.implementation_for(AddCorpusEmbeddingOp)
def _add_corpus_embedding(operations: Operations, op: AddCorpusEmbeddingOp) -> None:
    admin.add_embedding(_conn(operations), op.name, model=op.model, dim=op.dim, lock_timeout=None)


@Operations.implementation_for(DropCorpusEmbeddingOp)
def _drop_corpus_embedding(operations: Operations, op: DropCorpusEmbeddingOp) -> None:
    admin.drop_embedding(_conn(operations), op.name, model=op.model, lock_timeout=None)


@Operations.implementation_for(BackfillCorpusEmbeddingOp)
def _backfill_corpus_embedding(operations: Operations, op: BackfillCorpusEmbeddingOp) -> None:
    from pglogic.embed.registry import get_embedder

    _conn(operations)  # fail early (schema, driver) before the commit of autocommit_block
    with operations.get_context().autocommit_block():
        conn = _autocommit_conn(operations)
        register_vector(conn)
        admin.backfill_embedding(
            conn,
            op.name,
            model=op.model,
            embedder=get_embedder(op.model),
            batch_size=op.batch_size,
        )


def _autocommit_conn(operations: Operations) -> Connection:
    conn = _conn(operations)
    if not conn.autocommit and conn.info.transaction_status == TransactionStatus.INTRANS:
        conn.commit()  # require_schema's read; Alembic's autocommit block has no transaction
    return conn


@Operations.implementation_for(CreateCorpusHnswIndexOp)
def _create_corpus_hnsw_index(operations: Operations, op: CreateCorpusHnswIndexOp) -> None:
    def build(conn: Connection) -> None:
        admin.build_embedding_index(
            conn,
            op.name,
            model=op.model,
            m=op.m,
            ef_construction=op.ef_construction,
            concurrently=op.concurrently,
        )

    if op.concurrently:
        _conn(operations)
        with operations.get_context().autocommit_block():
            build(_autocommit_conn(operations))
    else:
        build(_conn(operations))


@Operations.implementation_for(DropCorpusHnswIndexOp)
def _drop_corpus_hnsw_index(operations: Operations, op: DropCorpusHnswIndexOp) -> None:
    if op.concurrently:
        _conn(operations)
        with operations.get_context().autocommit_block():
            admin.drop_embedding_index(
                _autocommit_conn(operations), op.name, model=op.model, concurrently=True
            )
    else:
        admin.drop_embedding_index(_conn(operations), op.name, model=op.model, concurrently=False)


@Operations.implementation_for(SwitchCorpusEmbeddingOp)
def _switch_corpus_embedding(operations: Operations, op: SwitchCorpusEmbeddingOp) -> None:
    admin.switch_embedding(_conn(operations), op.name, model=op.model, lock_timeout=None)


__all__ = [
    "AddCorpusEmbeddingOp",
    "AlembicOpError",
    "BackfillCorpusEmbeddingOp",
    "CreateCorpusHnswIndexOp",
    "CreateCorpusOp",
    "DropCorpusEmbeddingOp",
    "DropCorpusHnswIndexOp",
    "DropCorpusOp",
    "SwitchCorpusEmbeddingOp",
]
