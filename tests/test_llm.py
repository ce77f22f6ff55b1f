"""LLM rewriting of questions into logical queries (pglogic.llm.client, pglogic.llm.rewrite, pglogic ask).

The client runs its whole HTTP path (the real ``openai`` SDK over TCP) against a real local
server speaking the chat-completions protocol, with scripted answers: valid queries, unparsable
answers, slow answers, HTTP errors. ``ask`` runs end to end against a real Postgres corpus.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pglogic import PgLogic
from pglogic.errors import ConfigError, LLMError, QueryError, UnknownCorpus
from pglogic.llm.client import PLACEHOLDER_KEY, ChatClient, LLMConfig
from pglogic.llm.grammar import mixed_operators
from pglogic.llm.rewrite import (
    CACHE,
    EXAMPLES,
    SYSTEM_PROMPT,
    RewriteCache,
    build_messages,
    constraint,
    example_answer,
    extract_formula,
    mixing_message,
    rewrite,
    system_prompt,
)
from pglogic.query import Term, parse
from tests.conftest import TEMPLATE_DB, cli_in_process
from tests.openai_stub import ChatServer, Reply

MODEL = "scripted-model"


@pytest.fixture(scope="module")
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh(request: pytest.FixtureRequest) -> Iterator[None]:
    CACHE.clear()
    if "server" in request.fixturenames:
        request.getfixturevalue("server").reset()
    yield
    CACHE.clear()


def config(server: ChatServer, **kw: Any) -> LLMConfig:
    """Fast retries for tests: backoff 10 ms; plain output unless ``output`` says otherwise."""
    opts: dict[str, Any] = {
        "timeout": 5.0, "backoff": 0.01, "max_backoff": 0.05, "output": "plain", **kw
    }  # fmt: skip
    return LLMConfig(server.url, MODEL, **opts)


def client(server: ChatServer, waits: list[float] | None = None, **kw: Any) -> ChatClient:
    return ChatClient(config(server, **kw), sleep=time.sleep if waits is None else waits.append)


# -- rewriting through the real HTTP path ---------------------------------------------------------


def test_valid_query_and_the_request_sent(server: ChatServer) -> None:
    server.script('"grain" AND NOT "wheat"')
    rw = rewrite("Grain news that is not about  wheat ", client(server), cache=None)
    assert rw.query == '"grain" AND NOT "wheat"'
    assert rw.tree == parse('"grain" AND NOT "wheat"')
    assert (rw.fallback, rw.reason, rw.cached, rw.attempts) == (False, None, False, 1)
    assert rw.question == "Grain news that is not about wheat"  # whitespace collapsed
    assert rw.model == MODEL and rw.answers == ('"grain" AND NOT "wheat"',)
    assert rw.seconds > 0
    [req] = server.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["authorization"] == f"Bearer {PLACEHOLDER_KEY}"
    body = req["json"]
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert "seed" not in body
    assert "grammar" not in body and "response_format" not in body  # plain output
    messages = body["messages"]
    assert messages[0] == {"role": "system", "content": system_prompt("plain")}
    assert messages[0]["content"].startswith(SYSTEM_PROMPT)
    assert messages[-1] == {
        "role": "user",
        "content": "Question: Grain news that is not about wheat",
    }
    shots = [(m["role"], m["content"]) for m in messages[1:-1]]
    assert shots == [
        item
        for q, f in EXAMPLES
        for item in (("user", f"Question: {q}"), ("assistant", example_answer(f)))
    ]
    formulas = [f for _, f in EXAMPLES]
    # the examples show one-topic questions as one term, content negation kept inside a term,
    # NOT, NOT over a group, OR under AND and AND under OR, always with parentheses
    assert sum(parse(f) == Term(f.strip('"')) for f in formulas) >= 3
    assert any(" won't " in f or " without " in f for f in formulas if "NOT" not in f)
    assert any("NOT (" in f for f in formulas)
    assert any("OR (" in f for f in formulas) and any("AND (" in f for f in formulas)
    assert all(mixed_operators(f) is None for f in formulas)
    # ... and share no question (nor a gold formula) with the benchmark's hand-written set
    path = Path(__file__).resolve().parents[1] / "bench" / "quality" / "nl" / "questions.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    bench_questions = {" ".join(r["question"].casefold().split()) for r in rows}
    bench_golds = {r["gold"] for r in rows}
    real = path.parent / "real" / "questions.jsonl"
    for line in real.read_text().splitlines():
        row = json.loads(line)
        bench_questions.add(" ".join(row["question"].casefold().split()))
        bench_golds.add(row["gold"])
    for q, f in EXAMPLES:
        assert " ".join(q.casefold().split()) not in bench_questions and f not in bench_golds


def test_an_answer_mixing_and_and_or_is_sent_back_once_to_be_bracketed(server: ChatServer) -> None:
    server.script(
        '"electric cars" OR "hybrid cars" AND "Norway"',
        '("electric cars" OR "hybrid cars") AND "Norway"',
    )
    question = "Reviews of electric or hybrid cars in Norway"
    rw = rewrite(question, client(server), cache=None)
    assert rw.query == '("electric cars" OR "hybrid cars") AND "Norway"'
    assert (rw.attempts, rw.fallback, rw.repairs) == (2, False, ())
    first, second = (r["json"]["messages"] for r in server.requests)
    assert second[len(first) + 1] == {"role": "user", "content": mixing_message(34)}
    # a second unbracketed answer is read by precedence, and the output says so
    server.script('"vans" OR "trucks" AND "Norway"', '"vans" OR "trucks" AND "Norway"')
    rw = rewrite("vans or trucks in Norway", client(server), cache=None)
    assert rw.query == '"vans" OR ("trucks" AND "Norway")'  # the grouping, shown
    assert rw.repairs[0].startswith("AND binds tighter than OR")


def test_what_the_checks_change_is_shown_beside_the_models_own_query(server: ChatServer) -> None:
    server.script('"museums in Berlin" AND "Pergamon"')
    rw = rewrite("Museums in Berlin besides the Pergamon", client(server), cache=None)
    assert rw.model_query == '"museums in Berlin" AND "Pergamon"'
    assert rw.query == '"museums in Berlin" AND NOT "Pergamon"'
    assert rw.repairs == ('negated "Pergamon" (excluded in the question)',)
    server.script('"vegan desserts" AND NOT "coconut"')
    rw = rewrite("Vegan desserts that don't use coconut", client(server), cache=None)
    assert rw.query == rw.model_query == '"vegan desserts" AND NOT "coconut"' and not rw.repairs


def test_unparsable_answer_is_retried_with_the_parser_message(server: ChatServer) -> None:
    server.script("grain AND NOT wheat", '"grain" AND NOT "wheat"')
    rw = rewrite("grain but not wheat", client(server), cache=None)
    assert (rw.query, rw.fallback, rw.attempts) == ('"grain" AND NOT "wheat"', False, 2)
    assert rw.answers == ("grain AND NOT wheat", '"grain" AND NOT "wheat"')
    first, second = (r["json"]["messages"] for r in server.requests)
    assert second[: len(first)] == first
    assert second[len(first)] == {"role": "assistant", "content": "grain AND NOT wheat"}
    repair = second[len(first) + 1]
    assert repair["role"] == "user"
    assert "Unexpected word 'grain' at col 1: terms must be quoted" in repair["content"]
    assert "  grain AND NOT wheat\n  ^" in repair["content"]  # the caret under the column


def test_twice_unparsable_falls_back_to_dense_search(server: ChatServer) -> None:
    server.script("I am not sure.", '("gold" OR "silver" AND NOT "mining"')
    rw = rewrite("gold or silver but not mining", client(server))
    assert rw.fallback is True
    assert rw.tree == Term("gold or silver but not mining")
    assert rw.query == "gold or silver but not mining"
    assert rw.reason is not None and "Expected ) to close ( at col 1" in rw.reason
    assert "plain text" in rw.reason
    assert len(server.requests) == 2
    repair = server.requests[1]["json"]["messages"][-1]["content"]
    assert "Unexpected word 'I' at col 1" in repair
    assert len(CACHE) == 0  # fallbacks are not cached: the next call asks again


def test_a_query_with_only_negated_terms_is_asked_again(server: ChatServer) -> None:
    server.script('NOT "wheat"', '"grain" AND NOT "wheat"')
    rw = rewrite("anything but wheat, about grain", client(server), cache=None)
    assert rw.query == '"grain" AND NOT "wheat"'
    repair = server.requests[1]["json"]["messages"][-1]["content"]
    assert "Every term is negated" in repair


def test_formula_is_found_in_fences_labels_and_prose(server: ChatServer) -> None:
    answer = (
        "<think>The user wants gold or silver.</think>\n"
        "Here is the logical query:\n```text\n"
        '("gold" OR "silver")\n  AND NOT "mining"\n```\nIt excludes mining.'
    )
    server.script(answer)
    rw = rewrite("gold or silver, not mining", client(server), cache=None)
    assert (rw.query, rw.attempts) == ('("gold" OR "silver") AND NOT "mining"', 1)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('"a" AND "b"', '"a" AND "b"'),
        ('Query: "a" OR "b"', '"a" OR "b"'),
        ('Logical query: ("a" OR "b") AND NOT "c".', '("a" OR "b") AND NOT "c"'),
        ('**Logical Query:** `"a" AND NOT "b"`', '"a" AND NOT "b"'),
        ('```\n"a" AND NOT "b"\n```', '"a" AND NOT "b"'),
        ('```sql\n"a" OR "b"\n```\nThe query above finds "a".', '"a" OR "b"'),
        ('Sure!\n\n- "x" AND "y"\n\nThis finds both.', '"x" AND "y"'),
        ("“coffee” AND NOT “tea”", '"coffee" AND NOT "tea"'),
        ('<think>maybe "q"</think>"p" OR "q"', '"p" OR "q"'),
        ('The answer is: "children\'s books" AND NOT "toys"', '"children\'s books" AND NOT "toys"'),
        ("grain news without wheat", "grain news without wheat"),  # nothing better: as it is
        ('Answer: "a" AND', '"a" AND'),  # the best guess, so the parser explains what is wrong
    ],
)
def test_extract_formula(answer: str, expected: str) -> None:
    assert extract_formula(answer) == expected


def test_rewrites_are_cached_per_model_and_question(server: ChatServer) -> None:
    cache = RewriteCache()
    server.script('"a" AND "b"', '"a" OR "b"')
    one = client(server)
    first = rewrite("a and b", one, cache=cache)
    again = rewrite("  a   and b ", one, cache=cache)
    assert len(server.requests) == 1
    assert (again.cached, again.query, again.answers) == (True, first.query, first.answers)
    other = ChatClient(LLMConfig(server.url, "other-model", backoff=0.01))
    assert rewrite("a and b", other, cache=cache).query == '"a" OR "b"'
    assert len(server.requests) == 2
    assert server.requests[1]["json"]["model"] == "other-model"


def test_empty_question_is_refused_before_asking(server: ChatServer) -> None:
    with pytest.raises(QueryError, match="Empty question"):
        rewrite("   ", client(server))
    assert server.requests == []


# -- constrained output: grammar, JSON schema, plain -----------------------------------------------


def test_grammar_mode_sends_the_questions_grammar(server: ChatServer) -> None:
    server.script('"crude oil" AND NOT "natural gas"')
    question = "News about crude oil but not natural gas"
    rw = rewrite(question, client(server, output="grammar"), cache=None)
    assert (rw.query, rw.output, rw.fallback, rw.repairs) == (
        '"crude oil" AND NOT "natural gas"',
        "grammar",
        False,
        (),
    )
    [req] = server.requests
    body = req["json"]
    assert "response_format" not in body
    assert body["grammar"] == constraint(question, "grammar")["grammar"]
    lines = body["grammar"].splitlines()
    assert lines[0] == "root ::= atom and-tail?"  # an OR only inside parentheses
    assert lines[-3:] == [
        'content ::= "News" | "news" | "crude" | "oil" | "natural" | "gas"',
        'plain ::= "about"',  # a function word: never a term on its own
        'neg ::= "not"',  # only between two words ("but" carries logic: never in a term)
    ]
    assert body["messages"][0]["content"] == system_prompt("grammar")
    assert body["messages"][2]["content"] == EXAMPLES[0][1]
    assert server.gets == []  # a configured mode asks no /models


def test_json_mode_sends_a_schema_and_reads_the_tree(server: ChatServer) -> None:
    answer = {"query": {"and": [{"term": "grain"}, {"not": {"term": "wheat"}}]}}
    server.script(json.dumps(answer))
    rw = rewrite("grain, not wheat", client(server, output="json"), cache=None)
    assert (rw.query, rw.output, rw.attempts) == ('"grain" AND NOT "wheat"', "json", 1)
    body = server.requests[0]["json"]
    assert "grammar" not in body
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["required"] == ["query"]
    messages = body["messages"]
    assert messages[0]["content"] == system_prompt("json")
    assert json.loads(messages[2]["content"]) == json.loads(example_answer(EXAMPLES[0][1], "json"))


@pytest.mark.parametrize(
    ("owned_by", "mode"),
    [("me", "grammar"), ("llamacpp", "grammar"), ("vllm", "json"), (None, "plain")],
)
def test_auto_mode_asks_the_server_once(
    server: ChatServer, owned_by: str | None, mode: str
) -> None:
    server.owned_by = owned_by
    server.script('"a" OR "b"', '"a" OR "b"')
    chat = client(server, output="auto")
    for question in ("alpha or beta", "beta or alpha"):
        assert rewrite(question, chat, cache=None).output == mode
    assert server.gets == ["/v1/models"]
    bodies = [r["json"] for r in server.requests]
    assert all(("grammar" in b) == (mode == "grammar") for b in bodies)
    assert all(("response_format" in b) == (mode == "json") for b in bodies)


def test_a_rejected_constraint_is_asked_again_plain_and_remembered(server: ChatServer) -> None:
    server.script(
        Reply(status=400, error="Unrecognized request argument supplied: grammar"),
        '"oil" AND NOT "gas"',
        '"coal"',
    )
    chat = client(server, output="grammar")
    rw = rewrite("oil, not gas", chat, cache=None)
    assert (rw.query, rw.output, rw.fallback, rw.attempts) == (
        '"oil" AND NOT "gas"',
        "plain",
        False,
        2,
    )
    first, second = (r["json"] for r in server.requests)
    assert "grammar" in first and "grammar" not in second
    assert chat.output_mode() == "plain"
    rewrite("coal", chat, cache=None)
    assert "grammar" not in server.requests[2]["json"]


def test_a_server_error_naming_the_constraint_is_not_retried(server: ChatServer) -> None:
    # llama-cpp-python answers HTTP 500 to a json_schema response format it does not know
    error = "1 validation error: ('body', 'response_format', 'type') Input should be 'text'"
    server.script(Reply(status=500, error=error), '"oil"')
    waits: list[float] = []
    rw = rewrite("oil", client(server, waits, output="json"), cache=None)
    assert (rw.query, rw.output, rw.attempts, waits) == ('"oil"', "plain", 2, [])
    assert "response_format" not in server.requests[1]["json"]


def test_the_checks_repair_the_answer_and_say_so(server: ChatServer) -> None:
    server.script(
        '"questions about sourdough" OR "rye breads"', '"questions about sourdough" OR "rye breads"'
    )
    question = "Questions about sourdough or rye bread"
    rw = rewrite(question, client(server), cache=None)
    assert rw.query == '"sourdough" OR "rye bread"'
    assert rw.answers == ('"questions about sourdough" OR "rye breads"',)
    assert any("request words" in r for r in rw.repairs) and any(
        "rye bread" in r for r in rw.repairs
    )
    raw = rewrite(question, client(server), cache=None, checks=False)
    assert (raw.query, raw.repairs) == ('"questions about sourdough" OR "rye breads"', ())


# -- transport errors: retried or not, and their messages ----------------------------------------


def test_timeout_is_retried_then_a_clear_error(server: ChatServer) -> None:
    waits: list[float] = []
    server.script(*[Reply('"a"', delay=1.0)] * 3)
    with pytest.raises(LLMError) as info:
        client(server, waits, timeout=0.3, max_retries=2).complete(build_messages("a"))
    assert str(info.value) == (
        f"The LLM endpoint {server.url} did not answer within 0.3s (3 attempts); raise the "
        "timeout (PGLOGIC_LLM_TIMEOUT, --llm-timeout) for a slow model"
    )
    assert info.value.attempts == 3 and info.value.exit_code == 3
    assert len(server.requests) == 3
    assert waits == [0.01, 0.02]  # exponential backoff


def test_server_error_is_retried(server: ChatServer) -> None:
    waits: list[float] = []
    server.script(Reply(status=500, error="overloaded"), Reply(status=503), '"a" AND "b"')
    out = client(server, waits).complete(build_messages("a and b"))
    assert (out.text, out.attempts, out.model) == ('"a" AND "b"', 3, MODEL)
    assert len(server.requests) == 3 and waits == [0.01, 0.02]


def test_rate_limit_is_retried_after_the_servers_delay(server: ChatServer) -> None:
    waits: list[float] = []
    server.script(Reply(status=429, headers={"Retry-After": "0.03"}), '"a"')
    assert client(server, waits).complete(build_messages("a")).attempts == 2
    assert waits == [0.03]


def test_server_errors_give_up_after_the_retries(server: ChatServer) -> None:
    server.script(*[Reply(status=502, error="bad gateway")] * 3)
    with pytest.raises(LLMError) as info:
        client(server, max_retries=2).complete(build_messages("a"))
    assert str(info.value) == (
        f"The LLM endpoint {server.url} answered HTTP 502 after 3 attempts: bad gateway"
    )
    assert info.value.status == 502


def test_auth_error_is_clear_and_not_retried(server: ChatServer) -> None:
    server.script(Reply(status=401, error="Invalid API key"), '"a"')
    with pytest.raises(LLMError) as info:
        client(server).complete(build_messages("a"))
    assert str(info.value) == (
        f"The LLM endpoint {server.url} refused the API key (HTTP 401: Invalid API key); "
        "set PGLOGIC_LLM_API_KEY (or OPENAI_API_KEY for OpenAI)"
    )
    assert info.value.status == 401 and info.value.attempts == 1
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (400, "answered HTTP 400: scripted error"),
        (404, "answered HTTP 404 for model 'scripted-model' (scripted error); check"),
    ],
)
def test_client_errors_are_not_retried(server: ChatServer, status: int, words: str) -> None:
    server.script(Reply(status=status), '"a"')
    with pytest.raises(LLMError, match=r"^The LLM endpoint ") as info:
        client(server).complete(build_messages("a"))
    assert words in str(info.value)
    assert len(server.requests) == 1


def test_unreachable_endpoint_names_the_url() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    waits: list[float] = []
    chat = ChatClient(LLMConfig(url, MODEL, backoff=0.01), sleep=waits.append)
    with pytest.raises(LLMError, match=f"^Cannot reach the LLM endpoint {url} \\(3 attempts\\)"):
        chat.complete(build_messages("a"))
    assert waits == [0.01, 0.02]


# -- configuration ---------------------------------------------------------------------------------

NO_LLM_ENV = {
    name: ""
    for name in (
        "PGLOGIC_LLM_BASE_URL",
        "PGLOGIC_LLM_MODEL",
        "PGLOGIC_LLM_API_KEY",
        "PGLOGIC_LLM_TIMEOUT",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
    )
}


def test_no_endpoint_configured_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^No LLM endpoint configured: set PGLOGIC_LLM_BASE_URL"):
        LLMConfig.resolve(env=NO_LLM_ENV)
    with pytest.raises(ConfigError, match=r"^No LLM model configured for http://h:1/v1: set PGLOG"):
        LLMConfig.resolve(env={**NO_LLM_ENV, "PGLOGIC_LLM_BASE_URL": "http://h:1/v1/"})
    with pytest.raises(ConfigError, match="is not an http"):
        LLMConfig.resolve(base_url="127.0.0.1:8080", model="m", env={})
    with pytest.raises(ConfigError, match="PGLOGIC_LLM_TIMEOUT='soon' is not a number"):
        LLMConfig.resolve(base_url="http://h/v1", model="m", env={"PGLOGIC_LLM_TIMEOUT": "soon"})


def test_ask_without_endpoint_fails_before_touching_the_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in NO_LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    api = PgLogic("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(ConfigError, match="No LLM endpoint configured"):
        api.ask("news", "grain but not wheat")


@pytest.mark.slow
def test_openai_is_imported_lazily_and_its_absence_explained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code = "import sys, pglogic, pglogic.cli, pglogic.llm.rewrite; print('openai' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "False", proc.stderr
    monkeypatch.setitem(sys.modules, "openai", None)  # as if not installed
    chat = ChatClient(LLMConfig("http://127.0.0.1:9/v1", MODEL))
    with pytest.raises(
        ConfigError, match=r"needs the openai package: pip install 'pglogic\[llm\]'"
    ):
        chat.complete(build_messages("a"))


def test_configuration_from_the_environment() -> None:
    env = {
        "PGLOGIC_LLM_BASE_URL": "http://127.0.0.1:8080/v1",
        "PGLOGIC_LLM_MODEL": "qwen",
        "PGLOGIC_LLM_TIMEOUT": "12.5",
        "OPENAI_API_KEY": "sk-openai",
    }
    cfg = LLMConfig.resolve(env=env)
    assert (cfg.base_url, cfg.model, cfg.timeout, cfg.api_key) == (
        "http://127.0.0.1:8080/v1",
        "qwen",
        12.5,
        PLACEHOLDER_KEY,  # OpenAI's key is not sent to another server
    )
    assert "sk-" not in repr(LLMConfig.resolve(env={**env, "PGLOGIC_LLM_API_KEY": "sk-own"}))
    assert LLMConfig.resolve(env={**env, "PGLOGIC_LLM_API_KEY": "sk-own"}).api_key == "sk-own"
    # arguments override the environment
    cfg = LLMConfig.resolve(base_url="http://other:1/v1", model="m2", timeout=3, env=env)
    assert (cfg.base_url, cfg.model, cfg.timeout) == ("http://other:1/v1", "m2", 3)
    # OPENAI_BASE_URL / OPENAI_API_KEY: the openai SDK's own variables
    cfg = LLMConfig.resolve(
        env={
            "OPENAI_BASE_URL": "http://vllm:8000/v1",
            "OPENAI_API_KEY": "k",
            "PGLOGIC_LLM_MODEL": "m",
        }
    )
    assert (cfg.base_url, cfg.api_key) == ("http://vllm:8000/v1", "k")
    cfg = LLMConfig.resolve(env={"OPENAI_API_KEY": "k", "PGLOGIC_LLM_MODEL": "gpt-4o-mini"})
    assert (cfg.base_url, cfg.api_key) == ("https://api.openai.com/v1", "k")


# -- ask: rewrite -> parse -> search against a real corpus ---------------------------------------

DOCS = [
    ("w1", "Wheat harvest breaks records in Kansas", "Farmers brought in a record wheat crop."),
    ("w2", "Wheat futures fall in Chicago", "Wheat prices dropped on the board of trade."),
    ("g1", "Corn and soybean exports grow", "Grain shipments of corn and soybeans rose."),
    ("g2", "Barley and sorghum prices climb", "Feed grain prices rose on strong demand."),
    ("g3", "Rice harvest in Thailand", "The rice crop, a staple grain, was large this year."),
    ("m1", "Gold price hits a record", "Gold rose as investors sought safety."),
    ("m2", "Silver demand from industry", "Industrial silver demand increased."),
    ("m3", "Gold mining company reports a loss", "The mining firm closed two gold mines."),
    ("o1", "Oil prices rise after OPEC cut", "OPEC agreed to cut crude output."),
    ("o2", "Natural gas supply tight", "Cold weather strained natural gas supply."),
    ("c1", "Coffee exports from Brazil", "Brazil shipped more coffee beans abroad."),
    ("c2", "Tea auction in Kenya", "Tea prices at the Mombasa auction were firm."),
]


@pytest.fixture(scope="module")
def ask_dsn(pg_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database with corpus 'news' (12 short documents, all-MiniLM-L6-v2, HNSW index)."""
    name = f"t_llm_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = pg_server.dsn_for(name)
        path = tmp_path_factory.mktemp("llm") / "news.jsonl"
        path.write_text(
            "\n".join(json.dumps({"id": i, "title": t, "text": x}) for i, t, x in DOCS) + "\n"
        )
        api = PgLogic(dsn)
        api.create_corpus("news")
        api.ingest("news", path)
        api.build_index("news")
        yield dsn
    finally:
        janitor.drop()


def same_hits(a: list[Any], b: list[Any]) -> None:
    assert [h.external_id for h in a] == [h.external_id for h in b]
    assert [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-9)
    assert [h.similarities for h in a] == [h.similarities for h in b]


@pytest.mark.db
@pytest.mark.model
def test_ask_searches_the_rewritten_query(server: ChatServer, ask_dsn: str) -> None:
    api = PgLogic(ask_dsn)
    server.script('"grain" AND NOT "wheat"')
    res = api.ask("news", "grain news that is not about wheat", k=5, llm=config(server))
    assert (res.query, res.fallback) == ('"grain" AND NOT "wheat"', False)
    assert res.rewrite.answers == ('"grain" AND NOT "wheat"',)
    assert res.search.tree == parse('"grain" AND NOT "wheat"')
    same_hits(res.hits, api.search("news", '"grain" AND NOT "wheat"', k=5).hits)
    assert len(res.hits) == 5 and not {"w1", "w2"} & {h.external_id for h in res.hits[:3]}
    assert res.search.timings["rewrite"] == res.rewrite.seconds
    # the same question again: the cached rewrite, no request
    again = api.ask("news", "grain news that is not about wheat", k=5, llm=config(server))
    assert again.rewrite.cached and len(server.requests) == 1
    same_hits(again.hits, res.hits)
    with pytest.raises(UnknownCorpus):  # checked before the model is asked
        api.ask("nope", "anything else", llm=config(server))
    assert len(server.requests) == 1


@pytest.mark.db
@pytest.mark.model
def test_ask_falls_back_to_dense_search(server: ChatServer, ask_dsn: str) -> None:
    api = PgLogic(ask_dsn)
    server.script("grain minus wheat", "grain - wheat")
    res = api.ask("news", "grain news that is not about wheat", k=4, llm=config(server))
    assert res.fallback and res.query == "grain news that is not about wheat"
    assert res.rewrite.reason and "Unexpected word 'grain' at col 1" in res.rewrite.reason
    same_hits(res.hits, api.search("news", "grain news that is not about wheat", k=4).hits)


@pytest.mark.db
@pytest.mark.model
def test_ask_nsfl_scores_the_question(server: ChatServer, ask_dsn: str) -> None:
    api = PgLogic(ask_dsn)
    server.script('("gold" OR "silver") AND NOT "mining"')
    question = "gold or silver, but not mining"
    res = api.ask("news", question, k=3, llm=config(server), mode="nsfl")
    assert question in res.hits[0].similarities
    lib = api.search("news", res.query, k=3, mode="nsfl", question=question)
    same_hits(res.hits, lib.hits)


CLI_ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def llm_env(server: ChatServer) -> dict[str, str]:
    return {
        **CLI_ENV,
        **NO_LLM_ENV,
        "PGLOGIC_LLM_BASE_URL": server.url,
        "PGLOGIC_LLM_MODEL": MODEL,
    }


@pytest.mark.db
@pytest.mark.model
def test_cli_ask(server: ChatServer, ask_dsn: str) -> None:
    question = "gold or silver, but not mining"
    query = '("gold" OR "silver") AND NOT "mining"'
    server.script(query, query)
    env = llm_env(server)
    proc = cli_in_process("--dsn", ask_dsn, "ask", "news", question, "--json", "-k", "4", env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["question"], out["query"], out["fallback"], out["model"]) == (
        question,
        query,
        False,
        MODEL,
    )
    lib = PgLogic(ask_dsn).search("news", query, k=4).hits
    assert [h["id"] for h in out["hits"]] == [h.external_id for h in lib]
    assert [h["score"] for h in out["hits"]] == pytest.approx([h.score for h in lib])

    proc = cli_in_process(
        "--dsn", ask_dsn, "ask", "news", question, "--explain", "-k", "3", env=env
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"Question:      {question}"
    assert lines[1].startswith(f"Rewritten by:  {MODEL}, in ")
    assert lines[2].strip() == f"Logical query: {query}"  # the table's title
    header = next(line for line in lines if "score" in line and "title" in line)
    cells = [c.strip() for c in header.strip("┃ ").split("┃")]
    assert cells == ["#", "score", "id", "title", "gold", "silver", "mining"]
    assert [r["json"]["model"] for r in server.requests] == [MODEL, MODEL]


@pytest.mark.db
@pytest.mark.model
def test_cli_ask_says_when_it_falls_back(server: ChatServer, ask_dsn: str) -> None:
    server.script("gold, silver, no mining", "gold silver -mining")
    # --llm-base-url overrides the environment (which names a dead port)
    env = {**llm_env(server), "PGLOGIC_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    proc = cli_in_process(
        "--dsn",
        ask_dsn,
        "ask",
        "news",
        "gold or silver, but not mining",
        "--llm-base-url",
        server.url,
        "-k",
        "2",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].startswith("Fallback:      the model's answer was not a valid query twice")
    assert lines[2].strip() == "Dense search:  gold or silver, but not mining"
    assert len(server.requests) == 2


def test_cli_ask_without_endpoint_is_one_sentence() -> None:
    proc = cli_in_process("ask", "news", "grain but not wheat", env={**CLI_ENV, **NO_LLM_ENV})
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: No LLM endpoint configured: set PGLOGIC_LLM_BASE_URL")
    assert "Traceback" not in proc.stderr
