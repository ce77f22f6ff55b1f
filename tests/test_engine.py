"""Tests of the logical query engine: compiler golden file, operator semantics on hand-built
vectors, SQL vs NumPy parity and approximate recall on real documents, negated-only queries,
metadata filters, SQL injection, the CLI and the term embedding cache.

Database tests run against the real Postgres of ``tests/conftest.py``; retrieval on real text
uses the real all-MiniLM-L6-v2 model. Regenerate ``tests/golden/compile.txt`` with
``PGLOGIC_UPDATE_GOLDEN=1`` (its format is described at the top of that file).
"""

from __future__ import annotations

import dataclasses
import doctest
import hashlib
import itertools
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from pglogic.embed.registry import CachedEmbedder
from pglogic.engine.compile import CompiledQuery, SearchOptions, compile_query
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, MAX_AND_TEXT, scored_terms, with_and_texts
from pglogic.engine.filters import Comparison, Contains, Filter, parse_filter
from pglogic.engine.negation import with_context
from pglogic.engine.nsfl import evaluate_nsfl_numpy
from pglogic.engine.operators import (
    DEFAULT_FAMILY,
    PRESETS,
    OperatorFamily,
    evaluate_numpy,
    itlr_combinations,
)
from pglogic.engine.plans import guide_only_plan, union_plan
from pglogic.engine.source import Corpus
from pglogic.engine.sqo import sqo_vector
from pglogic.errors import InvalidInput, PglogicError, QueryError
from pglogic.query import Node, Term, parse, positive_terms, quote_term, terms, to_tree
from pglogic.store.corpus import build_index, create_corpus
from pglogic.store.db import connect
from pglogic.store.indexes import metadata_index_name
from pglogic.store.ingest import ingest_path, ingest_records
from pglogic.store.readers import FieldMap, Record
from pglogic.store.search import Hit, cached_filter_estimate, estimate_selectivity, execute, search
from tests.conftest import uses_hnsw

db = pytest.mark.db
model = pytest.mark.model

ALL_FAMILIES: list[OperatorFamily] = [*PRESETS.values(), *itlr_combinations()]
FAMILY_IDS = [f.name for f in ALL_FAMILIES]
TRUTHS = ("clamp", "affine")
#: SQL vs NumPy parity also for a calibrated map (see pglogic.eval.calibrate)
PARITY_TRUTHS = (*TRUTHS, "sigmoid:0.2:10.0")

# -- golden file: query -> compiled SQL ---------------------------------------------------------

GOLDEN = Path(__file__).parent / "golden" / "compile.txt"
UPDATE_GOLDEN = os.environ.get("PGLOGIC_UPDATE_GOLDEN") == "1"
GOLDEN_CORPUS = Corpus(1, "news", "corpus_1", "m", 384, "cosine", "embedding", None, None)


@dataclass(frozen=True)
class GoldenCase:
    """One case of the compile golden file (``expected`` is None until generated)."""

    line: int
    comments: tuple[str, ...]
    query: str
    options: str | None
    expected: str | None


def _golden_blocks(text: str) -> list[tuple[int, list[str]]]:
    blocks: list[tuple[int, list[str]]] = []
    block: list[str] = []
    start = 0
    for lineno, line in enumerate([*text.split("\n"), ""], start=1):
        if line.strip():
            if not block:
                start = lineno
            block.append(line)
        elif block:
            blocks.append((start, block))
            block = []
    return blocks


def load_compile_golden(path: Path) -> list[GoldenCase | tuple[str, ...]]:
    """Read the golden file: cases, and comment-only blocks (kept when regenerating)."""
    items: list[GoldenCase | tuple[str, ...]] = []
    for start, block in _golden_blocks(path.read_text(encoding="utf-8")):
        n = 0
        while n < len(block) and block[n].startswith("#"):
            n += 1
        comments, rest = tuple(block[:n]), block[n:]
        if not rest:
            items.append(comments)
            continue
        query, i = rest[0], 1
        options = None
        if i < len(rest) and rest[i].startswith("options: "):
            options, i = rest[i].removeprefix("options: "), i + 1
        expected = None
        if i < len(rest):
            if not rest[i].startswith("=> "):
                raise ValueError(f"{path}:{start + n + i}: expected 'options: ' or '=> '")
            expected = "\n".join([rest[i].removeprefix("=> "), *rest[i + 1 :]])
        items.append(GoldenCase(start + n, comments, query, options, expected))
    return items


def golden_options(options: str | None) -> tuple[SearchOptions, bool]:
    """SearchOptions from a case's ``options:`` JSON (``where`` holds filter texts)."""
    raw: dict[str, Any] = json.loads(options) if options else {}
    where = raw.pop("where", [])
    iterative_server = raw.pop("server_has_iterative_scan", True)
    filters = tuple(parse_filter(w) for w in where)
    return SearchOptions(**raw, filters=filters), iterative_server


def render_compile_case(query: str, options: str | None) -> str:
    """The golden output of one case: settings, statement and parameters, or the error."""
    opts, iterative_server = golden_options(options)
    try:
        compiled = compile_query(
            parse(query), GOLDEN_CORPUS, opts, server_has_iterative_scan=iterative_server
        )
    except PglogicError as err:
        return f"ERROR: {type(err).__name__}: {err}"
    lines = [f"SET LOCAL {name} = {value};" for name, value in compiled.settings.items()]
    lines.append(compiled.as_string() + ";")
    lines.append("-- params: " + json.dumps(compiled.params, sort_keys=True))
    return "\n".join(lines)


def write_compile_golden(path: Path, items: list[GoldenCase | tuple[str, ...]]) -> None:
    """Rewrite the golden file with freshly rendered outputs."""
    blocks: list[str] = []
    for item in items:
        if isinstance(item, tuple):
            blocks.append("\n".join(item))
            continue
        lines = [*item.comments, item.query]
        if item.options is not None:
            lines.append(f"options: {item.options}")
        lines.append("=> " + render_compile_case(item.query, item.options))
        blocks.append("\n".join(lines))
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


if UPDATE_GOLDEN:
    write_compile_golden(GOLDEN, load_compile_golden(GOLDEN))
GOLDEN_CASES = [c for c in load_compile_golden(GOLDEN) if isinstance(c, GoldenCase)]


def test_compile_golden_file_covers_the_issue() -> None:
    assert len(GOLDEN_CASES) >= 10
    outputs = [c.expected or "" for c in GOLDEN_CASES]
    assert any("godel" in (c.options or "") for c in GOLDEN_CASES)
    assert any('"exact": true' in (c.options or "") for c in GOLDEN_CASES)
    assert any("where" in (c.options or "") for c in GOLDEN_CASES)
    assert any("SET LOCAL hnsw.ef_search" in o for o in outputs)
    assert any("SET LOCAL hnsw.iterative_scan = relaxed_order;" in o for o in outputs)
    assert any(o.startswith("ERROR: QueryError") for o in outputs)


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=[f"line{c.line}" for c in GOLDEN_CASES])
def test_compile_golden(case: GoldenCase) -> None:
    assert case.expected is not None, "no expected output: run with PGLOGIC_UPDATE_GOLDEN=1"
    assert render_compile_case(case.query, case.options) == case.expected


FUZZY_CASES = [
    c
    for c in GOLDEN_CASES
    if not (c.expected or "").startswith("ERROR") and '"mode"' not in (c.options or "")
]


@pytest.mark.parametrize("case", FUZZY_CASES, ids=[f"line{c.line}" for c in FUZZY_CASES])
def test_compiled_shape(case: GoldenCase) -> None:
    """One MATERIALIZED CTE per distinct positive term, or the guide's alone where it suffices;
    only placeholders carry values (the fuzzy mode; the other modes' shapes are in
    tests/test_modes.py)."""
    opts, _ = golden_options(case.options)
    tree = parse(case.query)
    compiled = compile_query(tree, GOLDEN_CORPUS, opts)
    text = compiled.as_string()
    assert compiled.terms == scored_terms(tree, opts.and_text)
    assert compiled.terms[: len(terms(tree))] == terms(tree)
    guide_only = guide_only_plan(tree, opts)
    expected_ctes = [] if opts.exact or guide_only else positive_terms(tree)
    if guide_only:  # the guide's scan is the only index scan
        assert compiled.guide_param is not None and '"g" AS MATERIALIZED' in text
    if union_plan(tree, opts):  # each term's top k, no guide
        assert compiled.guide_param is None and '"g" AS MATERIALIZED' not in text
        assert compiled.params["depth"] == (opts.depth or opts.k)
    assert compiled.candidate_terms == expected_ctes
    single = isinstance(tree, Term) and not opts.exact  # plain k-NN in the sims CTE
    assert len(re.findall(r'"c\d+" AS MATERIALIZED', text)) == (0 if single else len(expected_ctes))
    for i in range(len(compiled.terms)):
        assert f'AS "s{i}"' in text
    assert text.count("%(k)s") == (2 if single else 1)
    assert ("hnsw.ef_search" in compiled.settings) == (not opts.exact)


# -- statements cached per query shape ------------------------------------------------------------


def test_statements_are_cached_per_shape() -> None:
    a = compile_query(parse('"oil" AND NOT "gas"'), GOLDEN_CORPUS)
    b = compile_query(parse('"wheat" AND NOT "corn"'), GOLDEN_CORPUS)
    assert b.statement is a.statement and b.text == a.text  # compiled and rendered once
    assert (a.terms, b.terms) == (["oil", "gas"], ["wheat", "corn"])
    assert b.candidate_terms == [] and b.tree == parse('"wheat" AND NOT "corn"')  # guide only
    c = compile_query(parse('"oil" OR "gas"'), GOLDEN_CORPUS)
    d = compile_query(parse('"wheat" OR "corn"'), GOLDEN_CORPUS)
    assert d.statement is c.statement and d.candidate_terms == ["wheat", "corn"]  # re-bound
    # the shape includes which terms repeat, the options and the corpus
    same = compile_query(parse('"oil" AND NOT "oil"'), GOLDEN_CORPUS)
    assert same.statement is not a.statement and same.terms == ["oil"]
    godel = compile_query(parse('"x" AND NOT "y"'), GOLDEN_CORPUS, SearchOptions(operators="godel"))
    assert godel.statement is not a.statement and "LEAST" in godel.text
    other = dataclasses.replace(GOLDEN_CORPUS, table_name="corpus_2")
    assert '"corpus_2"' in compile_query(parse('"x" AND NOT "y"'), other).text
    # the text is what the statement renders to, also after a cache hit
    assert b.text == b.statement.as_string(None)
    # unhashable filter values and NSFL (fused texts depend on the words): compiled each time
    contains = SearchOptions(filters=(Contains({"labels": ["grain"]}),))
    one = compile_query(parse('"a" AND "b"'), GOLDEN_CORPUS, contains)
    assert (
        compile_query(parse('"a" AND "b"'), GOLDEN_CORPUS, contains).statement is not one.statement
    )
    nsfl = SearchOptions(mode="nsfl")
    x = compile_query(parse('"a" AND "b"'), GOLDEN_CORPUS, nsfl)
    y = compile_query(parse('"c" AND "d"'), GOLDEN_CORPUS, nsfl)
    assert y.terms == ["c", "d", "c and d"] and x.terms == ["a", "b", "a and b"]


# -- identical terms share a CTE; the term embedding cache ---------------------------------------


def test_identical_terms_share_one_cte_and_one_vector() -> None:
    tree = parse('"a" AND "b" OR "a" AND NOT "c" OR NOT NOT "a" OR ("b" AND "a")')
    compiled = compile_query(tree, GOLDEN_CORPUS, SearchOptions(and_text=0))
    text = compiled.as_string()
    assert compiled.terms == ["a", "b", "c"]
    assert compiled.candidate_terms == ["a", "b"]
    assert len(re.findall(r'"c\d+" AS MATERIALIZED', text)) == 2
    assert text.count('"c0" AS MATERIALIZED') == 1
    assert len(re.findall(r'SELECT "id", "s0", "s1", "s2" FROM "c\d"', text)) == 2  # the union
    # c0's ORDER BY and the similarity column of each CTE (c0, c1 and the guide's g)
    assert text.count("%(v0)s") == 4
    assert text.count("%(v2)s") == 3  # negated-only: similarity only (in each CTE)
    assert text.count("%(vg)s") == 1 and text.count("%(gdepth)s") == 1
    params = compiled.with_vectors({t: np.ones(384) for t in "abc"})
    assert sorted(p for p in params if p.startswith("v")) == ["v0", "v1", "v2", "vg"]
    with pytest.raises(QueryError, match="No vector for term 'c'"):
        compiled.with_vectors({"a": np.ones(384), "b": np.ones(384)})


def test_term_both_negated_and_positive_generates_candidates() -> None:
    compiled = compile_query(parse('NOT "a" OR "a"'), GOLDEN_CORPUS)
    assert compiled.candidate_terms == ["a"]
    assert len(re.findall(r'"c\d+" AS MATERIALIZED', compiled.as_string())) == 1


class CountingEmbedder:
    """A fake embedder recording each batch it is asked to embed (4-d, deterministic)."""

    name = "hand"
    dim = 4

    def __init__(self, vectors: dict[str, Sequence[float]] | None = None) -> None:
        self.vectors = vectors or {}
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(list(texts))
        return np.array([self.vector(t) for t in texts], dtype=np.float32).reshape(-1, self.dim)

    def vector(self, text: str) -> npt.NDArray[np.float32]:
        if text in self.vectors:
            v = np.asarray(self.vectors[text], dtype=np.float64)
        else:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=self.dim)
        return (v / np.linalg.norm(v)).astype(np.float32)


def test_cached_embedder_embeds_each_distinct_term_once_per_batch() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, size=16)
    out = cached.embed(["x", "y", "x", "x"])
    assert inner.calls == [["x", "y"]]
    assert out.shape == (4, 4) and out.dtype == np.float32
    np.testing.assert_array_equal(out[0], out[2])
    np.testing.assert_array_equal(out[0], inner.vector("x"))
    assert (cached.misses, cached.hits) == (2, 2)
    out2 = cached.embed(["y", "z", "x"])
    assert inner.calls == [["x", "y"], ["z"]]
    np.testing.assert_array_equal(out2[0], out[1])
    assert (cached.misses, cached.hits) == (3, 4)
    cached.embed(["x", "y", "z"])
    assert len(inner.calls) == 2
    assert cached.embed([]).shape == (0, 4)


def test_cached_embedder_evicts_least_recently_used() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, size=2)
    cached.embed(["a"])
    cached.embed(["b"])
    cached.embed(["a"])  # a is now the most recently used
    cached.embed(["c"])  # evicts b
    cached.embed(["a"])
    assert inner.calls == [["a"], ["b"], ["c"]]
    cached.embed(["b"])
    assert inner.calls[-1] == ["b"]


# -- hand-built vectors: the right answer is known ----------------------------------------------

E = np.eye(4)
HAND_DOCS: dict[str, npt.NDArray[np.float64]] = {
    name: vec / np.linalg.norm(vec)
    for name, vec in {
        "a": E[0],
        "b": E[1],
        "c": E[2],
        "ab": E[0] + E[1],
        "ac": E[0] + E[2],
        "bc": E[1] + E[2],
        "abc": E[0] + E[1] + E[2],
        "none": E[3],
    }.items()
}
HAND_TERMS: dict[str, npt.NDArray[np.float64]] = {"A": E[0], "B": E[1], "C": E[2]}


def hand_records() -> list[Record]:
    return [
        Record(name, f"document {name}", name.upper(), {"n": i}, vector=tuple(map(float, vec)))
        for i, (name, vec) in enumerate(HAND_DOCS.items())
    ]


@pytest.fixture(scope="module")
def engine_dsn(pg_server: Any) -> Iterator[str]:
    """A migrated database shared by this module's read-only tests."""
    from tests.conftest import TEMPLATE_DB

    name = f"t_engine_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        yield pg_server.dsn_for(name)
    finally:
        janitor.drop()


@pytest.fixture(scope="module")
def engine_conn(engine_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Autocommit connection: each execute() runs in its own transaction."""
    with connect(engine_dsn, autocommit=True) as c:
        yield c


@pytest.fixture(scope="module")
def index_conn(engine_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Like engine_conn, with sequential scans discouraged: on these small tables the planner
    would otherwise sort the whole table instead of using the HNSW index, as it does on large
    corpora, and approximate mode would be exact."""
    with connect(make_conninfo(engine_dsn, options="-c enable_seqscan=off"), autocommit=True) as c:
        yield c


@pytest.fixture(scope="module")
def hand(engine_conn: psycopg.Connection[Any]) -> Corpus:
    """A 4-d corpus of 8 documents with hand-chosen vectors, HNSW-indexed."""
    corpus = create_corpus(engine_conn, "hand", model="hand", dim=4)
    stats = ingest_records(engine_conn, corpus, hand_records(), embedder=None)
    assert stats.inserted == len(HAND_DOCS)
    build_index(engine_conn, "hand")
    return corpus


def run_hand(
    conn: psycopg.Connection[Any],
    corpus: Corpus,
    query: str,
    *,
    family: OperatorFamily | str = "itlr",
    truth: str = "clamp",
    exact: bool = False,
    k: int = len(HAND_DOCS),
    filters: Sequence[Filter] = (),
) -> list[Hit]:
    # the operators on hand-made vectors: no AND text (it would need a vector of its own)
    opts = SearchOptions(
        k=k, operators=family, truth=truth, exact=exact, filters=tuple(filters), and_text=0
    )
    compiled = compile_query(parse(query), corpus, opts)
    return execute(conn, compiled, dict(HAND_TERMS))


def ranks(hits: list[Hit]) -> dict[str, int]:
    return {h.external_id: i for i, h in enumerate(hits)}


def check_scores(hits: list[Hit], query: str, family: OperatorFamily | str, truth: str) -> None:
    """Each hit's score is the family's formula of its similarities; similarities are cosines."""
    tree = parse(query)
    for h in hits:
        expected = evaluate_numpy(tree, {t: [s] for t, s in h.similarities.items()}, family, truth)
        np.testing.assert_allclose(h.score, expected[0], rtol=1e-12)
        for term, sim in h.similarities.items():
            np.testing.assert_allclose(sim, HAND_DOCS[h.external_id] @ HAND_TERMS[term], atol=1e-6)


# A (query, check) per case: the check gets the ranks of documents (0 = best).
HAND_CASES: list[tuple[str, Callable[[dict[str, int]], bool], str]] = [
    ('"A" AND "B"', lambda r: r["ab"] == 0, "the doc matching both ranks first"),
    ('"A" AND "B"', lambda r: r["ab"] < min(r["a"], r["b"], r["none"]), "both above one"),
    (
        '"A" OR "B"',
        lambda r: max(r[d] for d in ("a", "b", "ab", "abc", "ac", "bc")) < min(r["c"], r["none"]),
        "a doc matching either ranks above one matching neither",
    ),
    ('"A" AND NOT "B"', lambda r: r["a"] < r["ab"], "matching A only beats matching A and B"),
    ('"A" AND NOT "B"', lambda r: r["ac"] < r["abc"], "also with a third component"),
    ('("A" OR "B") AND NOT "C"', lambda r: r["a"] < r["ac"] and r["b"] < r["bc"], "nested"),
    ('("A" OR "B") AND NOT "C"', lambda r: r["ab"] < r["abc"], "nested, both sides"),
    ('"A" OR "B" OR "C"', lambda r: r["none"] == len(HAND_DOCS) - 1, "none matches: last"),
    ('NOT NOT "A"', lambda r: r["a"] == 0, "double negation is the term itself"),
]


@db
def test_hand_queries_use_the_hnsw_index(index_conn: psycopg.Connection[Any], hand: Corpus) -> None:
    for query in sorted({q for q, _, _ in HAND_CASES}):
        opts = SearchOptions(k=len(HAND_DOCS), and_text=0)
        compiled = compile_query(parse(query), hand, opts)
        assert uses_hnsw(index_conn, compiled, compiled.with_vectors(HAND_TERMS)), query


@db
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("truth", TRUTHS)
def test_operator_semantics_on_hand_vectors(
    engine_conn: psycopg.Connection[Any],
    index_conn: psycopg.Connection[Any],
    hand: Corpus,
    family: OperatorFamily,
    truth: str,
) -> None:
    for query, check, what in HAND_CASES:
        if truth == "affine" and family.or_.name == "lukasiewicz" and " OR " in query:
            # min(1, Σ(s+1)/2) saturates at 1 for unrelated documents too: not meaningful
            continue
        approx = run_hand(index_conn, hand, query, family=family, truth=truth)
        exact = run_hand(engine_conn, hand, query, family=family, truth=truth, exact=True)
        assert len(approx) == len(HAND_DOCS), query
        assert [h.external_id for h in approx] == [h.external_id for h in exact], query
        r = ranks(approx)
        assert check(r), f"{query}: {what}; got {[h.external_id for h in approx]}"
        check_scores(approx, query, family, truth)


@db
def test_three_term_and_ranks_the_doc_matching_all_first(
    engine_conn: psycopg.Connection[Any], hand: Corpus
) -> None:
    for family in ALL_FAMILIES:
        if family.and_.name == "lukasiewicz":
            continue  # max(0, 3·0.577 − 2) = 0: every document scores 0
        hits = run_hand(engine_conn, hand, '"A" AND "B" AND "C"', family=family)
        assert hits[0].external_id == "abc", family.name


@db
def test_guide_scan_finds_the_document_deep_in_every_term_list(
    engine_conn: psycopg.Connection[Any],
) -> None:
    """The best AND match is 13th for each term; depth 5 finds it only with the guide scan."""
    near = [
        (f"{side}{j}", (1.0, -0.05, 0.02 * j) if side == "a" else (-0.05, 1.0, 0.02 * j))
        for side in "ab"
        for j in range(12)
    ]
    docs = [*near, ("both", (1.0, 1.0, 0.0))]
    corpus = create_corpus(engine_conn, "guided", model="hand", dim=3)
    records = [Record(n, f"doc {n}", None, {}, vector=v) for n, v in docs]
    ingest_records(engine_conn, corpus, records, embedder=None)
    vecs = {"a": np.array([1.0, 0.0, 0.0]), "b": np.array([0.0, 1.0, 0.0])}
    tree = parse('"a" AND "b"')
    exact = execute(
        engine_conn, compile_query(tree, corpus, SearchOptions(k=1, exact=True, and_text=0)), vecs
    )
    assert [h.external_id for h in exact] == ["both"]
    for guide, want in ((False, False), (True, True)):
        compiled = compile_query(tree, corpus, SearchOptions(k=1, depth=5, guide=guide, and_text=0))
        assert (compiled.guide_param is not None) is guide
        hits = execute(engine_conn, compiled, vecs)
        assert (hits[0].external_id == "both") is want
        assert hits[0].score == pytest.approx(exact[0].score if want else 0.0, abs=1e-6)


@db
@pytest.mark.parametrize("operators", ["product-max", "godel"])
@pytest.mark.parametrize("truth", ["clamp", "sigmoid:0.2:12"])
def test_or_of_terms_under_max_takes_each_terms_top_k_and_equals_exact(
    engine_conn: psycopg.Connection[Any],
    index_conn: psycopg.Connection[Any],
    filtered: Corpus,
    operators: str,
    truth: str,
) -> None:
    """A disjunction under max needs only each term's own top k (no guide, depth k): the union
    of those lists holds the formula's top k, filtered or not."""
    vecs = {"A": E[0], "B": E[1], "D": E[3]}
    for query in ('"A" OR "D"', '"A" OR "B" OR "D"'):
        for filters in ((), (parse_filter("year=1995"),)):
            opts = SearchOptions(k=7, operators=operators, truth=truth, filters=filters)
            compiled = compile_query(parse(query), filtered, opts)
            assert compiled.guide_param is None and compiled.params["depth"] == 7
            assert len(compiled.candidate_terms) == query.count('"') // 2
            hits = execute(index_conn, compiled, vecs)
            exact = execute(
                engine_conn,
                compile_query(parse(query), filtered, dataclasses.replace(opts, exact=True)),
                vecs,
            )
            assert len(hits) == 7
            assert [h.row_id for h in hits] == [h.row_id for h in exact], (query, filters)
            np.testing.assert_allclose([h.score for h in hits], [h.score for h in exact], atol=1e-6)


@db
def test_known_scores_default_family(engine_conn: psycopg.Connection[Any], hand: Corpus) -> None:
    hits = run_hand(engine_conn, hand, '"A" AND NOT "B"', k=3)
    assert [h.external_id for h in hits] == ["a", "ac", "abc"]
    half, third = 0.5**0.5, 3**-0.5
    np.testing.assert_allclose([h.score for h in hits], [1.0, half, third * (1 - third)], atol=1e-6)
    assert hits[0].similarities == pytest.approx({"A": 1.0, "B": 0.0}, abs=1e-6)
    assert hits[0].title == "A" and hits[0].metadata == {"n": 0}


@db
def test_search_runs_the_whole_pipeline(engine_conn: psycopg.Connection[Any], hand: Corpus) -> None:
    embedder = CountingEmbedder(dict(HAND_TERMS))
    query = '"A" OR "A" AND NOT "B" OR "A"'
    result = search(
        engine_conn, hand, query, embedder=embedder, options=SearchOptions(k=3, operators="itlr")
    )
    assert embedder.calls == [["A", "B"]]  # one batch, each distinct term once
    assert len(re.findall(r'"c\d+" AS MATERIALIZED', result.compiled.as_string())) == 1
    assert [h.external_id for h in result.hits] == ["a", "ac", "ab"]
    assert set(result.timings) == {"compile", "embed", "database"}
    # plain text without quotes is one term
    plain = search(engine_conn, hand, "A", embedder=CountingEmbedder(dict(HAND_TERMS)))
    assert plain.hits[0].external_id == "a" and set(plain.hits[0].similarities) == {"A"}


@db
def test_query_error_raised_before_embedding(
    engine_conn: psycopg.Connection[Any], hand: Corpus
) -> None:
    embedder = CountingEmbedder(dict(HAND_TERMS))
    with pytest.raises(QueryError, match="every term is negated"):
        search(engine_conn, hand, 'NOT "A"', embedder=embedder)
    assert embedder.calls == []


# -- negated-only queries -----------------------------------------------------------------------

NEGATED_ONLY_MESSAGE = (
    "The query has no positive term to find candidates with (every term is negated); "
    "rerun with exact=True (--exact) to scan every document"
)


@pytest.mark.parametrize("query", ['NOT "A"', 'NOT "A" AND NOT "B"', 'NOT ("A" OR NOT NOT "B")'])
def test_negated_only_query_needs_exact(query: str) -> None:
    with pytest.raises(QueryError) as info:
        compile_query(parse(query), GOLDEN_CORPUS)
    assert str(info.value) == NEGATED_ONLY_MESSAGE
    compiled = compile_query(parse(query), GOLDEN_CORPUS, SearchOptions(exact=True))
    assert compiled.candidate_terms == []
    assert compiled.settings == {"plan_cache_mode": "force_custom_plan"}  # no hnsw settings


@db
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=FAMILY_IDS)
def test_negated_only_exact_ranks_far_documents_first(
    engine_conn: psycopg.Connection[Any], hand: Corpus, family: OperatorFamily
) -> None:
    hits = run_hand(engine_conn, hand, 'NOT "A"', family=family, exact=True)
    assert len(hits) == len(HAND_DOCS)
    assert hits[-1].external_id == "a"
    far = {"b", "c", "bc", "none"}  # similarity 0 to A
    assert {h.external_id for h in hits[: len(far)]} == far
    assert [h.external_id for h in hits[: len(far)]] == sorted(
        (h.external_id for h in hits[: len(far)]), key=lambda d: list(HAND_DOCS).index(d)
    )  # ties broken by id
    check_scores(hits, 'NOT "A"', family, "clamp")
    both = run_hand(engine_conn, hand, 'NOT "A" AND NOT "B"', family=family, exact=True)
    score = {h.external_id: h.score for h in both}
    assert score["c"] == score["none"] == both[0].score  # far from both terms: the best
    assert score["ab"] < both[0].score and score["a"] < both[0].score


# -- SQL vs NumPy parity and approximate recall on real documents -------------------------------

PARITY_QUERIES = [
    '"oil prices" AND "opec"',
    '"wheat" OR "corn" OR "soybeans"',
    '"interest rates" AND NOT "money supply"',
    '("grain exports" OR "wheat") AND NOT ("corn" OR "soviet union")',
    '"cocoa" OR "coffee" AND "brazil" OR NOT NOT "sugar" AND NOT "quarterly earnings"',
    '"bank" AND NOT "bank loans" OR "takeover bid"',
]
RECALL_QUERIES = [
    *PARITY_QUERIES,
    '"gold"',
    '"crude oil" AND NOT "gas"',
    '"dividend" OR "stock split"',
    '"japan" AND "trade" AND NOT "united states"',
    '("coffee" OR "cocoa") AND "prices"',
    '"acquisition" AND NOT ("bank" OR "oil")',
]
N_REAL = 300


@dataclass
class RealCorpus:
    corpus: Corpus
    ids: npt.NDArray[np.int64]
    embeddings: npt.NDArray[np.float64]
    vectors: dict[str, npt.NDArray[np.float32]]

    def sims(
        self, query: str, and_text: int = 0, not_context: float = 0.0
    ) -> dict[str, npt.NDArray[np.float64]]:
        """Cosine similarity of every document to every scored text of ``query`` (its terms,
        and its AND texts when ``and_text`` > 0), in float64; each negated term against its
        context with ``not_context`` > 0 (pglogic.engine.negation)."""
        norms = np.linalg.norm(self.embeddings, axis=1)
        vectors = with_context(parse(query), self.vectors, not_context)
        out = {}
        for t in scored_terms(parse(query), and_text):
            v = np.asarray(vectors[t], dtype=np.float64)
            out[t] = self.embeddings @ v / (norms * np.linalg.norm(v))
        return out


@pytest.fixture(scope="module")
def reuters(engine_conn: psycopg.Connection[Any], minilm: Any, shared_data: Path) -> RealCorpus:
    """The first 300 Reuters stories (headlines as text: full stories take ~20 s to embed here),
    embedded with all-MiniLM-L6-v2 and HNSW-indexed."""
    corpus = create_corpus(engine_conn, "reuters", model=minilm.name, dim=minilm.dim)
    stats = ingest_path(
        engine_conn,
        corpus,
        shared_data / "reuters21578" / "corpus.jsonl.gz",
        embedder=minilm,
        fields=FieldMap(text="title", title="no_such_field"),
        limit=N_REAL,
    )
    assert stats.inserted == N_REAL
    build_index(engine_conn, "reuters")
    rows = engine_conn.execute(
        sql.SQL("SELECT id, {} FROM {} ORDER BY id").format(corpus.embedding, corpus.table)
    ).fetchall()
    all_terms = sorted(
        {
            t
            for q in RECALL_QUERIES + PARITY_QUERIES
            for t in scored_terms(parse(q), DEFAULT_AND_TEXT)
        }
    )
    vectors = dict(zip(all_terms, minilm.embed(all_terms), strict=True))
    return RealCorpus(
        corpus,
        np.array([r[0] for r in rows]),
        np.array([r[1].to_numpy() for r in rows], dtype=np.float64),
        vectors,
    )


def run_real(
    conn: psycopg.Connection[Any], real: RealCorpus, query: str, opts: SearchOptions
) -> list[Hit]:
    compiled: CompiledQuery = compile_query(parse(query), real.corpus, opts)
    return execute(conn, compiled, dict(real.vectors))


@db
@model
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=FAMILY_IDS)
@pytest.mark.parametrize("truth", PARITY_TRUTHS)
def test_sql_scores_equal_numpy(
    engine_conn: psycopg.Connection[Any], reuters: RealCorpus, family: OperatorFamily, truth: str
) -> None:
    for query in PARITY_QUERIES:
        # (the operators alone: the mention floor is tests/test_lexical.py's)
        opts = SearchOptions(k=N_REAL, operators=family, truth=truth, exact=True, not_mention=0)
        # the score's tree: each AND's own text joins it (pglogic.engine.conjunction)
        tree = with_and_texts(parse(query), opts.and_text)
        hits = run_real(engine_conn, reuters, query, opts)
        assert len(hits) == N_REAL
        sims = reuters.sims(query, opts.and_text, opts.not_context)
        expected = evaluate_numpy(tree, sims, family, truth)
        row = {int(i): n for n, i in enumerate(reuters.ids)}
        order = [row[h.row_id] for h in hits]
        db_scores = np.array([h.score for h in hits])
        # the database's similarities are NumPy's cosines (pgvector sums in float32: ~1e-7)
        for t, s in sims.items():
            np.testing.assert_allclose([h.similarities[t] for h in hits], s[order], atol=SIM_ATOL)
        # the database's score is the NumPy face of the same operators on its similarities
        db_sims = {t: np.array([h.similarities[t] for h in hits]) for t in sims}
        own = evaluate_numpy(tree, db_sims, family, truth)
        np.testing.assert_allclose(db_scores, own, rtol=1e-12, atol=0)
        # and NumPy's score from the stored embeddings, up to the effect of SIM_ATOL
        tol = 1e-6 * np.abs(expected[order]) + sensitivity(tree, db_sims, family, truth)
        assert np.all(np.abs(db_scores - expected[order]) <= tol), query
        # same order up to ties: NumPy's scores in the database's order never increase
        assert np.all(np.diff(expected[order]) <= tol[1:] + tol[:-1]), query
        # ties in the database are broken by id
        for a, b in itertools.pairwise(hits):
            assert a.score > b.score or (a.score == b.score and a.row_id < b.row_id)


SIM_ATOL = 5e-7


def sensitivity(
    tree: Node, sims: dict[str, npt.NDArray[np.float64]], family: OperatorFamily, truth: str
) -> npt.NDArray[np.float64]:
    """How much each score can move when each similarity moves by SIM_ATOL (the reciprocal NOT
    turns a 1e-7 error of a similarity near 0 into a large error of the score)."""
    base = evaluate_numpy(tree, sims, family, truth)
    out = np.zeros_like(base)
    for t in sims:
        for step in (SIM_ATOL, -SIM_ATOL):
            moved = evaluate_numpy(tree, {**sims, t: sims[t] + step}, family, truth)
            out += np.abs(moved - base)
    return out


# -- the other scoring modes: NSFL and SQO, SQL vs NumPy ------------------------------------------


def texts_vectors(real: RealCorpus, minilm: Any, texts: Sequence[str]) -> dict[str, Any]:
    """Vectors of ``texts`` (terms, fused texts, questions), embedding the missing ones."""
    missing = [t for t in texts if t not in real.vectors]
    if missing:
        real.vectors.update(zip(missing, minilm.embed(missing), strict=True))
    return {t: real.vectors[t] for t in texts}


def cosines(real: RealCorpus, vector: npt.ArrayLike) -> npt.NDArray[np.float64]:
    v = np.asarray(vector, dtype=np.float64)
    return real.embeddings @ v / (np.linalg.norm(real.embeddings, axis=1) * np.linalg.norm(v))


NSFL_CASES = [
    SearchOptions(k=N_REAL, mode="nsfl", exact=True),
    SearchOptions(k=N_REAL, mode="nsfl"),  # k = the corpus: every candidate is returned
    SearchOptions(k=N_REAL, mode="nsfl-rerank", rerank_depth=N_REAL),
    SearchOptions(k=N_REAL, mode="nsfl", exact=True, question="grain, oil or banking news"),
]


@db
@model
@pytest.mark.parametrize("opts", NSFL_CASES, ids=["exact", "approx", "rerank", "question"])
def test_nsfl_sql_scores_equal_numpy(
    engine_conn: psycopg.Connection[Any], reuters: RealCorpus, minilm: Any, opts: SearchOptions
) -> None:
    for query in PARITY_QUERIES:
        tree = parse(query)
        compiled = compile_query(tree, reuters.corpus, opts)
        vectors = texts_vectors(reuters, minilm, compiled.terms)
        hits = execute(engine_conn, compiled, vectors)
        row = {int(i): n for n, i in enumerate(reuters.ids)}
        order = [row[h.row_id] for h in hits]
        if opts.exact or opts.mode == "nsfl-rerank":
            assert len(hits) == N_REAL, query  # the pool is the whole corpus
        # every scored text's similarity is NumPy's cosine
        for t in compiled.terms:
            got = [h.similarities[t] for h in hits]
            np.testing.assert_allclose(got, cosines(reuters, vectors[t])[order], atol=SIM_ATOL)
        # the database's score is the NumPy face of NSFL on its similarities over the pool
        # (every returned row: k is the corpus size)
        db_sims = {t: np.array([h.similarities[t] for h in hits]) for t in compiled.terms}
        own = evaluate_nsfl_numpy(tree, db_sims, opts.question)
        np.testing.assert_allclose([h.score for h in hits], own, rtol=1e-12, atol=1e-15)
        if len(hits) == N_REAL:  # and, from the stored embeddings, the same ranking
            full = {t: cosines(reuters, vectors[t]) for t in compiled.terms}
            expected = evaluate_nsfl_numpy(tree, full, opts.question)[order]
            np.testing.assert_allclose([h.score for h in hits], expected, atol=1e-5)
        for a, b in itertools.pairwise(hits):
            assert a.score > b.score or (a.score == b.score and a.row_id < b.row_id)


@db
@model
def test_sqo_sql_scores_equal_numpy(
    engine_conn: psycopg.Connection[Any], reuters: RealCorpus
) -> None:
    for query in PARITY_QUERIES[1:]:
        tree = parse(query)
        exact = compile_query(tree, reuters.corpus, SearchOptions(k=N_REAL, mode="sqo", exact=True))
        vector = exact.guide_vector(reuters.vectors)
        np.testing.assert_array_equal(vector, sqo_vector(tree, reuters.vectors, seed=0))
        hits = execute(engine_conn, exact, dict(reuters.vectors))
        assert len(hits) == N_REAL
        expected = cosines(reuters, vector)
        row = {int(i): n for n, i in enumerate(reuters.ids)}
        np.testing.assert_allclose(
            [h.score for h in hits], expected[[row[h.row_id] for h in hits]], atol=SIM_ATOL
        )
        assert [h.row_id for h in hits][:10] == [
            int(reuters.ids[i]) for i in np.argsort(-expected)[:10]
        ]
        # the approximate scan along the same vector: the same top 10, twice the same
        approx = compile_query(tree, reuters.corpus, SearchOptions(k=10, mode="sqo"))
        first = execute(engine_conn, approx, dict(reuters.vectors))
        assert [h.row_id for h in first] == [h.row_id for h in hits[:10]]
        assert first == execute(engine_conn, approx, dict(reuters.vectors))
        # hybrid: its top K (here the corpus) reranked by the fuzzy formula = fuzzy exact (with
        # the terms as they are: not_context is the fuzzy mode's, pglogic.engine.negation)
        opts = SearchOptions(k=20, mode="sqo-rerank", rerank_depth=N_REAL)
        rerank = execute(engine_conn, compile_query(tree, reuters.corpus, opts), reuters.vectors)
        fuzzy = run_real(
            engine_conn, reuters, query, SearchOptions(k=20, exact=True, not_context=0.0)
        )
        assert [h.row_id for h in rerank] == [h.row_id for h in fuzzy]
        np.testing.assert_allclose([h.score for h in rerank], [h.score for h in fuzzy])


def recall_at_k(
    index_conn: psycopg.Connection[Any],
    conn: psycopg.Connection[Any],
    real: RealCorpus,
    queries: Sequence[str],
    k: int = 10,
) -> list[float]:
    """Recall@k of approximate mode (HNSW, default settings) against exact mode, per query."""
    out = []
    for query in queries:
        opts = SearchOptions(k=k)
        compiled = compile_query(parse(query), real.corpus, opts)
        assert uses_hnsw(index_conn, compiled, compiled.with_vectors(real.vectors)), query
        approx = run_real(index_conn, real, query, opts)
        exact = run_real(conn, real, query, SearchOptions(k=k, exact=True))
        out.append(len({h.row_id for h in approx} & {h.row_id for h in exact}) / len(exact))
    return out


@db
@model
def test_approximate_recall_against_exact(
    engine_conn: psycopg.Connection[Any], index_conn: psycopg.Connection[Any], reuters: RealCorpus
) -> None:
    recalls = recall_at_k(index_conn, engine_conn, reuters, RECALL_QUERIES)
    mean = float(np.mean(recalls))
    print(f"recall@10 approximate vs exact, {N_REAL} Reuters headlines: {mean:.3f}")
    assert mean >= 0.95, dict(zip(RECALL_QUERIES, recalls, strict=True))


@db
@model
def test_filter_on_real_labels(
    engine_conn: psycopg.Connection[Any], index_conn: psycopg.Connection[Any], reuters: RealCorpus
) -> None:
    grain = [Contains({"labels": ["grain"]})]
    hits = run_real(index_conn, reuters, '"wheat" OR "corn"', SearchOptions(k=10, filters=grain))
    assert len(hits) == 10
    assert all("grain" in h.metadata["labels"] for h in hits)
    exact = run_real(
        engine_conn, reuters, '"wheat" OR "corn"', SearchOptions(k=10, filters=grain, exact=True)
    )
    assert [h.row_id for h in hits] == [h.row_id for h in exact]


# -- metadata filters: iterative scans inside the candidate CTEs --------------------------------

N_FILTER_DOCS = 2000


def filter_records() -> list[Record]:
    """95% of the documents lie near A; the 5% with year 1995 and label grain lie far from it."""
    rng = np.random.default_rng(7)
    records = []
    for i in range(N_FILTER_DOCS):
        rare = i % 20 == 7
        base = E[3] if rare else E[0]
        vec = base + 0.15 * rng.normal(size=4)
        meta: dict[str, Any] = {
            "year": 1995 if rare else 1980 + i % 10,
            "labels": ["grain", "wheat"] if rare else ["earn"],
            "site": "cooking" if i % 2 else "robotics",
        }
        records.append(Record(f"d{i:04d}", f"doc {i}", None, meta, tuple(map(float, vec))))
    return records


@pytest.fixture(scope="module")
def filtered(engine_conn: psycopg.Connection[Any]) -> Corpus:
    """2,000 documents, HNSW-indexed, without the metadata GIN index: these tests are about
    filtered HNSW scans, which the planner would skip for the GIN index on a table this small."""
    corpus = create_corpus(engine_conn, "filtered", model="hand", dim=4)
    ingest_records(engine_conn, corpus, filter_records(), embedder=None)
    build_index(engine_conn, "filtered")
    engine_conn.execute(
        sql.SQL("DROP INDEX {}").format(sql.Identifier("pglogic", metadata_index_name(corpus)))
    )
    return corpus


@db
@pytest.mark.parametrize(
    "filters",
    [
        [parse_filter("year>=1990")],
        [parse_filter('{"labels": ["grain"]}')],
        [parse_filter("year=1995"), parse_filter("site=cooking")],
        [Comparison("year", ">", 1994), Contains({"labels": ["wheat"]})],
    ],
    ids=["year>=1990", "contains-grain", "year=1995&site", "objects"],
)
def test_filtered_query_returns_k_matching_rows(
    engine_conn: psycopg.Connection[Any],
    index_conn: psycopg.Connection[Any],
    filtered: Corpus,
    filters: list[Filter],
) -> None:
    k = 10
    opts = SearchOptions(k=k, filters=tuple(filters))
    compiled = compile_query(parse('"A"'), filtered, opts)
    assert compiled.settings["hnsw.iterative_scan"] == "relaxed_order"
    params = compiled.with_vectors(HAND_TERMS)
    assert uses_hnsw(index_conn, compiled, params), "the candidate CTE must use the HNSW index"
    hits = execute(index_conn, compiled, HAND_TERMS)
    assert len(hits) == k
    for h in hits:
        assert h.metadata["year"] == 1995 and "grain" in h.metadata["labels"]
        if any(isinstance(f, Comparison) and f.key == "site" for f in filters):
            assert h.metadata["site"] == "cooking"
    exact = execute(
        engine_conn,
        compile_query(parse('"A"'), filtered, dataclasses.replace(opts, exact=True)),
        HAND_TERMS,
    )
    assert [h.row_id for h in hits] == [h.row_id for h in exact]
    # without iterative scans the index's first ef_search rows are all filtered out
    plain = compile_query(
        parse('"A"'), filtered, SearchOptions(k=k, filters=tuple(filters), iterative_scan=False)
    )
    assert "hnsw.iterative_scan" not in plain.settings
    assert uses_hnsw(index_conn, plain, plain.with_vectors(HAND_TERMS))
    assert len(execute(index_conn, plain, HAND_TERMS)) < k


# -- servers without iterative scans (pgvector < 0.8): over-fetch, then exact -------------------
# pgvector 0.8 with hnsw.iterative_scan off behaves like 0.6/0.7: the index scan stops after
# ef_search tuples and the filter is applied to those.


def hnsw(settings: dict[str, str]) -> dict[str, str]:
    """The hnsw.* settings (every statement also carries plan_cache_mode)."""
    return {k: v for k, v in settings.items() if k.startswith("hnsw.")}


def test_overfetch_sizes_ef_search_from_the_selectivity() -> None:
    half = SearchOptions(k=10, filters=(parse_filter("site=cooking"),))
    corpus = Corpus(1, "c", "corpus_1", "m", 4, "cosine", "embedding", None, None)
    itlr = dataclasses.replace(half, operators="itlr")  # or=sum: term scans + the guide
    new = compile_query(parse('"A" OR "B"'), corpus, itlr)
    # ef_search covers the guide's scan (200 rows); each term's scan takes depth = 142
    assert hnsw(new.settings) == {"hnsw.ef_search": "200", "hnsw.iterative_scan": "relaxed_order"}
    assert new.params["depth"] == 142 and new.params["gdepth"] == 200
    old = compile_query(
        parse('"A" OR "B"'), corpus, itlr, server_has_iterative_scan=False, filter_selectivity=0.5
    )
    assert hnsw(old.settings) == {"hnsw.ef_search": "284"}  # depth 142 / 0.5
    # OR under max: each term's top k at a single-term query's ef_search (100 for k = 10)
    union = compile_query(parse('"A" OR "B"'), corpus, half)
    assert hnsw(union.settings) == {"hnsw.ef_search": "100", "hnsw.iterative_scan": "relaxed_order"}
    assert union.params["depth"] == 10 and "gdepth" not in union.params
    union_old = compile_query(
        parse('"A" OR "B"'), corpus, half, server_has_iterative_scan=False, filter_selectivity=0.5
    )
    single_old = compile_query(
        parse('"A"'), corpus, half, server_has_iterative_scan=False, filter_selectivity=0.5
    )
    assert (
        hnsw(union_old.settings) == hnsw(single_old.settings) == {"hnsw.ef_search": "200"}
    )  # 100 / 0.5
    # AND: the guide's scan alone, 400 rows, so 800 tuples at selectivity 0.5
    both = compile_query(
        parse('"A" AND "B"'), corpus, half, server_has_iterative_scan=False, filter_selectivity=0.5
    )
    assert hnsw(both.settings) == {"hnsw.ef_search": "800"} and both.params["gdepth"] == 400
    rare = compile_query(parse('"A"'), corpus, half, server_has_iterative_scan=False)
    assert hnsw(rare.settings) == {"hnsw.ef_search": "1000"}  # selectivity unknown: the maximum
    given = dataclasses.replace(half, ef_search=64)  # an explicit ef_search is kept
    kept = compile_query(
        parse('"A"'), corpus, given, server_has_iterative_scan=False, filter_selectivity=0.01
    )
    assert hnsw(kept.settings) == {"hnsw.ef_search": "64"}


def test_guide_only_depth_follows_the_filters_selectivity() -> None:
    corpus = Corpus(1, "c", "corpus_1", "m", 4, "cosine", "embedding", None, None)
    tree = parse('"A" AND NOT "B"')
    rare = SearchOptions(k=10, filters=(parse_filter("year=1995"),))
    depths = {
        sel: compile_query(tree, corpus, rare, filter_selectivity=sel).params["gdepth"]
        for sel in (None, 0.5, 0.1, 0.01)
    }
    assert depths == {None: 400, 0.5: 400, 0.1: 100, 0.01: 100}
    ten = compile_query(tree, corpus, rare, filter_selectivity=0.1)
    assert ten.settings["hnsw.ef_search"] == "100"  # sized for the only scan
    # without a filter the selectivity is not consulted; an explicit depth is kept
    assert (
        compile_query(tree, corpus, SearchOptions(), filter_selectivity=0.1).params["gdepth"] == 400
    )
    pinned = dataclasses.replace(rare, depth=300)
    assert compile_query(tree, corpus, pinned, filter_selectivity=0.1).params["gdepth"] == 300


@db
def test_filter_estimate_is_reused_within_its_max_age(engine_conn: psycopg.Connection[Any]) -> None:
    corpus = create_corpus(engine_conn, "estimates", model="hand", dim=4)

    def records(start: int, n: int, year: int) -> list[Record]:
        return [Record(f"e{i}", f"doc {i}", None, {"year": year}, (1.0, 0.0, 0.0, 0.0))
                for i in range(start, start + n)]  # fmt: skip

    ingest_records(engine_conn, corpus, records(0, 10, 1990) + records(10, 90, 2000), embedder=None)
    rare = [parse_filter("year=1990")]
    assert cached_filter_estimate(engine_conn, corpus, rare)[0] == pytest.approx(0.1)
    ingest_records(engine_conn, corpus, records(100, 100, 1990), embedder=None)
    assert cached_filter_estimate(engine_conn, corpus, rare)[0] == pytest.approx(0.1)  # reused
    fresh = cached_filter_estimate(engine_conn, corpus, rare, max_age=0)[0]
    assert fresh == pytest.approx(0.55) == estimate_selectivity(engine_conn, corpus, rare)
    assert cached_filter_estimate(engine_conn, corpus, rare)[0] == pytest.approx(0.55)
    other = [parse_filter("year=2000")]  # another filter: its own estimate
    assert cached_filter_estimate(engine_conn, corpus, other)[0] == pytest.approx(0.45)


@db
def test_selectivity_estimate(engine_conn: psycopg.Connection[Any], filtered: Corpus) -> None:
    assert estimate_selectivity(engine_conn, filtered, []) == 1.0
    assert estimate_selectivity(engine_conn, filtered, [parse_filter("site=cooking")]) == 0.5
    assert estimate_selectivity(engine_conn, filtered, [parse_filter("year=1995")]) == 0.05
    assert estimate_selectivity(engine_conn, filtered, [parse_filter("year>2100")]) > 0


@db
def test_overfetch_returns_k_rows_without_iterative_scans(
    index_conn: psycopg.Connection[Any], filtered: Corpus
) -> None:
    emb = CountingEmbedder(HAND_TERMS)  # type: ignore[arg-type]
    half = (parse_filter("site=cooking"),)  # 50%: over-fetching 2 x depth is enough
    plain = compile_query(
        parse('"A"'), filtered, SearchOptions(k=10, filters=half, ef_search=10),
        server_has_iterative_scan=False,
    )  # fmt: skip
    assert len(execute(index_conn, plain, HAND_TERMS)) < 10  # 10 scanned, about 5 pass
    res = search(
        index_conn, filtered, '"A"', embedder=emb,
        options=SearchOptions(k=10, filters=half, iterative_scan=False, depth=100),
    )  # fmt: skip
    assert hnsw(res.compiled.settings) == {"hnsw.ef_search": "200"}  # depth 100 / 0.5
    assert "database_approximate" not in res.timings
    exact = run_hand(index_conn, filtered, '"A"', k=10, filters=list(half), exact=True)
    assert [h.row_id for h in res.hits] == [h.row_id for h in exact]
    # 5%, far from A: even 1000 over-fetched rows hold no match, so it falls back to exact
    rare = (parse_filter("year=1995"),)
    res = search(
        index_conn, filtered, '"A" AND NOT "B"', embedder=emb,
        options=SearchOptions(k=10, filters=rare, iterative_scan=False, depth=100),
    )  # fmt: skip
    assert "database_approximate" in res.timings
    exact = run_hand(
        index_conn,
        filtered,
        '"A" AND NOT "B"',
        k=10,
        filters=list(rare),
        exact=True,
        family=DEFAULT_FAMILY,
    )
    assert len(res.hits) == 10
    assert [h.row_id for h in res.hits] == [h.row_id for h in exact]


@db
def test_selective_filters_score_the_matching_rows(
    index_conn: psycopg.Connection[Any], filtered: Corpus
) -> None:
    """Few matching rows (here 100 of 2,000): an exact scan of them, not filtered HNSW scans."""
    emb = CountingEmbedder(HAND_TERMS)  # type: ignore[arg-type]
    rare = (parse_filter("year=1995"),)
    res = search(index_conn, filtered, '"A" AND NOT "B"', embedder=emb,
                 options=SearchOptions(k=10, filters=rare))  # fmt: skip
    assert res.compiled.candidate_terms == [] and "hnsw.ef_search" not in res.compiled.settings
    exact = run_hand(
        index_conn,
        filtered,
        '"A" AND NOT "B"',
        k=10,
        filters=list(rare),
        exact=True,
        family=DEFAULT_FAMILY,
    )
    assert [h.row_id for h in res.hits] == [h.row_id for h in exact]
    # an explicit depth keeps the index path
    res = search(index_conn, filtered, '"A" AND NOT "B"', embedder=emb,
                 options=SearchOptions(k=10, filters=rare, depth=100))  # fmt: skip
    assert res.compiled.guide_param is not None and "hnsw.ef_search" in res.compiled.settings
    assert [h.row_id for h in res.hits] == [h.row_id for h in exact]


@db
def test_numeric_comparisons(engine_conn: psycopg.Connection[Any], filtered: Corpus) -> None:
    cases = {
        "year>=1995": lambda y: y >= 1995,
        "year<1983": lambda y: y < 1983,
        "year!=1995": lambda y: y != 1995,
        "year=1984": lambda y: y == 1984,
        "year>1988": lambda y: y > 1988,
        "year<=1981": lambda y: y <= 1981,
    }
    for text, pred in cases.items():
        hits = run_hand(
            engine_conn, filtered, '"A" AND NOT "B"', k=25, filters=[parse_filter(text)]
        )
        assert len(hits) == 25, text
        assert all(pred(h.metadata["year"]) for h in hits), text


@db
def test_filter_matching_nothing_returns_no_rows(
    engine_conn: psycopg.Connection[Any], filtered: Corpus
) -> None:
    for f in [parse_filter("year>2100"), parse_filter('{"labels": ["nope"]}'), parse_filter("x=1")]:
        assert run_hand(engine_conn, filtered, '"A"', k=5, filters=[f]) == []
        assert run_hand(engine_conn, filtered, '"A"', k=5, filters=[f], exact=True) == []


def test_invalid_filter_operator_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"Invalid filter: \"op\" is one of"):
        compile_query(
            parse('"a"'), GOLDEN_CORPUS, SearchOptions(filters=(Comparison("y", "; DROP", 1),))
        )


def test_filter_semantics(engine_conn: psycopg.Connection[Any]) -> None:
    """Typed comparisons (a numeric string compares as a number), != keeps documents without
    the key, = matches a value inside an array; old code compared across jsonb types."""
    corpus = create_corpus(engine_conn, "typed", model="hand", dim=4)
    metas: dict[str, dict[str, Any]] = {
        "num": {"year": 1995},
        "numstr": {"year": "1995"},
        "old": {"year": 1980},
        "word": {"year": "nineteen"},
        "nokey": {},
        "arr": {"labels": ["grain", "wheat"]},
        "scalar": {"labels": "grain"},
        "other": {"labels": "corn"},
    }
    records = [
        Record(name, name, None, meta, vector=tuple(map(float, E[0] + 0.01 * i)))
        for i, (name, meta) in enumerate(metas.items())
    ]
    ingest_records(engine_conn, corpus, records, embedder=None)
    cases = {
        "year>=1990": {"num", "numstr"},
        "year<1990": {"old"},
        "year=1995": {"num", "numstr"},
        "year!=1995": set(metas) - {"num", "numstr"},
        'year>="m"': {"word"},
        "labels=grain": {"arr", "scalar"},
        "labels!=grain": set(metas) - {"arr", "scalar"},
    }
    for text, want in cases.items():
        for exact in (False, True):
            hits = run_hand(engine_conn, corpus, '"A"', k=20, exact=exact,
                            filters=[parse_filter(text)])  # fmt: skip
            assert {h.external_id for h in hits} == want, (text, exact)
    for bad in ("year>=true", "year<[1]", "year>null"):
        with pytest.raises(InvalidInput, match="only numbers and strings can be compared"):
            run_hand(engine_conn, corpus, '"A"', filters=[parse_filter(bad)])


@pytest.fixture(scope="module")
def holes(engine_conn: psycopg.Connection[Any]) -> Corpus:
    """The hand documents plus two rows without an embedding and one zero vector (written
    directly: ingest refuses zero vectors, but a model switch's new column starts NULL and an
    application's own table may hold anything)."""
    corpus = create_corpus(engine_conn, "holes", model="hand", dim=4)
    ingest_records(engine_conn, corpus, hand_records(), embedder=None)
    insert = sql.SQL(
        "INSERT INTO {} (external_id, text, text_hash, row_hash, embedding)"
        " VALUES (%s, 'x', '\\x00', '\\x00', %s)"
    ).format(corpus.table)
    for ext, vec in (("null1", None), ("null2", None), ("zero", "[0,0,0,0]")):
        engine_conn.execute(insert, (ext, vec))
    return corpus


@db
@pytest.mark.parametrize("query", ['"A"', '"A" AND "B"', '"A" OR "B"', '"A" AND NOT "C"',
                                   '"A" OR ("B" AND "C")'])  # fmt: skip
@pytest.mark.parametrize("exact", [False, True])
def test_null_and_zero_vectors_are_never_ranked_first(
    engine_conn: psycopg.Connection[Any], holes: Corpus, query: str, exact: bool
) -> None:
    """No HNSW index here, so the candidate scans read the whole table: NULL embeddings used to
    enter (score NULL sorts first under DESC: float(None) raised) and a zero vector (cosine NaN)
    scored 1.0, fully true for every term."""
    hits = run_hand(engine_conn, holes, query, family="product-max", k=20, exact=exact)
    ids = [h.external_id for h in hits]
    assert "null1" not in ids and "null2" not in ids
    assert all(np.isfinite(h.score) for h in hits)
    by_id = {h.external_id: h for h in hits}
    if "zero" in by_id:
        assert all(v == 0.0 for v in by_id["zero"].similarities.values())
        assert ids.index("zero") > ids.index("abc")
    assert evaluate_numpy(parse('"a"'), {"a": [float("nan")]})[0] == 0.0


# -- SQL injection: terms and filters are data ---------------------------------------------------

NASTY_TERMS = [
    "it's",
    'say "hi"',
    "a; SELECT 1",
    "$$ LANGUAGE sql $$",
    "back\\slash \\' \\n",
    "x -- comment",
    "DROP TABLE pglogic.corpora;",
    "'); DROP TABLE pglogic.corpora; --",
    '" OR 1=1 --',
    "SELECT * FROM pglogic.corpora",
    "%(k)s %s {} {0} %%",
    "AND",
    "NOT OR (",
]
NASTY_KEY = "k'; DROP TABLE pglogic.corpora; --"
NASTY_VALUE = "$$'; DELETE FROM pglogic.corpora; --\\"


def table_counts(conn: psycopg.Connection[Any], corpus: Corpus) -> tuple[int, int]:
    corpora = conn.execute("SELECT count(*) FROM pglogic.corpora").fetchone()
    docs = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(corpus.table)).fetchone()
    assert corpora is not None and docs is not None
    conn.commit()
    return int(corpora[0]), int(docs[0])


@pytest.fixture
def nasty(conn: psycopg.Connection[Any]) -> Corpus:
    corpus = create_corpus(conn, "nasty", model="hand", dim=4)
    records = hand_records()
    records.append(
        Record(
            "evil'; DROP TABLE x; --",
            "$$ text with 'quotes' and \"double\" ones; DROP TABLE pglogic.corpora; --",
            "title'); DELETE FROM pglogic.corpora; --",
            {NASTY_KEY: NASTY_VALUE, 'a"b': ["x'); DROP TABLE y; --"], "year": 2001},
            vector=(0.5, 0.5, 0.5, 0.5),
        )
    )
    ingest_records(conn, corpus, records, embedder=None)
    build_index(conn, "nasty")
    return corpus


@db
def test_terms_are_data_not_sql(conn: psycopg.Connection[Any], nasty: Corpus) -> None:
    before = table_counts(conn, nasty)
    query = " OR ".join(quote_term(t) for t in NASTY_TERMS)
    assert terms(parse(query)) == NASTY_TERMS
    embedder = CountingEmbedder()
    for exact in (False, True):
        result = search(
            conn, nasty, query, embedder=embedder, options=SearchOptions(k=20, exact=exact)
        )
        conn.commit()
        # (the one quoted constant of the statement is the engine's own: NaN, see _similarity)
        text = result.compiled.as_string().replace("nullif(", "").replace(", 'NaN')", "")
        for bad in ("'", "$", ";", "--", "\\", "DROP", "SELECT 1", "%s", "{"):
            assert bad not in text  # term texts never reach the SQL text
        assert len(result.hits) == len(HAND_DOCS) + 1
        for h in result.hits:
            assert list(h.similarities) == NASTY_TERMS
    doc = {
        row[0]: row[1].to_numpy()
        for row in conn.execute(
            sql.SQL("SELECT external_id, embedding FROM {}").format(nasty.table)
        ).fetchall()
    }
    for h in result.hits:
        for t, s in h.similarities.items():
            v = doc[h.external_id]
            np.testing.assert_allclose(s, v @ embedder.vector(t) / np.linalg.norm(v), atol=1e-6)
    evil = next(h for h in result.hits if h.external_id.startswith("evil"))
    assert evil.external_id == "evil'; DROP TABLE x; --"
    assert evil.title == "title'); DELETE FROM pglogic.corpora; --"
    assert evil.metadata[NASTY_KEY] == NASTY_VALUE
    assert table_counts(conn, nasty) == before


@db
def test_escaped_and_plain_queries_keep_their_text(
    conn: psycopg.Connection[Any], nasty: Corpus
) -> None:
    before = table_counts(conn, nasty)
    query = (
        '\'it\\\'s\' AND NOT "say \\"hi\\"" OR "back\\\\slash" OR \'DROP TABLE pglogic.corpora;\''
    )
    expected = ["it's", 'say "hi"', "back\\slash", "DROP TABLE pglogic.corpora;"]
    result = search(conn, nasty, query, embedder=CountingEmbedder())
    assert result.compiled.terms == expected
    assert all(list(h.similarities) == expected for h in result.hits)
    plain = "DROP TABLE pglogic.corpora; -- $$ \\ %s {}"  # no quote: one plain term
    result = search(conn, nasty, plain, embedder=CountingEmbedder())
    assert all(list(h.similarities) == [plain] for h in result.hits)
    conn.commit()
    assert table_counts(conn, nasty) == before


@db
def test_filter_keys_and_values_are_data(conn: psycopg.Connection[Any], nasty: Corpus) -> None:
    before = table_counts(conn, nasty)
    evil = "evil'; DROP TABLE x; --"
    cases: list[tuple[list[Filter], list[str]]] = [
        ([Comparison(NASTY_KEY, "=", NASTY_VALUE)], [evil]),
        ([Contains({'a"b': ["x'); DROP TABLE y; --"]})], [evil]),
        ([Contains({NASTY_KEY: NASTY_VALUE}), parse_filter("year>=2000")], [evil]),
        ([parse_filter("title='; DROP TABLE pglogic.corpora; --")], []),
        ([parse_filter("year=1' OR '1'='1")], []),
        ([parse_filter('{"x\'; DROP TABLE pglogic.corpora; --": "$$"}')], []),
        ([Comparison("n') OR TRUE; --", ">=", 0)], []),
    ]
    for filters, expected in cases:
        for exact in (False, True):
            hits = run_hand(conn, nasty, '"A" OR "C"', k=20, filters=filters, exact=exact)
            conn.commit()
            assert [h.external_id for h in hits] == expected, filters
    assert table_counts(conn, nasty) == before
    row = conn.execute("SELECT to_regclass('pglogic.corpora') IS NOT NULL").fetchone()
    assert row == (True,)


# -- settings are local to the statement's transaction ------------------------------------------


@db
def test_settings_do_not_outlive_execute(index_conn: psycopg.Connection[Any], hand: Corpus) -> None:
    index_conn.execute("SELECT '[1]'::vector")  # load pgvector so its settings exist
    default = index_conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone()
    compiled = compile_query(
        parse('"A"'), hand, SearchOptions(ef_search=77, filters=(parse_filter("n>=0"),))
    )
    assert hnsw(compiled.settings) == {
        "hnsw.ef_search": "77",
        "hnsw.iterative_scan": "relaxed_order",
    }
    assert execute(index_conn, compiled, HAND_TERMS)
    assert index_conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone() == default
    row = index_conn.execute("SELECT current_setting('hnsw.iterative_scan')").fetchone()
    assert row == ("off",)


@db
def test_settings_do_not_outlive_execute_inside_a_transaction(
    conn: psycopg.Connection[Any],
) -> None:
    corpus = create_corpus(conn, "hand", model="hand", dim=4)
    ingest_records(conn, corpus, hand_records(), embedder=None)
    default = conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone()
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    compiled = compile_query(
        parse('"A"'), corpus, SearchOptions(ef_search=77, filters=(parse_filter("n>=0"),))
    )
    assert execute(conn, compiled, HAND_TERMS)
    assert conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone() == default
    row = conn.execute("SELECT current_setting('hnsw.iterative_scan')").fetchone()
    assert row == ("off",)


# -- doctests of the engine modules --------------------------------------------------------------


def test_search_and_filters_doctests() -> None:
    import pglogic.engine.filters
    import pglogic.store.search

    for module in (pglogic.store.search, pglogic.engine.filters):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_compile_doctests() -> None:
    import pglogic.engine.compile

    result = doctest.testmod(pglogic.engine.compile)
    assert result.failed == 0 and result.attempted > 0


# -- CLI --------------------------------------------------------------------------------------------

CLI_ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


EXPLAIN_QUERY = '"oil prices" AND NOT "natural gas"'
JSON_QUERY = '("wheat" OR "corn") AND NOT "soviet union"'


@pytest.fixture(scope="module")
def cli_searches(engine_dsn: str, reuters: RealCorpus) -> dict[str, Any]:
    """Run the ``pglogic search`` commands once, in this process (the model loads once)."""
    from tests.conftest import cli_in_process

    base = ("--dsn", engine_dsn, "search", "reuters")
    commands = {
        "explain": (*base, EXPLAIN_QUERY, "--explain", "-k", "5"),
        "json": (*base, JSON_QUERY, "--json", "-k", "4"),
        "nsfl": (*base, EXPLAIN_QUERY, "--mode", "nsfl-rerank", "--json", "-k", "5"),
        "sqo": (*base, JSON_QUERY, "--mode", "sqo", "--seed", "3", "--json", "-k", "5"),
    }
    return {name: cli_in_process(*args, env=CLI_ENV) for name, args in commands.items()}


@db
@model
def test_cli_search_explain_shows_one_column_per_term(cli_searches: dict[str, Any]) -> None:
    proc = cli_searches["explain"]
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].strip() == EXPLAIN_QUERY  # the table title
    header = next(line for line in lines if "score" in line and "title" in line)
    cells = [c.strip() for c in header.strip("┃ ").split("┃")]
    assert cells == ["#", "score", "id", "title", "oil prices", "natural gas"]
    rows = [line for line in lines if re.match(r"^│\s*\d+\s*│", line)]
    assert len(rows) == 5
    scores = []
    for row in rows:
        cells = [c.strip() for c in row.strip("│ ").split("│")]
        assert len(cells) == 6
        assert all(re.fullmatch(r"-?\d\.\d{3}", c) for c in cells[4:])  # one per term
        scores.append(float(cells[1]))
    assert scores == sorted(scores, reverse=True)


@db
@model
def test_cli_search_json_lines(
    cli_searches: dict[str, Any], engine_dsn: str, reuters: RealCorpus, minilm: Any
) -> None:
    proc = cli_searches["json"]
    assert proc.returncode == 0, proc.stderr
    hits = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(hits) == 4
    tree = parse(JSON_QUERY)
    for h in hits:
        assert set(h) == {"id", "title", "score", "similarities"}
        assert list(h["similarities"]) == ["wheat", "corn", "soviet union"]
        expected = evaluate_numpy(tree, {t: [s] for t, s in h["similarities"].items()})
        assert h["score"] == pytest.approx(float(expected[0]), rel=1e-12)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    with connect(engine_dsn) as c:
        lib = search(c, reuters.corpus, JSON_QUERY, embedder=minilm, options=SearchOptions(k=4))
    assert [h["id"] for h in hits] == [h.external_id for h in lib.hits]


@db
@model
def test_cli_search_modes(
    cli_searches: dict[str, Any], engine_dsn: str, reuters: RealCorpus, minilm: Any
) -> None:
    for name, query, opts in [
        ("nsfl", EXPLAIN_QUERY, SearchOptions(k=5, mode="nsfl-rerank")),
        ("sqo", JSON_QUERY, SearchOptions(k=5, mode="sqo", seed=3)),
    ]:
        proc = cli_searches[name]
        assert proc.returncode == 0, proc.stderr
        hits = [json.loads(line) for line in proc.stdout.splitlines()]
        with connect(engine_dsn) as c:
            lib = search(c, reuters.corpus, query, embedder=minilm, options=opts)
        assert [h["id"] for h in hits] == [h.external_id for h in lib.hits]
        assert [h["score"] for h in hits] == pytest.approx([h.score for h in lib.hits])
    nsfl = json.loads(cli_searches["nsfl"].stdout.splitlines()[0])
    # NSFL also scores the fused text (here also the question)
    assert list(nsfl["similarities"]) == [
        "oil prices",
        "natural gas",
        "oil prices but not natural gas",
    ]


def test_cli_compile_modes() -> None:
    from tests.conftest import cli_in_process

    proc = cli_in_process("compile", '"a" AND NOT "b"', "--mode", "sqo", env=CLI_ENV)
    assert proc.returncode == 0, proc.stderr
    params = json.loads(proc.stdout.splitlines()[-1].removeprefix("-- parameters: "))
    assert params["vg"] == "<SQO vector: pglogic.engine.sqo.sqo_vector of the term embeddings>"
    nsfl = cli_in_process(
        "compile", '"a" OR "b"', "--mode", "nsfl", "--question", "a or b?", env=CLI_ENV
    )
    assert nsfl.returncode == 0, nsfl.stderr
    params = json.loads(nsfl.stdout.splitlines()[-1].removeprefix("-- parameters: "))
    assert params["v2"] == "<embedding of 'a or b'>" and params["v3"] == "<embedding of 'a or b?'>"
    assert "max(" not in nsfl.stdout and "GREATEST(" in nsfl.stdout
    bad = cli_in_process("compile", '"a" OR "b"', "--mode", "fast", env=CLI_ENV)
    assert bad.returncode == 2 and "'fast' is not one of" in bad.stderr


def test_cli_compile_prints_settings_and_statement() -> None:
    from tests.conftest import cli_in_process

    proc = cli_in_process("compile", '"a" AND NOT "b"', env=CLI_ENV)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "SET LOCAL hnsw.ef_search = 400;"  # the guide's scan takes 400 rows
    assert lines[1] == "SET LOCAL plan_cache_mode = force_custom_plan;"  # never a generic plan
    assert lines[2].startswith('WITH "g" AS MATERIALIZED (SELECT ')
    assert '"pglogic"."corpus_0"' in lines[2]
    assert proc.stdout.count("MATERIALIZED") == 1  # the guide's scan alone suffices for AND NOT
    assert 'ORDER BY score DESC, "id" LIMIT %(k)s) top' in proc.stdout  # top k, then columns
    assert lines[-2] == 'ORDER BY top.score DESC, top."id";'
    params = json.loads(lines[-1].removeprefix("-- parameters: "))
    assert params == {
        "k": 10,
        "gdepth": 400,
        "v0": "<embedding of 'a'>",
        "v1": "<embedding of 'b' without 0.5 of the span of 'a': pglogic.engine.negation.projected>",
        "vg": "<guide vector: pglogic.engine.guide.guide_vector of the term embeddings>",
        # the negated term's text, for its mention floor (not_mention, the corpus's lexical index)
        "lcfg": "english",
        "t1": "b",
    }
    assert 'phraseto_tsquery(%(lcfg)s::regconfig, %(t1)s) THEN 0.4 END) AS "s1"' in (proc.stdout)
    plain = cli_in_process("compile", '"a" AND NOT "b"', "--not-mention", "0", env=CLI_ENV)
    assert (
        plain.returncode == 0 and "t1" not in plain.stdout and "THEN 0.4 END)" not in plain.stdout
    )
    unguided = cli_in_process("compile", '"a" AND NOT "b"', "--no-guide", env=CLI_ENV)
    assert unguided.returncode == 0, unguided.stderr
    assert unguided.stdout.splitlines()[0] == "SET LOCAL hnsw.ef_search = 100;"
    assert unguided.stdout.count("MATERIALIZED") == 1 and "vg" not in unguided.stdout
    both = cli_in_process("compile", '"a" AND NOT "b"', "--term-scans", env=CLI_ENV)
    assert both.returncode == 0, both.stderr
    assert both.stdout.splitlines()[0] == "SET LOCAL hnsw.ef_search = 200;"
    assert both.stdout.count("MATERIALIZED") == 2  # the term's scan and the guide's
    terms_only = cli_in_process("compile", '"a" OR "b"', "--no-term-scans", env=CLI_ENV)
    assert terms_only.returncode == 0 and terms_only.stdout.count("MATERIALIZED") == 1
    exact = cli_in_process("compile", 'NOT "a"', "--exact", "--where", "year>=1990", env=CLI_ENV)
    assert exact.returncode == 0, exact.stderr
    assert "SET LOCAL hnsw" not in exact.stdout and "MATERIALIZED" not in exact.stdout
    assert '"f0": 1990' in exact.stdout


def test_cli_syntax_error_prints_caret_and_exits_2() -> None:
    from tests.conftest import cli_in_process

    proc = cli_in_process("compile", '"a" AND ("b"', env=CLI_ENV)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == 'Error: Expected ) to close ( at col 9\n  "a" AND ("b"\n          ^\n'
    refused = cli_in_process("compile", 'NOT "a" AND NOT "b"', env=CLI_ENV)
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    assert " ".join(refused.stderr.split()) == f"Error: {NEGATED_ONLY_MESSAGE}"


def test_cli_errors_are_not_wrapped() -> None:
    from tests.conftest import cli_in_process

    query = '"a long term number one" AND "another fairly long term" OR "third term" AND ("oops"'
    proc = cli_in_process("compile", query, env={"NO_COLOR": "1"})
    col = query.index("(") + 1
    assert proc.stderr == (
        f"Error: Expected ) to close ( at col {col}\n  {query}\n  {' ' * (col - 1)}^\n"
    )
    refused = cli_in_process("compile", 'NOT "a"', env={"NO_COLOR": "1"})
    assert refused.stderr == f"Error: {NEGATED_ONLY_MESSAGE}\n"


def test_cli_table_prints_terms_and_titles_verbatim(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    import pglogic.cli.ui
    from pglogic.store.search import SearchResult

    out = io.StringIO()
    monkeypatch.setattr(pglogic.cli.ui, "console", Console(file=out, width=200, no_color=True))
    tree = parse('"[b]x" OR "a[/]b"')
    compiled = compile_query(tree, GOLDEN_CORPUS)
    hit = Hit(1, "id[/i]", "[red]title", 0.5, {"[b]x": 0.25, "a[/]b": 0.25})
    pglogic.cli.ui.print_hits(SearchResult(tree, compiled, [hit]), explain=True)
    text = out.getvalue()
    for s in ('"[b]x" OR "a[/]b"', "[b]x", "a[/]b", "id[/i]", "[red]title"):
        assert s in text


def test_timeout_becomes_a_local_statement_timeout() -> None:
    compiled = compile_query(parse('"a" AND "b"'), GOLDEN_CORPUS, SearchOptions(timeout=2.5))
    assert compiled.settings["statement_timeout"] == "2500"
    assert "statement_timeout" not in compile_query(parse('"a"'), GOLDEN_CORPUS).settings
    for bad in (0, -1, float("nan"), 1e12):
        with pytest.raises(InvalidInput, match="Invalid timeout"):
            compile_query(parse('"a"'), GOLDEN_CORPUS, SearchOptions(timeout=bad))


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (SearchOptions(k=2.5), "Invalid k=2.5: expected an integer"),  # (was rounded, or not)
        (SearchOptions(k=True), "Invalid k=True: expected an integer"),
        (SearchOptions(k="5"), "Invalid k='5': expected an integer"),  # type: ignore[arg-type]
        (SearchOptions(k=None), "Invalid k=None: expected an integer"),  # type: ignore[arg-type]
        (SearchOptions(k=2**64, exact=True),  # (bigint out of range from the server before)
         "Invalid k=18446744073709551616: at most 2,147,483,647"),
        (SearchOptions(depth=20.0), "Invalid depth=20.0: expected an integer"),  # type: ignore[arg-type]
        (SearchOptions(ef_search="40"), "Invalid ef_search='40': expected an integer"),  # type: ignore[arg-type]
        (SearchOptions(operators=None),  # type: ignore[arg-type]
         "Invalid operators=None: a preset name (e.g. 'product-max-strong'), a spec like "
         "'and=min,or=max,not=complement' or an OperatorFamily"),
        (SearchOptions(filters=("places=usa",)),  # type: ignore[arg-type]
         "Invalid filter 'places=usa': expected a parsed filter, e.g. "
         "pglogic.engine.filters.parse_filters('places=usa')"),
        (SearchOptions(filters=({"places": ["usa"]},)),  # type: ignore[arg-type]
         "Invalid filter {'places': ['usa']}: expected a parsed filter, e.g. "
         "pglogic.engine.filters.parse_filters('places=usa')"),
    ],
)  # fmt: skip
def test_options_of_the_wrong_type_are_refused_in_words(opts: SearchOptions, message: str) -> None:
    """Not an AttributeError or a TypeError from deep inside, nor a k rounded one way here and
    another there; a NumPy integer is an integer."""
    with pytest.raises(InvalidInput) as info:
        compile_query(parse('"a" AND "b"'), GOLDEN_CORPUS, opts)
    assert str(info.value) == message
    fine = SearchOptions(k=np.int64(5), depth=np.int32(50))  # type: ignore[arg-type]
    assert compile_query(parse('"a" AND "b"'), GOLDEN_CORPUS, fine).terms == ["a", "b", "a and b"]


@pytest.mark.parametrize("query", [None, 5, ["a"]])
def test_a_query_that_is_neither_text_nor_a_tree_is_refused(query: Any) -> None:
    with pytest.raises(QueryError) as info:
        compile_query(to_tree(query), GOLDEN_CORPUS)
    assert str(info.value) == f"Invalid query {query!r}: expected a string or a query tree"


# -- the AND's own text ----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-1, MAX_AND_TEXT + 1, True, 1.5])
def test_and_text_out_of_range_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput, match=r"Invalid and_text=.*a whole number from 0 to 10"):
        compile_query(parse('"a" AND "b"'), GOLDEN_CORPUS, SearchOptions(and_text=bad))


def test_and_text_adds_one_scored_text_per_phrase_and_no_scan() -> None:
    tree = parse('"a" AND "b" AND NOT "c" OR "d"')
    plain = compile_query(tree, GOLDEN_CORPUS, SearchOptions(and_text=0))
    fused = compile_query(tree, GOLDEN_CORPUS, SearchOptions(and_text=3))
    assert plain.terms == ["a", "b", "c", "d"]
    assert fused.terms == ["a", "b", "c", "d", "a and b"]
    assert fused.candidate_terms == plain.candidate_terms  # the phrase is never scanned
    text = fused.as_string()
    assert text.count("AS MATERIALIZED") == plain.as_string().count("AS MATERIALIZED")
    # beside a NOT the phrase's truth joins its AND once; the single term and the OR get none
    assert text.count('GREATEST(0.0, LEAST(1.0, "s4"))') == 1
    # in a plain conjunction, and_text times
    pure = compile_query(parse('("a" AND "b") OR "d"'), GOLDEN_CORPUS, SearchOptions(and_text=3))
    assert pure.terms == ["a", "b", "d", "a and b"]
    assert pure.as_string().count('GREATEST(0.0, LEAST(1.0, "s3"))') == 3
    single = compile_query(parse('"a"'), GOLDEN_CORPUS, SearchOptions(and_text=3))
    assert single.terms == ["a"]
    nsfl = compile_query(tree, GOLDEN_CORPUS, SearchOptions(and_text=3, mode="sqo"))
    assert nsfl.terms == ["a", "b", "c", "d"]  # the other modes score the formula alone


def test_a_phrase_equal_to_a_term_shares_its_column_and_the_cache_keeps_them_apart() -> None:
    same = parse('"x and y" OR "x" AND "y"')  # the AND's phrase is the first term
    other = parse('"p and q" OR "r" AND "s"')  # same shape, the phrase is new
    a = compile_query(same, GOLDEN_CORPUS, SearchOptions(and_text=1))
    b = compile_query(other, GOLDEN_CORPUS, SearchOptions(and_text=1))
    assert a.terms == ["x and y", "x", "y"]
    assert b.terms == ["p and q", "r", "s", "r and s"]
    assert a.as_string() != b.as_string()
    sims = {"x and y": np.array([0.9, 0.1]), "x": np.array([0.5, 0.5]), "y": np.array([0.4, 0.6])}
    got = evaluate_numpy(with_and_texts(same, 1), sims)
    want = np.maximum(sims["x and y"], sims["x"] * sims["y"] * sims["x and y"])
    np.testing.assert_allclose(got, want)
