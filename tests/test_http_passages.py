"""The HTTP API over a corpus with passages (real Postgres, real all-MiniLM-L6-v2, the read-only
reader role): ``passages`` switches between the best passage and the document's own vector,
``explain`` names the passage that decided each similarity, as the Python API does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai_stub import ChatServer
from starlette.testclient import TestClient

from pglogic import PgLogic
from pglogic.integrations.http import ServeConfig, create_app
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from tests.conftest import TEMPLATE_DB, Server
from tests.long_texts import FILLER, WHEAT

pytestmark = [pytest.mark.db, pytest.mark.model]

RECORDS = [
    Record("long-wheat", FILLER * 12 + WHEAT, "Central bank holds rates"),
    Record("rates-1", FILLER * 2, "Bank keeps rates"),
    Record("rates-2", FILLER + "Bond yields fell slightly.", "Bonds"),
    Record("wheat-1", WHEAT, "Wheat exports rise"),
    Record("sport", "The football team won the championship final on penalties.", "Final"),
]
QUERY = '"central bank interest rates" AND NOT "wheat exports"'


@pytest.fixture(scope="module")
def dsn(pg_server: Server, minilm: Any) -> Iterator[str]:
    """Corpus 'news' with passages of 64 tokens (16 shared), 'single' without passages."""
    name = f"t_httpp_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        url = pg_server.dsn_for(name)
        api = PgLogic(url)
        api.create_corpus("news", passage_tokens=64, passage_overlap=16)
        api.create_corpus("single", passages=False)
        with connect(url) as conn:
            for corpus in ("news", "single"):
                ingest_records(conn, get_corpus(conn, corpus), RECORDS, embedder=minilm)
        for corpus in ("news", "single"):
            api.build_index(corpus)
        api.close()
        yield url
    finally:
        janitor.drop()


@pytest.fixture(scope="module")
def client(dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    keys: Path = tmp_path_factory.mktemp("keys") / "keys.json"
    app = create_app(ServeConfig(dsn=dsn, keys_file=keys, llm_env={}))
    with TestClient(app, client=("127.0.0.1", 50000)) as c:
        yield c


@pytest.fixture(scope="module")
def direct(dsn: str) -> Iterator[PgLogic]:
    with PgLogic(dsn) as api:
        yield api


def search(c: TestClient, **body: Any) -> httpx.Response:
    res = c.post("/v1/search", json={"corpus": "news", "query": QUERY, "k": 5, **body})
    assert res.status_code == 200, res.text
    return res


def test_explain_names_the_deciding_passage_of_each_text(
    client: TestClient, direct: PgLogic
) -> None:
    # (max: every similarity is its deciding passage's; the default blends the positive ones)
    # (not_mention 0: every similarity is its passage's, none is floored by a mention)
    body = search(client, explain=True, passage_score="max", not_mention=0).json()
    ids = [h["id"] for h in body["hits"]]
    # the long story's wheat paragraph is past the model's window: its last passage has it
    assert ids.index("long-wheat") > ids.index("rates-1")
    assert ids.index("long-wheat") > ids.index("rates-2")
    want = direct.search(
        "news", QUERY, k=5, explain_passages=True, passage_score="max", not_mention=0
    )
    assert ids == [h.external_id for h in want.hits]
    for hit, py in zip(body["hits"], want.hits, strict=True):
        passages = hit["explain"]["passages"]
        assert set(passages) == set(hit["similarities"]) == set(hit["explain"]["truths"])
        for d in want.passages[py.id]:
            p = passages[d.term]
            assert (p["ord"], p["start"], p["end"], p["snippet"]) == (
                d.ord, d.start, d.end, d.snippet
            )  # fmt: skip
            assert p["similarity"] == pytest.approx(hit["similarities"][d.term], abs=1e-5)
            assert 0 <= p["start"] < p["end"] and 0 < len(p["snippet"]) <= 160
    long_wheat = next(h for h in body["hits"] if h["id"] == "long-wheat")
    wheat = long_wheat["explain"]["passages"]["wheat exports"]
    assert wheat["ord"] > 0 and "wheat" in wheat["snippet"]
    rates = long_wheat["explain"]["passages"]["central bank interest rates"]
    assert rates["ord"] < wheat["ord"] and "central bank" in rates["snippet"]
    short = next(h for h in body["hits"] if h["id"] == "rates-2")  # one passage: the story
    assert {p["ord"] for p in short["explain"]["passages"].values()} == {0}
    assert short["explain"]["passages"]["wheat exports"]["start"] == 0
    # the default (blend-not-or): the negated term's similarity is still its deciding passage's
    for hit in search(client, explain=True, not_mention=0).json()["hits"]:
        wheat = hit["explain"]["passages"]["wheat exports"]
        assert wheat["similarity"] == pytest.approx(hit["similarities"]["wheat exports"], abs=1e-5)


def test_passages_false_reads_the_documents_own_vectors(
    client: TestClient, direct: PgLogic
) -> None:
    body = search(client, explain=True, passages=False, include_sql=True, not_mention=0).json()
    ids = [h["id"] for h in body["hits"]]
    want = direct.search("news", QUERY, k=5, passages=False, not_mention=0).hits
    assert ids == [h.external_id for h in want]
    assert ids.index("long-wheat") < 2  # the wheat paragraph is cut off: the similarity misses it
    # ... but its words say it: the default's mention floor (not_mention) pushes it down
    floored = [h["id"] for h in search(client, passages=False).json()["hits"]]
    assert floored.index("long-wheat") > ids.index("long-wheat")
    assert all(h["explain"]["passages"] is None for h in body["hits"])
    assert "_passages" not in body["sql"]["text"]
    over = search(client, include_sql=True).json()
    assert "_passages" in over["sql"]["text"]
    assert all(h["explain"] is None for h in over["hits"])  # explain off: no passages asked


def test_passage_score_blend_is_the_python_search(client: TestClient, direct: PgLogic) -> None:
    """ "passage_score": "blend" reaches the search (its hits and scores are Python's), the
    compiled SQL shows the blended similarity, and an unknown value is refused (422); the
    default, "blend-not-or", is "blend" with a NOT and "max" in a conjunction without."""
    body = search(client, passage_score="blend", include_sql=True).json()
    want = direct.search("news", QUERY, k=5, passage_score="blend").hits
    assert [h["id"] for h in body["hits"]] == [h.external_id for h in want]
    assert [h["score"] for h in body["hits"]] == pytest.approx([h.score for h in want])
    plain = search(client, passage_score="max").json()
    assert [h["score"] for h in plain["hits"]] != [h["score"] for h in body["hits"]]
    assert ") / 2 AS" in body["sql"]["text"]
    # the default, blend-not-or: blend in this formula with a NOT; max in a conjunction without
    default = search(client).json()
    assert [h["score"] for h in default["hits"]] == pytest.approx([h.score for h in want])
    no_not = {"query": '"central bank interest rates" AND "wheat exports"'}
    assert (
        search(client, **no_not).json()["hits"]
        == search(client, **no_not, passage_score="max").json()["hits"]
    )
    res = client.post("/v1/search", json={"corpus": "news", "query": QUERY, "passage_score": "min"})
    assert res.status_code == 422, res.text


def test_a_corpus_without_passages_explains_without_them(
    client: TestClient, direct: PgLogic
) -> None:
    on = search(client, corpus="single", explain=True).json()
    off = search(client, corpus="single", explain=True, passages=False).json()
    assert [h["id"] for h in on["hits"]] == [h["id"] for h in off["hits"]]
    assert [h["id"] for h in on["hits"]] == [
        h.external_id for h in direct.search("single", QUERY, k=5).hits
    ]
    assert all(h["explain"]["passages"] is None for h in on["hits"] + off["hits"])


def test_compile_and_the_dense_side_follow_the_flag(client: TestClient) -> None:
    def compiled(**body: Any) -> str:
        res = client.post("/v1/compile", json={"corpus": "news", "query": QUERY, **body})
        assert res.status_code == 200, res.text
        text: str = res.json()["sql"]["text"]
        return text

    assert "_passages" in compiled() and "_passages" not in compiled(passages=False)
    body = search(client, dense=True, explain=True).json()
    assert len(body["dense"]["hits"]) == 5
    assert all(h["explain"] is None for h in body["dense"]["hits"])
    res = client.post("/v1/search", json={"corpus": "news", "query": QUERY, "passages": "some"})
    assert res.status_code == 422 and res.json()["error"]["type"] == "validation"


def test_ask_explains_over_passages_too(dsn: str, tmp_path: Path, direct: PgLogic) -> None:
    with ChatServer() as chat:
        chat.script(QUERY)
        chat.script(QUERY)
        env = {"PGLOGIC_LLM_BASE_URL": chat.url, "PGLOGIC_LLM_MODEL": "m",
               "PGLOGIC_LLM_OUTPUT": "plain"}  # fmt: skip
        config = ServeConfig(dsn=dsn, keys_file=tmp_path / "keys.json", llm_env=env)
        with TestClient(create_app(config), client=("127.0.0.1", 50000)) as c:
            ask = {
                "corpus": "news",
                "question": "central bank interest rates, not wheat exports",
                "k": 5,
                "explain": True,
            }
            over = c.post("/v1/ask", json=ask).json()
            cut = c.post("/v1/ask", json={**ask, "passages": False}).json()
    assert over["query"] == QUERY and over["fallback"] is False
    want = direct.search("news", QUERY, k=5, explain_passages=True)
    assert [h["id"] for h in over["hits"]] == [h.external_id for h in want.hits]
    long_wheat = next(h for h in over["hits"] if h["id"] == "long-wheat")
    assert long_wheat["explain"]["passages"]["wheat exports"]["ord"] > 0
    assert [h["id"] for h in cut["hits"]] == [
        h.external_id for h in direct.search("news", QUERY, k=5, passages=False).hits
    ]
    assert all(h["explain"]["passages"] is None for h in cut["hits"])
