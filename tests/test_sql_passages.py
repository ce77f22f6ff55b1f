"""``pglogic.search()`` over a corpus with passages (migration 0010), against the Python search.

A corpus with a row in ``pglogic.passage_layouts`` is searched through its passage table by
default, with the statement of ``pglogic.engine.compile._passage_statement``; ``"passages":
false`` searches the documents' own vectors. Compared as tests/test_sql_functions.py compares
the function with Python: the statement ``pglogic.search_plan`` shows, text for text, on a
synthetic passage corpus (every plan shape, filtered or not, with options; the exact fallback
after passage scans that find fewer than k documents), and the rows on 200 real Reuters
documents split into 64-token passages and embedded with all-MiniLM-L6-v2 (same ids in the
same order, scores and similarities to 1e-9).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from pglogic import PgLogic
from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.conjunction import and_texts, negated_and_texts
from pglogic.engine.filters import parse_filter
from pglogic.errors import InvalidInput
from pglogic.query import negated_only_terms, parse, terms
from pglogic.store.corpus import create_corpus, get_corpus
from pglogic.store.db import connect
from pglogic.store.lexical import add_lexical_index
from pglogic.store.passages import PassageLayout, passage_index_name, passage_stats
from pglogic.store.search import search
from tests.conftest import SHARED_DATA, TEMPLATE_DB, Server
from tests.test_sql_functions import (
    LEXICAL_QUERIES,
    LEXICAL_SHAPES,
    PLAN_FILTERS,
    PLAN_OPTIONS,
    QUERIES,
    SHAPES,
    FixedEmbedder,
    GivenVectors,
    assert_plan_is_pythons,
    assert_same,
    function_json,
    message,
    python_and_sql,
    sql_error,
    sql_search,
)

pytestmark = pytest.mark.db

Conn = psycopg.Connection[Any]


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixed(minilm: Any) -> FixedEmbedder:
    return FixedEmbedder(minilm)


@pytest.fixture(scope="module")
def reuters_dsn(pg_server: Server, minilm: Any) -> Iterator[str]:
    """Corpus 'news': the first 120 Reuters documents in passages of 64 word pieces (16 shared),
    HNSW indexes on the documents and the passages, a lexical index (english), and the metadata
    numbers of tests/test_sql_functions.py for the filters."""
    name = f"t_sqlpass_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = pg_server.dsn_for(name)
        api = PgLogic(dsn)
        api.create_corpus("news", passage_tokens=64, passage_overlap=16)
        api.ingest("news", SHARED_DATA / "reuters21578" / "corpus.jsonl.gz", limit=120)
        api.build_index("news")
        with connect(dsn) as c:
            corpus = get_corpus(c, "news")
            c.execute(
                sql.SQL(
                    "UPDATE {} SET metadata = metadata || jsonb_build_object('n', id % 10,"
                    " 'ns', (id % 7)::text)"
                ).format(corpus.table)
            )
            c.commit()
            c.execute(sql.SQL("ANALYZE {}").format(corpus.table))
            c.commit()
        yield dsn
    finally:
        janitor.drop()


@pytest.fixture
def news(reuters_dsn: str) -> Iterator[Conn]:
    with connect(reuters_dsn) as c:
        yield c


#: The synthetic passage corpus's document whose 40 passages all lie near the first axis.
CLUSTERED = "s1"


@pytest.fixture(scope="module")
def synth_dsn(pg_server: Server) -> Iterator[str]:
    """Corpus 'synthp': the 20,000 documents (random vectors, no index, metadata of every filter
    type, a few words of text) of tests/test_sql_functions.py's 'synth', with passages: document
    i has 1 + i % 3 random passage vectors, and document s1 has 40 passages near the first axis
    (the nearest passages of a term there all belong to it)."""
    name = f"t_sqlpassplan_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = pg_server.dsn_for(name)
        with connect(dsn) as c:
            corpus = create_corpus(
                c, "synthp", model="synthetic", dim=384,
                passages=PassageLayout(64, 16, "synthetic"),
            )  # fmt: skip
            if corpus.lexical_config != "english":
                corpus = add_lexical_index(c, corpus, "english")
            assert corpus.passage_table is not None
            c.execute(
                sql.SQL(
                    "INSERT INTO {} (external_id, title, text, metadata, text_hash, row_hash,"
                    " embedding) SELECT 's' || i, NULL, CASE WHEN i % 26 = 0 THEN 'durum wheat'"
                    " WHEN i % 13 = 0 THEN 'wheat harvest' WHEN i % 17 = 0 THEN 'corn exports'"
                    " ELSE 't' END, jsonb_build_object('n', i % 10,"
                    " 'ns', (i % 7)::text, 'x', CASE WHEN i % 3 = 0 THEN to_jsonb(1.5)"
                    " ELSE to_jsonb('abc'::text) END, 'tag', CASE WHEN i % 200 = 0 THEN 'rare'"
                    " ELSE 'common' END), '\\x00', '\\x00', (SELECT array_agg(random() - 0.5)"
                    " FROM generate_series(1, 384) WHERE i > 0)::vector"
                    " FROM generate_series(1, 20000) AS i"
                ).format(corpus.table)
            )
            c.execute(
                sql.SQL(
                    "INSERT INTO {p} (doc_id, ord, char_start, char_end, tokens, embedding)"
                    " SELECT d.id, o, 0, 1, 1, (SELECT array_agg(CASE WHEN d.external_id = {s}"
                    " AND j = 1 THEN 1.0 WHEN d.external_id = {s} THEN (random() - 0.5) * 0.01"
                    " ELSE random() - 0.5 END) FROM generate_series(1, 384) AS j"
                    " WHERE o >= 0)::vector"
                    " FROM {d} d, generate_series(0, CASE WHEN d.external_id = {s} THEN 39"
                    " ELSE (d.id % 3)::int END) AS o"
                ).format(p=corpus.passage_table, d=corpus.table, s=sql.Literal(CLUSTERED))
            )
            c.commit()
            c.execute(sql.SQL("ANALYZE {}").format(corpus.table))
            c.execute(sql.SQL("ANALYZE {}").format(corpus.passage_table))
            c.commit()
        yield dsn
    finally:
        janitor.drop()


# -- pglogic.search_plan: the compiler's statement over passages, text for text --------------------


@pytest.mark.parametrize("k", [10, 100])
@pytest.mark.parametrize("where", PLAN_FILTERS, ids=lambda w: ",".join(w) or "unfiltered")
def test_search_plan_over_passages_is_the_python_statement(
    synth_dsn: str, where: list[str], k: int
) -> None:
    """Every shape at default options, over the passages: the passage scans (joined to the
    documents under a filter), ``cand``, the grouped similarities, the depths and settings."""
    opts = SearchOptions(k=k, filters=[parse_filter(w) for w in where])
    with connect(synth_dsn) as conn:
        plans = {q: assert_plan_is_pythons(conn, q, opts, "synthp") for q in SHAPES}
    if not where and k == 10:  # every plan of the fuzzy mode occurs over passages too
        assert plans['"a"'] == "knn" and plans['"a" OR "b"'] == "union"
        assert plans['"a" AND NOT "b"'] == "guide" and plans['"a" OR "b" AND NOT "c"'] == "terms"
    if where == ['{"tag": "rare"}']:  # 100 documents match: scoring them all is cheaper
        assert set(plans.values()) == {"exact"}


@pytest.mark.parametrize("opts", PLAN_OPTIONS, ids=repr)
@pytest.mark.parametrize("where", [[], ["n=3"]], ids=["unfiltered", "filtered"])
def test_search_plan_over_passages_with_options(
    synth_dsn: str, opts: SearchOptions, where: list[str]
) -> None:
    opts = replace(opts, filters=[parse_filter(w) for w in where])
    with connect(synth_dsn) as conn:
        for query in SHAPES:
            if opts.exact or not (query.startswith("NOT") and "AND" not in query):
                assert_plan_is_pythons(conn, query, opts, "synthp")


@pytest.mark.parametrize(
    "opts",
    [SearchOptions(), SearchOptions(lexical="rank"), SearchOptions(exact=True),
     SearchOptions(term_scans=False), SearchOptions(k=100, iterative_scan=False)],
    ids=repr,
)  # fmt: skip
@pytest.mark.parametrize("where", [[], ["n>=5"]], ids=str)
def test_search_plan_of_lexical_terms_over_passages(
    synth_dsn: str, opts: SearchOptions, where: list[str]
) -> None:
    """Lexical terms over passages: their truth of the document's own words, their scans of
    the documents' GIN index beside the passage scans."""
    opts = replace(opts, filters=[parse_filter(w) for w in where])
    with connect(synth_dsn) as conn:
        for query in [*LEXICAL_SHAPES, '"a" AND "b" AND match:wheat']:
            assert_plan_is_pythons(conn, query, opts, "synthp")


@pytest.mark.parametrize("where", [[], ["n>=5"], ['{"tag": "rare"}']], ids=str)
@pytest.mark.parametrize("opts", [SearchOptions(), SearchOptions(k=100), SearchOptions(exact=True)])
def test_passages_false_is_the_documents_statement(
    synth_dsn: str, opts: SearchOptions, where: list[str]
) -> None:
    """``"passages": false``: the statement of the documents' own vectors, as on a corpus
    without passages."""
    opts = replace(opts, filters=[parse_filter(w) for w in where], passages=False)
    with connect(synth_dsn) as conn:
        for query in [*SHAPES, '"a" AND NOT match:wheat']:
            assert_plan_is_pythons(conn, query, opts, "synthp")


def test_too_few_documents_from_the_passage_scans_fall_back_to_the_exact_plan(
    synth_dsn: str,
) -> None:
    """Each term's 10 nearest passages (the union plan of ``"a" OR "b"`` at depth 10) all
    belong to one document: the function then scores every document's passages, as the Python
    search does, and returns k rows, unfiltered too."""
    rng = np.random.default_rng(5)
    vectors = {}
    for t in ("a", "b"):
        v = np.zeros(384)
        v[0] = 1.0
        vectors[t] = [float(x) for x in v + rng.normal(scale=0.001, size=384)]
    tree = parse('"a" OR "b"')
    # (at the default depth a union over passages scans 100 passages per term: 40 are s1's)
    default = function_json(tree, SearchOptions(k=10), vectors)
    with connect(synth_dsn) as conn:
        row = conn.execute("SELECT pglogic.search_plan('synthp', %s)", (Jsonb(default),))
        assert row.fetchone()[0]["depth"] == 100  # type: ignore[index]
    opts = SearchOptions(k=10, depth=10)
    query = function_json(tree, opts, vectors)
    with connect(synth_dsn) as conn:
        plan = conn.execute("SELECT pglogic.search_plan('synthp', %s)", (Jsonb(query),)).fetchone()
        assert plan is not None
        assert (plan[0]["plan"], plan[0]["depth"]) == ("union", 10)
        assert plan[0]["exact_fallback"].startswith("WITH sims AS (SELECT")
        assert "GROUP BY" in plan[0]["exact_fallback"]
        rows = sql_search(conn, "synthp", query)
        assert len(rows) == 10
        assert rows[0][1] == CLUSTERED
        assert rows == sql_search(conn, "synthp", {**query, "exact": True})
        corpus = get_corpus(conn, "synthp")
        conn.commit()
        result = search(conn, corpus, tree, embedder=GivenVectors(vectors), options=opts)
        assert "database_approximate" in result.timings  # (Python fell back as well)
        assert_same(result.hits, rows)
        # the documents' own vectors: no document near the axis, ten others
        own = sql_search(conn, "synthp", {**query, "passages": False})
        assert len(own) == 10 and CLUSTERED not in [r[1] for r in own]


def test_passages_option_errors(synth_dsn: str) -> None:
    with connect(synth_dsn) as conn:
        exc = sql_error(conn, "synthp", {"tree": {"term": "a", "vector": [0.1] * 384},
                                         "passages": "no"})  # fmt: skip
        assert message(exc) == 'Invalid passages="no": expected true or false'
        vec = {"term": "a", "vector": [0.1] * 384}
        for bad, shown in (("min", "'min'"), (3, "3")):
            exc = sql_error(conn, "synthp", {"tree": vec, "passage_score": bad})
            assert (
                message(exc)
                == f"Unknown passage score {shown}: valid values are blend-not-or, blend-not, max, "
                "blend"
            )
        with pytest.raises(InvalidInput) as py:  # the Python message, the same words
            compile_query(parse('"a"'), get_corpus(conn, "synthp"),
                          SearchOptions(passage_score="min"))  # fmt: skip
        assert str(py.value) == (
            "Unknown passage score 'min': valid values are blend-not-or, blend-not, max, blend"
        )


@pytest.mark.parametrize("how", ["blend", "blend-not", "blend-not-or", "max"])
@pytest.mark.parametrize(
    ("query", "exact"),
    [(q, e) for q in ('"a"', '"a" AND NOT "b"', '"a" OR "b" AND NOT "c"', '"a" AND "b"',
                      '"a" OR "b"', '"a" OR "b" OR "c" AND "a"',
                      '"a" AND NOT NOT "b"', '"a" AND NOT ("b" AND NOT "a")',
                      '"a" AND NOT ("b" AND "c")', '"a" AND "b" AND NOT ("b" AND "a" OR "c")',
                      '("a" AND "b") AND NOT ("a" AND "b" AND NOT "c")')
     for e in (False, True)] + [('NOT "a"', True)],
    ids=str,
)  # fmt: skip
def test_blend_is_the_python_statement_and_blends_positive_texts_only(
    synth_dsn: str, query: str, exact: bool, how: str
) -> None:
    """``"passage_score": "blend"``: the compiler's statement, text for text; a text that is
    not a negated-only term (a positive term, an AND's own text) is the mean of its best
    passage and the document's own vector, a negated term keeps its best passage.
    ``"blend-not"`` blends so only in a formula with a negated-only term; ``"blend-not-or"``
    (the default) as well, and in a formula with neither a negated-only term nor an AND phrase
    every text takes a tenth of the own vector; ``"max"`` never."""
    opts = SearchOptions(passage_score=how, exact=exact)
    with connect(synth_dsn) as conn:
        assert_plan_is_pythons(conn, query, opts, "synthp")
        corpus = get_corpus(conn, "synthp")
        conn.rollback()
    text = compile_query(parse(query), corpus, opts).as_string()
    tree = parse(query)
    scored = compile_query(tree, corpus, opts).terms
    negated_only = set(negated_only_terms(tree))
    blends = how == "blend" or (how.startswith("blend-not") and bool(negated_only))
    tenth = how == "blend-not-or" and not negated_only and not and_texts(tree)
    # an AND's own text under NOTs only is negated too
    negated_only |= set(negated_and_texts(tree)) - set(terms(tree))
    for i, t in enumerate(scored):
        blended = f') / 2 AS "s{i}"' in text
        assert blended == (blends and t not in negated_only), (t, text)
        assert (" * 9 + coalesce" in text and f') / 10 AS "s{i}"' in text) == tenth, (t, text)


# -- pglogic.search over passages: the Python search's rows on real documents ----------------------


@pytest.mark.model
def test_the_reuters_corpus_has_long_documents(news: Conn) -> None:
    corpus = get_corpus(news, "news")
    stats = passage_stats(news, corpus)
    assert stats is not None
    assert stats.passages > 1.5 * stats.documents  # (many documents have several passages)


@pytest.mark.model
@pytest.mark.parametrize("passages", [True, False], ids=["passages", "documents"])
@pytest.mark.parametrize("k", [10, 60])
@pytest.mark.parametrize("query", [*QUERIES, '"sugar"', '"trade deficit" AND "japan"'])
def test_passage_search_ranks_like_python(
    news: Conn, fixed: FixedEmbedder, query: str, k: int, passages: bool
) -> None:
    """Default options (the guide given and computed in SQL), and the documents' own vectors."""
    opts = SearchOptions(k=k, passages=passages)
    hits, rows = python_and_sql(news, fixed, query, opts)
    assert len(hits) == k
    assert_same(hits, rows)
    _, computed = python_and_sql(news, fixed, query, opts, guide=False)
    assert_same(hits, computed)


@pytest.mark.model
def test_passages_change_the_ranking(news: Conn, fixed: FixedEmbedder) -> None:
    """The two paths differ: a term's best 64-token passage is another vector than the
    document's own (its first window of 254)."""
    differ = 0
    for query in QUERIES:
        _, over = python_and_sql(news, fixed, query, SearchOptions(k=10))
        _, own = python_and_sql(news, fixed, query, SearchOptions(k=10, passages=False))
        differ += [r[0] for r in over] != [r[0] for r in own]
    assert differ >= len(QUERIES) // 2


@pytest.mark.model
@pytest.mark.parametrize(
    "opts",
    [
        SearchOptions(k=5, truth="affine", operators="godel"),
        SearchOptions(k=7, depth=150, ef_search=50),  # depth > ef: iterative scan
        SearchOptions(k=10, exact=True),
        SearchOptions(k=200, exact=True, operators="product"),
        SearchOptions(k=10, guide=False),
        SearchOptions(k=10, term_scans=True),
        SearchOptions(k=10, term_scans=False),
        SearchOptions(k=10, iterative_scan=False),
        SearchOptions(k=10, and_text=0, operators="itlr"),
        SearchOptions(k=10, filters=[parse_filter("n>=5")]),
        SearchOptions(k=10, filters=[parse_filter("n>=5")], depth=40),
        SearchOptions(k=20, filters=[parse_filter("places!=usa"), parse_filter("ns<3")]),
        SearchOptions(k=10, filters=[parse_filter("n=3")], iterative_scan=False),
        SearchOptions(k=50, filters=[parse_filter("n=3")], exact=True),
        SearchOptions(k=10, passage_score="blend"),
        SearchOptions(k=10, passage_score="blend", exact=True),
        SearchOptions(k=10, passage_score="blend", filters=[parse_filter("n>=5")]),
        SearchOptions(k=10, passage_score="max"),
        SearchOptions(k=10, passage_score="max", exact=True),
    ],
    ids=["godel-affine", "iterative", "exact", "exact-all", "no-guide", "term-scans",
         "guide-only", "no-iterative", "itlr-no-and-text", "filter", "filter-depth", "filters",
         "filter-overfetch", "filter-exact", "blend", "blend-exact", "blend-filter", "max",
         "max-exact"],
)  # fmt: skip
def test_passage_search_options_rank_like_python(
    news: Conn, fixed: FixedEmbedder, opts: SearchOptions
) -> None:
    for query in [*QUERIES[1:5], '"sugar"']:
        hits, rows = python_and_sql(news, fixed, query, opts)
        assert hits
        assert_same(hits, rows)


@pytest.mark.model
@pytest.mark.parametrize("lexical", ["crisp", "rank"])
@pytest.mark.parametrize("query", LEXICAL_QUERIES)
def test_lexical_terms_over_passages_rank_like_python(
    news: Conn, fixed: FixedEmbedder, query: str, lexical: str
) -> None:
    """A lexical term's truth is the document's own words; its scan the documents' GIN index."""
    for opts in (SearchOptions(k=10, lexical=lexical),
                 SearchOptions(k=10, lexical=lexical, exact=True),
                 SearchOptions(k=10, lexical=lexical, filters=[parse_filter("n>=5")])):  # fmt: skip
        hits, rows = python_and_sql(news, fixed, query, opts)
        assert_same(hits, rows)


@pytest.mark.model
def test_the_words_are_read_after_the_passages_are_grouped(
    news: Conn, fixed: FixedEmbedder
) -> None:
    """Since migration 0016 (``bench/perf/results/not_mention_latency.md``): a mention's floor and a
    lexical term's truth read the document's row after the GROUP BY, so the grouping of the
    passages reads the documents' ids alone, in Python's statement and in the function's (text
    for text); the floor still moves documents, the same in both."""
    corpus = get_corpus(news, "news")
    for query in ('"grain" AND NOT "wheat"', '"grain" AND NOT match:wheat', 'match:"wheat"'):
        for opts in (SearchOptions(k=10), SearchOptions(k=10, passage_score="max")):
            statement = compile_query(parse(query), corpus, opts).as_string()
            end = statement.index("GROUP BY")
            grouped = statement[statement.rindex("(SELECT", 0, end) : end]
            assert "tsv" not in grouped and "tsv" in statement, statement
            assert_plan_is_pythons(news, query, opts, corpus_name="news")
            hits, rows = python_and_sql(news, fixed, query, opts)
            assert_same(hits, rows)
    opts = SearchOptions(k=20, and_text=0)
    floored, floored_rows = python_and_sql(news, fixed, '"grain" AND NOT "wheat"', opts)
    assert_same(floored, floored_rows)
    plain, _ = python_and_sql(
        news, fixed, '"grain" AND NOT "wheat"', replace(opts, not_mention=0.0)
    )
    assert [h.row_id for h in floored] != [h.row_id for h in plain]


@pytest.mark.model
def test_passage_scans_use_the_passages_hnsw_index(news: Conn, fixed: FixedEmbedder) -> None:
    """Each term's scan and the guide's read the passages' HNSW index."""
    corpus = get_corpus(news, "news")
    tree = parse('"oil" OR "gold" AND NOT "mining"')
    vectors = {t: fixed.embed([t])[0] for t in ("oil", "gold", "mining")}
    # (not_mention 0: the statement takes $1 to $6 only, no scored texts for a mention)
    query = function_json(tree, SearchOptions(and_text=0, not_mention=0), vectors)
    row = news.execute("SELECT pglogic.search_plan('news', %s)", (Jsonb(query),)).fetchone()
    assert row is not None
    plan = row[0]
    assert plan["plan"] == "terms"
    assert corpus.passage_table is not None
    assert plan["passages"] == corpus.passage_table.as_string(None)
    news.execute("SET enable_seqscan = off")
    news.execute(
        sql.SQL("PREPARE q(vector[], vector, integer, integer, integer, text[]) AS {}").format(
            sql.SQL(plan["statement"])
        )
    )
    args = sql.Literal([f"[{','.join(map(str, vectors[t]))}]" for t in plan["terms"]])
    guide = sql.Literal(f"[{','.join(map(str, plan['guide']))}]")
    explain = news.execute(
        sql.SQL("EXPLAIN EXECUTE q({}::vector[], {}::vector, {}, {}, 10, '{{}}')").format(
            args, guide, plan["depth"], plan["gdepth"]
        )
    ).fetchall()
    news.rollback()
    text = "\n".join(r[0] for r in explain)
    index = passage_index_name(corpus, corpus.column)
    assert text.count(f"Index Scan using {index}") == 3, text  # "oil", "gold", the guide


# -- migration -------------------------------------------------------------------------------------


def plan_statement(dsn: str, opts: dict[str, Any]) -> str:
    """The statement ``pglogic.search_plan`` builds on the synthetic corpus for ``opts``."""
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT pglogic.search_plan('synthp', %s) ->> 'statement'", (Jsonb(opts),)
        ).fetchone()
    assert row is not None
    return str(row[0])
