"""``pglogic serve``: the HTTP API and the playground page, and the API keys they accept.

Example:
    $ pglogic serve                          # http://127.0.0.1:8000/ (the playground)
    $ pglogic serve --create-key laptop      # prints a new key once; only its hash is stored
"""

from __future__ import annotations

from pathlib import Path

import click

from pglogic.cli import ui
from pglogic.cli.ui import example


def _keys_file(ctx: click.Context, keys_file: Path | None) -> Path:
    return keys_file or ui.home(ctx) / "http-keys.json"


@click.command(
    epilog=example(
        "pglogic serve                                  # http://127.0.0.1:8000/",
        "pglogic serve --port 8080 --timeout 5 --pool-size 16",
        "pglogic serve --create-key notebook            # shows the key once",
        "pglogic serve --host 0.0.0.0 --require-key     # other machines: keys only",
        "pglogic serve --cors-origin https://app.example.com",
        "pglogic serve --list-keys",
        "pglogic serve --revoke-key notebook",
    )
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option(
    "--pool-size",
    type=click.IntRange(1, 256),
    default=8,
    show_default=True,
    help="Database connections (searches running at once).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.001, 3600),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest a search may run on the database (statement_timeout); a request may ask "
    "for less.",
)
@click.option(
    "--max-body",
    type=click.IntRange(256, 16 * 2**20),
    default=64 * 1024,
    show_default=True,
    metavar="BYTES",
    help="Largest request body accepted (413 beyond).",
)
@click.option(
    "--max-k",
    type=click.IntRange(1, 10_000),
    default=200,
    show_default=True,
    help="Most hits a request may ask for.",
)
@click.option(
    "--cors-origin",
    multiple=True,
    metavar="ORIGIN",
    help="Let pages from ORIGIN call the API (repeatable; none by default).",
)
@click.option(
    "--require-key",
    is_flag=True,
    help="Ask every client for an API key, local ones too (e.g. behind a reverse proxy).",
)
@click.option(
    "--reader/--no-reader",
    default=True,
    show_default=True,
    help="Search as the read-only pglogic_reader role in read-only transactions (--no-reader: "
    "the login role, so searched terms are cached in pglogic.term_cache).",
)
@click.option(
    "--keys-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The API key hashes (default: HOME/http-keys.json).",
)
@click.option("--create-key", metavar="NAME", help="Make an API key, print it once, and exit.")
@click.option("--revoke-key", metavar="NAME", help="Remove an API key and exit.")
@click.option("--list-keys", is_flag=True, help="List the API keys' names and exit.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))  # fmt: skip
@click.pass_context
def serve(
    ctx: click.Context,
    host: str,
    port: int,
    pool_size: int,
    timeout: float,
    max_body: int,
    max_k: int,
    cors_origin: tuple[str, ...],
    require_key: bool,
    reader: bool,
    keys_file: Path | None,
    create_key: str | None,
    revoke_key: str | None,
    list_keys: bool,
    log_level: str,
) -> None:
    """Serve the HTTP API and the playground page (127.0.0.1:8000 by default).

    The JSON API is under /v1 (search, compile, ask, corpora, health; the OpenAPI schema at
    /v1/openapi.json) and the playground at /. Clients on other machines need an API key
    (--create-key); only its SHA-256 is stored.
    """
    from pglogic.errors import ConfigError
    from pglogic.integrations.http.keys import KeyStore

    store = KeyStore(_keys_file(ctx, keys_file))
    if create_key is not None:
        key = store.create(create_key)
        ui.err_console.print(f"API key {create_key!r} (shown once; its hash is in {store.path}):")
        click.echo(key)
        return
    if revoke_key is not None:
        if not store.revoke(revoke_key):
            raise ConfigError(f"No API key named {revoke_key!r} in {store.path}")
        ui.console.print(f"Revoked API key {revoke_key!r}")
        return
    if list_keys:
        import datetime

        for k in store.stored():
            made = datetime.datetime.fromtimestamp(k.created).isoformat(timespec="seconds")
            click.echo(f"{k.name}\t{made}")
        return
    from pglogic.integrations.http.app import is_local

    local_only = host in ("localhost",) or is_local(host)
    if not local_only and not store.stored():
        raise ConfigError(
            f"--host {host} lets other machines in, and they need an API key: make one first "
            "with 'pglogic serve --create-key NAME'"
        )
    serve_app(
        ctx,
        host=host,
        port=port,
        pool_size=pool_size,
        timeout=timeout,
        max_body=max_body,
        max_k=max_k,
        cors_origins=cors_origin,
        require_key=require_key,
        reader=reader,
        keys_file=store.path,
        log_level=log_level,
    )


def serve_app(ctx: click.Context, *, log_level: str, **options: object) -> None:
    """Build the application for the root options and run it with uvicorn until Ctrl-C.

    Example:
        >>> serve_app(ctx, log_level="info", host="127.0.0.1", port=8000)  # doctest: +SKIP
    """
    try:
        import uvicorn

        from pglogic.integrations.http import ServeConfig, create_app
    except ImportError as exc:
        raise click.ClickException(
            f"pglogic serve needs the http extra ({exc.name} is missing): "
            "pip install 'pglogic[http]'"
        ) from None
    state = ctx.find_root().obj
    config = ServeConfig(dsn=state.dsn, home=state.home, **options)  # type: ignore[arg-type]
    app = create_app(config)
    backend = app.state.backend
    backend.api  # noqa: B018 - connect (and migrate the embedded server) before listening
    role = backend.role or "the login role"
    ui.err_console.print(
        f"pglogic {_version()} serving http://{_url_host(config.host)}:{config.port}/ "
        f"(API under /v1; searches as {role}, read-only: {backend.read_only}); Ctrl-C stops",
        soft_wrap=True,
    )
    uvicorn.run(app, host=config.host, port=config.port, log_level=log_level,
                server_header=False, timeout_graceful_shutdown=5)  # fmt: skip


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _version() -> str:
    import pglogic

    return pglogic.__version__


@click.command(
    "mcp",
    epilog=example(
        "pglogic mcp                                    # stdio: an agent starts it",
        "pglogic --dsn postgresql://app@db/app mcp      # your own database",
        "pglogic mcp --http --port 8765                 # streamable HTTP at /mcp",
    ),
)
@click.option(
    "--http",
    "use_http",
    is_flag=True,
    help="Serve over streamable HTTP (at /mcp) instead of stdin and stdout.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address (--http).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port (--http).")  # fmt: skip
@click.option("--timeout", type=click.FloatRange(0, 3600, min_open=True), default=10.0,
              show_default=True, help="Longest a search may run (seconds).")  # fmt: skip
@click.option(
    "--allow-remote",
    is_flag=True,
    help="With --http on an address other machines reach: serve them (no authentication: put "
    "an authenticating proxy in front).",
)
@click.pass_context
def mcp_cmd(
    ctx: click.Context, use_http: bool, host: str, port: int, timeout: float, allow_remote: bool
) -> None:
    """Serve the search tools to agents over the Model Context Protocol (stdio by default).

    Tools: search (a logical query), compile (check one), list_corpora, describe_corpus, and ask
    (a question in plain language) when an LLM endpoint is configured (PGLOGIC_LLM_BASE_URL,
    PGLOGIC_LLM_MODEL, or OPENAI_API_KEY). Read-only: searches run in read-only transactions as
    the pglogic_reader role where the login role may take it. Syntax errors come back as tool
    errors with their column.
    """
    try:
        from pglogic.integrations.http.backend import Backend, ServeConfig
        from pglogic.integrations.mcp_server import create_server
    except ImportError as exc:
        raise click.ClickException(
            f"pglogic mcp needs the mcp extra ({exc.name} is missing): pip install 'pglogic[mcp]'"
        ) from None
    from pglogic.integrations.http.app import is_local

    if use_http and not allow_remote and not (host == "localhost" or is_local(host)):
        raise click.UsageError(
            f"--host {host} lets other machines in, and pglogic mcp has no authentication: "
            "put an authenticating proxy in front and add --allow-remote"
        )
    state = ctx.find_root().obj
    backend = Backend(ServeConfig(dsn=state.dsn, home=state.home, timeout=timeout))
    backend.api  # noqa: B018 - connect (and migrate the embedded server) before serving
    server = create_server(backend)
    role = backend.role or "the login role"
    where = f"http://{_url_host(host)}:{port}/mcp" if use_http else "stdin/stdout"
    names = [c.name for c in backend.api.list_corpora()]
    ui.err_console.print(
        f"pglogic {_version()} MCP server on {where}, database {_safe_dsn(backend.api.dsn)} "
        f"(searches as {role}, read-only: {backend.read_only}); corpora: "
        f"{', '.join(names) if names else 'none: is this the database you meant? (--dsn, --home)'}",
        soft_wrap=True,
    )
    try:
        if use_http:
            server.run("streamable-http", host=host, port=port)
        else:
            server.run("stdio")
    finally:
        backend.close()


def _safe_dsn(dsn: str) -> str:
    """``dsn`` without its password, for a log line.

    Example:
        >>> _safe_dsn("host=db user=app password=secret dbname=search")
        'user=app dbname=search host=db'
    """
    from psycopg.conninfo import conninfo_to_dict

    parts = {k: v for k, v in conninfo_to_dict(dsn).items() if k not in ("password", "options")}
    return " ".join(f"{k}={v}" for k, v in parts.items())
