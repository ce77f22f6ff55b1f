"""One filter language through every interface: one table of cases.

:data:`ACCEPTED` holds filters in each accepted form (``"key=value"`` texts, a plain object, the
explicit ``{"key", "op", "value"}`` form, ``{"contains": ...}``, JSON text, one or a list) with
the documents they select, :data:`REFUSED` shapes that are no filter with the message every
interface gives. Each case runs through ``PgLogic.search(filters=...)``, HTTP's ``filters``
(``/v1/search`` and ``/v1/compile``), the SQL function's ``"filters"``, the SQLAlchemy helper's
``filters=`` and ``pglogic search --where`` (the forms a command line can write: texts, and
objects as JSON text), over the first 120 Reuters stories embedded with all-MiniLM-L6-v2.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pgvector.sqlalchemy import Vector
from psycopg import sql
from psycopg.types.json import Jsonb
from sqlalchemy import BigInteger, Column, MetaData, Table, Text, create_engine
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from pglogic import PgLogic
from pglogic.engine.filters import FORMS
from pglogic.errors import InvalidInput
from pglogic.integrations.http import ServeConfig, create_app
from pglogic.integrations.sqlalchemy import execute, logical_search, url_from_dsn
from pglogic.store.db import connect
from pglogic.store.term_cache import cache_terms
from tests.conftest import Server, cli_in_process, reuters_database

QUERY, TERM = '"oil"', "oil"
K = 200  # more than the corpus: an exact search returns every document that passes


def _has(key: str, value: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda m: value in m.get(key, [])


canada, usa, earn = _has("places", "canada"), _has("places", "usa"), _has("labels", "earn")

#: (filters as given, which metadata they select)
ACCEPTED: list[tuple[Any, Callable[[dict[str, Any]], bool]]] = [
    ("places=canada", canada),
    (" places = canada ", canada),
    (["places=canada"], canada),
    ({"places": ["canada"]}, canada),
    ({"contains": {"places": ["canada"]}}, canada),
    ({"key": "places", "op": "=", "value": "canada"}, canada),
    ('{"places": ["canada"]}', canada),
    ('{"key": "places", "op": "!=", "value": "usa"}', lambda m: not usa(m)),
    (["places=usa", {"labels": ["earn"]}], lambda m: usa(m) and earn(m)),
    ([{"key": "places", "op": "=", "value": "usa"}, "labels!=earn"],
     lambda m: usa(m) and not earn(m)),
    ("title_only=false", lambda m: m.get("title_only") is False),
    ({"key": "text_type", "op": ">=", "value": "NORM"}, lambda m: m.get("text_type") >= "NORM"),
    ([], lambda m: True),
]  # fmt: skip

#: (a shape that is no filter, the message every interface refuses it with)
REFUSED: list[tuple[Any, str]] = [
    (5, f"Invalid filter: got a number; {FORMS}"),
    (True, f"Invalid filter: got a boolean; {FORMS}"),
    ([None], f"Invalid filter: got null; {FORMS}"),
    ([["places=usa"]], f"Invalid filter: got a list inside the list; {FORMS}"),
    ("places", f'Invalid filter "places": {FORMS}'),
    ("places usa", f'Invalid filter "places usa": {FORMS}'),
    ('{"places": ["usa"]', f'Invalid filter "{{\\"places\\": [\\"usa\\"]": not a JSON object; {FORMS}'),
    ({"key": "places", "value": "usa"},
     'Invalid filter with keys "key", "value": {"key": KEY, "op": OP, "value": VALUE} takes '
     "these three keys and no other (for metadata with a field named key, op or value, use "
     f'{{"contains": {{...}}}}); {FORMS}'),
    ({"contains": ["usa"]},
     f'Invalid filter with keys "contains": {{"contains": {{...}}}} takes one object and no '
     f"other key; {FORMS}"),
    ({"key": 1, "op": "=", "value": "usa"}, 'Invalid filter: "key" takes a string (got a number)'),
    ({"key": "places", "op": "~", "value": "usa"},
     'Invalid filter: "op" is one of =, !=, <, <=, >, >= (got "~")'),
    ("n>=1e400", "Invalid filter: a number is out of range (NaN, an infinity or past 1.8e308)"),
    ("places>=true", "Invalid filter places>=true: only numbers and strings can be compared "
                     "with >=; use places=true for equality"),
]  # fmt: skip


@pytest.fixture(scope="module")
def news(pg_server: Server, minilm: Any, shared_data: Path) -> Iterator[str]:
    """120 Reuters stories, the query's term cached (the SQL function reads it there)."""
    for dsn in reuters_database(pg_server, "t_filters", 120):
        with PgLogic(dsn) as api, api.connect() as conn:
            cache_terms(conn, api.corpus("news"), QUERY)
            conn.commit()
        yield dsn


@pytest.fixture(scope="module")
def metadata(news: str) -> dict[str, dict[str, Any]]:
    with connect(news) as conn:
        table = PgLogic(news).corpus("news").table
        rows = conn.execute(sql.SQL("SELECT external_id, metadata FROM {}").format(table))
        return {str(r[0]): r[1] for r in rows}


@pytest.fixture(scope="module")
def client(news: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    keys = tmp_path_factory.mktemp("keys") / "keys.json"
    app = create_app(ServeConfig(dsn=news, keys_file=keys, llm_env={}))
    with TestClient(app, client=("127.0.0.1", 50000)) as c:
        yield c


def _python(dsn: str, filters: Any) -> set[str]:
    with PgLogic(dsn) as api:
        return {h.id for h in api.search("news", QUERY, k=K, exact=True, filters=filters).hits}


def _http(c: TestClient, filters: Any) -> set[str]:
    body = {"corpus": "news", "query": QUERY, "k": K, "exact": True, "filters": filters}
    res = c.post("/v1/search", json=body)
    if res.status_code == 400:
        raise InvalidInput(res.json()["error"]["message"])
    assert res.status_code == 200, res.text
    compiled = c.post("/v1/compile", json={"query": QUERY, "filters": filters})
    assert compiled.status_code == 200, compiled.text
    return {h["id"] for h in res.json()["hits"]}


def _sql(dsn: str, filters: Any) -> set[str]:
    query = {"tree": {"term": TERM}, "k": K, "exact": True, "filters": filters}
    with connect(dsn) as conn:
        try:
            rows = conn.execute(
                "SELECT external_id FROM pglogic.search('news', %s)", (Jsonb(query),)
            ).fetchall()
        except psycopg.errors.InvalidParameterValue as exc:
            raise InvalidInput(exc.diag.message_primary) from None
    return {str(r[0]) for r in rows}


def _sqlalchemy(dsn: str, filters: Any, minilm: Any) -> set[str]:
    corpus = PgLogic(dsn).corpus("news")
    table = Table(
        corpus.table_name, MetaData(), Column("id", BigInteger, primary_key=True),
        Column("external_id", Text), Column("embedding", Vector(384)), Column("metadata", JSONB),
        schema="pglogic",
    )  # fmt: skip
    stmt = logical_search(table, table.c.embedding, QUERY, k=K, exact=True, embedder=minilm,
                          filters=filters)  # fmt: skip
    engine = create_engine(url_from_dsn(dsn))
    try:
        with Session(engine) as session, session.begin():
            return {str(row.external_id) for row in execute(session, stmt)}
    finally:
        engine.dispose()


def _where(filters: Any) -> list[str] | None:
    """``--where`` arguments for the filters, or None when a command line cannot write them."""
    items = filters if isinstance(filters, list) else [filters]
    if not all(isinstance(f, str | dict) for f in items):
        return None
    return [a for f in items for a in ("--where", f if isinstance(f, str) else json.dumps(f))]


def _cli(dsn: str, args: list[str]) -> set[str]:
    out = cli_in_process("--dsn", dsn, "search", "news", QUERY, "--exact", "-k", str(K),
                         "--json", *args, env={"COLUMNS": "2000"})  # fmt: skip
    if out.returncode != 0:
        raise InvalidInput(out.stderr.strip().removeprefix("Error: "))
    return {json.loads(line)["id"] for line in out.stdout.splitlines()}


@pytest.mark.parametrize(("filters", "selects"), ACCEPTED, ids=[repr(a[0]) for a in ACCEPTED])
def test_each_form_selects_the_same_documents_everywhere(
    news: str, metadata: dict[str, dict[str, Any]], client: TestClient, minilm: Any,
    filters: Any, selects: Callable[[dict[str, Any]], bool],
) -> None:  # fmt: skip
    want = {i for i, m in metadata.items() if selects(m)}
    assert want and (want != set(metadata) or filters == [])  # the case selects something
    assert _python(news, filters) == want
    assert _http(client, filters) == want
    assert _sql(news, filters) == want
    assert _sqlalchemy(news, filters, minilm) == want
    args = _where(filters)
    assert args is not None
    assert _cli(news, args) == want


@pytest.mark.parametrize(("filters", "message"), REFUSED, ids=[repr(r[0]) for r in REFUSED])
def test_each_other_shape_is_refused_with_the_forms_everywhere(
    news: str, client: TestClient, minilm: Any, filters: Any, message: str
) -> None:
    runs: dict[str, Callable[[], object]] = {
        "python": lambda: _python(news, filters),
        "http": lambda: _http(client, filters),
        "sql": lambda: _sql(news, filters),
        "sqlalchemy": lambda: _sqlalchemy(news, filters, minilm),
    }
    args = _where(filters)
    if args is not None:
        runs["cli"] = lambda: _cli(news, args)
    for name, run in runs.items():
        with pytest.raises(InvalidInput) as info:
            run()
        assert str(info.value) == message, name


def test_the_defects_of_the_old_readings_are_gone(news: str, client: TestClient) -> None:
    """A text is one filter (it was read character by character), an object is a filter (it was
    refused), and HTTP reads the explicit and "contains" forms as such (it read every object as
    a containment and answered 200 with no hits)."""
    canadian = _python(news, "places=canada")
    assert canadian and _python(news, {"places": ["canada"]}) == canadian
    explicit = {"key": "places", "op": "=", "value": "canada"}
    assert _http(client, [explicit]) == _http(client, [{"contains": {"places": ["canada"]}}])
    assert _http(client, [explicit]) == canadian
    assert _sql(news, "places=canada") == canadian
