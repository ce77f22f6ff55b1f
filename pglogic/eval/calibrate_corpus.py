"""Calibrate a corpus without labels: fit σ((s − τ)·λ) from terms and the stored embeddings.

For users without a labelled dataset. The terms are the ones users already searched (the rows of
``pglogic.term_cache`` for the corpus's model, vectors included: no model is loaded) or a list
given by the caller (a text file, one per line, embedded with the corpus's model). Their cosine
similarities to the corpus's documents (a fixed sample of at most :data:`MAX_DOCUMENTS`) feed
:func:`pglogic.eval.calibrate.fit_corpus`: τ is where a document is in a term's top 1 %, λ the slope
that makes a typical document ~0 and the top 0.1 % ~1 true.

Example:
    >>> fit = fit_from_corpus(conn, get_corpus(conn, "news"))  # doctest: +SKIP
    >>> fit.calibration.method, len(fit.terms), fit.documents  # doctest: +SKIP
    ('corpus', 12, 3000)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.embed.base import Embedder
from pglogic.engine.source import Corpus
from pglogic.errors import InvalidInput
from pglogic.eval.calibrate import Calibration, fit_corpus
from pglogic.eval.evaluate import corpus_embeddings
from pglogic.store.db import Connection
from pglogic.store.term_cache import TABLE as TERM_CACHE
from pglogic.store.term_cache import embed_for_corpus

__all__ = ["MAX_DOCUMENTS", "MIN_TERMS", "CorpusFit", "fit_from_corpus", "read_terms"]

#: Fewer terms than this give no usable similarity distribution.
MIN_TERMS = 5
#: Documents sampled (fixed seed) when the corpus has more.
MAX_DOCUMENTS = 10_000


@dataclass(frozen=True)
class CorpusFit:
    """An unsupervised fit and what it was fitted on.

    Example:
        >>> fit = CorpusFit(Calibration(0.3, 20.0, "corpus", 0, None), ["a", "b"], 500, True)
        >>> fit.source("news")
        'corpus news: 2 cached terms x 500 documents'
    """

    calibration: Calibration
    terms: list[str]
    documents: int
    cached: bool

    def source(self, corpus: str) -> str:
        """A description for ``pglogic.calibration.source``."""
        kind = "cached terms" if self.cached else "terms"
        return f"corpus {corpus}: {len(self.terms)} {kind} x {self.documents:,} documents"


def read_terms(path: Path) -> list[str]:
    """Terms from a text file: one per line, blank lines skipped, duplicates dropped.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        ...     _ = f.write("oil prices\\n\\n  natural gas \\noil prices\\n")
        >>> path = Path(f.name)
        >>> read_terms(path)
        ['oil prices', 'natural gas']
        >>> path.unlink()
    """
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return list(dict.fromkeys(line for line in lines if line))


def _cached(conn: Connection, corpus: Corpus) -> tuple[list[str], npt.NDArray[np.float32]]:
    rows = conn.execute(
        sql.SQL(
            "SELECT term, embedding FROM {} WHERE model = %s AND vector_dims(embedding) = %s "
            "ORDER BY term"
        ).format(TERM_CACHE),
        (corpus.model, corpus.dim),
    ).fetchall()
    vectors = [np.asarray(r[1].to_numpy(), dtype=np.float32) for r in rows]
    matrix = np.stack(vectors) if vectors else np.zeros((0, corpus.dim), dtype=np.float32)
    return [str(r[0]) for r in rows], matrix


def _unit_rows(m: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    x = np.asarray(m, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.asarray(x[norms[:, 0] > 0] / norms[norms[:, 0] > 0], dtype=np.float64)


def fit_from_corpus(
    conn: Connection,
    corpus: Corpus,
    terms: Sequence[str] | None = None,
    *,
    embedder: Embedder | None = None,
    top_fraction: float = 0.01,
    max_documents: int = MAX_DOCUMENTS,
    seed: int = 0,
) -> CorpusFit:
    """Fit :func:`pglogic.eval.calibrate.fit_corpus` on the similarities of terms to ``corpus``.

    ``terms`` None means the terms cached for the corpus's model (``pglogic.term_cache``, with
    their stored vectors); otherwise the distinct given terms, embedded by ``embedder`` (default:
    the corpus's model). Similarities are cosines to the corpus's active embeddings
    (:func:`pglogic.eval.evaluate.corpus_embeddings`), at most ``max_documents`` of them drawn with
    ``numpy.random.default_rng(seed)``.

    Raises:
        InvalidInput: fewer than :data:`MIN_TERMS` terms, an empty corpus, or similarities the
            rule cannot fit (too few of them, or too concentrated).
        EmbeddingError: the embedder's dimension is not the corpus's.

    Example:
        >>> fit_from_corpus(conn, news, ["oil", "gas", "coffee", "gold", "wheat"])  # doctest: +SKIP
        CorpusFit(calibration=Calibration(tau=0.41, lam=21.3, method='corpus', ...), ...)
    """
    cached = terms is None
    if terms is None:
        texts, vectors = _cached(conn, corpus)
        if len(texts) < MIN_TERMS:
            raise InvalidInput(
                f"Only {len(texts)} terms are cached for model {corpus.model!r} "
                f"(pglogic.term_cache); an unsupervised calibration needs at least {MIN_TERMS}: "
                "give a file of terms, one per line (--terms FILE)"
            )
    else:
        texts = list(dict.fromkeys(t.strip() for t in terms if t.strip()))
        if len(texts) < MIN_TERMS:
            raise InvalidInput(
                f"An unsupervised calibration needs at least {MIN_TERMS} distinct terms, "
                f"got {len(texts)}"
            )
        vectors = embed_for_corpus(corpus, texts, embedder)
    _ids, matrix = corpus_embeddings(conn, corpus)
    if matrix.shape[0] > max_documents:
        rng = np.random.default_rng(seed)
        matrix = matrix[np.sort(rng.choice(matrix.shape[0], size=max_documents, replace=False))]
    docs = _unit_rows(matrix)
    similarities = docs @ _unit_rows(vectors).T
    try:
        cal = fit_corpus(similarities, top_fraction=top_fraction)
    except ValueError as exc:
        raise InvalidInput(
            f"Cannot calibrate corpus {corpus.name!r} from {len(texts)} terms x "
            f"{docs.shape[0]} documents: {exc}"
        ) from None
    return CorpusFit(cal, texts, int(docs.shape[0]), cached)
