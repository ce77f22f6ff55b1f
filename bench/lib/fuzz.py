"""Query JSON for the SQL function that is valid most of the time, with hostile leaves.

``pglogic.search`` takes a JSON object (a tree, options, filters: docs/sql-api.md). A generator
of arbitrary JSON (:func:`arbitrary`) almost never writes a query the function accepts, so it
only reaches the first checks. :func:`queries` writes the function's own language: trees of
terms (with a vector of the corpus's dimension, or a cached term's text), lexical terms, AND,
OR and NOT; options drawn from valid values and the edges around them; filters in every form
the function takes. Each part is sometimes broken on purpose (a vector of another length, a
zero vector, an unknown option, a NaN-like string, SQL in a term's text, a quote, a backslash),
so most values run the whole search and the rest are refused with a documented SQLSTATE.

Used by ``tests/test_fuzz.py`` (a few hundred values per run) and
``bench/correctness/reliability.py`` (thousands).

Example:
    >>> from hypothesis import given, settings
    >>> seen = []
    >>> @settings(max_examples=5, database=None)
    ... @given(queries(dim=4, terms=("oil", "gas")))
    ... def f(value): seen.append(sorted(value))
    >>> f()
    >>> all("tree" in keys for keys in seen)
    True
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: Text that must stay text: quotes, backslashes, SQL, JSON in a string, non-ASCII, whitespace.
HOSTILE_TEXT = ["'); DROP TABLE public.canary; --", '"quoted"', "back\\slash", "é ü ß 中文",
                "[1,2]", "{\"op\": \"or\"}", "a\tb", "%s %(x)s $1", "x" * 300]  # fmt: skip
#: Documented SQLSTATEs of pglogic.search: bad input (22023), an unknown corpus or calibration
#: (42704), a value that is no number or vector (22P02), a data exception of pgvector (22000).
SQL_STATES = {"22023", "42704", "22P02", "22000"}


def arbitrary() -> st.SearchStrategy[Any]:
    """Arbitrary JSON over the function's keys and words (rarely a valid query)."""
    keys = st.sampled_from(["op", "args", "arg", "term", "vector", "tree", "k", "operators",
                            "truth", "exact", "depth", "ef_search", "filters", "guide",
                            "term_scans", "iterative_scan", "contains", "key", "value", "x'; --"])  # fmt: skip
    scalars = (st.none() | st.booleans() | st.integers(-(2**40), 2**40)
               | st.floats(allow_nan=False, allow_infinity=False)
               | st.sampled_from(["and", "or", "not", "oil", "", "product-max", "itlr", "=", ">=",
                                  "calibrated", *HOSTILE_TEXT]))  # fmt: skip
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5)
        ),
        max_leaves=20,
    )


def vector_of(text: str, dim: int) -> list[float]:
    """A fixed vector for a term's text (one text, one vector, as the function requires).

    Example:
        >>> vector_of("oil", 4) == vector_of("oil", 4) != vector_of("gas", 4)
        True
    """
    seed = sum((i + 1) * ord(c) for i, c in enumerate(text))
    return [((seed * (j + 7)) % 97) / 97 - 0.5 + 0.01 for j in range(dim)]


def _term(dim: int, terms: tuple[str, ...], ok: bool) -> st.SearchStrategy[Any]:
    # (a text of the term cache is given bare, another with its vector: a term given both ways
    # is refused, as is one given two vectors)
    text = st.sampled_from(["crude", "prices", *HOSTILE_TEXT])
    if ok:  # the corpus's dimension, one vector per text
        with_vector = text.map(lambda t: {"term": t, "vector": vector_of(t, dim)})
    else:
        broken = st.sampled_from([
            [0.0] * dim,  # a zero vector: no direction
            [1.0] * (dim + 1),  # another dimension
            "not a vector",
            [1e39] * dim,  # past float4
            [],
        ])  # fmt: skip
        with_vector = st.builds(lambda t, v: {"term": t, "vector": v},
                                st.one_of(text, st.just("  ")), broken)  # fmt: skip
    cached = st.sampled_from(terms if ok else ("oil", "not cached"))  # looked up in term_cache
    words = ["wheat", "oil prices", "o'brien"] if ok else ["the", "", "smtp*", "'; --"]
    match = st.sampled_from(words).map(lambda w: {"match": w})
    return st.one_of(with_vector, with_vector, with_vector, cached, match)


def _tree(dim: int, terms: tuple[str, ...], ok: bool) -> st.SearchStrategy[Any]:
    ops = ["and", "or", "AND", "Or"] if ok else ["and", "or", "xor", ""]

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        nary = st.builds(
            lambda op, args: {"op": op, "args": args},
            st.sampled_from(ops),
            st.lists(children, min_size=2 if ok else 0, max_size=4),
        )
        neg = st.builds(lambda a: {"op": "not", "arg": a}, children)
        return st.one_of(nary, nary, neg)

    return st.recursive(_term(dim, terms, ok), extend, max_leaves=8)


#: The values of each option and of the filters: (taken, refused or at an edge).
FILTERS = (
    [[], [{"key": "g", "op": "<", "value": 5}], [{"contains": {"h": "x"}}],
     [{"key": "g", "op": ">=", "value": 10}, {"key": "h", "op": "=", "value": "x"}],
     [{"key": "nokey", "op": "=", "value": 1}],
     [{"key": "g", "op": "<", "value": "'); DROP TABLE public.canary; --"}]],
    [["g=3"], {"g": 3}, [""], 5, [{"key": "g", "op": "~~", "value": 1}], [{"contains": 3}]],
)  # fmt: skip
OPTIONS: dict[str, tuple[list[Any], list[Any]]] = {
    "k": ([1, 3, 10, 30, 1000], [0, -1, 1001, "10", 2.5, None]),
    "operators": (
        ["product-max-strong", "itlr", "godel", "lukasiewicz", "and=min,or=max,not=complement"],
        ["bogus", None, 3],
    ),
    "truth": (["clamp", "affine", "sigmoid:0.2:10"], ["calibrated", "sigmoid:x:y"]),
    "exact": ([True, False], ["yes"]),
    "depth": ([1, 5, 100, 2000], [0, 100001]),
    "ef_search": ([1, 40, 1000], [0, 1001]),
    "iterative_scan": ([True, False], [2]),
    "guide": ([True, False], ["x"]),
    "term_scans": ([True, False, None], ["x"]),
    "and_text": ([0, 1, 4, 10], [11, True]),
    "lexical": (["crisp", "rank"], ["fuzzy"]),
    "passages": ([True, False], [0]),
    "passage_score": (["blend-not-or", "max", "blend", "blend-not"], ["mean"]),
    "not_context": ([0, 0.5, 1], [1.5, "0.5"]),
    "not_mention": ([0, 0.4, 1], [-0.1]),
    "mode": (["fuzzy"], ["nsfl"]),
    "filters": FILTERS,
    "unknown_option": ([], [1]),
}


def queries(dim: int, terms: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    """Query objects for a corpus of ``dim``-dimensional vectors whose term cache holds
    ``terms``: a tree and a few options. Three values in four are meant to run (vectors of the
    corpus's dimension, known operators, options within their bounds, filters the function
    takes; any term text); the fourth breaks its tree, options or filters somewhere."""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        ok = draw(st.integers(0, 3)) > 0
        tree = draw(_tree(dim, terms, ok))
        if ok and isinstance(tree, dict) and tree.get("op") == "not":  # a positive term beside
            tree = {"op": "and", "args": [draw(_term(dim, terms, ok)), tree]}
        query: dict[str, Any] = {"tree": tree}
        names = [k for k, (good, bad) in OPTIONS.items() if good or not ok]
        for key in draw(st.lists(st.sampled_from(names), max_size=4, unique=True)):
            good, bad = OPTIONS[key]
            query[key] = draw(st.sampled_from(good if ok else [*good, *bad]))
        return query

    return build()
