"""Read documents from JSONL (optionally gzipped), CSV, or a directory of text files.

Every record gets an external id, a title (optional), a text and metadata (every other field).
The shared datasets' ``corpus.jsonl(.gz)`` layout (``id``, ``text``, ``title``, ``labels``, ...)
loads as is. Bad input raises :class:`~pglogic.errors.InvalidInput` naming the file and line.

Example:
    >>> import json, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "c.jsonl"
    >>> _ = p.write_text(json.dumps({"id": "d1", "text": "Hello", "labels": ["x"]}) + "\\n")
    >>> [(r.external_id, r.text, r.metadata) for r in read_records(p)]
    [('d1', 'Hello', {'labels': ['x']})]
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import typing
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pglogic.errors import InvalidInput

FORMATS = ("auto", "jsonl", "csv", "dir")
TEXT_SUFFIXES = (".txt", ".md", ".text", ".rst")


@dataclass(frozen=True)
class FieldMap:
    """Which input fields hold the id, text, title and (optionally) a precomputed vector.

    Example:
        >>> FieldMap(text="body").text
        'body'
    """

    id: str = "id"
    text: str = "text"
    title: str = "title"
    vector: str | None = None


@dataclass(frozen=True)
class Record:
    """One input document.

    Example:
        >>> Record("a", "some text", None, {}).embed_text
        'some text'
    """

    external_id: str
    text: str
    title: str | None
    metadata: dict[str, Any] = field(default_factory=dict)
    vector: tuple[float, ...] | None = None
    source: str = ""

    @property
    def embed_text(self) -> str:
        """The text given to the embedding model: the title (if any) then the body."""
        return f"{self.title}\n{self.text}" if self.title else self.text


def detect_format(path: Path) -> str:
    """Guess the input format from the path.

    Example:
        >>> detect_format(Path("corpus.jsonl.gz"))
        'jsonl'
        >>> detect_format(Path("docs.csv"))
        'csv'
    """
    if path.is_dir():
        return "dir"
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    raise InvalidInput(
        f"Cannot tell the format of {path}: use a .jsonl, .csv or directory path, or --format"
    )


def _open_bytes(path: Path) -> IO[bytes]:
    if not path.exists():
        raise InvalidInput(f"No such file or directory: {path}")
    if path.name.endswith(".gz"):
        return typing.cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def _decode(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        raise InvalidInput(
            f"{where} is not valid UTF-8 (byte 0x{bad} at offset {exc.start})"
        ) from None


def _text_problem(text: str) -> str | None:
    r"""What Postgres cannot store of a string (text or JSON), or None.

    Example:
        >>> _text_problem("a\x00b"), _text_problem("fine")
        ('contains a NUL character', None)
        >>> print(_text_problem("a" + chr(0xD800)))
        contains a lone surrogate (\ud800), not a character
    """
    if "\x00" in text:
        return "contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"contains a lone surrogate (\\u{ord(text[exc.start]):04x}), not a character"
    return None


def _metadata_problem(metadata: dict[str, Any]) -> str | None:
    """What a JSONB column cannot store of the metadata (a NUL or a lone surrogate in a string,
    NaN or Infinity), naming the field, or None.

    Example:
        >>> _metadata_problem({"a": [1, {"b": float("nan")}]})
        "field 'a' holds nan (JSON has no NaN or Infinity)"
        >>> _metadata_problem({"a": "x", "n": 1.5}) is None
        True
    """
    for k in metadata:
        if problem := _text_problem(str(k)):
            return f"a field name {problem}"
    stack: list[tuple[str, Any]] = list(metadata.items())
    while stack:  # (not recursive: a deeply nested value is no RecursionError)
        top, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"field {top!r} holds {value} (JSON has no NaN or Infinity)"
        if isinstance(value, str) and (problem := _text_problem(value)):
            return f"field {top!r} {problem}"
        if isinstance(value, dict):
            for k, v in value.items():
                if problem := _text_problem(str(k)):
                    return f"field {top!r} has a key that {problem}"
                stack.append((top, v))
        elif isinstance(value, list):
            stack.extend((top, v) for v in value)
    return None


#: How a missing field's refusal names the way to choose another field: a command-line flag
#: (files through ``pglogic ingest``), a Python parameter (:func:`records_from`).
CLI_FIELD = {"id": "--id-field", "text": "--text-field"}
PYTHON_FIELD = {"id": "fields=FieldMap(id=...)", "text": "fields=FieldMap(text=...)"}


def make_record(
    obj: dict[str, Any], fields: FieldMap, where: str, choose: dict[str, str] = CLI_FIELD
) -> Record:
    """The record of one input object (a JSON line, a CSV row, a Python record): its id, text,
    title and vector from ``fields``, every other field as metadata; refused (InvalidInput,
    naming ``where``) when Postgres could not store it. ``choose`` names how to pick another
    id or text field (:data:`CLI_FIELD`, :data:`PYTHON_FIELD`).

    Example:
        >>> make_record({"id": 7, "text": "hi", "lang": "en"}, FieldMap(), "line 1")
        Record(external_id='7', text='hi', title=None, metadata={'lang': 'en'}, vector=None, source='line 1')
        >>> make_record({"body": "hi"}, FieldMap(), "records[0]", PYTHON_FIELD)
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: records[0] has no 'id' field (choose one with fields=FieldMap(id=...))
    """
    if fields.id not in obj or obj[fields.id] in (None, ""):
        raise InvalidInput(f"{where} has no {fields.id!r} field (choose one with {choose['id']})")
    if fields.text not in obj or obj[fields.text] is None:
        raise InvalidInput(
            f"{where} has no {fields.text!r} field (choose one with {choose['text']})"
        )
    text = obj[fields.text]
    if not isinstance(text, str):
        raise InvalidInput(f"{where}: field {fields.text!r} is not a string")
    if not text.strip():
        raise InvalidInput(f"{where} has empty text")
    title = obj.get(fields.title)
    title = None if title in (None, "") else str(title)
    # what Postgres would refuse only when the batch is written, after earlier batches
    for name, value in (("id", str(obj[fields.id])), ("text", text), ("title", title)):
        if value is not None and (problem := _text_problem(value)):
            raise InvalidInput(f"{where}: {name} {problem}")
    vector: tuple[float, ...] | None = None
    if fields.vector is not None:
        raw = obj.get(fields.vector)
        if not isinstance(raw, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in raw
        ):
            raise InvalidInput(f"{where}: field {fields.vector!r} is not a list of numbers")
        vector = tuple(float(v) for v in raw)
    skip = {fields.id, fields.text, fields.title, fields.vector}
    metadata = {k: v for k, v in obj.items() if k not in skip}
    if problem := _metadata_problem(metadata):
        raise InvalidInput(f"{where}: metadata {problem}")
    return Record(str(obj[fields.id]), text, title, metadata, vector, where)


#: What reading a damaged .gz file raises (a bad header, a bad block, a cut-off end).
_GZIP_ERRORS = (gzip.BadGzipFile, zlib.error, EOFError)


def _read_jsonl(path: Path, fields: FieldMap) -> Iterator[Record]:
    try:
        yield from _jsonl_records(path, fields)
    except _GZIP_ERRORS as exc:
        raise InvalidInput(f"{path.name} is not a readable gzip file ({exc})") from None


def _jsonl_records(path: Path, fields: FieldMap) -> Iterator[Record]:
    with _open_bytes(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            where = f"{path.name} line {lineno}"
            line = _decode(raw, where).strip()
            if lineno == 1:
                line = line.removeprefix("\ufeff")  # a byte-order mark, as some editors write
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{where} is not valid JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise InvalidInput(f"{where} is not a JSON object")
            yield make_record(obj, fields, where)


def _unclosed_quote(data: str, delimiter: str) -> int | None:
    """The line where a quoted field that the file never closes starts, or None.

    The lenient reader takes such a field to the end of the file, as one record; a strict one
    says so. Other things strictness refuses (text after a closing quote) stay readable.

    Example:
        >>> _unclosed_quote('id,text\\n1,"ok"\\n2,"never closed\\n3,x\\n', ",")
        3
        >>> _unclosed_quote('id,text\\n1,"a" b\\n', ",") is None
        True
    """
    reader = csv.reader(io.StringIO(data, newline=""), delimiter=delimiter, strict=True)
    start = 1
    try:
        for _ in reader:
            start = reader.line_num + 1
    except csv.Error as exc:
        return start if "unexpected end of data" in str(exc) else None
    return None


def _read_csv(path: Path, fields: FieldMap) -> Iterator[Record]:
    with _open_bytes(path) as fh:
        try:
            raw = fh.read()
        except _GZIP_ERRORS as exc:
            raise InvalidInput(f"{path.name} is not a readable gzip file ({exc})") from None
        data = _decode(raw, path.name).removeprefix("\ufeff")  # a byte-order mark (Excel's)
    delimiter = "\t" if path.name.lower().removesuffix(".gz").endswith(".tsv") else ","
    if (line := _unclosed_quote(data, delimiter)) is not None:
        raise InvalidInput(
            f"{path.name} line {line}: a quoted field is never closed (it would take the rest "
            "of the file)"
        )
    reader = csv.reader(io.StringIO(data, newline=""), delimiter=delimiter)
    header: list[str] | None = None
    start = 1  # the line the next record starts on (a quoted field may span lines)
    for row in reader:
        where = f"{path.name} line {start}"
        start = reader.line_num + 1
        if not row:  # a blank line
            continue
        if header is None:
            header = row
            continue
        extra = row[len(header) :]
        if any(v.strip() for v in extra):  # (empty ones: a trailing delimiter)
            raise InvalidInput(f"{where} has {len(row)} fields, the header {len(header)}")
        obj: dict[str, Any] = dict(
            zip(header, row + [None] * (len(header) - len(row)), strict=False)
        )
        if fields.vector and isinstance(obj.get(fields.vector), str):
            try:
                obj[fields.vector] = json.loads(obj[fields.vector])
            except json.JSONDecodeError:
                raise InvalidInput(f"{where}: field {fields.vector!r} is not a JSON list") from None
        yield make_record(obj, fields, where)


def _read_dir(path: Path) -> Iterator[Record]:
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    if not files:
        raise InvalidInput(f"{path} has no text files ({', '.join(TEXT_SUFFIXES)})")
    for file in files:
        rel = file.relative_to(path).as_posix()
        if problem := _text_problem(rel):  # the id: a file name that is not UTF-8
            raise InvalidInput(f"{rel!a}: the file name {problem}")
        text = _decode(file.read_bytes(), rel)
        if not text.strip():
            raise InvalidInput(f"{rel} has empty text")
        if problem := _text_problem(text):
            raise InvalidInput(f"{rel}: text {problem}")
        yield Record(rel, text, file.stem, {"path": rel}, None, rel)


def read_records(path: Path, fmt: str = "auto", fields: FieldMap | None = None) -> Iterator[Record]:
    """Yield the records of ``path`` in the given format (``auto`` guesses from the path).

    Example:
        >>> next(read_records(Path("../shared/data/limit_small/corpus.jsonl"))).external_id  # doctest: +SKIP
        'Geneva Durben'
    """
    fields = fields or FieldMap()
    if fmt not in FORMATS:
        raise InvalidInput(f"Unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if not path.exists():
        raise InvalidInput(f"No such file or directory: {path}")
    if fmt == "auto":
        fmt = detect_format(path)
    elif fmt != "dir" and path.is_dir():
        raise InvalidInput(f"{path} is a directory, not a {fmt} file: use --format dir (or auto)")
    if fmt == "jsonl":
        return _read_jsonl(path, fields)
    if fmt == "csv":
        return _read_csv(path, fields)
    if not path.is_dir():
        raise InvalidInput(f"{path} is not a directory")
    return _read_dir(path)
