"""SQLAlchemy 2.x integration: a logical search as a normal ``Select``.

``logical_search(Article, Article.embedding, '"a" AND NOT "b"', k=10, embedder=emb)`` returns a
:class:`LogicalSelect` of ``(Article, score, sim_0, sim_1, ...)`` ordered by score. The SQL comes
from pglogic's own compiler (:func:`pglogic.engine.compile.compile_query`), embedded in the statement at
compile time. Conditions added with ``.where()`` that only involve the searched table are moved
*inside* every candidate CTE, so a filtered search still returns k rows when k rows match;
conditions on other (joined) tables filter the ranked rows afterwards. Joins and ``.options()``
work as on any select. Term vectors are bound parameters; nothing of the query text becomes SQL.

Long documents: with ``passages=`` (the application's passage table: one row and one vector per
passage, a column referencing the document), each term's similarity for a document is its best
passage's, as in a pglogic corpus with passages (with the default passage score, averaged with
the document's own vector for a positive text in a formula with a NOT); the HNSW scans run over
the passages' index.

Run it with :func:`execute` (or ``await`` :func:`execute_async`), which applies the statement's
``SET LOCAL`` settings (``hnsw.ef_search``, iterative scans) in the same transaction for that
statement only (the values before it are put back). A plain ``session.execute(stmt)`` raises
:class:`~pglogic.errors.InvalidInput` instead of silently scanning at the session's
``ef_search``.

Read replicas: :class:`RoutedSession` (engines from :func:`create_engines`) sends searches and
other plain selects to a read engine (a replica, or a libpq multi-host DSN with
``target_session_attrs``) and flushes, DML, text statements and ``SELECT ... FOR UPDATE`` to
the primary; once a transaction has written, its reads stay on the primary.

Example:
    >>> stmt = logical_search(Article, Article.embedding, '"coffee" AND NOT "tea"', k=5,
    ...                       embedder=get_query_embedder("all-MiniLM-L6-v2"))  # doctest: +SKIP
    >>> rows = execute(session, stmt.where(Article.lang == "en"))  # doctest: +SKIP
    >>> article, score, sim_coffee, sim_tea = rows[0]  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Self

import numpy as np
from pgvector.sqlalchemy import Vector
from psycopg import sql as psql
from sqlalchemy import Column, Float, Table, and_, bindparam, column, event, inspect, text
from sqlalchemy.engine import URL, Connection, Engine, Row
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Session
from sqlalchemy.sql import Select
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement, ColumnElement, TextClause
from sqlalchemy.sql.util import find_tables

from pglogic.embed.base import Embedder
from pglogic.engine import defaults
from pglogic.engine.compile import CompiledQuery, SearchOptions, Source, compile_query, set_local
from pglogic.engine.filters import Filters, parse_filters
from pglogic.engine.plans import needs_exact_pass
from pglogic.errors import InvalidInput
from pglogic.query import Node, matches, to_tree
from pglogic.store.citus import PROPAGATE
from pglogic.store.db import version_tuple
from pglogic.store.ingest import vector_problem

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

PARAM_PREFIX = "pglogic_"
_PLACEHOLDER = re.compile(r"%\((" + PARAM_PREFIX + r"[A-Za-z0-9_]+)\)s")


@dataclass(frozen=True)
class _Spec:
    tree: Node
    table: Table
    id_column: str
    embedding_column: str
    dim: int
    options: SearchOptions
    vectors: Mapping[str, np.ndarray]
    terms: tuple[str, ...]
    lexical_column: str | None = None
    text_config: str = "english"
    passages: _Passages | None = None
    metadata_column: str = "metadata"


@dataclass(frozen=True)
class _Passages:
    """The application's passage table: its name, the column of the document's id, the vectors."""

    schema: str | None
    name: str
    doc: str
    embedding: str

    @property
    def table(self) -> psql.Identifier:
        return (
            psql.Identifier(self.schema, self.name) if self.schema else psql.Identifier(self.name)
        )


class _RankingText(TextClause):
    """The pglogic ranking statement; rendered at compile time with the pushed-down filters."""

    inherit_cache = False

    def __init__(self, spec: _Spec) -> None:
        super().__init__("")
        self.pglogic_spec = spec


class LogicalSelect(Select[Any]):
    """A ``Select`` whose ranking is a pglogic logical search (see :func:`logical_search`).

    ``pglogic_terms`` lists the term texts in the order of the ``sim_<i>`` columns.
    ``pglogic_pushed`` holds the ``.where()`` conditions on the searched table alone, which
    go inside every candidate CTE instead of the statement's own WHERE; ``pglogic_joins``
    counts the joins made with ``.join()`` and ``.join_from()`` (and their outer forms), the
    ranking's own first.
    """

    inherit_cache = False
    pglogic_spec: _Spec
    pglogic_pushed: tuple[ColumnElement[Any], ...] = ()
    pglogic_joins: int = 0

    def where(self, *whereclause: Any) -> Self:
        """Add conditions, ANDed as ``Select.where`` does: those on the searched table alone
        to the candidate scans (:attr:`pglogic_pushed`), the others to the statement's WHERE,
        which filters the ranked rows.

        Example:
            >>> stmt.where(Article.lang == "en").pglogic_pushed  # doctest: +SKIP
            (<sqlalchemy.sql.elements.BinaryExpression ...>,)
        """
        table = self.pglogic_spec.table
        pushed: list[ColumnElement[Any]] = []
        kept: list[Any] = []
        for criterion in whereclause:
            element = and_(criterion)  # coerced as where() coerces it (the WHERE role)
            if _pushable(element, table):
                pushed.append(element)
            else:
                kept.append(criterion)
        out = super().where(*kept)
        out.pglogic_pushed = (*self.pglogic_pushed, *pushed)
        return out

    def join(
        self, target: Any, onclause: Any = None, *, isouter: bool = False, full: bool = False
    ) -> Self:
        """``Select.join``, counted in :attr:`pglogic_joins` (``outerjoin`` calls it)."""
        out = super().join(target, onclause, isouter=isouter, full=full)
        out.pglogic_joins = self.pglogic_joins + 1
        return out

    def join_from(
        self,
        from_: Any,
        target: Any,
        onclause: Any = None,
        *,
        isouter: bool = False,
        full: bool = False,
    ) -> Self:
        """``Select.join_from``, counted in :attr:`pglogic_joins` (``outerjoin_from`` calls it)."""
        out = super().join_from(from_, target, onclause, isouter=isouter, full=full)
        out.pglogic_joins = self.pglogic_joins + 1
        return out

    @property
    def pglogic_terms(self) -> tuple[str, ...]:
        """Term texts; ``sim_<i>`` is the cosine similarity to ``pglogic_terms[i]``."""
        return self.pglogic_spec.terms

    @property
    def pglogic_matches(self) -> tuple[str, ...]:
        """Lexical term texts; ``match_<j>`` is the truth of ``pglogic_matches[j]``."""
        return tuple(matches(self.pglogic_spec.tree))

    def pglogic_compiled(self, extra_where: str | None = None) -> CompiledQuery:
        """The underlying compiled pglogic query (for its settings and as_string()).

        Example:
            >>> stmt.pglogic_compiled().settings  # doctest: +SKIP
            {'hnsw.ef_search': '100'}
        """
        s = self.pglogic_spec
        has_filter = extra_where is not None or bool(self.pglogic_pushed)
        where = psql.SQL(extra_where) if extra_where is not None else None
        if where is None and has_filter:
            where = psql.SQL("TRUE")
        options = replace(s.options, exact=True) if _EXACT.get() else s.options
        return compile_query(
            s.tree,
            _source(s),
            options,
            extra_where=where,
            param_prefix=PARAM_PREFIX,
        )


def _source(s: _Spec) -> Source:
    table = (
        psql.Identifier(s.table.schema, s.table.name)
        if s.table.schema
        else psql.Identifier(s.table.name)
    )
    p = s.passages
    own = s.table.c.get(s.embedding_column)  # the documents' own vectors, if they have them
    return Source(
        table, None, s.id_column, s.embedding_column, s.dim, (),
        lexical=s.lexical_column, text_config=s.text_config if s.lexical_column else None,
        passages=p.table if p else None, passage_doc=p.doc if p else "doc_id",
        passage_embedding=p.embedding if p else None,
        own_nullable=own is not None and bool(own.nullable), metadata_column=s.metadata_column,
    )  # fmt: skip


def _pushable(criterion: ColumnElement[Any], table: Table) -> bool:
    tables = find_tables(criterion, check_columns=True, include_aliases=True, include_joins=True)
    return bool(tables) and all(t is table for t in tables)


@compiles(LogicalSelect)
def _compile_logical_select(element: LogicalSelect, compiler: SQLCompiler, **kw: Any) -> str:
    """The select as any other, its ranking (:func:`_compile_ranking`) with its pushed-down
    conditions (the compiler carries them while it compiles the select)."""
    previous = getattr(compiler, "pglogic_pushed", ())
    compiler.pglogic_pushed = element.pglogic_pushed  # type: ignore[attr-defined]
    try:
        out: str = compiler.visit_select(element, **kw)  # type: ignore[no-untyped-call]
        return out
    finally:
        compiler.pglogic_pushed = previous  # type: ignore[attr-defined]


@compiles(_RankingText)
def _compile_ranking(element: _RankingText, compiler: SQLCompiler, **kw: Any) -> str:
    spec = element.pglogic_spec
    pushed = getattr(compiler, "pglogic_pushed", ())
    # and_() parenthesises an OR among them (a OR b AND c would bind as a OR (b AND c))
    where = compiler.process(and_(*pushed)) if pushed else None
    stub = LogicalSelect()
    stub.pglogic_spec = spec
    compiled = stub.pglogic_compiled(where)
    params = compiled.with_vectors(spec.vectors)
    rendered: dict[str, str] = {}
    for name, value in params.items():
        if not name.startswith(PARAM_PREFIX):
            continue
        if isinstance(value, np.ndarray):
            bp = bindparam(name, value, type_=Vector(spec.dim), unique=False)
        else:
            bp = bindparam(name, value, unique=False)
        rendered[name] = compiler.process(bp)
    return _PLACEHOLDER.sub(lambda m: rendered[m.group(1)], compiled.as_string(None))


def logical_search(
    entity: Any,
    embedding: Any,
    query: str | Node,
    *,
    k: int = defaults.K,
    embedder: Embedder | None = None,
    vectors: Mapping[str, Sequence[float] | np.ndarray] | None = None,
    operators: str = defaults.OPERATORS,
    truth: str = defaults.TRUTH,
    exact: bool = defaults.EXACT,
    depth: int | None = None,
    ef_search: int | None = None,
    lexical_column: Any = None,
    text_config: str = "english",
    lexical: str = defaults.LEXICAL,
    passages: Any = None,
    passage_doc: Any = None,
    passage_embedding: Any = None,
    passage_score: str | None = None,
    not_context: float = defaults.NOT_CONTEXT,
    not_mention: float = defaults.NOT_MENTION,
    filters: Filters = (),
    metadata_column: Any = None,
) -> LogicalSelect:
    """Build a logical search over ``entity`` (a mapped class or a Core ``Table``).

    ``embedding`` is its pgvector ``Vector(dim)`` column. Term vectors come from ``embedder``
    (one batch) or ``vectors`` (term text → vector). The result selects ``entity``, ``score`` and
    one ``sim_<i>`` column per distinct term, ordered by score, limited to k.

    Lexical terms (``match:"..."``) need ``lexical_column``, a ``tsvector`` column of the table
    made with the text search configuration ``text_config`` (a GIN index on it serves the
    positive ones); ``lexical`` is their truth (``crisp`` or ``rank``), ``match_<j>`` its column.

    Passages: ``passages`` is the application's passage table (a mapped class, a ``Table``, or
    its name, ``"schema.table"``), one row per passage of a document: ``passage_doc`` its
    column holding the document's id (default: its one foreign key to ``entity``, else
    ``doc_id``) and ``passage_embedding`` its ``Vector(dim)`` column (default: the one named
    like ``embedding``, else its only vector column); both a column or a column name. Each
    term's ``sim_<i>`` is then the best similarity over the document's passages, the candidates
    come from HNSW scans of the passages (index them), and a document without passages is never
    found. ``embedding`` may be None when the documents have no vector of their own.
    ``passage_score="blend"`` makes a positive text's similarity the mean of its best passage's
    and the document's own vector's, ``"blend-not"`` does so in a formula with a negated term
    only, ``"blend-not-or"`` also adds a tenth of the own vector in a formula with neither a
    NOT nor an AND, ``"max"`` never (:data:`pglogic.engine.options.PASSAGE_SCORES`; the blends
    need ``embedding``; a row whose nullable ``embedding`` is NULL takes its best passage alone).
    The default is the engine's, ``blend-not-or``, when ``embedding`` is given, else ``max``.

    ``not_context`` scores a term negated inside an AND without that much of the AND's positive
    terms (:mod:`pglogic.engine.negation`; 0: as it is). ``not_mention`` (with
    ``lexical_column``) makes a negated term at least that similar to a row whose words match it
    as a phrase (0: the similarity alone).

    ``filters`` are metadata filters in pglogic's one filter language (one or a list of
    ``"key=value"``, ``"key>=value"``, an object the metadata contains, ``{"contains": {...}}``
    or ``{"key": K, "op": OP, "value": V}``: :func:`pglogic.engine.filters.parse_filters`), on
    ``metadata_column``, a ``jsonb`` column of the table (a column or its name; default: the
    table's column ``metadata``). Like ``.where()`` conditions on the table, they go inside
    every candidate scan.

    Example:
        >>> stmt = logical_search(Article, Article.embedding, '"a" AND NOT "b"', k=10,
        ...                       embedder=emb)  # doctest: +SKIP
        >>> stmt = logical_search(Article, Article.embedding, '"a"', embedder=emb,
        ...                       filters="lang=en", metadata_column=Article.attrs)  # doctest: +SKIP
        >>> execute(session, stmt.where(Article.lang == "en"))  # doctest: +SKIP
        >>> over_passages = logical_search(Article, None, '"a" AND NOT "b"', embedder=emb,
        ...                                passages=ArticlePassage)  # doctest: +SKIP
    """
    table, id_col, emb_col = _resolve(entity, embedding, required=passages is None)
    pas, pas_dim = (
        _resolve_passages(passages, passage_doc, passage_embedding, table, id_col, emb_col)
        if passages is not None
        else (None, None)
    )
    if passages is None and (passage_doc is not None or passage_embedding is not None):
        raise InvalidInput("passage_doc= and passage_embedding= need passages= (the table)")
    dim = getattr(emb_col.type, "dim", None) if emb_col is not None else pas_dim
    if not isinstance(dim, int):
        if emb_col is None:
            raise InvalidInput(
                "Without the documents' embedding column the passages' dimension is unknown: "
                "give passages= as a Table or mapped class (or passage_embedding= a column)"
            )
        raise InvalidInput(f"Column {emb_col.name!r} must be a pgvector Vector(dim) column")
    emb_name = emb_col.name if emb_col is not None else ""
    if pas is not None:
        if pas_dim is not None and pas_dim != dim:
            raise InvalidInput(
                f"The passages' column {pas.embedding!r} has {pas_dim} dimensions, "
                f"the documents' {dim}"
            )
        emb_name = emb_name or pas.embedding
    tree = to_tree(query)
    given_score = passage_score is not None
    if passage_score is None:
        passage_score = defaults.PASSAGE_SCORE if emb_col is not None else "max"
    parsed = parse_filters(filters)
    meta_name = _metadata_column(table, metadata_column, bool(parsed))
    options = SearchOptions(
        k=k, operators=operators, truth=truth, exact=exact, depth=depth, ef_search=ef_search,
        lexical=lexical, passage_score=passage_score, not_context=not_context,
        not_mention=not_mention, filters=parsed,
    )  # fmt: skip
    blends = passage_score in ("blend", "blend-not", "blend-not-or")
    if blends and given_score and pas is None:
        raise InvalidInput(f'passage_score="{passage_score}" needs passages= (the passage table)')
    if blends and pas is not None and emb_col is None:
        raise InvalidInput(
            f'passage_score="{passage_score}" needs the documents\' own embedding column'
        )
    lex_name = lexical_column.name if lexical_column is not None else None
    probe_src = Source(
        psql.Identifier(table.name), None, "id", "e", dim, (),
        lexical=lex_name, text_config=text_config if lex_name else None,
    )  # fmt: skip
    probe = compile_query(tree, probe_src, options)
    term_list = tuple(probe.terms)
    if vectors is None:
        if embedder is None:
            raise InvalidInput("Give embedder= or vectors= to logical_search")
        if embedder.dim != dim:
            raise InvalidInput(f"The embedder makes {embedder.dim}-d vectors; the column has {dim}")
        matrix = embedder.embed(list(term_list))
        vecs = {t: matrix[i] for i, t in enumerate(term_list)}
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            vecs = {t: np.asarray(v, dtype=np.float32) for t, v in vectors.items()}
        for t in term_list:
            if t not in vecs:
                raise InvalidInput(f"No vector given for term {t!r}")
            if vecs[t].shape != (dim,):
                raise InvalidInput(f"The vector for {t!r} has shape {vecs[t].shape}, not ({dim},)")
    for t in term_list:  # as the search refuses them, before the statement runs (NaN, zero)
        if (problem := vector_problem(vecs[t], dim)) is not None:
            raise InvalidInput(f"The vector for {t!r} {problem}")
    spec = _Spec(
        tree, table, id_col.name, emb_name, dim, options, vecs, term_list, lex_name,
        text_config, pas, meta_name,
    )  # fmt: skip
    n_lex = len(probe.lexical)
    cols = [column("id", id_col.type), column("score", Float)]
    cols += [column(f"s{i}", Float) for i in range(len(term_list))]
    cols += [column(f"l{j}", Float) for j in range(n_lex)]
    ranked = _RankingText(spec).columns(*cols).subquery("pglogic_ranked")
    sims = [ranked.c[f"s{i}"].label(f"sim_{i}") for i in range(len(term_list))]
    sims += [ranked.c[f"l{j}"].label(f"match_{j}") for j in range(n_lex)]
    target = entity if not isinstance(entity, Table) else table
    stmt = LogicalSelect(target, ranked.c.score.label("score"), *sims)
    stmt.pglogic_spec = spec
    id_expr = getattr(entity, id_col.key) if not isinstance(entity, Table) else id_col
    out = (
        stmt.join(ranked, id_expr == ranked.c.id).order_by(ranked.c.score.desc(), id_expr).limit(k)
    )
    assert isinstance(out, LogicalSelect)
    return out


def _metadata_column(table: Table, given: Any, needed: bool) -> str:
    """The name of the ``jsonb`` column the filters read: ``given`` (a column of ``table`` or a
    name), else the table's column ``metadata``."""
    if given is None:
        if needed and "metadata" not in table.c:
            raise InvalidInput(
                f"filters= needs metadata_column=, the jsonb column of {table.name!r} they read "
                "(the table has no column 'metadata')"
            )
        return "metadata"
    col = _column(given)
    name = col if isinstance(col, str) else getattr(col, "name", None)
    if not isinstance(name, str) or name not in table.c:
        raise InvalidInput(f"metadata_column= must be a column of {table.name!r}, not {given!r}")
    if isinstance(col, Column) and col.table is not table:
        raise InvalidInput(f"metadata_column= must be a column of {table.name!r}, not {given!r}")
    return name


def _table(entity: Any, what: str = "logical_search needs") -> Table:
    """The Core table of a mapped class or a ``Table``."""
    if isinstance(entity, Table):
        return entity
    mapper = inspect(entity, raiseerr=False)
    if mapper is None or not isinstance(getattr(mapper, "local_table", None), Table):
        raise InvalidInput(f"{what} a mapped class or a Table")
    local: Table = mapper.local_table
    return local


def _column(col: Any) -> Any:
    """A mapped attribute's column (``Article.embedding``), or ``col`` itself."""
    prop = getattr(col, "property", None)
    columns = getattr(prop, "columns", None)
    return columns[0] if columns else col


def _resolve(
    entity: Any, embedding: Any, *, required: bool = True
) -> tuple[Table, Column[Any], Column[Any] | None]:
    table = _table(entity)
    pk = list(table.primary_key.columns)
    if len(pk) != 1:
        raise InvalidInput(f"Table {table.name!r} needs a single-column primary key")
    if embedding is None:
        if required:
            raise InvalidInput("Give the embedding column (or passages=, a passage table)")
        return table, pk[0], None
    emb_col = _column(embedding)
    if not isinstance(emb_col, Column) or emb_col.table is not table:
        raise InvalidInput("The embedding column must belong to the searched table")
    return table, pk[0], emb_col


def _resolve_passages(
    passages: Any,
    doc: Any,
    embedding: Any,
    table: Table,
    id_col: Column[Any],
    emb_col: Column[Any] | None,
) -> tuple[_Passages, int | None]:
    """The passage table's name and columns (and its vectors' dimension when it is known)."""
    if isinstance(passages, str):
        schema, _, name = passages.rpartition(".")
        if not name or "." in schema or passages.startswith("."):
            raise InvalidInput(f"passages={passages!r}: a table name, or 'schema.table'")
        vec = embedding if embedding is not None else emb_col
        if vec is None:
            raise InvalidInput(f"passages={passages!r}: give passage_embedding= (its column)")
        vec_name = vec if isinstance(vec, str) else str(_column(vec).name)
        doc_name = doc if isinstance(doc, str) else str(_column(doc).name) if doc else "doc_id"
        dim = None if isinstance(vec, str) else getattr(_column(vec).type, "dim", None)
        return _check_names(_Passages(schema or None, name, doc_name, vec_name), table), dim
    ptable = _table(passages, "passages= needs")
    if ptable is table:
        raise InvalidInput("passages= must be another table than the documents'")
    doc_col = _passage_column(ptable, doc, "passage_doc") if doc is not None else None
    if doc_col is None:
        refs = [c for c in ptable.columns if any(fk.references(table) for fk in c.foreign_keys)]
        if len(refs) == 1:
            doc_col = refs[0]
        elif "doc_id" in ptable.columns:
            doc_col = ptable.columns["doc_id"]
        else:
            raise InvalidInput(
                f"Which column of {ptable.name!r} holds the document's {id_col.name!r}? "
                "Give passage_doc="
            )
    vec_col = _passage_column(ptable, embedding, "passage_embedding") if embedding else None
    if vec_col is None:
        vectors = [c for c in ptable.columns if isinstance(c.type, Vector)]
        same = [c for c in vectors if emb_col is not None and c.name == emb_col.name]
        if len(same) == 1 or len(vectors) == 1:
            vec_col = (same or vectors)[0]
        else:
            raise InvalidInput(
                f"Which column of {ptable.name!r} holds the passages' vectors? "
                "Give passage_embedding="
            )
    dim = getattr(vec_col.type, "dim", None)
    if not isinstance(dim, int):
        raise InvalidInput(f"Column {vec_col.name!r} must be a pgvector Vector(dim) column")
    out = _Passages(ptable.schema, ptable.name, doc_col.name, vec_col.name)
    return _check_names(out, table), dim


def _passage_column(ptable: Table, col: Any, what: str) -> Column[Any]:
    """``col`` (a column of the passage table, or its name) as a column of ``ptable``."""
    if isinstance(col, str):
        if col not in ptable.columns:
            raise InvalidInput(f"{what}={col!r}: {ptable.name!r} has no such column")
        found: Column[Any] = ptable.columns[col]
        return found
    c = _column(col)
    if not isinstance(c, Column) or c.table is not ptable:
        raise InvalidInput(f"{what}= must be a column of the passage table {ptable.name!r}")
    return c


def _check_names(p: _Passages, table: Table) -> _Passages:
    """The statement names the passages ``p``: refuse a document table of that name."""
    if table.name == "p" and table.schema is None:
        raise InvalidInput("A searched table named 'p' clashes with the passages' alias 'p'")
    return p


def _settings(stmt: LogicalSelect) -> dict[str, str]:
    """The statement's settings, then Citus's propagation setting: reading its value tells
    whether the server is a Citus coordinator (NULL elsewhere), in the same query."""
    return {**stmt.pglogic_compiled().settings, **PROPAGATE}


def _on_citus(settings: dict[str, str], old: Sequence[Any]) -> tuple[dict[str, str], list[Any]]:
    """Drop the propagation setting unless the server has Citus; there it goes first (so the
    other ``SET LOCAL`` statements reach the workers)."""
    *values, citus = old
    rest = {k: v for k, v in settings.items() if k not in PROPAGATE}
    if citus is None:
        return rest, values
    return {**PROPAGATE, **rest}, [citus, *values]


#: pgvector's iterative scan setting (0.8 and later).
ITERATIVE = "hnsw.iterative_scan"


def _save(settings: Mapping[str, str]) -> tuple[TextClause, dict[str, str]]:
    """One SELECT of the settings' current values (NULL where not defined yet), then the
    server's pgvector version."""
    cols = [f"current_setting(:pglogic_n{i}, true)" for i in range(len(settings))]
    cols.append("(SELECT extversion FROM pg_extension WHERE extname = 'vector')")
    return text("SELECT " + ", ".join(cols)), {f"pglogic_n{i}": n for i, n in enumerate(settings)}


def _for_server(settings: dict[str, str], old: Sequence[Any]) -> tuple[dict[str, str], list[Any]]:
    """Drop ``hnsw.iterative_scan`` where pgvector is older than 0.8 (it has no such setting,
    and SET of an unknown ``hnsw.`` name is an error); strip the version from ``old``."""
    *values, version = old
    if version is None or version_tuple(str(version)) >= (0, 8) or ITERATIVE not in settings:
        return settings, values
    i = list(settings).index(ITERATIVE)
    return {k: v for k, v in settings.items() if k != ITERATIVE}, values[:i] + values[i + 1 :]


def _set(settings: Mapping[str, str]) -> list[TextClause]:
    """``SET LOCAL`` statements (what Citus propagates to shards)."""
    return [text(stmt.as_string(None)) for stmt in set_local(settings)]


def _restore(names: Sequence[str], old: Sequence[Any]) -> list[TextClause]:
    """Statements that put the settings back: their old values, or the default where the setting
    did not exist before the search (pgvector's, before the extension was loaded)."""
    pairs = list(zip(names, old, strict=True))
    pairs.sort(key=lambda p: p[0] in PROPAGATE)  # Citus's own last: the others reach the workers
    names = [n for n, _ in pairs]
    back = {n: v for n, v in pairs if v not in (None, "")}
    out = _set(back)
    for name in names:
        if name not in back:
            ident = psql.Identifier(*name.split("."))
            out.append(text(psql.SQL("RESET {}").format(ident).as_string(None)))
    return out


_EXECUTING: ContextVar[bool] = ContextVar("pglogic_executing", default=False)
#: Set while the exact pass of :func:`execute` runs: the ranking scores every row.
_EXACT: ContextVar[bool] = ContextVar("pglogic_exact", default=False)


@contextmanager
def _exact_pass() -> Iterator[None]:
    """While in it, a :class:`LogicalSelect` compiles in exact mode (:data:`_EXACT`)."""
    token = _EXACT.set(True)
    try:
        yield
    finally:
        _EXACT.reset(token)


def _short(stmt: LogicalSelect, rows: Sequence[Any]) -> bool:
    """Whether the search runs again scoring every row: the engine's rule
    (:func:`pglogic.engine.plans.needs_exact_pass`, as the corpus path,
    :func:`pglogic.store.search.search`: fewer than k rows, not exact already, not all from
    lexical scans), for a statement that is a plain ranking (:func:`_plain_ranking`)."""
    s = stmt.pglogic_spec
    return needs_exact_pass(len(rows), s.options.k, s.tree, exact=s.options.exact) and (
        _plain_ranking(stmt)
    )


def _plain_ranking(stmt: LogicalSelect) -> bool:
    """Whether ``stmt`` returns every ranked row up to its k: its own LIMIT k, no OFFSET (or
    OFFSET 0), no join but the ranking's, no condition but those pushed into the scans. A
    statement that drops ranked rows itself (conditions on other tables, joins of its own, a
    LIMIT or OFFSET of its own) answers fewer than k rows: an exact pass would score the whole
    table for nothing. Public API only: the statement equals itself with LIMIT k and no OFFSET
    (``ClauseElement.compare``, which compares a LIMIT's value and its kind: a bound parameter
    or an SQL expression is not k), its joins are counted by :class:`LogicalSelect` and
    ``Select.whereclause`` holds the conditions not pushed."""
    k = stmt.pglogic_spec.options.k
    own_limit = any(stmt.compare(stmt.limit(k).offset(offset)) for offset in (None, 0))
    return own_limit and stmt.pglogic_joins == 1 and stmt.whereclause is None


@event.listens_for(Engine, "before_cursor_execute")
def _refuse_plain_execution(
    conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool
) -> None:
    """A pglogic search run without its settings would scan at ``hnsw.ef_search = 40`` (or
    whatever the session has): wrong depth, silently lower recall. Refuse it loudly."""
    compiled = getattr(context, "compiled", None)
    if isinstance(getattr(compiled, "statement", None), LogicalSelect) and not _EXECUTING.get():
        raise InvalidInput(
            "A pglogic search must run with its settings (hnsw.ef_search, iterative scans): use "
            "pglogic.integrations.sqlalchemy.execute(session, stmt) (or execute_async), not "
            "session.execute(stmt)"
        )


def _same_bind(session: Session, stmt: LogicalSelect) -> dict[str, Any]:
    """Bind arguments that keep the settings, the search and the restore on the search's
    connection (the read engine of a :class:`RoutedSession`; any session's own bind)."""
    return {"bind": session.get_bind(clause=stmt)}


def execute(session: Session, stmt: LogicalSelect) -> list[Row[Any]]:
    """Run a search with its settings and return all rows, in the session's transaction.

    The settings (``SET LOCAL hnsw.ef_search`` ...) hold for this statement only: their values
    before it are read first and put back after it, so the rest of the caller's transaction runs
    as it would have. Executing the statement any other way raises
    :class:`~pglogic.errors.InvalidInput` (it would scan at the session's ``ef_search``).

    When the index scans find fewer than k rows, the search runs again scoring every (filtered)
    row, so k rows come back whenever k match (as :meth:`pglogic.PgLogic.search` does).

    Example:
        >>> rows = execute(session, stmt)  # doctest: +SKIP
    """
    rows = _execute(session, stmt)
    if _short(stmt, rows):
        with _exact_pass():
            rows = _execute(session, stmt)
    return rows


def _execute(session: Session, stmt: LogicalSelect) -> list[Row[Any]]:
    settings = _settings(stmt)
    query, params = _save(settings)
    bind = _same_bind(session, stmt)
    row = session.execute(query, params, bind_arguments=bind).one()
    settings, old = _on_citus(*_for_server(settings, row))
    for setting in _set(settings):
        session.execute(setting, bind_arguments=bind)
    token = _EXECUTING.set(True)
    try:
        rows = list(session.execute(stmt, bind_arguments=bind).all())
    finally:
        _EXECUTING.reset(token)
    for restore in _restore(list(settings), old):
        session.execute(restore, bind_arguments=bind)
    return rows


async def execute_async(session: AsyncSession, stmt: LogicalSelect) -> list[Row[Any]]:
    """Async version of :func:`execute` for ``AsyncSession`` (psycopg async driver).

    Example:
        >>> rows = await execute_async(session, stmt)  # doctest: +SKIP
    """
    rows = await _execute_async(session, stmt)
    if _short(stmt, rows):
        with _exact_pass():
            rows = await _execute_async(session, stmt)
    return rows


async def _execute_async(session: AsyncSession, stmt: LogicalSelect) -> list[Row[Any]]:
    settings = _settings(stmt)
    query, params = _save(settings)
    bind = _same_bind(session.sync_session, stmt)
    row = (await session.execute(query, params, bind_arguments=bind)).one()
    settings, old = _on_citus(*_for_server(settings, row))
    for setting in _set(settings):
        await session.execute(setting, bind_arguments=bind)
    token = _EXECUTING.set(True)
    try:
        rows = list((await session.execute(stmt, bind_arguments=bind)).all())
    finally:
        _EXECUTING.reset(token)
    for restore in _restore(list(settings), old):
        await session.execute(restore, bind_arguments=bind)
    return rows


def _reads_only(clause: Any) -> bool:
    """A plain SELECT (a pglogic search included), without FOR UPDATE / SHARE."""
    return isinstance(clause, Select) and not _locks_rows(clause)


def _locks_rows(stmt: Select[Any]) -> bool:
    """Whether ``stmt`` has a FOR UPDATE / FOR SHARE clause (``Select.with_for_update()``).

    One of the helper's two reads of a private SQLAlchemy attribute (with :func:`_flushing`):
    SQLAlchemy has no public accessor of a select's locking clause (``with_for_update()`` only sets it; its compilers read
    ``GenerativeSelect._for_update_arg``, None without one, as here). Checked on SQLAlchemy
    2.0.0, 2.0.44 and 2.1.9; ``tests/test_sqlalchemy_api.py`` fails if it moves.
    """
    return stmt._for_update_arg is not None


def _flushing(session: Session) -> bool:
    """Whether ``session`` is flushing (``Session.flush()``, or the bulk saves), so that
    :meth:`RoutedSession.get_bind` sends what it asks for to the primary.

    No public accessor either: SQLAlchemy's own recipe for routing reads and writes (the
    ``get_bind`` example of ``AsyncSession.sync_session_class``) reads ``Session._flushing``,
    as here. Checked on SQLAlchemy 2.0.0, 2.0.44 and 2.1.9; ``tests/test_sqlalchemy_api.py``
    fails if it moves.
    """
    return bool(session._flushing)


class RoutedSession(Session):
    """A ``Session`` over a primary and a read engine: plain selects and pglogic searches go to
    ``replica``, everything else (flushes, INSERT/UPDATE/DELETE, ``text()``, SELECT ... FOR
    UPDATE) to ``primary``. After the first write of a transaction its reads go to the primary
    too (read-your-writes); the next transaction reads from the replica again.

    ``replica`` may be a libpq multi-host DSN's engine (``target_session_attrs=prefer-standby``);
    None means the primary. With ``sessionmaker(class_=RoutedSession, primary=..., replica=...)``
    or, async, ``async_sessionmaker(sync_session_class=RoutedSession, primary=p.sync_engine,
    replica=r.sync_engine)``.

    Example:
        >>> primary, replica = create_engines(dsn, read_dsn)  # doctest: +SKIP
        >>> with RoutedSession(primary=primary, replica=replica) as s:  # doctest: +SKIP
        ...     rows = execute(s, logical_search(Article, Article.embedding, '"a"', vectors=v))
    """

    def __init__(
        self,
        bind: Engine | None = None,
        *,
        primary: Engine | None = None,
        replica: Engine | None = None,
        **kw: Any,
    ) -> None:
        primary = primary or bind
        if primary is None:
            raise InvalidInput("RoutedSession needs primary= (the engine every write goes to)")
        super().__init__(bind=primary, **kw)
        self.pglogic_primary = primary
        self.pglogic_replica = replica or primary
        self.pglogic_wrote = False

    def get_bind(
        self,
        mapper: Any = None,
        *,
        clause: ClauseElement | None = None,
        bind: Engine | Connection | None = None,
        **kw: Any,
    ) -> Engine | Connection:
        """The replica for reads (outside a transaction that wrote), else the primary; a
        ``bind`` given explicitly wins."""
        if bind is not None:
            return bind
        flushing = _flushing(self)
        if not flushing and not self.pglogic_wrote and _reads_only(clause):
            return self.pglogic_replica
        if clause is not None or flushing:
            self.pglogic_wrote = True  # a write (or unknown text): reads stay on the primary
        return self.pglogic_primary


@event.listens_for(RoutedSession, "after_transaction_end")
def _forget_writes(session: Session, transaction: Any) -> None:
    if transaction.parent is None and isinstance(session, RoutedSession):
        session.pglogic_wrote = False


def create_engines(
    dsn: str, read_dsn: str | None = None, *, async_: bool = False, **kw: Any
) -> tuple[Any, Any]:
    """Engines for a primary ``dsn`` and a read DSN (None: the primary's engine twice), for
    :class:`RoutedSession`; ``kw`` goes to ``create_engine`` (``create_async_engine`` with
    ``async_``). Either DSN may be a libpq multi-host DSN.

    Example:
        >>> primary, replica = create_engines(  # doctest: +SKIP
        ...     "postgresql://app@primary/db",
        ...     "postgresql://app@replica-1,replica-2/db?target_session_attrs=prefer-standby")
    """
    if async_:
        from sqlalchemy.ext.asyncio import create_async_engine

        a = create_async_engine(url_from_dsn(dsn, async_=True), **kw)
        if read_dsn is None or read_dsn == dsn:
            return a, a
        return a, create_async_engine(url_from_dsn(read_dsn, async_=True), **kw)
    from sqlalchemy import create_engine

    primary = create_engine(url_from_dsn(dsn), **kw)
    if read_dsn is None or read_dsn == dsn:
        return primary, primary
    return primary, create_engine(url_from_dsn(read_dsn), **kw)


def url_from_dsn(dsn: str, *, async_: bool = False) -> URL:
    """Turn a libpq DSN (URL or key=value) into a SQLAlchemy URL for the psycopg driver.

    Example:
        >>> url_from_dsn("host=/tmp/pg dbname=x user=postgres").render_as_string()
        'postgresql+psycopg://postgres@/x?host=%2Ftmp%2Fpg'
    """
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(dsn)
    query = {k: str(v) for k, v in info.items() if k not in {"user", "password", "dbname", "port"}}
    host = query.pop("host", None)
    tcp = host is not None and not host.startswith("/")
    if host is not None and not tcp:
        query["host"] = host
    return URL.create(
        "postgresql+psycopg_async" if async_ else "postgresql+psycopg",
        username=str(info["user"]) if info.get("user") else None,
        password=str(info["password"]) if info.get("password") else None,
        host=host if tcp else None,
        port=int(str(info["port"])) if info.get("port") else None,
        database=str(info["dbname"]) if info.get("dbname") else None,
        query=query,
    )
