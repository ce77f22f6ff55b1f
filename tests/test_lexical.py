"""Lexical terms (``match:"..."``): the query language, the compiled statement and real
Postgres full-text search beside HNSW, on hand-made vectors whose right answers are known."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.operators import evaluate_numpy
from pglogic.engine.source import Corpus
from pglogic.errors import InvalidInput, QueryError, QuerySyntaxError
from pglogic.query import (
    Match,
    matches,
    parse,
    positive_matches,
    semantic_part,
    terms,
    to_string,
    to_tree,
)
from pglogic.store.corpus import build_index, create_corpus, get_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.lexical import add_lexical_index, drop_lexical_index
from pglogic.store.readers import Record
from pglogic.store.search import Hit, execute, search

# -- the language (pure) --------------------------------------------------------------------------


def test_match_terms_parse_print_and_round_trip() -> None:
    tree = parse('("grain" OR MATCH:corn) AND NOT (match:"durum wheat" OR match:SKU-4410)')
    assert matches(tree) == ["corn", "durum wheat", "SKU-4410"]
    assert positive_matches(tree) == ["corn"]
    assert terms(tree) == ["grain"]
    text = to_string(tree)
    assert text == '("grain" OR match:"corn") AND NOT (match:"durum wheat" OR match:"SKU-4410")'
    assert parse(text) == tree
    # a semantic and a lexical term of the same words are different leaves
    assert parse('"wheat" AND NOT match:wheat') != parse('"wheat" AND NOT "wheat"')
    assert to_tree("match:astro-ph.CO") == Match("astro-ph.CO")


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            '"grain" AND NOT match:',
            "Expected a word or a quoted phrase right after match: at col 17",
        ),
        (
            '"grain" AND match: "x"',
            "Expected a word or a quoted phrase right after match: at col 13",
        ),
        ('"a" OR word:"x"', "Unknown term kind 'word:' (a lexical term is match:\"...\") at col 8"),
        ('match:"wheat', 'Missing closing " for term starting at col 7'),
        ('match:""', "Empty term at col 7"),
        ('"a" match:b', "Expected AND, OR or end of query at col 5"),
    ],
)
def test_lexical_syntax_errors_point_at_the_column(query: str, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as err:
        to_tree(query)
    assert str(err.value) == message


def test_semantic_part_drops_lexical_terms() -> None:
    tree = parse('"a" AND NOT match:x OR match:y AND "b"')
    assert to_string(semantic_part(tree)) == '"a" OR "b"'  # type: ignore[arg-type]
    assert semantic_part(parse("match:x AND NOT match:y")) is None


def test_a_lexical_truth_is_used_as_it_is_by_every_family() -> None:
    tree = parse('"a" AND NOT match:w')
    sims = {"a": np.array([0.8, 0.8])}
    lex = {"w": np.array([1.0, 0.0])}
    for family in ("product-max", "godel", "itlr", "product-max-strong"):
        scores = evaluate_numpy(tree, sims, family, matches=lex)
        assert scores[0] == 0.0 and scores[1] == pytest.approx(0.8)
    with pytest.raises(QueryError, match="needs the document's words"):
        evaluate_numpy(tree, sims, "godel")


CORPUS = Corpus(1, "news", "corpus_1", "m", 4, "cosine", "embedding", None, None, "english")


def test_compile_refuses_lexical_terms_where_they_cannot_be_scored() -> None:
    plain = Corpus(1, "news", "corpus_1", "m", 4, "cosine", "embedding", None, None)
    with pytest.raises(InvalidInput, match=r"match:'wheat' needs a lexical index.*corpus lexical"):
        compile_query(parse('"grain" AND NOT match:wheat'), plain)
    for mode in ("nsfl", "nsfl-rerank", "sqo", "sqo-rerank"):
        with pytest.raises(InvalidInput, match="fuzzy mode only"):
            compile_query(parse('"grain" AND NOT match:wheat'), CORPUS, SearchOptions(mode=mode))
    with pytest.raises(InvalidInput, match="Unknown lexical truth 'bm25'"):
        compile_query(parse("match:wheat"), CORPUS, SearchOptions(lexical="bm25"))
    with pytest.raises(QueryError, match="no positive term"):
        compile_query(parse('NOT match:wheat AND NOT "corn"'), CORPUS)


def test_positive_lexical_terms_scan_the_lexical_index_negated_ones_never_do() -> None:
    q = compile_query(parse('"grain" AND NOT match:wheat'), CORPUS)
    assert '"x0"' not in q.as_string() and q.lexical == ("wheat",)
    q = compile_query(parse('"grain" OR match:wheat'), CORPUS)
    assert '"x0" AS MATERIALIZED' in q.as_string() and "ts_rank_cd" in q.as_string()
    # one shape, two queries: the cached statement takes the second query's words
    q1 = compile_query(parse('"a" AND match:"b c"'), CORPUS)
    q2 = compile_query(parse('"x" AND match:y'), CORPUS)
    assert q1.text == q2.text and q2.lexical == ("y",) and q2.terms[:1] == ["x"]
    assert q2.with_vectors({"x": np.ones(4), "x and y": np.ones(4)})["q0"] == "y"


# -- in the database ------------------------------------------------------------------------------

E = np.eye(4)
DOCS: dict[str, tuple[str, Any]] = {
    "g1": ("Wheat harvest rises in Kansas", E[0]),
    "g2": ("Corn exports to Japan climb", E[0] + 0.05 * E[3]),
    "g3": ("Durum wheat prices fall", E[0] + 0.1 * E[1]),
    "g4": ("Rice crop in Asia", E[0] + 0.2 * E[1]),
    "g5": ("Barley and oats for feed", E[0] + 0.3 * E[1]),
    "s1": ("Shipping rates for SKU-4410 containers", E[1]),
    "s2": ("Banks adopt Basel III capital rules", E[2]),
    "n1": ("Nothing relevant here at all", E[3]),
}
GRAIN = {"grain": E[0], "shipping": E[1]}


def records() -> list[Record]:
    return [
        Record(
            name,
            text,
            None,
            {"kind": name[0]},
            vector=tuple(float(x) for x in v / np.linalg.norm(v)),
        )
        for name, (text, v) in DOCS.items()
    ]


@pytest.fixture(scope="module")
def lex_dsn(pg_server: Any) -> Iterator[str]:
    from tests.conftest import TEMPLATE_DB

    name = f"t_lexical_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        yield pg_server.dsn_for(name)
    finally:
        janitor.drop()


@pytest.fixture(scope="module")
def lconn(lex_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(lex_dsn, autocommit=True) as c:
        yield c


@pytest.fixture(scope="module")
def news(lconn: psycopg.Connection[Any]) -> Corpus:
    corpus = create_corpus(lconn, "grains", model="hand", dim=4)
    assert corpus.lexical_config == "english"  # every new corpus gets its lexical index
    ingest_records(lconn, corpus, records(), embedder=None)
    build_index(lconn, "grains")
    return get_corpus(lconn, "grains")


def run(conn: psycopg.Connection[Any], corpus: Corpus, query: str, **opts: Any) -> list[Hit]:
    options = SearchOptions(**{"k": len(DOCS), "and_text": 0, **opts})
    compiled = compile_query(parse(query), corpus, options)
    return execute(conn, compiled, dict(GRAIN))


@pytest.mark.parametrize("exact", [False, True])
def test_a_lexical_not_excludes_every_document_that_names_the_word(
    lconn: psycopg.Connection[Any], news: Corpus, exact: bool
) -> None:
    hits = run(lconn, news, '"grain" AND NOT match:wheat', exact=exact)
    by_id = {h.external_id: h for h in hits}
    # "Wheat" and "wheat" match (the english configuration folds case and stems)
    assert by_id["g1"].score == 0.0 and by_id["g3"].score == 0.0
    assert by_id["g1"].lexical == {"wheat": 1.0} and by_id["g2"].lexical == {"wheat": 0.0}
    top = [h.external_id for h in hits if h.score > 0][:3]
    assert top == ["g2", "g4", "g5"]
    # the semantic NOT of the same word cannot do that: the wheat stories keep their scores
    semantic = run(lconn, news, '"grain" AND NOT "shipping"', exact=exact)
    assert semantic[0].score > 0.5


@pytest.mark.parametrize("exact", [False, True])
def test_a_mention_floors_a_negated_terms_similarity(
    lconn: psycopg.Connection[Any], news: Corpus, exact: bool
) -> None:
    # "wheat" is embedded far from every grain story (similarity 0): the semantic NOT alone
    # keeps the wheat stories at the top; the default not_mention makes the two that name it
    # at least 0.4 like it
    vectors = {"grain": E[0], "wheat": E[2]}

    def scores(**opts: Any) -> dict[str, float]:
        options = SearchOptions(k=len(DOCS), and_text=0, exact=exact, **opts)
        compiled = compile_query(parse('"grain" AND NOT "wheat"'), news, options)
        return {h.external_id: h.score for h in execute(lconn, compiled, vectors)}

    plain, floored = scores(not_mention=0), scores()
    assert floored == scores(not_mention=0.4)
    assert plain["g1"] == pytest.approx(1.0) and plain["g1"] == max(plain.values())
    assert floored["g1"] == pytest.approx(0.6**1.25) and floored["g3"] == pytest.approx(
        plain["g3"] * 0.6**1.25
    )
    for doc in ("g2", "g4", "g5"):  # no mention: unchanged
        assert floored[doc] == pytest.approx(plain[doc])
    # the same formula with NumPy: the floor is max(s, 0.4) on the documents that mention it
    sims = {"grain": np.array([1.0]), "wheat": np.array([0.4])}
    want = evaluate_numpy(parse('"grain" AND NOT "wheat"'), sims, "product-max-strong")
    assert floored["g1"] == pytest.approx(float(want[0]))
    # outside the fuzzy mode no term is floored
    assert scores(mode="sqo-rerank", seed=1) == scores(not_mention=0, mode="sqo-rerank", seed=1)
    with pytest.raises(InvalidInput, match="not_mention=2"):
        scores(not_mention=2)


def test_phrases_codes_and_the_rank_truth(lconn: psycopg.Connection[Any], news: Corpus) -> None:
    hits = run(lconn, news, 'match:"Basel III"')
    assert [h.external_id for h in hits] == ["s2"] and hits[0].score == 1.0
    assert [h.external_id for h in run(lconn, news, 'match:"III Basel"')] == []  # word order
    assert [h.external_id for h in run(lconn, news, "match:SKU-4410")] == ["s1"]
    assert [h.external_id for h in run(lconn, news, "match:harvests")] == ["g1"]  # stemmed
    ranked = run(lconn, news, '"shipping" OR match:wheat', lexical="rank")
    lex = {h.external_id: h.lexical["wheat"] for h in ranked}
    assert 0 < lex["g1"] < 1 and 0 < lex["g3"] < 1 and lex["s1"] == 0.0
    # a positive lexical term brings its matches in even when the semantic scans miss them
    # (the scan along "shipping" at depth 2 holds s1 and g5; the lexical scan brings g1, g3)
    mixed = run(lconn, news, '"shipping" AND match:wheat', k=1, depth=2)
    assert [h.external_id for h in mixed] == ["g3"]


def test_positive_lexical_terms_use_the_gin_index(lex_dsn: str, news: Corpus) -> None:
    with connect(make_conninfo(lex_dsn, options="-c enable_seqscan=off"), autocommit=True) as c:
        compiled = compile_query(parse('"grain" OR match:wheat'), news, SearchOptions(and_text=0))
        params = compiled.with_vectors(dict(GRAIN))
        plan = "\n".join(
            r[0] for r in c.execute(sql.SQL("EXPLAIN ") + compiled.statement, params).fetchall()
        )
    assert f"{news.table_name}_tsv" in plan and "_hnsw" in plan


def test_lexical_only_queries_load_no_model_and_bad_terms_are_refused(
    lconn: psycopg.Connection[Any], news: Corpus
) -> None:
    def no_model() -> Any:
        raise AssertionError("a lexical-only query must not load the model")

    res = search(lconn, news, "match:wheat AND NOT match:durum", embedder=no_model)
    assert [h.external_id for h in res.hits if h.score > 0] == ["g1"]
    with pytest.raises(InvalidInput) as err:
        search(lconn, news, '"grain" AND NOT match:"the"', embedder=no_model)
    assert str(err.value).startswith('match:"the" at col 17 has no word')


def test_the_lexical_index_follows_ingest_and_can_be_added_or_dropped(
    lconn: psycopg.Connection[Any],
) -> None:
    corpus = create_corpus(lconn, "plain", model="hand", dim=4, lexical=None)
    ingest_records(lconn, corpus, records(), embedder=None)
    with pytest.raises(InvalidInput, match="needs a lexical index"):
        run(lconn, corpus, '"grain" AND NOT match:wheat')
    corpus = add_lexical_index(lconn, corpus, "simple")
    assert get_corpus(lconn, "plain").lexical_config == "simple"
    # simple folds case but does not stem: "harvests" is not "harvest" (english: it is)
    assert run(lconn, corpus, "match:harvests") == []
    assert {h.external_id for h in run(lconn, corpus, "match:wheat")} == {"g1", "g3"}
    # a changed text is re-indexed by the generated column: ingest needs nothing else
    changed = [Record("s2", "Basel III and wheat", None, {}, vector=(0.0, 0.0, 1.0, 0.0))]
    ingest_records(lconn, corpus, changed, embedder=None)
    assert {h.external_id for h in run(lconn, corpus, "match:wheat")} == {"g1", "g3", "s2"}
    with pytest.raises(InvalidInput, match="Unknown text search configuration 'klingon'"):
        add_lexical_index(lconn, corpus, "klingon")
    assert get_corpus(lconn, "plain").lexical_config == "simple"  # nothing lost
    corpus = drop_lexical_index(lconn, corpus)
    assert get_corpus(lconn, "plain").lexical_config is None
    with pytest.raises(InvalidInput, match="needs a lexical index"):
        run(lconn, corpus, "match:wheat")


def test_the_cli_searches_explains_and_manages_lexical_terms(dsn: str, tmp_path: Any) -> None:
    import json

    from tests.conftest import cli_in_process

    def ok(*args: str) -> str:
        out = cli_in_process("--dsn", dsn, *args)
        assert out.returncode == 0, out.stderr
        return str(out.stdout)

    ok("corpus", "create", "farm")
    data = tmp_path / "d.jsonl"
    texts = ["Wheat harvest in Kansas", "Corn and soybean crops", "Oil tanker attacked"]
    data.write_text("\n".join(json.dumps({"id": f"d{i}", "text": t}) for i, t in enumerate(texts)))
    ok("ingest", "farm", str(data))
    assert "english" in ok("corpus", "show", "farm")
    lines = ok("search", "farm", '"grain harvest" AND NOT match:wheat', "--json", "-k", "3")
    hits = [json.loads(line) for line in lines.splitlines()]
    assert hits[0]["id"] == "d1" and hits[0]["lexical"] == {"wheat": 0.0}
    assert {"d0": 0.0}.items() <= {h["id"]: h["score"] for h in hits}.items()
    explained = ok("search", "farm", '"grain" AND NOT match:wheat', "--explain")
    assert "match:wheat" in explained
    compiled = ok("compile", '"a" AND match:"Basel III"')
    assert "phraseto_tsquery" in compiled and '"q0": "Basel III"' in compiled
    bad = cli_in_process("--dsn", dsn, "search", "farm", '"grain" AND NOT match:')
    assert bad.returncode != 0 and "right after match: at col 17" in bad.stderr
    assert "Dropped the lexical index of 'farm'" in ok("corpus", "lexical", "farm", "--drop")
    refused = cli_in_process("--dsn", dsn, "search", "farm", "match:wheat")
    assert refused.returncode != 0 and "pglogic corpus lexical NAME" in refused.stderr
    assert "(simple)" in ok("corpus", "lexical", "farm", "--config", "simple")
    first, *rest = ok("search", "farm", "match:wheat", "--json").splitlines()
    assert json.loads(first)["id"] == "d0" and json.loads(first)["score"] == 1.0
    assert rest == []  # one story names wheat: no other row is scored to fill k


@pytest.mark.parametrize(
    ("question", "model_answer", "expected"),
    [
        (
            "Grain stories that do not mention wheat",
            '"grain" AND NOT "wheat"',
            '"grain" AND NOT match:"wheat"',
        ),
        (
            'Banks that do not mention the phrase "Basel III"',
            '"banks" AND NOT "Basel III"',
            '"banks" AND NOT match:"Basel III"',
        ),
        ("Chicken but no garlic", '"chicken" AND NOT "garlic"', None),
        ("Anything mentioning SKU-4410", '"mentioning SKU-4410"', 'match:"SKU-4410"'),
    ],
)
def test_rewrites_make_the_words_a_question_asks_for_literally_lexical(
    question: str, model_answer: str, expected: str | None
) -> None:
    from pglogic.llm.wording import refine

    tree, _ = refine(parse(model_answer), question)
    assert to_string(tree) == (expected or model_answer)


def test_the_sqlalchemy_helper_mixes_lexical_and_semantic_terms(lex_dsn: str) -> None:
    from pgvector.sqlalchemy import Vector
    from sqlalchemy import Column, Computed, Integer, MetaData, Table, Text, create_engine, text
    from sqlalchemy.dialects.postgresql import TSVECTOR
    from sqlalchemy.orm import Session

    from pglogic.integrations.sqlalchemy import execute as orm_execute
    from pglogic.integrations.sqlalchemy import logical_search, url_from_dsn

    meta = MetaData()
    notes = Table(
        "notes",
        meta,
        Column("id", Integer, primary_key=True),
        Column("body", Text, nullable=False),
        Column("embedding", Vector(4)),
        Column("words", TSVECTOR, Computed("to_tsvector('simple', body)", persisted=True)),
    )
    engine = create_engine(url_from_dsn(lex_dsn))
    meta.create_all(engine)
    with Session(engine) as session:
        for i, (text_, v) in enumerate(DOCS.values(), 1):
            session.execute(
                notes.insert().values(id=i, body=text_, embedding=list(v / np.linalg.norm(v)))
            )
        session.commit()
        stmt = logical_search(
            notes, notes.c.embedding, '"grain" AND NOT match:wheat', k=8, vectors=GRAIN,
            lexical_column=notes.c.words, text_config="simple",
        )  # fmt: skip
        assert stmt.pglogic_matches == ("wheat",)
        rows = orm_execute(session, stmt.where(notes.c.id != 2))  # a filter pushed down
        by_body = {r.body: (r.score, r.match_0) for r in rows}
        assert by_body["Wheat harvest rises in Kansas"] == (0.0, 1.0)
        assert by_body["Durum wheat prices fall"] == (0.0, 1.0)
        assert "Corn exports to Japan climb" not in by_body
        best = max(by_body, key=lambda b: by_body[b][0])
        assert best == "Rice crop in Asia"
        with pytest.raises(InvalidInput, match="needs a lexical index"):
            logical_search(notes, notes.c.embedding, "match:wheat", vectors=GRAIN)
        session.execute(text("DROP TABLE notes"))
        session.commit()
    engine.dispose()
