"""The GBNF grammar of the query language (pglogic.llm.grammar) and the wording checks.

A small GBNF interpreter (the subset the grammar uses: literals, character classes, rule
references, groups, ``|``, ``*``, ``+``, ``?``) reads the grammar text itself, generates random
strings from it and recognises strings with it: every generated string must parse, print back
to itself and keep a positive term, and every gold formula of the hand-written questions must be
accepted by the grammar built from its own question's words. When llama-cpp-python is installed,
llama.cpp's own GBNF parser must accept the grammar too.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pglogic.llm.grammar import (
    QUERY_SCHEMA,
    answer_to_query,
    grammar_text,
    mixed_operators,
    query_gbnf,
    question_words,
    tree_from_json,
    tree_to_json,
)
from pglogic.llm.wording import content_stems, question_names, refine, snap_term, tokens
from pglogic.query import parse, positive_terms, terms, to_string

QUESTIONS = Path(__file__).resolve().parents[1] / "bench" / "quality" / "nl" / "questions.jsonl"

# -- a GBNF interpreter ---------------------------------------------------------------------------


@dataclass
class Lit:
    text: str


@dataclass
class Cls:
    negated: bool
    ranges: list[tuple[str, str]]

    def ok(self, ch: str) -> bool:
        inside = any(lo <= ch <= hi for lo, hi in self.ranges)
        return inside != self.negated


@dataclass
class Ref:
    name: str


@dataclass
class Rep:
    item: object
    lo: int
    hi: int | None


@dataclass
class Alt:
    options: list[list[object]]


_ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "]": "]", "[": "["}


def _char(src: str, i: int) -> tuple[str, int]:
    if src[i] != "\\":
        return src[i], i + 1
    nxt = src[i + 1]
    if nxt == "x":
        return chr(int(src[i + 2 : i + 4], 16)), i + 4
    return _ESC[nxt], i + 2


def parse_gbnf(text: str) -> dict[str, Alt]:
    rules: dict[str, Alt] = {}
    for line in text.splitlines():
        name, body = line.split(" ::= ", 1)
        alt, end = _alt(body, 0)
        assert end == len(body), (line, end)
        rules[name] = alt
    return rules


def _alt(src: str, i: int) -> tuple[Alt, int]:
    options: list[list[object]] = [[]]
    while i < len(src):
        ch = src[i]
        if ch == " ":
            i += 1
        elif ch == "|":
            options.append([])
            i += 1
        elif ch == ")":
            break
        else:
            item, i = _item(src, i)
            if i < len(src) and src[i] in "*+?":
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[src[i]]
                item = Rep(item, lo, hi)
                i += 1
            options[-1].append(item)
    return Alt(options), i


def _item(src: str, i: int) -> tuple[object, int]:
    ch = src[i]
    if ch == '"':
        out = []
        i += 1
        while src[i] != '"':
            c, i = _char(src, i)
            out.append(c)
        return Lit("".join(out)), i + 1
    if ch == "[":
        i += 1
        negated = src[i] == "^"
        i += negated
        ranges = []
        while src[i] != "]":
            lo, i = _char(src, i)
            hi = lo
            if src[i] == "-" and src[i + 1] != "]":
                hi, i = _char(src, i + 1)
            ranges.append((lo, hi))
        return Cls(negated, ranges), i + 1
    if ch == "(":
        alt, i = _alt(src, i + 1)
        assert src[i] == ")"
        return alt, i + 1
    m = re.compile(r"[a-z][a-z0-9-]*").match(src, i)
    assert m, src[i:]
    return Ref(m.group()), m.end()


class Grammar:
    def __init__(self, text: str) -> None:
        self.rules = parse_gbnf(text)

    def generate(self, rng: random.Random, depth: int = 0) -> str:
        return self._gen(Ref("root"), rng, depth)

    def _gen(self, item: object, rng: random.Random, depth: int) -> str:
        if isinstance(item, Lit):
            return item.text
        if isinstance(item, Cls):
            pool = [chr(c) for c in range(32, 127) if item.ok(chr(c))] + ["é", "ß"]
            return rng.choice([c for c in pool if item.ok(c)])
        if isinstance(item, Ref):
            return self._gen(self.rules[item.name], rng, depth + 1)
        if isinstance(item, Rep):
            hi = item.hi if item.hi is not None else (2 if depth < 8 else item.lo)
            n = rng.randint(item.lo, max(item.lo, hi))
            return "".join(self._gen(item.item, rng, depth) for _ in range(n))
        assert isinstance(item, Alt)
        options = item.options
        if depth > 8:  # prefer the option without recursion into a group
            options = [
                o for o in options if not any(isinstance(x, Lit) and x.text == "(" for x in o)
            ] or options
        return "".join(self._gen(x, rng, depth) for x in rng.choice(options))

    def accepts(self, text: str) -> bool:
        return any(end == len(text) for end in self._match(Ref("root"), text, 0, 0))

    def _match(self, item: object, s: str, i: int, depth: int) -> Iterator[int]:
        if depth > 200:
            return
        if isinstance(item, Lit):
            if s.startswith(item.text, i):
                yield i + len(item.text)
        elif isinstance(item, Cls):
            if i < len(s) and item.ok(s[i]):
                yield i + 1
        elif isinstance(item, Ref):
            yield from self._match(self.rules[item.name], s, i, depth + 1)
        elif isinstance(item, Rep):
            yield from self._rep(item, s, i, 0, depth)
        else:
            assert isinstance(item, Alt)
            for option in item.options:
                yield from self._seq(option, s, i, depth)

    def _rep(self, item: Rep, s: str, i: int, count: int, depth: int) -> Iterator[int]:
        if count >= item.lo:
            yield i
        if item.hi is not None and count >= item.hi:
            return
        for j in self._match(item.item, s, i, depth + 1):
            if j > i:
                yield from self._rep(item, s, j, count + 1, depth)

    def _seq(self, seq: list[object], s: str, i: int, depth: int) -> Iterator[int]:
        if not seq:
            yield i
            return
        for j in self._match(seq[0], s, i, depth + 1):
            yield from self._seq(seq[1:], s, j, depth)


# -- the grammar ----------------------------------------------------------------------------------


@pytest.mark.parametrize("vocabulary", [None, ["Gold", "silver", "mining", "C++", "d'Italia"]])
def test_every_string_the_grammar_generates_parses_canonically(
    vocabulary: list[str] | None,
) -> None:
    grammar = Grammar(query_gbnf(vocabulary))
    rng = random.Random(7)
    allowed = {w.casefold() for w in vocabulary or []}
    for _ in range(200):
        text = grammar.generate(rng)
        tree = parse(text, max_terms=10**6)  # the grammar does not bound the number of terms
        assert parse(to_string(tree), max_terms=10**6) == tree
        assert positive_terms(tree), text
        if vocabulary:
            for term in terms(tree):
                assert {w.casefold() for w in term.split(" ")} <= allowed, text
        assert grammar.accepts(text)


def test_the_grammar_refuses_what_does_not_parse_negates_everything_or_mixes() -> None:
    grammar = Grammar(query_gbnf())
    for text in ['"a" AND NOT "b"', '("a" OR "b") AND NOT ("c" OR "d")', '("a" OR ("b" AND "c"))',
                 '("a" OR "b") AND "c"', '("a" OR "b" OR "c")']:  # fmt: skip
        assert grammar.accepts(text), text
    for text in ['NOT "a"', "a AND b", '"a" "b"', '("a" OR "b"', '"a" and "b"', '" a"', '""',
                 '"a" AND NOT NOT "b"', '"a"  AND "b"',
                 '"a" OR "b" AND "c"', '"a" AND "b" OR "c"',  # AND and OR meet: say how
                 '"a" OR "b"',  # an OR is opened as a group, so AND can follow it
                 '("a" OR NOT "b")', '(NOT "a") AND "b"']:  # fmt: skip
        assert not grammar.accepts(text), text


def test_mixed_operators_finds_where_and_and_or_meet() -> None:
    assert mixed_operators('"a" OR "b" AND "c"') == 12
    assert mixed_operators('"a" AND "b" or "c"') == 13
    assert mixed_operators('("a" OR "b") AND ("c" OR "d")') is None
    assert mixed_operators('"a" AND NOT ("b" OR "c")') is None
    assert mixed_operators('("a" AND "b" OR "c")') == 14


def test_vocabulary_grammar_keeps_the_questions_words_only() -> None:
    words = question_words("Gold or silver prices, but not mining companies")
    assert words == ["Gold", "silver", "prices", "not", "mining", "companies"]
    grammar = Grammar(query_gbnf(words))
    assert grammar.accepts('("gold prices" OR "silver prices")')
    assert grammar.accepts('("Gold" OR "silver") AND "prices" AND NOT "mining companies"')
    assert not grammar.accepts('"gold price"')  # no rewording
    assert not grammar.accepts('"gold or silver"')  # no OR inside a term
    assert not grammar.accepts('"gold" AND NOT "copper"')  # no invented term
    assert not grammar.accepts('"gold" AND NOT "not mining"')  # a negation word never starts
    assert not grammar.accepts('"gold" AND "mining not"')  # ... nor ends a term


def test_a_certain_exclusion_cue_cannot_be_folded_into_a_term() -> None:
    question = "moisturizer for eczema free of fragrance, other than Cetaphil, except creams"
    grammar = Grammar(query_gbnf(question_words(question), question_names(question)))
    assert grammar.accepts('"moisturizer for eczema" AND NOT ("fragrance" OR "Cetaphil")')
    for folded in ('"moisturizer for eczema free of fragrance"', '"eczema other than Cetaphil"',
                   '"moisturizer except creams"'):  # fmt: skip
        assert not grammar.accepts(folded), folded
    assert Grammar(query_gbnf(question_words("gluten-free bread"))).accepts('"gluten-free bread"')


def test_vocabulary_grammar_keeps_content_negation_and_refuses_filler_terms() -> None:
    words = question_words("How do I get a visa when my bread doesn't rise?")
    grammar = Grammar(query_gbnf(words))
    assert grammar.accepts('"my bread doesn\'t rise"')  # content negation stays content
    assert grammar.accepts('"visa" AND "bread doesn\'t rise"')
    for filler in ('"get"', '"visa" AND "get"', '"visa" AND "doesn\'t"', '"how do I"'):
        assert not grammar.accepts(filler), filler


def test_every_gold_formula_fits_its_questions_grammar() -> None:
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    assert len(rows) >= 100
    for row in rows:
        grammar = Grammar(query_gbnf(question_words(row["question"])))
        gold = grammar_text(parse(row["gold"]), top=True)
        lowered = grammar_text(parse(gold.lower().replace(" and ", " AND ").replace(" or ", " OR ")
                                     .replace("not ", "NOT ")), top=True)  # fmt: skip
        assert grammar.accepts(gold) or grammar.accepts(lowered), row


def test_llama_cpp_parses_the_grammar() -> None:
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    for vocabulary in (None, question_words('Memory leaks in Rust or C++, not "Go" \\ Java')):
        llama_cpp.LlamaGrammar.from_string(query_gbnf(vocabulary), verbose=False)


def test_json_tree_round_trips_and_matches_the_schema() -> None:
    tree = parse('("a" OR "b") AND NOT ("c" AND "d") AND "e"')
    node = tree_to_json(tree)
    assert tree_from_json(node) == tree
    assert answer_to_query(json.dumps({"query": node})) == to_string(tree)
    assert answer_to_query('{"query": "\\"x\\" AND NOT \\"y\\""}') == '"x" AND NOT "y"'
    assert answer_to_query("not json {") == "not json {"
    for bad in ({"term": " "}, {"and": []}, {"xor": []}, [], {"term": "a", "not": {}}):
        with pytest.raises(ValueError):
            tree_from_json(bad)
    node_schema = QUERY_SCHEMA["$defs"]["node"]
    assert {next(iter(o["required"])) for o in node_schema["anyOf"]} == {"term", "not", "and", "or"}


# -- the wording checks ---------------------------------------------------------------------------


def test_the_checks_leave_every_gold_formula_almost_alone() -> None:
    """Applied to the gold itself, the checks change at most 2 of the 117 formulas (two original
    golds leave out a question word, "Storing" and "projects", which the checks restore)."""
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    changed = [
        r["id"] for r in rows if refine(parse(r["gold"]), r["question"])[0] != parse(r["gold"])
    ]
    assert len(changed) <= 2, changed


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        # a reworded term snaps back to the question's words
        ("Articles about gold prices", '"gold price"', '"gold prices"'),
        # an OR folded into a term stays whole: where its alternatives end is not certain
        ("Running or cycling for weight loss", '"running or cycling" AND "weight loss"',
         '"running or cycling" AND "weight loss"'),
        ("Reports on gold or silver in Canada", '"reports on gold or silver in Canada"',
         '"gold or silver in Canada"'),
        # a request word that ends a term goes before a negation cue too
        ("Trade news besides the US-Japan dispute", '"trade news" AND NOT "US-Japan dispute"',
         '"trade" AND NOT "US-Japan dispute"'),
        # request words at a term's edge go
        ("Questions about sourdough or rye bread", '"questions about sourdough" OR "rye bread"',
         '"sourdough" OR "rye bread"'),
        # a NOT the model wrote is never removed, even where the question says none
        ("Food safety of rice left out overnight", '"food safety" AND "rice" AND NOT "left out overnight"',
         '"food safety" AND "rice" AND NOT "left out overnight"'),
        # a negated group left positive is negated, as one NOT of an OR
        ("Hiking boots, excluding Salomon and Merrell", '"hiking boots" AND ("Salomon" AND "Merrell")',
         '"hiking boots" AND NOT ("Salomon" OR "Merrell")'),
        ("Tax law, neither estates nor trusts", '"tax law" AND NOT "estates" AND NOT "trusts"',
         '"tax law" AND NOT ("estates" OR "trusts")'),
        # either ... or joined by AND becomes OR
        ("Either violin or cello lessons for adults", '"violin" AND "cello lessons" AND "adults"',
         '("violin" OR "cello lessons") AND "adults"'),
        # how AND and OR group is the model's to say (the grammar makes it bracket them)
        ("Solar panels and batteries, or heat pumps", '"solar panels" AND ("batteries" OR "heat pumps")',
         '"solar panels" AND ("batteries" OR "heat pumps")'),
        # no dropped word is restored as a term, except a thing excluded by a certain cue
        ("Knife sharpening with a whetstone, not with an electric sharpener",
         '"knife sharpening" AND NOT "electric sharpener"',
         '"knife sharpening" AND NOT "electric sharpener"'),
        ("Marathon training plans, apart from ones that need a gym", '"marathon training plans"',
         '"marathon training plans" AND NOT "gym"'),
        # after an uncertain cue ("without", "not", "don't") the model's reading stands
        ("Pasta recipes without tomatoes", '"pasta recipes"', '"pasta recipes"'),
        ("Why does my bread not rise in the oven?", '"bread not rise in the oven"',
         '"bread not rise in the oven"'),
        ("Vegan desserts that don't use coconut", '"vegan desserts" AND NOT "coconut"',
         '"vegan desserts" AND NOT "coconut"'),
        # after a certain cue a positive term is negated
        ("Museums in Berlin besides the Pergamon", '"museums in Berlin" AND "Pergamon"',
         '"museums in Berlin" AND NOT "Pergamon"'),
        ("Pasta sauces, but not spicy ones", '"pasta sauces" AND "spicy"',
         '"pasta sauces" AND NOT "spicy"'),
        # no check adds a term made of function words ("get", "hold")
        ("How do I get a work permit when I hold a Brazilian passport?",
         '"work permit" AND "Brazilian passport"', '"work permit" AND "Brazilian passport"'),
        # a shared first term is factored out (the same truth table)
        ("Memory leaks in Rust or Go", '"memory leaks" AND "Rust" OR "memory leaks" AND "Go"',
         '"memory leaks" AND ("Rust" OR "Go")'),
        # leading articles and "how to" go; a dropped alternative comes back under the OR
        ("How to bake bread without yeast", '"how to bake bread" AND NOT "yeast"',
         '"bake bread" AND NOT "yeast"'),
        ("Dark matter or dark energy, but not galaxy clusters",
         '"dark matter" AND NOT "galaxy clusters"',
         '"dark matter" AND NOT "galaxy clusters"'),
        # a question that quotes its terms is taken at its word
        ('Which documents match "a" AND NOT "b" OR "c"?', '"a" AND NOT "b" OR "c"',
         '"a" AND NOT "b" OR "c"'),
        # a vague word is no dropped topic
        ("What are some good books about Rome?", '"books" AND "Rome"', '"books" AND "Rome"'),
        # a right answer stays as it is
        ("How does compound interest work?", '"compound interest"', '"compound interest"'),
    ],
)  # fmt: skip
def test_refine(question: str, answer: str, expected: str) -> None:
    tree, _ = refine(parse(answer), question)
    assert to_string(tree) == expected


def test_snap_and_negation_scope() -> None:
    toks = tokens("Guitars without pickups, or ukuleles but not cheap ones")
    assert [t.word for t in toks if t.negated] == ["pickups", "cheap", "ones"]
    assert snap_term("trade deficit US", tokens("Trade deficit of the United States")) == (
        "Trade deficit"
    )
    assert snap_term("completely different", tokens("Trade deficit")) is None


REAL = QUESTIONS.parent / "real" / "questions.jsonl"


def _real_golds() -> list[tuple[str, str]]:
    out = []
    for line in REAL.read_text().splitlines():
        row = json.loads(line)
        for gold in [row["gold"], *row["alts"]]:
            if gold != "plain":
                out.append((row["question"], gold))
    return out


def test_the_checks_leave_every_real_gold_alone() -> None:
    """Over the 269 real questions' gold formulas (bench/quality/nl/real), a right answer is never
    changed by a check: the checks act only where they are certain."""
    changed = [(q, g) for q, g in _real_golds() if refine(parse(g), q)[0] != parse(g)]
    assert changed == []


def test_the_grammar_can_write_the_real_golds() -> None:
    """Every gold of bench/quality/nl/real whose terms are made of its question's words (a few distribute
    a shared word or keep a cue word inside a term) is a sentence of that question's grammar."""
    refused = []
    for question, gold in _real_golds():
        words = {w.casefold() for w in question_words(question)}
        tree = parse(gold)
        if not all({w.casefold() for w in t.split()} <= words for t in terms(tree)):
            continue
        names = question_names(question)
        grammar = Grammar(query_gbnf(question_words(question), names))
        if not grammar.accepts(grammar_text(tree, top=True)):
            refused.append(gold)
            # the one limit: a term the stop list counts as function words ("bottom" is in
            # scikit-learn's list), which the grammar does not let the model write alone
            assert any(not content_stems(t, names) for t in terms(tree)), gold
    assert len(refused) <= 2, refused
