"""The evaluation harness: baselines on hand-built vectors, and ``pglogic eval`` end to end on
LIMIT-small with the real model and a real Postgres."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pglogic.engine.source import Corpus
from pglogic.eval.baselines import QUERY_VECTOR, compile_decomposed, geometric_vector, single_vector
from pglogic.query import And, Node, Not, Or, Term, parse, terms
from pglogic.store.corpus import build_index, create_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import execute
from tests.conftest import cli_in_process

# -- geometric baseline (pure) -----------------------------------------------------------------

V = {
    "a": np.array([1.0, 0.0, 0.0]),
    "b": np.array([0.6, 0.8, 0.0]),
    "c": np.array([0.0, 0.0, 1.0]),
}


def test_geometric_and_is_the_normalised_sum() -> None:
    q = geometric_vector(parse('"a" AND "c"'), V)
    assert np.allclose(q, np.array([1, 0, 1]) / np.sqrt(2), atol=1e-6)


def test_geometric_not_projects_out_the_negated_vector() -> None:
    q = geometric_vector(parse('"a" AND NOT "b"'), V)
    assert abs(float(q @ V["b"])) < 1e-6
    assert float(np.linalg.norm(q)) == pytest.approx(1.0)
    assert float(q @ V["a"]) > 0


def test_geometric_or_and_lone_not() -> None:
    q = geometric_vector(parse('"a" OR "c"'), V)
    assert np.allclose(q, np.array([1, 0, 1]) / np.sqrt(2), atol=1e-6)
    assert np.allclose(geometric_vector(parse('NOT "c"'), V), -V["c"])


def test_geometric_dependent_negations_still_project() -> None:
    v = {"a": np.array([1.0, 1.0, 0.0]), "b": np.array([0.0, 1.0, 0.0])}
    q = geometric_vector(parse('"a" AND NOT "b" AND NOT "c"'), {**v, "c": v["b"]})
    np.testing.assert_allclose(q, [1.0, 0.0, 0.0], atol=1e-6)


def test_geometric_not_of_the_same_direction_keeps_the_sum() -> None:
    q = geometric_vector(parse('"a" AND NOT "a2"'), {**V, "a2": V["a"] * 2})
    assert np.allclose(q, V["a"])


# -- decomposed baseline on hand vectors (SQL vs a Python reference) --------------------------

RNG = np.random.default_rng(7)
DOCS = {f"d{i:02d}": RNG.normal(size=4) for i in range(24)}
TERMS = {t: RNG.normal(size=4) for t in ("x", "y", "z")}


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def decomposed_reference(tree: Node, k: int) -> list[str]:
    """BoolQuestions' decomposed query over exact top-2k lists, in plain Python."""
    sims = {t: {d: _cos(v, TERMS[t]) for d, v in DOCS.items()} for t in terms(tree)}
    lists = {t: set(sorted(s, key=lambda d: -s[d])[: 2 * k]) for t, s in sims.items()}

    def member(node: Node, d: str) -> bool:
        if isinstance(node, Term):
            return d in lists[node.text]
        if isinstance(node, Not):
            return not member(node.child, d)
        if isinstance(node, And):
            return all(member(c, d) for c in node.children)
        assert isinstance(node, Or)
        return any(member(c, d) for c in node.children)

    def score(node: Node, d: str) -> float:
        if isinstance(node, Term):
            return sims[node.text][d]
        if isinstance(node, Not):
            return -score(node.child, d)
        if isinstance(node, And):
            return sum(score(c, d) for c in node.children)
        assert isinstance(node, Or)
        return max(score(c, d) for c in node.children)

    universe = set().union(*lists.values())
    kept = [d for d in universe if member(tree, d)]
    return sorted(kept, key=lambda d: (-score(tree, d), d))[:k]


@pytest.fixture(scope="module")
def hand_corpus(pg_server: Any) -> Iterator[tuple[psycopg.Connection[Any], Corpus]]:
    from tests.conftest import TEMPLATE_DB

    name = f"t_eval_{uuid.uuid4().hex[:10]}"
    janitor = pg_server.janitor(name, TEMPLATE_DB)
    janitor.init()
    try:
        dsn = make_conninfo(pg_server.dsn_for(name), options="-c enable_seqscan=off")
        with connect(dsn, autocommit=True) as conn:
            corpus = create_corpus(conn, "hand", model="hand", dim=4)
            records = [
                Record(d, f"doc {d}", None, {}, vector=tuple(map(float, v)))
                for d, v in DOCS.items()
            ]
            ingest_records(conn, corpus, records, embedder=None)
            build_index(conn, "hand")
            yield conn, corpus
    finally:
        janitor.drop()


@pytest.mark.db
@pytest.mark.parametrize(
    "query",
    [
        '"x" AND "y"',
        '"x" AND NOT "y"',
        '"x" OR "y" AND NOT "z"',
        '("x" OR "y") AND NOT "z"',
        '"x" OR NOT "y"',
        'NOT "x" OR "y" AND "z"',
        '"x"',
    ],
)
def test_decomposed_matches_the_reference(
    hand_corpus: tuple[psycopg.Connection[Any], Corpus], query: str
) -> None:
    conn, corpus = hand_corpus
    tree = parse(query)
    compiled = compile_decomposed(tree, corpus, 3)  # lists of 6 of the 24 documents
    hits = execute(conn, compiled, {t: TERMS[t].astype(np.float32) for t in terms(tree)})
    assert [h.external_id for h in hits] == decomposed_reference(tree, 3)
    for h in hits:  # per-term similarities are exact
        for t, s in h.similarities.items():
            assert s == pytest.approx(_cos(DOCS[h.external_id], TERMS[t]), abs=1e-5)


@pytest.mark.db
def test_decomposed_with_only_negated_terms_returns_nothing(
    hand_corpus: tuple[psycopg.Connection[Any], Corpus],
) -> None:
    conn, corpus = hand_corpus
    tree = parse('NOT "x"')
    assert execute(conn, compile_decomposed(tree, corpus, 3), {"x": TERMS["x"]}) == []


@pytest.mark.db
def test_single_vector_query_is_plain_top_k(
    hand_corpus: tuple[psycopg.Connection[Any], Corpus],
) -> None:
    conn, corpus = hand_corpus
    q = TERMS["z"]
    hits = execute(conn, single_vector(corpus, 5), {QUERY_VECTOR: q.astype(np.float32)})
    want = sorted(DOCS, key=lambda d: (-_cos(DOCS[d], q), d))[:5]
    assert [h.external_id for h in hits] == want


# -- pglogic eval end to end on LIMIT-small -----------------------------------------------------


@pytest.mark.db
@pytest.mark.model
def test_eval_limit_small_end_to_end(dsn: str, shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "limit"
    res = cli_in_process(
        "--dsn", dsn, "eval", str(shared_data / "limit_small"), "--out", str(out),
        "--per-template", "2", "--max-given", "10", "--family", "product-max-strong", "--family", "itlr",
        "--mode", "nsfl", "--mode", "sqo-rerank", "--calibration", "unsupervised",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "Wrote" in res.stdout
    data = json.loads((out / "results.json").read_text())
    assert data["documents"] == 46
    # a corpus with passages (the default): the two layouts are compared as well
    assert data["methods"] == [
        "dense", "dense@passages", "pglogic@documents", "pglogic@max", "pglogic[product-max-strong]",
        "pglogic[itlr]", "pglogic-nsfl", "pglogic-sqo-rerank",
        "pglogic[product-max-strong|unsupervised]", "decomposed", "geometric",
    ]  # fmt: skip
    # the modes, the calibrated map and the other layouts are tested against the default engine
    assert set(data["versus_headline"]) == {
        "pglogic-nsfl", "pglogic-sqo-rerank", "pglogic[product-max-strong|unsupervised]",
        "dense@passages", "pglogic@documents", "pglogic@max",
    }  # fmt: skip
    groups = data["queries_per_group"]
    assert groups["given"] == 10 and groups["itlr3"] > 0 and groups["nsfl"] > 0
    for method, metrics in data["summary"].items():
        for name, value in metrics.items():
            assert value is None or 0.0 <= value <= 1.0, (method, name, value)
    # the given LIMIT queries are single terms: the engine is the dense baseline there (its
    # short documents are one passage each, whose vector is the document's)
    given = [q["id"] for q in data["queries"] if q["group"] == "given"]
    for qid in given:
        assert (
            data["per_query"]["pglogic[product-max-strong]"][qid] == data["per_query"]["dense"][qid]
        )
        assert data["per_query"]["dense@passages"][qid] == data["per_query"]["dense"][qid]
    # NOT queries: the engine keeps the excluded documents out of the top 10, dense does not
    with_not = data["subsets"]["with NOT"]
    assert (
        with_not["pglogic[product-max-strong]"]["negrecall@10"] < with_not["dense"]["negrecall@10"]
    )
    assert set(data["targets"]) >= {"NOT: NegRecall@10 at least 80% lower"}
    # of the traps dense ranks in its top 10, dense keeps all; the engine's share is a fraction
    kept = {m: with_not[m]["kept_dense_traps@10"] for m in ("dense", "pglogic[product-max-strong]")}
    assert kept["dense"] == 1.0 and 0.0 <= kept["pglogic[product-max-strong]"] < 1.0
    target = data["targets"]["NOT: at least 80% of dense's top-10 traps excluded"]
    assert target["excluded"] == pytest.approx(1 - kept["pglogic[product-max-strong]"], abs=1e-5)
    md = (out / "results.md").read_text()
    assert "## nDCG@10 by number of negations" in md and "Wilcoxon" in md
    assert "## Scoring modes and calibrated maps against pglogic[product-max-strong]" in md
    assert (out / "ndcg_by_negations.png").stat().st_size > 1000
    assert (out / "ndcg_by_terms.png").stat().st_size > 1000


@pytest.mark.db
@pytest.mark.model
def test_calibrate_then_eval_with_the_fitted_truth_map(
    dsn: str, shared_data: Path, tmp_path: Path
) -> None:
    """The three commands share one loaded model."""

    def run(*args: str) -> Any:
        return cli_in_process("--dsn", dsn, *args)

    limit = str(shared_data / "limit_small")
    res = run("calibrate", limit, "--json")
    assert res.returncode == 0, res.stderr
    fit = json.loads(res.stdout.strip().splitlines()[-1])
    assert fit["method"] == "logistic" and fit["lam"] > 0 and 0.5 < fit["auc"] <= 1.0
    assert fit["n_pairs"] > 2000  # 1,000 labels x 2 documents, 10 negatives each
    assert fit["truth"].startswith("sigmoid:")
    out = tmp_path / "cal"
    res = run(
        "eval", limit, "--out", str(out), "--per-template", "1", "--max-given", "0",
        "--family", "product-max", "--truth", fit["truth"], "--no-plots", "--mode", "none",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    data = json.loads((out / "results.json").read_text())
    assert data["truth"] == fit["truth"]
    assert f"truth map `{fit['truth']}`" in (out / "results.md").read_text()
    res = run("calibrate", limit, "--unsupervised", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.strip().splitlines()[-1])["method"] == "corpus"


def test_eval_rejects_a_bad_truth_map(tmp_path: Path) -> None:
    res = cli_in_process("eval", str(tmp_path), "--truth", "sigmoid:0.2:-1")
    assert res.returncode != 0
    assert "A sigmoid truth map needs a finite tau and lambda > 0" in res.stderr


@pytest.mark.parametrize("option", ["--per-template", "--max-given"])
def test_eval_rejects_negative_counts(option: str, tmp_path: Path) -> None:
    res = cli_in_process("eval", str(tmp_path), option, "-1")
    assert res.returncode == 2
    assert "-1 is not in the range x>=0" in res.stderr


@pytest.mark.db
def test_eval_rejects_a_directory_without_a_corpus(dsn: str, tmp_path: Path) -> None:
    res = cli_in_process("--dsn", dsn, "eval", str(tmp_path))
    assert res.returncode != 0
    assert "corpus.jsonl" in res.stderr


def test_eval_rejects_a_bad_calibration_before_loading(tmp_path: Path) -> None:
    res = cli_in_process("eval", str(tmp_path), "--calibration", "sigmoid:x:1")
    assert res.returncode != 0
    assert "Invalid truth map 'sigmoid:x:1'" in res.stderr
    res = cli_in_process("eval", str(tmp_path), "--mode", "nsfl-fast")
    assert res.returncode == 2 and "'nsfl-fast' is not one of" in res.stderr


@pytest.mark.db
def test_eval_stored_calibration_must_exist(dsn: str, shared_data: Path) -> None:
    res = cli_in_process(
        "--dsn", dsn, "eval", str(shared_data / "limit_small"), "--calibration", "stored"
    )  # fmt: skip
    assert res.returncode != 0
    assert "No model-wide calibration stored for 'all-MiniLM-L6-v2'" in res.stderr
