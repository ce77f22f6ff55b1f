"""The endpoints of the JSON API (version 1), with their request and response schemas.

``POST /v1/search``, ``POST /v1/compile``, ``POST /v1/ask``, ``GET /v1/corpora``,
``GET /v1/corpora/{name}``, ``GET /v1/corpora/{name}/documents``, ``GET /v1/operators`` and
``GET /v1/health``. Each runs :class:`pglogic.PgLogic` (search is
never re-implemented here); handlers are plain functions, so they run in the server's thread
pool while the connection pool bounds the database work.

Example:
    >>> sorted(r.path for r in router.routes)  # doctest: +NORMALIZE_WHITESPACE
    ['/ask', '/compile', '/corpora', '/corpora/{name}', '/corpora/{name}/documents', '/health',
     '/operators', '/search']
"""

from __future__ import annotations

import json
import time
import warnings
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

import pglogic
from pglogic.engine.operators import DEFAULT_FAMILY, PRESETS
from pglogic.engine.options import MODES, OPTIONS
from pglogic.errors import ConfigError
from pglogic.integrations.http.backend import Backend
from pglogic.integrations.http.errors import ApiError
from pglogic.integrations.http.explain import dense_text, explain_hit, lexical_roles, term_roles

__all__ = ["router"]

if TYPE_CHECKING:  # (a Literal of values known when the module runs: a str to mypy)
    Mode: TypeAlias = str
    Lexical: TypeAlias = str
    PassageScore: TypeAlias = str
else:  # the choices OPTIONS declares
    Mode = Literal[OPTIONS["mode"].choices]
    Lexical = Literal[OPTIONS["lexical"].choices]
    PassageScore = Literal[OPTIONS["passage_score"].choices]


def option(name: str, note: str = "", **extra: Any) -> Any:
    """The pydantic field of search option ``name`` as :data:`pglogic.engine.options.OPTIONS`
    declares it: its default, its help (and ``note``) as the description, and its bounds where
    they hold in every search (the bounds of index scans are the engine's to check); a field
    of choices is typed with their ``Literal`` (:data:`Mode`, ...). ``extra`` goes to
    :func:`pydantic.Field`.

    Example:
        >>> f = option("and_text")
        >>> f.default, [type(m).__name__ for m in f.metadata]
        (4, ['Ge', 'Le'])
    """
    spec = OPTIONS[name]
    bounds: dict[str, Any] = {}
    if spec.bounded:
        low, high = ("gt", "lt") if spec.exclusive else ("ge", "le")
        if spec.minimum is not None:
            bounds[low] = spec.minimum
        if spec.maximum is not None:
            bounds[high] = spec.maximum
    return Field(spec.default, description=spec.help + note, **bounds, **extra)


class ErrorDetail(BaseModel):
    """One error: its kind, a sentence, and for syntax errors where in the query."""

    type: str = Field(examples=["query_syntax"])
    message: str = Field(examples=["Expected a quoted term after NOT at col 9"])
    column: int | None = Field(None, description="1-based column of a syntax error")
    position: int | None = Field(None, description="0-based offset of a syntax error")
    query: str | None = None

    model_config = ConfigDict(extra="allow")


class ErrorResponse(BaseModel):
    """The body of every error response."""

    error: ErrorDetail


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorResponse, "description": "The query or an option cannot be run"},
    401: {"model": ErrorResponse, "description": "A non-local client without a valid API key"},
    404: {"model": ErrorResponse, "description": "Unknown corpus"},
    413: {"model": ErrorResponse, "description": "Request body over the limit"},
    422: {"model": ErrorResponse, "description": "The request does not match the schema"},
    503: {"model": ErrorResponse, "description": "Database, model or LLM unavailable; timeout"},
}

#: The most filters a request may give, and the most documents it may ask for.
MAX_FILTERS, MAX_DOCUMENTS = 16, 200
_FILTER_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "description": '"KEY=VALUE", "KEY>=VALUE" (=, !=, <, <=, >, >=)'},
        {
            "type": "object",
            "description": 'An object the metadata contains, {"contains": {...}}, or '
            '{"key": KEY, "op": OP, "value": VALUE}',
        },
    ]
}
Filters = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [
                _FILTER_SCHEMA,
                {"type": "array", "items": _FILTER_SCHEMA, "maxItems": MAX_FILTERS},
                {"type": "null"},
            ]
        }
    ),
    Field(
        description='Metadata filters, all of which must hold: one or a list of "KEY=VALUE", '
        '"KEY>=VALUE" (=, !=, <, <=, >, >=), an object the metadata contains ({"labels": '
        '["grain"]}), {"contains": {...}} or {"key": KEY, "op": OP, "value": VALUE}; read by '
        "pglogic.engine.filters.parse_filters, any other shape is a 400",
        examples=[
            ["split=test", {"labels": ["grain"]}],
            {"key": "year", "op": ">=", "value": 1990},
        ],
    ),
]


SNIPPET = (
    "Give every hit a snippet: the text of its deciding passage (the one most similar to a "
    "positive term; without passages, the text's start), at most 300 characters"
)


class Options(BaseModel):
    """Options shared by search, compile and ask."""

    model_config = ConfigDict(extra="forbid")

    k: int = option("k", " At most the server's max_k.")
    operators: str = option("operators", max_length=200)
    mode: Mode = option("mode")
    truth: str = option("truth", max_length=100)
    filters: Filters = []
    and_text: int = option("and_text")
    not_context: float = option("not_context")
    not_mention: float = option("not_mention")
    exact: bool = option("exact")
    lexical: Lexical = option("lexical")
    passages: bool = option("passages")
    passage_score: PassageScore = option("passage_score")


class SearchRequest(Options):
    """A search: a logical query (quoted terms, AND, OR, NOT, parentheses) or plain text."""

    corpus: str = Field(min_length=1, max_length=200, examples=["news"])
    query: str = Field(min_length=1, examples=['"grain" AND NOT "wheat"'])
    explain: bool = Field(False, description="Per hit: each text's truth, each NOT's "
                          "contribution, the passage that decided each similarity")  # fmt: skip
    dense: bool = Field(False, description="Also run a dense search of the query as one string")
    dense_query: str | None = Field(None, max_length=2000,
                                    description="The dense search's text (default: the query "
                                    "in words, e.g. 'grain but not wheat')")  # fmt: skip
    include_sql: bool = Field(False, description="Return the statement that ran")
    text: bool = Field(False, description="Give every hit its document's text")
    snippet: bool = Field(False, description=SNIPPET)
    timeout: float | None = option("timeout", " At most the server's limit.")


class CompileRequest(Options):
    """Compile a query to SQL without running it (no corpus: a 384-d sample corpus)."""

    query: str = Field(min_length=1, examples=['"grain" AND NOT "wheat"'])
    corpus: str | None = Field(None, max_length=200)
    style: Literal["psycopg", "numbered"] = Field("psycopg", description="Placeholder style")


class AskRequest(Options):
    """A question in plain language; an LLM writes the logical query."""

    corpus: str = Field(min_length=1, max_length=200)
    question: str = Field(min_length=1, examples=["grain news that is not about wheat"])
    explain: bool = False
    text: bool = Field(False, description="Give every hit its document's text")
    snippet: bool = Field(False, description=SNIPPET)
    timeout: float | None = option("timeout", " At most the server's limit.")


class TermOut(BaseModel):
    """A text the documents are scored against."""

    text: str
    role: Literal["positive", "negated", "phrase", "other"]


class NotContribution(BaseModel):
    """What one NOT did to a hit's score."""

    expr: str = Field(description='The NOT, e.g. NOT "wheat"')
    terms: list[str]
    truth: float = Field(description="The NOT's truth value")
    without: float = Field(description="The score with this NOT taken as true")
    contribution: float = Field(description="score - without (negative: pushed down)")


class PassageOut(BaseModel):
    """The passage of a document that decided a text's similarity (its best passage)."""

    ord: int = Field(description="0-based position of the passage in the document")
    start: int = Field(
        description="Its first character in the text the model reads: the "
        "title, a newline, then the text (the text alone without a title)"
    )
    end: int = Field(description="Past its last character, in the same string")
    similarity: float = Field(description="Cosine similarity of the passage to the text")
    snippet: str = Field(description="The passage's first 160 characters")


class Explanation(BaseModel):
    """Why a hit scores what it does."""

    truths: dict[str, float] = Field(description="Each scored text's truth value")
    nots: list[NotContribution] | None = Field(
        description="Each NOT's contribution (null where the score is not a fuzzy formula)"
    )
    passages: dict[str, PassageOut] | None = Field(
        None,
        description="Per scored text, the passage that decided its similarity (a corpus with "
        "passages, searched over them; else null)",
    )


class HitOut(BaseModel):
    """One ranked document."""

    rank: int
    id: str
    title: str | None
    score: float
    similarities: dict[str, float] = Field(description="Cosine similarity of each scored text")
    metadata: dict[str, Any]
    explain: Explanation | None = None
    lexical: dict[str, float] = Field(
        default_factory=dict, description="Truth of each lexical term (match:...), by its words"
    )
    text: str | None = Field(None, description="The document's text (with text: true)")
    snippet: str | None = Field(None, description="Its snippet (with snippet: true)")


class DocumentOut(BaseModel):
    """A stored document."""

    id: str = Field(description="Its external id")
    title: str | None
    text: str
    metadata: dict[str, Any]


class DocumentsOut(BaseModel):
    """The documents asked for, in the order asked, and the ids no document has."""

    documents: list[DocumentOut]
    missing: list[str]


class SqlOut(BaseModel):
    """A compiled statement: run ``settings`` with SET LOCAL, then ``text`` with ``parameters``."""

    text: str
    parameters: dict[str, Any] = Field(description="Values; vectors are described, not listed")
    settings: dict[str, str]
    order: list[str] | None = Field(None, description="Placeholder names in order ($1, $2...)")


class DenseOut(BaseModel):
    """The same corpus searched densely with the query as one string."""

    query: str
    hits: list[HitOut]
    took_ms: float


class SearchResponse(BaseModel):
    """Hits of a search, with what produced them."""

    corpus: str
    query: str = Field(description="The canonical query (or the plain text)")
    logical: bool = Field(description="False for a plain-text (dense) query")
    note: str | None = Field(
        None, description="For plain text that seems to ask for logic: how to write it"
    )
    operators: str
    mode: str
    terms: list[TermOut]
    hits: list[HitOut]
    took_ms: float = Field(description="Wall time of the search in the server")
    timings_ms: dict[str, float] = Field(description="compile, embed, database")
    dense: DenseOut | None = None
    sql: SqlOut | None = None


class CompileResponse(BaseModel):
    """A compiled query."""

    query: str
    logical: bool
    terms: list[TermOut]
    sql: SqlOut


class AskResponse(SearchResponse):
    """An answered question: the query the LLM wrote, then its search."""

    question: str
    fallback: bool = Field(description="True when the LLM's answer did not parse (dense search)")
    reason: str | None = None
    model_query: str | None = Field(
        default=None, description="The query as the model wrote it, before the checks"
    )
    repairs: list[str] = Field(
        default_factory=list, description="What the checks changed in the model's query"
    )
    rewrite_ms: float


class CorpusOut(BaseModel):
    """A corpus and its statistics."""

    name: str
    description: str = ""
    model: str
    dim: int
    distance: str
    documents: int
    embedded: int
    table_bytes: int
    index_bytes: int
    index_name: str | None
    index_params: dict[str, Any] | None
    created_at: str | None


class CorporaOut(BaseModel):
    """Every corpus."""

    corpora: list[CorpusOut]


class FamilyOut(BaseModel):
    """An operator family: its AND, OR and NOT."""

    name: str
    and_: str = Field(alias="and")
    or_: str = Field(alias="or")
    not_: str = Field(alias="not")


class OperatorsOut(BaseModel):
    """The operator families and scoring modes a request may name."""

    default: str
    families: list[FamilyOut]
    modes: dict[str, str]


class HealthOut(BaseModel):
    """The server's state."""

    status: Literal["ok", "unavailable"]
    version: str
    database: str
    read_only: bool
    role: str | None
    llm: bool = Field(description="Whether an LLM endpoint is configured (POST /v1/ask)")


router = APIRouter()


def backend(request: Request) -> Backend:
    """The request's :class:`Backend` (the application's state), for ``Depends``.

    Example:
        >>> B.__metadata__[0].dependency is backend
        True
    """
    b: Backend = request.app.state.backend
    return b


B = Annotated[Backend, Depends(backend)]


def _check(b: Backend, text: str, k: int, what: str = "query") -> None:
    cfg = b.config
    if len(text) > cfg.max_query:
        raise ApiError(400, "invalid_input", f"The {what} is over {cfg.max_query} characters")
    if k > cfg.max_k:
        raise ApiError(400, "invalid_input", f"k = {k} is over this server's limit of {cfg.max_k}")


def _filters(raw: Any) -> tuple[Any, ...]:
    from pglogic.engine.filters import parse_filters

    parsed = parse_filters(raw)
    if len(parsed) > MAX_FILTERS:
        raise ApiError(400, "invalid_input", f"At most {MAX_FILTERS} filters, not {len(parsed)}")
    return parsed


def _timeout(b: Backend, asked: float | None) -> float:
    return min(asked, b.config.timeout) if asked else b.config.timeout


def _sql(compiled: Any, style: str = "psycopg") -> SqlOut:
    from pglogic.engine.render import vector_note

    described: dict[str, Any] = {}
    for i, t in enumerate(compiled.terms):
        described[f"{compiled.param_prefix}v{i}"] = vector_note(compiled, t)
    if compiled.guide_param:
        kind = "SQO vector" if compiled.vector_kind == "sqo" else "guide vector"
        described[compiled.guide_param] = f"<{kind} of the term embeddings>"
    if style == "numbered":
        from pglogic.engine.render import render

        rendered = render(compiled, "numbered")
        params = {n: described.get(n, rendered.params.get(n)) for n in rendered.names}
        return SqlOut(text=rendered.text, parameters=_jsonable(params),
                      settings=dict(compiled.settings), order=list(rendered.names))  # fmt: skip
    params = {**compiled.params, **described}
    return SqlOut(text=compiled.as_string(), parameters=_jsonable(params),
                  settings=dict(compiled.settings), order=None)  # fmt: skip


def _jsonable(params: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in params.items():
        try:
            json.dumps(v)
            out[k] = v
        except TypeError:
            out[k] = str(v)
    return out


def _hits(result: Any, *, explain: bool, and_text: int) -> list[HitOut]:
    out = []
    for i, h in enumerate(result.hits, 1):
        ex = None
        if explain:
            c = result.compiled
            raw = explain_hit(result.tree, h.similarities, h.score, c.family, c.truth,
                              and_text=and_text if c.mode == "fuzzy" else 0,
                              lexical=h.lexical)  # fmt: skip
            if c.mode != "fuzzy":
                raw["nots"] = None
            deciding = result.passages.get(h.id)
            if deciding:
                raw["passages"] = {
                    d.term: PassageOut(ord=d.ord, start=d.start, end=d.end,
                                       similarity=d.similarity, snippet=d.snippet)
                    for d in deciding
                }  # fmt: skip
            ex = Explanation.model_validate(raw)
        out.append(HitOut(rank=i, id=h.id, title=h.title, score=h.score,
                          similarities=h.similarities, metadata=h.metadata or {},
                          explain=ex, lexical=h.lexical, text=h.text,
                          snippet=h.snippet))  # fmt: skip
    return out


def _response(req: SearchRequest | AskRequest, result: Any, took: float) -> dict[str, Any]:
    from pglogic.query import Term, plain_text_note

    logical = not isinstance(result.tree, Term) or '"' in getattr(req, "query", '"')
    roles = term_roles(result.tree, list(result.compiled.terms))
    roles.update(lexical_roles(result.tree))
    return {
        "corpus": req.corpus,
        "query": str(result.tree) if logical else result.tree.text,
        "logical": logical,
        "note": None if logical else plain_text_note(getattr(req, "query", "")),
        "operators": req.operators,
        "mode": req.mode,
        "terms": [TermOut(text=t, role=r) for t, r in roles.items()],  # type: ignore[arg-type]
        "hits": _hits(result, explain=req.explain, and_text=req.and_text),
        "took_ms": round(took * 1000, 2),
        "timings_ms": {k: round(v * 1000, 2) for k, v in result.timings.items()},
    }


def _search(
    b: Backend,
    req: Options,
    corpus: str,
    query: Any,
    timeout: float | None,
    explain_passages: bool = False,
) -> Any:
    from pglogic.errors import PlainTextWarning

    with warnings.catch_warnings():  # (the response's note says it)
        warnings.simplefilter("ignore", PlainTextWarning)
        return b.api.search(
            corpus,
            query,
            k=req.k,
            operators=req.operators,
            truth=req.truth,
            mode=req.mode,
            filters=_filters(req.filters),
            and_text=req.and_text,
            exact=req.exact,
            lexical=req.lexical,
            passages=req.passages,
            passage_score=req.passage_score,
            not_context=req.not_context,
            not_mention=req.not_mention,
            explain_passages=explain_passages and req.passages,
            timeout=_timeout(b, timeout),
            remember_terms=not b.read_only,
            text=bool(getattr(req, "text", False)),
            snippet=bool(getattr(req, "snippet", False)),
        )


@router.post("/search", response_model=SearchResponse, responses=ERRORS, tags=["search"])
def search(req: SearchRequest, b: B) -> dict[str, Any]:
    """Search a corpus with a logical query (or plain text); optionally explain every hit
    and run the dense search of the same words beside it.

    Example: `{"corpus": "news", "query": "\"grain\" AND NOT \"wheat\"", "k": 5, "explain": true}`
    """
    _check(b, req.query, req.k)
    t0 = time.perf_counter()
    result = _search(b, req, req.corpus, req.query, req.timeout, explain_passages=req.explain)
    out = _response(req, result, time.perf_counter() - t0)
    if req.dense:
        from pglogic.query import Term

        text = (req.dense_query or "").strip() or dense_text(result.tree)
        t1 = time.perf_counter()
        dense = _search(b, req.model_copy(update={"mode": "fuzzy"}), req.corpus, Term(text),
                        req.timeout)  # fmt: skip
        out["dense"] = DenseOut(query=text, hits=_hits(dense, explain=False, and_text=0),
                                took_ms=round((time.perf_counter() - t1) * 1000, 2))  # fmt: skip
    if req.include_sql:
        out["sql"] = _sql(result.compiled)
    return out


@router.post("/compile", response_model=CompileResponse, responses=ERRORS, tags=["search"])
def compile_query(req: CompileRequest, b: B) -> dict[str, Any]:
    """Parse and compile a query without running it: the SQL, its parameters and settings.
    A query that does not parse is a 400 with the column of the error (the playground checks
    what you type with it).

    Example: `{"query": "\"a\" AND NOT \"b\"", "style": "numbered"}`
    """
    from pglogic.engine.compile import SearchOptions
    from pglogic.engine.compile import compile_query as compile_tree
    from pglogic.engine.source import Corpus
    from pglogic.query import Term, to_tree

    _check(b, req.query, req.k)
    opts = SearchOptions(k=req.k, operators=req.operators, truth=req.truth, mode=req.mode,
                         filters=_filters(req.filters), and_text=req.and_text,
                         exact=req.exact, timeout=b.config.timeout,
                         lexical=req.lexical, passages=req.passages,
                         passage_score=req.passage_score,
                         not_context=req.not_context,
                         not_mention=req.not_mention)  # fmt: skip
    tree = to_tree(req.query)
    if req.corpus:
        compiled = b.api.compile(req.corpus, tree, opts)
    else:
        from pglogic.config import DEFAULT_MODEL

        sample = Corpus(0, "sample", "corpus_0", DEFAULT_MODEL, 384, "cosine", "embedding", None,
                        None, "english")  # fmt: skip
        compiled = compile_tree(tree, sample, opts)
    plain = tree.text if isinstance(tree, Term) and '"' not in req.query else None
    roles = term_roles(tree, list(compiled.terms))
    roles.update(lexical_roles(tree))
    return {
        "query": str(tree) if plain is None else plain,
        "logical": plain is None,
        "terms": [TermOut(text=t, role=r) for t, r in roles.items()],  # type: ignore[arg-type]
        "sql": _sql(compiled, req.style),
    }


@router.post("/ask", response_model=AskResponse, responses=ERRORS, tags=["search"])
def ask(req: AskRequest, b: B) -> dict[str, Any]:
    """Answer a question in plain language: the configured LLM writes the logical query, then
    it is searched. 503 when no LLM endpoint is configured (PGLOGIC_LLM_BASE_URL, ...).

    Example: `{"corpus": "news", "question": "grain news that is not about wheat"}`
    """
    _check(b, req.question, req.k, "question")
    try:
        llm = b.llm_config()
    except ConfigError as exc:
        raise ApiError(503, "llm_unavailable", str(exc)) from None
    t0 = time.perf_counter()
    res = b.api.ask(
        req.corpus,
        req.question,
        k=req.k,
        llm=llm,
        operators=req.operators,
        truth=req.truth,
        mode=req.mode,
        filters=_filters(req.filters),
        and_text=req.and_text,
        exact=req.exact,
        lexical=req.lexical,
        passages=req.passages,
        passage_score=req.passage_score,
        not_context=req.not_context,
        not_mention=req.not_mention,
        explain_passages=req.explain and req.passages,
        timeout=_timeout(b, req.timeout),
        remember_terms=not b.read_only,
        text=req.text,
        snippet=req.snippet,
    )
    out = _response(req, res.search, time.perf_counter() - t0)
    out.update(question=req.question, fallback=res.fallback, reason=res.rewrite.reason,
               model_query=res.rewrite.model_query, repairs=list(res.rewrite.repairs),
               rewrite_ms=round(res.search.timings.get("rewrite", 0.0) * 1000, 2))  # fmt: skip
    return out


def _corpus(info: Any) -> CorpusOut:
    return CorpusOut(
        name=info.name,
        description=info.description,
        model=info.model,
        dim=info.dim,
        distance=info.distance,
        documents=info.documents,
        embedded=info.embedded,
        table_bytes=info.table_bytes,
        index_bytes=info.index_bytes,
        index_name=info.index_name,
        index_params=info.index_params,
        created_at=info.created_at.isoformat() if info.created_at else None,
    )


@router.get("/corpora", response_model=CorporaOut, responses=ERRORS, tags=["corpora"])
def corpora(b: B) -> CorporaOut:
    """Every corpus with its model, size and index.

    Example: `GET /v1/corpora`
    """
    return CorporaOut(corpora=[_corpus(c) for c in b.api.list_corpora()])


@router.get("/corpora/{name}", response_model=CorpusOut, responses=ERRORS, tags=["corpora"])
def corpus(name: Annotated[str, Path(max_length=200)], b: B) -> CorpusOut:
    """One corpus (404 when there is none of that name).

    Example: `GET /v1/corpora/news`
    """
    return _corpus(b.api.corpus_info(name))


@router.get(
    "/corpora/{name}/documents", response_model=DocumentsOut, responses=ERRORS, tags=["corpora"]
)
def documents(
    name: Annotated[str, Path(max_length=200)],
    ids: Annotated[
        list[str],
        Query(
            alias="id",
            min_length=1,
            max_length=MAX_DOCUMENTS,
            description="An external id (repeat for more)",
        ),
    ],
    b: B,
) -> DocumentsOut:
    """Documents by external id, in the order asked; the ids no document has under `missing`.

    Example: `GET /v1/corpora/news/documents?id=14779&id=14780`
    """
    found = b.api.get_documents(name, ids)
    have = {d.id for d in found}
    return DocumentsOut(
        documents=[DocumentOut(id=d.id, title=d.title, text=d.text, metadata=d.metadata)
                   for d in found],
        missing=list(dict.fromkeys(i for i in ids if i not in have)),
    )  # fmt: skip


@router.get("/operators", response_model=OperatorsOut, responses=ERRORS, tags=["search"])
def operators() -> dict[str, Any]:
    """The operator family presets (`operators`) and the scoring modes (`mode`).

    Example: `GET /v1/operators`
    """
    families = [
        {"name": name, "and": f.and_.formula, "or": f.or_.formula, "not": f.not_.formula}
        for name, f in PRESETS.items()
    ]
    return {"default": DEFAULT_FAMILY, "families": families, "modes": dict(MODES)}


@router.get(
    "/health",
    response_model=HealthOut,
    responses={503: {"model": HealthOut, "description": "The database is unreachable"}},
    tags=["server"],
)
def health(b: B) -> Any:
    """Whether the server reaches its database (no API key needed).

    Example: `GET /v1/health`
    """
    from pglogic.errors import PglogicError

    try:
        with b.api.pooled() as conn:
            conn.execute("SELECT 1")
        database, status, code = "ok", "ok", 200
    except (PglogicError, OSError) as exc:
        database, status, code = str(exc), "unavailable", 503
    except Exception as exc:  # a pool that cannot open, a server gone away
        database, status, code = type(exc).__name__, "unavailable", 503
    body = HealthOut(status=status, version=pglogic.__version__, database=database,  # type: ignore[arg-type]
                     read_only=b.read_only, role=b.role, llm=b.llm_configured())  # fmt: skip
    return JSONResponse(body.model_dump(), status_code=code)
