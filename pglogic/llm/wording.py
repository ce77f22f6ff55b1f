"""Deterministic checks of a rewrite against the question, acting only where they are certain.

A small model rewords terms, folds an OR into one term, drops an exclusion or writes a term of
function words. :func:`refine` reads the question itself and repairs only what it can prove;
where it is not sure, the model's reading stands. It never removes a NOT the model wrote.

* **words** — a term not made of the question's words is snapped to the question span it came
  from (:func:`snap_term`: same words up to case and plural); request words at a term's edge
  ("questions about", "... news") are dropped. A term holding " or " is left whole: where its
  alternatives end is not certain ("gold or silver in Canada").
* **exclusions** — after a certain cue (:data:`CERTAIN_CUES`: "except", "excluding", "other
  than", "apart from", "aside from", "besides", "but not", "neither ... nor", "free of") a term
  the model left positive is negated, and an excluded thing the model dropped is added under NOT.
  Several terms excluded by one phrase ("excluding A and B") become one ``NOT (A OR B)``. After
  "not", "no", "without", "instead of", "rather than" or a contraction ("don't", "isn't") the
  question may describe a situation ("bread not rising") rather than exclude: no check acts.
* **either … or** — the two alternatives must meet in an OR, not an AND.
* **no fillers** — no check adds a term made only of function words (:func:`is_function_word`:
  scikit-learn's English stop list and contractions, "get", "don't", "ones"); in grammar mode the
  model cannot write one either (:func:`pglogic.llm.grammar.query_gbnf`).

Each repair is named in the returned notes. A question that already quotes every term of the
rewrite (the user wrote the query) is left alone.

Example:
    >>> from pglogic.query import parse
    >>> tree, notes = refine(parse('"sugar" AND ("Brazil" OR "Cuba")'), "Sugar, but not Brazil or Cuba")
    >>> print(tree)
    "sugar" AND NOT ("Brazil" OR "Cuba")
    >>> notes
    ['negated "Brazil" OR "Cuba" (excluded in the question)']
    >>> print(refine(parse('"vegan desserts" AND NOT "coconut"'), "Vegan desserts that don't use coconut")[0])
    "vegan desserts" AND NOT "coconut"
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

#: What may follow a request word that ends a term ("wheat stories about", "trade news besides").
_AFTER_REQUEST = _wordset(
    "about on regarding concerning that which , but not except excluding besides without other "
    "apart aside"
) | {""}
#: Words that join request words to the topic they ask about ("questions about X").
_ABOUT = _wordset("about on regarding concerning of covering discussing mentioning")
_TOKEN = re.compile(r"[^\W_](?:[\w'’&+#./-]*[\w+#])?|[,;:.!?()]")
_BOUNDARY = frozenset(",;:.!?()")
#: Negation cues: a word, or a pair of words, after which the clause is negated. Contractions in
#: "n't" count too (:func:`is_negation_cue`).
_NEGATORS = _wordset(
    "not no never without except excluding exclude excludes excluded avoiding avoid neither nor "
    "lacking barring besides cannot"
)
_PAIRS = {
    ("other", "than"), ("rather", "than"), ("instead", "of"), ("apart", "from"),
    ("aside", "from"), ("anything", "but"), ("everything", "but"), ("all", "but"),
    ("free", "of"), ("but", "not"),
}  # fmt: skip
#: The cues that always exclude what follows them: a check may negate a term the model left
#: positive only after one of these. "not", "no", "without", "instead of", "rather than" and the
#: contractions also describe a situation ("bread not rising", "bake without burning the fond"):
#: there the model's reading stands.
CERTAIN_CUES = _wordset("except excluding exclude excludes excluded besides neither nor")
CERTAIN_PAIRS = {
    ("other", "than"), ("apart", "from"), ("aside", "from"), ("but", "not"), ("free", "of"),
}  # fmt: skip


def negates(word: str, words: frozenset[str]) -> bool:
    """Whether ``word`` is one of ``words`` (case-folded) or a contraction in "n't".

    Example:
        >>> [negates(w, frozenset({"not"})) for w in ("Not", "won’t", "nothing")]
        [True, True, False]
    """
    w = word.casefold().replace("’", "'")
    return w in words or w.endswith("n't")


def is_negation_cue(word: str) -> bool:
    """Whether ``word`` alone starts a negated clause (a cue word or a contraction in "n't").

    Example:
        >>> [is_negation_cue(w) for w in ("without", "don't", "aren’t", "coconut")]
        [True, True, True, False]
    """
    return negates(word, _NEGATORS)


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


def question_names(question: str) -> frozenset[str]:
    """The words (case-folded) that ``question`` writes as names, so never function words: all
    in capitals ("US", "ROS") or capitalised after a sentence's first word ("Rust or Go").

    Example:
        >>> sorted(question_names("Where can I buy it in the US? Is Go fine. Rust or Go"))
        ['go', 'us']
    """
    out = set()
    first = True
    for word in _TOKEN.findall(question):
        if word in ".?!:;(":
            first = True
            continue
        letters = [c for c in word if c.isalpha()]
        capitals = all(c.isupper() for c in letters) or (word[0].isupper() and not first)
        if len(letters) > 1 and capitals:
            out.add(word.casefold())
        first = False
    return frozenset(out)


def is_function_word(word: str, names: frozenset[str] = frozenset()) -> bool:
    """Whether ``word`` carries no topic: a stop word (:func:`stop_words`), a contraction of one
    ("I'm", "it's") or of a negated auxiliary ("don't", "won't", "aren't"); never a word in
    ``names`` (:func:`question_names`).

    Example:
        >>> [is_function_word(w) for w in ("get", "don't", "I'm", "Aren’t", "passport", "gym")]
        [True, True, True, True, False, False]
        >>> is_function_word("US"), is_function_word("US", frozenset({"us"}))
        (True, False)
    """
    w = word.casefold().replace("’", "'")
    if w in names:
        return False
    if w.endswith("n't") or w == "cannot":
        return True
    if "'" in w:
        head, _, tail = w.partition("'")
        if tail in ("s", "m", "re", "ve", "ll", "d") and head in stop_words():
            return True
    return w in stop_words() or stem(w) in stop_words()


def content_stems(text: str, names: frozenset[str] = frozenset()) -> list[str]:
    """The stems (:func:`stem`) of ``text``'s words that are not function words, in order.

    Example:
        >>> content_stems("How do I get a work permit?")
        ['work', 'permit']
        >>> content_stems("the ones that don't need a gym")
        ['need', 'gym']
    """
    return [stem(w) for w in _words(text) if not is_function_word(w, names)]


@dataclass(frozen=True)
class Token:
    """One word or punctuation mark of the question, with its stem and whether a negation cue
    covers it (``negated``) and whether that cue is certain (``excluded``, :data:`CERTAIN_CUES`).

    Example:
        >>> Token("Oil", 0, "oil", False).word
        'Oil'
    """

    word: str
    index: int
    stem: str
    negated: bool
    excluded: bool = False


def tokens(question: str) -> list[Token]:
    """The question's words and punctuation, each marked negated when a negation phrase covers it.

    Example:
        >>> [(t.word, t.negated) for t in tokens("tea, not coffee or milk, or juice")]
        [('tea', False), (',', False), ('not', False), ('coffee', True), ('or', True), ('milk', True), (',', False), ('or', False), ('juice', False)]
        >>> [(t.word, t.excluded) for t in tokens("sauces other than tomato, without garlic")][3::3]
        [('tomato', True), ('garlic', False)]
    """
    raw = _TOKEN.findall(question)
    low = [w.casefold().replace("’", "'") for w in raw]
    out: list[Token] = []
    negated = excluded = fronted = False
    topic = False  # a word other than a cue or a function word came before
    for i, w in enumerate(low):
        nxt = low[i + 1] if i + 1 < len(low) else ""
        prev = low[i - 1] if i > 0 else ""
        if w in _BOUNDARY:
            if (
                w != ","
                or fronted  # "Besides Vanguard, which brokerages ...": the comma ends it
                or nxt in ("or", "and")
                or (nxt == "but" and low[i + 2 : i + 3] != ["not"])
            ):
                negated = excluded = fronted = False
            out.append(Token(raw[i], i, w, False))
            continue
        if w == "but" and nxt != "not":
            negated = excluded = False
        cue = is_negation_cue(w) or (prev, w) in _PAIRS
        if w == "no" and nxt in _BOUNDARY:
            cue = False
        out.append(Token(raw[i], i, stem(raw[i]), negated, excluded))
        if cue:
            negated = True
            excluded = w in CERTAIN_CUES or (prev, w) in CERTAIN_PAIRS
            fronted = not topic
        elif not negated and not is_function_word(w) and (w, nxt) not in _PAIRS:
            topic = True
    return out


def _words(text: str) -> list[str]:
    return [w for w in _TOKEN.findall(text) if w not in _BOUNDARY]


def _spans(toks: list[Token]) -> list[tuple[int, int]]:
    """Contiguous word runs between punctuation and logic words: (start, end) token indexes."""
    out: list[tuple[int, int]] = []
    start = None
    for i, t in enumerate([*toks, Token(",", len(toks), ",", False)]):
        breaks = t.stem in _BOUNDARY or t.stem in ("or", "nor", "but") or is_negation_cue(t.word)
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
    """Snap reworded terms and drop request words at a term's edge.

    Example:
        >>> from pglogic.query import parse
        >>> tree, notes = fix_words(parse('"questions about sourdough" OR "rye"'),
        ...                         tokens("Questions about sourdough or rye"))
        >>> print(tree)
        "sourdough" OR "rye"
    """
    notes: list[str] = []

    def one(text: str) -> Node:
        snapped = snap_term(text, toks)
        if snapped is not None and snapped.casefold() != text.casefold():
            notes.append(f'"{text}" -> "{snapped}" (the question\'s words)')
            text = snapped
        words = text.split()
        lead = 0
        while lead < len(words) - 1 and words[lead].casefold() in REQUEST_WORDS:
            lead += 1
        if 0 < lead < len(words) - 1 and words[lead].casefold() in _ABOUT:
            words = words[lead + 1 :]  # "questions about sourdough"; not "things to do in paris"
        while len(words) > 1 and words[0].casefold() in LEADING_WORDS:
            words = words[1:]
        if len(words) > 1 and words[-1].casefold() in REQUEST_WORDS:
            at = locate(" ".join(words), toks)
            after = toks[at[-1] + 1].word.casefold() if at and at[-1] + 1 < len(toks) else ""
            if after in _AFTER_REQUEST:
                words = words[:-1]
        cleaned = " ".join(words)
        if cleaned != text:
            notes.append(f'"{text}" -> "{cleaned}" (request words)')
        return Term(cleaned)

    return _map(tree, lambda term: one(term.text)), notes


def _should_negate(text: str, toks: list[Token]) -> bool | None:
    """True when a certain cue covers every word of ``text`` in the question, None when unsure."""
    at = locate(text, toks)
    if at is None:
        return None
    return True if all(toks[i].excluded for i in at) else None


def _polarity(tree: Node, toks: list[Token], negated: bool = False) -> list[tuple[bool, bool]]:
    """(negated in the tree, excluded for certain in the question) for every term occurrence."""
    if isinstance(tree, Term):
        return [(negated, bool(_should_negate(tree.text, toks)))]
    if isinstance(tree, Not):
        return _polarity(tree.child, toks, not negated)
    assert isinstance(tree, And | Or)
    return [p for c in tree.children for p in _polarity(c, toks, negated)]


def fix_negation(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """Negate the largest groups of an AND that the question excludes with a certain cue
    (:data:`CERTAIN_CUES`: "except", "excluding", "other than", "apart from", "besides", "but
    not", "neither ... nor"...) and the model left positive. A NOT the model wrote is never
    removed; a group after an uncertain cue ("not", "without", "don't"...) is left as the model
    read it.

    Example:
        >>> from pglogic.query import parse
        >>> print(fix_negation(parse('"sauces" AND "tomato"'), tokens("sauces other than tomato"))[0])
        "sauces" AND NOT "tomato"
        >>> print(fix_negation(parse('"bread" AND "rise"'), tokens("bread that does not rise"))[0])
        "bread" AND "rise"
        >>> print(fix_negation(parse('"rice" AND NOT "left out"'), tokens("rice left out overnight"))[0])
        "rice" AND NOT "left out"
    """
    notes: list[str] = []

    def negate(node: Node) -> Node:
        if isinstance(node, Not):
            return node
        pol = _polarity(node, toks, False)
        if pol and all(want and not has for has, want in pol):
            notes.append(f"negated {node} (excluded in the question)")
            return Not(node)
        if isinstance(node, And | Or):
            return _rebuild(node, [negate(c) for c in node.children])
        return node

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
                and all(toks[i].excluded for t in terms(child) for i in locate(t, toks) or [])
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
    ) and not is_negation_cue(toks[end].word):  # fmt: skip
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


def restore_excluded(tree: Node, toks: list[Token]) -> tuple[Node, list[str]]:
    """A thing the question excludes with a certain cue (:data:`CERTAIN_CUES`) that no term
    covers is added under NOT: the model dropped an exclusion. Only runs of content words
    (no function, request or vague word) are added, and only to a tree whose top is an AND or a
    term.

    Example:
        >>> from pglogic.query import parse
        >>> print(restore_excluded(parse('"marathon training plans"'),
        ...       tokens("Marathon training plans, apart from ones that need a gym"))[0])
        "marathon training plans" AND NOT "gym"
        >>> print(restore_excluded(parse('"vegan desserts"'), tokens("Vegan desserts that don't use coconut"))[0])
        "vegan desserts"
    """
    if isinstance(tree, Or):
        return tree, []
    covered = _term_stems(tree)
    names = question_names(" ".join(t.word for t in toks))
    runs: list[list[Token]] = []
    run: list[Token] = []
    for t in [*toks, Token(",", len(toks), ",", False)]:
        content = (
            t.excluded
            and t.stem not in _BOUNDARY
            and not is_function_word(t.word, names)
            and t.word.casefold() not in STOPWORDS
            and t.word.casefold() not in REQUEST_WORDS
            and t.word.casefold() not in VAGUE_WORDS
            and t.word.casefold() not in LITERAL_CUES
            and t.stem not in covered
        )
        if content:
            run.append(t)
            continue
        if run:
            runs.append(run)
        run = []
    if not runs:
        return tree, []
    parts = list(tree.children) if isinstance(tree, And) else [tree]
    notes = []
    for r in runs:
        text = " ".join(t.word for t in r)
        parts.append(Not(Term(text)))
        notes.append(f'added NOT "{text}" (excluded in the question, missing from the query)')
    return _join(And, parts), notes


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
        _factor_step,
        fix_negation,
        fix_either,
        restore_excluded,
        group_negations,
        _factor_step,
    ):
        tree, more = step(tree, toks)
        notes += more
    tree, more = mark_literal(tree, toks)  # last: the checks above read semantic terms only
    return tree, notes + more


__all__ = [
    "CERTAIN_CUES",
    "REQUEST_WORDS",
    "STOPWORDS",
    "VAGUE_WORDS",
    "Token",
    "content_stems",
    "fix_either",
    "fix_negation",
    "fix_words",
    "group_negations",
    "is_function_word",
    "is_negation_cue",
    "locate",
    "mark_literal",
    "negates",
    "question_names",
    "refine",
    "restore_excluded",
    "snap_term",
    "stem",
    "stop_words",
    "tokens",
]
