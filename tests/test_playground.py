"""The playground page in a real headless Chromium (Debian's ``chromium`` package, driven by
Playwright), used as a person would: load it, type a query, see k hits with a bar per term,
get the caret under the column of a bad query, switch the operator family and see the ranking
change, follow a shared link. The server is the real application under uvicorn on a free port,
over real Postgres and Reuters documents embedded with all-MiniLM-L6-v2.

Screenshots of the main states are written to ``tmp_path`` (and to ``PGLOGIC_SCREENSHOTS``, a
directory, when set: ``docs/img`` holds the committed ones). Without Chromium the tests skip
with the reason, except in CI, where they fail: ``./run test`` installs the package.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from pglogic.integrations.http import ServeConfig, create_app
from tests.conftest import Server, reuters_database
from tests.openai_stub import ChatServer

QUERY = '"grain" AND NOT "wheat"'
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def chromium_path() -> str:
    path = os.environ.get("PGLOGIC_CHROMIUM") or shutil.which("chromium")
    if path is None:
        reason = "no chromium (apt-get install chromium; ./run test installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"The browser tests cannot run in CI: {reason}")
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def news_dsn(pg_server: Server, minilm: Any, shared_data: Path) -> Iterator[str]:
    """Corpus 'news': 400 Reuters documents (labels in metadata), HNSW index; or the database
    of ``PGLOGIC_PLAYGROUND_DSN`` (its corpus 'news'), e.g. the demo's 3,000 for screenshots."""
    if dsn := os.environ.get("PGLOGIC_PLAYGROUND_DSN"):
        yield dsn
        return
    yield from reuters_database(pg_server, "t_play", 300)


@pytest.fixture(scope="module")
def base_url(news_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The application under uvicorn on 127.0.0.1 (a free port), in a thread; no LLM."""
    keys = tmp_path_factory.mktemp("keys") / "keys.json"
    yield from serve(create_app(ServeConfig(dsn=news_dsn, keys_file=keys, llm_env={})))


@pytest.fixture(scope="module")
def llm() -> Iterator[ChatServer]:
    """A scripted OpenAI-compatible endpoint over real HTTP."""
    with ChatServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def ask_url(
    news_dsn: str, llm: ChatServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The application with an LLM endpoint configured (the scripted one)."""
    keys = tmp_path_factory.mktemp("keys") / "keys.json"
    env = {"PGLOGIC_LLM_BASE_URL": llm.url, "PGLOGIC_LLM_MODEL": "stub",
           "PGLOGIC_LLM_OUTPUT": "plain"}  # fmt: skip
    yield from serve(create_app(ServeConfig(dsn=news_dsn, keys_file=keys, llm_env=env)))


def serve(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1 (a free port) in a thread; yield its URL."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(600):
        if server.started:
            break
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable,
                              args=["--no-sandbox", "--disable-dev-shm-usage"])  # fmt: skip
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=DESKTOP)
    pg = context.new_page()
    pg.set_default_timeout(90_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True,
                                  has_touch=True)  # fmt: skip
    pg = context.new_page()
    pg.set_default_timeout(90_000)
    yield pg
    context.close()


def api_search(base_url: str, **body: Any) -> dict[str, Any]:
    res = httpx.post(f"{base_url}/v1/search", json={"corpus": "news", **body}, timeout=120)
    assert res.status_code == 200, res.text
    out: dict[str, Any] = res.json()
    return out


def ready(page: Any, base_url: str, path: str = "/") -> None:
    page.goto(base_url + path)
    page.wait_for_selector("body[data-ready='true']")


def searched(page: Any) -> int:
    return int(page.evaluate("() => Number(document.body.dataset.searched || 0)"))


def wait_searched(page: Any, after: int) -> None:
    page.wait_for_function(f"() => Number(document.body.dataset.searched || 0) > {after}")


def ranking(page: Any) -> list[tuple[str, str]]:
    return [
        (li.get_attribute("data-id"), li.query_selector(".score").inner_text())
        for li in page.query_selector_all("#logical-hits > li")
    ]


def shots(tmp_path: Path, page: Any, name: str, full_page: bool = False) -> Path:
    out = tmp_path / f"{name}.png"
    page.screenshot(path=str(out), full_page=full_page)
    assert out.stat().st_size > 10_000
    if target := os.environ.get("PGLOGIC_SCREENSHOTS"):
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(out, Path(target) / out.name)
    return out


def run_query(page: Any, query: str, k: int) -> None:
    before = searched(page)
    page.fill("#query", query)
    page.fill("#k", str(k))
    page.click("#run")
    wait_searched(page, before)


def test_type_a_query_and_see_k_hits_with_bars(page: Any, base_url: str, tmp_path: Path) -> None:
    ready(page, base_url)
    assert page.input_value("#corpus") == "news"
    assert page.input_value("#operators") == "product-max-strong"
    run_query(page, QUERY, 5)
    want = api_search(base_url, query=QUERY, k=5, explain=True, dense=True)
    hits = page.query_selector_all("#logical-hits > li")
    assert [h.get_attribute("data-id") for h in hits] == [h["id"] for h in want["hits"]]
    for li, hit in zip(hits, want["hits"], strict=True):
        bars = li.query_selector_all(".bar")
        labels = [b.query_selector(".bar-label").inner_text() for b in bars]
        assert labels == ["grain", "¬ wheat", 'NOT "wheat"']
        grain_width = bars[0].query_selector(".fill").evaluate("e => e.style.width")
        assert float(grain_width.rstrip("%")) == pytest.approx(
            100 * hit["explain"]["truths"]["grain"], abs=0.06
        )
        assert bars[1].query_selector(".bar-value").inner_text() == (
            f"{hit['similarities']['wheat']:.3f}"
        )
        excluded = "wheat" in hit["metadata"].get("labels", [])
        assert li.get_attribute("data-excluded") == ("true" if excluded else "false")
        assert set(hit["explain"]["passages"]) == {"grain", "wheat"}  # a corpus with passages
    dense = page.query_selector_all("#dense-hits > li")
    assert [h.get_attribute("data-id") for h in dense] == [h["id"] for h in want["dense"]["hits"]]
    assert page.inner_text("#dense-query") == "grain but not wheat"
    assert "WITH" in page.text_content("#sql-text")
    assert "ms in the server" in page.inner_text("#sql-summary")
    assert "q=%22grain%22+AND+NOT+%22wheat%22" in page.url and "k=5" in page.url
    shots(tmp_path, page, "playground-desktop")


def test_a_later_passage_that_decided_a_term_shows_under_its_bar(
    page: Any, base_url: str, tmp_path: Path
) -> None:
    # the first of these queries whose top 10 has a term decided past a document's first passage
    for q in ['"grain" AND NOT "wheat"', '"oil prices" AND NOT "opec"', '"trade" OR "tariffs"']:
        want = api_search(base_url, query=q, k=10, explain=True)
        later = [h for h in want["hits"] if any(p["ord"] > 0 for p in
                                                h["explain"]["passages"].values())]  # fmt: skip
        if later:
            break
    assert later, "no hit decided by a later passage: pick another query"
    ready(page, base_url)
    run_query(page, q, 10)
    hits = page.query_selector_all("#logical-hits > li")
    assert [h.get_attribute("data-id") for h in hits] == [h["id"] for h in want["hits"]]
    for li, hit in zip(hits, want["hits"], strict=True):
        lines = {p.get_attribute("data-term"): p for p in li.query_selector_all(".passage")}
        deciding = {t: p for t, p in hit["explain"]["passages"].items() if p["ord"] > 0}
        assert set(lines) == set(deciding)  # only past the start: the first is the document's
        for term, line in lines.items():
            assert line.get_attribute("data-ord") == str(deciding[term]["ord"])
            assert line.text_content() == f"¶{deciding[term]['ord']} {deciding[term]['snippet']}"
            assert line.is_visible() and line.bounding_box()["height"] < 20  # one line
    li = next(li for li in hits if li.query_selector(".passage"))
    li.scroll_into_view_if_needed()
    shots(tmp_path, page, "playground-passages")


def test_a_bad_query_gets_a_caret_under_its_column(
    page: Any, base_url: str, tmp_path: Path
) -> None:
    ready(page, base_url)
    page.fill("#query", "")
    page.type("#query", '"grain" AND NOT', delay=20)
    page.wait_for_selector("#query-error:not([hidden])")
    # on a loaded machine a keystroke may be checked on its own first ('"gr': col 1); the
    # page keeps only the newest answer, so wait for the one of the whole query
    page.wait_for_function("() => document.getElementById('query-error').dataset.column === '13'")
    box = page.query_selector("#query-error")
    assert box.get_attribute("data-column") == "13"
    assert page.inner_text("#error-message") == "Expected a quoted term after NOT at col 13"
    assert page.text_content("#error-query") == '"grain" AND NOT'
    assert page.text_content("#error-caret") == " " * 12 + "^"
    assert page.get_attribute("#query", "aria-invalid") == "true"
    # the caret stands under the column: same monospace font, same left edge
    caret_x = page.evaluate(
        """() => { const r = document.createRange(); const t = document.getElementById('error-caret').firstChild;
                   r.setStart(t, 12); r.setEnd(t, 13); return r.getBoundingClientRect().left; }"""
    )
    col_x = page.evaluate(
        """() => { const r = document.createRange(); const t = document.getElementById('error-query').firstChild;
                   r.setStart(t, 12); r.setEnd(t, 13); return r.getBoundingClientRect().left; }"""
    )
    assert caret_x == pytest.approx(col_x, abs=1)
    shots(tmp_path, page, "playground-error")
    page.type("#query", ' "wheat"', delay=20)
    page.wait_for_selector("#query-error", state="hidden")
    page.wait_for_function(
        "() => document.getElementById('query-ok').textContent.includes('NOT \"wheat\"')"
    )
    page.fill("#query", '"a" )')
    page.wait_for_function("() => document.getElementById('query-error').dataset.column === '5'")


def test_switching_the_operator_family_changes_the_ranking(page: Any, base_url: str) -> None:
    q = '("gold" OR "silver") AND NOT "mining"'
    ready(page, base_url)
    run_query(page, q, 10)
    first = ranking(page)
    assert len(first) == 10
    before = searched(page)
    page.select_option("#operators", "godel")
    wait_searched(page, before)
    second = ranking(page)
    assert second != first
    want = api_search(base_url, query=q, k=10, operators="godel")
    assert [i for i, _ in second] == [h["id"] for h in want["hits"]]
    assert "operators=godel" in page.url
    assert "AND = min" in page.inner_text("#family-formula")


def test_a_shared_link_opens_the_same_search(page: Any, browser: Any, base_url: str) -> None:
    q = '("oil" OR "gas") AND NOT "opec"'
    params = {"q": q, "corpus": "news", "operators": "itlr", "mode": "fuzzy", "k": "3"}
    page.goto(f"{base_url}/?{urlencode(params)}")
    page.wait_for_selector("body[data-ready='true']")
    assert page.input_value("#query") == q
    assert page.input_value("#operators") == "itlr" and page.input_value("#k") == "3"
    want = api_search(base_url, query=q, k=3, operators="itlr")
    assert [i for i, _ in ranking(page)] == [h["id"] for h in want["hits"]]
    # the link the page writes for its own search opens the same search in a new tab
    link = page.url
    other = browser.new_page()
    other.goto(link)
    other.wait_for_selector("body[data-ready='true']")
    assert ranking(other) == ranking(page)
    other.close()


def test_on_a_phone(phone: Any, base_url: str, tmp_path: Path) -> None:
    params = {"q": QUERY, "corpus": "news", "k": "5"}
    phone.goto(f"{base_url}/?{urlencode(params)}")
    phone.wait_for_selector("body[data-ready='true']")
    assert len(phone.query_selector_all("#logical-hits > li")) == 5
    width = phone.evaluate("() => document.documentElement.scrollWidth")
    assert width <= PHONE["width"], "the page scrolls sideways on a phone"
    logical = phone.query_selector("#logical-column").bounding_box()
    dense = phone.query_selector("#dense-column").bounding_box()
    assert dense["y"] >= logical["y"] + logical["height"] - 1  # stacked, not squeezed
    shots(tmp_path, phone, "playground-phone")
    phone.query_selector("#dense-column").scroll_into_view_if_needed()
    shots(tmp_path, phone, "playground-phone-dense")
    phone.fill("#query", '"grain" AND NOT')
    phone.wait_for_selector("#query-error:not([hidden])")
    assert phone.text_content("#error-caret") == " " * 12 + "^"


def test_ask_shows_what_the_checks_changed_beside_the_models_own_query(
    page: Any, ask_url: str, llm: ChatServer, tmp_path: Path
) -> None:
    llm.script('"grain shipments" AND "wheat"')  # the model missed the exclusion
    ready(page, ask_url)
    assert page.is_visible("#ask")
    before = searched(page)
    page.fill("#query", "grain shipments other than wheat")
    page.click("#ask")
    wait_searched(page, before)
    info = page.inner_text("#ask-info")
    assert 'The model wrote: "grain shipments" AND "wheat"' in info
    assert 'negated "wheat" (excluded in the question)' in info
    assert 'Searched: "grain shipments" AND NOT "wheat"' in info
    assert page.text_content("#logical-query") == '"grain shipments" AND NOT "wheat"'
    assert len(page.query_selector_all("#logical-hits > li")) == 10
    shots(tmp_path, page, "playground-ask")


def test_no_ask_button_without_an_llm(page: Any, base_url: str) -> None:
    ready(page, base_url)
    assert not page.is_visible("#ask")
