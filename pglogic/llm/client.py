"""A chat-completions client for any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, Ollama).

Configuration comes from arguments, else the environment:

==========================  ===============================================================
``PGLOGIC_LLM_BASE_URL``    API root, e.g. ``http://127.0.0.1:8080/v1`` (else ``OPENAI_BASE_URL``;
                            with neither but an API key: OpenAI's own API)
``PGLOGIC_LLM_MODEL``       model name as the server knows it (required)
``PGLOGIC_LLM_API_KEY``     API key (else ``OPENAI_API_KEY`` for OpenAI or ``OPENAI_BASE_URL``;
                            else a placeholder: local servers need no key)
``PGLOGIC_LLM_TIMEOUT``     seconds per request (default 60)
``PGLOGIC_LLM_OUTPUT``      how the answer is constrained: ``auto`` (default), ``grammar``,
                            ``json`` or ``plain`` (see below)
==========================  ===============================================================

Constrained output (:mod:`pglogic.llm.grammar`): ``grammar`` sends a GBNF grammar of the query
language in the request's ``grammar`` field (llama.cpp servers: llama-cpp-python's, llama-server);
``json`` sends ``response_format`` with a JSON schema (structured outputs: OpenAI, vLLM, Ollama,
LM Studio...); ``plain`` sends neither. ``auto`` asks the server's ``/models`` once: a llama.cpp
server (models ``owned_by`` "me" or "llamacpp") gets ``grammar``, OpenAI's API and any other
server that answers get ``json``, a server whose ``/models`` fails gets ``plain``. A server that
rejects a constrained request (HTTP 400 or 422, or a server error naming the field) is asked
again without the constraint, and the client stays in ``plain`` from then on.

``OPENAI_API_KEY`` is sent only to OpenAI's API or to the server named by ``OPENAI_BASE_URL``,
never to another server named by ``PGLOGIC_LLM_BASE_URL``. Empty variables count as unset.

Requests are deterministic by default (temperature 0). Transient failures (timeouts, connection
errors, HTTP 408, 429 and 5xx) are retried with exponential backoff (0.5 s, 1 s, 2 s, ... capped
at 8 s; a ``Retry-After`` header is honoured up to the cap); other errors (400, 401, 403, 404...)
fail at once. Every failure is an :class:`~pglogic.errors.LLMError` naming the endpoint.

The ``openai`` package is imported on first use only: install it with ``pip install
'pglogic[llm]'``.

Example:
    >>> cfg = LLMConfig.resolve(env={"PGLOGIC_LLM_BASE_URL": "http://127.0.0.1:8080/v1",
    ...                              "PGLOGIC_LLM_MODEL": "qwen2.5-coder-1.5b"})
    >>> cfg.base_url, cfg.model, cfg.temperature
    ('http://127.0.0.1:8080/v1', 'qwen2.5-coder-1.5b', 0.0)
    >>> get_client(cfg).complete([{"role": "user", "content": "Say hi"}]).text  # doctest: +SKIP
    'Hi!'
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from pglogic.errors import ConfigError, LLMError
from pglogic.openai_compat import (
    OPENAI_URL,
    PLACEHOLDER_KEY,
    backoff_delay,
    env_value,
    is_openai,
    retryable,
    server_message,
)

ENV_BASE_URL = "PGLOGIC_LLM_BASE_URL"
ENV_MODEL = "PGLOGIC_LLM_MODEL"
ENV_API_KEY = "PGLOGIC_LLM_API_KEY"
ENV_TIMEOUT = "PGLOGIC_LLM_TIMEOUT"
ENV_OUTPUT = "PGLOGIC_LLM_OUTPUT"
#: Ways to constrain the answer (``LLMConfig.output``); ``auto`` picks one per server.
OUTPUT_MODES = ("auto", "grammar", "json", "plain")
#: ``owned_by`` of the models listed by llama.cpp servers (llama-cpp-python, llama-server).
LLAMA_CPP_OWNERS = frozenset({"me", "llamacpp"})
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_TOKENS = 256


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to call the model; build it with :meth:`resolve` to read the environment.

    ``max_retries`` counts the retries after the first attempt; the wait before retry n is
    ``backoff · 2^(n−1)`` seconds, at most ``max_backoff``. ``temperature`` None and ``seed`` None
    are not sent (for servers that reject them).

    Example:
        >>> LLMConfig("http://127.0.0.1:8080/v1", "m", api_key="secret")
        LLMConfig(base_url='http://127.0.0.1:8080/v1', model='m', timeout=60.0, max_retries=2, backoff=0.5, max_backoff=8.0, temperature=0.0, seed=None, max_tokens=256, output='auto')
    """

    base_url: str
    model: str
    api_key: str = field(default=PLACEHOLDER_KEY, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    backoff: float = 0.5
    max_backoff: float = 8.0
    temperature: float | None = 0.0
    seed: int | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    output: str = "auto"

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(
                f"LLM base URL {self.base_url!r} is not an http(s) URL "
                "(e.g. http://127.0.0.1:8080/v1)"
            )
        if not self.model.strip():
            raise ConfigError("The LLM model name is empty")
        if not self.timeout > 0:
            raise ConfigError(f"The LLM timeout must be > 0 seconds, not {self.timeout}")
        if self.max_retries < 0 or self.backoff < 0 or self.max_backoff < 0:
            raise ConfigError("LLM retries and backoff must be >= 0")
        if self.max_tokens < 1:
            raise ConfigError("LLM max_tokens must be >= 1")
        if self.output not in OUTPUT_MODES:
            raise ConfigError(
                f"LLM output mode {self.output!r} is not one of {', '.join(OUTPUT_MODES)}"
            )

    @classmethod
    def resolve(
        cls,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> LLMConfig:
        """Build a configuration from the arguments, falling back to the environment.

        ``env`` defaults to ``os.environ``; ``options`` are the other fields (``max_retries``,
        ``backoff``, ``temperature``...). Raises :class:`~pglogic.errors.ConfigError` when no
        endpoint or no model is configured.

        Example:
            >>> LLMConfig.resolve(model="gpt-4o-mini", env={"OPENAI_API_KEY": "sk-x"}).base_url
            'https://api.openai.com/v1'
            >>> cfg = LLMConfig.resolve(base_url="http://127.0.0.1:11434/v1", model="qwen2.5",
            ...                         env={"OPENAI_API_KEY": "sk-x"})
            >>> cfg.api_key    # the OpenAI key is not sent to another server
            'no-key'
            >>> LLMConfig.resolve(env={})
            Traceback (most recent call last):
            ...
            pglogic.errors.ConfigError: No LLM endpoint configured: set PGLOGIC_LLM_BASE_URL to an OpenAI-compatible API (e.g. http://127.0.0.1:8080/v1) and PGLOGIC_LLM_MODEL, or OPENAI_API_KEY for OpenAI
        """
        env = os.environ if env is None else env
        own_key = api_key or env_value(env, ENV_API_KEY)
        openai_key = env_value(env, "OPENAI_API_KEY")
        url = base_url or env_value(env, ENV_BASE_URL)
        openai_base = env_value(env, "OPENAI_BASE_URL")
        if url is None and openai_base is not None:
            url = openai_base
        if url is None and (own_key or openai_key):
            url = OPENAI_URL
        if url is None:
            raise ConfigError(
                f"No LLM endpoint configured: set {ENV_BASE_URL} to an OpenAI-compatible API "
                f"(e.g. http://127.0.0.1:8080/v1) and {ENV_MODEL}, or OPENAI_API_KEY for OpenAI"
            )
        url = url.rstrip("/")
        name = model or env_value(env, ENV_MODEL)
        if name is None:
            raise ConfigError(
                f"No LLM model configured for {url}: set {ENV_MODEL} to a model the server serves"
            )
        key = own_key
        if key is None and openai_key and is_openai(url, openai_base):
            key = openai_key
        if timeout is None:
            raw = env_value(env, ENV_TIMEOUT)
            try:
                timeout = float(raw) if raw is not None else DEFAULT_TIMEOUT
            except ValueError:
                raise ConfigError(f"{ENV_TIMEOUT}={raw!r} is not a number of seconds") from None
        if "output" not in options:
            options["output"] = env_value(env, ENV_OUTPUT) or "auto"
        return cls(url, name, api_key=key or PLACEHOLDER_KEY, timeout=timeout, **options)


@dataclass(frozen=True)
class Completion:
    """A model's answer: its text, the model that answered, requests made, seconds in total, and
    whether the constraint asked for (grammar or schema) was applied.

    Example:
        >>> Completion('"a" AND "b"', "qwen", attempts=1, seconds=0.4).text
        '"a" AND "b"'
    """

    text: str
    model: str
    attempts: int
    seconds: float
    constrained: bool = False


def openai_module() -> Any:
    """Import the ``openai`` package, or say how to install it (a :class:`ConfigError`).

    Example:
        >>> openai_module().OpenAI  # doctest: +SKIP
        <class 'openai.OpenAI'>
    """
    try:
        import openai
    except ImportError as exc:
        raise ConfigError(
            "Asking an LLM needs the openai package: pip install 'pglogic[llm]'"
        ) from exc
    return openai


class ChatClient:
    """Calls ``/chat/completions`` of one endpoint with retries; thread-safe.

    ``sleep`` waits between retries (tests pass a recorder). The ``openai`` SDK client is created
    on first use, with its own retries off: this class does them, so that which errors are
    retried, and how long it waits, is pglogic's documented policy.

    Example:
        >>> client = ChatClient(LLMConfig("http://127.0.0.1:8080/v1", "qwen"))
        >>> client.complete([{"role": "user", "content": "2+2?"}]).text  # doctest: +SKIP
        '4'
    """

    def __init__(self, config: LLMConfig, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self._sleep = sleep
        self._client: Any = None
        self._lock = threading.Lock()
        self._mode: str | None = None

    def _sdk(self) -> Any:
        with self._lock:
            if self._client is None:
                cfg = self.config
                self._client = openai_module().OpenAI(
                    base_url=cfg.base_url, api_key=cfg.api_key, timeout=cfg.timeout, max_retries=0
                )
            return self._client

    def wait(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based), honouring ``Retry-After``.

        Example:
            >>> client = ChatClient(LLMConfig("http://h/v1", "m", backoff=0.5, max_backoff=8))
            >>> [client.wait(n) for n in (1, 2, 3, 6)], client.wait(1, "3"), client.wait(1, "99")
            ([0.5, 1.0, 2.0, 8.0], 3.0, 8.0)
        """
        return backoff_delay(retry, self.config.backoff, self.config.max_backoff, retry_after)

    def output_mode(self) -> str:
        """How answers are constrained here: ``grammar``, ``json`` or ``plain``.

        The configured mode, or for ``auto`` the one chosen from the server's ``/models`` (asked
        once); ``plain`` once the server has rejected a constrained request.

        Example:
            >>> ChatClient(LLMConfig("http://127.0.0.1:8080/v1", "m", output="json")).output_mode()
            'json'
        """
        with self._lock:
            if self._mode is not None:
                return self._mode
        mode = self.config.output
        if mode == "auto":
            mode = self._probe()
        with self._lock:
            if self._mode is None:
                self._mode = mode
            return self._mode

    def _probe(self) -> str:
        if is_openai(self.config.base_url, None):
            return "json"
        try:
            # the whole request timeout: a busy llama.cpp server answers /models only after the
            # completion it is computing, and a timeout here would lose the grammar for good
            listing = self._sdk().with_options(timeout=self.config.timeout).models.list()
            owners = {str(getattr(m, "owned_by", "")) for m in listing.data}
        except Exception:  # any failure: not a server to send a constraint to
            return "plain"
        return "grammar" if owners & LLAMA_CPP_OWNERS else "json"

    def complete(
        self, messages: Sequence[Mapping[str, str]], *, extra: Mapping[str, Any] | None = None
    ) -> Completion:
        """Send ``messages`` (dicts with ``role`` and ``content``) and return the answer.

        ``extra`` holds more request fields (``grammar``, ``response_format``); a server that
        rejects them (:func:`rejects_constraint`) is asked again without them, and :meth:`output_mode` is
        ``plain`` from then on. Raises :class:`~pglogic.errors.LLMError` when the endpoint cannot
        give an answer.

        Example:
            >>> get_client(LLMConfig.resolve()).complete(  # doctest: +SKIP
            ...     [{"role": "system", "content": "Answer in one word."},
            ...      {"role": "user", "content": "Capital of France?"}]).text
            'Paris'
        """
        openai = openai_module()
        sdk = self._sdk()
        cfg = self.config
        kwargs: dict[str, Any] = {
            "model": cfg.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": cfg.max_tokens,
        }
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        if cfg.seed is not None:
            kwargs["seed"] = cfg.seed
        constrained = bool(extra)
        if extra:
            kwargs["extra_body"] = dict(extra)
        start = time.perf_counter()
        attempts = rejected = 0
        while True:
            attempts += 1
            last = attempts - rejected > cfg.max_retries
            try:
                response = sdk.chat.completions.create(**kwargs)
                break
            except openai.APIStatusError as exc:
                if constrained and rejects_constraint(exc.status_code, server_message(exc)):
                    kwargs.pop("extra_body", None)
                    constrained = False
                    with self._lock:
                        self._mode = "plain"
                    rejected = 1
                    continue
                if retryable(exc.status_code) and not last:
                    self._sleep(self.wait(attempts, exc.response.headers.get("retry-after")))
                    continue
                raise self._status_error(exc, attempts) from exc
            except openai.APITimeoutError as exc:  # before APIConnectionError: a subclass of it
                if not last:
                    self._sleep(self.wait(attempts))
                    continue
                raise LLMError(
                    f"The LLM endpoint {cfg.base_url} did not answer within {cfg.timeout:g}s "
                    f"({attempts} attempts); raise the timeout ({ENV_TIMEOUT}, --llm-timeout) "
                    "for a slow model",
                    attempts=attempts,
                ) from exc
            except openai.APIConnectionError as exc:
                if not last:
                    self._sleep(self.wait(attempts))
                    continue
                cause = exc.__cause__ or exc
                raise LLMError(
                    f"Cannot reach the LLM endpoint {cfg.base_url} ({attempts} attempts): {cause}",
                    attempts=attempts,
                ) from exc
            except openai.APIError as exc:  # e.g. a 200 whose body is not a chat completion
                raise LLMError(
                    f"The LLM endpoint {cfg.base_url} sent an unusable answer: {exc}",
                    attempts=attempts,
                ) from exc
        seconds = time.perf_counter() - start
        text = _answer_text(response, cfg.base_url)
        return Completion(text, _model(response, cfg.model), attempts, seconds, constrained)

    def _status_error(self, exc: Any, attempts: int) -> LLMError:
        cfg = self.config
        status = int(exc.status_code)
        detail = server_message(exc)
        if status in (401, 403):
            text = (
                f"The LLM endpoint {cfg.base_url} refused the API key (HTTP {status}: {detail}); "
                f"set {ENV_API_KEY} (or OPENAI_API_KEY for OpenAI)"
            )
        elif status == 404:
            text = (
                f"The LLM endpoint {cfg.base_url} answered HTTP 404 for model {cfg.model!r} "
                f"({detail}); check {ENV_MODEL} and that the base URL is the API root "
                "(usually ending in /v1)"
            )
        else:
            tries = f" after {attempts} attempts" if attempts > 1 else ""
            text = f"The LLM endpoint {cfg.base_url} answered HTTP {status}{tries}: {detail}"
        return LLMError(text, status=status, attempts=attempts)


def rejects_constraint(status: int, message: str) -> bool:
    """Whether an error answer to a constrained request says the server cannot apply it: HTTP
    400 or 422, or a server error naming the field (llama-cpp-python answers 500 to a
    ``json_schema`` response format it does not know).

    Example:
        >>> rejects_constraint(400, "Unrecognized request argument supplied: grammar")
        True
        >>> rejects_constraint(500, "Input should be 'text' or 'json_object' (response_format)")
        True
        >>> rejects_constraint(503, "overloaded")
        False
    """
    if status in (400, 422):
        return True
    text = message.casefold()
    return status >= 500 and any(w in text for w in ("response_format", "json_schema", "grammar"))


def _answer_text(response: Any, url: str) -> str:
    choices = getattr(response, "choices", None)
    if not choices:
        raise LLMError(f"The LLM endpoint {url} answered without any choice")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else ""


def _model(response: Any, default: str) -> str:
    name = getattr(response, "model", None)
    return name if isinstance(name, str) and name else default


@lru_cache(maxsize=8)
def get_client(config: LLMConfig) -> ChatClient:
    """Return the process-wide client for ``config`` (its HTTP connections are reused).

    Example:
        >>> cfg = LLMConfig("http://127.0.0.1:8080/v1", "qwen")
        >>> get_client(cfg) is get_client(cfg)
        True
    """
    return ChatClient(config)


def few_shot_messages(
    system: str, examples: Sequence[tuple[str, str]], label: str, final: str
) -> list[dict[str, str]]:
    """Chat messages: the instructions, each example as a ``label: input`` / answer pair, then
    ``label: final``.

    Example:
        >>> few_shot_messages("Be brief.", [("a", "A")], "Question", "b")[1:]
        [{'role': 'user', 'content': 'Question: a'}, {'role': 'assistant', 'content': 'A'}, \
{'role': 'user', 'content': 'Question: b'}]
    """
    messages = [{"role": "system", "content": system}]
    for given, answer in examples:
        messages.append({"role": "user", "content": f"{label}: {given}"})
        messages.append({"role": "assistant", "content": answer})
    messages.append({"role": "user", "content": f"{label}: {final}"})
    return messages


__all__ = [
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "ENV_OUTPUT",
    "ENV_TIMEOUT",
    "OUTPUT_MODES",
    "ChatClient",
    "Completion",
    "LLMConfig",
    "backoff_delay",
    "few_shot_messages",
    "get_client",
    "rejects_constraint",
]
