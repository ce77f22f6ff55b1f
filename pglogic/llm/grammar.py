"""Constrained output for the rewrite: a GBNF grammar of the query language, and a JSON schema.

llama.cpp servers (llama-cpp-python's and ``llama-server``) accept a ``grammar`` field (GBNF) in
``/v1/chat/completions`` and sample only tokens the grammar allows, so the answer always parses.
:func:`query_gbnf` writes the grammar of :mod:`pglogic.query` in its canonical form (operators in
capitals, single spaces, double-quoted terms) with the parser's precedence (NOT > AND > OR) and one
more rule: the first term is not negated, so every answer has a term to look for. With a
``vocabulary`` (:func:`question_words`) a term may only be made of the question's own words, so the
model cannot reword, pluralise or invent; the words that carry logic ("or", "not", "without",
"neither"...) are not in it, so an OR or a NOT cannot be folded into a term.

Other OpenAI-compatible servers get structured outputs instead: ``response_format`` with
:data:`QUERY_SCHEMA`, a JSON tree (``{"term": ...}``, ``{"not": ...}``, ``{"and": [...]}``,
``{"or": [...]}`` under ``"query"``) that :func:`tree_from_json` turns into a query; the tree is
well formed by construction. :func:`answer_to_query` reads either form.

Example:
    >>> print(query_gbnf().splitlines()[0])
    root ::= first-and (" OR " and)*
    >>> question_words("Gold or silver, but not mining companies")
    ['Gold', 'silver', 'mining', 'companies']
    >>> answer_to_query('{"query": {"and": [{"term": "gold"}, {"not": {"term": "mining"}}]}}')
    '"gold" AND NOT "mining"'
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pglogic.query import And, Match, Node, Not, Or, Term, to_string


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words that carry the logic of a question; never part of a term in the constrained grammar.
LOGIC_WORDS = _wordset("or nor not neither either without except excluding but than no none")

_WORD = re.compile(r"[^\W_](?:[\w'’&+#./-]*[\w+#])?")

#: A term's text in the grammar without a vocabulary: no quote, backslash or control character,
#: and no space at either end.
_FREE_TERM = r'term ::= "\"" [^"\\\x00-\x1f ] ([^"\\\x00-\x1f]* [^"\\\x00-\x1f ])? "\""'

_RULES_TAIL = (
    'and ::= unary (" AND " unary)*',
    'first-and ::= first (" AND " unary)*',
    'unary ::= "NOT " atom | atom',
    'first ::= term | "(" root ")"',
    'atom ::= term | "(" root ")"',
)


def question_words(question: str) -> list[str]:
    """The question's words a term may use: as written, in order, deduplicated, logic words out.

    A word is a run of letters and digits with inner ``' & + # . / -`` kept ("C++", "Giro
    d'Italia", "two-factor"); a trailing dot or comma is not part of it.

    Example:
        >>> question_words("Memory leaks in Rust or C++, not in Go.")
        ['Memory', 'leaks', 'in', 'Rust', 'C++', 'Go']
    """
    out: list[str] = []
    for word in _WORD.findall(question):
        if word.casefold() in LOGIC_WORDS or word in out:
            continue
        out.append(word)
    return out


def gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal.

    Example:
        >>> print(gbnf_literal('say "hi" \\\\ now'))
        "say \\"hi\\" \\\\ now"
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def query_gbnf(vocabulary: Sequence[str] | None = None) -> str:
    """The GBNF grammar of a canonical logical query whose first term is not negated.

    Without ``vocabulary`` a term is any text without quotes, backslashes or control characters
    that neither starts nor ends with a space. With it, a term is one or more of those words (each
    also in lower case) separated by single spaces.

    Example:
        >>> print(query_gbnf(["Gold", "prices"]))
        root ::= first-and (" OR " and)*
        and ::= unary (" AND " unary)*
        first-and ::= first (" AND " unary)*
        unary ::= "NOT " atom | atom
        first ::= term | "(" root ")"
        atom ::= term | "(" root ")"
        term ::= "\\"" word (" " word)* "\\""
        word ::= "Gold" | "gold" | "prices"
    """
    lines = ['root ::= first-and (" OR " and)*', *_RULES_TAIL]
    if vocabulary is None:
        lines.append(_FREE_TERM)
        return "\n".join(lines)
    words: list[str] = []
    for word in vocabulary:
        for form in (word, word.lower()):
            if form and form not in words:
                words.append(form)
    if not words:
        raise ValueError("A grammar vocabulary needs at least one word")
    lines.append('term ::= "\\"" word (" " word)* "\\""')
    lines.append("word ::= " + " | ".join(gbnf_literal(w) for w in words))
    return "\n".join(lines)


def _node_schema() -> dict[str, Any]:
    ref = {"$ref": "#/$defs/node"}

    def obj(key: str, value: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {key: value},
            "required": [key],
            "additionalProperties": False,
        }

    return {
        "anyOf": [
            obj("term", {"type": "string"}),
            obj("not", ref),
            obj("and", {"type": "array", "items": ref}),
            obj("or", {"type": "array", "items": ref}),
        ]
    }


#: JSON schema of an answer in structured-output mode: ``{"query": <node>}``, a node being
#: ``{"term": str}``, ``{"not": node}``, ``{"and": [node, ...]}`` or ``{"or": [node, ...]}``.
QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"$ref": "#/$defs/node"}},
    "required": ["query"],
    "additionalProperties": False,
    "$defs": {"node": _node_schema()},
}


def response_format() -> dict[str, Any]:
    """The ``response_format`` field of a structured-output request (strict JSON schema).

    Example:
        >>> response_format()["json_schema"]["name"]
        'logical_query'
    """
    return {
        "type": "json_schema",
        "json_schema": {"name": "logical_query", "strict": True, "schema": QUERY_SCHEMA},
    }


def tree_to_json(tree: Node) -> dict[str, Any]:
    """A query tree as a JSON node (the inverse of :func:`tree_from_json`).

    Example:
        >>> from pglogic.query import parse
        >>> tree_to_json(parse('"a" OR NOT "b"'))
        {'or': [{'term': 'a'}, {'not': {'term': 'b'}}]}
    """
    if isinstance(tree, Term):
        return {"term": tree.text}
    if isinstance(tree, Match):
        return {"match": tree.text}
    if isinstance(tree, Not):
        return {"not": tree_to_json(tree.child)}
    key = "and" if isinstance(tree, And) else "or"
    return {key: [tree_to_json(c) for c in tree.children]}


def tree_from_json(node: Any) -> Node:
    """A JSON node as a query tree; raises ValueError on anything else (an empty term, list...).

    A one-element ``and``/``or`` is its element.

    Example:
        >>> print(tree_from_json({"and": [{"term": "a"}, {"or": [{"term": "b"}]}]}))
        "a" AND "b"
    """
    if not isinstance(node, dict) or len(node) != 1:
        raise ValueError(f"not a query node: {node!r}")
    [(key, value)] = node.items()
    if key == "term":
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"not a term text: {value!r}")
        return Term(" ".join(value.replace('"', " ").split()))
    if key == "not":
        return Not(tree_from_json(value))
    if key in ("and", "or") and isinstance(value, list) and value:
        children = tuple(tree_from_json(v) for v in value)
        if len(children) == 1:
            return children[0]
        return And(children) if key == "and" else Or(children)
    raise ValueError(f"not a query node: {node!r}")


def answer_to_query(answer: str) -> str:
    """The query text of a structured-output answer, or ``answer`` unchanged if it is not one.

    Accepts ``{"query": <node>}`` and ``{"query": "<query text>"}``.

    Example:
        >>> answer_to_query('{"query": "\\\\"a\\\\" OR \\\\"b\\\\""}')
        '"a" OR "b"'
        >>> answer_to_query('"a" OR "b"')
        '"a" OR "b"'
    """
    text = answer.strip()
    if not text.startswith("{"):
        return answer
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return answer
    query = data.get("query") if isinstance(data, dict) else None
    if isinstance(query, str):
        return query
    try:
        return to_string(tree_from_json(query))
    except (ValueError, TypeError):
        return answer


__all__ = [
    "LOGIC_WORDS",
    "QUERY_SCHEMA",
    "answer_to_query",
    "gbnf_literal",
    "query_gbnf",
    "question_words",
    "response_format",
    "tree_from_json",
    "tree_to_json",
]
