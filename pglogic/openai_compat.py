"""What the two OpenAI-compatible clients share: the LLM (:mod:`pglogic.llm.client`) and the
embedding provider (:mod:`pglogic.embed.openai`). Standard library only.

Example:
    >>> retryable(429), retryable(400)
    (True, False)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

OPENAI_URL = "https://api.openai.com/v1"
#: Sent as the API key when none is configured: local servers ignore it, the SDK needs one.
PLACEHOLDER_KEY = "no-key"


def env_value(env: Mapping[str, str], name: str) -> str | None:
    """The stripped value of ``env[name]``, None when unset or blank.

    Example:
        >>> env_value({"X": " a "}, "X"), env_value({}, "X")
        ('a', None)
    """
    value = env.get(name, "").strip()
    return value or None


def is_openai(url: str, openai_base: str | None) -> bool:
    """Whether ``OPENAI_API_KEY`` belongs to ``url``: OpenAI itself or ``OPENAI_BASE_URL``.

    Example:
        >>> is_openai("https://api.openai.com/v1", None)
        True
    """
    if openai_base is not None and url == openai_base.rstrip("/"):
        return True
    return urlsplit(url).hostname == "api.openai.com"


def backoff_delay(
    retry: int, backoff: float, max_backoff: float, retry_after: str | None = None
) -> float:
    """Seconds to wait before retry number ``retry`` (1-based): ``backoff · 2^(retry−1)``, or the
    server's ``Retry-After`` seconds when it sent a number; at most ``max_backoff``.

    Example:
        >>> [backoff_delay(n, 0.5, 8) for n in (1, 2, 3, 6)], backoff_delay(1, 0.5, 8, "3")
        ([0.5, 1.0, 2.0, 8.0], 3.0)
    """
    if retry_after is not None:
        try:
            return float(min(max_backoff, max(0.0, float(retry_after))))
        except ValueError:
            pass  # an HTTP date: use the exponential schedule
    return float(min(max_backoff, backoff * 2 ** (retry - 1)))


def retryable(status: int) -> bool:
    """Whether an HTTP status is worth a retry (timeouts, rate limits, server errors)."""
    return status in (408, 429) or status >= 500


def server_message(exc: Any) -> str:
    """The error text the server sent, short.

    Example:
        >>> server_message(ValueError("boom"))
        'boom'
    """
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        msg = body.get("message") or body.get("error") or body
        text = str(msg.get("message", msg) if isinstance(msg, Mapping) else msg)
    elif body:
        text = str(body)
    else:
        text = str(getattr(exc, "message", "") or exc)
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:299] + "…"
