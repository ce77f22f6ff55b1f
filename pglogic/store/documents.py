"""Documents by external id: records held in memory, the stored documents, hits' texts.

:func:`records_from` reads an application's records (dicts, or objects with attributes) as a
JSON line of a file is read (:func:`pglogic.store.readers.make_record`: the same fields, the same
refusals), for :func:`pglogic.store.ingest.ingest_records`. :func:`get_documents` and
:func:`delete_documents` find documents by their external id; :func:`snippet` cuts a hit's
snippet out of its text.

Example:
    >>> [r.external_id for r in records_from([{"id": "a", "text": "Wheat rose"}])]
    ['a']
    >>> get_documents(conn, corpus, ["a"])[0].text  # doctest: +SKIP
    'Wheat rose'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import sql

from pglogic.engine.source import Corpus
from pglogic.errors import InvalidInput
from pglogic.store.db import Connection
from pglogic.store.readers import PYTHON_FIELD, FieldMap, Record, make_record

#: The most characters of a snippet (:func:`snippet`).
SNIPPET_CHARS = 300


@dataclass(frozen=True)
class Document:
    """A stored document: its external ``id``, text, title and metadata; ``row_id`` is its
    row's internal id (the table's ``id`` column).

    Given back to :meth:`pglogic.PgLogic.add_documents` it is stored as it is (its metadata as
    the metadata), so reading, changing and adding a document is a round trip.

    Example:
        >>> Document("d1", "Wheat rose", "Grain", {"labels": ["wheat"]}).metadata["labels"]
        ['wheat']
    """

    id: str
    text: str
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    row_id: int | None = None


def _as_dict(obj: Any, fields: FieldMap, where: str) -> dict[str, Any]:
    """A record as the object of a JSON line: a mapping as it is, a :class:`Document` with its
    metadata as the other fields, a dataclass, pydantic model or named tuple by its fields,
    another object by its public attributes."""
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, Document):
        return {**obj.metadata, fields.id: obj.id, fields.text: obj.text, fields.title: obj.title}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if callable(getattr(obj, "model_dump", None)):  # pydantic
        dumped = obj.model_dump()
        if isinstance(dumped, dict):
            return dumped
    if isinstance(obj, tuple) and callable(getattr(obj, "_asdict", None)):  # a named tuple
        return dict(obj._asdict())  # type: ignore[attr-defined]
    if isinstance(obj, str | bytes) or not hasattr(obj, "__dict__"):
        raise InvalidInput(
            f"{where} is {type(obj).__name__}: give a dict or an object with attributes "
            f"(an {fields.id!r} and a {fields.text!r}; the other fields become metadata)"
        )
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


def records_from(objects: Iterable[Any], fields: FieldMap | None = None) -> Iterator[Record]:
    """The records of an application's objects, read as JSON lines are: ``fields`` names the
    id, text, title (and vector) fields, every other field is metadata; refusals name the
    record by its place (``records[3]``) and the Python parameters to change.

    Example:
        >>> r = next(records_from([{"id": 1, "text": "Wheat rose", "lang": "en"}]))
        >>> r.external_id, r.metadata
        ('1', {'lang': 'en'})
        >>> next(records_from([{"id": 1}]))
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: records[0] has no 'text' field (choose one with fields=FieldMap(text=...))
    """
    fields = fields or FieldMap()
    if isinstance(objects, str | bytes | Mapping):
        raise InvalidInput(
            f"records is a list of records, not one {type(objects).__name__}: give [record]"
        )
    for i, obj in enumerate(objects):
        where = f"records[{i}]"
        data = _as_dict(obj, fields, where)
        if fields.vector is not None and hasattr(data.get(fields.vector), "tolist"):
            data[fields.vector] = data[fields.vector].tolist()  # a NumPy array
        yield make_record(data, fields, where, PYTHON_FIELD)


def external_ids(ids: str | int | Iterable[str | int]) -> list[str]:
    """``ids`` as a list of distinct external ids, in order: one id (a string or an integer,
    stored as its text, as ingest stores it) or several.

    Example:
        >>> external_ids("d1"), external_ids([3, "d1", 3])
        (['d1'], ['3', 'd1'])
    """
    items = [ids] if isinstance(ids, str | int) else list(ids)
    out: dict[str, None] = {}
    for i in items:
        if isinstance(i, bool) or not isinstance(i, str | int):
            raise InvalidInput(f"Invalid id {i!r} in ids: an id is a string (or an integer)")
        out[str(i)] = None
    return list(out)


def get_documents(conn: Connection, corpus: Corpus, ids: Sequence[str]) -> list[Document]:
    """The documents of ``corpus`` with these external ids, in the order of ``ids``; an id
    that no document has is left out.

    Example:
        >>> [d.id for d in get_documents(conn, corpus, ["d2", "nope", "d1"])]  # doctest: +SKIP
        ['d2', 'd1']
    """
    if not ids:
        return []
    rows = conn.execute(
        sql.SQL(
            "SELECT id, external_id, title, text, metadata FROM {} WHERE external_id = ANY(%s)"
        ).format(corpus.table),
        (list(ids),),
    ).fetchall()
    found = {str(r[1]): Document(str(r[1]), str(r[3]), r[2], r[4] or {}, int(r[0])) for r in rows}
    return [found[i] for i in ids if i in found]


def delete_documents(conn: Connection, corpus: Corpus, ids: Sequence[str]) -> int:
    """Delete the documents of ``corpus`` with these external ids (their passages go with
    them) in the caller's transaction; return how many there were.

    Example:
        >>> delete_documents(conn, corpus, ["d1", "nope"])  # doctest: +SKIP
        1
    """
    if not ids:
        return 0
    cur = conn.execute(
        sql.SQL("DELETE FROM {} WHERE external_id = ANY(%s)").format(corpus.table), (list(ids),)
    )
    return cur.rowcount


def texts_of(
    conn: Connection, corpus: Corpus, row_ids: Sequence[int]
) -> dict[int, tuple[str | None, str]]:
    """The title and text of the documents with these row ids (a search's hits).

    Example:
        >>> texts_of(conn, corpus, [7])  # doctest: +SKIP
        {7: ('Grain', 'Wheat rose')}
    """
    if not row_ids:
        return {}
    rows = conn.execute(
        sql.SQL("SELECT id, title, text FROM {} WHERE id = ANY(%s)").format(corpus.table),
        (list(row_ids),),
    )
    return {int(r[0]): (r[1], str(r[2])) for r in rows}


def snippet(title: str | None, text: str, start: int = 0, end: int | None = None) -> str:
    """The snippet of a hit: the characters ``start:end`` of the text the model read (title, a
    newline, the text: passage offsets index it; the title itself left out), whitespace
    collapsed, cut at a word to at most :data:`SNIPPET_CHARS` characters (then ending in "…").

    Example:
        >>> snippet("Grain", "Wheat  rose\\nagain.")
        'Wheat rose again.'
        >>> snippet(None, "word " * 100)[-10:]
        'word word…'
    """
    full = f"{title}\n{text}" if title else text
    skip = len(title) + 1 if title else 0
    piece = full[max(start, skip) : len(full) if end is None else end]
    words = " ".join(piece.split())
    if len(words) <= SNIPPET_CHARS:
        return words
    cut = words[: SNIPPET_CHARS - 1]  # (room for the ellipsis)
    if " " in cut and words[SNIPPET_CHARS - 1] != " ":
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip() + "…"


def metadata_keys(
    conn: Connection, corpus: Corpus, *, sample: int = 1000, examples: int = 3
) -> dict[str, dict[str, list[Any]]]:
    """The metadata keys of the first ``sample`` documents of ``corpus`` (by id), each with its
    JSON types and up to ``examples`` distinct example values (an array's: its elements): what
    a filter can name.

    Example:
        >>> metadata_keys(conn, corpus)["places"]  # doctest: +SKIP
        {'types': ['array'], 'examples': ['usa', 'el-salvador', 'uruguay']}
    """
    rows = conn.execute(
        sql.SQL(
            "SELECT k.key, jsonb_typeof(k.value), k.value"
            " FROM (SELECT metadata FROM {table} ORDER BY id LIMIT %s) d,"
            " jsonb_each(CASE WHEN jsonb_typeof(d.metadata) = 'object' THEN d.metadata"
            " ELSE '{{}}' END) AS k ORDER BY k.key"
        ).format(table=corpus.table),
        (sample,),
    ).fetchall()
    conn.rollback()
    out: dict[str, dict[str, list[Any]]] = {}
    for key, kind, value in rows:
        entry = out.setdefault(key, {"types": [], "examples": []})
        if kind not in entry["types"]:
            entry["types"].append(kind)
        for v in value if isinstance(value, list) else [value]:
            if len(entry["examples"]) < examples and v not in entry["examples"] and v is not None:
                entry["examples"].append(v)
    return out
