"""Render compiled queries for clients that are not psycopg, and for ``pglogic.search()`` in SQL.

:func:`render` turns a :class:`~pglogic.engine.compile.CompiledQuery` into SQL text for another
language's driver: ``psycopg`` style keeps ``%(name)s`` placeholders, ``numbered`` style uses
``$1, $2, ...`` (PostgreSQL's own, for libpq, node-postgres, pgx, JDBC via a rewrite, ...) in a
stable order (first appearance in the statement). Given the term vectors, it inlines them (and by
default every other value) as literals such as ``'[0.1,0.2]'::vector(384)``, so the statement runs
with no parameters at all. Everything is composed with :mod:`psycopg.sql`; values become
``sql.Literal``, never raw text.

:func:`search_json` builds the ``query`` argument of the SQL function ``pglogic.search(corpus,
query jsonb)`` from a query tree and :class:`~pglogic.engine.compile.SearchOptions`.

Example:
    >>> from pglogic.engine.compile import compile_query
    >>> from pglogic.store.corpus import Corpus
    >>> from pglogic.query import parse
    >>> corpus = Corpus(1, "news", "corpus_1", "m", 2, "cosine", "embedding", None, None)
    >>> compiled = compile_query(parse('"a" AND NOT "b"'), corpus, SearchOptions(k=5))
    >>> r = render(compiled, "numbered")
    >>> r.names  # vg, the guide vector, is computed from the term vectors by values()
    ('v0', 'v1', 'vg', 'gdepth', 'k')
    >>> r.values({"a": [1.0, 0.0], "b": [0.0, 1.0]})[2:]
    [array([1., 0.], dtype=float32), 200, 5]
    >>> "LIMIT $5" in r.text
    True
    >>> inline = render(compiled, vectors={"a": [1.0, 0.0], "b": [0.0, 1.0]})
    >>> "'[1,0]'::vector(2)" in inline.text, inline.names
    (True, ())
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.engine.compile import (
    GUIDE,
    GUIDE_DEPTH,
    RERANK_DEPTH,
    TEXT_CONFIG,
    CompiledQuery,
    SearchOptions,
    check_options,
    set_local,
)
from pglogic.engine.conjunction import and_texts
from pglogic.engine.filters import Contains, Filter
from pglogic.engine.guide import guide_vector
from pglogic.engine.negation import contexts, with_context
from pglogic.engine.plans import union_plan
from pglogic.errors import InvalidInput, QueryError
from pglogic.query import And, Match, Node, Not, Or, Term, matches, semantic_part, terms

__all__ = [
    "FUNCTION_PARAMETERS",
    "STYLES",
    "Rendered",
    "Style",
    "filter_json",
    "function_statement",
    "json_tree",
    "render",
    "search_json",
    "vector_literal",
]

Style = Literal["psycopg", "numbered"]
STYLES: tuple[Style, ...] = ("psycopg", "numbered")

_PLACEHOLDER = re.compile(r"%\((?P<name>[^)]*)\)[sbt]")


def vector_literal(vector: npt.ArrayLike) -> str:
    """The pgvector text form of a vector, each float32 in its shortest exact decimal form.

    pgvector parses it back to the very same float32 values, so an inlined vector ranks exactly
    like a bound one.

    Example:
        >>> vector_literal([0.1, -2.0, 1e-8])
        '[0.1,-2,1e-08]'
    """
    arr = np.asarray(vector, dtype=np.float32).ravel()
    if not np.all(np.isfinite(arr)):
        raise InvalidInput("A vector to inline has a NaN or infinite component")
    parts = []
    for x in arr:
        text = str(x)
        parts.append(text[:-2] if text.endswith(".0") else text)
    return "[" + ",".join(parts) + "]"


@dataclass(frozen=True)
class Rendered:
    """SQL text for another client, with its placeholders in order.

    ``names[i]`` is the parameter behind placeholder ``$(i+1)`` (numbered style) or the i-th
    distinct ``%(name)s`` (psycopg style); ``params`` holds the known values (everything but the
    term vectors); ``vector_terms`` maps each vector placeholder to its term; ``guide`` names the
    placeholder of the guide vector (computed from the term vectors by ``guide_of``, see
    :mod:`pglogic.engine.guide`) if the statement has one; ``settings`` must be applied with
    ``SET LOCAL`` (or ``set_config(name, value, true)``) in the same transaction.

    Example:
        >>> r = Rendered("SELECT $1", ("k",), {"k": 3}, {}, {})
        >>> r.values()
        [3]
    """

    text: str
    names: tuple[str, ...]
    params: dict[str, Any]
    vector_terms: dict[str, str]
    settings: dict[str, str] = field(default_factory=dict)
    guide: str | None = None
    guide_of: Callable[[Mapping[str, npt.ArrayLike]], np.ndarray] | None = None
    #: The vectors the statement scores from the embedder's (each negated term against its
    #: context: :meth:`CompiledQuery.scored_vectors
    #: <pglogic.engine.compile.CompiledQuery.scored_vectors>`); None: as given.
    scored_of: Callable[[Mapping[str, npt.ArrayLike]], Mapping[str, npt.ArrayLike]] | None = None

    def values(self, vectors: Mapping[str, npt.ArrayLike] | None = None) -> list[Any]:
        """The parameter values in placeholder order; ``vectors`` maps term text to the
        embedder's vector (a negated term is bound against its context, as the Python search
        binds it).

        Vectors are float32 NumPy arrays (bind them with pgvector's psycopg adapter, or send
        :func:`vector_literal` text). Raises :class:`QueryError` for a term without a vector.

        Example:
            >>> Rendered("SELECT $1, $2", ("k", "v0"), {"k": 3}, {"v0": "a"}).values({"a": [1.0]})
            [3, array([1.], dtype=float32)]
        """
        out: list[Any] = []
        scored = self.scored_of(vectors) if vectors is not None and self.scored_of else vectors
        for name in self.names:
            if name == self.guide and self.guide_of is not None:
                if vectors is None:
                    raise QueryError(
                        "The guide vector is computed from the term vectors: pass them"
                    )
                out.append(self.guide_of(vectors))
            elif name in self.vector_terms:
                term = self.vector_terms[name]
                if scored is None or term not in scored:
                    raise QueryError(f"No vector for term {term!r}")
                out.append(np.asarray(scored[term], dtype=np.float32))
            else:
                out.append(self.params[name])
        return out

    def script(self) -> str:
        """The settings as ``SET LOCAL`` lines, then the statement, each ending with ``;``.

        Example:
            >>> print(Rendered("SELECT 1", (), {}, {}, {"hnsw.ef_search": "100"}).script())
            SET LOCAL hnsw.ef_search = '100';
            SELECT 1;
        """
        lines = [stmt.as_string(None) + ";" for stmt in set_local(self.settings)]
        return "\n".join([*lines, self.text + ";"])


def _placeholder_name(ph: sql.Placeholder) -> str:
    match = _PLACEHOLDER.fullmatch(ph.as_string(None))
    if match is None:
        raise ValueError(f"Only named placeholders can be rendered, got {ph!r}")
    return match.group("name")


def _walk(node: sql.Composable, replace: Any) -> sql.Composable:
    if isinstance(node, sql.Composed):
        return sql.Composed([_walk(child, replace) for child in node])
    if isinstance(node, sql.Placeholder):
        result: sql.Composable = replace(_placeholder_name(node))
        return result
    return node


def render(
    compiled: CompiledQuery,
    style: Style = "psycopg",
    vectors: Mapping[str, npt.ArrayLike] | None = None,
    *,
    inline_params: bool | None = None,
) -> Rendered:
    """Render ``compiled`` as text for a client: ``psycopg`` (``%(name)s``) or ``numbered``
    (``$1, $2, ...`` in order of first appearance) placeholders.

    With ``vectors`` (term text to vector), the term vectors are inlined as
    ``'[...]'::vector(dim)`` literals; ``inline_params`` (default: True when vectors are given)
    inlines the other values (``k``, ``depth``, filters) too, so the statement needs no
    parameters. Apply :attr:`Rendered.settings` first, in the same transaction.

    Example:
        >>> from pglogic.engine.compile import compile_query
        >>> from pglogic.store.corpus import Corpus
        >>> from pglogic.query import parse
        >>> corpus = Corpus(1, "news", "corpus_1", "m", 2, "cosine", "embedding", None, None)
        >>> r = render(compile_query(parse('"a" OR ("b" AND "c")'), corpus), "numbered")
        >>> r.names, r.params  # v3: the phrase "b and c" (pglogic.engine.conjunction)
        (('v0', 'v1', 'v2', 'v3', 'depth', 'vg', 'gdepth', 'k'), {'k': 10, 'depth': 174, 'gdepth': 200})
    """
    if style not in STYLES:
        raise InvalidInput(f"Unknown placeholder style {style!r}: use {' or '.join(STYLES)}")
    pre = compiled.param_prefix
    vector_terms = {f"{pre}v{i}": t for i, t in enumerate(compiled.terms)}
    guide = compiled.guide_param
    all_params = {**compiled.params, **lexical_params(compiled)}
    literals: dict[str, sql.Composable] = {}
    if vectors is not None:
        scored = compiled.scored_vectors(vectors)  # a negated term against its context
        for name, term in vector_terms.items():
            if term not in scored:
                raise QueryError(f"No vector for term {term!r}")
            literals[name] = sql.Literal(vector_literal(scored[term]))
        if guide is not None:
            literals[guide] = sql.Literal(vector_literal(compiled.guide_vector(vectors)))
    if inline_params if inline_params is not None else vectors is not None:
        literals.update({name: sql.Literal(value) for name, value in all_params.items()})

    names: list[str] = []
    # psycopg reads '%' as the start of a placeholder while any placeholder is left
    known = set(vector_terms) | set(all_params) | ({guide} if guide else set())
    escape = style == "psycopg" and bool(known - set(literals))

    def replace(name: str) -> sql.Composable:
        if name in literals:
            if escape:
                return sql.SQL(literals[name].as_string(None).replace("%", "%%"))
            return literals[name]
        if name not in known:
            raise ValueError(f"Placeholder {name!r} has no parameter")
        if name not in names:
            names.append(name)
        if style == "numbered":
            return sql.SQL(f"${names.index(name) + 1}")
        return sql.Placeholder(name)

    statement = _walk(compiled.statement, replace)
    text = statement.as_string(None)
    params = {n: v for n, v in all_params.items() if n not in literals}
    remaining = {n: t for n, t in vector_terms.items() if n not in literals}
    pending = guide if guide is not None and guide not in literals else None  # computed later
    return Rendered(text, tuple(names), params, remaining, dict(compiled.settings), pending,
                    compiled.guide_vector if pending else None,
                    compiled.scored_vectors if remaining else None)  # fmt: skip


def vector_note(compiled: CompiledQuery, term: str) -> str:
    """What a term's vector parameter holds, for people who bind it themselves: the term's
    embedding, or for a term negated inside an AND its embedding against its context
    (:func:`pglogic.engine.negation.projected`; :meth:`Rendered.values` and
    :meth:`CompiledQuery.with_vectors` bind that).

    Example:
        >>> from pglogic.engine.compile import compile_query
        >>> from pglogic.engine.source import Corpus
        >>> from pglogic.query import parse
        >>> c = Corpus(1, "news", "corpus_1", "m", 3, "cosine", "embedding", None, None)
        >>> q = compile_query(parse('"oil" AND NOT "gas"'), c)
        >>> vector_note(q, "oil")
        "<embedding of 'oil'>"
        >>> vector_note(q, "gas")
        "<embedding of 'gas' without 0.5 of the span of 'oil': pglogic.engine.negation.projected>"
    """
    ctx = contexts(compiled.tree).get(term) if compiled.tree is not None else None
    if ctx and compiled.not_context:
        of = ", ".join(repr(c) for c in ctx)
        return (
            f"<embedding of {term!r} without {compiled.not_context:g} of the span of {of}: "
            "pglogic.engine.negation.projected>"
        )
    return f"<embedding of {term!r}>"


def lexical_params(compiled: CompiledQuery) -> dict[str, str]:
    """The lexical terms' texts by placeholder (``q{j}``), and the texts of the negated terms a
    mention floors (``t{i}``, ``not_mention``), bound with the vectors.

    Example:
        >>> from pglogic.engine.compile import compile_query
        >>> from pglogic.store.corpus import Corpus
        >>> from pglogic.query import parse
        >>> c = Corpus(1, "n", "corpus_1", "m", 2, "cosine", "embedding", None, None, "english")
        >>> lexical_params(compile_query(parse('"a" AND NOT match:"b c"'), c))
        {'q0': 'b c'}
        >>> lexical_params(compile_query(parse('"a" AND NOT "b"'), c))
        {'t1': 'b'}
    """
    pre = compiled.param_prefix
    out = {f"{pre}q{j}": t for j, t in enumerate(compiled.lexical)}
    return out | {f"{pre}t{i}": compiled.terms[i] for i in compiled.mentions}


#: The parameters of the statement ``pglogic.search(corpus, query)`` (SQL) runs, by the compiled
#: query's placeholder names (without ``param_prefix``): term vector ``v{i}`` is ``$1[i+1]``, the
#: filters' parameters are ``$6[1]``, ``$6[2]``, ... in the order the compiler makes them, the
#: text search configuration of the lexical index is ``$7``, lexical term ``q{j}`` ``$8[j+1]`` and
#: the text of a negated term a mention floors (``t{i}``) the scored texts' ``$9[i+1]``.
FUNCTION_PARAMETERS: dict[str, str] = {
    GUIDE: "$2",
    "depth": "$3",
    GUIDE_DEPTH: "$4",
    "k": "$5",
    TEXT_CONFIG: "$7",
}


def function_statement(compiled: CompiledQuery) -> tuple[str, list[Any]]:
    """The statement as ``pglogic.search`` (SQL) writes it, and the values of its ``$6[j]``.

    The SQL function builds the compiler's statement text for text, with these placeholders
    (:data:`FUNCTION_PARAMETERS`): ``pglogic.search_plan(corpus, query) ->> 'statement'`` equals
    the text returned here for the same query and options.

    Example:
        >>> from pglogic.engine.compile import compile_query
        >>> from pglogic.engine.filters import parse_filter
        >>> from pglogic.store.corpus import Corpus
        >>> from pglogic.query import parse
        >>> corpus = Corpus(1, "news", "corpus_1", "m", 2, "cosine", "embedding", None, None)
        >>> opts = SearchOptions(filters=[parse_filter("year>=1990")])
        >>> text, values = function_statement(compile_query(parse('"a" OR "b"'), corpus, opts))
        >>> "LIMIT $3" in text, "$6[2]::numeric" in text, values
        (True, True, ['year', 1990])
    """
    pre = compiled.param_prefix
    fixed = {pre + name: slot for name, slot in FUNCTION_PARAMETERS.items()}
    fixed.update({f"{pre}v{i}": f"$1[{i + 1}]" for i in range(len(compiled.terms))})
    fixed.update({f"{pre}q{j}": f"$8[{j + 1}]" for j in range(len(compiled.lexical))})
    fixed.update({f"{pre}t{i}": f"$9[{i + 1}]" for i in compiled.mentions})
    filters = [n for n in compiled.params if n not in fixed and n != pre + RERANK_DEPTH]
    fixed.update({name: f"$6[{j + 1}]" for j, name in enumerate(filters)})

    def replace(name: str) -> sql.Composable:
        if name not in fixed:
            raise ValueError(f"Placeholder {name!r} has no parameter of pglogic.search")
        return sql.SQL(fixed[name])

    text = _walk(compiled.statement, replace).as_string(None)
    return text, [compiled.params[name] for name in filters]


# -- the query argument of pglogic.search(corpus, query jsonb) ------------------------------------


def json_tree(node: Node, vectors: Mapping[str, npt.ArrayLike] | None = None) -> dict[str, Any]:
    """A query tree as the JSON that ``pglogic.search()`` reads; with ``vectors``, every term
    carries its vector (a list of floats, the exact float32 values).

    Example:
        >>> from pglogic.query import parse
        >>> json_tree(parse('"a" AND NOT "b"'))
        {'op': 'and', 'args': [{'term': 'a'}, {'op': 'not', 'arg': {'term': 'b'}}]}
        >>> json_tree(parse('"a"'), {"a": [0.5, 0.25]})
        {'term': 'a', 'vector': [0.5, 0.25]}
        >>> json_tree(parse('NOT match:"Basel III"'))
        {'op': 'not', 'arg': {'match': 'Basel III'}}
    """
    if isinstance(node, Term):
        out: dict[str, Any] = {"term": node.text}
        if vectors is not None:
            if node.text not in vectors:
                raise QueryError(f"No vector for term {node.text!r}")
            arr = np.asarray(vectors[node.text], dtype=np.float32).ravel()
            out["vector"] = [float(x) for x in arr]
        return out
    if isinstance(node, Match):
        return {"match": node.text}
    if isinstance(node, Not):
        return {"op": "not", "arg": json_tree(node.child, vectors)}
    op = "and" if isinstance(node, And) else "or"
    assert isinstance(node, And | Or)
    return {"op": op, "args": [json_tree(child, vectors) for child in node.children]}


def filter_json(f: Filter) -> dict[str, Any]:
    """A metadata filter as the JSON that ``pglogic.search()`` reads in ``"filters"``.

    Example:
        >>> from pglogic.engine.filters import parse_filter
        >>> filter_json(parse_filter("year>=1990")), filter_json(parse_filter('{"site": "x"}'))
        ({'key': 'year', 'op': '>=', 'value': 1990}, {'contains': {'site': 'x'}})
    """
    value = f.value if isinstance(f, Contains) else {"key": f.key, "op": f.op, "value": f.value}
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"Invalid filter {f!r}: not JSON ({exc})") from None
    return {"contains": f.value} if isinstance(f, Contains) else value


def search_json(
    node: Node,
    options: SearchOptions | None = None,
    vectors: Mapping[str, npt.ArrayLike] | None = None,
) -> dict[str, Any]:
    """The ``query`` argument of ``pglogic.search(corpus, query)`` for a tree and options.

    Terms (and AND texts, :mod:`pglogic.engine.conjunction`) without a vector must be in
    ``pglogic.term_cache`` (see
    :func:`pglogic.store.term_cache.cache_terms`). With ``vectors``, a query that scans along
    the guide vector also carries it (``"guide"``, computed here as the Python search computes
    it: :meth:`CompiledQuery.guide_vector <pglogic.engine.compile.CompiledQuery.guide_vector>`),
    so the SQL function ranks exactly like :func:`pglogic.store.search.search`; without, the
    function computes it (in double precision, very close). The SQL function has the fuzzy mode
    only: another ``mode`` raises :class:`InvalidInput`, as does a ``timeout`` (set
    ``statement_timeout`` in the transaction instead).

    Example:
        >>> from pglogic.query import parse
        >>> search_json(parse('"a" OR "b"'), SearchOptions(k=5, operators="godel"))["operators"]
        'godel'
        >>> v = {"a": [1.0, 0.0], "b": [0.0, 1.0]}
        >>> search_json(parse('"a" AND NOT "b"'), vectors=v)["guide"]
        [1.0, 0.0]
    """
    opts = options or SearchOptions()
    check_options(opts)  # the Python words, before the guide is computed
    if opts.mode != "fuzzy":
        raise InvalidInput(f"pglogic.search (SQL) has the fuzzy mode only, not {opts.mode!r}")
    if opts.timeout is not None:
        raise InvalidInput(
            "pglogic.search (SQL) takes no timeout: SET LOCAL statement_timeout in the transaction"
        )
    operators = opts.operators if isinstance(opts.operators, str) else opts.operators.spec
    guide: bool | list[float] = opts.guide
    semantic = semantic_part(node)
    if (
        vectors is not None
        and semantic is not None
        and opts.truth.strip().lower() != "calibrated"
        and _guided(node, opts)
    ):
        scored = with_context(node, vectors, opts.not_context)  # as the SQL function scores
        vector = guide_vector(semantic, scored, operators, opts.truth)
        guide = [float(x) for x in vector]
    out: dict[str, Any] = {
        "tree": json_tree(node, vectors),
        "operators": operators,
        "truth": opts.truth,
        "k": int(opts.k),  # (a NumPy integer is one, but not JSON)
        "exact": opts.exact,
        "depth": None if opts.depth is None else int(opts.depth),
        "ef_search": None if opts.ef_search is None else int(opts.ef_search),
        "iterative_scan": opts.iterative_scan,
        "guide": guide,
        "term_scans": opts.term_scans,
        "filters": [filter_json(f) for f in opts.filters],
        "and_text": int(opts.and_text),
        "not_context": opts.not_context,
        "not_mention": opts.not_mention,
    }
    if matches(node):
        out["lexical"] = opts.lexical
    if not opts.passages:  # (a corpus with passages is searched through them by default)
        out["passages"] = False
    else:  # always said: an older database refuses a passage score it lacks (no silent max)
        out["passage_score"] = opts.passage_score
    phrases = and_texts(node) if opts.and_text > 0 and not isinstance(node, Term) else []
    if vectors is not None and phrases:  # the AND texts' vectors (pglogic.engine.conjunction)
        out["vectors"] = {
            p: [float(x) for x in np.asarray(vectors[p], dtype=np.float32)]
            for p in phrases
            if p in vectors
        }
    return out


def _guided(node: Node, opts: SearchOptions) -> bool:
    """Whether the approximate plan of ``node`` scans along the guide vector
    (:func:`pglogic.engine.compile.compile_query`'s rule, fuzzy mode)."""
    return opts.guide and not opts.exact and len(terms(node)) > 1 and not union_plan(node, opts)
