"""Natural-language questions to logical queries: ITLR's first step, done by an LLM.

The model gets instructions in the spirit of ITLR's "Logical Formula Prompt" (decompose the
question into atomic search phrases, quote them, combine them with AND, OR, NOT and parentheses,
answer with the formula only) and few-shot examples covering NOT, mixed AND/OR and nested
parentheses. Its answer is cleaned (:func:`extract_formula`: code fences, "Query:" labels,
prose on other lines, curly quotes) and must parse with :func:`pglogic.query.parse` and keep a
positive term. If it does not, the model is asked once more, with the parser's message and
column; if that answer fails too, the question is searched as plain text (dense retrieval) and
the :class:`Rewrite` says so (``fallback`` and ``reason``).

Successful rewrites are cached in process (an LRU of :data:`CACHE_SIZE` entries keyed by
endpoint, model and the question with its whitespace collapsed); pass ``cache=None`` to always
ask the model, e.g. when measuring rewrite latency.

Example:
    >>> extract_formula('Logical query: ("gold" OR "silver") AND NOT "mining"')
    '("gold" OR "silver") AND NOT "mining"'
    >>> rw = rewrite("grain news, not about wheat", get_client(LLMConfig.resolve()))  # doctest: +SKIP
    >>> rw.query, rw.fallback  # doctest: +SKIP
    ('"grain" AND NOT "wheat"', False)
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Protocol

from pglogic.errors import QueryError, QuerySyntaxError
from pglogic.llm.client import Completion, LLMConfig, few_shot_messages
from pglogic.query import DEFAULT_MAX_TERMS, Node, Term, parse, positive_terms, to_string
from pglogic.store.search import Hit, SearchResult

SYSTEM_PROMPT = """\
You translate a search question into a logical query for a semantic search engine. The engine \
embeds every quoted phrase separately, scores each document against each phrase, and combines \
the scores with the operators, so:

1. Split the question into short, atomic search phrases, one concept each. Copy each phrase's \
words from the question as they are written (same word forms, singular or plural); do not add \
words such as "news", "articles" or "papers", and do not add concepts the question does not ask \
for. A question about a single concept is a single phrase; two concepts joined by "and" are two \
phrases.
2. Put every phrase in double quotes.
3. Join the phrases with AND (the document must be about both), OR (either one is enough) and \
NOT (the document must not be about it). "Without", "except", "excluding", "other than", "not" \
and "neither ... nor" all mean NOT.
4. NOT binds tighter than AND, and AND binds tighter than OR. Whenever a query mixes AND and OR, \
or a NOT applies to more than one phrase, add parentheses to make the grouping explicit; \
parentheses may be nested.
5. Keep at least one phrase that is not negated: the query must say what to find, not only what \
to avoid.
6. Answer with the logical query alone, on one line: no explanation, no label, no code block."""

#: Few-shot examples: (question, logical query). They cover a single phrase, NOT, OR under AND,
#: AND under OR and NOT over a nested group, so that a small model sees where parentheses go.
EXAMPLES: tuple[tuple[str, str], ...] = (
    (
        "Which news stories are about grain but not about wheat?",
        '"grain" AND NOT "wheat"',
    ),
    (
        "What are the health benefits of vitamin D?",
        '"health benefits of vitamin D"',
    ),
    (
        "How to make pizza dough without a mixer",
        '"make pizza dough" AND NOT "mixer"',
    ),
    (
        "Recipes with chicken or tofu that are not spicy",
        '"recipes" AND ("chicken" OR "tofu") AND NOT "spicy"',
    ),
    (
        "News about oil prices and OPEC, or anything on natural gas supply",
        '("oil prices" AND "OPEC") OR "natural gas supply"',
    ),
    (
        "Studies of solar panels or wind turbines in cold climates, but no cost analyses",
        '("solar panels" OR "wind turbines") AND "cold climates" AND NOT "cost analyses"',
    ),
    (
        "Films set in space that are neither comedies nor horror films",
        '"films set in space" AND NOT ("comedies" OR "horror films")',
    ),
    (
        "Articles on the health effects of coffee or tea, leaving out caffeine during pregnancy "
        "or in children",
        '("coffee" OR "tea") AND "health effects" AND NOT ("caffeine" AND ("pregnancy" OR '
        '"children"))',
    ),
)

CACHE_SIZE = 1024


class Chat(Protocol):
    """What :func:`rewrite` needs from a client (:class:`pglogic.llm.client.ChatClient` is one)."""

    config: LLMConfig

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        """Return the model's answer to ``messages``."""
        ...


def build_messages(question: str) -> list[dict[str, str]]:
    """The chat messages that ask for ``question``'s logical query (instructions, examples, it).

    Example:
        >>> msgs = build_messages("gold but not silver")
        >>> [m["role"] for m in msgs[:3]], msgs[-1]
        (['system', 'user', 'assistant'], {'role': 'user', 'content': 'Question: gold but not silver'})
    """
    return few_shot_messages(SYSTEM_PROMPT, EXAMPLES, "Question", question)


def repair_message(error: QuerySyntaxError) -> str:
    """The follow-up that tells the model why its answer was refused (message, caret).

    Example:
        >>> print(repair_message(QuerySyntaxError("Unbalanced ) at col 5", query='"a" )', column=5)))
        That query is not valid: Unbalanced ) at col 5
          "a" )
              ^
        Answer again with only the corrected logical query: double-quoted phrases joined by AND, OR, NOT and parentheses.
    """
    return (
        f"That query is not valid: {error.pretty()}\n"
        "Answer again with only the corrected logical query: double-quoted phrases joined by "
        "AND, OR, NOT and parentheses."
    )


def check_formula(text: str, *, max_terms: int = DEFAULT_MAX_TERMS) -> Node:
    """Parse ``text`` and require a positive term; raise :class:`QuerySyntaxError` otherwise.

    Example:
        >>> print(check_formula('"a" or "b"'))
        "a" OR "b"
        >>> check_formula('NOT "a"')
        Traceback (most recent call last):
        ...
        pglogic.errors.QuerySyntaxError: Every term is negated at col 1: add a term to look for, e.g. "x" AND NOT "y"
    """
    tree = parse(text, max_terms=max_terms)
    if not positive_terms(tree):
        raise QuerySyntaxError(
            'Every term is negated at col 1: add a term to look for, e.g. "x" AND NOT "y"',
            query=text,
            column=1,
        )
    return tree


_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S | re.I)
_FENCE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)
_BULLET = re.compile(r"^(?:[-*>•]|\d+[.)])\s+")
_CURLY = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'"})


def _clean(line: str) -> str:
    """Strip markdown and a leading label ("Query:", "The logical query is:") from one line."""
    line = line.strip().translate(_CURLY)
    line = _BULLET.sub("", line)
    first = min((i for i in (line.find('"'), line.find("'"), line.find("(")) if i >= 0), default=-1)
    colon = line.find(":")
    if colon >= 0 and (first < 0 or colon < first):
        line = line[colon + 1 :]
    line = line.strip().strip("*_").strip()
    if len(line) >= 2 and line[0] == line[-1] == "`":
        line = line.strip("`").strip()
    return line.rstrip(".;,").strip()


def extract_formula(answer: str, *, max_terms: int = DEFAULT_MAX_TERMS) -> str:
    """Find the logical query in a model's answer.

    Tries, in order, the content of each code fence, the whole answer, then each line with its
    label and markdown removed, and returns the first that :func:`check_formula` accepts; else
    the best guess (the first cleaned line with a quote), so the parser's error is about it.
    ``<think>`` blocks of reasoning models are dropped first.

    Example:
        >>> extract_formula('```\\n"oil" AND NOT "gas"\\n```')
        '"oil" AND NOT "gas"'
        >>> extract_formula('Sure! Here it is.\\n**Query:** “coffee” OR “tea”.\\nHope it helps.')
        '"coffee" OR "tea"'
        >>> extract_formula('("a" OR "b")\\n  AND NOT "c"')
        '("a" OR "b")\\n  AND NOT "c"'
        >>> extract_formula("grain news without wheat")
        'grain news without wheat'
    """
    text = _THINK.sub("", answer).strip()
    fences = [str(f).strip() for f in _FENCE.findall(text)]
    lines = [_clean(line) for line in text.splitlines()]
    candidates = [*fences, text, *(c for c in (_clean(f) for f in fences) if c), *lines]
    for candidate in candidates:
        if not candidate:
            continue
        try:
            check_formula(candidate, max_terms=max_terms)
        except QuerySyntaxError:
            continue
        return candidate
    quoted = [c for c in lines if '"' in c or "'" in c]
    if quoted:
        return quoted[0]
    return fences[0] if fences else _clean(text) or text


@dataclass(frozen=True)
class Rewrite:
    """The logical query an LLM wrote for a question, or the dense fallback and why.

    ``query`` is the canonical text of ``tree`` (or, on fallback, the question itself, searched
    as one plain term); ``answers`` are the model's raw answers (one, or two after a retry);
    ``seconds`` is this call's wall-clock time (about 0 when ``cached``); ``attempts`` counts
    HTTP requests, retries included.

    Example:
        >>> rw = Rewrite("cats, not dogs", '"cats" AND NOT "dogs"', parse('"cats" AND NOT "dogs"'),
        ...              model="qwen", answers=('"cats" AND NOT "dogs"',), attempts=1, seconds=0.3)
        >>> rw.fallback, rw.reason
        (False, None)
    """

    question: str
    query: str
    tree: Node
    model: str
    answers: tuple[str, ...]
    attempts: int
    seconds: float
    fallback: bool = False
    reason: str | None = None
    cached: bool = False


class RewriteCache:
    """A thread-safe in-process LRU of successful rewrites, keyed by (base URL, model, question).

    Example:
        >>> cache = RewriteCache(size=1)
        >>> cache.put(("u", "m", "q1"), "r1"); cache.put(("u", "m", "q2"), "r2")
        >>> cache.get(("u", "m", "q1")), cache.get(("u", "m", "q2")), len(cache)
        (None, 'r2', 1)
    """

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str, str], object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> object | None:
        """Return the cached value (and mark it recently used), or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: tuple[str, str, str], value: object) -> None:
        """Store ``value``, evicting the least recently used entries beyond ``size``."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


#: The process-wide cache used by default.
CACHE = RewriteCache()


def rewrite(
    question: str,
    client: Chat,
    *,
    cache: RewriteCache | None = CACHE,
    max_terms: int = DEFAULT_MAX_TERMS,
) -> Rewrite:
    """Ask the model behind ``client`` for ``question``'s logical query (one retry, then fallback).

    Raises :class:`~pglogic.errors.LLMError` when the endpoint fails (after its own retries) and
    :class:`~pglogic.errors.QueryError` for an empty question.

    Example:
        >>> rw = rewrite("oil prices but not gas", get_client(LLMConfig.resolve()))  # doctest: +SKIP
        >>> rw.query, rw.fallback, f"{rw.seconds:.2f}s"  # doctest: +SKIP
        ('"oil prices" AND NOT "gas"', False, '0.84s')
    """
    start = time.perf_counter()
    text = " ".join(question.split())
    if not text:
        raise QueryError("Empty question")
    key = (client.config.base_url, client.config.model, text)
    if cache is not None:
        hit = cache.get(key)
        if isinstance(hit, Rewrite):
            return replace(hit, cached=True, seconds=time.perf_counter() - start)
    messages = build_messages(text)
    answers: list[str] = []
    attempts = 0
    error: QuerySyntaxError | None = None
    for _ in range(2):
        completion = client.complete(messages)
        answers.append(completion.text)
        attempts += completion.attempts
        formula = extract_formula(completion.text, max_terms=max_terms)
        try:
            tree = check_formula(formula, max_terms=max_terms)
        except QuerySyntaxError as exc:
            error = exc
            messages = [
                *messages,
                {"role": "assistant", "content": completion.text[:2000]},
                {"role": "user", "content": repair_message(exc)},
            ]
            continue
        result = Rewrite(
            text,
            to_string(tree),
            tree,
            client.config.model,
            tuple(answers),
            attempts,
            time.perf_counter() - start,
        )
        if cache is not None:
            cache.put(key, result)
        return result
    return Rewrite(
        text,
        text,
        Term(text),
        client.config.model,
        tuple(answers),
        attempts,
        time.perf_counter() - start,
        fallback=True,
        reason=f"the model's answer was not a valid query twice ({error}); "
        "searched the question as plain text",
    )


@dataclass
class AskResult:
    """What :meth:`pglogic.PgLogic.ask` returns: the rewrite and the search it ran.

    ``search.timings`` has a ``rewrite`` entry (seconds) besides the search's own.

    Example:
        >>> res = PgLogic().ask("news", "grain, but not wheat")  # doctest: +SKIP
        >>> res.query, res.fallback, [h.external_id for h in res.hits][:3]  # doctest: +SKIP
        ('"grain" AND NOT "wheat"', False, ['1054', '877', '2301'])
    """

    rewrite: Rewrite
    search: SearchResult

    @property
    def query(self) -> str:
        """The logical query searched (the question itself on fallback)."""
        return self.rewrite.query

    @property
    def fallback(self) -> bool:
        """True when the model's answers did not parse and the question was searched densely."""
        return self.rewrite.fallback

    @property
    def hits(self) -> list[Hit]:
        """The ranked hits."""
        return self.search.hits


__all__ = [
    "CACHE",
    "EXAMPLES",
    "SYSTEM_PROMPT",
    "AskResult",
    "Rewrite",
    "RewriteCache",
    "build_messages",
    "check_formula",
    "extract_formula",
    "repair_message",
    "rewrite",
]
