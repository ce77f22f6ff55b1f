"""Evaluating natural-language questions: rewrite accuracy and ITLR's real-data protocol steps.

Rewrite accuracy compares the logical query an LLM wrote (:func:`pglogic.llm.rewrite.rewrite`) with
a gold formula:

* **exact** — the canonical texts (:func:`pglogic.query.to_string`) are equal once every term is
  normalised (:func:`normalise_term`: case-folded, whitespace collapsed). Operand order counts.
* **equivalent** — both formulas have the same truth table over the gold formula's terms. A
  rewritten term stands for the gold term whose normalised text equals its own; a rewritten term
  that matches no gold term (the model invented or reworded it) makes the rewrite wrong.
  ``match=contains_match`` is a lenient variant reported apart: a rewritten term also stands for
  the one gold term whose words it contains ("wheat exports" for "wheat").

The other steps of ITLR's protocol: :func:`question_messages` asks the model to turn a logical
query into a natural question (their "Query to Question Prompt", in our words) and
:func:`reasoning_messages` is the BRIGHT-style baseline's prompt (the model writes what relevant
documents contain; that text is embedded and searched).

Example:
    >>> from pglogic.query import parse
    >>> gold = parse('"grain" AND NOT "wheat"')
    >>> exact_match(parse('"Grain"  AND NOT "wheat"'), gold)
    True
    >>> equivalent(parse('NOT "wheat" AND "grain"'), gold), exact_match(parse('NOT "wheat" AND "grain"'), gold)
    (True, False)
    >>> equivalent(parse('"grain" AND NOT "wheat exports"'), gold)
    False
    >>> equivalent(parse('"grain" AND NOT "wheat exports"'), gold, match=contains_match)
    True
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pglogic.llm.client import few_shot_messages
from pglogic.query import And, Match, Node, Not, Or, Term, map_terms, terms, to_string
from pglogic.query.ast import leaves

#: More gold terms than this are not compared by truth table (2^n rows).
MAX_TRUTH_TERMS = 12

Matcher = Callable[[str, Sequence[str]], str | None]


def normalise_term(text: str) -> str:
    """A term's text for comparison: case-folded, whitespace collapsed.

    Example:
        >>> normalise_term("  Crude   OIL ")
        'crude oil'
    """
    return " ".join(text.split()).casefold()


def normalise_tree(tree: Node) -> Node:
    """``tree`` with every term normalised (:func:`normalise_term`).

    Example:
        >>> from pglogic.query import parse
        >>> to_string(normalise_tree(parse('"Gold" OR NOT " Silver  Mines"')))
        '"gold" OR NOT "silver mines"'
    """
    return map_terms(tree, normalise_term)


def exact_match(rewritten: Node, gold: Node) -> bool:
    """Equal canonical texts after term normalisation (operand order counts).

    Example:
        >>> from pglogic.query import parse
        >>> exact_match(parse('("a" OR "b") AND "c"'), parse('("A" or "b") and "c"'))
        True
        >>> exact_match(parse('"a" OR "b" AND "c"'), parse('("a" OR "b") AND "c"'))
        False
    """
    return to_string(normalise_tree(rewritten)) == to_string(normalise_tree(gold))


def text_match(term: str, gold_terms: Sequence[str]) -> str | None:
    """The gold term (normalised) equal to ``term`` once normalised, else None.

    Example:
        >>> text_match("Wheat ", ["grain", "wheat"]), text_match("wheat exports", ["wheat"])
        ('wheat', None)
    """
    t = normalise_term(term)
    return t if t in gold_terms else None


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def contains_match(term: str, gold_terms: Sequence[str]) -> str | None:
    """Lenient matching: the gold term equal to ``term``, else the single gold term whose words
    appear contiguously in ``term`` (None when none or several do).

    Example:
        >>> contains_match("wheat exports", ["grain", "wheat"])
        'wheat'
        >>> contains_match("grain and wheat", ["grain", "wheat"]) is None
        True
    """
    exact = text_match(term, gold_terms)
    if exact is not None:
        return exact
    words = _words(term)
    found = []
    for gold in gold_terms:
        g = _words(gold)
        if g and any(words[i : i + len(g)] == g for i in range(len(words) - len(g) + 1)):
            found.append(gold)
    return found[0] if len(found) == 1 else None


def evaluate(tree: Node, truth: Mapping[str, bool]) -> bool:
    """Boolean value of ``tree`` when each term text is ``truth[text]``.

    Example:
        >>> from pglogic.query import parse
        >>> evaluate(parse('"a" AND NOT "b"'), {"a": True, "b": False})
        True
    """
    if isinstance(tree, Term | Match):
        return truth[tree.text]
    if isinstance(tree, Not):
        return not evaluate(tree.child, truth)
    values = (evaluate(c, truth) for c in tree.children)
    return all(values) if isinstance(tree, And) else any(values)


def equivalent(rewritten: Node, gold: Node, *, match: Matcher = text_match) -> bool:
    """Same truth table over the gold formula's terms, rewritten terms mapped by ``match``.

    False when a rewritten term matches no gold term, or when the gold has more than
    :data:`MAX_TRUTH_TERMS` distinct terms.

    Example:
        >>> from pglogic.query import parse
        >>> g = parse('"a" AND NOT ("b" OR "c")')
        >>> equivalent(parse('"a" AND NOT "b" AND NOT "c"'), g)
        True
        >>> equivalent(parse('"a" AND NOT "b" OR "c"'), g), equivalent(parse('"a" AND NOT "d"'), g)
        (False, False)
    """
    g = normalise_tree(gold)
    gold_terms = list(dict.fromkeys(terms(g)))
    if len(gold_terms) > MAX_TRUTH_TERMS:
        return False
    mapping: dict[str, str] = {}
    for t in terms(rewritten):
        m = match(t, gold_terms)
        if m is None:
            return False
        mapping[t] = m
    return same_truth_table(rewritten, g, mapping)


def same_truth_table(rewritten: Node, gold: Node, mapping: Mapping[str, str]) -> bool:
    """Whether ``rewritten`` and ``gold`` agree on every assignment of ``gold``'s terms, each of
    ``rewritten``'s terms taking the value of the gold term ``mapping`` names for it.

    Example:
        >>> from pglogic.query import parse
        >>> same_truth_table(parse('"x" AND NOT "y"'), parse('"a" AND NOT "b"'), {"x": "a", "y": "b"})
        True
    """
    gold_terms = list(dict.fromkeys(t.text for t in leaves(gold)))
    for row in itertools.product((False, True), repeat=len(gold_terms)):
        truth = dict(zip(gold_terms, row, strict=True))
        mapped = {t: truth[m] for t, m in mapping.items()}
        if evaluate(rewritten, mapped) != evaluate(gold, truth):
            return False
    return True


@dataclass(frozen=True)
class Accuracy:
    """One rewrite judged against its gold formula.

    Example:
        >>> from pglogic.query import parse
        >>> judge(parse('"a" OR "b"'), parse('"b" OR "a"'))
        Accuracy(exact=False, equivalent=True, lenient=True)
    """

    exact: bool
    equivalent: bool
    lenient: bool


def judge(rewritten: Node | None, gold: Node) -> Accuracy:
    """Exact, equivalent and lenient-equivalent judgements (all False for a fallback, None).

    Example:
        >>> from pglogic.query import parse
        >>> judge(None, parse('"a"'))
        Accuracy(exact=False, equivalent=False, lenient=False)
    """
    if rewritten is None:
        return Accuracy(False, False, False)
    return Accuracy(
        exact_match(rewritten, gold),
        equivalent(rewritten, gold),
        equivalent(rewritten, gold, match=contains_match),
    )


def _has(tree: Node, kind: type) -> bool:
    if isinstance(tree, kind):
        return True
    if isinstance(tree, Not):
        return _has(tree.child, kind)
    if isinstance(tree, Term | Match):
        return False
    return any(_has(c, kind) for c in tree.children)


#: The categories of :func:`shape`, in report order.
SHAPES = (
    "single term",
    "AND",
    "OR",
    "AND of ORs",
    "OR of ANDs",
    "either ... or",
    "NOT",
    "NOT + OR",
    "NOT over a group",
)


def shape(gold: Node, question: str = "") -> str:
    """The category of a gold formula (and its question) for per-category accuracy.

    Example:
        >>> from pglogic.query import parse
        >>> [shape(parse(q)) for q in ('"a"', '"a" AND NOT ("b" OR "c")', '"a" OR "b" AND "c"')]
        ['single term', 'NOT over a group', 'OR of ANDs']
        >>> shape(parse('("a" OR "b") AND "c"'), "either a or b, with c")
        'either ... or'
    """
    if isinstance(gold, Term):
        return "single term"
    words = re.findall(r"\w+", question.casefold())
    if "either" in words:
        return "either ... or"
    if _has(gold, Not):
        nots = _nots(gold)
        if any(not isinstance(n.child, Term) for n in nots):
            return "NOT over a group"
        return "NOT + OR" if _has(gold, Or) else "NOT"
    if isinstance(gold, Or):
        return "OR of ANDs" if _has(gold, And) else "OR"
    return "AND of ORs" if _has(gold, Or) else "AND"


def _nots(tree: Node) -> list[Not]:
    if isinstance(tree, Not):
        return [tree, *_nots(tree.child)]
    if isinstance(tree, Term | Match):
        return []
    return [n for c in tree.children for n in _nots(c)]


QUESTION_SYSTEM = """\
You turn a logical search query into the question a person would type into a search engine. \
The query combines quoted topics with AND (both), OR (either) and NOT (exclude), with \
parentheses for grouping. Write one fluent English question that asks for exactly the documents \
matching the query: mention every topic with its own words, express AND, OR and NOT naturally \
("and", "or", "but not", "excluding", "neither ... nor") and keep the grouping unambiguous. \
Do not add topics, do not use quotes, parentheses or the words AND/OR/NOT in capitals. Answer \
with the question alone."""

QUESTION_EXAMPLES: tuple[tuple[str, str], ...] = (
    ('"coffee" AND NOT "tea"', "Which documents are about coffee but not about tea?"),
    (
        '("gold" OR "silver") AND "mining"',
        "What is there on mining of gold or silver?",
    ),
    (
        '"python" OR "java" AND NOT "android"',
        "Find documents about python, or about java but not android.",
    ),
)


def question_messages(tree: Node) -> list[dict[str, str]]:
    """Chat messages asking an LLM to write ``tree`` as a natural question.

    Example:
        >>> from pglogic.query import parse
        >>> question_messages(parse('"oil" AND NOT "gas"'))[-1]
        {'role': 'user', 'content': 'Query: "oil" AND NOT "gas"'}
    """
    return few_shot_messages(QUESTION_SYSTEM, QUESTION_EXAMPLES, "Query", to_string(tree))


def clean_question(answer: str) -> str:
    """The question in a model's answer: the first non-empty line, labels and quotes stripped.

    Example:
        >>> clean_question('Question: "Which news is about grain but not wheat?"\\nDone.')
        'Which news is about grain but not wheat?'
    """
    for line in answer.splitlines():
        line = line.strip()
        if not line:
            continue
        line = re.sub(r"^(?:\*\*)?(?:question|answer)\s*:\s*(?:\*\*)?\s*", "", line, flags=re.I)
        return line.strip().strip('"“”').strip()
    return answer.strip()


REASONING_SYSTEM = """\
You help a search engine. Given a question, think briefly about what a relevant document would \
discuss, which topics it must cover and which it must not, then write a short passage (two or \
three sentences) in the style of such a document. Answer with the passage alone."""


def reasoning_messages(question: str) -> list[dict[str, str]]:
    """Chat messages of the BRIGHT-style baseline: the model describes relevant documents.

    Example:
        >>> reasoning_messages("grain but not wheat?")[1]["content"]
        'Question: grain but not wheat?'
    """
    return [
        {"role": "system", "content": REASONING_SYSTEM},
        {"role": "user", "content": f"Question: {question}"},
    ]


# -- the real-data protocol ---------------------------------------------------------------------

#: Method names of :func:`run_protocol` (the last two are references that see the formula).
DENSE_Q = "dense(question)"
BRIGHT = "bright(reasoning)"
PGLOGIC_RW = "pglogic(rewrite)"
PGLOGIC_GOLD = "pglogic(formula)"
DENSE_GOLD = "dense(formula text)"
NL_METHODS = (DENSE_Q, BRIGHT, PGLOGIC_RW, PGLOGIC_GOLD, DENSE_GOLD)


@dataclass
class NLItem:
    """One logical query through the protocol: its question, rewrite, reasoning and judgement.

    Example:
        >>> item = NLItem("q1", '"a" AND NOT "b"', 1, question="a but not b?")
        >>> item.n_negations
        1
    """

    id: str
    formula: str
    n_negations: int
    question: str = ""
    question_seconds: float = 0.0
    rewrite: str = ""
    fallback: bool = False
    rewrite_seconds: float = 0.0
    rewrite_attempts: int = 0
    reasoning: str = ""
    reasoning_seconds: float = 0.0
    accuracy: Accuracy | None = None
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)


def _timed_complete(client: Any, messages: list[dict[str, str]]) -> tuple[str, float]:
    t0 = time.perf_counter()
    completion = client.complete(messages)
    seconds = getattr(completion, "seconds", None)
    return completion.text, float(seconds if seconds is not None else time.perf_counter() - t0)


def write_questions(
    items: Sequence[NLItem],
    trees: Mapping[str, Node],
    client: Any,
    *,
    on_item: Callable[[int, int], None] | None = None,
) -> None:
    """Fill each item's ``question`` from its formula (ITLR's query-to-question step).

    Example:
        >>> write_questions(items, trees, get_client(LLMConfig.resolve()))  # doctest: +SKIP
    """
    for i, item in enumerate(items):
        text, seconds = _timed_complete(client, question_messages(trees[item.id]))
        item.question = clean_question(text) or to_string(trees[item.id])
        item.question_seconds = seconds
        if on_item:
            on_item(i + 1, len(items))


def rewrite_questions(
    items: Sequence[NLItem],
    trees: Mapping[str, Node],
    client: Any,
    *,
    on_item: Callable[[int, int], None] | None = None,
) -> dict[str, Node]:
    """Rewrite each item's question into a logical query; judge it against the formula.

    Returns the tree searched per item (the question as one term on fallback).

    Example:
        >>> searched = rewrite_questions(items, trees, client)  # doctest: +SKIP
    """
    from pglogic.llm.rewrite import rewrite

    out: dict[str, Node] = {}
    for i, item in enumerate(items):
        seconds: list[float] = []
        rw = rewrite(item.question, TimingChat(client, seconds), cache=None)
        item.rewrite = rw.query
        item.fallback = rw.fallback
        item.rewrite_seconds = sum(seconds)
        item.rewrite_attempts = len(seconds)
        item.accuracy = judge(None if rw.fallback else rw.tree, trees[item.id])
        out[item.id] = rw.tree
        if on_item:
            on_item(i + 1, len(items))
    return out


class TimingChat:
    """A chat client wrapper that records the model time of each completion in ``seconds``.

    Example:
        >>> seconds: list[float] = []
        >>> TimingChat(client, seconds).complete(messages)  # doctest: +SKIP
    """

    def __init__(self, client: Any, seconds: list[float]) -> None:
        self.client = client
        self.config = client.config
        self.seconds = seconds

    def complete(
        self, messages: list[dict[str, str]], *, extra: Mapping[str, Any] | None = None
    ) -> Any:
        """The wrapped client's completion (``extra`` passed on when given), its time recorded."""
        completion = (
            self.client.complete(messages, extra=extra) if extra else self.client.complete(messages)
        )
        self.seconds.append(float(completion.seconds))
        return completion

    def output_mode(self) -> str:
        """The wrapped client's output mode (``plain`` when it has none)."""
        mode = getattr(self.client, "output_mode", None)
        return str(mode()) if callable(mode) else "plain"


def write_reasoning(
    items: Sequence[NLItem],
    client: Any,
    *,
    on_item: Callable[[int, int], None] | None = None,
) -> None:
    """Fill each item's ``reasoning`` (the BRIGHT-style baseline's text).

    Example:
        >>> write_reasoning(items, get_client(LLMConfig.resolve(max_tokens=96)))  # doctest: +SKIP
    """
    for i, item in enumerate(items):
        text, seconds = _timed_complete(client, reasoning_messages(item.question))
        item.reasoning = " ".join(text.split()) or item.question
        item.reasoning_seconds = seconds
        if on_item:
            on_item(i + 1, len(items))


def retrieve(
    conn: Any,
    corpus: Any,
    items: Sequence[NLItem],
    gold: Mapping[str, Node],
    searched: Mapping[str, Node],
    *,
    k: int = 100,
    embedder: Any = None,
) -> dict[str, dict[str, list[str]]]:
    """Rank the corpus for every item with every method of :data:`NL_METHODS`.

    Example:
        >>> runs = retrieve(conn, corpus, items, gold, searched)  # doctest: +SKIP
        >>> sorted(runs) == sorted(NL_METHODS)  # doctest: +SKIP
        True
    """
    from pglogic.embed.registry import get_query_embedder
    from pglogic.engine.compile import SearchOptions, compile_query
    from pglogic.eval.baselines import QUERY_VECTOR, single_vector
    from pglogic.query import positive_terms, to_text
    from pglogic.store.search import execute, server_has_iterative_scan

    embedder = embedder or get_query_embedder(corpus.model)
    iterative = server_has_iterative_scan(conn)
    one = single_vector(corpus, k)
    runs: dict[str, dict[str, list[str]]] = {m: {} for m in NL_METHODS}

    def dense(text: str) -> list[str]:
        vec = embedder.embed([text])[0]
        return [h.external_id for h in execute(conn, one, {QUERY_VECTOR: vec})]

    def logical(tree: Node) -> list[str]:
        opts = SearchOptions(k=k, exact=not positive_terms(tree))
        compiled = compile_query(tree, corpus, opts, server_has_iterative_scan=iterative)
        texts = compiled.terms  # the terms and the AND texts
        vectors = dict(zip(texts, embedder.embed(texts), strict=True))
        return [h.external_id for h in execute(conn, compiled, dict(vectors))]

    for item in items:
        runs[DENSE_Q][item.id] = dense(item.question)
        runs[BRIGHT][item.id] = dense(item.reasoning or item.question)
        runs[PGLOGIC_RW][item.id] = logical(searched[item.id])
        runs[PGLOGIC_GOLD][item.id] = logical(gold[item.id])
        runs[DENSE_GOLD][item.id] = dense(to_text(gold[item.id]))
    return runs


def sample_queries(queries: Sequence[Any], n_not: int, n_plain: int, seed: int = 0) -> list[Any]:
    """A seeded sample of derived queries: ``n_not`` with a NOT and ``n_plain`` without.

    The dataset's own queries (group ``given``) are left out; the result is sorted by id.

    Example:
        >>> sample_queries(derive_queries(ds).queries, 20, 20)  # doctest: +SKIP
    """
    import random

    derived = [q for q in queries if q.group != "given"]
    nots = sorted((q for q in derived if q.n_negations > 0), key=lambda q: q.id)
    plain = sorted((q for q in derived if q.n_negations == 0), key=lambda q: q.id)
    rng = random.Random(seed)
    chosen = rng.sample(nots, min(n_not, len(nots))) + rng.sample(plain, min(n_plain, len(plain)))
    return sorted(chosen, key=lambda q: q.id)


def negation_bucket(n: int) -> str:
    """The group of a query by its number of NOTs: ``0``, ``1`` or ``2+``.

    Example:
        >>> [negation_bucket(n) for n in (0, 1, 2, 3)]
        ['0', '1', '2+', '2+']
    """
    return str(n) if n < 2 else "2+"


def _latency(seconds: Sequence[float]) -> dict[str, float]:
    xs = sorted(seconds)
    if not xs:
        return {"p50_s": math.nan, "p95_s": math.nan, "mean_s": math.nan}

    def pct(q: float) -> float:
        pos = (len(xs) - 1) * q / 100
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    return {
        "p50_s": round(pct(50), 3),
        "p95_s": round(pct(95), 3),
        "mean_s": round(sum(xs) / len(xs), 3),
    }


def summarise_items(
    items: Sequence[NLItem],
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]],
    keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """nDCG@10 and NegRecall@10 per method (overall and by number of NOTs), Wilcoxon tests of
    the rewrite against the question baselines, rewrite accuracy, fallback rate and latencies.

    ``per_query[method][key]`` are :func:`pglogic.eval.metrics.evaluate_run` scores; ``keys`` name the
    items in ``per_query`` (default: their ids).

    Example:
        >>> summarise_items(items, per_query)["rewrite"]["equivalent"]  # doctest: +SKIP
        0.55
    """
    from pglogic.eval.metrics import aggregate, paired_test

    keys = list(keys) if keys is not None else [i.id for i in items]
    by_key = dict(zip(keys, items, strict=True))
    out: dict[str, Any] = {"queries": len(items)}
    for metric in ("ndcg@10", "negrecall@10"):
        out[metric] = {m: aggregate(per_query[m], keys)[metric] for m in NL_METHODS}
    buckets: dict[str, Any] = {}
    for b in ("0", "1", "2+"):
        sub = [k for k in keys if negation_bucket(by_key[k].n_negations) == b]
        if not sub:
            continue
        buckets[b] = {"queries": len(sub)}
        for metric in ("ndcg@10", "negrecall@10"):
            buckets[b][metric] = {m: aggregate(per_query[m], sub)[metric] for m in NL_METHODS}
    out["by_negations"] = buckets
    nd = {m: {k: per_query[m][k]["ndcg@10"] for k in keys} for m in NL_METHODS}
    tests = {}
    for base in (DENSE_Q, BRIGHT):
        p = paired_test(nd[base], nd[PGLOGIC_RW])
        tests[f"{PGLOGIC_RW} vs {base}"] = {"delta": p.delta, "p": p.p_value, "n": p.n}
    out["wilcoxon_ndcg@10"] = tests
    n = max(1, len(items))
    acc = [i.accuracy for i in items if i.accuracy is not None]
    out["rewrite"] = {
        "exact": sum(a.exact for a in acc) / n,
        "equivalent": sum(a.equivalent for a in acc) / n,
        "lenient": sum(a.lenient for a in acc) / n,
        "fallback_rate": sum(i.fallback for i in items) / n,
        "retry_rate": sum(i.rewrite_attempts > 1 for i in items) / n,
        "latency": _latency([i.rewrite_seconds for i in items]),
    }
    out["question_latency"] = _latency([i.question_seconds for i in items])
    out["reasoning_latency"] = _latency([i.reasoning_seconds for i in items])
    return out


def item_json(item: NLItem) -> dict[str, Any]:
    """One item as JSON (question, rewrite, judgement, per-method nDCG@10 and NegRecall@10).

    Example:
        >>> item_json(NLItem("q1", '"a"', 0))["fallback"]
        False
    """
    acc = item.accuracy
    return {
        "id": item.id,
        "formula": item.formula,
        "n_negations": item.n_negations,
        "question": item.question,
        "rewrite": item.rewrite,
        "fallback": item.fallback,
        "exact": acc.exact if acc else False,
        "equivalent": acc.equivalent if acc else False,
        "lenient": acc.lenient if acc else False,
        "question_s": round(item.question_seconds, 3),
        "rewrite_s": round(item.rewrite_seconds, 3),
        "reasoning_s": round(item.reasoning_seconds, 3),
        "reasoning": item.reasoning,
        "ndcg@10": {m: round(v["ndcg@10"], 4) for m, v in item.metrics.items()},
        "negrecall@10": {m: v["negrecall@10"] for m, v in item.metrics.items()},
    }


def evaluate_nl(
    api: Any,
    ds: Any,
    queries: Sequence[Any],
    *,
    question_client: Any,
    rewrite_client: Any,
    reasoning_client: Any,
    corpus_name: str,
    k: int = 100,
    on_stage: Callable[[str], Callable[[int, int], None] | None] | None = None,
) -> tuple[list[NLItem], dict[str, dict[str, dict[str, float]]]]:
    """Run the whole protocol on ``queries`` of dataset ``ds`` (corpus ``corpus_name`` ready).

    Returns the items and ``per_query[method][query id]`` metric scores. ``on_stage(name)``
    returns a progress callback for each stage (``questions``, ``rewrites``, ``reasoning``).

    Example:
        >>> items, per_query = evaluate_nl(PgLogic(), ds, chosen, question_client=c,  # doctest: +SKIP
        ...     rewrite_client=c, reasoning_client=c, corpus_name="eval_reuters21578")
    """
    from pglogic.eval.metrics import evaluate_run

    def stage(name: str) -> Callable[[int, int], None] | None:
        return on_stage(name) if on_stage is not None else None

    items = [NLItem(q.id, q.logical, q.n_negations) for q in queries]
    trees = {q.id: q.tree for q in queries}
    write_questions(items, trees, question_client, on_item=stage("questions"))
    searched = rewrite_questions(items, trees, rewrite_client, on_item=stage("rewrites"))
    write_reasoning(items, reasoning_client, on_item=stage("reasoning"))
    corpus = api.corpus(corpus_name)
    with api.connect() as conn:
        runs = retrieve(conn, corpus, items, trees, searched, k=k)
    relevant = {q.id: q.relevant for q in queries}
    negatives = {q.id: q.negatives for q in queries}
    per_query = {m: evaluate_run(runs[m], relevant, negatives) for m in NL_METHODS}
    for item in items:
        item.metrics = {m: per_query[m][item.id] for m in NL_METHODS}
    return items, per_query


__all__ = [
    "BRIGHT",
    "DENSE_Q",
    "NL_METHODS",
    "PGLOGIC_RW",
    "SHAPES",
    "Accuracy",
    "NLItem",
    "contains_match",
    "equivalent",
    "evaluate",
    "evaluate_nl",
    "exact_match",
    "item_json",
    "judge",
    "negation_bucket",
    "normalise_term",
    "normalise_tree",
    "question_messages",
    "reasoning_messages",
    "retrieve",
    "rewrite_questions",
    "same_truth_table",
    "sample_queries",
    "shape",
    "summarise_items",
    "text_match",
    "write_questions",
    "write_reasoning",
]
