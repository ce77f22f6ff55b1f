"""The ASGI application of ``pglogic serve``: the versioned JSON API, the playground page, and
what guards them (API keys, request size, CORS, errors as JSON).

Every error is a JSON object ``{"error": {"type": ..., "message": ...}}`` with a status code:
400 for a query or an option that cannot be run (a syntax error also gives ``column``, 1-based,
``position``, 0-based, and the ``query``), 401 without a valid API key, 404 for an unknown
corpus or path, 413 for a body over the limit, 422 for a request that does not match the schema,
503 when the database, the LLM endpoint or a free connection is not there or a search ran out of
time; anything else is a 500 with no detail (the traceback goes to the server's log only).

Example:
    >>> from starlette.testclient import TestClient  # doctest: +SKIP
    >>> client = TestClient(create_app(ServeConfig()), client=("127.0.0.1", 5000))  # doctest: +SKIP
    >>> client.get("/v1/health").json()["status"]  # doctest: +SKIP
    'ok'
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import pglogic
from pglogic.errors import PglogicError
from pglogic.integrations.http.backend import Backend, ServeConfig
from pglogic.integrations.http.errors import ApiError, error_body, from_pglogic_error
from pglogic.integrations.http.keys import KeyStore

__all__ = ["STATIC", "Guard", "create_app", "is_local"]

log = logging.getLogger("pglogic.http")

STATIC = Path(__file__).resolve().parent / "static"
API_PREFIX = "/v1"
#: Paths under the API prefix that need no key: nothing there is private.
PUBLIC = frozenset({f"{API_PREFIX}/health", f"{API_PREFIX}/openapi.json"})
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        b"object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    ),
]


def is_local(host: str | None) -> bool:
    """Whether a client address is this machine (loopback).

    Example:
        >>> is_local("127.0.0.1"), is_local("::1"), is_local("192.0.2.7"), is_local(None)
        (True, True, False, False)
    """
    if not host:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: Any = ()) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


class Guard:
    """ASGI middleware: the API key check, the body size limit and the security headers.

    A request under ``/v1/`` (but health and the schema) from a client that is not on this
    machine, or from any client with ``require_key``, needs a stored key. A body over
    ``max_body`` bytes is refused with 413 before the application reads any of it.

    Example:
        >>> Guard(app, ServeConfig(), KeyStore(Path("keys.json")))  # doctest: +SKIP
    """

    def __init__(self, app: ASGIApp, config: ServeConfig, keys: KeyStore) -> None:
        self.app = app
        self.config = config
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        client = scope.get("client")
        if path.startswith(API_PREFIX + "/") and path not in PUBLIC:
            local = is_local(client[0] if client else None)
            if self.config.require_key or not local:
                key = headers.get("x-api-key", "")
                auth = headers.get("authorization", "")
                if auth.lower().startswith("bearer "):
                    key = auth[7:].strip()
                if not key or self.keys.verify(key) is None:
                    why = "needs an API key" if not key else "got an invalid API key"
                    await _send_json(
                        send,
                        401,
                        error_body(
                            "unauthorized",
                            f"This request {why}: send 'Authorization: Bearer KEY' (keys are "
                            "made with 'pglogic serve --create-key NAME')",
                        ),
                        [(b"www-authenticate", b"Bearer")],
                    )
                    return
        limit = self.config.max_body
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await _send_json(send, 413, error_body(
                "body_too_large", f"The request body is over the limit of {limit} bytes"))  # fmt: skip
            return
        body = b""
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > limit:
                    await _send_json(send, 413, error_body(
                        "body_too_large", f"The request body is over the limit of {limit} bytes"))  # fmt: skip
                    return
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            receive = replay

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                names = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *[(k, v) for k, v in SECURITY_HEADERS if k not in names],
                ]
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(config: ServeConfig | None = None, *, backend: Backend | None = None) -> FastAPI:
    """Build the application: ``/v1/...`` (the API), ``/`` (the playground), ``/static/...``.

    Example:
        >>> app = create_app(ServeConfig())
        >>> sorted(p for p in app.openapi()["paths"])[:3]
        ['/v1/ask', '/v1/compile', '/v1/corpora']
    """
    from pglogic.integrations.http.routes import router

    config = config or ServeConfig()
    keys = KeyStore(config.keys_file or _default_keys_file(config))
    backend = backend or Backend(config, keys)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        backend.close()

    app = FastAPI(
        title="pglogic",
        version=pglogic.__version__,
        summary="Logical semantic retrieval inside PostgreSQL: search, compile, ask, corpora.",
        description=(
            "Queries combine quoted terms with AND, OR, NOT and parentheses; each term is "
            "embedded and documents are ranked by a fuzzy-logic combination of per-term "
            "cosine similarities, computed by one SQL statement over pgvector HNSW indexes. "
            'Errors are JSON objects `{"error": {"type", "message"}}`. Clients that are '
            "not on the server's machine send `Authorization: Bearer KEY`."
        ),
        docs_url=None,
        redoc_url=None,
        openapi_url=f"{API_PREFIX}/openapi.json",
        lifespan=lifespan,
    )
    app.state.backend = backend
    app.include_router(router, prefix=API_PREFIX)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.kind, exc.message, **exc.extra), status_code=exc.status)

    @app.exception_handler(PglogicError)
    async def library_error(request: Request, exc: PglogicError) -> JSONResponse:
        return await api_error(request, from_pglogic_error(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = [
            {"loc": [str(p) for p in e.get("loc", ())], "message": str(e.get("msg", ""))}
            for e in exc.errors()
        ]
        first = details[0] if details else {"loc": [], "message": "invalid request"}
        where = ".".join(p for p in first["loc"] if p != "body") or "body"
        message = f"Invalid request: {where}: {first['message']}"
        return JSONResponse(error_body("validation", message, details=details), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = "No such path" if exc.status_code == 404 else str(exc.detail)
        return JSONResponse(error_body(kind, message), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))  # fmt: skip

    import psycopg
    from psycopg_pool import PoolTimeout

    @app.exception_handler(PoolTimeout)
    async def busy(request: Request, exc: PoolTimeout) -> JSONResponse:
        message = "No database connection became free in time; try again"
        return JSONResponse(error_body("busy", message), status_code=503)

    @app.exception_handler(psycopg.errors.InsufficientPrivilege)
    async def forbidden(request: Request, exc: Exception) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        message = ("The server's database role may not read this: grant SELECT on the corpus "
                   "table to pglogic_reader, or run pglogic serve --no-reader")  # fmt: skip
        return JSONResponse(error_body("permission", message), status_code=503)

    @app.exception_handler(psycopg.OperationalError)
    async def gone(request: Request, exc: Exception) -> JSONResponse:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        message = "The database connection failed; try again"
        return JSONResponse(error_body("database_unavailable", message), status_code=503)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("Unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse(
            error_body("internal", "Internal error; the server's log has the details"),
            status_code=500,
        )

    @app.get("/", include_in_schema=False)
    def playground() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(Guard, config=config, keys=keys)
    if config.cors_origins:  # outermost: a preflight request carries no key
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type", "x-api-key"],
        )
    return app


def _default_keys_file(config: ServeConfig) -> Path:
    from pglogic.config import default_home

    return (config.home or default_home()) / "http-keys.json"
