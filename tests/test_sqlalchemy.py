"""The SQLAlchemy helper on a user-defined model that pglogic did not create (real model, real DB)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pgvector.sqlalchemy import Vector
from sqlalchemy import ForeignKey, String, create_engine, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    mapped_column,
    relationship,
    selectinload,
)

from pglogic import PgLogic
from pglogic.engine.operators import evaluate_numpy, resolve_family
from pglogic.errors import InvalidInput
from pglogic.integrations.sqlalchemy import execute, execute_async, logical_search, url_from_dsn
from pglogic.query import parse

pytestmark = [pytest.mark.db, pytest.mark.model]


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "authors"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(50))
    country: Mapped[str] = mapped_column(String(2))


class Article(Base):
    __tablename__ = "articles"
    id: Mapped[int] = mapped_column(primary_key=True)
    body: Mapped[str]
    lang: Mapped[str] = mapped_column(String(2))
    author_id: Mapped[int] = mapped_column(ForeignKey("authors.id"))
    embedding: Mapped[Any] = mapped_column(Vector(384))
    author: Mapped[Author] = relationship()


TOPICS = {
    "coffee": [
        "Brewing espresso coffee at home",
        "Coffee bean roasting levels explained",
        "Cold brew coffee recipe",
        "Arabica versus robusta coffee beans",
    ],
    "tea": [
        "Green tea steeping temperature",
        "How to brew black tea properly",
        "Matcha tea ceremony basics",
    ],
    "coffee+tea": [
        "Coffee or tea: which has more caffeine",
        "Mixing coffee and tea in a yuanyang drink",
    ],
    "cars": [
        "Changing the oil in your car",
        "Electric cars and battery range",
        "Winter tyres for safer driving",
        "How a turbocharger works in a car engine",
    ],
    "space": [
        "The James Webb telescope images galaxies",
        "Mars rover finds ancient lake bed",
        "How rockets reach orbit",
    ],
}


@pytest.fixture
def engine_url(dsn: str, minilm: Any) -> Iterator[str]:
    url = url_from_dsn(dsn).render_as_string(hide_password=False)
    engine = create_engine(url)
    Base.metadata.create_all(engine)
    texts = [(topic, t) for topic, items in TOPICS.items() for t in items]
    # many German car articles far from the query, and only a few German coffee articles
    texts += [
        ("cars", f"Autowerkstatt Bericht Nummer {i}: Reifenwechsel und Motoröl") for i in range(40)
    ]
    vectors = minilm.embed([t for _, t in texts])
    with Session(engine) as s:
        s.add_all([Author(id=1, name="Ana", country="CH"), Author(id=2, name="Bo", country="SE")])
        for i, ((_topic, body), vec) in enumerate(zip(texts, vectors, strict=True), 1):
            lang = "de" if body.startswith("Autowerkstatt") or i in (2, 3, 6) else "en"
            s.add(Article(id=i, body=body, lang=lang, author_id=1 + i % 2, embedding=vec))
        s.commit()
        s.execute(text("CREATE INDEX ON articles USING hnsw (embedding vector_cosine_ops)"))
        s.commit()
    yield url
    engine.dispose()


def _expected(engine_url: str, query: str, minilm: Any, where: str = "TRUE") -> list[int]:
    engine = create_engine(engine_url)
    with engine.connect() as c:
        stmt = select(Article.id, Article.embedding).where(text(where)).order_by(Article.id)
        rows = c.execute(stmt).all()
    engine.dispose()
    ids = np.array([r[0] for r in rows])
    mat = np.stack([np.asarray(r[1], dtype=np.float64) for r in rows])
    from pglogic.engine.conjunction import DEFAULT_AND_TEXT, scored_terms, with_and_texts

    texts = scored_terms(parse(query), DEFAULT_AND_TEXT)
    tree = with_and_texts(parse(query), DEFAULT_AND_TEXT)  # the default engine's score
    from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, with_context

    embedded = dict(zip(texts, minilm.embed(texts), strict=True))
    scored = with_context(parse(query), embedded, DEFAULT_NOT_CONTEXT)  # a NOT against its AND
    tv = np.stack([np.asarray(scored[t], dtype=np.float64) for t in texts])
    sims = {t: mat @ tv[i] / np.linalg.norm(mat, axis=1) / np.linalg.norm(tv[i])
            for i, t in enumerate(texts)}  # fmt: skip
    score = evaluate_numpy(tree, sims, resolve_family(None))
    order = np.lexsort((ids, -score))
    return [int(i) for i in ids[order]]


def test_orm_select_ranks_like_the_reference(engine_url: str, minilm: Any) -> None:
    q = '"coffee" AND NOT "tea"'
    stmt = logical_search(Article, Article.embedding, q, k=5, embedder=minilm)
    assert stmt.pglogic_terms == ("coffee", "tea")
    engine = create_engine(engine_url)
    with Session(engine, expire_on_commit=False) as s, s.begin():
        rows = execute(s, stmt)
    engine.dispose()
    assert len(rows) == 5
    article, score, sim_coffee, sim_tea = rows[0]
    assert isinstance(article, Article) and "offee" in article.body and "tea" not in article.body
    # the default family: product, max and NOT (1 - x)^1.25
    assert score == pytest.approx(
        max(0, min(1, sim_coffee)) * (1 - max(0, min(1, sim_tea))) ** 1.25
    )
    assert [r[0].id for r in rows] == _expected(engine_url, q, minilm)[:5]
    assert [r.score for r in rows] == sorted((r.score for r in rows), reverse=True)


def test_settings_hold_for_the_search_only(engine_url: str, minilm: Any) -> None:
    """The rest of the caller's transaction keeps its own settings (old code left the search's
    SET LOCAL hnsw.ef_search in force until commit)."""
    stmt = logical_search(Article, Article.embedding, '"coffee" AND "tea"', k=3, embedder=minilm)
    assert stmt.pglogic_compiled().settings["hnsw.ef_search"] != "77"
    engine = create_engine(engine_url)
    with Session(engine) as s, s.begin():
        s.execute(text("SELECT '[1]'::vector"))  # pgvector loaded: its settings exist
        s.execute(text("SET LOCAL hnsw.ef_search = 77"))
        before = s.execute(text("SHOW plan_cache_mode")).scalar()
        assert len(execute(s, stmt)) == 3
        assert s.execute(text("SHOW hnsw.ef_search")).scalar() == "77"
        assert s.execute(text("SHOW plan_cache_mode")).scalar() == before
        assert s.execute(text("SHOW hnsw.iterative_scan")).scalar() == "off"
    with Session(engine) as s, s.begin():  # a fresh session: pgvector's settings not yet defined
        assert len(execute(s, stmt)) == 3
        assert s.execute(text("SHOW hnsw.ef_search")).scalar() == "40"
    engine.dispose()


def test_plain_execution_is_refused(engine_url: str, minilm: Any) -> None:
    """session.execute(stmt) would scan at the session's ef_search: refused with a clear error."""
    stmt = logical_search(Article, Article.embedding, '"coffee"', k=3, embedder=minilm)
    engine = create_engine(engine_url)
    want = r"use pglogic\.integrations\.sqlalchemy\.execute"
    with Session(engine) as s, s.begin(), pytest.raises(InvalidInput, match=want):
        s.execute(stmt)
    with engine.connect() as c, pytest.raises(InvalidInput, match="must run with its settings"):
        c.execute(stmt)
    engine.dispose()


def test_user_filter_goes_inside_the_candidate_ctes(engine_url: str, minilm: Any) -> None:
    stmt = logical_search(Article, Article.embedding, '"coffee"', k=3, embedder=minilm, depth=3)
    filtered = stmt.where(Article.lang == "de")
    sql = str(filtered.compile(dialect=postgresql.psycopg.dialect()))
    cte = sql[sql.index("MATERIALIZED") : sql.index("LIMIT")]
    assert "articles.lang = " in cte  # the condition is in the HNSW CTE, not after it
    engine = create_engine(engine_url)
    with Session(engine, expire_on_commit=False) as s, s.begin():
        rows = execute(s, filtered)
    engine.dispose()
    # depth=3 with a post-filter would find no German article among the top 3 coffee hits
    assert len(rows) == 3
    assert all(r[0].lang == "de" for r in rows)
    assert [r[0].id for r in rows] == _expected(engine_url, '"coffee"', minilm, "lang = 'de'")[:3]


def test_joins_and_options_still_work(engine_url: str, minilm: Any) -> None:
    stmt = (
        logical_search(Article, Article.embedding, '"coffee" OR "tea"', k=10, embedder=minilm)
        .join(Author)
        .where(Author.country == "CH")
        .options(selectinload(Article.author))
    )
    engine = create_engine(engine_url)
    with Session(engine, expire_on_commit=False) as s, s.begin():
        rows = execute(s, stmt)
        assert rows and all(r[0].author.country == "CH" for r in rows)
    engine.dispose()


def test_a_short_approximate_result_is_completed_by_an_exact_pass(
    engine_url: str, minilm: Any, dsn: str
) -> None:
    """depth=1: the OR's two scans find at most 2 candidates for k=6; execute scores every row
    then, and returns the exact top 6 (sync and async). A statement that drops ranked rows
    itself (a condition on a joined table) or asks for fewer (OFFSET) is not run again."""
    from sqlalchemy import event

    q = '"coffee" OR "tea"'
    stmt = logical_search(Article, Article.embedding, q, k=6, embedder=minilm, depth=1)
    engine = create_engine(engine_url)
    searches: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "pglogic_ranked" in statement:
            searches.append("index" if "MATERIALIZED" in statement else "exact")

    want = _expected(engine_url, q, minilm)[:6]
    with Session(engine, expire_on_commit=False) as s, s.begin():
        assert [r[0].id for r in execute(s, stmt)] == want
        assert searches == ["index", "exact"]
        searches.clear()
        assert len(execute(s, stmt.join(Author).where(Author.country == "CH"))) < 6
        assert len(execute(s, stmt.offset(1))) < 6
        assert searches == ["index", "index"]
        searches.clear()
        wide = logical_search(Article, Article.embedding, q, k=6, embedder=minilm)
        assert [r[0].id for r in execute(s, wide)] == want
        assert searches == ["index"]  # deep enough: one statement
    engine.dispose()

    async def run() -> list[Any]:
        aengine = create_async_engine(url_from_dsn(dsn, async_=True))
        maker = async_sessionmaker(aengine, expire_on_commit=False)
        async with maker() as s, s.begin():
            rows = await execute_async(s, stmt)
        await aengine.dispose()
        return rows

    assert [r[0].id for r in asyncio.run(run())] == want


def test_async_session(engine_url: str, minilm: Any, dsn: str) -> None:
    async def run() -> list[Any]:
        engine = create_async_engine(url_from_dsn(dsn, async_=True))
        maker = async_sessionmaker(engine, expire_on_commit=False)
        async with maker() as s, s.begin():
            stmt = logical_search(Article, Article.embedding, '"space" AND NOT "rockets"', k=3,
                                  embedder=minilm)  # fmt: skip
            rows = await execute_async(s, stmt)
        await engine.dispose()
        return rows

    rows = asyncio.run(run())
    assert len(rows) == 3
    assert [r[0].id for r in rows] == _expected(engine_url, '"space" AND NOT "rockets"', minilm)[:3]


def test_core_table_of_a_pglogic_corpus(dsn: str, minilm: Any) -> None:
    from sqlalchemy import Column, Integer, MetaData, Table
    from sqlalchemy.dialects.postgresql import JSONB

    pl = PgLogic(dsn)
    c = pl.create_corpus("notes")
    import json
    import tempfile
    from pathlib import Path

    path = Path(tempfile.mkdtemp()) / "n.jsonl"
    docs = [
        "Sourdough bread baking",
        "Rye bread with seeds",
        "Stepper motor wiring",
        "Servo control",
    ]
    path.write_text(
        "".join(json.dumps({"id": f"n{i}", "text": t}) + "\n" for i, t in enumerate(docs))
    )
    pl.ingest("notes", path)
    pl.build_index("notes")
    docs_table = Table(
        c.table_name, MetaData(), Column("id", Integer, primary_key=True),
        Column("external_id", String), Column("metadata", JSONB), Column("embedding", Vector(384)),
        schema="pglogic",
    )  # fmt: skip
    stmt = logical_search(docs_table, docs_table.c.embedding, '"bread" AND NOT "rye"', k=2,
                          embedder=minilm)  # fmt: skip
    engine = create_engine(url_from_dsn(dsn))
    with Session(engine, expire_on_commit=False) as s, s.begin():
        rows = execute(s, stmt)
    engine.dispose()
    assert rows[0].external_id == "n0"
    assert pl.search("notes", '"bread" AND NOT "rye"', k=2).hits[0].score == pytest.approx(
        rows[0].score
    )


def test_hostile_terms_are_parameters(engine_url: str, minilm: Any) -> None:
    q = '"x\'); DROP TABLE articles; --" AND NOT "$$ \\\\ select"'
    stmt = logical_search(Article, Article.embedding, q, k=2, embedder=minilm)
    engine = create_engine(engine_url)
    with Session(engine, expire_on_commit=False) as s, s.begin():
        rows = execute(s, stmt)
    with Session(engine) as s:
        assert (
            s.execute(text("SELECT count(*) FROM articles")).scalar_one()
            == sum(map(len, TOPICS.values())) + 40
        )
    engine.dispose()
    assert len(rows) == 2


@pytest.mark.parametrize(
    ("vector", "problem"),
    [
        ([0.0, 0.0, 0.0], "is a zero vector (no direction: its cosine similarity is undefined)"),
        ([1.0, float("nan"), 0.0], "has a NaN or infinite component (component 2)"),
        ([1.0, 0.0, 1e39], "has a NaN or infinite component (component 3)"),  # past float32
    ],
)
def test_a_zero_or_nan_vector_is_refused_when_the_statement_is_built(
    vector: list[float], problem: str
) -> None:
    """As the search and ingest refuse them; before, a zero vector became NaN with a NumPy
    warning and failed only when the statement ran, as a DataError."""
    from sqlalchemy import Column, Integer, MetaData, Table

    table = Table("docs", MetaData(), Column("id", Integer, primary_key=True),
                  Column("embedding", Vector(3)))  # fmt: skip
    vectors = {"a": [1.0, 0.0, 0.0], "b": vector}
    with pytest.raises(InvalidInput) as info:
        logical_search(table, table.c.embedding, '"a" AND NOT "b"', vectors=vectors)
    assert str(info.value) == f"The vector for 'b' {problem}"
    assert logical_search(table, table.c.embedding, '"a"', vectors=vectors) is not None
