"""Quality of approximate mode on the shared datasets: recall@10 of the HNSW plan (default
settings) against exact mode, averaged over logical queries. Slow (embeds thousands of titles
with the real model): select with ``-m model``; run with ``-s`` to see the measured recall.

Document titles are embedded (not the full texts) to keep the run to about a minute per dataset
on a 2-core CPU; recall depends on the geometry of the vectors and on the corpus size, not on
where the texts came from.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, scored_terms
from pglogic.engine.source import Corpus
from pglogic.query import parse
from pglogic.store.corpus import build_index, create_corpus
from pglogic.store.db import connect
from pglogic.store.ingest import ingest_path
from pglogic.store.readers import FieldMap
from pglogic.store.search import execute
from tests.conftest import uses_hnsw

pytestmark = [pytest.mark.db, pytest.mark.model]

DATASETS: dict[str, tuple[int, list[str]]] = {
    "arxiv_0704": (
        2000,
        [
            '"black holes" AND "general relativity"',
            '"string theory" AND NOT "gravity"',
            '"quantum entanglement" OR "quantum computing"',
            '"superconductivity" AND NOT "magnetic field"',
            '("galaxy formation" OR "dark matter") AND "simulation"',
            '"graph theory" AND "algorithms"',
            '"neutrino oscillations" AND NOT "solar neutrinos"',
            '"lattice QCD"',
        ],
    ),
    "stackexchange_cooking_robotics": (
        4000,
        [
            '"baking" AND "bread" AND NOT "sourdough"',
            '"arduino" AND "motor"',
            '"ros" OR "slam"',
            '"cast iron" AND NOT "rust"',
            '"pid controller" AND "quadcopter"',
            '"knife sharpening"',
            '"chicken" AND "marinade" OR "grill"',
            '"kalman filter" AND NOT "gps"',
        ],
    ),
}


#: Smallest settings (for the printout only): 10 candidates per term from an ef_search of 10.
MINIMAL = SearchOptions(k=10, depth=10, ef_search=10)


@pytest.fixture
def index_conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """Sequential scans discouraged, so approximate mode always takes the HNSW plan."""
    with connect(make_conninfo(dsn, options="-c enable_seqscan=off"), autocommit=True) as c:
        yield c


def load(conn: psycopg.Connection[Any], path: Path, limit: int, minilm: Any) -> Corpus:
    corpus = create_corpus(conn, "quality", model=minilm.name, dim=minilm.dim)
    stats = ingest_path(
        conn,
        corpus,
        path,
        embedder=minilm,
        fields=FieldMap(text="title", title="no_such_field"),
        limit=limit,
    )
    assert stats.inserted + stats.updated == stats.seen
    build_index(conn, "quality")
    return corpus


@pytest.mark.parametrize("dataset", list(DATASETS))
def test_approximate_recall_on_shared_data(
    dsn: str,
    index_conn: psycopg.Connection[Any],
    minilm: Any,
    shared_data: Path,
    dataset: str,
) -> None:
    limit, queries = DATASETS[dataset]
    with connect(dsn, autocommit=True) as conn:
        corpus = load(conn, shared_data / dataset / "corpus.jsonl.gz", limit, minilm)
        all_terms = sorted({t for q in queries for t in scored_terms(parse(q), DEFAULT_AND_TEXT)})
        vectors = dict(zip(all_terms, minilm.embed(all_terms), strict=True))
        recalls, minimal = [], []
        for query in queries:
            exact = compile_query(parse(query), corpus, SearchOptions(k=10, exact=True))
            want = {h.row_id for h in execute(conn, exact, vectors)}
            assert len(want) == 10
            for opts, out in ((SearchOptions(k=10), recalls), (MINIMAL, minimal)):
                approx = compile_query(parse(query), corpus, opts)
                assert uses_hnsw(index_conn, approx, approx.with_vectors(vectors)), query
                got = {h.row_id for h in execute(index_conn, approx, vectors)}
                out.append(len(got & want) / len(want))
    mean = float(np.mean(recalls))
    print(
        f"\nrecall@10 approximate vs exact, {dataset} ({limit} titles, {len(queries)} queries): "
        f"default settings mean {mean:.3f} (min {min(recalls):.2f}); "
        f"depth=10, ef_search=10: mean {np.mean(minimal):.3f}"
    )
    assert mean >= 0.95, dict(zip(queries, recalls, strict=True))
