"""Deterministic checks of a rewrite against the question: its words, its NOTs, its ORs.

A small model rewords terms, folds an OR into one term, drops a term, or puts a NOT on the
wrong group. :func:`refine` reads the question itself and repairs what it can prove:

* **words** — a term not made of the question's words is snapped to the question span it came
  from (:func:`snap_term`: same words up to case and plural); a term holding " or " is split
  into an OR; request words at a term's edge ("questions about", "... news") are dropped.
* **negation** — each term's place in the question says whether it is negated: after "not",
  "no", "without", "except", "excluding", "other than", "avoiding", "neither", "nor"... up to the
  next clause that adds something back (", or", ", and", "but" without "not", a full stop).
  A NOT in a question without any negation word is removed, and the largest group of
  should-be-negated terms left positive is put under NOT. Several terms negated by one phrase
  ("excluding A and B", "neither A nor B") become one ``NOT (A OR B)``.
* **either … or** — the two alternatives must meet in an OR, not an AND.
* **", or"** — a comma before "or" separates alternatives at the top: ``(A AND B) OR C``.
* **dropped words** — content words of the question that no term covers become a term, joined
  where the question puts them (AND, or AND NOT inside a negated clause).

Each repair is named in the returned notes. A question that already quotes every term of the
rewrite (the user wrote the query) is left alone.

Example:
    >>> from pglogic.query import parse
    >>> tree, notes = refine(parse('"sugar" AND ("Brazil" OR "Cuba")'), "Sugar, but not Brazil or Cuba")
    >>> print(tree)
    "sugar" AND NOT ("Brazil" OR "Cuba")
    >>> notes
    ['negated "Brazil" OR "Cuba" (negated in the question)']
    >>> print(refine(parse('"storing cheese or butter" AND "freezer"'), "Storing cheese or butter in the freezer")[0])
    ("storing cheese" OR "butter") AND "freezer"
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pglogic.query import And, Match, Node, Not, Or, Term, terms


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words that ask for documents rather than name a topic; dropped at a term's edge, never restored.
REQUEST_WORDS = _wordset(
    """news article articles story stories report reports paper papers question questions
    document documents post posts text texts information info anything something things stuff
    find show search looking look want need tell give list match matching related regarding
    concerning discuss discusses discussing involving involve involves use uses using used
    contain contains containing include includes including mention mentions mentioning
    example examples way ways"""
)

#: Vague words: never restored as a dropped term on their own ("good books about Rome").
VAGUE_WORDS = _wordset(
    """good best better great top recent latest popular common useful interesting important main
    various different many much few lot lots kind kinds type types sort sorts please help
    explain overview introduction"""
)

#: Function words: never restored as a dropped term on their own.
STOPWORDS = _wordset(
    """a an the of in on for with to from by at about as into onto over under between among
    and or nor but not no neither either without except excluding exclude than other rather
    instead avoiding avoid that which who whom whose what when where why how is are was were be
    been being do does did done can could should would will shall may might must i me my we us
    our you your it its they them their this these those there here any some all each every
    both more most less very so such than then also only just too up out via per vs versus
    whether if while during after before since until against around within without along
    across through near beyond toward towards behind beside above below upon throughout off
    like unlike"""
)

#: Words a term does not start with: articles and question words ("how to ...", "what is ...").
LEADING_WORDS = _wordset("the a an how to what which why is are does do can should")

_TOKEN = re.compile(r"[^\W_](?:[\w'’&+#./-]*[\w+#])?|[,;:.!?()]")
_BOUNDARY = frozenset(",;:.!?()")
_NEGATORS = _wordset(
    "not no without except excluding exclude excludes excluded avoiding avoid neither nor lacking "
    "barring"
)
_PAIRS = {
    ("other", "than"), ("rather", "than"), ("instead", "of"), ("apart", "from"),
    ("anything", "but"), ("everything", "but"), ("all", "but"), ("free", "of"),
}  # fmt: skip


def stem(word: str) -> str:
    """A crude stem for matching words: case-folded, possessive and plural endings removed.

    Example:
        >>> [stem(w) for w in ("Prices", "batteries", "boxes", "Alzheimer's", "glass")]
        ['price', 'battery', 'box', 'alzheimer', 'glass']
    """
    w = word.casefold().replace("’", "'")
    w = w.removesuffix("'s").removesuffix("'")
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("ches", "shes", "xes", "sses")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


@functools.cache
def stop_words() -> frozenset[str]:
    """English function words from a maintained list: scikit-learn's ``ENGLISH_STOP_WORDS``
    (the Glasgow Information Retrieval Group's list, 318 words), loaded on first use.

    Example:
        >>> {"get", "have", "the", "not"} <= stop_words()
        True
    """
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def is_function_word(word: str) -> bool:
    """Whether ``word`` carries no topic: a stop word (:func:`stop_words`), a contraction of one
    ("I'm", "it's") or of a negated auxiliary ("don't", "won't", "aren't").

    Example:
        >>> [is_function_word(w) for w in ("get", "don't", "I'm", "Aren’t", "passport", "gym")]
        [True, True, True, True, False, False]
    """
    w = word.casefold().replace("’", "'")
    if w.endswith("n't") or w == "cannot":
        return True
    if "'" in w:
        head, _, tail = w.partition("'")
        if tail in ("s", "m", "re", "ve", "ll", "d") and head in stop_words():
            return True
    return w in stop_words()


def content_stems(text: str) -> list[str]:
    """The stems (:func:`stem`) of ``text``'s words that are not function words, in order.

    Example:
        >>> content_stems("How do I get a work permit?")
        ['work', 'permit']
        >>> content_stems("the ones that don't")
        ['ones']
    """
    return [stem(w) for w in _words(text) if not is_function_word(w)]


@dataclass(frozen=True)
class Token:
    """One word or punctuation mark of the question, with its stem and whether a NOT covers it.

    Example:
        >>> Token("Oil", 0, "oil", False).word
        'Oil'
    """

    word: str
    index: int
    stem: str
    negated: bool


def tokens(question: str) -> list[Token]:
    """The question's words and punctuation, each marked negated when a negation phrase covers it.

    Example:
        >>> [(t.word, t.negated) for t in tokens("tea, not coffee or milk, or juice")]
        [('tea', False), (',', False), ('not', False), ('coffee', True), ('or', True), ('milk', True), (',', False), ('or', False), ('juice', False)]
    """
    raw = _TOKEN.findall(question)
    low = [w.casefold() for w in raw]
    out: list[Token] = []
    negated = False
    for i, w in enumerate(low):
        nxt = low[i + 1] if i + 1 < len(low) else ""
        prev = low[i - 1] if i > 0 else ""
        if w in _BOUNDARY:
            if w != "," or nxt in ("or", "and") or (nxt == "but" and low[i + 2 : i + 3] != ["not"]):
                negated = False
            out.append(Token(raw[i], i, w, False))
            continue
        if w == "but" and nxt != "not":
            negated = False
        cue = w in _NEGATORS or (prev, w) in _PAIRS
        if w == "no" and nxt in _BOUNDARY:
            cue = False
        out.append(Token(raw[i], i, stem(raw[i]), negated))
        if cue:
            negated = True
    return out


def _words(text: str) -> list[str]:
    return [w for w in _TOKEN.findall(text) if w not in _BOUNDARY]


def _spans(toks: list[Token]) -> list[tuple[int, int]]:
    """Contiguous word runs between punctuation and logic words: (start, end) token indexes."""
    out: list[tuple[int, int]] = []
    start = None
    for i, t in enumerate([*toks, Token(",", len(toks), ",", False)]):
        breaks = t.stem in _BOUNDARY or t.stem in ("or", "nor", "but") or t.stem in _NEGATORS
        if breaks:
            if start is not None:
                out.append((start, i))
            start = None
        elif start is None:
            start = i
    return out


def locate(term: str, toks: list[Token]) -> list[int] | None:
    """The question token indexes of ``term``'s words (a contiguous match preferred), or None.

    Example:
        >>> locate("oil prices", tokens("Oil prices and gas prices"))
        [0, 1]
        >>> locate("gas oil", tokens("Oil prices and gas prices"))
        [3, 0]
        >>> locate("coal", tokens("Oil prices")) is None
        True
    """
    stems = [stem(w) for w in _words(term)]
    if not stems:
        return None
    n = len(stems)
    for i in range(len(toks) - n + 1):
        if [t.stem for t in toks[i : i + n]] == stems:
            return list(range(i, i + n))
    found = []
    for s in stems:
        hits = [t.index for t in toks if t.stem == s]
        if not hits:
            return None
        found.append(hits[0])
    return found


def snap_term(term: str, toks: list[Token]) -> str | None:
    """The question span ``term`` was taken from, when ``term`` is not in the question's words.

    The span is the contiguous run of question words (within one clause) sharing the most stems
    with ``term``; it must cover at least half of them and add at most one word. None when the
    term is already made of the question's words or no span is close enough.

    Example:
        >>> snap_term("gold price", tokens("Articles about gold prices"))
        'gold prices'
        >>> snap_term("trade deficit US", tokens("Trade deficit of the United States"))
        'Trade deficit'
        >>> snap_term("oil", tokens("oil and gas")) is None
        True
    """
    words = {t.word.casefold() for t in toks}
    term_words = _words(term)
    if all(w.casefold() in words for w in term_words):
        return None
    want = {stem(w) for w in term_words}
    best: tuple[float, int, int] | None = None
    for start, end in _spans(toks):
        for i in range(start, end):
            for j in range(i + 1, end + 1):
                got = {t.stem for t in toks[i:j] if t.stem not in STOPWORDS}
                if not got or toks[i].stem in STOPWORDS or toks[j - 1].stem in STOPWORDS:
                    continue
                common = len(want & got)
                extra = len(got - want)
                if common * 2 < len(want) or extra > 1:
                    continue
                score = common - 0.5 * extra - 0.01 * (j - i)
                if best is None or score > best[0]:
                    best = (score, i, j)
    if best is None:
        return None
    return " ".join(t.word for t in toks[best[1] : best[2]])


# -- tree helpers -------------------------------------------------------------------------------


def _join(kind: type[And] | type[Or], parts: Sequence[Node]) -> Node:
    flat: list[Node] = []
    for p in parts:
        flat.extend(p.children if isinstance(p, kind) else (p,))
    return flat[0] if len(flat) == 1 else kind(tuple(flat))


def _rebuild(tree: Node, children: list[Node]) -> Node:
    return _join(And if isinstance(tree, And) else Or, children)


def _map(tree: Node, fn: Callable[[Term], Node]) -> Node:
    if isinstance(tree, Match):
        return tree
    if isinstance(tree, Term):
        return fn(tree)
    if isinstance(tree, Not):
        child = _map(tree.child, fn)
        return Not(child)
    assert isinstance(tree, And | Or)
    return _rebuild(tree, [_map(c, fn) for c in tree.children])


def _term_stems(tree: Node) -> set[str]:
    return {stem(w) for t in terms(tree) for w in _words(t)}


# -- the repairs --------------------------------------------------------------------------------


def fix_words(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """Snap reworded terms, split terms holding " or ", drop request words at a term's edge.

    Example:
        >>> from pglogic.query import parse
        >>> tree, notes = fix_words(parse('"questions about sourdough" OR "rye"'),
        ...                         tokens("Questions about sourdough or rye"))
        >>> print(tree)
        "sourdough" OR "rye"
    """
    notes: list[str] = []

    def one(text: str) -> Node:
        parts = re.split(r"\s+(?:or|nor)\s+", text, flags=re.I)
        if len(parts) > 1 and all(p.strip() for p in parts):
            notes.append(f'split "{text}" at "or"')
            return _join(Or, [one(p.strip()) for p in parts])
        snapped = snap_term(text, toks)
        if snapped is not None and snapped.casefold() != text.casefold():
            notes.append(f'"{text}" -> "{snapped}" (the question\'s words)')
            text = snapped
        words = text.split()
        lead = 0
        while lead < len(words) - 1 and words[lead].casefold() in REQUEST_WORDS:
            lead += 1
            while lead < len(words) - 1 and words[lead].casefold() in STOPWORDS:
                lead += 1
        words = words[lead:]
        while len(words) > 1 and words[0].casefold() in LEADING_WORDS:
            words = words[1:]
        if len(words) > 1 and words[-1].casefold() in REQUEST_WORDS:
            at = locate(" ".join(words), toks)
            after = toks[at[-1] + 1].stem if at and at[-1] + 1 < len(toks) else ""
            if after in ("about", "on", "regarding", "concerning", "that", "which", ",", ""):
                words = words[:-1]
        cleaned = " ".join(words)
        if cleaned != text:
            notes.append(f'"{text}" -> "{cleaned}" (request words)')
        return Term(cleaned)

    return _map(tree, lambda term: one(term.text)), notes


def _should_negate(text: str, toks: list[Token]) -> bool | None:
    at = locate(text, toks)
    if at is None:
        return None
    flags = {toks[i].negated for i in at}
    return flags.pop() if len(flags) == 1 else None


def _polarity(tree: Node, toks: list[Token], negated: bool = False) -> list[tuple[bool, bool]]:
    """(negated in the tree, negated in the question) for every term occurrence."""
    if isinstance(tree, Term):
        want = _should_negate(tree.text, toks)
        return [(negated, negated if want is None else want)]
    if isinstance(tree, Not):
        return _polarity(tree.child, toks, not negated)
    assert isinstance(tree, And | Or)
    return [p for c in tree.children for p in _polarity(c, toks, negated)]


def fix_negation(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """Free terms negated against the question; negate groups the question negates.

    Example:
        >>> from pglogic.query import parse
        >>> tree, notes = fix_negation(parse('"rice" AND NOT "left out"'),
        ...                            tokens("rice left out overnight"))
        >>> print(tree)
        "rice" AND "left out"
    """
    notes: list[str] = []

    def free(node: Node) -> Node:
        if isinstance(node, Not):
            pol = _polarity(node.child, toks, False)
            if pol and all(want is False for _, want in pol) and all(not has for has, _ in pol):
                notes.append(f"freed {node.child} (not negated in the question)")
                return free(node.child)
            return Not(free(node.child))
        if isinstance(node, And | Or):
            return _rebuild(node, [free(c) for c in node.children])
        return node

    def negate(node: Node) -> Node:
        if isinstance(node, Not):
            return node
        pol = _polarity(node, toks, False)
        if pol and all(want and not has for has, want in pol):
            notes.append(f"negated {node} (negated in the question)")
            return Not(node)
        if isinstance(node, And | Or):
            return _rebuild(node, [negate(c) for c in node.children])
        return node

    # free only when the question says no negation at all: it may say one in words not listed
    # here ("anything but", "free of"...)
    if not any(t.negated for t in toks) and "but" not in {t.stem for t in toks}:
        tree = free(tree)
    if isinstance(tree, And):
        tree = _rebuild(tree, [negate(c) for c in tree.children])
    return tree, notes


def group_negations(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """``NOT "a" AND NOT "b"`` or ``NOT ("a" AND "b")`` from one negation phrase -> ``NOT ("a" OR "b")``.

    Example:
        >>> from pglogic.query import parse
        >>> print(group_negations(parse('"x" AND NOT ("a" AND "b")'),
        ...                       tokens("x excluding a and b"))[0])
        "x" AND NOT ("a" OR "b")
    """
    notes: list[str] = []

    def clause(node: Node) -> int | None:
        """The index of the negation cue that covers every term of ``node``."""
        cues = set()
        for t in terms(node):
            at = locate(t, toks)
            if not at:
                return None
            i = min(at)
            while i >= 0 and toks[i].negated:
                i -= 1
            cues.add(i)
        return cues.pop() if len(cues) == 1 else None

    def walk(node: Node) -> Node:
        if isinstance(node, Not):
            child = walk(node.child)
            if (
                isinstance(child, And)
                and all(isinstance(c, Term) for c in child.children)
                and clause(child) is not None
                and all(toks[i].negated for t in terms(child) for i in locate(t, toks) or [])
            ):
                notes.append(f"NOT ({child}) -> NOT of the OR (one negation phrase)")
                return Not(Or(child.children))
            return Not(child)
        if isinstance(node, Or):
            return _rebuild(node, [walk(c) for c in node.children])
        if isinstance(node, And):
            children = [walk(c) for c in node.children]
            out: list[Node] = []
            for c in children:
                prev = out[-1] if out else None
                if (
                    isinstance(c, Not)
                    and isinstance(prev, Not)
                    and clause(prev.child) is not None
                    and clause(prev.child) == clause(c.child)
                ):
                    out[-1] = Not(_join(Or, [prev.child, c.child]))
                    notes.append("grouped the NOTs of one negation phrase")
                else:
                    out.append(c)
            return _join(And, out)
        return node

    return walk(tree), notes


def fix_either(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """The alternatives of "either A or B" joined by OR where the tree has them under one AND.

    Example:
        >>> from pglogic.query import parse
        >>> print(fix_either(parse('"oil" AND "gas" AND "Texas"'), tokens("either oil or gas, in Texas"))[0])
        ("oil" OR "gas") AND "Texas"
    """
    words = [t.stem for t in toks]
    if "either" not in words:
        return tree, []
    e = words.index("either")
    try:
        o = words.index("or", e + 1)
    except ValueError:
        return tree, []
    end = o + 1
    while end < len(toks) and toks[end].stem not in _BOUNDARY and toks[end].stem not in (
        "or", "and", "but", "for", "with", "in", "on"
    ) and toks[end].stem not in _NEGATORS:  # fmt: skip
        end += 1
    left = {t.stem for t in toks[e + 1 : o]} - STOPWORDS
    right = {t.stem for t in toks[o + 1 : end]} - STOPWORDS
    if not isinstance(tree, And) or not left or not right:
        return tree, []
    side = []
    for c in tree.children:
        s = _term_stems(c)
        side.append("L" if s and s <= left else "R" if s and s <= right else "")
    if "L" in side and "R" in side:
        li = [i for i, s in enumerate(side) if s == "L"]
        ri = [i for i, s in enumerate(side) if s == "R"]
        group = _join(
            Or,
            [
                _join(And, [tree.children[i] for i in li]),
                _join(And, [tree.children[i] for i in ri]),
            ],
        )
        first = min(li + ri)
        rest = [c for i, c in enumerate(tree.children) if i not in li + ri]
        rest.insert(sum(1 for i in range(first) if i not in li + ri), group)
        return _join(And, rest), ['"either ... or" -> OR']
    return tree, []


def factor(tree: Node) -> tuple[Node, list[str]]:
    """``("a" AND "b") OR ("a" AND "c")`` -> ``"a" AND ("b" OR "c")``: the children every AND of
    an OR starts with are taken out (distributivity: the same truth table, the canonical form).

    Example:
        >>> from pglogic.query import parse
        >>> print(factor(parse('"memory leaks" AND "Rust" OR "memory leaks" AND "C++"'))[0])
        "memory leaks" AND ("Rust" OR "C++")
    """
    notes: list[str] = []

    def walk(node: Node) -> Node:
        if isinstance(node, Term | Match):
            return node
        if isinstance(node, Not):
            return Not(walk(node.child))
        kids = [walk(c) for c in node.children]
        if isinstance(node, Or) and all(isinstance(k, And) for k in kids):
            ands = [k.children for k in kids if isinstance(k, And)]
            n = 0
            while all(len(a) > n + 1 and a[n] == ands[0][n] for a in ands):
                n += 1
            if n:
                notes.append(f"factored {_join(And, list(ands[0][:n]))} out of an OR")
                rest = _join(Or, [_join(And, list(a[n:])) for a in ands])
                return _join(And, [*ands[0][:n], rest])
        return _rebuild(node, kids)

    return walk(tree), notes


def _factor_step(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    return factor(tree)


def fix_trailing_not(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """A negation that ends the question applies to all of it: ``"a" OR "b" AND NOT "c"`` for
    "a or b, but not c" becomes ``("a" OR "b") AND NOT "c"``. Only when every negated term of the
    question comes after every positive one and no ", or" alternative follows a NOT.

    Example:
        >>> from pglogic.query import parse
        >>> print(fix_trailing_not(parse('"tea" OR "coffee" AND NOT "sugar"'),
        ...                        tokens("tea or coffee, but not sugar"))[0])
        ("tea" OR "coffee") AND NOT "sugar"
    """
    if not isinstance(tree, Or) or not isinstance(tree.children[-1], And):
        return tree, []
    last = tree.children[-1]
    nots = [c for c in last.children if isinstance(c, Not)]
    if not nots or any(isinstance(n, Not) for c in tree.children[:-1] for n in _nots(c)):
        return tree, []
    negated = [i for t in toks if t.negated for i in [t.index]]
    positive = [
        i
        for t in terms(tree)
        if not any(t in terms(n) for n in nots)
        for i in (locate(t, toks) or [])
    ]
    if not negated or not positive or min(negated) < max(positive):
        return tree, []
    kept = [c for c in last.children if not isinstance(c, Not)]
    alternatives = _join(Or, [*tree.children[:-1], _join(And, kept)])
    return _join(And, [alternatives, *nots]), ["the closing negation applies to every alternative"]


def _nots(tree: Node) -> list[Not]:
    if isinstance(tree, Not):
        return [tree]
    if isinstance(tree, Term | Match):
        return []
    return [n for c in tree.children for n in _nots(c)]


def _restrict(tree: Node, keep: set[str]) -> Node | None:
    if isinstance(tree, Term):
        return tree if tree.text in keep else None
    if isinstance(tree, Not):
        child = _restrict(tree.child, keep)
        return None if child is None else Not(child)
    assert isinstance(tree, And | Or)
    kids = [k for k in (_restrict(c, keep) for c in tree.children) if k is not None]
    return _rebuild(tree, kids) if kids else None


def fix_comma_or(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """ ", or" separates top-level alternatives: ``"a" AND ("b" OR "c")`` for "a and b, or c"
    becomes ``("a" AND "b") OR "c"``. Only when no negation follows and no term spans both sides.

    Example:
        >>> from pglogic.query import parse
        >>> print(fix_comma_or(parse('"oil" AND ("gas" OR "coal")'), tokens("oil and gas, or coal"))[0])
        "oil" AND "gas" OR "coal"
    """
    words = [t.stem for t in toks]
    cuts = [i for i in range(len(words) - 1) if words[i] == "," and words[i + 1] == "or"]
    if not cuts or "either" in words[: cuts[0]] or any(t.negated for t in toks[cuts[0] :]):
        return tree, []
    bounds = [0, *cuts, len(toks)]
    clauses: list[set[str]] = [set() for _ in [*cuts, 0]]
    for t in set(terms(tree)):
        at = locate(t, toks)
        if not at:
            return tree, []
        stems = {stem(w) for w in _words(t)}
        sides = {sum(1 for c in cuts if x.index > c) for x in toks if x.stem in stems}
        if len(sides) != 1:
            return tree, []
        clauses[sides.pop()].add(t)
    if any(not c for c in clauses) or len(bounds) < 3:
        return tree, []
    if isinstance(tree, Or) and all(
        any(set(terms(ch)) <= c for c in clauses) for ch in tree.children
    ):
        return tree, []
    parts = [_restrict(tree, c) for c in clauses]
    if any(p is None for p in parts):
        return tree, []
    new = _join(Or, [p for p in parts if p is not None])
    if new == tree:
        return tree, []
    return new, ['", or" -> top-level OR']


def _child_at(
    children: list[tuple[int, Node]], toks: list[Token], i: int, step: int = 1
) -> int | None:
    """The positive child holding the first content word from token ``i`` on (``step`` -1:
    backwards)."""
    while 0 <= i < len(toks) and (toks[i].stem in STOPWORDS or toks[i].stem in _BOUNDARY):
        i += step
    if not 0 <= i < len(toks):
        return None
    for k, (_, child) in enumerate(children):
        if isinstance(child, Not):
            continue
        if any(i in (locate(t, toks) or []) for t in terms(child)):
            return k
    return None


def restore_dropped(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """Question words no term covers (content words only) become terms joined by AND (AND NOT
    in a negated clause, OR right after "or"), when the tree's top is an AND or a term.

    Example:
        >>> from pglogic.query import parse
        >>> print(restore_dropped(parse('"knife sharpening" AND NOT "electric sharpener"'),
        ...       tokens("Knife sharpening with a whetstone, not with an electric sharpener"))[0])
        "knife sharpening" AND "whetstone" AND NOT "electric sharpener"
    """
    if isinstance(tree, Or):
        return tree, []
    covered = _term_stems(tree)
    # "How does X work?": "work" asks how, it is no topic
    content_toks = [t for t in toks if t.stem not in _BOUNDARY]
    how_work = -1
    if content_toks and content_toks[0].stem == "how" and content_toks[-1].stem == "work":
        how_work = content_toks[-1].index
    runs: list[list[Token]] = []
    run: list[Token] = []
    for t in [*toks, Token(",", len(toks), ",", False)]:
        content = (
            t.stem not in _BOUNDARY
            and t.stem not in STOPWORDS
            and t.word.casefold() not in STOPWORDS
            and t.word.casefold() not in REQUEST_WORDS
            and t.word.casefold() not in VAGUE_WORDS
            and t.word.casefold() not in LITERAL_CUES
            and t.stem not in covered
            and not (t.index == how_work and t.stem == "work")
        )
        if content:
            run.append(t)
            continue
        joinable = run and t.stem in ("of", "and", "'") and t.stem not in _BOUNDARY
        if joinable:
            continue
        if run:
            runs.append(run)
        run = []
    if not runs:
        return tree, []
    occupied = {i for t in terms(tree) for i in (locate(t, toks) or [])}
    children: list[tuple[int, Node]] = []
    base = tree.children if isinstance(tree, And) else (tree,)
    for c in base:
        at = [i for t in terms(c) for i in (locate(t, toks) or [])]
        children.append((min(at) if at else 10**6, c))
    notes = []
    for r in runs:
        start, end = r[0].index, r[-1].index + 1
        back = start
        while (
            back > 0
            and toks[back - 1].stem not in _BOUNDARY
            and toks[back - 1].stem not in STOPWORDS
            and back - 1 not in occupied
        ):
            back -= 1
        if back < start and back > 0 and toks[back - 1].stem == "or":
            start = back  # "dark matter or dark energy" with "dark energy" dropped
        text = " ".join(t.word for t in toks[start:end])
        node: Node = Term(text)
        if toks[start].negated:
            node = Not(node)
        prev = toks[start - 1].stem if start > 0 else ""
        nxt = toks[end].stem if end < len(toks) else ""
        if nxt == "or" and children:
            k = _child_at(children, toks, end + 1)
            if k is not None:
                pos, old = children[k]
                children[k] = (start, _join(Or, [node, old]))
                notes.append(f'restored dropped "{text}" (OR)')
                continue
        if prev == "or" and children:
            k = _child_at(children, toks, start - 2, -1)
            if k is not None:
                pos, old = children[k]
                children[k] = (pos, _join(Or, [old, node]))
                notes.append(f'restored dropped "{text}" (OR)')
                continue
        children.append((start, node))
        notes.append(f'restored dropped "{text}"')
    children.sort(key=lambda pc: pc[0])
    return _join(And, [c for _, c in children]), notes


#: Words by which a question asks for a literal word, code or phrase (``... that mention wheat``,
#: ``the word "wheat"``, ``a fund named Alpha``): the term after one is a lexical term.
LITERAL_CUES = frozenset(
    {"mention", "mentions", "mentioned", "mentioning", "word", "words", "phrase", "named",
     "literally", "exact", "exactly"}
)  # fmt: skip
#: Words that may stand between a cue and its term.
_CUE_FILLERS = frozenset({"the", "a", "an", "any", "that", "explicitly", "of", "or"})


def mark_literal(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """Make lexical (``match:"..."``) the terms that the question asks for literally: those
    right after a cue of :data:`LITERAL_CUES` (articles between allowed). A term that starts
    with its cue (``"mention wheat"``) loses it.

    Example:
        >>> from pglogic.query import parse
        >>> t, notes = mark_literal(parse('"grain" AND NOT "wheat"'),
        ...                        tokens("Grain stories that do not mention the word wheat"))
        >>> print(t)
        "grain" AND NOT match:"wheat"
    """
    notes: list[str] = []

    def one(term: Term) -> Node:
        words = term.text.split()
        text = term.text
        if len(words) > 1 and words[0].casefold() in LITERAL_CUES:
            text = " ".join(words[1:])
        where = locate(text, toks)
        if not where or text.casefold() in LITERAL_CUES:
            return term
        i = min(where) - 1
        while i >= 0 and toks[i].word.casefold() in _CUE_FILLERS:
            i -= 1
        if i < 0 or toks[i].word.casefold() not in LITERAL_CUES:
            return term
        notes.append(f"'{text}' is asked for literally: a lexical term")
        return Match(text)

    return _map(tree, one), notes


def refine(tree: Node, question: str) -> tuple[Node, list[str]]:
    """Apply every check of this module to ``tree`` for ``question``; return it and the notes.

    Example:
        >>> from pglogic.query import parse
        >>> print(refine(parse('"chicken" AND NOT "garlic"'), 'Chicken, but no garlic')[0])
        "chicken" AND NOT "garlic"
    """
    toks = tokens(question)
    quoted = {m.strip().casefold() for m in re.findall(r'"([^"]+)"', question)}
    if quoted and all(t.casefold() in quoted for t in terms(tree)):
        return mark_literal(tree, toks)
    notes: list[str] = []
    for step in (
        fix_words,
        fix_trailing_not,
        _factor_step,
        fix_negation,
        fix_either,
        fix_comma_or,
        restore_dropped,
        fix_negation,
        group_negations,
        _factor_step,
    ):
        tree, more = step(tree, toks)
        notes += more
    tree, more = mark_literal(tree, toks)  # last: the checks above read semantic terms only
    return tree, notes + more


__all__ = [
    "REQUEST_WORDS",
    "STOPWORDS",
    "VAGUE_WORDS",
    "Token",
    "fix_comma_or",
    "fix_either",
    "fix_negation",
    "fix_words",
    "group_negations",
    "locate",
    "mark_literal",
    "refine",
    "restore_dropped",
    "snap_term",
    "stem",
    "tokens",
]
