"""A small pglogic database with data in every kind of pglogic table, a fixed query set, and its
rankings through ``pglogic.search()`` and through Python, compared.

What :func:`fill` builds from a :class:`Data` (synthetic clustered unit vectors, no model):

* corpus ``plain``: one vector per document (``d0``, ``d1``, ...), a lexical index (english) on
  texts of two words chosen by the document's cluster (:func:`doc_text`; ``wheat`` in about a
  quarter of them), metadata ``{"g": i % 100}`` and an HNSW index;
* corpus ``passages``: a passage layout, 1-3 passages per document (``p0``, ``p1``, ...; the
  document's own vector is their normalised mean), lexical index, HNSW indexes on the documents
  and on the passages;
* term cache rows: each AND's phrase of the query set, and the terms of the queries sent without
  vectors (:func:`term_cache_rows`);
* two stored calibrations, one for corpus ``plain`` and one for the model (:data:`MODEL`).

The query set (:func:`query_set`), per round and corpus: 1 term; AND / OR / NOT (the last half
negated) of 3 and of 8 terms; each at k 10 and 100; then, at k 10, a lexical term under AND and
under NOT, a formula of cached terms (no vectors sent), a calibrated truth, a metadata filter and
an exact (no index) query. :func:`sql_rankings` runs it through the SQL function (what any
application at any schema revision sends), :func:`python_rankings` through
:func:`pglogic.store.search.search` (which refuses a schema at another revision than its own);
:func:`difference` and :func:`differences` compare two runs (same ids in the same order, scores
to a tolerance).

Used by ``tests/test_upgrade_live.py`` and ``tests/test_backup_restore.py`` (with
:func:`small_data`), and by ``bench/correctness/upgrade_live.py`` and ``bench/correctness/backup_restore.py`` (with
larger data of their own). Not a test module: pytest collects nothing here.

Example (a live database ``dsn`` at head)::

    data = small_data(7)
    queries = query_set(data.term_vectors)
    filled = fill(dsn, data, queries, calibration_source="example")
    assert differences(sql_rankings(dsn, queries), python_rankings(dsn, queries)) == {}
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from pglogic.embed.passages import Span
from pglogic.engine.calibration import Calibration
from pglogic.engine.compile import SearchOptions
from pglogic.engine.conjunction import and_texts
from pglogic.engine.filters import parse_filter
from pglogic.query import And, Match, Node, Not, Or, Term, parse
from pglogic.store.calibration_store import save_calibration
from pglogic.store.corpus import build_index, create_corpus, get_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_records
from pglogic.store.passages import PassageLayout, write_passages
from pglogic.store.readers import Record
from pglogic.store.search import search
from pglogic.store.term_cache import remember_term_vectors

#: The embedding model the synthetic corpora (and their term cache rows) are registered with.
MODEL = "synthetic"
CORPORA = ("plain", "passages")
#: Words of the documents' texts; ``wheat`` is the lexical term of the query set.
WORDS = ("wheat", "corn", "coffee", "copper", "sugar", "cotton", "rubber", "cocoa")
#: The statement that runs a query through the SQL function, as an application at any revision.
SEARCH = "SELECT external_id, score FROM pglogic.search(%s, %s::jsonb)"
#: The default tolerance of :func:`difference` for scores.
TOLERANCE = 1e-9

Ranking = list[tuple[str, float]]


# -- the data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    """What :func:`fill` loads: the plain corpus's vectors, each passage document's passages,
    cluster labels (they choose the texts' words) and the query terms' vectors."""

    plain: np.ndarray  # (documents, dim), unit rows
    plain_labels: np.ndarray
    passages: list[np.ndarray]  # per document: (its passages, dim), unit rows
    passage_labels: np.ndarray
    #: (corpus, group, n) -> n term vectors near one topic of that corpus's data
    term_vectors: Callable[[str, str, int], list[np.ndarray]] = field(repr=False)


def unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1, as float32.

    Example:
        >>> unit(np.array([[3.0, 4.0]]))
        array([[0.6, 0.8]], dtype=float32)
    """
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def doc_text(i: int, label: int) -> str:
    """A document's text: two words chosen by its cluster (``wheat`` in about a quarter).

    Example:
        >>> doc_text(3, 10)
        'document 3 about coffee and corn'
    """
    n = len(WORDS)
    return f"document {i} about {WORDS[label % n]} and {WORDS[(label // n) % n]}"


def small_data(
    seed: int, *, dim: int = 32, docs: int = 400, passage_docs: int = 200, clusters: int = 40
) -> Data:
    """Seeded clustered vectors for a test: ``clusters`` centres, documents and passages near
    them; a query's terms near distinct centres (the corpus does not choose them).

    Example:
        >>> data = small_data(7)
        >>> data.plain.shape, len(data.passages), data.passages[0].shape[1]
        ((400, 32), 200, 32)
        >>> len(data.term_vectors("plain", "r0-plain3", 3))
        3
    """
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((clusters, dim)))

    def near(labels: np.ndarray, spread: float) -> np.ndarray:
        noise = rng.standard_normal((len(labels), dim)) / np.sqrt(dim)
        return unit(centres[labels] + spread * noise)

    plain_labels = rng.integers(0, len(centres), docs)
    passage_labels = rng.integers(0, len(centres), passage_docs)
    passages = []
    for label in passage_labels:  # 1-3 passages, the first near the document's cluster
        others = rng.integers(0, len(centres), int(rng.integers(0, 3)))
        passages.append(near(np.concatenate([[label], others]), 0.8))

    def term_vectors(corpus: str, group: str, n: int) -> list[np.ndarray]:
        r = np.random.default_rng([seed, *group.encode()])
        picks = r.choice(len(centres), size=n, replace=False)
        return list(unit(centres[picks] + 0.3 * r.standard_normal((n, dim)) / np.sqrt(dim)))

    return Data(near(plain_labels, 0.8), plain_labels, passages, passage_labels, term_vectors)


def fill(
    dsn: str, data: Data, queries: Iterable[Query], *, calibration_source: str
) -> dict[str, Any]:
    """Put data in every kind of pglogic table; return the row count of each table in schema
    ``pglogic`` (``rows``) and the time each step took (``steps_s``, seconds).

    Corpus ``plain``: one vector per document, lexical index (english), HNSW index. Corpus
    ``passages``: a passage layout, 1-3 passages per document (the document's own vector is
    their normalised mean), lexical index, HNSW indexes on both tables. The term cache holds
    the queries' AND phrases and the terms of their queries without vectors
    (:func:`term_cache_rows`); a calibration is stored for ``plain`` and one for the model,
    both with source ``calibration_source``.
    """
    dim = data.plain.shape[1]
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    with connect(dsn) as conn:
        plain = create_corpus(conn, "plain", model=MODEL, dim=dim)
        records = (
            Record(f"d{i}", doc_text(i, int(label)), None, {"g": i % 100}, vec)
            for i, (vec, label) in enumerate(zip(data.plain, data.plain_labels, strict=True))
        )
        ingest_records(conn, plain, records, embedder=None, batch_size=5000)
        steps["plain_load_s"] = time.perf_counter() - t0
        steps["plain_hnsw_s"] = build_index(conn, "plain")
        layout = PassageLayout(64, 16, MODEL)
        pas = create_corpus(conn, "passages", model=MODEL, dim=dim, passages=layout)
        t1 = time.perf_counter()
        texts = [doc_text(i, int(label)) for i, label in enumerate(data.passage_labels)]
        records = (
            Record(f"p{i}", texts[i], None, {"g": i % 100}, unit(vecs.mean(axis=0)))
            for i, vecs in enumerate(data.passages)
        )
        ingest_records(conn, pas, records, embedder=None, batch_size=5000)
        for lo in range(0, len(data.passages), 2000):  # the passages (ingest wrote one each)
            batch = [
                (f"p{i}", [Span(0, len(texts[i]), 8)] * len(data.passages[i]), data.passages[i])
                for i in range(lo, min(lo + 2000, len(data.passages)))
            ]
            write_passages(conn, pas, batch)
            conn.commit()
        steps["passages_load_s"] = time.perf_counter() - t1
        steps["passages_hnsw_s"] = build_index(conn, "passages")
        save_calibration(conn, MODEL, Calibration(0.35, 12.0, "corpus", 0, None),
                         corpus_id=plain.id, source=calibration_source)  # fmt: skip
        save_calibration(conn, MODEL, Calibration(0.3, 9.0, "corpus", 0, None),
                         source=calibration_source)  # fmt: skip
        remember_term_vectors(conn, plain, term_cache_rows(queries))
        conn.commit()
        conn.autocommit = True
        assert pas.passage_table is not None
        for table in (plain.table, pas.table, pas.passage_table):
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    return {"rows": table_rows(dsn), "steps_s": {k: round(v, 2) for k, v in steps.items()}}


def table_rows(dsn: str) -> dict[str, int]:
    """The exact row count of every table in schema ``pglogic``."""
    with connect(dsn, autocommit=True, vector=False) as conn:
        names = [
            str(r[0])
            for r in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = 'pglogic'::regnamespace"
                " AND relkind IN ('r', 'p') ORDER BY 1"
            )
        ]
        out = {}
        for name in names:
            stmt = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("pglogic", name))
            row = conn.execute(stmt).fetchone()
            out[name] = int(row[0]) if row else 0
    return out


# -- the query set --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """One query of the set: the SQL function's JSON (:meth:`body`) and the Python search's
    options (:meth:`options`) say the same.

    Example:
        >>> q = Query("r0-plain lexical AND k=10", "plain", '"a" AND match:"wheat"', 10,
        ...           {"a": np.array([1.0, 0.0])}, filtered=True)
        >>> q.shape
        'lexical AND'
        >>> q.body()
        '{"tree": {"op": "and", "args": [{"term": "a", "vector": [1.0, 0.0]}, {"match": "wheat"}]}, "k": 10, "filters": [{"key": "g", "op": "<", "value": 10}]}'
    """

    name: str
    corpus: str
    text: str  # in the query language
    k: int
    vectors: Mapping[str, np.ndarray] = field(repr=False)
    truth: str = "clamp"
    filtered: bool = False  # metadata g < 10
    exact: bool = False
    cached: bool = False  # the terms go without vectors: both paths read the term cache

    @property
    def shape(self) -> str:
        """The query's name without its corpus, round and k: ``AND 3``, ``lexical NOT``, ..."""
        return self.name.split(" ", 1)[1].rsplit(" ", 1)[0]

    def json_options(self) -> dict[str, Any]:
        """The options of the query JSON besides the tree and k (none for the defaults)."""
        out: dict[str, Any] = {}
        if self.truth != "clamp":
            out["truth"] = self.truth
        if self.filtered:
            out["filters"] = [{"key": "g", "op": "<", "value": 10}]
        if self.exact:
            out["exact"] = True
        return out

    def body(self) -> str:
        """The query JSON: the tree with each term's vector (none when ``cached``; the AND
        phrases' come from the term cache), k and the options. Written here, not by
        ``pglogic.engine.render.search_json``: that writes for the head's function, and a
        client sends the same JSON to every revision."""
        given = {} if self.cached else self.vectors
        tree = tree_json(parse(self.text), given)
        return json.dumps({"tree": tree, "k": self.k, **self.json_options()})

    def options(self) -> SearchOptions:
        """The same options for :func:`pglogic.store.search.search`."""
        filters = [parse_filter("g<10")] if self.filtered else []
        return SearchOptions(k=self.k, truth=self.truth, exact=self.exact, filters=filters)


def tree_json(node: Node, vectors: Mapping[str, np.ndarray]) -> Any:
    """A parsed query as the SQL function's tree, with the terms' vectors from ``vectors``.

    Example:
        >>> tree_json(parse('"a" AND NOT "b"'), {"b": np.array([0.5])})
        {'op': 'and', 'args': [{'term': 'a'}, {'op': 'not', 'arg': {'term': 'b', 'vector': [0.5]}}]}
    """
    if isinstance(node, Term):
        if node.text not in vectors:
            return {"term": node.text}
        return {"term": node.text, "vector": [float(x) for x in vectors[node.text]]}
    if isinstance(node, Match):
        return {"match": node.text}
    if isinstance(node, Not):
        return {"op": "not", "arg": tree_json(node.child, vectors)}
    assert isinstance(node, And | Or)
    op = "and" if isinstance(node, And) else "or"
    return {"op": op, "args": [tree_json(c, vectors) for c in node.children]}


def query_set(
    term_vectors: Callable[[str, str, int], list[np.ndarray]], rounds: int = 1
) -> list[Query]:
    """Per round and corpus: 1 term; AND / OR / NOT (last half negated) of 3 and of 8 terms;
    each at k 10 and 100; then, at k 10, a lexical term under AND and under NOT, a formula of
    cached terms (no vectors sent), a calibrated truth, a metadata filter and an exact
    (no index) query. Every query has terms of its own (``r<round>-<corpus>-...``).

    Example:
        >>> queries = query_set(small_data(7).term_vectors)
        >>> len(queries), queries[0].name, queries[-1].name
        (40, 'r0-plain 1 term k=10', 'r0-passages exact k=10')
        >>> queries[-1].text
        '("r0-passages-xa" OR "r0-passages-xb") AND NOT "r0-passages-xc"'
    """
    out = []
    for r in range(rounds):
        for corpus in CORPORA:
            tag = f"r{r}-{corpus}"
            for n in (1, 3, 8):
                names = [f"{tag}-{n}{chr(97 + i)}" for i in range(n)]
                vecs = dict(zip(names, term_vectors(corpus, f"{tag}{n}", n), strict=True))
                quoted = [f'"{t}"' for t in names]
                if n == 1:
                    shapes = {"1 term": quoted[0]}
                else:
                    half = (n + 1) // 2
                    negated = [f"NOT {t}" for t in quoted[half:]]
                    shapes = {
                        f"AND {n}": " AND ".join(quoted),
                        f"OR {n}": " OR ".join(quoted),
                        f"NOT {n}": " AND ".join(quoted[:half] + negated),
                    }
                for shape, text in shapes.items():
                    for k in (10, 100):
                        out.append(Query(f"{tag} {shape} k={k}", corpus, text, k, vecs))
            a, b, c = names = [f"{tag}-x{s}" for s in "abc"]
            vecs = dict(zip(names, term_vectors(corpus, f"{tag}x", 3), strict=True))
            extras: list[tuple[str, str, dict[str, Any]]] = [
                ("lexical AND", f'"{a}" AND match:"wheat"', {}),
                ("lexical NOT", f'"{a}" AND "{b}" AND NOT match:"wheat"', {}),
                ("cached terms", f'("{a}" OR "{b}") AND NOT "{c}"', {"cached": True}),
                ("calibrated", f'"{a}" AND "{b}"', {"truth": "calibrated"}),
                ("filtered", f'"{a}" AND NOT "{c}"', {"filtered": True}),
                ("exact", f'("{a}" OR "{b}") AND NOT "{c}"', {"exact": True}),
            ]
            for shape, text, options in extras:
                out.append(Query(f"{tag} {shape} k=10", corpus, text, 10, vecs, **options))
    return out


def phrase_vector(phrase: str, vectors: Mapping[str, np.ndarray]) -> np.ndarray:
    """An AND phrase's vector: the normalised mean of the vectors of the terms it names.

    Example:
        >>> phrase_vector("a and b", {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0])})
        array([0.70710677, 0.70710677], dtype=float32)
    """
    members = [v for t, v in vectors.items() if re.search(rf"(?<!\w){re.escape(t)}(?!\w)", phrase)]
    return unit(np.mean(members, axis=0))


def term_cache_rows(queries: Iterable[Query]) -> dict[str, np.ndarray]:
    """The term cache the query set needs: each AND's phrase (the function scores it, and no
    query sends a vector for it) and the terms of the queries sent without vectors.

    Example:
        >>> vecs = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0]), "c": np.ones(2)}
        >>> sorted(term_cache_rows([Query("q", "plain", '"a" AND "b"', 10, vecs),
        ...                         Query("r", "plain", '"a" OR "c"', 10, vecs, cached=True)]))
        ['a', 'a and b', 'b', 'c']
    """
    out: dict[str, np.ndarray] = {}
    for q in queries:
        if q.cached:
            out.update(q.vectors)
        for phrase in and_texts(parse(q.text)):
            out[phrase] = phrase_vector(phrase, q.vectors)
    return out


class Vectors:
    """The Python search's embedder: a query's term vectors, and its AND phrases'
    (:func:`phrase_vector`), as the term cache holds them."""

    name = MODEL

    def __init__(self, vectors: Mapping[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.dim = len(next(iter(vectors.values())))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = [self.vectors.get(t) for t in texts]
        rows = [
            phrase_vector(t, self.vectors) if v is None else v
            for t, v in zip(texts, out, strict=True)
        ]
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)


# -- searching ------------------------------------------------------------------------------------


def ranking(conn: psycopg.Connection[Any], corpus: str, body: str) -> Ranking:
    """One query's ranking (ids and scores) through the SQL function, on ``conn``."""
    return [(str(r[0]), float(r[1])) for r in conn.execute(SEARCH, (corpus, body))]


def sql_rankings(dsn: str, queries: Iterable[Query]) -> dict[str, Ranking]:
    """Every query's ranking through the SQL function ``pglogic.search``, on a new connection."""
    with connect(dsn, autocommit=True, vector=False) as conn:
        return {q.name: ranking(conn, q.corpus, q.body()) for q in queries}


def python_rankings(dsn: str, queries: Iterable[Query]) -> dict[str, Ranking]:
    """Every query's ranking through :func:`pglogic.store.search.search` (vectors given; the
    cached queries' terms from the term cache). The schema must be at this pglogic's head."""
    out: dict[str, Ranking] = {}
    with connect(dsn, autocommit=True) as conn:
        corpora = {name: get_corpus(conn, name) for name in CORPORA}
        for q in queries:
            result = search(conn, corpora[q.corpus], q.text, embedder=Vectors(q.vectors),
                            options=q.options(), use_term_cache=q.cached)  # fmt: skip
            out[q.name] = [(h.external_id, float(h.score)) for h in result.hits]
    return out


# -- comparing ------------------------------------------------------------------------------------


def difference(want: Ranking, got: Ranking, *, tolerance: float = TOLERANCE) -> str | None:
    """How ``got`` differs from ``want`` (ids, then scores to ``tolerance``), or None.

    Example:
        >>> difference([("d1", 0.9), ("d2", 0.5)], [("d1", 0.9), ("d3", 0.5)])
        'ids differ from rank 2 (2 rows, 2 expected)'
        >>> difference([("d1", 0.9)], [("d1", 0.9000001)]), difference(
        ...     [("d1", 0.9)], [("d1", 0.9000001)], tolerance=1e-6)
        ('scores differ by up to 1e-07', None)
    """
    if [i for i, _ in got] != [i for i, _ in want]:
        at = next(
            (n for n, (x, y) in enumerate(zip(want, got, strict=False)) if x[0] != y[0]), None
        )
        at = min(len(want), len(got)) if at is None else at
        return f"ids differ from rank {at + 1} ({len(got)} rows, {len(want)} expected)"
    worst = max((abs(x[1] - y[1]) for x, y in zip(want, got, strict=True)), default=0.0)
    if worst > tolerance:
        return f"scores differ by up to {worst:.3g}"
    return None


def differences(
    want: Mapping[str, Ranking],
    got: Mapping[str, Ranking],
    skip: Iterable[str] = (),
    *,
    tolerance: float = TOLERANCE,
) -> dict[str, str]:
    """Query name -> how its ranking in ``got`` differs from ``want`` (:func:`difference`), for
    every query of ``want`` not in ``skip``."""
    left_out = set(skip)
    return {
        n: d
        for n, w in want.items()
        if n not in left_out and (d := difference(w, got[n], tolerance=tolerance)) is not None
    }


def max_score_change(before: Mapping[str, Ranking], after: Mapping[str, Ranking]) -> float:
    """The largest change of a score between two runs of the same query set (same ids).

    Example:
        >>> max_score_change({"q": [("d1", 0.5), ("d2", 0.25)]}, {"q": [("d1", 0.5), ("d2", 0.5)]})
        0.25
    """
    return max(
        (abs(x[1] - y[1]) for n in before for x, y in zip(before[n], after[n], strict=False)),
        default=0.0,
    )
