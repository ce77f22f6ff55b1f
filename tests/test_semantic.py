"""Plain semantic search over a real ingested sample returns the obviously relevant document."""

from __future__ import annotations

from pathlib import Path

import pytest

from pglogic import PgLogic
from tests.conftest import shared_document_vectors

pytestmark = [pytest.mark.db, pytest.mark.model]


def test_reuters_sample_obvious_documents_first(dsn: str, shared_data: Path) -> None:
    pl = PgLogic(dsn)
    pl.create_corpus("reuters")
    with shared_document_vectors():
        pl.ingest("reuters", shared_data / "reuters21578" / "corpus.jsonl.gz", limit=300)
    pl.build_index("reuters")
    for query, label in [
        ("coffee prices and exports", "coffee"),
        ("crude oil prices", "crude"),
        ("gold mining", "gold"),
        ("sugar crop", "sugar"),
    ]:
        hits = pl.search("reuters", query, k=3).hits
        assert label in hits[0].metadata["labels"], (query, hits[0].title)


def test_limit_small_who_likes(dsn: str, shared_data: Path) -> None:
    pl = PgLogic(dsn)
    pl.create_corpus("limit")
    pl.ingest("limit", shared_data / "limit_small" / "corpus.jsonl")
    pl.build_index("limit")
    # LIMIT is built to defeat single-vector retrieval: ask for the top 5, not the top 1
    hits = pl.search("limit", "Who likes Quokkas?", k=5).hits
    assert any("Quokkas" in h.metadata["labels"] for h in hits)
