"""Rendering compiled queries for other clients: numbered placeholders, inline vectors, the CLI."""

from __future__ import annotations

import doctest
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

import pglogic.engine.render
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.compile import CompiledQuery, SearchOptions, compile_query
from pglogic.engine.filters import parse_filter
from pglogic.engine.render import json_tree, render, search_json, vector_literal
from pglogic.engine.source import Corpus
from pglogic.errors import InvalidInput, QueryError
from pglogic.query import parse
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect
from pglogic.store.search import Hit, search
from tests.conftest import Server, cli_in_process, reuters_database

SAMPLE = Corpus(1, "news", "corpus_1", "all-MiniLM-L6-v2", 384, "cosine", "embedding", None, None)
QUERIES = [
    '"a"',
    '"a" AND NOT "b"',
    '("a" OR "b") AND NOT ("c" OR "a")',
    '"a" AND NOT NOT "b" OR "c" AND "a"',
]


def compiled_for(query: str, **kw: Any) -> CompiledQuery:
    return compile_query(parse(query), SAMPLE, SearchOptions(**kw))


# -- pure ------------------------------------------------------------------------------------------


def test_doctests() -> None:
    result = doctest.testmod(pglogic.engine.render)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("exact", [False, True])
def test_numbered_placeholders_follow_first_appearance(query: str, exact: bool) -> None:
    compiled = compiled_for(query, exact=exact, filters=(parse_filter("split=train"),))
    r = render(compiled, "numbered")
    assert "%(" not in r.text
    original = compiled.as_string()
    appearance = list(dict.fromkeys(re.findall(r"%\(([^)]+)\)s", original)))
    assert list(r.names) == appearance
    vector_params = {f"v{i}" for i in range(len(compiled.terms))}
    assert set(r.names) == set(compiled.params) | vector_params | set(filter(None, [r.guide]))
    assert r.guide == compiled.guide_param
    assert (r.guide is None) is (exact or len(compiled.terms) == 1)
    back = re.sub(r"\$(\d+)", lambda m: f"%({r.names[int(m.group(1)) - 1]})s", r.text)
    assert back == original
    assert r.settings == compiled.settings
    assert r.vector_terms == {f"v{i}": t for i, t in enumerate(compiled.terms)}


def test_psycopg_style_is_the_compiled_text() -> None:
    compiled = compiled_for('"a" OR "b"', term_scans=True)  # the term scans and the guide's
    r = render(compiled)
    assert r.text == compiled.as_string()
    assert r.names == ("v0", "v1", "depth", "vg", "gdepth", "k")


def test_values_in_order_and_missing_vector() -> None:
    compiled = compiled_for('"a" AND NOT "b"', k=7, term_scans=True)  # term CTE and guide
    r = render(compiled, "numbered")
    vectors = {"a": np.full(384, 0.5), "b": np.zeros(384)}
    values = r.values(vectors)
    assert r.names == ("v0", "v1", "depth", "vg", "gdepth", "k")
    assert [type(v).__name__ for v in values] == ["ndarray", "ndarray", "int", "ndarray", "int",
                                                  "int"]  # fmt: skip
    assert values[2] == compiled.params["depth"] and values[5] == 7
    assert values[4] == compiled.params["gdepth"]
    assert values[0].dtype == np.float32
    np.testing.assert_array_equal(values[3], compiled.guide_vector(vectors))
    with pytest.raises(QueryError, match="No vector for term 'b'"):
        r.values({"a": np.zeros(384)})
    with pytest.raises(QueryError, match="No vector for term 'b'"):
        render(compiled, vectors={"a": np.zeros(384)})


def test_inline_writes_every_value() -> None:
    compiled = compiled_for(
        '"a" AND NOT "b"', k=7, filters=(parse_filter('{"x": "50%"}'),), term_scans=True,
        not_context=0.0,
    )  # fmt: skip
    vectors = {"a": np.full(384, 0.25), "b": np.full(384, -1.5)}
    r = render(compiled, "numbered", vectors)
    assert r.names == () and r.params == {} and r.vector_terms == {}
    assert r.values() == []
    assert "'[" + ",".join(["0.25"] * 384) + "]'::vector(384)" in r.text
    assert "'[" + ",".join(["-1.5"] * 384) + "]'::vector(384)" in r.text
    assert "LIMIT 7" in r.text and f"LIMIT {compiled.params['depth']}" in r.text
    assert """'{"x": "50%"}'::jsonb""" in r.text
    assert "$" not in r.text and "%(" not in r.text


def test_inline_writes_the_negated_term_against_its_context() -> None:
    """The statement scores what ``with_vectors`` binds: "b" without half of "a"."""
    a, b = np.zeros(384), np.zeros(384)
    a[0], b[0], b[1] = 1.0, 0.6, 0.8
    compiled = compiled_for('"a" AND NOT "b"', not_context=0.5)
    r = render(compiled, "numbered", {"a": a, "b": b})
    expected = np.zeros(384, dtype=np.float32)
    expected[0], expected[1] = 0.3 / 0.8544003745317531, 0.8 / 0.8544003745317531
    assert vector_literal(expected) in r.text
    bound = compiled.with_vectors({"a": a, "b": b})
    assert np.allclose(bound[f"v{compiled.terms.index('b')}"], expected)
    assert np.array_equal(bound[f"v{compiled.terms.index('a')}"], a.astype(np.float32))


def test_inline_vectors_only_keeps_other_placeholders_and_escapes_percent() -> None:
    compiled = compiled_for('"a"', filters=(parse_filter('{"x": "50%"}'),))
    r = render(compiled, "psycopg", {"a": np.ones(384)}, inline_params=False)
    assert r.names == ("f0", "k")  # one term: a plain k-NN scan, no depth
    assert "%(f0)s::jsonb" in r.text and "::vector(384)" in r.text
    # literal values only: psycopg style escapes % when placeholders remain
    r2 = render(compiled, "psycopg", inline_params=True)
    assert r2.names == ("v0",)
    assert """'{"x": "50%%"}'::jsonb""" in r2.text
    r3 = render(compiled, "numbered", inline_params=True)
    assert """'{"x": "50%"}'::jsonb""" in r3.text


def test_param_prefix_is_kept() -> None:
    opts = SearchOptions(term_scans=True)
    compiled = compile_query(parse('"a" OR "b"'), SAMPLE, opts, param_prefix="q_")
    r = render(compiled, "numbered")
    assert r.names == ("q_v0", "q_v1", "q_depth", "q_vg", "q_gdepth", "q_k")
    assert r.vector_terms == {"q_v0": "a", "q_v1": "b"}


def test_unknown_style() -> None:
    with pytest.raises(InvalidInput, match="Unknown placeholder style 'qmark'"):
        render(compiled_for('"a"'), "qmark")  # type: ignore[arg-type]


def test_vector_literal_is_exact_for_float32() -> None:
    vec = np.random.default_rng(7).normal(size=1000).astype(np.float32)
    vec[:4] = [0.0, -0.0, 1e-30, 3.4e38]
    text = vector_literal(vec)
    parsed = np.array([np.float32(x) for x in text[1:-1].split(",")], dtype=np.float32)
    np.testing.assert_array_equal(parsed, vec)
    with pytest.raises(InvalidInput, match="NaN or infinite"):
        vector_literal([1.0, float("nan")])


def test_script_sets_local_settings() -> None:
    r = render(compiled_for('"a"', k=3, depth=300, ef_search=50), vectors={"a": np.ones(384)})
    lines = r.script().splitlines()
    assert lines[:2] == [
        "SET LOCAL hnsw.ef_search = '50';",
        "SET LOCAL hnsw.iterative_scan = 'relaxed_order';",
    ]
    assert lines[-1] == 'ORDER BY top.score DESC, top."id";'
    assert "LIMIT 3)" in lines[-2]


def test_json_tree_and_search_json() -> None:
    tree = parse('("a" OR "b") AND NOT "c"')
    assert json_tree(tree) == {
        "op": "and",
        "args": [
            {"op": "or", "args": [{"term": "a"}, {"term": "b"}]},
            {"op": "not", "arg": {"term": "c"}},
        ],
    }
    vec = np.array([0.1, 0.2], dtype=np.float32)
    leaf = json_tree(parse('"a"'), {"a": vec})
    assert np.array_equal(np.array(leaf["vector"], dtype=np.float32), vec)
    q = search_json(tree, SearchOptions(k=3, operators="godel", exact=True))
    assert {k: q[k] for k in ("operators", "k", "exact", "truth")} == {
        "operators": "godel",
        "k": 3,
        "exact": True,
        "truth": "clamp",
    }
    filtered = search_json(tree, SearchOptions(filters=(parse_filter("a=1"),)))
    assert filtered["filters"] == [{"key": "a", "op": "=", "value": 1}]
    # the passage score is always said, so a database before 0013 refuses blend-not-or rather
    # than scoring another way; without passages it is not
    assert q["passage_score"] == "blend-not-or"
    assert search_json(tree, SearchOptions(passage_score="max"))["passage_score"] == "max"
    own = search_json(tree, SearchOptions(passages=False))
    assert own["passages"] is False and "passage_score" not in own
    with pytest.raises(InvalidInput, match="fuzzy mode only"):
        search_json(tree, SearchOptions(mode="nsfl"))
    with pytest.raises(InvalidInput, match="takes no timeout"):
        search_json(tree, SearchOptions(timeout=1.0))


# -- against the database --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def news_dsn(pg_server: Server, minilm: Any, shared_data: Path) -> Iterator[str]:
    yield from reuters_database(pg_server, "t_render", 120)


def run(conn: psycopg.Connection[Any], settings: dict[str, str], cur: Any, *args: Any) -> list[Any]:
    with conn.transaction():
        for name, value in settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))
        cur.execute(*args)
        rows: list[Any] = cur.fetchall()
    return rows


def assert_ranking(hits: list[Hit], rows: list[Any], tol: float = 1e-9) -> None:
    assert [r[0] for r in rows] == [h.row_id for h in hits]
    for h, r in zip(hits, rows, strict=True):
        assert abs(r[4] - h.score) <= tol


CASES = [
    ('"oil prices" AND NOT "natural gas"', SearchOptions(k=8)),
    ('("grain" OR "wheat") AND NOT "corn"', SearchOptions(k=5, operators="godel")),
    ('"coffee" OR "cocoa"', SearchOptions(k=6, filters=(parse_filter("split=train"),))),
    ('NOT "oil"', SearchOptions(k=4, exact=True, truth="affine")),
]


@pytest.mark.db
@pytest.mark.model
@pytest.mark.parametrize(("query", "opts"), CASES)
def test_numbered_and_inline_run_like_the_python_path(
    news_dsn: str, minilm: Any, query: str, opts: SearchOptions
) -> None:
    with connect(news_dsn) as conn:
        corpus = get_corpus(conn, "news")
        conn.commit()
        result = search(conn, corpus, query, embedder=minilm, options=opts)
        assert result.hits
        compiled = result.compiled
        vectors = dict(zip(compiled.terms, minilm.embed(compiled.terms), strict=True))

        numbered = render(compiled, "numbered")
        with psycopg.RawCursor(conn) as cur:
            rows = run(conn, numbered.settings, cur, numbered.text, numbered.values(vectors))
        assert_ranking(result.hits, rows)

        # the same with vectors sent as text, as a client without pgvector types would
        text_values = [
            vector_literal(v) if isinstance(v, np.ndarray) else v for v in numbered.values(vectors)
        ]
        with psycopg.RawCursor(conn) as cur:
            rows = run(conn, numbered.settings, cur, numbered.text, text_values)
        assert_ranking(result.hits, rows)

        inline = render(compiled, "numbered", vectors)
        with conn.cursor() as cur:
            rows = run(conn, inline.settings, cur, inline.text.encode())
        assert_ranking(result.hits, rows)

        mixed = render(compiled, "psycopg", vectors, inline_params=False)
        with conn.cursor() as cur:
            rows = run(conn, mixed.settings, cur, mixed.text.encode(), mixed.params)
        assert_ranking(result.hits, rows)


def _cli_statement(stdout: str) -> tuple[list[str], str, list[str]]:
    lines = stdout.strip().splitlines()
    settings = [ln for ln in lines if ln.startswith("SET LOCAL ")]
    comments = [ln for ln in lines if ln.startswith("-- ")]
    body = [ln for ln in lines if ln not in settings and ln not in comments]
    return settings, "\n".join(body).rstrip(";"), comments


@pytest.mark.db
@pytest.mark.model
def test_cli_inline_statement_runs_as_printed(news_dsn: str, minilm: Any) -> None:
    query = '("grain" OR "wheat") AND NOT "corn"'
    out = cli_in_process(
        "--dsn", news_dsn, "compile", query, "--corpus", "news", "--vectors", "inline", "-k", "6"
    )
    assert out.returncode == 0, out.stderr
    settings, statement, comments = _cli_statement(out.stdout)
    assert comments == ["-- parameters: none"]
    assert "::vector(384)" in statement and "$1" not in statement
    with connect(news_dsn) as conn:
        corpus = get_corpus(conn, "news")
        conn.commit()
        expected = search(conn, corpus, query, embedder=minilm, options=SearchOptions(k=6)).hits
        with conn.transaction():
            for line in settings:
                conn.execute(line.encode())
            rows = conn.execute(statement.encode()).fetchall()
    # the CLI embedded the terms in another process: the same ranking, scores to float noise
    assert_ranking(expected, rows, tol=1e-6)


@pytest.mark.db
@pytest.mark.model
def test_cli_numbered_prints_the_parameter_order(news_dsn: str, minilm: Any) -> None:
    query = '"oil prices" OR "natural gas"'  # a term scan each, and the guide's (forced)
    out = cli_in_process(
        "--dsn", news_dsn, "compile", query, "--corpus", "news", "--style", "numbered", "-k", "5",
        "--term-scans",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    settings, statement, comments = _cli_statement(out.stdout)
    assert comments[0] == "-- parameters, in order:"
    params = [re.fullmatch(r"-- \$(\d+) = (\w+): (.*)", c) for c in comments[1:]]
    assert all(params)
    assert [int(m.group(1)) for m in params if m] == [1, 2, 3, 4, 5, 6]
    names = [m.group(2) for m in params if m]
    # the corpus has passages: each scan names its vector and depth, the sums over passages after
    assert names == ["v0", "depth", "v1", "vg", "gdepth", "k"]
    assert "guide vector" in comments[1 + names.index("vg")]
    terms = {"v0": "oil prices", "v1": "natural gas"}
    embedder = get_query_embedder("all-MiniLM-L6-v2")
    vecs = {t: embedder.embed([t])[0] for t in terms.values()}
    opts = SearchOptions(k=5, term_scans=True)
    guide = compile_query(parse(query), SAMPLE, opts).guide_vector(vecs)
    values = [
        vecs[terms[n]] if n in terms else guide if n == "vg" else json.loads(m.group(3))
        for n, m in zip(names, params, strict=True)
        if m
    ]
    by_name = dict(zip(names, values, strict=True))
    # depth 100 for k = 5, deeper by the corpus's passages per document (planner statistics)
    assert by_name["depth"] == by_name["gdepth"] >= 100 and by_name["k"] == 5
    with connect(news_dsn) as conn:
        corpus = get_corpus(conn, "news")
        conn.commit()
        expected = search(conn, corpus, query, embedder=minilm, options=opts).hits
        with conn.transaction(), psycopg.RawCursor(conn) as cur:
            for line in settings:
                cur.execute(line.encode())
            cur.execute(statement.encode(), values)
            rows = cur.fetchall()
    assert [r[0] for r in rows] == [h.row_id for h in expected]
    for h, r in zip(expected, rows, strict=True):
        assert abs(r[4] - h.score) <= 1e-6  # terms embedded one by one vs in one batch


def test_cli_inline_needs_a_corpus() -> None:
    out = cli_in_process("compile", '"a"', "--vectors", "inline")
    assert out.returncode == 2
    assert "--vectors inline needs --corpus" in out.stderr


def test_cli_numbered_without_corpus() -> None:
    out = cli_in_process("compile", '"a" AND NOT "b"', "--style", "numbered", "--exact")
    assert out.returncode == 0, out.stderr
    assert "-- $1 = v0: \"<embedding of 'a'>\"" in out.stdout
    assert "LIMIT $5) top" in out.stdout  # ($3, $4: the mention floor's configuration and text)
    assert '-- $4 = t1: "b"' in out.stdout
