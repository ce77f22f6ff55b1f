"""Load an evaluation dataset: documents with labels, query-term texts for the labels, given queries.

A dataset is a directory in the shared layout (``../shared/data/*``):

* ``corpus.jsonl`` or ``corpus.jsonl.gz`` (required) — one JSON object per line with ``id``
  (string or integer), ``labels`` (list of strings) and any other fields (``text``, ``title``,
  ``site``... are not read here: the documents are ingested from the same file by
  :mod:`pglogic.store.ingest`);
* ``labels.json`` (optional) — ``{"labels": [{"label": ..., "name": ... or null, ...}, ...]}``;
* ``queries.jsonl`` (optional) — ``{"id"?, "text", "logical"?, "relevant": [...],
  "negatives"?: [...]}`` per line.

Query-term text per label (the string that is embedded when a derived query uses the label),
first source that has one:

1. the ``names`` file given to :func:`load_dataset` (a JSON object ``{label: text}``) —
   source ``"names file"``;
2. a non-null ``name`` in ``labels.json`` (Reuters: ``acq`` → ``Mergers/Acquisitions``, used as
   is) — ``"labels.json name"``;
3. the built-in arXiv taxonomy (``pglogic/data/arxiv_categories.json``: ``hep-th`` →
   ``High Energy Physics - Theory``), for the labels it has — ``"arXiv taxonomy"``;
4. the label with ``-`` and ``_`` turned into spaces (``food-safety`` → ``food safety``) —
   ``"label (de-hyphenated)"``.

Whitespace in a term text is collapsed to single spaces. Two labels may get the same text (arXiv
``math-ph`` and ``math.MP`` are both "Mathematical Physics"); :mod:`pglogic.eval.derive` never puts
them into one formula.

Labels are plain strings. The Stack Exchange dataset documents that tags are per site; no tag
occurs on both sites there, and a label that did occur on documents of different ``site`` values
would simply be one label here (no special handling).

Every problem is an :class:`~pglogic.errors.InvalidInput` naming the file and, for line-based
files, the line number.

Example:
    >>> import json, tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> rows = [{"id": "a", "text": "x", "labels": ["palm-oil", "hep-th"]},
    ...         {"id": "b", "text": "y", "labels": ["palm-oil"]}]
    >>> _ = (d / "corpus.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
    >>> ds = load_dataset(d)
    >>> ds.doc_ids, ds.term_text["palm-oil"], ds.term_text["hep-th"]
    (('a', 'b'), 'palm oil', 'High Energy Physics - Theory')
    >>> sorted(ds.label_docs()["palm-oil"])
    ['a', 'b']
"""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pglogic.errors import InvalidInput, QuerySyntaxError
from pglogic.query import parse

__all__ = [
    "SOURCE_ARXIV",
    "SOURCE_LABEL",
    "SOURCE_LABELS_JSON",
    "SOURCE_NAMES_FILE",
    "Dataset",
    "GivenQuery",
    "arxiv_category_names",
    "load_dataset",
    "term_text_for_label",
]

SOURCE_NAMES_FILE = "names file"
SOURCE_LABELS_JSON = "labels.json name"
SOURCE_ARXIV = "arXiv taxonomy"
SOURCE_LABEL = "label (de-hyphenated)"

CORPUS_FILES = ("corpus.jsonl", "corpus.jsonl.gz")
LABELS_FILE = "labels.json"
QUERIES_FILE = "queries.jsonl"


@dataclass(frozen=True)
class GivenQuery:
    """A query from the dataset's own ``queries.jsonl``.

    ``id`` is the file's ``id`` or, when absent, the 1-based line number as a string.

    Example:
        >>> GivenQuery("q1", "Who likes Quokkas?", None, frozenset({"d1"}), frozenset()).text
        'Who likes Quokkas?'
    """

    id: str
    text: str
    logical: str | None
    relevant: frozenset[str]
    negatives: frozenset[str]


@dataclass(frozen=True)
class Dataset:
    """A loaded evaluation dataset (see the module docstring for the layout).

    Example:
        >>> ds = Dataset("t", Path("t"), Path("t/corpus.jsonl"), ("a", "b"),
        ...              (frozenset({"x"}), frozenset({"x", "y"})), {}, {}, ())
        >>> {k: sorted(v) for k, v in sorted(ds.label_docs().items())}
        {'x': ['a', 'b'], 'y': ['b']}
    """

    name: str
    path: Path
    corpus_file: Path
    doc_ids: tuple[str, ...]
    labels: tuple[frozenset[str], ...]
    term_text: dict[str, str]
    term_source: dict[str, str]
    queries: tuple[GivenQuery, ...]

    def label_docs(self) -> dict[str, frozenset[str]]:
        """Map every label to the ids of the documents that carry it (labels sorted).

        Example:
            >>> Dataset("t", Path("t"), Path("t/c.jsonl"), ("a",), (frozenset({"x"}),),
            ...         {}, {}, ()).label_docs()
            {'x': frozenset({'a'})}
        """
        docs: dict[str, list[str]] = {}
        for doc_id, labels in zip(self.doc_ids, self.labels, strict=True):
            for label in labels:
                docs.setdefault(label, []).append(doc_id)
        return {label: frozenset(docs[label]) for label in sorted(docs)}


@functools.cache
def _arxiv_names() -> dict[str, str]:
    text = (resources.files("pglogic") / "data" / "arxiv_categories.json").read_text("utf-8")
    data = json.loads(text)
    assert isinstance(data, dict)
    return {str(k): str(v) for k, v in data.items()}


def arxiv_category_names() -> dict[str, str]:
    """Return the built-in arXiv category names (code → official name), a fresh copy.

    Example:
        >>> names = arxiv_category_names()
        >>> names["cond-mat.mes-hall"], names["math.AG"], names["astro-ph"]
        ('Mesoscale and Nanoscale Physics', 'Algebraic Geometry', 'Astrophysics')
    """
    return dict(_arxiv_names())


def _clean(text: str) -> str:
    return " ".join(text.split())


def term_text_for_label(
    label: str, names: Mapping[str, str] | None = None, label_names: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """Return ``(term text, source)`` for one label, by the precedence in the module docstring.

    ``names`` is the content of a names file, ``label_names`` the non-null names of labels.json.

    Example:
        >>> term_text_for_label("food-safety")
        ('food safety', 'label (de-hyphenated)')
        >>> term_text_for_label("acq", label_names={"acq": "Mergers/Acquisitions"})
        ('Mergers/Acquisitions', 'labels.json name')
        >>> term_text_for_label("math.MP")
        ('Mathematical Physics', 'arXiv taxonomy')
        >>> term_text_for_label("math.MP", names={"math.MP": "maths for physics"})
        ('maths for physics', 'names file')
    """
    if names and label in names and _clean(names[label]):
        return _clean(names[label]), SOURCE_NAMES_FILE
    if label_names and label in label_names and _clean(label_names[label]):
        return _clean(label_names[label]), SOURCE_LABELS_JSON
    arxiv = _arxiv_names()
    if label in arxiv:
        return arxiv[label], SOURCE_ARXIV
    plain = _clean(label.replace("-", " ").replace("_", " "))
    return (plain or _clean(label) or label), SOURCE_LABEL


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for every non-blank line of a (gzipped) JSONL file."""
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InvalidInput(f"{path}, line {lineno}: invalid JSON ({e.msg})") from None
                if not isinstance(obj, dict):
                    raise InvalidInput(f"{path}, line {lineno}: expected a JSON object")
                yield lineno, obj
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{path}: not UTF-8 text ({e.reason})") from None
    except (OSError, EOFError) as e:
        if isinstance(e, FileNotFoundError):
            raise InvalidInput(f"{path}: file not found") from None
        raise InvalidInput(f"{path}: cannot read ({e})") from None


def _id(value: Any, where: str, field: str = "id") -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InvalidInput(f"{where}: '{field}' must be a string or an integer")
    text = str(value)
    if not text.strip():
        raise InvalidInput(f"{where}: '{field}' is blank")
    return text


def _string_list(value: Any, where: str, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{where}: '{field}' must be a list of strings")
    return value


def _read_corpus(path: Path) -> tuple[tuple[str, ...], tuple[frozenset[str], ...]]:
    ids: list[str] = []
    labels: list[frozenset[str]] = []
    first_line: dict[str, int] = {}
    for lineno, obj in _json_lines(path):
        where = f"{path}, line {lineno}"
        if "id" not in obj:
            raise InvalidInput(f"{where}: missing 'id'")
        doc_id = _id(obj["id"], where)
        if "labels" not in obj:
            raise InvalidInput(f"{where}: missing 'labels'")
        doc_labels = _string_list(obj["labels"], where, "labels")
        if any(not label.strip() for label in doc_labels):
            raise InvalidInput(f"{where}: blank label")
        if doc_id in first_line:
            raise InvalidInput(
                f"{where}: duplicate id {doc_id!r} (first on line {first_line[doc_id]})"
            )
        first_line[doc_id] = lineno
        ids.append(doc_id)
        labels.append(frozenset(doc_labels))
    if not ids:
        raise InvalidInput(f"{path}: no documents")
    return tuple(ids), tuple(labels)


def _read_label_names(path: Path) -> dict[str, str]:
    """Non-null ``name`` per label from ``labels.json`` (first one wins)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{path}: invalid JSON ({e.msg} at line {e.lineno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInput(f"{path}: cannot read ({e})") from None
    entries = data.get("labels") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InvalidInput(f"{path}: expected an object with a 'labels' list")
    names: dict[str, str] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("label"), str):
            raise InvalidInput(f"{path}: labels[{i}] needs a string 'label'")
        name = entry.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidInput(f"{path}: labels[{i}]: 'name' must be a string or null")
        if name and _clean(name):
            names.setdefault(entry["label"], name)
    return names


def _read_names_file(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise InvalidInput(f"{path}: invalid JSON ({e.msg} at line {e.lineno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInput(f"{path}: cannot read ({e})") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a JSON object {{label: term text}}")
    for label, text in data.items():
        if not isinstance(text, str) or not _clean(text):
            raise InvalidInput(f"{path}: the term text for {label!r} must be a non-blank string")
    return data


def _id_list(value: Any, where: str, field: str) -> list[str]:
    """Document ids given as strings or integers (like the corpus's ``id``)."""
    if not isinstance(value, list):
        raise InvalidInput(f"{where}: '{field}' must be a list of document ids")
    return [_id(v, where, field) for v in value]


def _read_queries(path: Path, corpus_ids: frozenset[str]) -> tuple[GivenQuery, ...]:
    queries: list[GivenQuery] = []
    first_line: dict[str, int] = {}
    for lineno, obj in _json_lines(path):
        where = f"{path}, line {lineno}"
        qid = _id(obj["id"], where) if obj.get("id") is not None else str(lineno)
        if qid in first_line:
            raise InvalidInput(
                f"{where}: duplicate query id {qid!r} (first on line {first_line[qid]})"
            )
        first_line[qid] = lineno
        text = obj.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput(f"{where}: missing 'text'")
        logical = obj.get("logical")
        if logical is not None:
            if not isinstance(logical, str):
                raise InvalidInput(f"{where}: 'logical' must be a string")
            try:
                parse(logical)
            except QuerySyntaxError as e:
                raise InvalidInput(f"{where}: 'logical' does not parse: {e}") from None
        if "relevant" not in obj:
            raise InvalidInput(f"{where}: missing 'relevant'")
        relevant = _id_list(obj["relevant"], where, "relevant")
        if not relevant:
            raise InvalidInput(f"{where}: 'relevant' is empty (a query needs a relevant document)")
        negatives = _id_list(obj.get("negatives") or [], where, "negatives")
        for field, ids in (("relevant", relevant), ("negatives", negatives)):
            unknown = sorted(set(ids) - corpus_ids)
            if unknown:
                shown = ", ".join(repr(i) for i in unknown[:3])
                more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
                raise InvalidInput(f"{where}: {field} ids not in the corpus: {shown}{more}")
        queries.append(
            GivenQuery(qid, _clean(text), logical, frozenset(relevant), frozenset(negatives))
        )
    return tuple(queries)


def load_dataset(path: Path, *, names: Path | None = None) -> Dataset:
    """Read a dataset directory (see the module docstring); ``names`` is an optional JSON file
    ``{label: term text}`` that overrides every other source of term text.

    Example:
        >>> ds = load_dataset(Path("../shared/data/limit_small"))  # doctest: +SKIP
        >>> len(ds.doc_ids), len(ds.queries)  # doctest: +SKIP
        (46, 1000)
        >>> load_dataset(Path("/nonexistent"))
        Traceback (most recent call last):
        ...
        pglogic.errors.InvalidInput: Dataset directory not found: /nonexistent
    """
    path = Path(path)
    if not path.is_dir():
        raise InvalidInput(f"Dataset directory not found: {path}")
    corpus_file = next((path / f for f in CORPUS_FILES if (path / f).is_file()), None)
    if corpus_file is None:
        raise InvalidInput(f"No corpus.jsonl or corpus.jsonl.gz in {path}")
    doc_ids, doc_labels = _read_corpus(corpus_file)

    label_names = _read_label_names(path / LABELS_FILE) if (path / LABELS_FILE).is_file() else {}
    name_map = _read_names_file(Path(names)) if names is not None else {}
    term_text: dict[str, str] = {}
    term_source: dict[str, str] = {}
    for label in sorted(set().union(*doc_labels)):
        term_text[label], term_source[label] = term_text_for_label(label, name_map, label_names)

    queries_file = path / QUERIES_FILE
    queries = _read_queries(queries_file, frozenset(doc_ids)) if queries_file.is_file() else ()
    return Dataset(
        name=path.resolve().name,
        path=path,
        corpus_file=corpus_file,
        doc_ids=doc_ids,
        labels=doc_labels,
        term_text=term_text,
        term_source=term_source,
        queries=queries,
    )
