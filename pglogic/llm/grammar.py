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
    root ::= atom and-tail?
    >>> question_words("Gold or silver, but not mining companies")
    ['Gold', 'silver', 'not', 'mining', 'companies']
    >>> answer_to_query('{"query": {"and": [{"term": "gold"}, {"not": {"term": "mining"}}]}}')
    '"gold" AND NOT "mining"'
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from pglogic.llm.wording import is_function_word, negates
from pglogic.query import And, Match, Node, Not, Or, Term, to_string
from pglogic.query.lexer import TokenKind, tokenize


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words that carry the logic of a question: never part of a term in the constrained grammar.
LOGIC_WORDS = _wordset(
    "or nor neither either except excluding exclude but than none besides apart aside rather"
)

#: Negation words that may stand inside a term, between two other words, so that content
#: negation stays content ("bread not rising"); never first or last, so a term cannot be a bare
#: "no" or "don't". Contractions ending in "n't" count too (:func:`is_negation_word`).
INNER_NEGATIONS = _wordset("not no never without cannot instead")

_WORD = re.compile(r"[^\W_](?:[\w'’&+#./-]*[\w+#])?")

#: A term's text in the grammar without a vocabulary: no quote, backslash or control character,
#: and no space at either end.
_FREE_TERM = r'term ::= "\"" [^"\\\x00-\x1f ] ([^"\\\x00-\x1f]* [^"\\\x00-\x1f ])? "\""'

#: The query rules: one operator per level, and an OR only inside parentheses, so a model that
#: writes from left to right opens the group before its alternatives and can still AND the
#: context or a NOT to it (``("a" OR "b") AND NOT "c"``); the first operand of a level is not
#: negated, and NOT is not directly under OR.
_RULES = (
    "root ::= atom and-tail?",
    'and-tail ::= (" AND " unary)+',
    'or-tail ::= (" OR " atom)+',
    'unary ::= "NOT " atom | atom',
    'atom ::= term | "(" group ")"',
    "group ::= atom (and-tail | or-tail)?",
)


def is_negation_word(word: str) -> bool:
    """Whether ``word`` negates: one of :data:`INNER_NEGATIONS` or a contraction in "n't".

    Example:
        >>> [is_negation_word(w) for w in ("not", "doesn't", "won’t", "nothing")]
        [True, True, True, False]
    """
    return negates(word, INNER_NEGATIONS)


def question_words(question: str) -> list[str]:
    """The question's words a term may use: as written, in order, deduplicated, logic words out.

    A word is a run of letters and digits with inner ``' & + # . / -`` kept ("C++", "Giro
    d'Italia", "two-factor"); a trailing dot or comma is not part of it.

    Example:
        >>> question_words("Memory leaks in Rust or C++, not in Go.")
        ['Memory', 'leaks', 'in', 'Rust', 'C++', 'not', 'Go']
        >>> question_words("Soap free of lanolin, gluten-free bread")
        ['Soap', 'of', 'lanolin', 'gluten-free', 'bread']
    """
    out: list[str] = []
    words = _WORD.findall(question)
    for i, word in enumerate(words):
        if word.casefold() in LOGIC_WORDS or word in out:
            continue
        if word.casefold() == "free" and words[i + 1 : i + 2] in (["of"], ["Of"], ["OF"]):
            continue  # "free of X" excludes X: no term may hold it
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


def _alternatives(words: Sequence[str]) -> str:
    forms: list[str] = []
    for word in words:
        for form in (word, word.lower()):
            if form and form not in forms:
                forms.append(form)
    return " | ".join(gbnf_literal(w) for w in forms)


def query_gbnf(vocabulary: Sequence[str] | None = None, names: frozenset[str] = frozenset()) -> str:
    """The GBNF grammar of a logical query in which AND and OR never meet without parentheses,
    an OR is always in parentheses and the first operand of each level is not negated.

    Without ``vocabulary`` a term is any text without quotes, backslashes or control characters
    that neither starts nor ends with a space. With it, a term is made of those words (each also in
    lower case), single spaces between: at least one content word (not a function word, see
    :func:`pglogic.llm.wording.is_function_word`; a word in ``names``, the question's names, is
    content), and negation words (:func:`is_negation_word`) only between two other words.

    Example:
        >>> print(query_gbnf(["How", "bread", "not", "rise"]))
        root ::= atom and-tail?
        and-tail ::= (" AND " unary)+
        or-tail ::= (" OR " atom)+
        unary ::= "NOT " atom | atom
        atom ::= term | "(" group ")"
        group ::= atom (and-tail | or-tail)?
        term ::= "\\"" (plain " ")* content (" " (neg " ")? word)* "\\""
        word ::= content | plain
        content ::= "bread" | "rise"
        plain ::= "How" | "how"
        neg ::= "not"
    """
    lines = list(_RULES)
    if vocabulary is None:
        lines.append(_FREE_TERM)
        return "\n".join(lines)
    negs = [w for w in vocabulary if is_negation_word(w)]
    rest = [w for w in vocabulary if not is_negation_word(w)]
    content = [w for w in rest if not is_function_word(w, names)]
    plain = [w for w in rest if is_function_word(w, names)]
    if not content:  # a question of function words only: any of its words makes a term
        content, plain = rest, []
    if not content:
        raise ValueError("A grammar vocabulary needs at least one word that is not a negation")
    neg = ' (neg " ")?' if negs else ""
    lead = '(plain " ")* ' if plain else ""
    lines.append(f'term ::= "\\"" {lead}content (" "{neg} word)* "\\""')
    lines.append("word ::= content | plain" if plain else "word ::= content")
    lines.append("content ::= " + _alternatives(content))
    if plain:
        lines.append("plain ::= " + _alternatives(plain))
    if negs:
        lines.append("neg ::= " + _alternatives(negs))
    return "\n".join(lines)


def grammar_text(tree: Node, *, top: bool = False) -> str:
    """``tree`` with every group in parentheses: an AND inside an OR too
    (:func:`pglogic.query.to_string` leaves those out, as precedence allows), and with ``top``
    an OR at the top as well, as the grammar writes it.

    Example:
        >>> from pglogic.query import parse
        >>> grammar_text(parse('"a" AND "b" OR "c"'))
        '("a" AND "b") OR "c"'
        >>> grammar_text(parse('"a" OR "b"'), top=True)
        '("a" OR "b")'
    """
    if isinstance(tree, Term | Match):
        return to_string(tree)
    if isinstance(tree, Not):
        inner = grammar_text(tree.child)
        return f"NOT ({inner})" if isinstance(tree.child, And | Or) else f"NOT {inner}"
    op = " AND " if isinstance(tree, And) else " OR "
    parts = []
    for child in tree.children:
        text = grammar_text(child)
        parts.append(f"({text})" if isinstance(child, And | Or) else text)
    out = op.join(parts)
    return f"({out})" if top and isinstance(tree, Or) else out


def mixed_operators(text: str) -> int | None:
    """The column of the first operator of ``text`` that meets the other one (AND beside OR) at
    the same level without parentheses, or None. ``"a" OR "b" AND "c"`` parses (AND binds
    tighter), but a model that writes it may have meant ``("a" OR "b") AND "c"``.

    Example:
        >>> mixed_operators('"a" OR "b" AND "c"'), mixed_operators('("a" OR "b") AND "c"')
        (12, None)
    """
    levels: list[set[TokenKind]] = [set()]
    for tok in tokenize(text):
        if tok.kind is TokenKind.LPAREN:
            levels.append(set())
        elif tok.kind is TokenKind.RPAREN:
            if len(levels) > 1:
                levels.pop()
        elif tok.kind in (TokenKind.AND, TokenKind.OR):
            levels[-1].add(tok.kind)
            if len(levels[-1]) > 1:
                return tok.col
    return None


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
    "INNER_NEGATIONS",
    "LOGIC_WORDS",
    "QUERY_SCHEMA",
    "answer_to_query",
    "gbnf_literal",
    "grammar_text",
    "is_negation_word",
    "mixed_operators",
    "query_gbnf",
    "question_words",
    "response_format",
    "tree_from_json",
    "tree_to_json",
]
