"""The SQLAlchemy helper's reading of a statement, through SQLAlchemy's public API (no database).

Which conditions go inside the candidate scans, when a short result is run again exactly (a
plain ranking: its own LIMIT k, no OFFSET, no join or condition of its own) and which
statements a :class:`RoutedSession` sends to the replica. The two private SQLAlchemy attributes
the helper reads, each in one small function (``_locks_rows``: a select's FOR UPDATE;
``_flushing``: whether a session flushes), are pinned here: these tests fail if SQLAlchemy moves
them. (SQLite in memory stands in for the primary and the replica: no Postgres needed.)
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy
from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ForeignKey,
    String,
    and_,
    bindparam,
    create_engine,
    event,
    func,
    literal_column,
    or_,
    select,
    text,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    joinedload,
    mapped_column,
    relationship,
    selectinload,
)

from pglogic.integrations.sqlalchemy import (
    LogicalSelect,
    RoutedSession,
    _flushing,
    _locks_rows,
    _plain_ranking,
    _reads_only,
    _short,
    logical_search,
)


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "api_authors"
    id: Mapped[int] = mapped_column(primary_key=True)
    country: Mapped[str] = mapped_column(String(2))


class Article(Base):
    __tablename__ = "api_articles"
    id: Mapped[int] = mapped_column(primary_key=True)
    lang: Mapped[str] = mapped_column(String(2))
    words: Mapped[Any] = mapped_column(postgresql.TSVECTOR)
    author_id: Mapped[int] = mapped_column(ForeignKey("api_authors.id"))
    embedding: Mapped[Any] = mapped_column(Vector(3))
    author: Mapped[Author] = relationship()


VECTORS = {"a": [1.0, 0.0, 0.0], "b": [0.0, 1.0, 0.0]}
K = 6


def search(query: str = '"a" OR "b"', **kw: Any) -> LogicalSelect:
    return logical_search(Article, Article.embedding, query, k=K, vectors=VECTORS, **kw)


def compiled_sql(stmt: Any) -> str:
    return str(stmt.compile(dialect=postgresql.psycopg.dialect()))  # type: ignore[no-untyped-call]


def test_conditions_on_the_searched_table_go_inside_the_scans_the_others_after() -> None:
    stmt = search().where(Article.lang == "de").where(Author.country == "CH", Article.id < 40)
    assert len(stmt.pglogic_pushed) == 2
    assert stmt.whereclause is not None and "api_authors.country" in str(stmt.whereclause)
    sql = compiled_sql(stmt)
    ranking, outer = sql.split("AS pglogic_ranked", 1)
    assert "api_articles.lang = " in ranking and "api_articles.id < " in ranking
    assert "api_articles.lang" not in outer and "api_authors.country = " in outer
    # a condition on both tables is one condition: it filters the ranked rows
    both = search().where(and_(Article.lang == "de", Author.country == "CH"))
    assert both.pglogic_pushed == () and both.whereclause is not None
    assert search().filter(Article.lang == "de").pglogic_pushed  # filter() is where()


def test_an_or_among_the_pushed_conditions_keeps_its_parentheses() -> None:
    """``.where(a OR b, c)`` is (a OR b) AND c inside the scans, not a OR (b AND c)."""
    stmt = search().where(or_(Article.lang == "de", Article.id == 1), Article.id < 40)
    ranking = compiled_sql(stmt).split("AS pglogic_ranked", 1)[0]
    assert "((api_articles.lang = " in ranking
    assert "api_articles.id = %(id_1)s::INTEGER) AND api_articles.id < " in ranking


@pytest.mark.parametrize(
    ("change", "plain"),
    [
        (lambda s: s, True),
        (lambda s: s.limit(K), True),
        (lambda s: s.slice(0, K), True),
        (lambda s: s.offset(0), True),
        (lambda s: s.where(Article.lang == "de"), True),  # pushed into the scans
        (lambda s: s.options(selectinload(Article.author)), True),
        (lambda s: s.options(joinedload(Article.author)), True),
        (lambda s: s.limit(K + 1), False),
        (lambda s: s.limit(K - 1), False),
        (lambda s: s.limit(bindparam("n", K)), False),  # a parameter: the statement's own
        (lambda s: s.limit(literal_column(str(K))), False),
        (lambda s: s.offset(1), False),
        (lambda s: s.slice(1, K + 1), False),
        (lambda s: s.fetch(K), False),
        (lambda s: s.limit(None), False),
        (lambda s: s.join(Author), False),
        (lambda s: s.outerjoin(Author), False),
        (lambda s: s.join(Author, full=True), False),
        (lambda s: s.join_from(Article, Author), False),
        (lambda s: s.outerjoin_from(Article, Author), False),
        (lambda s: s.where(Author.country == "CH"), False),
    ],
)
def test_a_plain_ranking_is_its_own_limit_k_without_joins_or_conditions_of_its_own(
    change: Any, plain: bool
) -> None:
    stmt = change(search())
    assert isinstance(stmt, LogicalSelect)
    assert _plain_ranking(stmt) is plain
    assert _short(stmt, []) is plain
    assert _short(stmt, [()] * K) is False  # k rows: nothing to complete


def test_the_engine_rule_decides_first() -> None:
    """needs_exact_pass: an exact statement, or candidates from lexical scans only, are final."""
    assert _short(search(exact=True), []) is False
    lexical = search('match:wheat AND NOT "a"', lexical_column=Article.words)
    assert _plain_ranking(lexical) and _short(lexical, []) is False
    assert _short(search('"a" OR match:wheat', lexical_column=Article.words), [()] * (K - 1))


def test_the_join_count_survives_every_generative_copy() -> None:
    stmt = search()
    assert stmt.pglogic_joins == 1  # the ranking's own
    copied = stmt.order_by(Article.id).limit(K).where(Article.lang == "de").execution_options()
    assert isinstance(copied, LogicalSelect) and copied.pglogic_joins == 1
    assert copied.join(Author).limit(K).pglogic_joins == 2


def test_the_for_update_clause_is_read_where_sqlalchemy_keeps_it() -> None:
    """The helper's one private read (``_locks_rows``): if SQLAlchemy moves a select's FOR
    UPDATE / FOR SHARE clause, this fails (an AttributeError, or a missed lock)."""
    plain = select(Article)
    assert not _locks_rows(plain)
    for locked in (
        plain.with_for_update(),
        plain.with_for_update(read=True),
        plain.with_for_update(nowait=True, of=Article),
        plain.with_for_update(skip_locked=True, key_share=True),
        search().with_for_update(),
    ):
        assert _locks_rows(locked), (sqlalchemy.__version__, locked)
        assert " FOR " in compiled_sql(locked)
    assert _reads_only(search()) and _reads_only(plain)
    assert not _reads_only(plain.with_for_update()) and not _reads_only(text("SELECT 1"))


class NoteBase(DeclarativeBase):
    pass


class Note(NoteBase):
    __tablename__ = "notes"
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str]


def test_a_flush_is_seen_and_its_transaction_reads_from_the_primary() -> None:
    """``_flushing``, the other private read: True inside a flush and a bulk save, so that a
    :class:`RoutedSession` sends them to the primary and the transaction's reads after them."""
    primary, replica = create_engine("sqlite://"), create_engine("sqlite://")
    for engine in (primary, replica):
        NoteBase.metadata.create_all(engine)
    count = select(func.count()).select_from(Note)
    seen: list[bool] = []
    with RoutedSession(primary=primary, replica=replica) as s:
        event.listen(s, "before_flush", lambda session, *_: seen.append(_flushing(session)))
        assert not _flushing(s) and s.get_bind(clause=count) is replica
        s.add(Note(id=1, body="x"))
        s.flush()
        assert seen == [True] and not _flushing(s)
        assert s.get_bind(clause=count) is primary and s.scalar(count) == 1  # read your writes
        s.commit()
        assert s.get_bind(clause=count) is replica and s.scalar(count) == 0  # (not replicated)
        s.bulk_save_objects([Note(id=2, body="y")])  # no flush event: the flag alone
        assert s.get_bind(clause=count) is primary and s.scalar(count) == 2
        s.commit()
    primary.dispose()
    replica.dispose()
