"""The compiled query: one statement, its parameters and settings, and how its vectors bind.

:func:`pglogic.engine.compile.compile_query` makes a :class:`CompiledQuery`; binding the term
vectors (:meth:`CompiledQuery.with_vectors`) is the last pure step before the statement runs.
:class:`ShapeCache` keeps one statement per query shape and hands out a new value per query.

Example:
    >>> from pglogic.engine.compile import compile_query
    >>> from pglogic.engine.source import Corpus
    >>> from pglogic.query import parse
    >>> corpus = Corpus(1, "news", "corpus_1", "m", 2, "cosine", "embedding", None, None)
    >>> q = compile_query(parse('"a" AND NOT "b"'), corpus)
    >>> sorted(q.with_vectors({"a": [1.0, 0.0], "b": [0.0, 1.0]}))
    ['gdepth', 'k', 'v0', 'v1', 'vg']
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from pglogic.engine.guide import guide_vector
from pglogic.engine.negation import with_context
from pglogic.engine.operators import OperatorFamily
from pglogic.engine.sqo import sqo_vector
from pglogic.errors import QueryError
from pglogic.query import Node, semantic_part

if TYPE_CHECKING:
    from pglogic.engine.normalise import PlanReady


class ReadOnlyDict(dict[str, Any]):
    """A dict that refuses every change (it still serialises as JSON and compares as a dict).

    Example:
        >>> d = ReadOnlyDict({"k": 10})
        >>> d["k"], d == {"k": 10}
        (10, True)
        >>> d.pop("k")
        Traceback (most recent call last):
        TypeError: a compiled query's parameters and settings are read-only
    """

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a compiled query's parameters and settings are read-only")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse


#: Placeholder names of the guide vector and of its scan's depth.
GUIDE = "vg"
GUIDE_DEPTH = "gdepth"
#: Placeholder of a reranking mode's candidate depth K.
RERANK_DEPTH = "rdepth"
#: Placeholder of the text search configuration of a corpus's lexical index.
TEXT_CONFIG = "lcfg"


@dataclass(frozen=True, kw_only=True)
class CompiledQuery:
    """A compiled statement: print it with :meth:`as_string`, run it with :attr:`params`.

    ``terms[i]`` is the text whose similarity is column ``s{i}`` and whose vector is ``v{i}``
    (in NSFL modes the fused texts and the question follow the query's terms).
    ``settings`` are applied with ``set_config(name, value, true)`` before the statement.
    ``vector_kind`` says how the extra vector ``vg`` is computed from the term vectors:
    ``guide`` (:mod:`pglogic.engine.guide`), ``sqo`` (:mod:`pglogic.engine.sqo`) or None (no such vector).

    Immutable and built with keyword arguments only: ``params`` and ``settings`` are read-only
    copies and ``terms`` and ``candidate_terms`` fresh lists, so no two values (two hits of
    one query shape, say) share anything that can change.

    Example:
        >>> from psycopg import sql
        >>> from pglogic.engine.operators import resolve_family
        >>> q = CompiledQuery(statement=sql.Composed([sql.SQL("SELECT 1")]), params={"k": 5},
        ...                   terms=["a"], candidate_terms=["a"], settings={},
        ...                   family=resolve_family("product"))
        >>> q.params["k"], q.text
        (5, 'SELECT 1')
        >>> q.params["k"] = 6
        Traceback (most recent call last):
        TypeError: a compiled query's parameters and settings are read-only
    """

    statement: sql.Composed
    #: The statement's parameters and settings: read-only copies of the mappings given.
    params: Mapping[str, Any]
    terms: list[str]
    candidate_terms: list[str]
    settings: Mapping[str, str]
    family: OperatorFamily
    param_prefix: str = ""
    tree: Node | None = None
    truth: str = "clamp"
    mode: str = "fuzzy"
    vector_kind: str | None = None
    seed: int = 0
    #: The lexical terms: ``lexical[j]`` is the text bound to ``q{j}``, its truth column ``l{j}``.
    lexical: tuple[str, ...] = ()
    #: λ of :mod:`pglogic.engine.negation` (fuzzy mode; 0 elsewhere): a negated term's vector
    #: is bound without that much of its AND's positive terms.
    not_context: float = 0.0
    #: The negated terms a mention floors (``SearchOptions.not_mention``), by their index i in
    #: :attr:`terms`: each one's text is bound to ``t{i}`` too, for its phrase match.
    mentions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("params", "settings"):
            object.__setattr__(self, name, ReadOnlyDict(getattr(self, name)))
        for name in ("terms", "candidate_terms"):
            object.__setattr__(self, name, list(getattr(self, name)))

    @property
    def guide_param(self) -> str | None:
        """The placeholder of the guide (or SQO) vector ``vg``, or None when there is none."""
        return f"{self.param_prefix}{GUIDE}" if self.vector_kind else None

    @cached_property
    def text(self) -> str:
        """The statement rendered once (placeholders stay ``%(name)s``): what
        :func:`pglogic.store.search.execute` sends. Cached with the statement per query shape.

        Example:
            >>> compiled.text.startswith("WITH")  # doctest: +SKIP
            True
        """
        return self.statement.as_string(None)

    def as_string(self, context: Any = None) -> str:
        """Render the statement (placeholders stay ``%(name)s``).

        Example:
            >>> compiled.as_string().startswith("WITH")  # doctest: +SKIP
            True
        """
        return self.statement.as_string(context)

    def with_vectors(self, vectors: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Return the parameters with term vectors bound to ``v0..vn``.

        Example:
            >>> params = compiled.with_vectors({"a": vec_a, "b": vec_b})  # doctest: +SKIP
        """
        params = dict(self.params)
        scored = self.scored_vectors(vectors)
        for i, t in enumerate(self.terms):
            if t not in scored:
                raise QueryError(f"No vector for term {t!r}")
            params[f"{self.param_prefix}v{i}"] = np.asarray(scored[t], dtype=np.float32)
        for j, text in enumerate(self.lexical):
            params[f"{self.param_prefix}q{j}"] = text
        for i in self.mentions:
            params[f"{self.param_prefix}t{i}"] = self.terms[i]
        if self.guide_param is not None:
            params[self.guide_param] = self._guide(scored)
        return params

    def scored_vectors(self, vectors: Mapping[str, npt.ArrayLike]) -> dict[str, npt.ArrayLike]:
        """The vectors the statement scores: each negated term's against its context
        (:func:`pglogic.engine.negation.with_context`, λ = :attr:`not_context`). Give it, and
        :meth:`with_vectors` and :meth:`guide_vector`, the embedder's vectors: a projected
        vector projected again moves further.

        Example:
            >>> compiled.scored_vectors({"a": vec_a, "b": vec_b})["b"]  # doctest: +SKIP
        """
        if self.tree is None or not self.not_context:
            return dict(vectors)
        return with_context(self.tree, vectors, self.not_context)

    def guide_vector(self, vectors: Mapping[str, npt.ArrayLike]) -> np.ndarray:
        """The guide vector (:mod:`pglogic.engine.guide`), or in the SQO modes the SQO vector
        (:mod:`pglogic.engine.sqo`), for these term vectors: the embedder's (it scores each
        negated term against its context itself, :meth:`scored_vectors`).

        Example:
            >>> compiled.guide_vector({"a": vec_a, "b": vec_b})  # doctest: +SKIP
            array([0.12, ...], dtype=float32)
        """
        return self._guide(self.scored_vectors(vectors))

    def _guide(self, scored: Mapping[str, npt.ArrayLike]) -> np.ndarray:
        """:meth:`guide_vector` from the vectors the statement scores (:meth:`scored_vectors`)."""
        tree = semantic_part(self.tree) if self.tree is not None else None
        if tree is None:
            raise QueryError("This compiled query has no tree to compute a guide vector from")
        if self.vector_kind == "sqo":
            return sqo_vector(tree, scored, self.family, self.truth, self.seed)
        return guide_vector(tree, scored, self.family, self.truth)


class ShapeCache:
    """Compiled statements kept per query shape, the least recently used dropped past ``size``
    (thread-safe: searches run in threads).

    Example:
        >>> from pglogic.engine.compile import compile_query
        >>> from pglogic.engine.normalise import normalise
        >>> from pglogic.engine.options import SearchOptions
        >>> from pglogic.engine.source import Corpus
        >>> from pglogic.query import parse
        >>> corpus = Corpus(1, "news", "corpus_1", "m", 2, "cosine", "embedding", None, None)
        >>> cache = ShapeCache(2)
        >>> cache.put("k", compile_query(parse('"a" AND "b"'), corpus))
        >>> cache.get("k", normalise(parse('"c" AND "d"'), SearchOptions())).terms
        ['c', 'd', 'c and d']
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._shapes: OrderedDict[Any, CompiledQuery] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._shapes)

    def clear(self) -> None:
        """Forget every shape."""
        with self._lock:
            self._shapes.clear()

    def get(self, key: Any, ready: PlanReady) -> CompiledQuery | None:
        """The cached statement of ``key``'s shape, for the words of ``ready``; None when not
        cached. Raises TypeError when the key is unhashable (a Contains filter's dict)."""
        with self._lock:
            cached = self._shapes.get(key)
            if cached is None:
                return None
            self._shapes.move_to_end(key)
        hit = replace(
            cached, terms=list(ready.texts), tree=ready.tree,
            candidate_terms=[] if not cached.candidate_terms else list(ready.positive_terms),
            lexical=ready.lexical,
        )  # fmt: skip
        hit.__dict__["text"] = cached.text  # the rendered statement (a cached_property)
        return hit

    def put(self, key: Any, compiled: CompiledQuery) -> None:
        """Cache ``compiled`` (rendered once, now) under ``key``, dropping the oldest shape."""
        compiled.text  # noqa: B018 -- render once, now
        with self._lock:
            self._shapes[key] = compiled
            if len(self._shapes) > self.size:
                self._shapes.popitem(last=False)
