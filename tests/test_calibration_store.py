"""Stored calibrations (migration 0004): the table, pglogic.store.calibration_store, truth "calibrated"
in Python and in ``pglogic.search()``, the unsupervised fit from a corpus, and the CLI.

Corpora here are tiny and hand-made (8-d vectors drawn with a fixed seed, model names that are no
real model), so nothing loads an embedding model except the one ``model``-marked CLI test.
"""

from __future__ import annotations

import json
import math
import random
import struct
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import errors, sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from pglogic import PgLogic
from pglogic.cli import cli
from pglogic.cli.ui import console
from pglogic.engine.compile import SearchOptions
from pglogic.engine.operators import resolve_truth, sigmoid_truth, to_sql
from pglogic.engine.render import search_json, vector_literal
from pglogic.engine.source import Corpus
from pglogic.errors import ConfigError, EmbeddingError, InvalidInput, PglogicError, UnknownCorpus
from pglogic.eval.calibrate import Calibration, fit_corpus
from pglogic.eval.calibrate_corpus import MIN_TERMS, fit_from_corpus, read_terms
from pglogic.query import parse
from pglogic.store.calibration_store import (
    delete_calibration,
    list_calibrations,
    load_calibration,
    missing_calibration_message,
    resolve_stored_truth,
    save_calibration,
    truth_spec,
)
from pglogic.store.corpus import create_corpus, drop_corpus, get_corpus
from pglogic.store.search import search
from pglogic.store.term_cache import cache_terms

pytestmark = pytest.mark.db

Conn = psycopg.Connection[Any]

DIM = 8
MODEL = "hand-8d"
TERMS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
#: (tau, lambda) whose texts are awkward: shortest repr, exponents, -0.0, 17 digits.
AWKWARD = [(0.1, 18.76), (1e-05, 123456789.5), (-0.0, 1e16), (0.18576, 5e-324), (1 / 3, 2 / 3)]
#: The same kind for searches: (τ − s)·λ stays above −745 (exp() underflows below, an error).
SEARCHABLE = [(0.1, 18.76), (1e-05, 7.5), (-0.0, 123.45678901234567), (1 / 3, 2 / 3),
              (0.30000000000000004, 350.0)]  # fmt: skip


class HandEmbedder:
    """Deterministic unit vectors per text (a hash-seeded Gaussian), for model ``MODEL``."""

    name = MODEL
    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for t in texts:
            seed = int.from_bytes(t.encode()[:8].ljust(8, b"\0"), "little")
            v = np.random.default_rng(seed).normal(size=DIM)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM)


def make_corpus(conn: Conn, name: str, n: int = 60, *, model: str = MODEL, seed: int = 0) -> Corpus:
    corpus = create_corpus(conn, name, model=model, dim=DIM)
    vectors = np.random.default_rng(seed).normal(size=(n, DIM))
    with conn.cursor() as cur:
        cur.executemany(
            sql.SQL(
                "INSERT INTO {} (external_id, title, text, text_hash, row_hash, embedding)"
                " VALUES (%s, %s, 'x', '\\x00', '\\x00', %s::vector)"
            ).format(corpus.table),
            [(f"d{i}", f"doc {i}", vector_literal(v)) for i, v in enumerate(vectors)],
        )
    conn.commit()
    return corpus


def sql_message(conn: Conn, corpus: str, query: Any) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as info:
        conn.execute("SELECT * FROM pglogic.search(%s, %s)", (corpus, Jsonb(query))).fetchall()
    conn.rollback()
    return info.value


# -- the table ------------------------------------------------------------------------------------


def test_table_constraints(conn: Conn) -> None:
    corpus = make_corpus(conn, "tiny", 3)
    insert = (
        "INSERT INTO pglogic.calibration (model, corpus_id, tau, lam, method)"
        " VALUES (%s, %s, %s, %s, %s)"
    )
    conn.execute(insert, (MODEL, None, 0.2, 10.0, "corpus"))
    conn.execute(insert, (MODEL, corpus.id, 0.2, 10.0, "logistic"))
    conn.commit()
    bad = [
        ((MODEL, None, 0.3, 10.0, "corpus"), errors.UniqueViolation),  # NULLS NOT DISTINCT
        ((MODEL, corpus.id, 0.3, 10.0, "corpus"), errors.UniqueViolation),
        (("other", None, 0.2, 0.0, "corpus"), errors.CheckViolation),
        (("other", None, 0.2, -1.0, "corpus"), errors.CheckViolation),
        (("other", None, 0.2, math.inf, "corpus"), errors.CheckViolation),
        (("other", None, 0.2, math.nan, "corpus"), errors.CheckViolation),
        (("other", None, math.nan, 1.0, "corpus"), errors.CheckViolation),
        (("other", None, -math.inf, 1.0, "corpus"), errors.CheckViolation),
        (("other", None, 0.2, 1.0, "magic"), errors.CheckViolation),
        ((" ", None, 0.2, 1.0, "corpus"), errors.CheckViolation),
        (("other", 999999, 0.2, 1.0, "corpus"), errors.ForeignKeyViolation),
    ]
    for values, error in bad:
        with pytest.raises(error):
            conn.execute(insert, values)
        conn.rollback()
    drop_corpus(conn, "tiny")  # ON DELETE CASCADE
    rows = conn.execute("SELECT model, corpus_id FROM pglogic.calibration").fetchall()
    assert rows == [(MODEL, None)]


# -- store, load, precedence ----------------------------------------------------------------------


def test_save_load_precedence_upsert_list_delete(conn: Conn) -> None:
    a, b = make_corpus(conn, "a", 3), make_corpus(conn, "b", 3)
    other = make_corpus(conn, "other", 3, model="other-model")
    wide = Calibration(0.2, 10.0, "logistic", 550, 0.9)
    own = Calibration(0.3, 20.0, "corpus", 0, None)
    assert load_calibration(conn, a) is None
    save_calibration(conn, MODEL, wide, source="ds")
    assert load_calibration(conn, a) == wide
    assert load_calibration(conn, b) == wide
    assert load_calibration(conn, other) is None  # another model
    save_calibration(conn, MODEL, own, corpus_id=a.id, source="corpus a")
    assert load_calibration(conn, a) == own  # the corpus's own row first
    assert load_calibration(conn, b) == wide
    newer = Calibration(0.25, 12.5, "corpus", 0, None)
    save_calibration(conn, MODEL, newer)  # upsert: still one model-wide row
    assert load_calibration(conn, b) == newer
    rows = list_calibrations(conn)
    assert [(r.model, r.corpus, r.calibration, r.source) for r in rows] == [
        (MODEL, None, newer, None),
        (MODEL, "a", own, "corpus a"),
    ]
    assert rows[1].truth == "sigmoid:0.3:20.0"
    assert delete_calibration(conn, MODEL, a.id) is True
    assert delete_calibration(conn, MODEL, a.id) is False
    assert load_calibration(conn, a) == newer
    assert delete_calibration(conn, MODEL) is True
    assert load_calibration(conn, a) is None
    assert list_calibrations(conn) == []


def test_save_checks_the_target(conn: Conn) -> None:
    a = make_corpus(conn, "a", 3)
    cal = Calibration(0.2, 10.0, "corpus", 0, None)
    with pytest.raises(UnknownCorpus, match=r"^No corpus with id 999999$"):
        save_calibration(conn, MODEL, cal, corpus_id=999999)
    with pytest.raises(InvalidInput) as info:
        save_calibration(conn, "other-model", cal, corpus_id=a.id)
    assert str(info.value) == (
        "Corpus 'a' has no embedding of model 'other-model' (it has: 'hand-8d'); "
        "a calibration is fitted for one model"
    )
    with pytest.raises(InvalidInput, match="needs a model name"):
        save_calibration(conn, " ", cal)
    assert list_calibrations(conn) == []


@pytest.mark.parametrize(("tau", "lam"), AWKWARD)
def test_resolve_stored_truth_gives_exactly_the_stored_floats(
    conn: Conn, tau: float, lam: float
) -> None:
    a = make_corpus(conn, "a", 3)
    assert resolve_stored_truth(conn, a, "clamp") == "clamp"
    assert resolve_stored_truth(conn, a, "sigmoid:0.1:2") == "sigmoid:0.1:2"
    save_calibration(conn, MODEL, Calibration(tau, lam, "corpus", 0, None))
    spec = resolve_stored_truth(conn, a, " Calibrated ")
    assert spec == f"sigmoid:{tau!r}:{lam!r}"
    m = resolve_truth(spec)
    assert m.name == spec
    stored = conn.execute("SELECT tau, lam FROM pglogic.calibration").fetchone()
    assert stored is not None
    assert [struct.pack("d", x) for x in stored] == [struct.pack("d", tau), struct.pack("d", lam)]


def test_resolve_stored_truth_leaves_the_transaction_state(conn: Conn) -> None:
    a = make_corpus(conn, "a", 3)
    save_calibration(conn, MODEL, Calibration(0.2, 10.0, "corpus", 0, None))
    assert conn.info.transaction_status == TransactionStatus.IDLE
    resolve_stored_truth(conn, a, "calibrated")
    assert conn.info.transaction_status == TransactionStatus.IDLE
    conn.execute("SELECT 1")
    resolve_stored_truth(conn, a, "calibrated")
    assert conn.info.transaction_status == TransactionStatus.INTRANS
    conn.rollback()


def test_no_stored_calibration_is_a_clear_error_in_python_and_sql(conn: Conn) -> None:
    a = make_corpus(conn, "a", 3)
    expected = (
        "No calibration stored for corpus 'a' (model 'hand-8d'): run 'pglogic calibrate "
        "DATASET --save' (labelled data) or 'pglogic calibrate --from-corpus a --save' first, "
        "or give truth sigmoid:TAU:LAMBDA"
    )
    assert missing_calibration_message(a) == expected
    with pytest.raises(ConfigError) as info:
        resolve_stored_truth(conn, a, "calibrated")
    assert str(info.value) == expected
    with pytest.raises(ConfigError) as info:
        search(
            conn, a, '"alpha"', embedder=HandEmbedder(), options=SearchOptions(truth="calibrated")
        )
    assert str(info.value) == expected
    exc = sql_message(conn, "a", {"tree": {"term": "alpha", "vector": [1.0] * DIM},
                                  "truth": "calibrated"})  # fmt: skip
    assert isinstance(exc, errors.UndefinedObject)
    assert exc.diag.message_primary == expected
    # a row of another model does not count
    save_calibration(conn, "other-model", Calibration(0.2, 10.0, "corpus", 0, None))
    with pytest.raises(ConfigError):
        resolve_stored_truth(conn, a, "calibrated")


def test_pure_resolve_truth_needs_a_corpus_for_calibrated() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_truth("Calibrated")
    assert str(info.value) == (
        "Truth map 'calibrated' uses the parameters stored for a corpus: search a corpus with it, "
        "or give sigmoid:TAU:LAMBDA"
    )


# -- the SQL function -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec",
    ["sigmoid", "sigmoid:0.2:-1", "sigmoid:x:1", "sigmoid:0.2:inf", "sigmoid:nan:1",
     "sigmoid:0:0", "sigmoid:1e999:1", "sigmoid:0x10:1", "sigmoid:1__0:1", "sigmoid::1",
     "sigmoid:1:2:3", "sigmoid:0.2:1e-400", "calibrate"],
)  # fmt: skip
def test_bad_sigmoid_specs_give_the_python_message(conn: Conn, spec: str) -> None:
    make_corpus(conn, "a", 3)
    with pytest.raises(PglogicError) as python:
        resolve_truth(spec)
    exc = sql_message(conn, "a", {"tree": {"term": "t", "vector": [1.0] * DIM}, "truth": spec})
    assert isinstance(exc, errors.InvalidParameterValue)
    assert exc.diag.message_primary == str(python.value)


@pytest.mark.parametrize(
    "spec",
    ["sigmoid:0.2:10", " Sigmoid: .5 :5. ", "sigmoid:1_0.5:1_0", "sigmoid:+.5e+3:1e-3",
     "sigmoid:-1e-999:1", "sigmoid:0.18576:18.76", "sigmoid:1e15:1e16", "sigmoid:-0:2.5e-324"],
)  # fmt: skip
def test_sigmoid_specs_resolve_like_python(conn: Conn, spec: str) -> None:
    row = conn.execute("SELECT pglogic._resolve_truth(%s)", (Jsonb(spec),)).fetchone()
    assert row == (resolve_truth(spec).name,)


def test_float_text_is_python_repr(conn: Conn) -> None:
    rng = random.Random(7)
    values = [0.1, 1e-05, 18.76, 123456789.5, 1e15, 1e16, 1e17, 1234567890123456.7, 1.2345e15,
              -0.0, 0.0, 10.0, 5e-324, 1.5e300, 1.7976931348623157e308, 2.0**54,
              7.34941091476762e16, 3.092535278770144e18, 1e23, 0.0001, -1e-7]  # fmt: skip
    values += [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(3000)]
    values += [float(rng.randrange(2**53, 2**70)) for _ in range(3000)]
    values += [rng.uniform(-1, 1) * 10.0 ** rng.randint(-20, 20) for _ in range(3000)]
    values = [v for v in values if math.isfinite(v)]
    conn.execute("SET extra_float_digits = 0")  # the function sets its own
    rows = conn.execute(
        "SELECT pglogic._float_text(x) FROM unnest(%s::float8[]) WITH ORDINALITY AS u(x, n)"
        " ORDER BY n",
        (values,),
    ).fetchall()
    assert [r[0] for r in rows] == [repr(v) for v in values]
    special = conn.execute(
        "SELECT pglogic._float_text('NaN'), pglogic._float_text('Infinity'),"
        " pglogic._float_text('-Infinity')"
    ).fetchone()
    assert special == ("nan", "inf", "-inf")


def python_and_sql(
    conn: Conn, corpus: Corpus, query: str, opts: SearchOptions
) -> tuple[list[Any], list[tuple[Any, ...]], dict[str, Any]]:
    emb = HandEmbedder()
    result = search(conn, corpus, query, embedder=emb, options=replace(opts, guide=False))
    vectors = {t: emb.embed([t])[0] for t in result.compiled.terms}
    q = Jsonb(search_json(result.tree, opts, vectors))
    rows = conn.execute(
        "SELECT id, external_id, score, similarities FROM pglogic.search(%s, %s)",
        (corpus.name, q),
    ).fetchall()
    plan = conn.execute("SELECT pglogic.search_plan(%s, %s)", (corpus.name, q)).fetchone()
    conn.rollback()
    assert plan is not None
    return result.hits, rows, plan[0]


QUERIES = ['"alpha" AND NOT "beta"', '("gamma" OR "delta") AND NOT "alpha"', '"eta"']


@pytest.mark.parametrize(("tau", "lam"), SEARCHABLE)
def test_sql_sigmoid_scores_bit_for_bit_like_python(conn: Conn, tau: float, lam: float) -> None:
    corpus = make_corpus(conn, "tiny")
    spec = f"sigmoid:{tau!r}:{lam!r}"
    for query in QUERIES:
        for opts in (SearchOptions(k=20, truth=spec), SearchOptions(k=60, truth=spec, exact=True)):
            hits, rows, plan = python_and_sql(conn, corpus, query, opts)
            assert plan["truth"] == spec
            assert [r[0] for r in rows] == [h.row_id for h in hits]
            assert [r[2] for r in rows] == [h.score for h in hits]  # exactly, not approximately


def test_steep_sigmoid_neither_overflows_nor_underflows_in_postgres(conn: Conn) -> None:
    # exp() raises in Postgres beyond about ±745: its argument is clamped to ±700
    m = sigmoid_truth(0.0, 5000.0)
    for s, want in ((0.9, 1.0), (-0.9, 0.0), (0.0, 0.5)):
        expr = m.sql(sql.SQL("{}::double precision").format(sql.Literal(s)))
        row = conn.execute(sql.SQL("SELECT {}").format(expr)).fetchone()
        assert row is not None and row[0] == pytest.approx(want, abs=1e-300)
        assert float(m.numpy([s])[0]) == row[0]


def test_sql_score_expression_is_the_python_text(conn: Conn) -> None:
    make_corpus(conn, "tiny", 3)
    spec = "sigmoid:1e-05:123456789.5"
    emb = HandEmbedder()
    tree = parse('"alpha" AND NOT "beta"')
    vectors = {t: emb.embed([t])[0] for t in ("alpha", "beta")}
    plan = conn.execute(
        "SELECT pglogic.search_plan('tiny', %s) ->> 'statement'",
        (Jsonb(search_json(tree, SearchOptions(truth=spec, not_mention=0), vectors)),),
    ).fetchone()
    assert plan is not None
    expected = (  # the default NOT: (1 - x)^1.25
        '((1.0 / (1.0 + exp(LEAST(700.0, GREATEST(-700.0, ((1e-05 - "s0") * 123456789.5)))))) * '
        'power(GREATEST((1.0 - (1.0 / (1.0 + exp(LEAST(700.0, GREATEST(-700.0, ((1e-05 - "s1") * '
        "123456789.5))))))), 0.0), 1.25))"
    )
    assert f"{expected} AS score" in plan[0]  # (identifiers always quoted, as in Python)
    python = to_sql(tree, lambda t: sql.Identifier({"alpha": "s0", "beta": "s1"}[t]), None, spec)
    assert python.as_string(None) == expected


def test_calibrated_ranks_and_scores_like_python_with_precedence(conn: Conn) -> None:
    tiny, other = make_corpus(conn, "tiny"), make_corpus(conn, "other", seed=1)
    wide, own = (
        Calibration(0.1, 18.76, "logistic", 10, 0.8),
        Calibration(1e-05, 7.5, "corpus", 0, None),
    )
    save_calibration(conn, MODEL, wide)
    save_calibration(conn, MODEL, own, corpus_id=tiny.id)
    for corpus, cal in ((tiny, own), (other, wide)):
        for query in QUERIES:
            opts = SearchOptions(k=15, truth="calibrated")
            hits, rows, plan = python_and_sql(conn, corpus, query, opts)
            assert plan["truth"] == truth_spec(cal)
            assert [r[0] for r in rows] == [h.row_id for h in hits]
            assert [r[2] for r in rows] == [h.score for h in hits]
            # and the same as asking for the spec itself
            same, _, _ = python_and_sql(conn, corpus, query, replace(opts, truth=truth_spec(cal)))
            assert [(h.row_id, h.score) for h in same] == [(h.row_id, h.score) for h in hits]
    result = search(conn, tiny, QUERIES[0], embedder=HandEmbedder(),
                    options=SearchOptions(truth="calibrated", guide=False))  # fmt: skip
    assert result.compiled.truth == truth_spec(own)


def test_api_compile_resolves_calibrated(dsn: str, conn: Conn) -> None:
    make_corpus(conn, "tiny", 3)
    save_calibration(conn, MODEL, Calibration(0.25, 12.5, "corpus", 0, None))
    compiled = PgLogic(dsn).compile("tiny", '"a" AND "b"', SearchOptions(truth="calibrated"))
    assert compiled.truth == "sigmoid:0.25:12.5"
    assert "LEAST(700.0, GREATEST(-700.0, ((0.25 - " in compiled.as_string()


# -- the unsupervised fit from a corpus -----------------------------------------------------------


def test_fit_from_a_terms_list_and_from_the_term_cache(conn: Conn, tmp_path: Path) -> None:
    corpus = make_corpus(conn, "tiny", 40)
    emb = HandEmbedder()
    fit = fit_from_corpus(conn, corpus, [*TERMS, "alpha", " "], embedder=emb)
    assert fit.terms == TERMS and fit.documents == 40 and not fit.cached
    docs = np.random.default_rng(0).normal(size=(40, DIM))
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    expected = fit_corpus(docs.astype(np.float32).astype(np.float64) @ emb.embed(TERMS).T)
    assert fit.calibration.method == "corpus"
    assert fit.calibration.tau == pytest.approx(expected.tau, abs=1e-6)
    assert fit.calibration.lam == pytest.approx(expected.lam, rel=1e-4)
    # the same terms from pglogic.term_cache (their stored vectors, no model)
    cache_terms(conn, corpus, TERMS, embedder=emb)
    cached = fit_from_corpus(conn, corpus)
    assert cached.cached and cached.terms == sorted(TERMS)
    assert cached.calibration.tau == pytest.approx(fit.calibration.tau, abs=1e-6)
    assert cached.source("tiny") == "corpus tiny: 7 cached terms x 40 documents"
    # sampling caps the documents
    assert fit_from_corpus(conn, corpus, TERMS, embedder=emb, max_documents=20).documents == 20
    terms_file = tmp_path / "terms.txt"
    terms_file.write_text("alpha\n\n beta \nalpha\n")
    assert read_terms(terms_file) == ["alpha", "beta"]


def test_fit_from_corpus_errors(conn: Conn) -> None:
    corpus = make_corpus(conn, "tiny", 40)
    emb = HandEmbedder()
    with pytest.raises(InvalidInput) as info:
        fit_from_corpus(conn, corpus)
    assert str(info.value) == (
        "Only 0 terms are cached for model 'hand-8d' (pglogic.term_cache); an unsupervised "
        "calibration needs at least 5: give a file of terms, one per line (--terms FILE)"
    )
    with pytest.raises(InvalidInput) as info:
        fit_from_corpus(conn, corpus, [*TERMS[: MIN_TERMS - 1], TERMS[0]], embedder=emb)
    assert str(info.value) == "An unsupervised calibration needs at least 5 distinct terms, got 4"

    class Wrong(HandEmbedder):
        dim = 3

    with pytest.raises(EmbeddingError, match="makes 3-d vectors; corpus 'tiny' needs 8-d"):
        fit_from_corpus(conn, corpus, TERMS, embedder=Wrong())
    small = make_corpus(conn, "small", 10)  # 7 terms x 10 documents < 100 similarities
    with pytest.raises(InvalidInput, match=r"^Cannot calibrate corpus 'small' from 7 terms x 10 "):
        fit_from_corpus(conn, small, TERMS, embedder=emb)


# -- the CLI --------------------------------------------------------------------------------------


def invoke(dsn: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--dsn", dsn, *args], catch_exceptions=True)


def test_cli_save_list_delete_from_corpus(
    dsn: str, conn: Conn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console, "_width", 250)  # no wrapping in the table
    corpus = make_corpus(conn, "tiny", 40)
    make_corpus(conn, "other", 3, model="other-model")
    res = invoke(dsn, "calibrate", "--from-corpus", "tiny", "--save")
    assert isinstance(res.exception, InvalidInput)
    assert "Only 0 terms are cached for model 'hand-8d'" in str(res.exception)
    assert list_calibrations(conn) == []  # nothing stored

    cache_terms(conn, corpus, TERMS, embedder=HandEmbedder())
    res = invoke(dsn, "calibrate", "--from-corpus", "tiny", "--save")
    assert res.exit_code == 0, res.output
    (row,) = list_calibrations(conn)
    assert (row.model, row.corpus, row.calibration.method) == (MODEL, None, "corpus")
    assert row.source == "corpus tiny: 7 cached terms x 40 documents"
    assert f"Stored for model 'hand-8d' (model-wide): {row.truth}" in res.output
    assert "Use: --truth calibrated" in res.output

    # a terms file, embedded with the corpus's model (here the hand-made one), for one corpus
    monkeypatch.setattr("pglogic.store.term_cache.get_query_embedder", lambda _m: HandEmbedder())
    terms = tmp_path / "terms.txt"
    terms.write_text("\n".join(TERMS[:5]) + "\n")
    res = invoke(dsn, "calibrate", "--from-corpus", "tiny", "--terms", str(terms),
                 "--for-corpus", "tiny", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["stored"] == {"model": MODEL, "corpus": "tiny"} and out["method"] == "corpus"
    expected = fit_from_corpus(conn, corpus, TERMS[:5], embedder=HandEmbedder()).calibration
    assert load_calibration(conn, corpus) == expected

    res = invoke(dsn, "calibration", "list")
    assert res.exit_code == 0, res.output
    for text in ("model", "corpus", "tau", "lambda", "method", "source", "AUC", "fitted",
                 "hand-8d", "tiny", f"{expected.tau:.4f}", f"{expected.lam:.2f}"):  # fmt: skip
        assert text in res.output
    res = invoke(dsn, "calibration", "list", "--json")
    listed = [json.loads(line) for line in res.output.splitlines()]
    assert [(r["model"], r["corpus"]) for r in listed] == [(MODEL, None), (MODEL, "tiny")]
    assert listed[1]["truth"] == truth_spec(expected)
    assert listed[1]["tau"] == expected.tau  # JSON keeps every digit

    res = invoke(dsn, "calibration", "delete", MODEL, "--for-corpus", "tiny")
    assert res.exit_code == 0, res.output
    assert "Deleted the calibration of model 'hand-8d' (for corpus 'tiny')." in res.output
    res = invoke(dsn, "calibration", "delete", MODEL, "--for-corpus", "tiny")
    assert isinstance(res.exception, InvalidInput)  # (the CLI exits 2, as for any "not found")
    assert "No calibration stored for model 'hand-8d' (for corpus 'tiny')" in str(res.exception)
    res = invoke(dsn, "calibration", "delete", MODEL)
    assert res.exit_code == 0, res.output
    res = invoke(dsn, "calibration", "list")
    assert "No calibrations stored yet" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Give a DATASET directory or --from-corpus NAME (one of them)"),
        (["--from-corpus", "tiny", "--names", "{names}"],
         "--corpus and --names apply to a DATASET, not to --from-corpus"),
        (["--from-corpus", "tiny", "--model", "m2"], "Corpus 'tiny' uses model 'hand-8d', not 'm2'"),
    ],
)  # fmt: skip
def test_cli_usage_errors(
    dsn: str, conn: Conn, tmp_path: Path, args: list[str], message: str
) -> None:
    make_corpus(conn, "tiny", 3)
    names = tmp_path / "names.json"
    names.write_text("{}")
    res = invoke(dsn, "calibrate", *[a.replace("{names}", str(names)) for a in args])
    assert res.exit_code == 2
    assert message in res.output


def test_cli_refuses_a_corpus_of_another_model_before_fitting(dsn: str, conn: Conn) -> None:
    corpus = make_corpus(conn, "tiny", 40)
    make_corpus(conn, "other", 3, model="other-model")
    cache_terms(conn, corpus, TERMS, embedder=HandEmbedder())
    res = invoke(dsn, "calibrate", "--from-corpus", "tiny", "--for-corpus", "other")
    assert isinstance(res.exception, InvalidInput)
    assert "Corpus 'other' has no embedding of model 'hand-8d'" in str(res.exception)
    res = invoke(dsn, "calibrate", "--from-corpus", "nope")
    assert isinstance(res.exception, UnknownCorpus)


@pytest.mark.model
def test_cli_calibrate_dataset_save_then_search_calibrated(
    dsn: str, tmp_path: Path, minilm: Any
) -> None:
    rows = [{"id": f"c{i}", "text": f"Coffee harvest report number {i} from Brazil",
             "labels": ["coffee"]} for i in range(6)]  # fmt: skip
    rows += [{"id": f"o{i}", "text": f"Crude oil output and tanker shipments, item {i}",
              "labels": ["crude"]} for i in range(6)]  # fmt: skip
    data = tmp_path / "tinyset"
    data.mkdir()
    (data / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = invoke(dsn, "calibrate", str(data), "--corpus", "news", "--save")
    assert res.exit_code == 0, res.output
    assert "all-MiniLM-L6-v2 on tinyset (logistic, AUC" in res.output
    assert "Stored for model 'all-MiniLM-L6-v2' (model-wide): sigmoid:" in res.output
    with psycopg.connect(dsn) as c:
        (row,) = list_calibrations(c)
        news = get_corpus(c, "news")
        assert row.source == "tinyset" and row.calibration.n_pairs > 0
    api = PgLogic(dsn)
    hits = api.search("news", '"coffee" AND NOT "oil"', k=3, truth="calibrated").hits
    assert [h.external_id[0] for h in hits] == ["c", "c", "c"]
    spec_hits = api.search("news", '"coffee" AND NOT "oil"', k=3, truth=row.truth).hits
    assert [(h.row_id, h.score) for h in spec_hits] == [(h.row_id, h.score) for h in hits]
    res = invoke(dsn, "calibrate", str(data), "--corpus", "news", "--for-corpus", "news")
    assert res.exit_code == 0, res.output
    assert "Stored for model 'all-MiniLM-L6-v2' (for corpus 'news'): sigmoid:" in res.output
    with psycopg.connect(dsn) as c:
        assert [r.corpus for r in list_calibrations(c)] == [None, "news"]
        assert news.model == "all-MiniLM-L6-v2"
