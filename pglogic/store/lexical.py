"""A corpus's lexical index: the ``tsv`` column that ``match:"..."`` terms search.

The column is ``to_tsvector(config, coalesce(title, '') || ' ' || text)``, generated and stored
by PostgreSQL (so every insert and update of a document keeps it current: ingest needs no
change), with a GIN index that finds a term's matching documents. ``config`` is a text search
configuration (``english`` stems and drops stop words; ``simple`` keeps every word as it is),
recorded in ``pglogic.lexical_indexes``. This is PostgreSQL's built-in full-text search:
it runs on any PostgreSQL (the docker image, managed services), unlike an extension's BM25.

Example:
    >>> add_lexical_index(conn, corpus)  # doctest: +SKIP
    Corpus(..., lexical_config='english')
    >>> lexical_problems(conn, "english", ["wheat", "the"])  # doctest: +SKIP
    ['the']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import psycopg
from psycopg import sql

from pglogic.engine.compile import LEXICAL_COLUMN
from pglogic.engine.source import SCHEMA, Corpus
from pglogic.errors import InvalidInput
from pglogic.store.db import Connection

#: The text search configuration of a new corpus's lexical index.
DEFAULT_TEXT_CONFIG = "english"


def index_name(corpus: Corpus) -> str:
    """The name of the corpus's GIN index on ``tsv``.

    Example:
        >>> index_name(Corpus(3, "news", "corpus_3", "m", 3, "cosine", "embedding", None, None))
        'corpus_3_tsv'
    """
    return f"{corpus.table_name}_{LEXICAL_COLUMN}"


def check_config(conn: Connection, config: str) -> str:
    """The configuration's name as PostgreSQL spells it, or :class:`InvalidInput` naming the
    ones that exist.

    Example:
        >>> check_config(conn, "English")  # doctest: +SKIP
        'english'
    """
    if not config or "\x00" in config:
        raise InvalidInput(f"Invalid text search configuration {config!r}")
    row = conn.execute(
        "SELECT c.cfgname FROM pg_ts_config c WHERE c.cfgname = lower(%s)"
        " OR c.oid::regconfig::text = %s",
        (config, config),
    ).fetchone()
    if row is None:
        names = [r[0] for r in conn.execute("SELECT cfgname FROM pg_ts_config ORDER BY 1")]
        raise InvalidInput(
            f"Unknown text search configuration {config!r}: the server has {', '.join(names)}"
        )
    return str(row[0])


def add_lexical_index(
    conn: Connection,
    corpus: Corpus,
    config: str = DEFAULT_TEXT_CONFIG,
    *,
    on_step: Callable[[str], None] | None = None,
) -> Corpus:
    """Give ``corpus`` its lexical index (or rebuild it with another ``config``); commit.

    One transaction: the column, its GIN index and the catalog row appear together or not at
    all. Adding the column rewrites the table (every document's words are read once), so it
    takes about as long as copying the table, under a lock that holds searches and ingest.

    Example:
        >>> add_lexical_index(conn, corpus, "simple").lexical_config  # doctest: +SKIP
        'simple'
    """
    step = on_step or (lambda _msg: None)
    table = sql.Identifier(SCHEMA, corpus.table_name)
    tsv = sql.Identifier(LEXICAL_COLUMN)
    with conn.transaction():
        config = check_config(conn, config)
        conn.execute("SELECT 1 FROM pglogic.corpora WHERE id = %s FOR UPDATE", (corpus.id,))
        if corpus.lexical_config is not None or _has_column(conn, corpus):
            step("dropping the old lexical column")
            conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN IF EXISTS {}").format(table, tsv))
        step(f"computing every document's words ({config})")
        conn.execute(
            sql.SQL(
                "ALTER TABLE {table} ADD COLUMN {tsv} tsvector GENERATED ALWAYS AS"
                " (to_tsvector({config}::regconfig,"
                " coalesce(title, '') || ' ' || text)) STORED"
            ).format(table=table, tsv=tsv, config=sql.Literal(config))
        )
        step("building the GIN index")
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {} USING gin ({})").format(
                sql.Identifier(index_name(corpus)), table, tsv
            )
        )
        conn.execute(
            "INSERT INTO pglogic.lexical_indexes (corpus_id, config) VALUES (%s, %s)"
            " ON CONFLICT (corpus_id) DO UPDATE SET config = EXCLUDED.config",
            (corpus.id, config),
        )
    return _with_config(corpus, config)


def drop_lexical_index(conn: Connection, corpus: Corpus) -> Corpus:
    """Drop the corpus's lexical column and index (``match:`` terms are refused after); commit.

    Example:
        >>> drop_lexical_index(conn, corpus).lexical_config is None  # doctest: +SKIP
        True
    """
    with conn.transaction():
        conn.execute(
            sql.SQL("ALTER TABLE {} DROP COLUMN IF EXISTS {}").format(
                sql.Identifier(SCHEMA, corpus.table_name), sql.Identifier(LEXICAL_COLUMN)
            )
        )
        conn.execute("DELETE FROM pglogic.lexical_indexes WHERE corpus_id = %s", (corpus.id,))
    return _with_config(corpus, None)


def lexical_problems(conn: Connection, config: str, texts: Sequence[str]) -> list[str]:
    """The texts that hold no searchable word in ``config`` (only stop words or punctuation):
    such a term would match nothing.

    Example:
        >>> lexical_problems(conn, "english", ["wheat", "the", "C++"])  # doctest: +SKIP
        ['the']
    """
    if not texts:
        return []
    try:
        rows = conn.execute(
            "SELECT t FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, i)"
            " WHERE numnode(phraseto_tsquery(%s::regconfig, t)) = 0 ORDER BY i",
            (list(texts), config),
        ).fetchall()
    except psycopg.errors.UndefinedObject as exc:  # the configuration was dropped since
        raise InvalidInput(f"The corpus's text search configuration {config!r} is gone") from exc
    return [str(r[0]) for r in rows]


def _has_column(conn: Connection, corpus: Corpus) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = %s"
        " AND NOT attisdropped",
        (f"{SCHEMA}.{corpus.table_name}", LEXICAL_COLUMN),
    ).fetchone()
    return row is not None


def _with_config(corpus: Corpus, config: str | None) -> Corpus:
    return replace(corpus, lexical_config=config)
