"""Logical queries derived from a dataset's document labels, with exact ground truth.

Every derived query is a formula over labels (``grain AND wheat AND NOT corn``); the query terms
are the labels' term texts (:attr:`pglogic.eval.data.Dataset.term_text`) and the relevant documents
are exactly those whose label set satisfies the formula. Template groups:

* ``itlr3`` — all 32 three-term ITLR templates ``[NOT] t1 op1 [NOT] t2 op2 [NOT] t3`` with
  op1, op2 ∈ {AND, OR}, read with precedence NOT > AND > OR (``t1 OR t2 AND NOT t3`` is
  ``t1 OR (t2 AND NOT t3)``);
* ``chain`` — AND-only and OR-only formulas of 2 to 8 terms (ITLR Figure 3);
* ``nsfl`` — NSFL's six shapes A∧B, A∧B∧C, A∧¬B, A∧B∧¬C, A∨B, A∨B∨C;
* ``given`` — the dataset's own ``queries.jsonl`` (relevant/negatives as given).

Sampling rules (all constants below; ``m`` = median (low) support of the labels with ≥ 2 docs):

* a label is *usable* when it is on at least ``min(MIN_LABEL_DOCS, m)`` documents and not on
  every document;
* a formula is kept when it has at least ``min(MIN_RELEVANT, m - 1)`` (and ≥ 1) relevant
  documents — 5 on Reuters, Stack Exchange and arXiv, 1 on LIMIT-small where every label is on
  exactly 2 documents (so that a typical label can lose a document to an AND or a NOT and still
  qualify) — and when the relevant set is neither the whole corpus nor more than
  ``MAX_RELEVANT_FRACTION`` of it (this drops trivial formulas such as ``NOT t1 OR t2``);
* a formula with a NOT is kept only when it has at least one trap document (see below);
* two labels with identical document sets (aliases, e.g. arXiv ``math-ph``/``math.MP``) or with
  the same term text never appear in one formula; the labels of a formula are distinct;
* terms are related: the first label is drawn from the usable labels, every further label from
  the usable labels sharing at least one document with a label already drawn. For templates that
  are a conjunction of literals (``t1 AND NOT t2 AND t3``) the positive literals are drawn first,
  each keeping the conjunction at ≥ min-relevant documents, and each negated label must share a
  document with the positive conjunction while leaving ≥ min-relevant documents outside it;
* per template ``random.Random(f"{seed}:{template key}")`` draws from sorted candidate lists,
  ``TRY_BUDGET`` tries per wanted formula; duplicates (same formula up to the order of AND/OR
  operands) are rejected. Templates that end with fewer than ``per_template`` formulas are listed
  in :attr:`Derived.skipped` with the count and the most common rejection.

Negatives (trap documents, for NegRecall@10): for a formula with at least one NOT, the documents
that satisfy its *positive part* (every negated literal replaced by TRUE), carry at least one
label that appears negated, and do not satisfy the formula. Formulas without NOT have none.

Formulas are evaluated over bitsets (one Python ``int`` per label, bit ``i`` = document ``i``).

Example:
    >>> from pathlib import Path
    >>> from pglogic.eval.data import Dataset
    >>> labels = [{"grain", "wheat"}, {"grain", "wheat", "corn"}, {"grain"}, {"crude"}, set()]
    >>> ds = Dataset("toy", Path("toy"), Path("toy/corpus.jsonl"), ("d1", "d2", "d3", "d4", "d5"),
    ...              tuple(map(frozenset, labels)), {}, {}, ())
    >>> derived = derive_queries(ds, per_template=1)
    >>> q = next(q for q in derived.queries if q.template == "A∧¬B")
    >>> q.logical, sorted(q.relevant), sorted(q.negatives)
    ('"grain" AND NOT "wheat"', ['d3'], ['d1', 'd2'])
"""

from __future__ import annotations

import itertools
import random
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field

from pglogic.eval.data import Dataset, term_text_for_label
from pglogic.query import And, Match, Node, Not, Or, Term, parse, terms, to_string, to_text

__all__ = [
    "CHAIN_TEMPLATES",
    "GROUPS",
    "ITLR_TEMPLATES",
    "MAX_RELEVANT_FRACTION",
    "MIN_LABEL_DOCS",
    "MIN_RELEVANT",
    "NSFL_TEMPLATES",
    "PER_TEMPLATE",
    "SEED",
    "TEMPLATES",
    "TRY_BUDGET",
    "Derived",
    "EvalQuery",
    "Template",
    "derive_queries",
    "satisfies",
    "summarize",
    "thresholds",
    "to_text",
]

PER_TEMPLATE = 30
"""Formulas wanted per template (30: enough for a per-template Wilcoxon test to mean something)."""

SEED = 0
"""Default random seed."""

MIN_LABEL_DOCS = 5
"""A label is usable when on at least ``min(MIN_LABEL_DOCS, m)`` documents (module docstring)."""

MIN_RELEVANT = 5
"""A formula needs at least ``max(1, min(MIN_RELEVANT, m - 1))`` relevant documents."""

MAX_RELEVANT_FRACTION = 0.5
"""Formulas with more than this fraction of the corpus relevant are dropped."""

TRY_BUDGET = 200
"""Tries per wanted formula (``TRY_BUDGET * per_template`` per template)."""

GROUPS = ("itlr3", "chain", "nsfl", "given")
"""Query groups, in the order :func:`derive_queries` returns them."""


# -- templates ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """A formula shape over placeholder terms (``t1``, ``t2``... or ``A``, ``B``, ``C``).

    ``key`` prefixes the query ids, ``name`` is the readable label used in reports.

    Example:
        >>> t = ITLR_TEMPLATES[3]
        >>> t.key, t.name, t.slots
        ('itlr3-03', 't1 AND NOT t2 AND NOT t3', ('t1', 't2', 't3'))
    """

    key: str
    name: str
    group: str
    skeleton: Node

    @property
    def slots(self) -> tuple[str, ...]:
        """Placeholder names in order of appearance (t1, t2, ...)."""
        return tuple(terms(self.skeleton))


def _template(key: str, name: str, group: str, query: str) -> Template:
    return Template(key, name, group, parse(query))


def _itlr_templates() -> tuple[Template, ...]:
    result: list[Template] = []
    ops = itertools.product(("AND", "OR"), repeat=2)
    for (op1, op2), negs in itertools.product(ops, itertools.product((False, True), repeat=3)):
        lits = [("NOT " if neg else "") + f"t{i}" for i, neg in enumerate(negs, 1)]
        name = f"{lits[0]} {op1} {lits[1]} {op2} {lits[2]}"
        query = name
        for i in (1, 2, 3):
            query = query.replace(f"t{i}", f'"t{i}"')
        result.append(_template(f"itlr3-{len(result):02d}", name, "itlr3", query))
    return tuple(result)


ITLR_TEMPLATES = _itlr_templates()
"""The 32 three-term ITLR templates (index in the id: ``itlr3-00`` … ``itlr3-31``)."""

CHAIN_TEMPLATES = tuple(
    _template(
        f"{op.lower()}{n}",
        f"{op} x{n}",
        "chain",
        f" {op} ".join(f'"t{i}"' for i in range(1, n + 1)),
    )
    for op in ("AND", "OR")
    for n in range(2, 9)
)
"""AND-only and OR-only chains of 2 … 8 terms (``and2`` … ``and8``, ``or2`` … ``or8``)."""

NSFL_TEMPLATES = (
    _template("nsfl-AandB", "A∧B", "nsfl", '"A" AND "B"'),
    _template("nsfl-AandBandC", "A∧B∧C", "nsfl", '"A" AND "B" AND "C"'),
    _template("nsfl-AandnotB", "A∧¬B", "nsfl", '"A" AND NOT "B"'),
    _template("nsfl-AandBandnotC", "A∧B∧¬C", "nsfl", '"A" AND "B" AND NOT "C"'),
    _template("nsfl-AorB", "A∨B", "nsfl", '"A" OR "B"'),
    _template("nsfl-AorBorC", "A∨B∨C", "nsfl", '"A" OR "B" OR "C"'),
)
"""NSFL's six formula shapes."""

TEMPLATES = ITLR_TEMPLATES + CHAIN_TEMPLATES + NSFL_TEMPLATES
"""Every label template, in the order queries are derived."""


# -- queries -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalQuery:
    """One evaluation query: a formula over term texts with its relevant and trap documents.

    ``labels`` are the labels behind the terms, in order of first appearance in ``tree`` (empty
    for given queries); ``source_text`` is the natural-language text of a given query.

    Example:
        >>> q = EvalQuery("and2-0001", "AND x2", "chain", And((Term("grain"), Term("wheat"))),
        ...               ("grain", "wheat"), frozenset({"d1"}), frozenset(), 2, 0)
        >>> q.logical, q.text, q.term_labels
        ('"grain" AND "wheat"', 'grain and wheat', {'grain': 'grain', 'wheat': 'wheat'})
    """

    id: str
    template: str
    group: str
    tree: Node
    labels: tuple[str, ...]
    relevant: frozenset[str]
    negatives: frozenset[str]
    n_terms: int
    n_negations: int
    source_text: str | None = None

    @property
    def logical(self) -> str:
        """The formula as a pglogic query string."""
        return to_string(self.tree)

    @property
    def text(self) -> str:
        """The monolithic natural-language query (a given query's own text, else :func:`to_text`)."""
        return self.source_text if self.source_text is not None else to_text(self.tree)

    @property
    def term_labels(self) -> dict[str, str]:
        """Map each term text of ``tree`` to its label (empty for given queries)."""
        if not self.labels:
            return {}
        return dict(zip(terms(self.tree), self.labels, strict=True))


@dataclass(frozen=True)
class Derived:
    """Result of :func:`derive_queries`.

    ``skipped`` maps template names with fewer than ``per_template`` formulas to the reason;
    ``thresholds`` records the adaptive thresholds used (``min_label_docs``, ``min_relevant``,
    ``max_relevant``, ``usable_labels``).

    Example:
        >>> Derived((), {"AND x8": "0 of 10: ..."}).skipped
        {'AND x8': '0 of 10: ...'}
    """

    queries: tuple[EvalQuery, ...]
    skipped: dict[str, str]
    thresholds: dict[str, int] = field(default_factory=dict)


def summarize(derived: Derived) -> dict[str, int]:
    """Count the queries per group (every group of :data:`GROUPS`, zeros included).

    Example:
        >>> summarize(Derived((), {}))
        {'itlr3': 0, 'chain': 0, 'nsfl': 0, 'given': 0}
    """
    counts = Counter(q.group for q in derived.queries)
    return {group: counts.get(group, 0) for group in GROUPS}


# -- formulas ----------------------------------------------------------------------------------


def satisfies(
    tree: Node, doc_labels: Set[str], term_label: Mapping[str, str] | None = None
) -> bool:
    """Evaluate a formula on one document's label set.

    A term is true when its label is in ``doc_labels``; the label of a term is
    ``term_label[text]`` when given (see :attr:`EvalQuery.term_labels`), else the text itself.

    Example:
        >>> satisfies(parse('"grain" AND NOT "corn"'), {"grain", "wheat"})
        True
        >>> satisfies(parse('"Crude Oil" OR "gold"'), {"crude"}, {"Crude Oil": "crude"})
        True
    """
    if isinstance(tree, Term | Match):  # a lexical term names its label too
        label = term_label.get(tree.text, tree.text) if term_label is not None else tree.text
        return label in doc_labels
    if isinstance(tree, Not):
        return not satisfies(tree.child, doc_labels, term_label)
    if isinstance(tree, And):
        return all(satisfies(c, doc_labels, term_label) for c in tree.children)
    return any(satisfies(c, doc_labels, term_label) for c in tree.children)


def _bits(tree: Node, leaf: Callable[[str], int], full: int, *, positive_part: bool = False) -> int:
    """Evaluate over bitsets; with ``positive_part`` every NOT subtree counts as TRUE."""
    if isinstance(tree, Term | Match):
        return leaf(tree.text)
    if isinstance(tree, Not):
        return full if positive_part else full & ~_bits(tree.child, leaf, full)
    values = [_bits(c, leaf, full, positive_part=positive_part) for c in tree.children]
    result = values[0]
    for value in values[1:]:
        result = result & value if isinstance(tree, And) else result | value
    return result


def _negated_terms(tree: Node, under_not: bool = False) -> set[str]:
    if isinstance(tree, Term | Match):
        return {tree.text} if under_not else set()
    if isinstance(tree, Not):
        return _negated_terms(tree.child, True)
    return set().union(*(_negated_terms(c, under_not) for c in tree.children))


def _count_nots(tree: Node) -> int:
    if isinstance(tree, Term | Match):
        return 0
    if isinstance(tree, Not):
        return 1 + _count_nots(tree.child)
    return sum(_count_nots(c) for c in tree.children)


def _substitute(tree: Node, texts: Mapping[str, str]) -> Node:
    if isinstance(tree, Term | Match):
        return type(tree)(texts[tree.text])
    if isinstance(tree, Not):
        return Not(_substitute(tree.child, texts))
    children = tuple(_substitute(c, texts) for c in tree.children)
    return And(children) if isinstance(tree, And) else Or(children)


def _canonical(tree: Node, labels: Mapping[str, str]) -> str:
    """A key equal for formulas that differ only in the order of AND/OR operands."""
    if isinstance(tree, Term | Match):
        return repr(labels[tree.text])
    if isinstance(tree, Not):
        return f"NOT({_canonical(tree.child, labels)})"
    op = "AND" if isinstance(tree, And) else "OR"
    return f"{op}({','.join(sorted(_canonical(c, labels) for c in tree.children))})"


# -- sampling ----------------------------------------------------------------------------------


def thresholds(ds: Dataset) -> dict[str, int]:
    """Return the adaptive thresholds for ``ds`` (see the module docstring).

    ``min_label_docs`` and ``min_relevant`` are 0 when no label is on two or more documents.

    Example:
        >>> from pathlib import Path
        >>> ds = Dataset("t", Path("t"), Path("t/c.jsonl"), ("a", "b", "c"),
        ...              (frozenset({"x"}), frozenset({"x", "y"}), frozenset({"y"})), {}, {}, ())
        >>> thresholds(ds)
        {'min_label_docs': 2, 'min_relevant': 1, 'max_relevant': 1}
    """
    n = len(ds.doc_ids)
    support = Counter(label for labels in ds.labels for label in labels)
    multi = sorted(count for count in support.values() if count >= 2)
    max_relevant = min(n - 1, int(MAX_RELEVANT_FRACTION * n))
    if not multi:
        return {"min_label_docs": 0, "min_relevant": 0, "max_relevant": max_relevant}
    median = statistics.median_low(multi)
    return {
        "min_label_docs": min(MIN_LABEL_DOCS, median),
        "min_relevant": max(1, min(MIN_RELEVANT, median - 1)),
        "max_relevant": max_relevant,
    }


@dataclass
class _Index:
    """Labels as bitsets, usable labels, co-occurrence and exclusion (alias / same text) sets."""

    labels: list[str]
    text: list[str]
    bits: list[int]
    support: list[int]
    full: int
    usable: list[int]
    neighbors: list[tuple[int, ...]]
    excluded: list[frozenset[int]]

    @classmethod
    def build(cls, ds: Dataset, min_label_docs: int) -> _Index:
        labels = sorted(set().union(*ds.labels)) if ds.labels else []
        position = {label: i for i, label in enumerate(labels)}
        bits = [0] * len(labels)
        for doc, doc_labels in enumerate(ds.labels):
            for label in doc_labels:
                bits[position[label]] |= 1 << doc
        full = (1 << len(ds.doc_ids)) - 1
        support = [b.bit_count() for b in bits]
        usable = [i for i in range(len(labels)) if min_label_docs <= support[i] < len(ds.doc_ids)]
        is_usable = set(usable)
        neighbor_sets: list[set[int]] = [set() for _ in labels]
        for doc_labels in ds.labels:
            on_doc = sorted(position[label] for label in doc_labels)
            on_doc = [i for i in on_doc if i in is_usable]
            for i in on_doc:
                neighbor_sets[i].update(on_doc)
        for i, others in enumerate(neighbor_sets):
            others.discard(i)
        text = [ds.term_text.get(label) or term_text_for_label(label)[0] for label in labels]
        same: dict[object, set[int]] = {}
        for i in usable:
            same.setdefault(("bits", bits[i]), set()).add(i)
            same.setdefault(("text", text[i]), set()).add(i)
        excluded = [
            frozenset(same.get(("bits", bits[i]), set()) | same.get(("text", text[i]), set()) | {i})
            for i in range(len(labels))
        ]
        neighbors = [tuple(sorted(s)) for s in neighbor_sets]
        return cls(labels, text, bits, support, full, usable, neighbors, excluded)


def _ids(bits: int, doc_ids: tuple[str, ...]) -> frozenset[str]:
    digits = bin(bits)[:1:-1]
    return frozenset(doc_ids[i] for i, digit in enumerate(digits) if digit == "1")


class _Sampler:
    def __init__(self, ds: Dataset, index: _Index, limits: Mapping[str, int]) -> None:
        self.ds = ds
        self.ix = index
        self.min_relevant = limits["min_relevant"]
        self.max_relevant = limits["max_relevant"]
        self.first: dict[bool, list[int]] = {}  # filtered first-slot pools

    def pool(self, chosen: list[int]) -> list[int]:
        ix = self.ix
        if not chosen:
            return ix.usable
        excluded = set().union(*(ix.excluded[c] for c in chosen))
        if len(chosen) == 1:
            return [c for c in ix.neighbors[chosen[0]] if c not in excluded]
        candidates = set().union(*(ix.neighbors[c] for c in chosen))
        return sorted(candidates - excluded)

    def draw(
        self, template: Template, per_template: int, seed: int, seen: set[str]
    ) -> tuple[list[EvalQuery], str]:
        """Return the accepted queries and, when fewer than wanted, the reason.

        ``seen`` holds the canonical forms of the formulas accepted so far by every template
        (``AND x3`` and ``A∧B∧C`` have the same shape): a formula is never evaluated twice.
        """
        ix = self.ix
        rng = random.Random(f"{seed}:{template.key}")
        skeleton = template.skeleton
        slots = template.slots
        # a conjunction of literals: positive literals first, filtered to keep the AND non-trivial
        literal_and = False
        positive: set[str] = set()
        if isinstance(skeleton, And) and all(
            isinstance(c, Term) or (isinstance(c, Not) and isinstance(c.child, Term))
            for c in skeleton.children
        ):
            literal_and = True
            positive = {c.text for c in skeleton.children if isinstance(c, Term)}
        order = [s for s in slots if s in positive] + [s for s in slots if s not in positive]
        negated = _negated_terms(skeleton)
        budget = TRY_BUDGET * per_template
        accepted: list[EvalQuery] = []
        rejections: Counter[str] = Counter()
        tries = 0
        while len(accepted) < per_template and tries < budget:
            tries += 1
            chosen: dict[str, int] = {}
            core: int | None = None
            failure = ""
            for slot in order:
                pool = self.pool(list(chosen.values()))
                if not pool:
                    failure = "no related label to extend the formula"
                    break
                if literal_and:
                    pool = self._filter(pool, core, slot in positive)
                    if not pool:
                        failure = (
                            f"no related label keeps the AND at ≥ {self.min_relevant} documents"
                            if slot in positive
                            else f"no related label to negate that keeps ≥ {self.min_relevant}"
                            " documents and leaves a trap"
                        )
                        break
                pick = rng.choice(pool)
                chosen[slot] = pick
                if slot in positive:
                    core = ix.bits[pick] if core is None else core & ix.bits[pick]
            if failure:
                rejections[failure] += 1
                continue

            def leaf(slot: str, chosen: dict[str, int] = chosen) -> int:
                return ix.bits[chosen[slot]]

            relevant = _bits(skeleton, leaf, ix.full)
            count = relevant.bit_count()
            if count < self.min_relevant:
                rejections[f"fewer than {self.min_relevant} relevant documents"] += 1
                continue
            if count > self.max_relevant:
                rejections[f"more than {MAX_RELEVANT_FRACTION:.0%} of the corpus relevant"] += 1
                continue
            traps = 0
            if negated:
                with_negated = 0
                for slot in negated:
                    with_negated |= ix.bits[chosen[slot]]
                traps = _bits(skeleton, leaf, ix.full, positive_part=True)
                traps &= with_negated & ~relevant
                if not traps:
                    rejections["no trap document (negated labels never meet the rest)"] += 1
                    continue
            slot_labels = {slot: ix.labels[chosen[slot]] for slot in slots}
            texts = {slot: ix.text[chosen[slot]] for slot in slots}
            # by term text: two labels with one name (aliases) make the same query
            key = _canonical(skeleton, texts)
            if key in seen:
                rejections["only repeats of formulas already drawn"] += 1
                continue
            seen.add(key)
            accepted.append(
                EvalQuery(
                    id=f"{template.key}-{len(accepted) + 1:04d}",
                    template=template.name,
                    group=template.group,
                    tree=_substitute(skeleton, texts),
                    labels=tuple(slot_labels[slot] for slot in slots),
                    relevant=_ids(relevant, self.ds.doc_ids),
                    negatives=_ids(traps, self.ds.doc_ids),
                    n_terms=len(slots),
                    n_negations=_count_nots(skeleton),
                )
            )
        if len(accepted) >= per_template:
            return accepted, ""
        if rejections:
            reason, times = rejections.most_common(1)[0]
            why = f"{reason} ({times} of {tries} tries)"
        else:
            why = "no usable label"
        return accepted, f"{len(accepted)} of {per_template}: {why}"

    def _filter(self, pool: list[int], core: int | None, positive: bool) -> list[int]:
        """Keep candidates that leave a conjunction of literals with enough documents.

        ``core`` is the conjunction of the positive literals drawn so far (None: none yet).
        """
        ix = self.ix
        need = self.min_relevant
        if core is None:
            cached = pool is ix.usable
            if cached and positive in self.first:
                return self.first[positive]
            size = ix.full.bit_count()
            if positive:
                result = [c for c in pool if ix.support[c] >= need]
            else:
                result = [c for c in pool if size - ix.support[c] >= need]
            if cached:
                self.first[positive] = result
            return result
        bits = ix.bits
        if positive:
            return [c for c in pool if (core & bits[c]).bit_count() >= need]
        size = core.bit_count()
        result = []
        for c in pool:
            overlap = (core & bits[c]).bit_count()
            if overlap > 0 and size - overlap >= need:
                result.append(c)
        return result


def _given(ds: Dataset, max_given: int | None) -> list[EvalQuery]:
    result = []
    for gq in ds.queries[:max_given] if max_given is not None else ds.queries:
        tree = parse(gq.logical) if gq.logical is not None else Term(gq.text)
        result.append(
            EvalQuery(
                id=f"given-{gq.id}",
                template="given",
                group="given",
                tree=tree,
                labels=(),
                relevant=gq.relevant,
                negatives=gq.negatives,
                n_terms=len(terms(tree)),
                n_negations=_count_nots(tree),
                source_text=gq.text,
            )
        )
    return result


def derive_queries(
    ds: Dataset,
    *,
    per_template: int = PER_TEMPLATE,
    seed: int = SEED,
    include_given: bool = True,
    max_given: int | None = None,
) -> Derived:
    """Derive up to ``per_template`` formulas per template from ``ds``'s labels, plus the given
    queries (the first ``max_given`` when set). Deterministic for a given ``seed``.

    Example:
        >>> from pglogic.eval.data import load_dataset
        >>> derived = derive_queries(load_dataset(Path("../shared/data/reuters21578")))  # doctest: +SKIP
        >>> summarize(derived)  # doctest: +SKIP
        {'itlr3': 176, 'chain': 100, 'nsfl': 60, 'given': 0}
    """
    if per_template < 0:
        raise ValueError("per_template must be >= 0")
    if max_given is not None and max_given < 0:
        raise ValueError("max_given must be >= 0")
    limits = thresholds(ds)
    index = _Index.build(ds, limits["min_label_docs"]) if limits["min_label_docs"] else None
    queries: list[EvalQuery] = []
    skipped: dict[str, str] = {}
    if index is not None and index.usable:
        sampler = _Sampler(ds, index, limits)
        seen: set[str] = set()
        for template in TEMPLATES:
            accepted, why = sampler.draw(template, per_template, seed, seen)
            queries.extend(accepted)
            if why:
                skipped[template.name] = why
    elif per_template > 0:
        for template in TEMPLATES:
            skipped[template.name] = f"0 of {per_template}: no usable label"
    if include_given:
        queries.extend(_given(ds, max_given))
    limits["usable_labels"] = len(index.usable) if index is not None else 0
    return Derived(tuple(queries), skipped, limits)
