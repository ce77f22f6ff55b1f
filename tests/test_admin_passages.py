"""Changing the embedding model of a corpus with passages: add, backfill, index, switch, drop
handle the passage table too, over real Postgres, real HNSW indexes and the real models
(all-MiniLM-L6-v2, then its int8 ONNX export ``minilm-int8``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from psycopg import sql

from pglogic import PgLogic
from pglogic.embed.onnx import locate
from pglogic.embed.passages import tokenizer_of
from pglogic.embed.registry import get_embedder
from pglogic.store import admin
from pglogic.store.admin import AdminError, BackfillStats
from pglogic.store.corpus import get_corpus
from pglogic.store.db import Connection, connect
from pglogic.store.ingest import ingest_records
from pglogic.store.passages import embed_text_sql
from pglogic.store.readers import Record
from tests.long_texts import FILLER, WHEAT

pytestmark = [pytest.mark.db, pytest.mark.model]

A = "all-MiniLM-L6-v2"
B = "minilm-int8"

SHIPS = "Freight rates for container ships climbed as ports in Asia cleared their backlogs. "


def records() -> list[Record]:
    return [
        Record("long-wheat", FILLER * 12 + WHEAT, "Central bank holds rates"),
        Record("long-ships", SHIPS * 20, "Shipping recovers"),
        Record("rates-1", FILLER * 2, "Bank keeps rates"),
        Record("rates-2", FILLER + "Bond yields fell slightly.", "Bonds"),
        Record("wheat-1", WHEAT, "Wheat exports rise"),
        Record("sport", "The football team won the championship final on penalties.", None),
    ]


@pytest.fixture
def db(dsn: str) -> Iterator[Connection]:
    with connect(dsn) as c:
        yield c


@pytest.fixture
def news(dsn: str, db: Connection, minilm: Any) -> PgLogic:
    """A corpus with passages of 64 word pieces (16 shared) embedded with all-MiniLM-L6-v2."""
    api = PgLogic(dsn)
    api.create_corpus("news", passage_tokens=64, passage_overlap=16)
    stats = ingest_records(db, get_corpus(db, "news"), records(), embedder=minilm)
    assert stats.inserted == 6 and stats.passages > 15
    api.build_index("news")
    return api


def passages(db: Connection, column: str) -> dict[tuple[str, int], tuple[str, Any]]:
    """Every passage: (external id, ord) -> (its text as stored offsets cut it, its vector)."""
    c = get_corpus(db, "news")
    assert c.passage_table is not None
    rows = db.execute(
        sql.SQL(
            "SELECT d.external_id, p.ord, {text}, p.char_start, p.char_end, p.{col}"
            " FROM {p} p JOIN {d} d ON d.id = p.doc_id ORDER BY p.id"
        ).format(text=embed_text_sql("d"), col=sql.Identifier(column), p=c.passage_table, d=c.table)
    ).fetchall()
    db.rollback()
    return {
        (str(r[0]), int(r[1])): (str(r[2])[r[3] : r[4]], None if r[5] is None else r[5].to_numpy())
        for r in rows
    }


def columns(db: Connection, table: str) -> dict[str, str]:
    """A table's columns and their storage (``m``: MAIN)."""
    rows = db.execute(
        "SELECT attname, attstorage FROM pg_attribute WHERE attrelid = %s::regclass"
        " AND attnum > 0 AND NOT attisdropped",
        (f"pglogic.{table}",),
    ).fetchall()
    db.rollback()
    return {str(r[0]): str(r[1]) for r in rows}


def hnsw_indexes(db: Connection) -> set[str]:
    rows = db.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'pglogic' AND indexname LIKE '%hnsw'"
    ).fetchall()
    db.rollback()
    return {str(r[0]) for r in rows}


def assert_embedded(got: dict[tuple[str, int], tuple[str, Any]], emb: Any) -> None:
    """Each passage's vector is ``emb``'s vector of its stored slice of the text."""
    keys = sorted(got)
    fresh = emb.embed([got[k][0] for k in keys])
    for k, v in zip(keys, fresh, strict=True):
        assert got[k][1] is not None, k
        assert float(np.dot(got[k][1], v)) > 0.9999, k


def test_switch_a_passage_corpus_step_by_step(news: PgLogic, db: Connection, minilm: Any) -> None:
    emb_b = get_embedder(B)
    before = passages(db, "embedding")
    n_passages = len(before)
    new = admin.add_embedding(db, "news", model=B, dim=384)
    assert (new.column, new.missing, new.passages, new.missing_passages) == (
        "embedding_2", 6, n_passages, n_passages
    )  # fmt: skip
    assert (new.passage_index, new.ready) == (None, False)
    assert columns(db, "corpus_1_passages")["embedding_2"] == "m"  # STORAGE MAIN, as embedding

    with pytest.raises(AdminError, match=r": 6 documents have no 'minilm-int8' vector yet; run:"):
        admin.switch_embedding(db, "news", model=B)

    # interrupted in the passages: the documents and the first passage batch stay committed
    seen: list[tuple[int, int]] = []

    def interrupt(done: int, n: int) -> None:
        seen.append((done, n))
        if done > 6:
            raise KeyboardInterrupt

    first = BackfillStats()
    with pytest.raises(KeyboardInterrupt):
        admin.backfill_embedding(
            db, "news", model=B, embedder=emb_b, batch_size=4, on_batch=interrupt, stats=first
        )
    assert seen == [(4, 4), (6, 2), (10, 4)]
    assert (first.documents, first.passages, first.missing_passages) == (6, 4, n_passages)
    e = admin.get_embedding(db, "news", B)
    assert (e.missing, e.passages_embedded) == (0, 4)
    with pytest.raises(AdminError) as exc:
        admin.switch_embedding(db, "news", model=B)
    assert str(exc.value) == (
        f"Refusing to switch corpus 'news' to 'minilm-int8': {n_passages - 4} passages have no"
        " 'minilm-int8' vector yet; run: pglogic embedding backfill news --model minilm-int8"
    )

    totals: list[int] = []
    rest = BackfillStats()
    notes: list[str] = []
    filled = admin.backfill_embedding(
        db, "news", model=B, embedder=emb_b, batch_size=8, on_start=totals.append,
        note=notes.append, stats=rest,
    )  # fmt: skip
    assert filled == rest.passages == n_passages - 4 and totals == [n_passages - 4]
    assert (rest.documents, rest.over_window, rest.window, notes) == (0, 0, 254, [])
    # short documents are one passage of the whole text: their passage takes the document's vector
    ones = sum(1 for k in before if k[1] == 0 and (k[0], 1) not in before)
    assert first.reused + rest.reused == ones > 0
    assert admin.backfill_embedding(db, "news", model=B, embedder=emb_b) == 0
    got = passages(db, "embedding_2")
    assert_embedded(got, emb_b)
    for k, (_, v) in before.items():  # the int8 model's vectors are close to the fp32 model's
        assert float(np.dot(v, got[k][1])) > 0.99
    e = admin.get_embedding(db, "news", B)
    assert (e.missing, e.missing_passages, e.ready) == (0, 0, False)

    with pytest.raises(AdminError, match=r"column embedding_2 has no valid HNSW index; run: "
                       r"pglogic embedding index news --model minilm-int8"):  # fmt: skip
        admin.switch_embedding(db, "news", model=B)
    admin.build_embedding_index(db, "news", model=B, m=8, ef_construction=32)
    assert {"corpus_1_embedding_2_hnsw", "corpus_1_passages_embedding_2_hnsw"} <= hnsw_indexes(db)
    # what an interrupted build of the passages' index leaves: an invalid index; refused
    db.execute(
        "UPDATE pg_index SET indisvalid = false"
        " WHERE indexrelid = 'pglogic.corpus_1_passages_embedding_2_hnsw'::regclass"
    )
    db.commit()
    e = admin.get_embedding(db, "news", B)
    assert (e.index_valid, e.passage_index_valid, e.ready) == (True, False, False)
    with pytest.raises(AdminError) as exc:
        admin.switch_embedding(db, "news", model=B)
    assert str(exc.value) == (
        "Refusing to switch corpus 'news' to 'minilm-int8': column embedding_2 of the passages has"
        " no valid HNSW index; run: pglogic embedding index news --model minilm-int8"
    )
    admin.build_embedding_index(db, "news", model=B, concurrently=False)  # in one transaction
    e = admin.get_embedding(db, "news", B)
    assert (e.passage_index, e.passage_index_valid, e.ready) == (
        "corpus_1_passages_embedding_2_hnsw", True, True
    )  # fmt: skip
    assert admin.switch_embedding(db, "news", model=B).active
    db.commit()

    # searches read the passages' new column, and still see a long document's last passage
    q = '"central bank interest rates" AND NOT "wheat exports"'
    res = news.search("news", q, k=6, explain_passages=True)
    text = res.compiled.as_string()
    assert '"p"."embedding_2"' in text and '"p"."embedding"' not in text
    order = [h.external_id for h in res.hits]
    assert order.index("long-wheat") > order.index("rates-1")
    hit = next(h for h in res.hits if h.external_id == "long-wheat")
    wheat = next(p for p in res.passages[hit.id] if p.term == "wheat exports")
    assert wheat.ord > 0 and "wheat" in wheat.snippet
    assert wheat.similarity == pytest.approx(hit.similarities["wheat exports"], abs=1e-5)
    approx = [h.external_id for h in news.search("news", '"wheat exports"', k=6).hits]
    assert approx == [h.external_id for h in news.search("news", '"wheat exports"', k=6,
                                                         exact=True).hits]  # fmt: skip

    # ingest after the switch (model B) fills the old column of the new passages too (model A)
    long = Record("long-gold", "Gold prices rose as investors sought safety. " * 30, "Gold")
    ingest_records(db, get_corpus(db, "news"), [long], embedder=emb_b)
    gold = {k: v for k, v in passages(db, "embedding").items() if k[0] == "long-gold"}
    assert len(gold) > 3
    assert_embedded(gold, minilm)

    admin.drop_embedding(db, "news", model=A)
    assert "embedding" not in columns(db, "corpus_1_passages")
    assert "embedding" not in columns(db, "corpus_1")
    assert hnsw_indexes(db) == {"corpus_1_embedding_2_hnsw", "corpus_1_passages_embedding_2_hnsw"}
    [e] = admin.list_embeddings(db, "news")
    assert (e.model, e.active, e.ready, e.passages) == (B, True, True, n_passages + len(gold))
    assert news.search("news", '"gold prices"', k=3).hits[0].external_id == "long-gold"


def test_ingest_during_the_switch_fills_the_passages_new_columns(
    news: PgLogic, db: Connection, minilm: Any
) -> None:
    admin.add_embedding(db, "news", model=B, dim=384)
    admin.add_embedding(db, "news", model="not-installed-model", dim=384)
    old = passages(db, "embedding")
    changed = Record("rates-1", FILLER * 8 + "Gold reserves grew.", "Bank keeps rates")
    new = Record("long-gold", "Gold prices rose as investors sought safety. " * 30, "Gold")
    short = Record("short-gold", "Gold is steady.", None)
    stats = ingest_records(db, get_corpus(db, "news"), [changed, new, short], embedder=minilm)
    assert (stats.inserted, stats.updated) == (2, 1)
    touched = {"rates-1", "long-gold", "short-gold"}
    b = passages(db, "embedding_2")
    filled = {k: v for k, v in b.items() if v[1] is not None}
    assert {k[0] for k in filled} == touched and len(filled) > 10
    assert filled.keys() == {k for k in b if k[0] in touched}  # every passage of them
    assert_embedded(filled, get_embedder(B))
    assert all(v[1] is None for v in passages(db, "embedding_3").values())  # no model: NULL
    # the backfill does only the rest: the documents and passages the ingest did not touch
    stats_b = BackfillStats()
    admin.backfill_embedding(db, "news", model=B, embedder=get_embedder(B), stats=stats_b)
    untouched = {k for k in old if k[0] not in touched}
    assert (stats_b.documents, stats_b.passages) == (5, len(untouched))
    e = admin.get_embedding(db, "news", B)
    assert (e.missing, e.missing_passages) == (0, 0)
    admin.drop_embedding_index(db, "news", model=A)  # both tables' indexes of the column
    assert not {"corpus_1_embedding_hnsw", "corpus_1_passages_embedding_hnsw"} & hnsw_indexes(db)
    admin.drop_embedding(db, "news", model="not-installed-model")
    assert "embedding_3" not in columns(db, "corpus_1_passages")


@pytest.fixture
def short_window(tmp_path: Path) -> str:
    """minilm-int8 reading only 32 word pieces (a model with a smaller window than the split)."""
    files = locate(B)
    model = tmp_path / "short"
    model.mkdir()
    (model / "model.onnx").symlink_to(files.model)
    (model / "tokenizer.json").symlink_to(files.tokenizer)
    (model / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 34}))
    return f"onnx:{model}"


def test_cli_on_a_passage_corpus_and_a_smaller_window(
    dsn: str, db: Connection, news: PgLogic, short_window: str, capsys: Any, monkeypatch: Any
) -> None:
    from pglogic import cli as cli_module
    from pglogic.cli import ui

    monkeypatch.setattr(ui.console, "_width", 400)  # keep rich from wrapping lines
    monkeypatch.setattr(ui.err_console, "_width", 400)

    def run(*args: str, code: int = 0) -> tuple[str, str]:
        with pytest.raises(SystemExit) as exc:
            cli_module.main(["--dsn", dsn, *args])
        out = capsys.readouterr()
        assert exc.value.code == code, out.err
        return tuple(  # type: ignore[return-value]
            " ".join(re.sub("[\u2500-\u257f]", " ", t).split()) for t in (out.out, out.err)
        )

    n = len(passages(db, "embedding"))
    listing, _ = run("embedding", "list", "news")
    assert (
        f"all-MiniLM-L6-v2 384 embedding yes 6/6 corpus_1_embedding_hnsw {n}/{n}"
        " corpus_1_passages_embedding_hnsw" in listing
    )
    out, err = run("embedding", "add", "news", "--model", short_window)
    assert out == (
        f"Added column embedding_2 ({short_window}, 384-d) to corpus 'news'; 6 documents and"
        f" {n} passages to backfill"
    )
    assert err == (
        f"Warning: Model '{short_window}' reads 32 word pieces, fewer than the 64 per passage of"
        " corpus 'news': it would embed only the start of the longer passages (the backfill"
        " counts them)"
    )
    _, err = run("embedding", "switch", "news", "--model", short_window, code=2)
    assert "6 documents have no" in err
    tok = tokenizer_of(get_embedder(short_window))
    over = sum(tok.count(t) > 32 for t, _ in passages(db, "embedding").values())
    assert 0 < over < n
    out, err = run("embedding", "backfill", "news", "--model", short_window, "--batch-size", "7")
    one = sum(1 for k in passages(db, "embedding") if k[1] == 0) - len(
        {k[0] for k in passages(db, "embedding") if k[1] == 1}
    )
    assert out.endswith(
        f"Backfilled {short_window} vectors in corpus 'news': 6 documents, {n} passages"
        f" ({one} copied from their one-passage document)"
    )
    assert (
        f"Warning: {over} passages of corpus 'news' are longer than the 32 word pieces"
        f" '{short_window}' reads: it embedded only the start of each. To search all of their"
        " text with this model, make a corpus with --passage-tokens 32 or fewer and ingest the"
        " documents into it" in out + " " + err
    )
    _, err = run("embedding", "switch", "news", "--model", short_window, code=2)
    assert "column embedding_2 has no valid HNSW index" in err
    out, _ = run("embedding", "index", "news", "--model", short_window)
    assert out.startswith(
        "Built HNSW index corpus_1_embedding_2_hnsw and corpus_1_passages_embedding_2_hnsw on"
        f" its passages on embedding_2 ({short_window}; m=16, ef_construction=128)"
    )
    listing, _ = run("embedding", "list", "news")
    assert (
        f"{short_window} 384 embedding_2 6/6 corpus_1_embedding_2_hnsw {n}/{n}"
        " corpus_1_passages_embedding_2_hnsw" in listing
    )
    out, _ = run("embedding", "switch", "news", "--model", short_window)
    assert out.startswith(f"Corpus 'news' now searches with {short_window} (embedding_2)")
    shown, _ = run("corpus", "show", "news")
    assert f"model {short_window}" in shown and f"passage rows {n}" in shown
    assert f"passages embedded {n}" in shown and "(HNSW on embedding_2; all indexes" in shown
    out, _ = run("embedding", "drop", "news", "--model", A, "--yes")
    assert out == "Dropped column embedding (all-MiniLM-L6-v2) of corpus 'news'"
    assert run("search", "news", "wheat exports", "-k", "3", "--json")[0].count('"id"') == 3
