"""``pglogic ask CORPUS QUESTION``: an LLM writes the logical query, pglogic runs it.

Registered on the main ``pglogic`` group by the import at the end of :mod:`pglogic.cli`. The
endpoint is any OpenAI-compatible chat-completions API (:mod:`pglogic.llm`).

Example:
    $ export PGLOGIC_LLM_BASE_URL=http://127.0.0.1:8080/v1 PGLOGIC_LLM_MODEL=qwen2.5-coder-1.5b
    $ pglogic ask news 'grain news that is not about wheat' --explain
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.text import Text

from pglogic.cli import _api, cli, console, example, print_hits
from pglogic.compile import MODES
from pglogic.filters import parse_filter
from pglogic.llm import ENV_BASE_URL, ENV_MODEL, ENV_TIMEOUT, LLMConfig
from pglogic.operators import DEFAULT_FAMILY, PRESETS
from pglogic.rewrite import AskResult


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


@cli.command(
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
@click.option("-k", "--k", type=int, default=10, show_default=True, help="Hits to return.")
@click.option(
    "--operators",
    default=DEFAULT_FAMILY,
    show_default=True,
    help="Operator family: a preset (" + ", ".join(PRESETS) + ") or and=..,or=..,not=..",
)
@click.option(
    "--truth", default="clamp", show_default=True, help="Similarity-to-truth mapping (as search)."
)
@click.option(
    "--mode",
    type=click.Choice(list(MODES)),
    default="fuzzy",
    show_default=True,
    help="Scoring mode (as search); the NSFL modes also score the question itself.",
)
@click.option("--where", multiple=True, help="Metadata filter (as search; repeatable).")
@click.option(
    "--llm-base-url",
    help=f"OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1 [${ENV_BASE_URL}, else "
    "$OPENAI_BASE_URL, else OpenAI when $OPENAI_API_KEY is set].",
)
@click.option("--llm-model", help=f"Model name as the server knows it [${ENV_MODEL}].")
@click.option(
    "--llm-timeout", type=float, help=f"Seconds per LLM request [${ENV_TIMEOUT}, else 60]."
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
    explain: bool,
    as_json: bool,
) -> None:
    """Ask CORPUS a QUESTION in plain language: an LLM writes the logical query, pglogic runs it.

    The logical query is the title of the hits table. When the model's answer does not parse, even
    after one retry with the parser's message, the question is searched as plain text (dense
    search) and the output says so. The API key comes from $PGLOGIC_LLM_API_KEY (or
    $OPENAI_API_KEY for OpenAI); local servers need none.
    """
    config = LLMConfig.resolve(base_url=llm_base_url, model=llm_model, timeout=llm_timeout)
    filters = tuple(parse_filter(w) for w in where)
    result = _api(ctx).ask(
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
        console.print(Text(f"Rewritten by:  {rw.model}, {how}"), soft_wrap=True)
        title = f"Logical query: {rw.query}"
    print_hits(result.search, explain=explain, title=title)
