"""The HTTP API of ``pglogic serve`` through httpx (Starlette's TestClient) against the real
Postgres and a corpus of Reuters documents embedded with all-MiniLM-L6-v2: searches agree with
the Python API, explanations add up, errors are JSON with the right status, keys, limits, CORS,
the read-only role, the committed OpenAPI schema, and the real console script serving over TCP.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from click.testing import CliRunner
from openai_stub import ChatServer
from starlette.testclient import TestClient

from pglogic import PgLogic
from pglogic.cli import cli
from pglogic.errors import ConfigError, SearchTimeout
from pglogic.integrations.http import ServeConfig, create_app
from pglogic.integrations.http.backend import Backend
from pglogic.integrations.http.errors import from_pglogic_error
from pglogic.integrations.http.keys import KeyStore
from tests.conftest import ROOT, Server, reuters_database

LOCAL = ("127.0.0.1", 50000)
REMOTE = ("203.0.113.7", 50000)
QUERY = '"grain" AND NOT "wheat"'
OPENAPI = ROOT / "docs" / "openapi.json"


@pytest.fixture(scope="module")
def news_dsn(pg_server: Server, minilm: Any, shared_data: Path) -> Iterator[str]:
    """A database with corpus 'news': 300 Reuters documents, HNSW index."""
    yield from reuters_database(pg_server, "t_http", 300)


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("keys") / "http-keys.json"


def make_client(
    dsn: str, keys_file: Path, client: tuple[str, int] = LOCAL, **kw: Any
) -> TestClient:
    config = ServeConfig(dsn=dsn, keys_file=keys_file, llm_env=kw.pop("llm_env", {}), **kw)
    return TestClient(create_app(config), client=client)


@pytest.fixture(scope="module")
def api_client(news_dsn: str, keys_file: Path) -> Iterator[TestClient]:
    with make_client(news_dsn, keys_file) as c:
        yield c


@pytest.fixture(scope="module")
def direct(news_dsn: str) -> Iterator[PgLogic]:
    with PgLogic(news_dsn) as api:
        yield api


def search(c: TestClient, **body: Any) -> httpx.Response:
    return c.post("/v1/search", json={"corpus": "news", "query": QUERY, **body})


def error(res: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert res.status_code == status, res.text
    assert res.headers["content-type"] == "application/json"
    body = res.json()
    assert set(body) == {"error"} and body["error"]["type"] == kind, body
    assert "Traceback" not in res.text
    return dict(body["error"])


# -- health, corpora, operators -------------------------------------------------------------


def test_health_reports_the_read_only_reader_role(api_client: TestClient) -> None:
    body = api_client.get("/v1/health").json()
    assert body["status"] == "ok" and body["database"] == "ok"
    assert body["read_only"] is True and body["role"] == "pglogic_reader"
    assert body["llm"] is False


def test_the_pool_cannot_write(api_client: TestClient) -> None:
    backend: Backend = api_client.app.state.backend  # type: ignore[attr-defined]
    with backend.api.pooled() as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("pglogic_reader",)
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction), backend.api.pooled() as conn:
        conn.execute("DELETE FROM pglogic.term_cache")


def test_corpora_list_and_show(api_client: TestClient) -> None:
    listed = api_client.get("/v1/corpora").json()["corpora"]
    assert [c["name"] for c in listed] == ["news"]
    news = api_client.get("/v1/corpora/news").json()
    assert news["documents"] == 300 and news["dim"] == 384
    assert news["model"] == "all-MiniLM-L6-v2" and news["index_name"]
    err = error(api_client.get("/v1/corpora/nope"), 404, "unknown_corpus")
    assert "Unknown corpus 'nope'" in err["message"]


def test_operators_lists_the_presets_and_modes(api_client: TestClient) -> None:
    body = api_client.get("/v1/operators").json()
    names = [f["name"] for f in body["families"]]
    assert body["default"] == "product-max-strong" and {"godel", "itlr"} <= set(names)
    godel = next(f for f in body["families"] if f["name"] == "godel")
    assert godel["and"].startswith("min") and "fuzzy" in body["modes"]


# -- search ------------------------------------------------------------------------------------


def test_search_returns_what_the_python_api_returns(
    api_client: TestClient, direct: PgLogic
) -> None:
    body = search(api_client, k=7).json()
    want = direct.search("news", QUERY, k=7)
    assert [h["id"] for h in body["hits"]] == [h.external_id for h in want.hits]
    assert [h["score"] for h in body["hits"]] == pytest.approx([h.score for h in want.hits])
    assert [h["rank"] for h in body["hits"]] == list(range(1, 8))
    assert body["query"] == QUERY and body["logical"] is True
    assert body["terms"] == [{"text": "grain", "role": "positive"},
                             {"text": "wheat", "role": "negated"}]  # fmt: skip
    assert body["hits"][0]["metadata"]["labels"]
    assert body["took_ms"] > 0 and set(body["timings_ms"]) >= {"compile", "embed", "database"}
    assert body["dense"] is None and body["sql"] is None


def test_explain_gives_truths_and_what_each_not_took(api_client: TestClient) -> None:
    hits = search(api_client, k=10, explain=True).json()["hits"]
    for h in hits:
        ex = h["explain"]
        assert set(ex["truths"]) == {"grain", "wheat"}
        for t, sim in h["similarities"].items():
            assert ex["truths"][t] == pytest.approx(min(1.0, max(0.0, sim)))
        (n,) = ex["nots"]
        assert n["expr"] == 'NOT "wheat"' and n["terms"] == ["wheat"]
        assert n["truth"] == pytest.approx((1 - ex["truths"]["wheat"]) ** 1.25)
        assert n["without"] == pytest.approx(ex["truths"]["grain"])
        assert h["score"] == pytest.approx(n["without"] + n["contribution"])
        assert n["contribution"] <= 0


def test_not_context_reaches_the_engine(api_client: TestClient, direct: PgLogic) -> None:
    """``"grain" AND NOT "wheat"``: "wheat" scored without half of "grain" by default, as it is
    with 0; each as the Python API ranks."""
    sims = {}
    for lam in (0.5, 0.0):
        # (not_mention 0: a story that says "wheat" would show the floor under both)
        body = search(api_client, k=7, not_context=lam, not_mention=0).json()
        want = direct.search("news", QUERY, k=7, not_context=lam, not_mention=0)
        assert [h["id"] for h in body["hits"]] == [h.external_id for h in want.hits]
        sims[lam] = {h["id"]: h["similarities"]["wheat"] for h in body["hits"]}
    common = set(sims[0.5]) & set(sims[0.0])
    assert common and all(sims[0.5][d] != pytest.approx(sims[0.0][d]) for d in common)


def test_not_mention_reaches_the_engine(api_client: TestClient, direct: PgLogic) -> None:
    """``"grain" AND NOT "wheat"``: a story that says "wheat" is at least 0.4 like it by default,
    not with 0; each as the Python API ranks."""
    for floor in (0.4, 0.0):
        body = search(api_client, k=7, not_mention=floor).json()
        want = direct.search("news", QUERY, k=7, not_mention=floor)
        assert [h["id"] for h in body["hits"]] == [h.external_id for h in want.hits]
        assert [h["score"] for h in body["hits"]] == pytest.approx([h.score for h in want.hits])
    bad = api_client.post("/v1/search", json={"corpus": "news", "query": QUERY, "not_mention": 2})
    assert bad.status_code == 422


def test_explain_with_the_and_texts_and_two_nots(api_client: TestClient) -> None:
    q = '"oil" AND "prices" AND NOT "gas" AND NOT "opec"'
    body = search(api_client, query=q, k=5, explain=True).json()
    roles = {t["text"]: t["role"] for t in body["terms"]}
    assert roles == {"oil": "positive", "prices": "positive", "gas": "negated",
                     "opec": "negated", "oil and prices": "phrase"}  # fmt: skip
    for h in body["hits"]:
        nots = h["explain"]["nots"]
        assert [n["expr"] for n in nots] == ['NOT "gas"', 'NOT "opec"']
        for n in nots:  # under a product each NOT multiplies: without = score / its truth
            assert n["without"] * n["truth"] == pytest.approx(h["score"], rel=1e-6)


def test_lexical_terms_have_their_truths_roles_and_not_contributions(
    api_client: TestClient,
) -> None:
    q = '"grain" AND NOT match:wheat'
    body = search(api_client, query=q, k=10, explain=True, lexical="crisp").json()
    roles = {t["text"]: t["role"] for t in body["terms"]}
    assert roles == {"grain": "positive", 'match:"wheat"': "negated"}
    scores = []
    for h in body["hits"]:
        assert set(h["lexical"]) == {"wheat"} and h["lexical"]["wheat"] in (0.0, 1.0)
        ex = h["explain"]
        assert ex["truths"]['match:"wheat"'] == h["lexical"]["wheat"]
        (n,) = ex["nots"]
        assert n["expr"] == 'NOT match:"wheat"' and n["terms"] == ['match:"wheat"']
        assert n["truth"] == 1.0 - h["lexical"]["wheat"]
        assert h["score"] == pytest.approx(n["without"] + n["contribution"])
        scores.append((h["score"], h["lexical"]["wheat"]))
    # every story that names wheat scores 0, below every one that does not
    assert scores and all(s == 0.0 for s, w in scores if w == 1.0)
    assert sorted(scores, key=lambda p: -p[0]) == scores
    bad = search(api_client, query='"grain" AND NOT match:', k=3)
    assert error(bad, 400, "query_syntax")["column"] == 17


def test_explain_in_another_mode_has_no_not_contributions(api_client: TestClient) -> None:
    hits = search(api_client, k=3, explain=True, mode="nsfl").json()["hits"]
    assert hits and all(h["explain"]["nots"] is None for h in hits)
    assert all("grain" in h["explain"]["truths"] for h in hits)


def test_dense_side_is_the_plain_search_of_the_words(
    api_client: TestClient, direct: PgLogic
) -> None:
    body = search(api_client, k=5, dense=True).json()
    assert body["dense"]["query"] == "grain but not wheat"
    want = direct.search("news", "grain but not wheat", k=5)
    assert [h["id"] for h in body["dense"]["hits"]] == [h.external_id for h in want.hits]
    own = search(api_client, k=3, dense=True, dense_query="wheat harvest").json()["dense"]
    assert own["query"] == "wheat harvest" and len(own["hits"]) == 3


def test_plain_text_is_a_dense_search(api_client: TestClient, direct: PgLogic) -> None:
    body = search(api_client, query="coffee exports from Brazil", k=4).json()
    assert body["logical"] is False and body["query"] == "coffee exports from Brazil"
    want = direct.search("news", "coffee exports from Brazil", k=4)
    assert [h["id"] for h in body["hits"]] == [h.external_id for h in want.hits]
    assert body["note"] is None


def test_plain_text_that_looks_logical_runs_dense_with_a_note(
    api_client: TestClient, direct: PgLogic
) -> None:
    """Unquoted AND NOT is two words of one dense search (as documented): HTTP says how to
    write the logic, Python warns with the same words; both run what was given."""
    from pglogic import PlainTextWarning

    body = search(api_client, query="grain AND NOT wheat", k=3).json()
    assert body["logical"] is False and body["query"] == "grain AND NOT wheat"
    assert body["note"].endswith('quote the terms: "grain" AND NOT "wheat"')
    with pytest.warns(PlainTextWarning, match='"grain" AND NOT "wheat"'):
        want = direct.search("news", "grain AND NOT wheat", k=3)
    assert [h["id"] for h in body["hits"]] == [h.external_id for h in want.hits]


def test_filters_hold_on_every_hit(api_client: TestClient) -> None:
    hits = search(api_client, query='"prices"', k=5, filters=[{"labels": ["crude"]}]).json()["hits"]
    assert hits and all("crude" in h["metadata"]["labels"] for h in hits)
    hits = search(api_client, query='"prices"', k=5, filters=["text_type=NORM"]).json()["hits"]
    assert hits and all(h["metadata"]["text_type"] == "NORM" for h in hits)


def test_the_operator_family_changes_the_ranking(api_client: TestClient, direct: PgLogic) -> None:
    q = '("gold" OR "silver") AND NOT "mining"'
    rankings = {}
    for family in ("product-max-strong", "itlr", "godel"):
        body = search(api_client, query=q, k=10, operators=family).json()
        assert body["operators"] == family
        rankings[family] = [(h["id"], round(h["score"], 6)) for h in body["hits"]]
        want = direct.search("news", q, k=10, operators=family)
        assert [h["id"] for h in body["hits"]] == [h.external_id for h in want.hits]
    assert len(set(map(tuple, rankings.values()))) == 3


def test_include_sql_and_the_statement_timeout(api_client: TestClient) -> None:
    sql = search(api_client, k=3, include_sql=True).json()["sql"]
    assert sql["text"].startswith("WITH") and "%(k)s" in sql["text"]
    assert sql["parameters"]["k"] == 3 and sql["parameters"]["v0"] == "<embedding of 'grain'>"
    assert sql["settings"]["statement_timeout"] == "10000"  # the server's limit, in ms
    sql = search(api_client, k=3, include_sql=True, timeout=2.5).json()["sql"]
    assert sql["settings"]["statement_timeout"] == "2500"
    sql = search(api_client, k=3, include_sql=True, timeout=99).json()["sql"]
    assert sql["settings"]["statement_timeout"] == "10000"  # never above the server's


# -- compile -----------------------------------------------------------------------------------


def test_compile_without_and_with_a_corpus(api_client: TestClient) -> None:
    body = api_client.post("/v1/compile", json={"query": 'NOT "b" and "a"'}).json()
    assert body["query"] == '"a" AND NOT "b"' or body["query"] == 'NOT "b" AND "a"'
    assert body["logical"] is True and "corpus_0" in body["sql"]["text"]
    body = api_client.post("/v1/compile", json={"query": QUERY, "corpus": "news",
                                                "style": "numbered"}).json()  # fmt: skip
    sql = body["sql"]
    # over passages the guide's scan comes first; over the documents' vectors the terms' do
    assert "$1" in sql["text"] and sql["order"][:3] == ["vg", "gdepth", "v0"]
    assert sql["parameters"]["v0"] == "<embedding of 'grain'>"
    assert sql["parameters"]["vg"] == "<guide vector of the term embeddings>"
    body = api_client.post("/v1/compile", json={"query": QUERY, "corpus": "news",
                                                "style": "numbered", "passages": False}).json()  # fmt: skip
    # (then the mention floor's configuration and text: not_mention)
    assert body["sql"]["order"][:4] == ["v0", "v1", "lcfg", "t1"]
    assert "vg" in body["sql"]["order"] and "_passages" not in body["sql"]["text"]
    plain = api_client.post("/v1/compile", json={"query": "just words"}).json()
    assert plain["logical"] is False and plain["query"] == "just words"
    error(api_client.post("/v1/compile", json={"query": QUERY, "corpus": "nope"}), 404,
          "unknown_corpus")  # fmt: skip


@pytest.mark.parametrize(
    ("query", "column", "message"),
    [
        ('"a" AND NOT', 9, "Expected a quoted term after NOT at col 9"),
        ('"a" )', 5, "Unbalanced ) at col 5"),
        ('("a" OR "b"', 1, None),
    ],
)
def test_syntax_errors_carry_the_column(
    api_client: TestClient, query: str, column: int, message: str | None
) -> None:
    for res in (
        api_client.post("/v1/compile", json={"query": query}),
        search(api_client, query=query),
    ):
        err = error(res, 400, "query_syntax")
        assert err["column"] == column and err["position"] == column - 1
        assert err["query"] == query
        if message:
            assert err["message"] == message


# -- ask ---------------------------------------------------------------------------------------


def test_ask_without_an_llm_is_503(api_client: TestClient) -> None:
    err = error(api_client.post("/v1/ask", json={"corpus": "news", "question": "grain, not wheat"}),
                503, "llm_unavailable")  # fmt: skip
    assert "No LLM endpoint configured" in err["message"]


def test_ask_with_an_llm_searches_its_query(
    news_dsn: str, keys_file: Path, direct: PgLogic
) -> None:
    with ChatServer() as chat:
        chat.script(QUERY)
        env = {"PGLOGIC_LLM_BASE_URL": chat.url, "PGLOGIC_LLM_MODEL": "m",
               "PGLOGIC_LLM_OUTPUT": "plain"}  # fmt: skip
        with make_client(news_dsn, keys_file, llm_env=env) as c:
            assert c.get("/v1/health").json()["llm"] is True
            body = c.post("/v1/ask", json={"corpus": "news", "question": "grain but not wheat",
                                           "k": 4, "explain": True}).json()  # fmt: skip
    assert body["query"] == QUERY and body["fallback"] is False and body["rewrite_ms"] >= 0
    want = direct.search("news", QUERY, k=4)
    assert [h["id"] for h in body["hits"]] == [h.external_id for h in want.hits]
    assert body["hits"][0]["explain"]["nots"][0]["expr"] == 'NOT "wheat"'
    assert len(chat.requests) == 1


# -- errors and limits -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"query": QUERY}, "corpus"),
        ({"corpus": "news", "query": QUERY, "k": 0}, "k"),
        ({"corpus": "news", "query": QUERY, "k": "ten"}, "k"),
        ({"corpus": "news", "query": QUERY, "mode": "magic"}, "mode"),
        ({"corpus": "news", "query": QUERY, "colour": "red"}, "colour"),
        ({"corpus": "news", "query": ""}, "query"),
        ({"corpus": "news", "query": QUERY, "not_context": 1.5}, "not_context"),
    ],
)
def test_requests_off_the_schema_are_422(
    api_client: TestClient, body: dict[str, Any], where: str
) -> None:
    err = error(api_client.post("/v1/search", json=body), 422, "validation")
    assert err["message"].startswith(f"Invalid request: {where}:")


def test_a_body_that_is_not_json_is_422(api_client: TestClient) -> None:
    res = api_client.post("/v1/search", content=b"{not json",
                          headers={"content-type": "application/json"})  # fmt: skip
    error(res, 422, "validation")


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ({"k": 201}, "k = 201 is over this server's limit of 200"),
        ({"operators": "and=xor"}, "and"),
        ({"filters": ["price~~3"]}, "Invalid filter"),
        ({"query": " AND ".join(f'"t{i}"' for i in range(40))}, "too many terms: 40"),
        ({"query": "a" * 2001}, "over 2000 characters"),
        ({"query": 'NOT "wheat"'}, "positive"),
    ],
)
def test_queries_and_options_that_cannot_run_are_400(
    api_client: TestClient, body: dict[str, Any], text: str
) -> None:
    res = search(api_client, **body)
    assert res.status_code == 400, res.text
    assert text.lower() in res.json()["error"]["message"].lower()


def test_a_body_over_the_limit_is_413(news_dsn: str, keys_file: Path) -> None:
    with make_client(news_dsn, keys_file, max_body=1000) as c:
        err = error(search(c, dense_query="x" * 1200), 413, "body_too_large")
        assert "1000 bytes" in err["message"]
        assert search(c, k=1).status_code == 200

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"corpus": "news", "query": "' + b"y" * 600
            yield b"y" * 600 + b'"}'

        error(c.post("/v1/search", content=chunks(),
                     headers={"content-type": "application/json"}), 413, "body_too_large")  # fmt: skip


def test_unknown_paths_and_methods_are_json(api_client: TestClient) -> None:
    error(api_client.get("/v1/nothing"), 404, "not_found")
    error(api_client.get("/v1/search"), 405, "method_not_allowed")


def test_a_database_that_is_gone_is_503(keys_file: Path) -> None:
    with make_client("postgresql://nobody@/none?host=/nonexistent", keys_file) as c:
        error(c.get("/v1/corpora"), 503, "database_unavailable")
        body = c.get("/v1/health")
        assert body.status_code == 503 and body.json()["status"] == "unavailable"


def test_a_corpus_the_reader_may_not_read_is_503(api_client: TestClient, news_dsn: str) -> None:
    from psycopg import sql

    with psycopg.connect(news_dsn, autocommit=True) as admin:
        row = admin.execute("SELECT table_name FROM pglogic.corpora WHERE name = 'news'").fetchone()
        assert row is not None
        table = sql.Identifier("pglogic", row[0])
        admin.execute(sql.SQL("REVOKE SELECT ON {} FROM pglogic_reader").format(table))
        try:
            err = error(search(api_client, k=2), 503, "permission")
            assert "--no-reader" in err["message"]
        finally:
            admin.execute(sql.SQL("GRANT SELECT ON {} TO pglogic_reader").format(table))
    assert search(api_client, k=2).status_code == 200


def test_an_unexpected_error_is_a_500_without_details(news_dsn: str, keys_file: Path) -> None:
    class Broken(Backend):
        @property
        def api(self) -> Any:
            raise ZeroDivisionError("secret internals")

    config = ServeConfig(dsn=news_dsn, keys_file=keys_file)
    app = create_app(config, backend=Broken(config))
    with TestClient(app, client=LOCAL, raise_server_exceptions=False) as c:
        res = c.get("/v1/corpora")
    error(res, 500, "internal")
    assert "secret" not in res.text and "ZeroDivision" not in res.text


def test_a_search_timeout_is_a_503() -> None:
    err = from_pglogic_error(SearchTimeout("The search was cancelled after its timeout of 1 s"))
    assert (err.status, err.kind) == (503, "timeout")


# -- keys, CORS --------------------------------------------------------------------------------


def test_other_machines_need_a_key(news_dsn: str, tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.json")
    key = store.create("notebook")
    with make_client(news_dsn, store.path, client=REMOTE) as remote:
        error(remote.get("/v1/corpora"), 401, "unauthorized")
        res = remote.get("/v1/corpora", headers={"authorization": "Bearer pgl_wrong"})
        assert "invalid API key" in error(res, 401, "unauthorized")["message"]
        assert res.headers["www-authenticate"] == "Bearer"
        ok = remote.get("/v1/corpora", headers={"authorization": f"Bearer {key}"})
        assert ok.status_code == 200
        assert remote.post("/v1/search", json={"corpus": "news", "query": QUERY, "k": 2},
                           headers={"x-api-key": key}).status_code == 200  # fmt: skip
        assert remote.get("/v1/health").status_code == 200  # public
        assert remote.get("/").status_code == 200  # the page itself holds nothing private
        store.revoke("notebook")
        error(remote.get("/v1/corpora", headers={"authorization": f"Bearer {key}"}), 401,
              "unauthorized")  # fmt: skip
    with make_client(news_dsn, store.path, require_key=True) as local:
        error(local.get("/v1/corpora"), 401, "unauthorized")


def test_keys_are_stored_as_hashes_only(tmp_path: Path) -> None:
    home = tmp_path / "home"
    runner = CliRunner()
    res = runner.invoke(cli, ["--home", str(home), "serve", "--create-key", "laptop"])
    assert res.exit_code == 0, res.output
    key = res.stdout.strip().splitlines()[-1]
    assert key.startswith("pgl_") and len(key) > 40
    path = home / "http-keys.json"
    assert key not in path.read_text() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert KeyStore(path).verify(key) == "laptop"
    listed = runner.invoke(cli, ["--home", str(home), "serve", "--list-keys"])
    assert listed.stdout.startswith("laptop\t")
    again = runner.invoke(cli, ["--home", str(home), "serve", "--create-key", "laptop"])
    assert again.exit_code != 0 and "exists" in str(again.exception)
    assert (
        runner.invoke(cli, ["--home", str(home), "serve", "--revoke-key", "laptop"]).exit_code == 0
    )
    assert KeyStore(path).stored() == []


def test_listening_beyond_this_machine_needs_a_key_first(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["--home", str(tmp_path), "serve", "--host", "0.0.0.0"])
    assert isinstance(res.exception, ConfigError)
    assert "--create-key" in str(res.exception)


def test_no_cors_unless_configured(news_dsn: str, keys_file: Path, api_client: TestClient) -> None:
    origin = {"origin": "https://app.example.com"}
    assert (
        "access-control-allow-origin" not in api_client.get("/v1/corpora", headers=origin).headers
    )
    with make_client(news_dsn, keys_file, cors_origins=("https://app.example.com",)) as c:
        res = c.get("/v1/corpora", headers=origin)
        assert res.headers["access-control-allow-origin"] == "https://app.example.com"
        other = c.get("/v1/corpora", headers={"origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers
        pre = c.options("/v1/search", headers={**origin, "access-control-request-method": "POST"})
        assert pre.status_code == 200


def test_the_page_and_its_files_are_served(api_client: TestClient) -> None:
    page = api_client.get("/")
    assert page.status_code == 200 and "pglogic playground" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    for f in ("/static/playground.js", "/static/playground.css"):
        assert api_client.get(f).status_code == 200


# -- the schema --------------------------------------------------------------------------------


def test_the_committed_openapi_schema_is_the_servers(api_client: TestClient) -> None:
    served = api_client.get("/v1/openapi.json").json()
    assert served == json.loads(OPENAPI.read_text()), (
        "docs/openapi.json is stale: regenerate it with "
        "python -c 'import json; from pglogic.integrations.http import create_app; "
        "print(json.dumps(create_app().openapi(), indent=2))' > docs/openapi.json"
    )
    assert {"/v1/search", "/v1/compile", "/v1/ask", "/v1/corpora", "/v1/corpora/{name}",
            "/v1/health"} <= set(served["paths"])  # fmt: skip
    responses = served["paths"]["/v1/search"]["post"]["responses"]
    assert {"200", "400", "401", "404", "413", "422", "503"} <= set(responses)


# -- the real command --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_pglogic_serve_answers_over_tcp(news_dsn: str, tmp_path: Path) -> None:
    port = free_port()
    exe = Path(sys.executable).with_name("pglogic")
    env = {**os.environ, "PGLOGIC_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [str(exe), "--dsn", news_dsn, "serve", "--port", str(port), "--log-level", "warning"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=url, timeout=120) as c:
            for _ in range(600):
                try:
                    if c.get("/v1/health").status_code == 200:
                        break
                except httpx.TransportError:
                    if proc.poll() is not None:
                        pytest.fail(
                            f"pglogic serve exited: {proc.stderr.read() if proc.stderr else ''}"
                        )
                    import time

                    time.sleep(0.2)
            res = c.post("/v1/search", json={"corpus": "news", "query": QUERY, "k": 3})
            assert res.status_code == 200 and len(res.json()["hits"]) == 3
            assert "server" not in res.headers  # no version banner
            assert "pglogic playground" in c.get("/").text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.stderr is not None
    assert f"serving http://127.0.0.1:{port}/" in proc.stderr.read()


def test_the_http_choices_are_the_engines() -> None:
    # pydantic needs literal choices; they must stay the engine's (a new value in the engine
    # would otherwise be refused by HTTP only)
    from typing import get_args

    from pglogic.engine.options import DEFAULT_PASSAGE_SCORE, MODES, PASSAGE_SCORES
    from pglogic.integrations.http.routes import Mode, Options

    assert set(get_args(Options.model_fields["passage_score"].annotation)) == set(PASSAGE_SCORES)
    assert Options.model_fields["passage_score"].default == DEFAULT_PASSAGE_SCORE
    assert set(get_args(Mode)) == set(MODES)
