"""``pglogic embedding ...``: switch a corpus to another embedding model without downtime.

Registered on the main ``pglogic`` group by the import at the end of :mod:`pglogic.cli`.

Example:
    $ pglogic embedding add news --model sentence-transformers/all-MiniLM-L6-v2
    $ pglogic embedding backfill news --model sentence-transformers/all-MiniLM-L6-v2
    $ pglogic embedding index news --model sentence-transformers/all-MiniLM-L6-v2
    $ pglogic embedding switch news --model sentence-transformers/all-MiniLM-L6-v2
    $ pglogic embedding drop news --model all-MiniLM-L6-v2 --yes
"""

from __future__ import annotations

import sys

import click
from rich.table import Table

from pglogic.cli import ui
from pglogic.cli.ui import console, err_console, example, progress_bar
from pglogic.embed.registry import get_embedder
from pglogic.errors import EmbeddingError, PglogicError
from pglogic.store import admin
from pglogic.store.corpus import DEFAULT_EF_CONSTRUCTION, DEFAULT_M, IndexProgress, get_corpus

NEW = "sentence-transformers/all-MiniLM-L6-v2"


@click.group(
    epilog=example(
        "pglogic embedding list news",
        f"pglogic embedding add news --model {NEW}",
        f"pglogic embedding backfill news --model {NEW}",
        f"pglogic embedding index news --model {NEW}",
        f"pglogic embedding switch news --model {NEW}",
        "pglogic embedding drop news --model all-MiniLM-L6-v2 --yes",
    )
)
def embedding() -> None:
    """Embedding columns of a corpus: change its model without downtime.

    Add a column for the new model, backfill it (resumable), index it (concurrently), switch
    searches to it in one transaction, then drop the old column.
    """


model_option = click.option("--model", required=True, help="Embedding model of the column.")
lock_option = click.option(
    "--lock-timeout",
    default=admin.DEFAULT_LOCK_TIMEOUT,
    show_default=True,
    help="Give up if the table cannot be locked this fast (searches never queue behind longer).",
)


@embedding.command("list", epilog=example("pglogic embedding list news"))
@click.argument("corpus_name", metavar="CORPUS")
@click.pass_context
def embedding_list(ctx: click.Context, corpus_name: str) -> None:
    """List the embedding columns of CORPUS, which one is active, and how complete each is.

    A corpus with passages also shows, per column, the passages with a vector and the passage
    table's HNSW index: a column is ready to switch to when both are complete.
    """
    with ui.api(ctx).connect(write=False) as conn:
        infos = admin.list_embeddings(conn, corpus_name)
    passages = any(e.passages is not None for e in infos)
    table = Table()
    titles = ["model", "dim", "column", "active", "embedded", "index"]
    if passages:
        titles[4] = "documents"
        titles += ["passages", "passage index"]
    for title in titles:
        table.add_column(title, overflow="fold")
    for e in infos:
        row = [
            e.model,
            str(e.dim),
            e.column,
            "yes" if e.active else "",
            f"{e.embedded:,}/{e.documents:,}",
            _index(e.index_name, e.index_valid),
        ]
        if passages:
            row += [
                f"{e.passages_embedded:,}/{e.passages or 0:,}",
                _index(e.passage_index, e.passage_index_valid),
            ]
        table.add_row(*row)
    console.print(table)


def _index(name: str | None, valid: bool) -> str:
    if name is None:
        return "-"
    return name if valid else f"{name} (invalid)"


@embedding.command(
    "add",
    epilog=example(f"pglogic embedding add news --model {NEW}"),
)
@click.argument("corpus_name", metavar="CORPUS")
@model_option
@click.option("--dim", type=int, help="Vector dimension (checked against the model).")
@lock_option
@click.pass_context
def embedding_add(
    ctx: click.Context, corpus_name: str, model: str, dim: int | None, lock_timeout: str
) -> None:
    """Add an empty, inactive embedding column for --model to CORPUS.

    New and changed documents ingested from now on get vectors for every column; run
    'pglogic embedding backfill' for the documents already there. A corpus with passages gets
    the column in its passage table too (its passages keep the split they were made with).
    """
    embedder = get_embedder(model)
    if dim is not None and dim != embedder.dim:
        raise EmbeddingError(f"Model {model!r} makes {embedder.dim}-d vectors, not {dim}-d")
    with ui.api(ctx).connect() as conn:
        e = admin.add_embedding(
            conn, corpus_name, model=model, dim=embedder.dim, lock_timeout=lock_timeout
        )
        warning = admin.window_note(get_corpus(conn, corpus_name), embedder)
        conn.rollback()
    todo = f"{e.documents:,} documents"
    if e.passages is not None:
        todo += f" and {e.passages:,} passages"
    console.print(
        f"Added column {e.column} ({e.model}, {e.dim}-d) to corpus {corpus_name!r}; "
        f"{todo} to backfill"
    )
    if warning:
        err_console.print(f"Warning: {warning}")


@embedding.command(
    "backfill",
    epilog=example(
        f"pglogic embedding backfill news --model {NEW}",
        f"pglogic embedding backfill news --model {NEW} --batch-size 1024",
    ),
)
@click.argument("corpus_name", metavar="CORPUS")
@model_option
@click.option("--batch-size", type=int, default=256, show_default=True)
@click.pass_context
def embedding_backfill(ctx: click.Context, corpus_name: str, model: str, batch_size: int) -> None:
    """Embed with --model every document of CORPUS that has no vector in its column yet.

    In a corpus with passages, then every passage without one: each passage is embedded from
    its stored part of the text (the split made when the corpus was created). The progress bar
    counts both. Passages longer than the model's window are counted and reported: the model
    reads only their start. One commit per batch: an interrupted backfill resumes when run
    again.
    """
    api = ui.api(ctx)
    embedder = get_embedder(model)
    stats = admin.BackfillStats()
    with api.connect() as conn, progress_bar() as bar:
        task = bar.add_task(f"backfill {corpus_name}", total=None)

        def on_start(total: int) -> None:
            what = f"backfill {corpus_name}"
            if stats.missing_passages:
                what += (
                    f" ({stats.missing_documents:,} documents, {stats.missing_passages:,} passages)"
                )
            bar.update(task, total=total, description=what)

        def on_batch(done: int, n: int) -> None:
            bar.advance(task, n)

        def note(text: str) -> None:
            bar.console.print(f"Warning: {text}", style="yellow")

        try:
            admin.backfill_embedding(
                conn,
                corpus_name,
                model=model,
                embedder=embedder,
                batch_size=batch_size,
                on_start=on_start,
                on_batch=on_batch,
                note=note,
                stats=stats,
            )
        except KeyboardInterrupt:
            bar.stop()
            err_console.print(
                f"Interrupted: {_vectors(stats)} were committed; "
                "run the same command again to resume."
            )
            raise
    if stats.missing_passages or stats.passages:
        console.print(f"Backfilled {model} vectors in corpus {corpus_name!r}: {_vectors(stats)}")
    else:
        console.print(f"Backfilled {stats.vectors:,} {model} vectors in corpus {corpus_name!r}")


def _vectors(stats: admin.BackfillStats) -> str:
    if not (stats.missing_passages or stats.passages):
        return f"{stats.vectors:,} vectors"
    reused = f" ({stats.reused:,} copied from their one-passage document)" if stats.reused else ""
    return f"{stats.documents:,} documents, {stats.passages:,} passages{reused}"


@embedding.command(
    "index",
    epilog=example(
        f"pglogic embedding index news --model {NEW}",
        f"pglogic embedding index news --model {NEW} --m 32 --ef-construction 128",
    ),
)
@click.argument("corpus_name", metavar="CORPUS")
@click.option("--model", default=None, help="Embedding model of the column (default: active).")
@click.option("--m", type=int, default=DEFAULT_M, show_default=True, help="HNSW links per node.")
@click.option("--ef-construction", type=int, default=DEFAULT_EF_CONSTRUCTION, show_default=True)
@click.option(
    "--concurrently/--no-concurrently",
    default=True,
    show_default=True,
    help="CREATE INDEX CONCURRENTLY: searches and ingests go on during the build.",
)
@click.pass_context
def embedding_index(
    ctx: click.Context,
    corpus_name: str,
    model: str | None,
    m: int,
    ef_construction: int,
    concurrently: bool,
) -> None:
    """Build (or rebuild) the HNSW cosine index of --model's column in CORPUS.

    A corpus with passages gets the index of the column in its passage table too.
    """
    api = ui.api(ctx)
    with api.connect() as conn, progress_bar() as bar:
        task = bar.add_task(f"index {corpus_name}", total=None)

        def on_progress(p: IndexProgress) -> None:
            bar.update(task, completed=p.done, total=p.total or None, description=p.phase[:40])

        seconds = admin.build_embedding_index(
            conn,
            corpus_name,
            model=model,
            m=m,
            ef_construction=ef_construction,
            concurrently=concurrently,
            progress=on_progress,
            dsn=api.dsn,
            note=bar.console.print,
        )
        bar.update(task, description=f"index {corpus_name}", completed=1, total=1)
        e = admin.get_embedding(conn, corpus_name, model)
    passages = f" and {e.passage_index} on its passages" if e.passage_index else ""
    console.print(
        f"Built HNSW index {e.index_name}{passages} on {e.column} ({e.model}; m={m}, "
        f"ef_construction={ef_construction}) in {seconds:.1f}s"
    )


@embedding.command("switch", epilog=example(f"pglogic embedding switch news --model {NEW}"))
@click.argument("corpus_name", metavar="CORPUS")
@model_option
@lock_option
@click.pass_context
def embedding_switch(ctx: click.Context, corpus_name: str, model: str, lock_timeout: str) -> None:
    """Make --model's column the one searches of CORPUS use (one transaction).

    Refused while some documents (or passages) have no vector in that column or it has no
    index (in the passage table too). First repairs what an interrupted index command left
    (invalid indexes, an unfinished swap).
    """
    with ui.api(ctx).connect() as conn:
        before = admin.get_embedding(conn, corpus_name)
        e = admin.switch_embedding(
            conn, corpus_name, model=model, lock_timeout=lock_timeout, note=err_console.print
        )
    if before.model == e.model:
        console.print(f"Corpus {corpus_name!r} already searches with {model} ({e.column})")
    else:
        console.print(
            f"Corpus {corpus_name!r} now searches with {e.model} ({e.column}); "
            f"{before.model} ({before.column}) is kept until: "
            f"pglogic embedding drop {corpus_name} --model {before.model}"
        )


@embedding.command(
    "drop", epilog=example("pglogic embedding drop news --model all-MiniLM-L6-v2 --yes")
)
@click.argument("corpus_name", metavar="CORPUS")
@model_option
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@lock_option
@click.pass_context
def embedding_drop(
    ctx: click.Context, corpus_name: str, model: str, yes: bool, lock_timeout: str
) -> None:
    """Drop --model's (inactive) column of CORPUS with its vectors and index (and its
    passages' column and index, in a corpus with passages)."""
    with ui.api(ctx).connect() as conn:
        e = admin.get_embedding(conn, corpus_name, model)
        if not yes and not e.active:
            if not sys.stdin.isatty():
                raise PglogicError(
                    f"Refusing to drop {model!r} of {corpus_name!r} without confirmation: "
                    "pass --yes"
                )
            vectors = f"{e.embedded:,} {model} vectors"
            if e.passages is not None:
                vectors = (
                    f"{e.embedded:,} document and {e.passages_embedded:,} passage {model} vectors"
                )
            click.confirm(
                f"Drop column {e.column} ({vectors}) of {corpus_name!r}?",
                abort=True,
            )
        admin.drop_embedding(conn, corpus_name, model=model, lock_timeout=lock_timeout)
    console.print(f"Dropped column {e.column} ({model}) of corpus {corpus_name!r}")


#: The commands this module adds to ``pglogic``.
COMMANDS = (embedding,)
