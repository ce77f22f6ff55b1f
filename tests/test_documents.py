"""Documents in and out from Python (``PgLogic.add_documents``, ``get_documents``,
``delete_documents``), and hits that carry the external id, the text and a snippet, in Python
and over HTTP; with all-MiniLM-L6-v2, over a corpus with passages of 64 tokens and one without.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from psycopg import sql
from starlette.testclient import TestClient

import pglogic
from pglogic import Document, FieldMap, IngestStats, InvalidInput, PgLogic
from pglogic.integrations.http import ServeConfig, create_app
from pglogic.store.db import connect
from tests.conftest import TEMPLATE_DB, Server
from tests.long_texts import FILLER, WHEAT

LONG = {"id": "long-wheat", "title": "Central bank holds rates", "text": FILLER * 12 + WHEAT,
        "places": ["uk"]}  # fmt: skip
RECORDS: list[dict[str, Any]] = [
    LONG,
    {"id": "rates-1", "title": "Bank keeps rates", "text": FILLER * 2, "places": ["usa"]},
    {"id": "wheat-1", "title": "Wheat exports rise", "text": WHEAT, "places": ["usa"]},
    {"id": 7, "text": "The football team won the championship final on penalties."},
]


@pytest.fixture(scope="module")
def dsn(pg_server: Server, minilm: Any) -> Iterator[str]:
    """Corpora 'news' (passages of 64 tokens, 16 shared), 'filed' (the same layout, for the
    file ingest) and 'single' (no passages), empty."""
    name = f"t_docs_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        url = pg_server.dsn_for(name)
        with PgLogic(url) as api:
            for corpus in ("news", "filed"):
                api.create_corpus(corpus, passage_tokens=64, passage_overlap=16)
            api.create_corpus("single", passages=False)
        yield url
    finally:
        janitor.drop()


@pytest.fixture(scope="module")
def api(dsn: str) -> Iterator[PgLogic]:
    with PgLogic(dsn) as pl:
        yield pl


@pytest.fixture(scope="module")
def added(api: PgLogic, tmp_path_factory: pytest.TempPathFactory) -> IngestStats:
    """RECORDS added to 'news' and 'single' from memory, and to 'filed' from a JSONL file."""
    path = tmp_path_factory.mktemp("docs") / "docs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    api.ingest("filed", path)
    api.add_documents("single", RECORDS)
    return api.add_documents("news", RECORDS)


def _passages(dsn: str, corpus: str) -> list[tuple[Any, ...]]:
    with connect(dsn) as conn:
        table = PgLogic(dsn).corpus(corpus).passage_table
        assert table is not None
        return conn.execute(
            sql.SQL(
                "SELECT d.external_id, p.ord, p.char_start, p.char_end, p.embedding::text"
                " FROM {} p JOIN {} d ON d.id = p.doc_id ORDER BY 1, 2"
            ).format(table, PgLogic(dsn).corpus(corpus).table)
        ).fetchall()


def test_records_go_in_as_a_files_lines_do(api: PgLogic, dsn: str, added: IngestStats) -> None:
    assert (added.seen, added.inserted, added.embedded) == (4, 4, 4)
    assert added.passages > 4  # the long story was split
    assert _passages(dsn, "news") == _passages(dsn, "filed")  # same passages, same vectors
    got = api.get_documents("news", ["7", "long-wheat", "nope"])
    assert [d.id for d in got] == ["7", "long-wheat"]  # the order asked; no 'nope'
    assert got[1].title == LONG["title"] and got[1].text == LONG["text"]
    assert got[1].metadata == {"places": ["uk"]} and isinstance(got[1].row_id, int)
    assert api.get_documents("news", 7) == [got[0]]  # one id; an integer is its text


def test_adding_again_is_idempotent_and_a_change_updates(api: PgLogic, added: IngestStats) -> None:
    again = api.add_documents("news", RECORDS)
    assert (again.unchanged, again.inserted, again.updated, again.embedded) == (4, 0, 0, 0)
    [doc] = api.get_documents("news", ["rates-1"])
    assert api.add_documents("news", [doc]).unchanged == 1  # a Document is a round trip
    moved = dataclasses.replace(doc, metadata={"places": ["canada"]})
    stats = api.add_documents("news", [moved])
    assert (stats.updated, stats.embedded) == (1, 0)  # metadata only: no embedding
    assert api.get_documents("news", "rates-1")[0].metadata == {"places": ["canada"]}
    reworded = {**RECORDS[1], "text": FILLER + "Bond yields fell slightly."}
    stats = api.add_documents("news", [reworded])
    assert (stats.updated, stats.embedded) == (1, 1)
    api.add_documents("news", [RECORDS[1]])  # back as it was


def test_objects_with_attributes_and_field_maps(api: PgLogic, added: IngestStats) -> None:
    @dataclasses.dataclass
    class Faq:
        qid: str
        question: str
        answer: str
        lang: str

    class Note(NamedTuple):
        id: str
        text: str

    class Plain:
        def __init__(self) -> None:
            self.id, self.text, self.topic, self._cache = "plain-1", "Coffee prices fell.", "x", 1

    api.add_documents("single", [Faq("q1", "How do I reset?", "Hold the button.", "en")],
                      fields=FieldMap(id="qid", text="answer", title="question"))  # fmt: skip
    api.add_documents("single", [Note("note-1", "Cocoa rose."), Plain()])
    faq, note, plain = api.get_documents("single", ["q1", "note-1", "plain-1"])
    assert (faq.title, faq.text, faq.metadata) == ("How do I reset?", "Hold the button.",
                                                   {"lang": "en"})  # fmt: skip
    assert note.metadata == {} and plain.metadata == {"topic": "x"}
    assert api.delete_documents("single", ["q1", "note-1", "plain-1"]) == 3


def test_a_bad_record_is_refused_in_python_terms_and_nothing_is_written(
    api: PgLogic, added: IngestStats
) -> None:
    before = api.corpus_info("news").documents
    with pytest.raises(InvalidInput) as info:
        api.add_documents("news", [{"id": "ok", "text": "fine"}, {"id": "bad", "body": "x"}])
    assert str(info.value) == (
        "records[1] has no 'text' field (choose one with fields=FieldMap(text=...))"
    )
    with pytest.raises(InvalidInput, match="records is a list of records, not one str"):
        api.add_documents("news", "news.jsonl")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"^records\[0\] is int: give a dict or an object"):
        api.add_documents("news", [5])
    assert api.corpus_info("news").documents == before
    assert api.get_documents("news", ["ok"]) == []


def test_delete_documents_takes_their_passages(api: PgLogic, dsn: str, added: IngestStats) -> None:
    api.add_documents("news", [{"id": "gone", "text": FILLER * 6, "title": "Going"}])
    assert any(p[0] == "gone" for p in _passages(dsn, "news"))
    assert api.delete_documents("news", ["gone", "never-there"]) == 1
    assert api.delete_documents("news", "gone") == 0
    assert not any(p[0] == "gone" for p in _passages(dsn, "news"))
    assert api.get_documents("news", ["gone"]) == []


def test_hits_carry_the_external_id_text_and_snippet(api: PgLogic, added: IngestStats) -> None:
    """``Hit.id`` and the keys of ``result.passages`` were the internal row id."""
    res = api.search("news", '"wheat exports"', k=4, explain_passages=True, text=True,
                     snippet=True)  # fmt: skip
    assert {h.id for h in res.hits} == {"long-wheat", "rates-1", "wheat-1", "7"}
    assert all(h.id == h.external_id and isinstance(h.row_id, int) for h in res.hits)
    assert set(res.passages) == {h.id for h in res.hits}
    long = next(h for h in res.hits if h.id == "long-wheat")
    assert long.text == LONG["text"]
    deciding = res.passages["long-wheat"][0]
    assert deciding.ord > 0  # the wheat paragraph, past the first passages
    assert long.snippet is not None and "wheat exports" in long.snippet
    assert not long.snippet.startswith(FILLER[:40]) and len(long.snippet) <= 300
    plain = api.search("news", '"wheat exports"', k=4, snippet=True)
    assert [(h.id, h.snippet) for h in plain.hits] == [(h.id, h.snippet) for h in res.hits]
    assert plain.passages == {} and all(h.text is None for h in plain.hits)
    single = api.search("single", '"wheat exports"', k=4, snippet=True)  # no passages
    hit = next(h for h in single.hits if h.id == "long-wheat")
    assert hit.snippet is not None and hit.snippet.startswith(FILLER[:40])


def test_http_documents_and_hits(dsn: str, added: IngestStats, tmp_path: Path) -> None:
    app = create_app(ServeConfig(dsn=dsn, keys_file=tmp_path / "keys.json", llm_env={}))
    with TestClient(app, client=("127.0.0.1", 50000)) as c:
        res = c.get("/v1/corpora/news/documents", params=[("id", "wheat-1"), ("id", "nope")])
        assert res.status_code == 200, res.text
        body = res.json()
        assert [d["id"] for d in body["documents"]] == ["wheat-1"] and body["missing"] == ["nope"]
        assert body["documents"][0]["text"] == WHEAT
        assert c.get("/v1/corpora/nope/documents", params={"id": "x"}).status_code == 404
        assert c.get("/v1/corpora/news/documents").status_code == 422
        found = c.post("/v1/search", json={"corpus": "news", "query": '"wheat exports"', "k": 4,
                                           "snippet": True, "text": True}).json()  # fmt: skip
        with PgLogic(dsn) as pl:
            want = pl.search("news", '"wheat exports"', k=4, snippet=True, text=True)
        assert [(h["id"], h["snippet"], h["text"]) for h in found["hits"]] == [
            (h.id, h.snippet, h.text) for h in want.hits
        ]
        bare = c.post("/v1/search", json={"corpus": "news", "query": '"wheat"', "k": 2}).json()
        assert all(h["snippet"] is None and h["text"] is None for h in bare["hits"])


def test_the_public_types_come_from_pglogic() -> None:
    for name in ("FieldMap", "Document", "IngestStats", "Hit", "SearchResult", "SearchOptions",
                 "Corpus", "CorpusInfo", "Deciding", "AskResult", "LLMConfig", "Contains",
                 "Comparison", "parse_filters", "InvalidInput", "UnknownCorpus"):  # fmt: skip
        assert name in pglogic.__all__ and getattr(pglogic, name) is not None
    assert Document("a", "b").row_id is None
