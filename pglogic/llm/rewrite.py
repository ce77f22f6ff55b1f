"""Natural-language questions to logical queries: ITLR's first step, done by an LLM.

The model gets instructions in the spirit of ITLR's "Logical Formula Prompt" (decompose the
question into terms in its own words, quote them, combine them with AND, OR, NOT and parentheses)
and few-shot examples covering NOT, either/or, neither/nor, ", or" and nested groups. The answer
is constrained where the server can (:func:`constraint`, :mod:`pglogic.llm.grammar`): a GBNF
grammar whose terms are made of the question's words for llama.cpp, a JSON schema for servers with
structured outputs. It is cleaned (:func:`extract_formula`: code fences, "Query:" labels, prose
on other lines, curly quotes), must parse with :func:`pglogic.query.parse` and keep a positive
term; then :func:`pglogic.llm.wording.refine` repairs it against the question (reworded or
dropped terms, NOTs on the wrong group, an "either ... or" joined by AND). An answer that does not
parse (possible without a grammar) is asked again once, with the parser's message and column; if
that answer fails too, the question is searched as plain text (dense retrieval) and the
:class:`Rewrite` says so (``fallback`` and ``reason``).

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

import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from pglogic.errors import QueryError, QuerySyntaxError
from pglogic.llm.client import Completion, LLMConfig, few_shot_messages
from pglogic.llm.grammar import (
    answer_to_query,
    grammar_text,
    mixed_operators,
    query_gbnf,
    question_words,
    response_format,
    tree_to_json,
)
from pglogic.llm.wording import question_names, refine
from pglogic.query import DEFAULT_MAX_TERMS, Node, Term, parse, positive_terms, terms
from pglogic.store.search import Hit, SearchResult

SYSTEM_PROMPT = """\
You turn a search question into a logical query for a semantic search engine that scores \
documents against each quoted term and combines the scores with AND, OR and NOT.

1. Most questions are about one topic or one situation: answer with one term made of the \
question's topic words. Do not split a question at "with", "for", "in", "on", "when" or "and" \
when it names one situation.
2. Terms copy the question's own words in the question's order. Leave out question words \
("how do I", "why does", "can I", "is it possible to", "what is the best way to") and request \
words ("articles", "papers", "questions about", "reviews of").
3. OR: when "or" lists alternatives that would each satisfy the asker, write each alternative \
as a term, join them with OR, and AND the context they share to the group.
4. NOT: only when the asker wants documents without something: "but not X", "except X", \
"excluding X", "other than X", "apart from X", "besides X", "X-free", "neither X nor Y", and \
"without X", "no X", "not X", "that don't use X", "that aren't X" when X is a thing to leave \
out. NOT covers the excluded thing alone, without the cue word; several excluded things are \
NOT ("X" OR "Y").
5. A negation that describes the problem or the situation is not an exclusion: "bread not \
rising", "motor won't start", "without leaving brush marks", "yogurt instead of sour cream" (a \
substitute). Keep it inside the term, with its negation word.
6. Put every OR group in parentheses, opened before its first alternative: ("X" OR "Y") AND \
"Z". Start with a term or a group to look for, not a negated one."""

#: The last instruction in plain and grammar mode.
FORMAT_PLAIN = "Answer with the logical query alone, on one line."

#: The last instruction in structured-output (JSON) mode.
FORMAT_JSON = (
    'Answer with JSON only: {"query": node}, where a node is {"term": "words"}, '
    '{"not": node}, {"and": [node, node, ...]} or {"or": [node, node, ...]}.'
)

#: Few-shot examples: (question, logical query). None shares a question or a domain sentence
#: with ``bench/quality/nl``'s question sets; they show one-topic questions as one term, content
#: negation kept in a term, a substitute, NOT after several cues, OR with shared context,
#: neither/nor, and a group.
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("How long does cooked quinoa keep in the freezer?", '"cooked quinoa keep in the freezer"'),
    ("Why won't my lawn mower start after winter?", '"lawn mower won\'t start after winter"'),
    ("Bird photography with telephoto lenses", '"bird photography with telephoto lenses"'),
    ("Roof insulation, but not fiberglass", '"roof insulation" AND NOT "fiberglass"'),
    ("Soup recipes that don't use cream", '"soup recipes" AND NOT "cream"'),
    ("Hiking trails in Utah besides Zion", '"hiking trails in Utah" AND NOT "Zion"'),
    ("Whipping cream without a mixer", '"whipping cream" AND NOT "mixer"'),
    (
        "Painting a room without leaving brush marks",
        '"painting a room without leaving brush marks"',
    ),
    ("Can I use yogurt instead of sour cream in a dip?", '"yogurt instead of sour cream in a dip"'),
    ("Sunscreen that isn't greasy", '"sunscreen" AND NOT "greasy"'),
    (
        "Pottery glazes that contain neither lead nor barium",
        '"pottery glazes" AND NOT ("lead" OR "barium")',
    ),
    (
        "Jazz or blues concerts in Chicago, but not festivals",
        '("jazz concerts" OR "blues concerts") AND "Chicago" AND NOT "festivals"',
    ),
    (
        "Either wooden boats or sailboats for sale in Maine",
        '("wooden boats" OR "sailboats") AND "sale in Maine"',
    ),
    (
        "Battery recycling in Germany or Japan, excluding lead batteries",
        '"battery recycling" AND ("Germany" OR "Japan") AND NOT "lead batteries"',
    ),
    (
        "Chess openings for beginners, or endgame puzzles without computers",
        '"chess openings for beginners" OR ("endgame puzzles" AND NOT "computers")',
    ),
)

CACHE_SIZE = 1024


class Chat(Protocol):
    """What :func:`rewrite` needs from a client (:class:`pglogic.llm.client.ChatClient` is one)."""

    config: LLMConfig

    def complete(
        self, messages: list[dict[str, str]], *, extra: Mapping[str, Any] | None = None
    ) -> Completion:
        """Return the model's answer to ``messages`` (``extra``: more request fields)."""
        ...

    def output_mode(self) -> str:
        """``grammar``, ``json`` or ``plain``: how to constrain the answer."""
        ...


def system_prompt(mode: str = "plain") -> str:
    """The instructions for ``mode`` (``json`` asks for a JSON tree, the others for the query).

    Example:
        >>> system_prompt("json").endswith('{"or": [node, node, ...]}.')
        True
    """
    return SYSTEM_PROMPT + "\n" + (FORMAT_JSON if mode == "json" else FORMAT_PLAIN)


def example_answer(query: str, mode: str = "plain") -> str:
    """A few-shot answer as the model should write it in ``mode``.

    Example:
        >>> example_answer('"a" AND NOT "b"', "json")
        '{"query": {"and": [{"term": "a"}, {"not": {"term": "b"}}]}}'
    """
    if mode != "json":
        return grammar_text(parse(query), top=True)
    return json.dumps({"query": tree_to_json(parse(query))}, ensure_ascii=False)


def build_messages(question: str, mode: str = "plain") -> list[dict[str, str]]:
    """The chat messages that ask for ``question``'s logical query (instructions, examples, it).

    Example:
        >>> msgs = build_messages("gold but not silver")
        >>> [m["role"] for m in msgs[:3]], msgs[-1]
        (['system', 'user', 'assistant'], {'role': 'user', 'content': 'Question: gold but not silver'})
    """
    shots = [(q, example_answer(f, mode)) for q, f in EXAMPLES]
    return few_shot_messages(system_prompt(mode), shots, "Question", question)


def constraint(question: str, mode: str) -> dict[str, Any]:
    """The request fields that constrain the answer in ``mode``: a GBNF ``grammar`` whose terms
    are made of the question's words, a JSON-schema ``response_format``, or nothing.

    Example:
        >>> sorted(constraint("oil, not gas", "grammar")), constraint("oil", "plain")
        (['grammar'], {})
        >>> constraint("oil, not gas", "grammar")["grammar"].splitlines()[-2]
        'content ::= "oil" | "gas"'
    """
    if mode == "grammar":
        words = question_words(question)
        return {"grammar": query_gbnf(words or None, question_names(question))}
    if mode == "json":
        return {"response_format": response_format()}
    return {}


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

    ``query`` is the text of ``tree`` with every group bracketed
    (:func:`pglogic.llm.grammar.grammar_text`; or, on fallback, the question itself, searched
    as one plain term); ``answers`` are the model's raw answers (one, or two after a retry);
    ``seconds`` is this call's wall-clock time (about 0 when ``cached``); ``attempts`` counts
    HTTP requests, retries included. ``output`` is how the answer was constrained (``grammar``,
    ``json``, ``plain``), ``repairs`` what :func:`pglogic.llm.wording.refine` changed in it and
    ``model_query`` the query as the model wrote it (before the checks; None on fallback).

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
    output: str = "plain"
    repairs: tuple[str, ...] = ()
    model_query: str | None = None


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


def mixing_message(column: int) -> str:
    """The follow-up that asks the model to say with parentheses how AND and OR group.

    Example:
        >>> print(mixing_message(12))
        That query mixes AND and OR without parentheses (col 12). Answer again with the same query, with parentheses around each group: ("a" OR "b") AND "c", or "a" OR ("b" AND "c").
    """
    return (
        f"That query mixes AND and OR without parentheses (col {column}). Answer again with the "
        'same query, with parentheses around each group: ("a" OR "b") AND "c", or "a" OR ("b" '
        'AND "c").'
    )


@dataclass(frozen=True)
class Reading:
    """What :func:`interpret` made of an answer: the model's own query and the checked one, and
    the query text it found in the answer (``formula``).

    Example:
        >>> r = interpret('"grain" AND "wheat"', "grain, but not wheat")
        >>> print(r.model_tree, "|", r.tree, "|", r.repairs)
        "grain" AND "wheat" | "grain" AND NOT "wheat" | ('negated "wheat" (excluded in the question)',)
    """

    model_tree: Node
    tree: Node
    repairs: tuple[str, ...]
    formula: str = ""


def interpret(
    answer: str, question: str, *, checks: bool = True, max_terms: int = DEFAULT_MAX_TERMS
) -> Reading:
    """Read a model's ``answer`` to ``question``: JSON or text (:func:`extract_formula`), parsed
    with a positive term (:func:`check_formula`), then with ``checks`` repaired against the
    question (:func:`pglogic.llm.wording.refine`). Raises :class:`QuerySyntaxError`.

    Example:
        >>> print(interpret('{"query": {"term": "bread not rising"}}', "bread not rising?").tree)
        "bread not rising"
    """
    text = " ".join(question.split())
    formula = extract_formula(answer_to_query(answer), max_terms=max_terms)
    tree = check_formula(formula, max_terms=max_terms)
    if not checks:
        return Reading(tree, tree, (), formula)
    refined, notes = refine(tree, text)
    if refined != tree and positive_terms(refined) and len(terms(refined)) <= max_terms:
        return Reading(tree, refined, tuple(notes), formula)
    return Reading(tree, tree, (), formula)


def rewrite(
    question: str,
    client: Chat,
    *,
    cache: RewriteCache | None = CACHE,
    max_terms: int = DEFAULT_MAX_TERMS,
    checks: bool = True,
) -> Rewrite:
    """Ask the model behind ``client`` for ``question``'s logical query (one retry, then fallback).

    The answer is constrained as :meth:`Chat.output_mode` says (:func:`constraint`) and read by
    :func:`interpret`. An answer that does not parse is sent back once with the parser's message;
    one that mixes AND and OR without parentheses (possible in ``plain`` mode) is sent back once to
    be bracketed (:func:`mixing_message`), and a second such answer is read by precedence.

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
    mode = client.output_mode()
    messages = build_messages(text, mode)
    extra = constraint(text, mode)
    answers: list[str] = []
    attempts = 0
    error: QuerySyntaxError | None = None
    for attempt in range(2):
        completion = client.complete(messages, extra=extra or None)
        answers.append(completion.text)
        attempts += completion.attempts
        if extra and not completion.constrained:
            mode, extra = "plain", {}
        try:
            reading = interpret(completion.text, text, checks=checks, max_terms=max_terms)
        except QuerySyntaxError as exc:
            error = exc
            follow_up = repair_message(exc)
        else:
            column = mixed_operators(reading.formula)
            if column is None or attempt == 1:
                notes = reading.repairs
                if column is not None:
                    notes = ("AND binds tighter than OR (the model's answer had no parentheses)",
                             *notes)  # fmt: skip
                result = Rewrite(
                    text,
                    grammar_text(reading.tree),
                    reading.tree,
                    client.config.model,
                    tuple(answers),
                    attempts,
                    time.perf_counter() - start,
                    output=mode,
                    repairs=notes,
                    model_query=grammar_text(reading.model_tree),
                )
                if cache is not None:
                    cache.put(key, result)
                return result
            follow_up = mixing_message(column)
        messages = [
            *messages,
            {"role": "assistant", "content": completion.text[:2000]},
            {"role": "user", "content": follow_up},
        ]
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
        output=mode,
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
    "Reading",
    "Rewrite",
    "RewriteCache",
    "build_messages",
    "check_formula",
    "constraint",
    "example_answer",
    "extract_formula",
    "interpret",
    "mixing_message",
    "repair_message",
    "rewrite",
    "system_prompt",
]
