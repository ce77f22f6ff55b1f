"""The SQLAlchemy helper over an application's own passage table (real Postgres, real HNSW).

An application keeps its documents (``articles``) and their passages (``article_passages``: one
row and one vector per passage, a foreign key to the article) in its own tables; a logical
search takes each term's best passage per document. Hand-written 3-d vectors show the SQL and
the operators (filters inside the passage scans, the HNSW index of the passages, equality with
exact scoring and with a NumPy reference); the real all-MiniLM-L6-v2 shows a NOT seeing a
paragraph past the model's window.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.sqlalchemy import Vector
from sqlalchemy import Computed, ForeignKey, String, UniqueConstraint, create_engine, insert, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from pglogic.embed.passages import split, tokenizer_of
from pglogic.engine.conjunction import and_texts
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, projected, with_context
from pglogic.engine.operators import evaluate_numpy, resolve_family
from pglogic.errors import InvalidInput
from pglogic.integrations.sqlalchemy import execute, logical_search, url_from_dsn
from pglogic.query import negated_only_terms, parse
from tests.conftest import TEMPLATE_DB, Server, uses_hnsw
from tests.long_texts import FILLER, WHEAT


class Base(DeclarativeBase):
    pass


class Article(Base):
    __tablename__ = "articles"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str]
    body: Mapped[str]
    lang: Mapped[str] = mapped_column(String(2))
    words: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', body)", persisted=True)
    )
    embedding: Mapped[Any] = mapped_column(Vector(3))  # the first passage's, as a model reads it


class ArticlePassage(Base):
    __tablename__ = "article_passages"
    __table_args__ = (UniqueConstraint("article_id", "ord"),)  # serves the join to the articles
    id: Mapped[int] = mapped_column(primary_key=True)
    article_id: Mapped[int] = mapped_column(ForeignKey("articles.id", ondelete="CASCADE"))
    ord: Mapped[int]
    vec: Mapped[Any] = mapped_column(Vector(3))  # not named like the articles' column


# Term vectors: x, y and z are the three axes. Each article: title, language, body, passages.
TERMS = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}
ARTICLES: dict[int, tuple[str, str, str, list[tuple[float, float, float]]]] = {
    1: ("long", "en", "x at length, then wheat", [(1, 0, 0.1), (0.9, 0.1, 0.2), (0.05, 1, 0.1)]),
    2: ("pure-x", "en", "x only", [(0.95, 0.05, 0.3)]),
    3: ("x-de", "de", "x auf Deutsch", [(0.9, 0, 0.4), (0.8, 0.1, 0.5)]),
    4: ("y", "en", "y only", [(0, 1, 0)]),
    5: ("mixed-de", "de", "x and y", [(0.6, 0.8, 0)]),
    6: ("z", "en", "z only", [(0.1, 0, 1)]),
    7: ("z-long", "en", "z at length", [(0, 0.01, 1), (0.01, 0, 1), (0.01, 0.01, 1)]),
}
#: Articles of random directions all over the sphere: rows enough for the planner to scan the
#: HNSW index, and a graph without isolated points (had the fillers left the region of x and y
#: empty, the few articles there would be outliers that HNSW scans do not reach).
FILLERS = 4000
MINE = 100  # the articles above (ids below MINE); `Article.id < MINE` keeps only them
QUERIES = ['"x" AND NOT "y"', '("x" OR "z") AND NOT "y"', '"y"', '"z"']


def _all_articles() -> dict[int, tuple[str, str, str, list[Any]]]:
    rng = np.random.default_rng(7)
    out = dict(ARTICLES)
    for i in range(FILLERS):
        vecs = [tuple(v / np.linalg.norm(v)) for v in rng.normal(size=(3, 3))]
        out[MINE + i] = (f"filler {i}", "de" if i % 10 == 0 else "en", "filler", vecs)
    return out


@pytest.fixture(scope="module")
def db(pg_server: Server) -> Iterator[str]:
    """A database with the application's tables, filled, the passages indexed (HNSW)."""
    name = f"t_sap_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        url = url_from_dsn(pg_server.dsn_for(name)).render_as_string(hide_password=False)
        engine = create_engine(url)
        Base.metadata.create_all(engine)
        articles, passages = [], []
        for aid, (title, lang, body, vecs) in _all_articles().items():
            rows = [[float(x) for x in v] for v in vecs]
            articles.append({"id": aid, "title": title, "body": body, "lang": lang,
                             "embedding": rows[0]})  # fmt: skip
            passages += [{"article_id": aid, "ord": o, "vec": v} for o, v in enumerate(rows)]
        with Session(engine) as s:
            s.execute(insert(Article), articles)
            s.execute(insert(ArticlePassage), passages)
            s.commit()
            s.execute(text("CREATE INDEX article_passages_vec_hnsw ON article_passages "
                           "USING hnsw (vec vector_cosine_ops)"))  # fmt: skip
            s.execute(text("ANALYZE articles"))
            s.execute(text("ANALYZE article_passages"))
            s.commit()
        engine.dispose()
        yield pg_server.dsn_for(name)
    finally:
        janitor.drop()


def _rows(dsn: str, stmt: Any) -> list[Any]:
    engine = create_engine(url_from_dsn(dsn))
    with Session(engine, expire_on_commit=False) as s, s.begin():
        rows = execute(s, stmt)
    engine.dispose()
    return rows


def _reference(
    query: str, lang: str | None = None, mine: bool = False, how: str = "blend-not-or"
) -> list[tuple[int, float]]:
    """(article id, score) by NumPy: each term's similarity the best over the passages (with
    ``how="blend"``, and ``"blend-not"`` / ``"blend-not-or"``, the default, when a term is
    negated, a positive term's is the mean of that and the article's own vector's; with
    ``"blend-not-or"`` in a formula with neither a NOT nor an AND, 0.9 of that and 0.1 of the
    own vector's)."""
    tree = parse(query)
    negated_only = set(negated_only_terms(tree))
    blend = how == "blend" or (how in ("blend-not", "blend-not-or") and bool(negated_only))
    tenth = how == "blend-not-or" and not negated_only and not and_texts(tree)
    scored = with_context(tree, TERMS, DEFAULT_NOT_CONTEXT)  # a NOT against its AND
    ids: list[int] = []
    sims: dict[str, list[float]] = {t: [] for t in TERMS}
    for aid, (_, alang, _, vecs) in _all_articles().items():
        if (lang is not None and alang != lang) or (mine and aid >= MINE):
            continue
        ids.append(aid)
        mat = np.asarray(vecs, dtype=np.float64)
        mat /= np.linalg.norm(mat, axis=1, keepdims=True)
        for t in TERMS:
            v = np.asarray(scored[t], dtype=np.float64)
            best = float((mat @ v).max())
            own = float(mat[0] @ v)  # the own vector: the first passage's
            if blend and t not in negated_only:
                best = (best + own) / 2
            elif tenth:
                best = (best * 9 + own) / 10
            sims[t].append(best)
    score = evaluate_numpy(tree, {t: np.array(s) for t, s in sims.items()}, resolve_family(None))
    order = np.lexsort((np.array(ids), -score))
    return [(ids[i], float(score[i])) for i in order]


def search(query: str, **kw: Any) -> Any:
    kw.setdefault("passages", ArticlePassage)
    return logical_search(Article, Article.embedding, query, vectors=TERMS, **kw)


# -- the statement (no database) --------------------------------------------------------------


def test_the_statement_scans_the_passages_and_takes_each_articles_best() -> None:
    stmt = search('"x" OR "z"', k=3).where(Article.lang == "de")
    sql = str(stmt.compile(dialect=postgresql.psycopg.dialect()))
    scan = sql[sql.index("MATERIALIZED") : sql.index("LIMIT")]
    assert 'FROM "article_passages" p JOIN "articles" ON "articles"."id" = "p"."article_id"' in scan
    assert "articles.lang = " in scan  # the filter is inside the passages' scan
    assert 'ORDER BY "p"."vec" <=>' in scan
    assert 'max(coalesce(nullif(1 - ("p"."vec" <=>' in sql and 'GROUP BY "articles"."id"' in sql
    # the same statement from the Core table, or from the table's name and column names
    table = ArticlePassage.__table__
    for passages, kw in [
        (table, {}),
        (ArticlePassage, {"passage_doc": ArticlePassage.article_id,
                          "passage_embedding": ArticlePassage.vec}),
        ("article_passages", {"passage_doc": "article_id", "passage_embedding": "vec"}),
    ]:  # fmt: skip
        other = search('"x" OR "z"', k=3, passages=passages, **kw).where(Article.lang == "de")
        assert str(other.compile(dialect=postgresql.psycopg.dialect())) == sql
    named = search('"x"', passages="app.article_passages", passage_embedding="vec")
    assert 'FROM "app"."article_passages" p' in named.pglogic_compiled().as_string()
    without = logical_search(Article, Article.embedding, '"x" OR "z"', vectors=TERMS)
    assert "article_passages" not in without.pglogic_compiled().as_string()


def test_unclear_passage_tables_are_refused() -> None:
    from sqlalchemy import Column, Integer, MetaData, Table

    meta = MetaData()
    loose = Table("loose", meta, Column("id", Integer, primary_key=True),
                  Column("article", Integer), Column("vec", Vector(3)))  # fmt: skip
    with pytest.raises(InvalidInput, match="Which column of 'loose' holds the document"):
        search('"x"', passages=loose)
    assert "loose" in search('"x"', passages=loose, passage_doc="article").pglogic_compiled().text
    two = Table("two", meta, Column("id", Integer, primary_key=True), Column("doc_id", Integer),
                Column("a", Vector(3)), Column("b", Vector(3)))  # fmt: skip
    with pytest.raises(InvalidInput, match="holds the passages' vectors"):
        search('"x"', passages=two)
    wide = Table("wide", meta, Column("id", Integer, primary_key=True), Column("doc_id", Integer),
                 Column("vec", Vector(5)))  # fmt: skip
    with pytest.raises(InvalidInput, match="has 5 dimensions, the documents' 3"):
        search('"x"', passages=wide)
    with pytest.raises(InvalidInput, match="no such column"):
        search('"x"', passage_doc="nope")
    with pytest.raises(InvalidInput, match="must be a column of the passage table"):
        search('"x"', passage_embedding=Article.embedding)
    with pytest.raises(InvalidInput, match="need passages="):
        search('"x"', passages=None, passage_doc="article_id")
    with pytest.raises(InvalidInput, match="another table than the documents'"):
        search('"x"', passages=Article)
    with pytest.raises(InvalidInput, match="give passage_embedding="):
        logical_search(Article, None, '"x"', vectors=TERMS, passages="article_passages")
    with pytest.raises(InvalidInput, match="dimension is unknown"):
        logical_search(Article, None, '"x"', vectors=TERMS, passages="article_passages",
                       passage_embedding="vec")  # fmt: skip
    with pytest.raises(InvalidInput, match="Give the embedding column"):
        logical_search(Article, None, '"x"', vectors=TERMS)


# -- real Postgres, hand-written vectors --------------------------------------------------------


def test_a_late_passage_counts_and_rows_match_the_reference(db: str) -> None:
    q = '"x" AND NOT "y"'
    mine = Article.id < MINE  # a filter on the articles: inside every scan of the passages
    over = _rows(db, search(q, k=5).where(mine))
    single = _rows(
        db, logical_search(Article, Article.embedding, q, k=5, vectors=TERMS).where(mine)
    )
    # the article's own vector is its first passage's: without passages "long" wins
    assert single[0][0].title == "long"
    # over passages its third passage is about y, and the NOT sees it
    assert [r[0].title for r in over] == ["pure-x", "x-de", "z", "mixed-de", "z-long"]
    ref = _reference(q, mine=True)
    assert [r[0].id for r in over] == [i for i, _ in ref[:5]]
    assert [r.score for r in over] == pytest.approx([s for _, s in ref[:5]], abs=1e-6)
    (long_,) = _rows(db, search(q, k=1).where(Article.title == "long"))
    y = np.array([0.05, 1, 0.1]) / np.linalg.norm([0.05, 1, 0.1])
    assert long_.sim_1 == pytest.approx(float(y[1]), abs=1e-6)  # its third passage's
    assert long_.score == pytest.approx(dict(ref)[1], abs=1e-6) and long_.score < 0.01


def test_approximate_equals_exact_and_the_reference(db: str) -> None:
    for q in QUERIES:
        for lang in (None, "de"):
            stmt, exact = search(q, k=6), search(q, k=6, exact=True)
            if lang is not None:
                stmt, exact = stmt.where(Article.lang == lang), exact.where(Article.lang == lang)
            got, want = _rows(db, stmt), _rows(db, exact)
            assert [r[0].id for r in got] == [r[0].id for r in want], (q, lang)
            assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-6)
            ref = _reference(q, lang)[:6]
            assert [r[0].id for r in got] == [i for i, _ in ref], (q, lang)
            assert [r.score for r in got] == pytest.approx([s for _, s in ref], abs=1e-6)
            assert len({r[0].id for r in got}) == 6  # an article once, however many passages
            if lang is not None:
                assert all(r[0].lang == lang for r in got)


def test_blend_takes_the_mean_of_the_best_passage_and_the_articles_own_vector(db: str) -> None:
    """``passage_score="blend"``: a positive term's similarity is the mean of its best passage's
    and the article's own vector's, a negated term's its best passage's (as the NumPy
    reference); approximate and exact agree; without the articles' own vectors it is refused."""
    for q in QUERIES:
        got = _rows(db, search(q, k=6, passage_score="blend"))
        want = _rows(db, search(q, k=6, passage_score="blend", exact=True))
        ref = _reference(q, how="blend")[:6]
        assert [r[0].id for r in got] == [r[0].id for r in want] == [i for i, _ in ref], q
        assert [r.score for r in got] == pytest.approx([s for _, s in ref], abs=1e-6)
    (long_,) = _rows(db, search('"x" AND NOT "y"', k=1, passage_score="blend")
                     .where(Article.title == "long"))  # fmt: skip
    y = np.array([0.05, 1, 0.1]) / np.linalg.norm([0.05, 1, 0.1])
    x0 = np.array([1, 0, 0.1]) / np.linalg.norm([1, 0, 0.1])
    assert long_.sim_0 == pytest.approx(float(x0[0]), abs=1e-6)  # first passage = own vector
    assert long_.sim_1 == pytest.approx(float(y[1]), abs=1e-6)  # negated: the best passage
    with pytest.raises(InvalidInput, match=r"blend.*own embedding column"):
        logical_search(Article, None, '"x"', vectors=TERMS, passages=ArticlePassage,
                       passage_score="blend")  # fmt: skip


def test_the_default_blends_with_a_not_and_takes_the_best_passage_without(db: str) -> None:
    """With the articles' own vectors the default is the engine's, ``blend-not-or``: as
    ``blend`` in a formula with a negated term, a tenth of the own vector with one term (the
    NumPy references); without them it is ``max``."""
    for q in QUERIES:
        got = _rows(db, search(q, k=6))
        ref = _reference(q)[:6]
        assert [r[0].id for r in got] == [i for i, _ in ref], q
        assert [r.score for r in got] == pytest.approx([s for _, s in ref], abs=1e-6)
        other = [s for _, s in _reference(q, how="blend" if "NOT" in q else "max")[:6]]
        if "NOT" in q:
            assert [r.score for r in got] == pytest.approx(other, abs=1e-6)
        else:  # one term: not the best passage's alone
            assert [r.score for r in got] != pytest.approx(other, abs=1e-6)
    own_less = logical_search(Article, None, '"x" AND NOT "y"', vectors=TERMS,
                              passages=ArticlePassage, k=6)  # fmt: skip
    assert own_less.pglogic_spec.options.passage_score == "max"
    # asked for explicitly: refused where it cannot apply
    for how in ("blend", "blend-not", "blend-not-or"):
        with pytest.raises(InvalidInput, match=f'"{how}" needs the documents\' own embedding'):
            logical_search(Article, None, '"x"', vectors=TERMS, passages=ArticlePassage,
                           passage_score=how)  # fmt: skip
        with pytest.raises(InvalidInput, match=f'"{how}" needs passages='):
            logical_search(Article, Article.embedding, '"x"', vectors=TERMS, passage_score=how)
    # without passages the default is accepted (it changes nothing there)
    plain = logical_search(Article, Article.embedding, '"x"', vectors=TERMS)
    assert plain.pglogic_spec.options.passage_score == "blend-not-or"


class _NullableBase(DeclarativeBase):
    pass


class NullableArticle(_NullableBase):
    """The articles table mapped with a nullable own vector (``Article`` maps it NOT NULL)."""

    __tablename__ = "articles"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str]
    embedding: Mapped[Any | None] = mapped_column(Vector(3))


def test_an_article_without_its_own_vector_blends_to_its_best_passage(db: str) -> None:
    """Under a blend, an article whose own vector is NULL takes its best passage alone (not half
    of it): "x-de"'s best passage for "z" is its second, (0.8, 0.1, 0.5). A NOT NULL column
    keeps the plain statement."""
    z_best = 0.5 / float(np.linalg.norm([0.8, 0.1, 0.5]))
    z_own = 0.4 / float(np.linalg.norm([0.9, 0.0, 0.4]))  # the first passage
    q = '"z" AND NOT "y"'

    def nullable(exact: bool) -> Any:
        return logical_search(
            NullableArticle, NullableArticle.embedding, q, vectors=TERMS, k=6, exact=exact,
            passages="article_passages", passage_doc="article_id", passage_embedding="vec",
        ).where(NullableArticle.title == "x-de")  # fmt: skip

    dialect = postgresql.psycopg.dialect()
    case = 'CASE WHEN "articles"."embedding" IS NULL THEN "b"."s0"'
    assert case in str(nullable(False).compile(dialect=dialect))
    assert "CASE WHEN" not in str(search(q, k=6).compile(dialect=dialect))
    with psycopg.connect(db, autocommit=True) as conn:
        (own,) = conn.execute("SELECT embedding FROM articles WHERE title = 'x-de'").fetchone()
        conn.execute("ALTER TABLE articles ALTER COLUMN embedding DROP NOT NULL")
    try:
        for exact in (False, True):
            (row,) = _rows(db, nullable(exact))
            assert row.sim_0 == pytest.approx((z_best + z_own) / 2, abs=1e-6)
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("UPDATE articles SET embedding = NULL WHERE title = 'x-de'")
        for exact in (False, True):
            (row,) = _rows(db, nullable(exact))
            assert row.sim_0 == pytest.approx(z_best, abs=1e-6), exact
    finally:
        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("UPDATE articles SET embedding = %s WHERE title = 'x-de'", (own,))
            conn.execute("ALTER TABLE articles ALTER COLUMN embedding SET NOT NULL")


def test_a_disjunction_finds_the_top_k_articles_not_passages(db: str) -> None:
    q = '"z" OR "y"'
    got = _rows(db, search(q, k=3).where(Article.id < MINE))
    want = _rows(db, search(q, k=3, exact=True).where(Article.id < MINE))
    assert [r[0].title for r in want] == ["y", "z-long", "z"]
    assert [r[0].title for r in got] == [r[0].title for r in want]


def test_a_filter_inside_the_passage_scans_still_fills_k(db: str) -> None:
    # depth=3 passages: had the filter been applied after the scan, the three passages nearest
    # to x (fillers' and "long"'s) would hold no German article of these
    stmt = search('"x"', k=2, depth=3).where(Article.lang == "de", Article.id < MINE)
    assert [r[0].title for r in _rows(db, stmt)] == ["x-de", "mixed-de"]
    nearest = _rows(db, search('"x"', k=3, depth=3))
    assert not any(r[0].lang == "de" and r[0].id < MINE for r in nearest)


def test_the_passage_scans_use_the_hnsw_index(db: str) -> None:
    from pgvector.psycopg import register_vector

    for q in ['"x" AND NOT "y"', '"x" OR "z"', '"y"']:
        stmt = search(q, k=3)
        compiled = stmt.pglogic_compiled()
        params = compiled.with_vectors(stmt.pglogic_spec.vectors)
        with psycopg.connect(db) as conn:
            register_vector(conn)
            assert uses_hnsw(conn, compiled, params), q


def test_lexical_terms_read_the_articles_words(db: str) -> None:
    stmt = search('"x" AND NOT match:wheat', k=3, lexical_column=Article.words)
    assert stmt.pglogic_matches == ("wheat",)
    rows = _rows(db, stmt.where(Article.id < MINE))
    # "long" is the nearest to x, but its body names wheat: the crisp NOT takes it out
    assert [r[0].title for r in rows] == ["pure-x", "x-de", "mixed-de"]
    assert all(r.match_0 == 0 for r in rows)
    (long_,) = _rows(db, stmt.where(Article.title == "long"))
    assert long_.match_0 == 1 and long_.score == 0


def test_a_lexical_only_query_returns_its_matches_without_an_exact_pass(db: str) -> None:
    """Its candidates are every match (the GIN scan): one article names wheat, one row comes
    back (as the corpus path), not k rows padded by scoring every article. A LIMIT that is a
    bound parameter is the statement's own: no rerun, and no error reading it."""
    from sqlalchemy import bindparam, event

    engine = create_engine(url_from_dsn(db))
    seen: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "pglogic_ranked" in statement:
            seen.append(statement)

    stmt = search('match:wheat AND NOT "y"', k=6, lexical_column=Article.words)
    with Session(engine, expire_on_commit=False) as s, s.begin():
        rows = execute(s, stmt)
        assert [r[0].title for r in rows] == ["long"] and len(seen) == 1
        seen.clear()
        short = search('"x" OR "y"', k=6, depth=1).limit(bindparam("n", 6))
        assert len(execute(s, short)) < 6 and len(seen) == 1
    engine.dispose()


def test_articles_without_their_own_vector(db: str) -> None:
    q = '"x" AND NOT "y"'
    stmt = logical_search(Article, None, q, k=4, vectors=TERMS, passages=ArticlePassage)
    assert '"embedding"' not in stmt.pglogic_compiled().as_string()  # the ranking reads no such
    # (the default is then max: every text's best passage)
    want = _rows(db, search(q, k=4, passage_score="max"))
    assert [r[0].id for r in _rows(db, stmt)] == [r[0].id for r in want]


# -- the real model -------------------------------------------------------------------------------


class StoryBase(DeclarativeBase):
    pass


class Story(StoryBase):
    __tablename__ = "stories"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    body: Mapped[str]
    embedding: Mapped[Any] = mapped_column(Vector(384))


class StoryPassage(StoryBase):
    __tablename__ = "story_passages"
    __table_args__ = (UniqueConstraint("story_id", "ord"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    story_id: Mapped[int] = mapped_column(ForeignKey("stories.id", ondelete="CASCADE"))
    ord: Mapped[int]
    char_start: Mapped[int]
    char_end: Mapped[int]
    embedding: Mapped[Any] = mapped_column(Vector(384))


STORIES = {
    "long-wheat": FILLER * 12 + WHEAT,  # the wheat paragraph is past the model's 254 tokens
    "rates-1": FILLER * 2,
    "rates-2": FILLER + "Bond yields fell slightly.",
    "wheat-1": WHEAT,
    "sport": "The football team won the championship final on penalties.",
}


@pytest.mark.model
def test_not_sees_a_late_passage_with_the_real_model(dsn: str, minilm: Any) -> None:
    tok = tokenizer_of(minilm)
    engine = create_engine(url_from_dsn(dsn))
    StoryBase.metadata.create_all(engine)
    with Session(engine) as s:
        for sid, (name, body) in enumerate(STORIES.items(), 1):
            spans = split(body, tok.offsets(body), 64, 16)  # what the application stores
            vecs = minilm.embed([body] + [body[p.start : p.end] for p in spans])
            s.add(Story(id=sid, name=name, body=body, embedding=vecs[0]))
            s.flush()
            s.add_all(
                StoryPassage(story_id=sid, ord=o, char_start=p.start, char_end=p.end, embedding=v)
                for o, (p, v) in enumerate(zip(spans, vecs[1:], strict=True))
            )
        s.commit()
        for t in ("stories", "story_passages"):
            s.execute(text(f"CREATE INDEX ON {t} USING hnsw (embedding vector_cosine_ops)"))
        s.commit()
    q = '"central bank interest rates" AND NOT "wheat exports"'
    rates, wheat = minilm.embed(["central bank interest rates", "wheat exports"])
    # the negated term is scored against its context (pglogic.engine.negation)
    wheat = projected(wheat, [rates], DEFAULT_NOT_CONTEXT)

    def run(**kw: Any) -> list[Any]:
        stmt = logical_search(Story, Story.embedding, q, k=5, embedder=minilm, **kw)
        with Session(engine, expire_on_commit=False) as s, s.begin():
            return execute(s, stmt)

    single, over = run(), run(passages=StoryPassage)
    exact = run(passages=StoryPassage, exact=True)
    with Session(engine) as s:  # the passage that decided "wheat exports": the application's query
        best = s.execute(
            text("SELECT p.char_start, p.char_end, 1 - (p.embedding <=> CAST(:v AS vector)) AS sim"
                 " FROM story_passages p JOIN stories d ON d.id = p.story_id"
                 " WHERE d.name = 'long-wheat' ORDER BY sim DESC LIMIT 1"),
            {"v": str(wheat.tolist())},
        ).one()  # fmt: skip
    engine.dispose()
    names = [r[0].name for r in over]
    one = {r[0].name: r for r in single}
    by = {r[0].name: r for r in over}
    # one vector per story: the model reads the first 254 word pieces, the wheat paragraph is cut
    # off and the long story looks like the rate stories
    assert one["long-wheat"].sim_1 == pytest.approx(one["rates-1"].sim_1, abs=0.05)
    # over passages its last passage answers "wheat exports", and the NOT pushes it down
    assert by["long-wheat"].sim_1 > by["rates-1"].sim_1 + 0.3
    assert names.index("long-wheat") > names.index("rates-1")
    assert names.index("long-wheat") > names.index("rates-2")
    assert by["long-wheat"].score < 0.5 * one["long-wheat"].score
    assert names == [r[0].name for r in exact]
    assert [r.score for r in over] == pytest.approx([r.score for r in exact], abs=1e-6)
    assert by["long-wheat"].sim_1 == pytest.approx(best.sim, abs=1e-5)
    assert (
        best.char_start > 0
        and "wheat exports" in STORIES["long-wheat"][best.char_start : best.char_end]
    )
