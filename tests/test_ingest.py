"""Ingestion: formats, the shared layout, idempotency, re-embedding, and bad input."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pglogic import PgLogic
from pglogic.errors import InvalidInput
from pglogic.store.db import connect
from pglogic.store.readers import FieldMap

pytestmark = [pytest.mark.db, pytest.mark.model]

DOCS = [
    {
        "id": "d1",
        "title": "Coffee",
        "text": "Brazil coffee exports rose sharply.",
        "labels": ["coffee"],
    },
    {
        "id": "d2",
        "title": "Oil",
        "text": "Crude oil prices fell on OPEC news.",
        "labels": ["crude"],
    },
    {
        "id": "d3",
        "text": "The central bank raised interest rates.",
        "labels": ["interest"],
        "year": 1987,
    },
]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _rows(dsn: str) -> dict[str, tuple[Any, ...]]:
    with connect(dsn) as c:
        rows = c.execute(
            "SELECT external_id, title, text, metadata, embedding FROM pglogic.corpus_1"
        ).fetchall()
    return {r[0]: (*r[1:4], None if r[4] is None else r[4].to_numpy()) for r in rows}


@pytest.fixture
def pl(dsn: str) -> PgLogic:
    api = PgLogic(dsn)
    api.create_corpus("c")
    return api


def test_jsonl_loads_fields_metadata_and_unit_vectors(
    pl: PgLogic, dsn: str, tmp_path: Path
) -> None:
    stats = pl.ingest("c", _jsonl(tmp_path / "c.jsonl", DOCS))
    assert (stats.seen, stats.inserted, stats.updated, stats.embedded) == (3, 3, 0, 3)
    rows = _rows(dsn)
    assert rows["d1"][0] == "Coffee" and rows["d3"][0] is None
    assert rows["d3"][2] == {"labels": ["interest"], "year": 1987}
    vec = np.asarray(rows["d2"][3])
    assert vec.shape == (384,) and abs(np.linalg.norm(vec) - 1) < 1e-3


def test_gzipped_shared_layout_loads_as_is(pl: PgLogic, dsn: str, shared_data: Path) -> None:
    path = shared_data / "arxiv_0704" / "corpus.jsonl.gz"
    stats = pl.ingest("c", path, limit=40, batch_size=16)
    assert (stats.inserted, stats.batches) == (40, 3)
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        first = json.loads(fh.readline())
    row = _rows(dsn)[first["id"]]
    assert row[0] == first["title"] and row[1] == first["text"]
    assert row[2]["labels"] == first["labels"] and row[2]["arxiv_id"] == first["arxiv_id"]


def test_csv_with_field_mapping(pl: PgLogic, dsn: str, tmp_path: Path) -> None:
    path = tmp_path / "faq.csv"
    path.write_text(
        'qid,question,answer,lang\n1,"How to bake?","Preheat the oven, then bake.",en\n'
        '2,Boil eggs?,"Boil for 7 minutes.",en\n',
        encoding="utf-8",
    )
    stats = pl.ingest("c", path, fields=FieldMap(id="qid", text="answer", title="question"))
    assert stats.inserted == 2
    rows = _rows(dsn)
    assert rows["1"][:3] == ("How to bake?", "Preheat the oven, then bake.", {"lang": "en"})


def test_directory_of_text_files(pl: PgLogic, dsn: str, tmp_path: Path) -> None:
    (tmp_path / "notes" / "sub").mkdir(parents=True)
    (tmp_path / "notes" / "a.txt").write_text("Sourdough starter feeding schedule.")
    (tmp_path / "notes" / "sub" / "b.md").write_text("# Motors\nStepper motor wiring.")
    (tmp_path / "notes" / "ignored.bin").write_bytes(b"\x00\x01")
    assert pl.ingest("c", tmp_path / "notes").inserted == 2
    rows = _rows(dsn)
    assert set(rows) == {"a.txt", "sub/b.md"}
    assert rows["sub/b.md"][0] == "b" and rows["sub/b.md"][2] == {"path": "sub/b.md"}


def test_reingest_is_idempotent_and_reembeds_only_changed_text(
    pl: PgLogic, dsn: str, tmp_path: Path
) -> None:
    path = _jsonl(tmp_path / "c.jsonl", DOCS)
    pl.ingest("c", path)
    before = _rows(dsn)
    again = pl.ingest("c", path)
    assert (again.inserted, again.updated, again.unchanged, again.embedded) == (0, 0, 3, 0)

    changed = [dict(d) for d in DOCS]
    changed[0]["text"] = "Tea exports from Kenya doubled."  # text changed: re-embed
    changed[1]["labels"] = ["crude", "opec"]  # metadata only: update, keep vector
    changed.append({"id": "d4", "text": "A new story about gold mining."})
    stats = pl.ingest("c", _jsonl(tmp_path / "c2.jsonl", changed))
    assert (stats.inserted, stats.updated, stats.unchanged, stats.embedded) == (1, 2, 1, 2)
    after = _rows(dsn)
    assert len(after) == 4
    assert not np.allclose(after["d1"][3], before["d1"][3])
    assert np.allclose(after["d2"][3], before["d2"][3])
    assert after["d2"][2]["labels"] == ["crude", "opec"]


def test_precomputed_vectors_need_no_model(dsn: str, tmp_path: Path) -> None:
    pl = PgLogic(dsn)
    pl.create_corpus("c")
    vec = np.zeros(384)
    vec[0] = 1.0
    path = _jsonl(tmp_path / "v.jsonl", [{"id": "v1", "text": "x", "emb": vec.tolist()}])
    stats = pl.ingest("c", path, fields=FieldMap(vector="emb"))
    assert (stats.inserted, stats.embedded) == (1, 0)
    assert np.allclose(_rows(dsn)["v1"][3], vec)


BAD_INPUTS = [
    ('{"id": "a", "title": "no text"}\n', "c.jsonl line 1 has no 'text' field"),
    ('{"id": "a", "text": "ok"}\n{"id": "b", "text": "   "}\n', "c.jsonl line 2 has empty text"),
    ('{"text": "no id"}\n', "c.jsonl line 1 has no 'id' field"),
    ('{"id": "a", "text": "ok"}\nnot json\n', "c.jsonl line 2 is not valid JSON"),
    (b'{"id": "a", "text": "caf\xe9"}\n', "c.jsonl line 1 is not valid UTF-8 (byte 0xe9"),
    ('{"id": "a", "text": 5}\n', "c.jsonl line 1: field 'text' is not a string"),
    ("[1, 2]\n", "c.jsonl line 1 is not a JSON object"),
    # what Postgres refused only when the batch was written, after the earlier batches
    ('{"id": "a", "text": "ok"}\n{"id": "b", "title": "x\\u0000y", "text": "t"}\n',
     "c.jsonl line 2: title contains a NUL character"),
    ('{"id": "a\\u0000", "text": "t"}\n', "c.jsonl line 1: id contains a NUL character"),
    ('{"id": "a", "text": "t\\ud800"}\n',
     "c.jsonl line 1: text contains a lone surrogate (\\ud800), not a character"),
    ('{"id": "a", "text": "ok"}\n{"id": "b", "text": "t", "score": NaN}\n',
     "c.jsonl line 2: metadata field 'score' holds nan (JSON has no NaN or Infinity)"),
    ('{"id": "a", "text": "t", "m": {"x": [1, -Infinity]}}\n',
     "c.jsonl line 1: metadata field 'm' holds -inf (JSON has no NaN or Infinity)"),
    ('{"id": "a", "text": "t", "tags": ["ok", "a\\u0000"]}\n',
     "c.jsonl line 1: metadata field 'tags' contains a NUL character"),
]  # fmt: skip


@pytest.mark.parametrize(("content", "message"), BAD_INPUTS)
def test_bad_input_changes_nothing(
    pl: PgLogic, dsn: str, tmp_path: Path, content: str | bytes, message: str
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(InvalidInput) as err:
        pl.ingest("c", path, batch_size=1)
    assert str(err.value).startswith(message)
    assert _rows(dsn) == {}


@pytest.mark.parametrize("damage", ["not gzip", "cut off"])
def test_a_damaged_gzip_file_is_refused_in_words(
    pl: PgLogic, dsn: str, tmp_path: Path, damage: str
) -> None:
    """Not a raw gzip.BadGzipFile or EOFError; nothing written."""
    data = "".join(json.dumps({"id": f"d{i}", "text": f"document {i}"}) + "\n" for i in range(200))
    packed = gzip.compress(data.encode())
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(
        b"plain text, not gzip" if damage == "not gzip" else packed[: len(packed) // 2]
    )
    with pytest.raises(InvalidInput, match=r"^c\.jsonl\.gz is not a readable gzip file \("):
        pl.ingest("c", path, batch_size=10)
    assert _rows(dsn) == {}


def test_a_repeated_id_is_counted_and_the_last_record_kept(
    pl: PgLogic, dsn: str, tmp_path: Path
) -> None:
    rows = [{"id": "a", "text": "first"}, {"id": "b", "text": "other"},
            {"id": "a", "text": "second"}, {"id": "b", "text": "other again"}]  # fmt: skip
    for batch_size in (10, 1):  # the repeat in the same batch, then in a later one
        stats = pl.ingest("c", _jsonl(tmp_path / "c.jsonl", rows), batch_size=batch_size)
        assert (stats.seen, stats.repeated) == (4, 2)
        assert {k: v[1] for k, v in _rows(dsn).items()} == {"a": "second", "b": "other again"}


def test_bad_record_late_in_file_commits_nothing(pl: PgLogic, dsn: str, tmp_path: Path) -> None:
    rows = [{"id": f"d{i}", "text": f"document {i}"} for i in range(50)] + [{"id": "bad"}]
    with pytest.raises(InvalidInput, match="line 51 has no 'text' field"):
        pl.ingest("c", _jsonl(tmp_path / "c.jsonl", rows), batch_size=10)
    assert _rows(dsn) == {}


def test_wrong_vector_dimension(dsn: str, tmp_path: Path) -> None:
    pl = PgLogic(dsn)
    pl.create_corpus("c")
    path = _jsonl(tmp_path / "v.jsonl", [{"id": "v1", "text": "x", "emb": [0.1, 0.2, 0.3]}])
    with pytest.raises(
        InvalidInput, match=r"v\.jsonl line 1 has a 3-d vector but corpus 'c' stores 384-d"
    ):
        pl.ingest("c", path, fields=FieldMap(vector="emb"))
    assert _rows(dsn) == {}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([0.0] * 384, r"v\.jsonl line 31 is a zero vector"),
        (
            [float("nan")] + [0.1] * 383,
            r"v\.jsonl line 31 has a NaN or infinite component \(component 1\)",
        ),
        ([0.1] * 383 + [float("inf")], r"component 384"),
        ([0.1] * 383 + [1e39], r"component 384"),  # finite in float64, infinite as float32
    ],
)
def test_unusable_vectors_are_refused_before_anything_is_written(
    dsn: str, tmp_path: Path, bad: list[float], message: str
) -> None:
    """NaN, infinite (as float32) and zero vectors: refused in validation, so no earlier batch
    commits (a NaN used to fail only at COPY, after 3 batches of 10 had committed)."""
    pl = PgLogic(dsn)
    pl.create_corpus("c")
    good = [0.0] * 384
    good[0] = 1.0
    rows = [{"id": f"d{i}", "text": "x", "emb": good} for i in range(30)]
    rows.append({"id": "bad", "text": "x", "emb": bad})
    path = tmp_path / "v.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # json writes NaN/Infinity
    with pytest.raises(InvalidInput, match=message):
        pl.ingest("c", path, fields=FieldMap(vector="emb"), batch_size=10)
    assert _rows(dsn) == {}


def test_missing_file_and_unknown_format(pl: PgLogic, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="No such file or directory"):
        pl.ingest("c", tmp_path / "nope.jsonl")
    (tmp_path / "data.xml").write_text("<x/>")
    with pytest.raises(InvalidInput, match="Cannot tell the format"):
        pl.ingest("c", tmp_path / "data.xml")


QA = FieldMap(id="qid", text="answer", title="question")
BAD_CSV = [
    # an unclosed quote read the rest of the file as one field, and exited 0
    ('qid,question,answer\nw1,q,"never closed\nw2,q2,a2\n',
     "faq.csv line 2: a quoted field is never closed (it would take the rest of the file)"),
    ("qid,question,answer\nq8,a,b,EXTRA1,EXTRA2\n", "faq.csv line 2 has 5 fields, the header 3"),
    # a record that spans lines is named by its first line (was its last), blank lines counted
    ('qid,question,answer\nq1,a,"multi\nline"\n\nq2,b,"two\nlines"\nq3,c,\n',
     "faq.csv line 7 has empty text"),
]  # fmt: skip


@pytest.mark.parametrize(("content", "message"), BAD_CSV)
def test_bad_csv_changes_nothing(
    pl: PgLogic, dsn: str, tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "faq.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInput) as err:
        pl.ingest("c", path, fields=QA, batch_size=1)
    assert str(err.value) == message
    assert _rows(dsn) == {}


def test_a_byte_order_mark_is_not_part_of_the_first_name(
    pl: PgLogic, dsn: str, tmp_path: Path
) -> None:
    """Excel writes one before a CSV's header ("line 2 has no 'qid' field" before)."""
    (tmp_path / "faq.csv").write_bytes(b"\xef\xbb\xbfqid,question,answer\nq9,bom q,bom answer\n")
    (tmp_path / "c.jsonl").write_bytes(b'\xef\xbb\xbf{"id": "j1", "text": "a line"}\n')
    assert pl.ingest("c", tmp_path / "faq.csv", fields=QA).inserted == 1
    assert pl.ingest("c", tmp_path / "c.jsonl").inserted == 1
    assert set(_rows(dsn)) == {"q9", "j1"}


def test_limits_of_postgres_are_checked_before_anything_is_written(
    pl: PgLogic, dsn: str, tmp_path: Path
) -> None:
    """An id too long for its unique index, a text whose words overflow the lexical index's
    tsvector: refused with their line before the first batch (they failed in a later batch,
    with a traceback, after the earlier ones had committed)."""
    rows = [{"id": f"d{i}", "text": f"document {i}"} for i in range(12)]
    with pytest.raises(InvalidInput) as err:
        pl.ingest("c", _jsonl(tmp_path / "c.jsonl", [*rows, {"id": "x" * 3000, "text": "t"}]),
                  batch_size=5)  # fmt: skip
    assert str(err.value) == (
        "c.jsonl line 13: the id is 3,000 bytes long, at most 2,000; nothing was written"
    )
    words = " ".join(f"w{i:06d}x" for i in range(150_000))  # 1.4 MB of distinct words
    with pytest.raises(InvalidInput) as err:
        pl.ingest("c", _jsonl(tmp_path / "c.jsonl", [*rows, {"id": "big", "text": words}]),
                  batch_size=5)  # fmt: skip
    assert str(err.value).startswith(
        "c.jsonl line 13: the text has too many distinct words for the corpus's lexical index"
    )
    assert _rows(dsn) == {}
    # 360 kB, one word: checked, and it fits (3,600 words: the model embeds few passages)
    long_but_fine = ("grain" + " " * 95) * 3_600
    stats = pl.ingest("c", _jsonl(tmp_path / "c.jsonl", [{"id": "g", "text": long_but_fine}]))
    assert stats.inserted == 1


def test_wrong_format_for_a_directory_booleans_as_a_vector_and_a_bad_limit(
    pl: PgLogic, tmp_path: Path
) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("a note")
    with pytest.raises(InvalidInput, match=r"notes is a directory, not a jsonl file: use --format"):
        pl.ingest("c", tmp_path / "notes", fmt="jsonl")  # (IsADirectoryError before)
    path = _jsonl(tmp_path / "v.jsonl", [{"id": "v", "text": "x", "emb": [True] * 384}])
    with pytest.raises(InvalidInput, match="field 'emb' is not a list of numbers"):
        pl.ingest("c", path, fields=FieldMap(vector="emb"))  # (stored as 1.0 before)
    for limit in (0, -1):
        with pytest.raises(InvalidInput, match=f"Invalid limit {limit}: must be at least 1"):
            pl.ingest("c", _jsonl(tmp_path / "c.jsonl", DOCS), limit=limit)


def test_csv_that_loaded_before_still_loads(pl: PgLogic, dsn: str, tmp_path: Path) -> None:
    """Text after a closing quote and a trailing delimiter (an export's empty last field) read
    as before; only an unclosed quote and non-empty extra fields are refused."""
    path = tmp_path / "faq.csv"
    path.write_text('qid,question,answer\n1,q,"hello" world\n2,q2,a2,\n\n3,q3,a3\n', "utf-8")
    assert pl.ingest("c", path, fields=QA).inserted == 3
    assert {k: v[1] for k, v in _rows(dsn).items()} == {"1": "hello world", "2": "a2", "3": "a3"}


def test_a_file_name_that_is_not_utf8_is_refused_before_writing(
    pl: PgLogic, dsn: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("a note")
    with open(os.path.join(os.fsencode(notes), b"\xffname.txt"), "w") as fh:
        fh.write("another")
    with pytest.raises(InvalidInput, match="the file name contains a lone surrogate"):
        pl.ingest("c", notes, batch_size=1)
    assert _rows(dsn) == {}
