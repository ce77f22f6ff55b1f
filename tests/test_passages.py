"""Passages: long documents split with the model's tokenizer, one vector per passage, and each
term's truth for a document taken from its best passage, in one statement over real Postgres,
real HNSW indexes and the real all-MiniLM-L6-v2."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from psycopg import sql

from pglogic import PgLogic
from pglogic.embed.passages import Span, check_layout, split, tokenizer_of, word_offsets
from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.filters import parse_filter
from pglogic.engine.source import Corpus
from pglogic.errors import InvalidInput
from pglogic.query import parse
from pglogic.store.corpus import build_index, create_corpus, get_corpus
from pglogic.store.ingest import ingest_records
from pglogic.store.passages import PassageLayout, passage_stats
from pglogic.store.readers import Record
from pglogic.store.search import search
from tests.long_texts import FILLER, WHEAT

# -- splitting (pure) -----------------------------------------------------------------------------


@pytest.mark.parametrize(("tokens", "overlap"), [(8, 0), (8, 4), (13, 3), (50, 10)])
def test_split_covers_the_text_within_the_size(tokens: int, overlap: int) -> None:
    text = " ".join(f"w{i}" for i in range(137)) + "."
    offs = word_offsets(text)
    spans = split(text, offs, tokens, overlap)
    assert spans[0].start == 0 and spans[-1].end == len(text)
    for a, b in itertools.pairwise(spans):
        assert text[a.end : b.start].strip() == ""  # no text between two passages
        shared = len(word_offsets(text[b.start : a.end])) if b.start < a.end else 0
        assert shared == overlap
    assert all(s.tokens <= tokens and s.tokens == len(word_offsets(text[s.start : s.end]))
               for s in spans)  # fmt: skip


def test_a_short_text_is_one_passage_and_bad_layouts_are_refused() -> None:
    assert split("a b c", word_offsets("a b c"), 8, 2) == [Span(0, 5, 3)]
    with pytest.raises(InvalidInput, match="at least 8 tokens"):
        check_layout(4, 0)
    with pytest.raises(InvalidInput, match="half the passage size"):
        check_layout(64, 40)
    with pytest.raises(InvalidInput, match="reads 254 tokens at most"):
        check_layout(300, 0, 254)


@pytest.mark.model
def test_split_with_the_models_word_pieces_never_cuts_a_word(minilm: Any) -> None:
    tok = tokenizer_of(minilm)
    assert tok.exact and tok.window == 254
    text = ("Unbelievably, the shipments of durum-wheat from Saskatchewan grew. " * 80).strip()
    spans = split(text, tok.offsets(text), 64, 16)
    assert len(spans) > 5 and spans[-1].end == len(text)
    for s in spans:
        piece = text[s.start : s.end]
        assert tok.count(piece) <= 64  # what the model reads of it: all of it
        assert s.start == 0 or not text[s.start - 1].isalnum()  # starts at a word
        assert s.end == len(text) or not text[s.end].isalnum()  # ends at a word's end


# -- the statement (pure) -------------------------------------------------------------------------

PASSAGE_CORPUS = Corpus(
    1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None, "english", 128, 16
)


def test_the_statement_scans_passages_and_takes_each_documents_best() -> None:
    text = compile_query(parse('"a" AND NOT "b"'), PASSAGE_CORPUS).as_string()
    assert 'FROM "pglogic"."corpus_1_passages" p WHERE' in text
    assert 'max(coalesce(nullif(1 - ("p"."embedding" <=> %(v1)s::vector(3))' in text
    assert 'GROUP BY "d"."id"' in text
    single = compile_query(parse('"a" AND NOT "b"'), PASSAGE_CORPUS, SearchOptions(passages=False))
    assert "passages" not in single.as_string()
    filtered = compile_query(
        parse('"a" OR "b"'), PASSAGE_CORPUS, SearchOptions(filters=(parse_filter("topic=grain"),))
    ).as_string()  # the documents' filter joins the passage scans
    assert 'p JOIN "pglogic"."corpus_1" "d" ON "d"."id" = "p"."doc_id"' in filtered


# -- real Postgres, real model ---------------------------------------------------------------------


def _records() -> list[Record]:
    long_wheat = Record("long-wheat", FILLER * 12 + WHEAT, "Central bank holds rates")
    return [
        long_wheat,
        Record("rates-1", FILLER * 2, "Bank keeps rates"),
        Record("rates-2", FILLER + "Bond yields fell slightly.", "Bonds"),
        Record("wheat-1", WHEAT, "Wheat exports rise"),
        Record("sport", "The football team won the championship final on penalties.", "Final"),
    ]


@pytest.fixture
def news(dsn: str, minilm: Any) -> PgLogic:
    api = PgLogic(dsn)
    api.create_corpus("news", passage_tokens=64, passage_overlap=16)
    api.create_corpus("single", passages=False)
    from pglogic.store.db import connect

    with connect(dsn) as conn:
        for name in ("news", "single"):
            stats = ingest_records(conn, get_corpus(conn, name), _records(), embedder=minilm)
            assert stats.inserted == 5
            if name == "news":
                assert stats.passages > 5 and stats.truncated == 0
            else:
                assert stats.truncated == 1 and stats.passages == 0  # long-wheat, said out loud
    for name in ("news", "single"):
        api.build_index(name)
    return api


@pytest.mark.db
@pytest.mark.model
def test_not_sees_the_last_passage_and_explain_names_it(news: PgLogic) -> None:
    q = '"central bank interest rates" AND NOT "wheat exports"'
    over = [h.external_id for h in news.search("news", q, k=5).hits]
    single = [h.external_id for h in news.search("single", q, k=5, not_mention=0).hits]
    cut = [h.external_id for h in news.search("news", q, k=5, passages=False, not_mention=0).hits]
    # the long story's wheat paragraph is past the model's window: a single vector misses it
    assert single.index("long-wheat") < 2 and cut.index("long-wheat") < 2
    # ... but its words say "wheat exports": the default's mention floor pushes it down there too
    floored = [h.external_id for h in news.search("single", q, k=5).hits]
    assert floored.index("long-wheat") > single.index("long-wheat")
    assert over.index("long-wheat") > over.index("rates-1")
    assert over.index("long-wheat") > over.index("rates-2")
    # (not_mention 0: every similarity is its deciding passage's, none floored by a mention)
    res = news.search("news", q, k=5, explain_passages=True, passage_score="max", not_mention=0)
    hit = next(h for h in res.hits if h.external_id == "long-wheat")
    deciding = {p.term: p for p in res.passages[hit.id]}
    wheat = deciding["wheat exports"]
    assert wheat.ord > 0 and "wheat" in wheat.snippet
    assert abs(wheat.similarity - hit.similarities["wheat exports"]) < 1e-5
    assert deciding["central bank interest rates"].similarity == pytest.approx(
        hit.similarities["central bank interest rates"], abs=1e-5
    )


@pytest.mark.db
@pytest.mark.model
def test_blend_keeps_the_not_and_averages_positive_texts_with_the_document(news: PgLogic) -> None:
    q = '"central bank interest rates" AND NOT "wheat exports"'
    blend = news.search("news", q, k=5, passage_score="blend")
    ids = [h.external_id for h in blend.hits]
    assert ids.index("long-wheat") > ids.index("rates-1")
    assert ids == [h.external_id for h in news.search("news", q, k=5, passage_score="blend",
                                                      exact=True).hits]  # fmt: skip
    best = {h.external_id: h for h in news.search("news", q, k=5, passage_score="max").hits}
    own = {h.external_id: h for h in news.search("news", q, k=5, passages=False).hits}
    for h in blend.hits:  # the NOT's term: its best passage; the positive term: the mean
        assert h.similarities["wheat exports"] == pytest.approx(
            best[h.external_id].similarities["wheat exports"], abs=1e-5
        )
        if h.external_id in own:
            pos = "central bank interest rates"
            mean = (
                best[h.external_id].similarities[pos] + own[h.external_id].similarities[pos]
            ) / 2
            assert h.similarities[pos] == pytest.approx(mean, abs=1e-5)
    with pytest.raises(InvalidInput, match="Unknown passage score 'min'"):
        news.search("news", q, passage_score="min")


@pytest.mark.db
@pytest.mark.model
def test_the_default_blends_with_a_not_and_in_a_disjunction_and_takes_the_best_passage_else(
    news: PgLogic,
) -> None:
    """``blend-not-or`` (the default): a formula with a negated term is scored as ``blend``, a
    plain conjunction as ``max``, one term with a tenth of the document's own vector (neither
    ``max`` nor ``blend``); approximate and exact agree."""

    def run(q: str, **kw: object) -> list[tuple[str, float]]:
        hits = news.search("news", q, k=5, **kw).hits  # type: ignore[arg-type]
        return [(h.external_id, round(h.score, 5)) for h in hits]

    with_not = '"central bank interest rates" AND NOT "wheat exports"'
    assert (
        run(with_not) == run(with_not, passage_score="blend") != run(with_not, passage_score="max")
    )
    assert run(with_not) == run(with_not, exact=True)
    conjunction = '"central bank interest rates" AND "wheat exports"'
    assert run(conjunction) == run(conjunction, passage_score="max")
    assert run(conjunction) != run(conjunction, passage_score="blend")
    one = '"wheat exports"'  # (blend-not: the best passage alone)
    assert run(one, passage_score="blend-not") == run(one, passage_score="max")
    assert run(one) not in (run(one, passage_score="max"), run(one, passage_score="blend"))
    assert run(one) == run(one, exact=True)


@pytest.mark.db
@pytest.mark.model
def test_approximate_equals_exact_and_single_terms_return_distinct_documents(
    news: PgLogic,
) -> None:
    for q in ['"wheat exports"', '"bank" AND NOT "football"', '"wheat" OR "football"']:
        approx = news.search("news", q, k=5)
        exact = news.search("news", q, k=5, exact=True)
        assert [h.external_id for h in approx.hits] == [h.external_id for h in exact.hits]
        ids = [h.external_id for h in approx.hits]
        assert len(ids) == len(set(ids)) == 5


@pytest.mark.db
@pytest.mark.model
def test_reingest_resplits_only_the_changed_document(dsn: str, news: PgLogic, minilm: Any) -> None:
    from pglogic.store.db import connect

    with connect(dsn) as conn:
        c = get_corpus(conn, "news")
        assert c.passage_tokens == 64 and c.passage_overlap == 16
        table = c.passage_table
        assert table is not None
        before = dict(conn.execute(sql.SQL("SELECT id, doc_id FROM {}").format(table)).fetchall())
        again = ingest_records(conn, c, _records(), embedder=minilm)
        assert (again.unchanged, again.passages, again.embedded) == (5, 0, 0)
        changed = [*_records()[1:], Record("long-wheat", FILLER * 3, "Central bank holds rates")]
        stats = ingest_records(conn, c, changed, embedder=minilm)
        assert (stats.updated, stats.embedded) == (1, 1)
        after = dict(conn.execute(sql.SQL("SELECT id, doc_id FROM {}").format(table)).fetchall())
        doc = conn.execute(
            sql.SQL("SELECT id FROM {} WHERE external_id = 'long-wheat'").format(c.table)
        ).fetchone()
        assert doc is not None
        kept = {i for i, d in before.items() if d != doc[0]}
        assert kept <= set(after)  # the other documents' passages were not touched
        assert len([d for d in after.values() if d == doc[0]]) < len(
            [d for d in before.values() if d == doc[0]]
        )
        stats_p = passage_stats(conn, c)
        assert stats_p is not None and stats_p.documents == 5
    res = news.search("news", '"central bank interest rates" AND NOT "wheat exports"', k=5)
    assert res.hits[0].external_id in {"long-wheat", "rates-1", "rates-2"}


@pytest.mark.db
def test_precomputed_vectors_are_one_passage_each(conn: Any) -> None:
    c = create_corpus(
        conn, "hand", model="m", dim=3, passages=PassageLayout(16, 4, "words"), lexical=None
    )
    rows = [
        Record("a", "alpha " * 40, None, {"g": 1}, (1.0, 0.0, 0.0)),
        Record("b", "beta", None, {"g": 2}, (0.0, 1.0, 0.0)),
        Record("c", "gamma", None, {"g": 1}, (0.6, 0.8, 0.0)),
    ]
    ingest_records(conn, c, rows, embedder=None)
    build_index(conn, "hand")
    ps = passage_stats(conn, c)
    assert ps is not None and (ps.passages, ps.split, ps.embedded) == (3, 0, 3)
    assert 0 < ps.hnsw_bytes < ps.index_bytes  # the HNSW index, and the (doc_id, ord) one

    class Fixed:
        name, dim = "m", 3

        def embed(self, texts: list[str]) -> np.ndarray:
            table = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0)}
            return np.array([table[t] for t in texts], dtype=np.float32)

    res = search(conn, c, '"x" AND NOT "y"', embedder=Fixed())
    assert [h.external_id for h in res.hits][:2] == ["a", "c"]
    only_g2 = search(conn, c, '"x" OR "y"', embedder=Fixed(),
                     options=SearchOptions(filters=(parse_filter("g=2"),)))  # fmt: skip
    assert [h.external_id for h in only_g2.hits] == ["b"]


@pytest.mark.db
@pytest.mark.model
def test_a_passage_larger_than_the_window_is_refused(dsn: str) -> None:
    with pytest.raises(InvalidInput, match="reads 254 tokens at most"):
        PgLogic(dsn).create_corpus("big", passage_tokens=512)
    with pytest.raises(InvalidInput, match="need passages=True"):
        PgLogic(dsn).create_corpus("none", passages=False, passage_tokens=128)


@pytest.mark.db
@pytest.mark.model
def test_cli_explain_shows_the_deciding_passage_and_show_counts_passages(
    dsn: str, news: PgLogic
) -> None:
    from tests.conftest import cli_in_process

    env = {"PGLOGIC_DSN": dsn, "COLUMNS": "200"}
    q = '"central bank interest rates" AND NOT "wheat exports"'
    out = cli_in_process("search", "news", q, "--explain", "-k", "5", env=env)
    assert out.returncode == 0, out.stderr
    assert "Deciding passages" in out.stdout
    # the long story's wheat similarity comes from a late passage, not its first
    assert re.search(
        r'long-wheat  "wheat exports" 0\.\d+  passage [1-9]\d* \[\d+:\d+\]', out.stdout
    )
    # the default blends the positive term with the document's own vector: both are shown
    assert re.search(
        r'long-wheat  "central bank interest rates" 0\.\d+ \(with the document\'s own vector: '
        r"0\.\d+\)  passage \d+",
        out.stdout,
    )
    maxed = cli_in_process(
        "search", "news", q, "--explain", "-k", "5", "--passage-score", "max", env=env
    )
    assert "own vector" not in maxed.stdout
    js = cli_in_process("search", "news", q, "--json", "-k", "5", env=env)
    rows = [json.loads(x) for x in js.stdout.splitlines()]
    assert all(set(r["passages"]) >= {"central bank interest rates", "wheat exports"} for r in rows)
    show = cli_in_process("corpus", "show", "news", env=env)
    assert "64 tokens per passage, 16 shared (all-MiniLM-L6-v2 tokenizer)" in show.stdout
    assert "documents split" in show.stdout


def test_eval_restricts_to_long_documents_and_names_layouts(tmp_path: Path) -> None:
    from pglogic.embed.passages import Tokenizer
    from pglogic.eval.data import load_dataset
    from pglogic.eval.evaluate import corpus_name_for
    from pglogic.eval.long_docs import long_only

    rows = [
        {"id": "a", "title": "T", "text": "one two three four five six", "labels": ["x"]},
        {"id": "b", "text": "one two", "labels": ["x", "y"]},
        {"id": "c", "text": "one two three four five six seven", "labels": ["y"]},
    ]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = load_dataset(tmp_path)
    tok = Tokenizer(5, word_offsets, False, "words")
    sub = long_only(ds, tok, tmp_path / "cache")
    assert (sub.name, sub.doc_ids, sub.queries) == (f"{ds.name}_long", ("a", "c"), ())
    assert sub.label_docs() == {"x": frozenset({"a"}), "y": frozenset({"c"})}
    assert corpus_name_for(sub, "all-MiniLM-L6-v2") == f"eval_{ds.name}_long"
    assert corpus_name_for(ds, "all-MiniLM-L6-v2", (False, None, None)).endswith("_1vec")
    with pytest.raises(InvalidInput, match="No document"):
        long_only(ds, Tokenizer(50, word_offsets, False, "words"), tmp_path / "cache")
