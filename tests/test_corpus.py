"""Corpus lifecycle through the Python API against a real Postgres."""

from __future__ import annotations

from typing import Any

import pytest

from pglogic import PgLogic
from pglogic.errors import CorpusExists, EmbeddingError, InvalidInput, SchemaError, UnknownCorpus
from pglogic.store.db import connect

pytestmark = [pytest.mark.db, pytest.mark.model]


def _count_corpora(dsn: str) -> int:
    with connect(dsn) as c:
        row = c.execute("SELECT count(*) FROM pglogic.corpora").fetchone()
        assert row is not None
        return int(row[0])


def test_create_list_show_drop(dsn: str) -> None:
    pl = PgLogic(dsn)
    c = pl.create_corpus("news", description="Reuters sample")
    assert (c.name, c.model, c.dim, c.distance) == ("news", "all-MiniLM-L6-v2", 384, "cosine")
    pl.create_corpus("other")
    assert [i.name for i in pl.list_corpora()] == ["news", "other"]
    info = pl.corpus_info("news")
    assert (info.documents, info.embedded, info.index_name) == (0, 0, None)
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
            " WHERE attrelid = 'pglogic.corpus_1'::regclass AND attname = 'embedding'"
        ).fetchone()
    assert row == ("vector(384)",)
    pl.drop_corpus("news")
    assert [i.name for i in pl.list_corpora()] == ["other"]
    with connect(dsn) as conn:
        assert conn.execute("SELECT to_regclass('pglogic.corpus_1')").fetchone() == (None,)


def test_duplicate_name_is_refused_and_changes_nothing(dsn: str) -> None:
    pl = PgLogic(dsn)
    pl.create_corpus("news")
    with pytest.raises(CorpusExists, match="Corpus 'news' already exists"):
        pl.create_corpus("news")
    assert _count_corpora(dsn) == 1


def test_unknown_corpus(dsn: str) -> None:
    pl = PgLogic(dsn)
    with pytest.raises(UnknownCorpus, match="Unknown corpus 'nope'; there are no corpora yet"):
        pl.corpus_info("nope")
    pl.create_corpus("news")
    with pytest.raises(UnknownCorpus, match="Unknown corpus 'nope'; existing: news"):
        pl.drop_corpus("nope")


@pytest.mark.parametrize(
    "name", ["", "bad name", "-x", "a" * 64, "semi;colon", "quo'te", "naïve", None]
)
def test_invalid_names(dsn: str, name: Any) -> None:
    with pytest.raises(InvalidInput, match="Invalid corpus name") as info:
        PgLogic(dsn).create_corpus(name)
    assert _count_corpora(dsn) == 0
    if name == "naïve":  # "letters" alone would say that ï is one
        assert "use ASCII letters, digits" in str(info.value)
    if name is None:  # (a TypeError from deep inside before)
        with pytest.raises(InvalidInput, match="Invalid corpus name None: expected a string"):
            PgLogic(dsn).corpus(name)


def test_model_not_installed_creates_nothing(dsn: str) -> None:
    with pytest.raises(EmbeddingError, match="Embedding model 'no-such-model' is not installed"):
        PgLogic(dsn).create_corpus("news", model="no-such-model")
    assert _count_corpora(dsn) == 0


def test_wrong_dimension_for_model(dsn: str) -> None:
    with pytest.raises(EmbeddingError, match="makes 384-d vectors, not 768-d"):
        PgLogic(dsn).create_corpus("news", dim=768)
    assert _count_corpora(dsn) == 0


def test_external_database_without_schema_says_what_to_run(empty_dsn: str) -> None:
    with pytest.raises(SchemaError, match="run 'pglogic db upgrade'"):
        PgLogic(empty_dsn).list_corpora()


def test_build_index_records_params_and_rejects_bad_values(dsn: str, minilm: object) -> None:
    pl = PgLogic(dsn)
    pl.create_corpus("news")
    with pytest.raises(InvalidInput, match="Invalid m=1"):
        pl.build_index("news", m=1)
    with pytest.raises(InvalidInput, match="Invalid ef_construction=8"):
        pl.build_index("news", m=16, ef_construction=8)
    pl.build_index("news", m=8, ef_construction=32)
    info = pl.corpus_info("news")
    assert info.index_name == "corpus_1_embedding_hnsw"
    assert info.index_params == {"m": 8, "ef_construction": 32}
    pl.build_index("news", m=12, ef_construction=40)  # rebuild replaces it
    with connect(dsn) as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'corpus_1_embedding_hnsw'"
        ).fetchone()
    assert row is not None
    assert "hnsw" in row[0] and "vector_cosine_ops" in row[0] and "m='12'" in row[0]
