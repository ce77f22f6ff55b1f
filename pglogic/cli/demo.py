"""The end-to-end demo behind ``pglogic demo`` (the README's first command).

It starts the embedded Postgres (or uses ``--dsn``), applies the migrations, creates a corpus,
ingests a real labelled dataset from ``../shared/data`` (Reuters-21578 by default; a bundled
sample otherwise), embeds it with all-MiniLM-L6-v2, builds the HNSW index, runs plain semantic
searches, then answers the same questions by dense search and by a logical query side by side,
counting how many of the top hits carry the topic the question excludes.

Example:
    >>> run_demo(PgLogic(), dataset=None, limit=3000, corpus_name="demo")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pglogic.cli import ui
from pglogic.cli.ui import example, print_hits, run_ingest
from pglogic.errors import InvalidInput, UnknownCorpus

if TYPE_CHECKING:
    from pglogic.api import PgLogic
    from pglogic.store.search import SearchResult

console = Console(emoji=False)


@dataclass(frozen=True)
class Contrast:
    """A question asked two ways: as one dense string and as a logical query."""

    question: str
    logical: str
    excluded_label: str


@dataclass(frozen=True)
class DemoSet:
    """What the demo runs on one dataset."""

    file: str
    plain: tuple[str, ...]
    contrasts: tuple[Contrast, ...]


DEMO_SETS: dict[str, DemoSet] = {
    "reuters21578": DemoSet(
        "corpus.jsonl.gz",
        ("coffee exports from Brazil", "central bank raises interest rates"),
        (
            Contrast("grain harvest news, not about wheat", '"grain" AND NOT "wheat"', "wheat"),
            Contrast(
                "crude oil prices, but not natural gas",
                '"crude oil prices" AND NOT "natural gas"',
                "nat-gas",
            ),
        ),
    ),
    "limit_small": DemoSet(
        "corpus.jsonl",
        ("Who likes Quokkas?",),
        (Contrast("Who likes Quokkas but not Apples?", '"Quokkas" AND NOT "Apples"', "Apples"),),
    ),
}


def find_dataset(dataset: Path | None) -> Path:
    """Return the dataset file: ``dataset`` if given, else Reuters from ``../shared/data``
    (searched beside the working directory and beside the checkout), else the bundled sample.

    Example:
        >>> find_dataset(None).name in {"corpus.jsonl.gz", "limit_small.jsonl"}
        True
    """
    if dataset is not None:
        if dataset.is_dir():
            for name in ("corpus.jsonl.gz", "corpus.jsonl"):
                if (dataset / name).exists():
                    return dataset / name
            raise InvalidInput(f"{dataset} has no corpus.jsonl(.gz)")
        if not dataset.exists():
            raise InvalidInput(f"No such dataset: {dataset}")
        return dataset
    roots = [
        os.environ.get("PGLOGIC_DATA"),
        Path.cwd() / "../shared/data",
        Path(__file__).resolve().parents[1] / "../shared/data",
    ]
    for root in roots:
        if root and (Path(root) / "reuters21578/corpus.jsonl.gz").exists():
            return (Path(root) / "reuters21578/corpus.jsonl.gz").resolve()
    return Path(__file__).parent / "data" / "limit_small.jsonl"


def _demo_set(path: Path) -> DemoSet:
    for key, spec in DEMO_SETS.items():
        if key in str(path):
            return spec
    return DemoSet(path.name, (), ())


def _labels(result: SearchResult) -> list[list[str]]:
    return [list(h.metadata.get("labels") or []) for h in result.hits]


def run_demo(api: PgLogic, *, dataset: Path | None, limit: int | None, corpus_name: str) -> None:
    """Run the demo end to end, printing each step.

    Example:
        >>> run_demo(PgLogic(), dataset=None, limit=500, corpus_name="demo")  # doctest: +SKIP
    """
    from pglogic.store import migrate
    from pglogic.store.corpus import DEFAULT_EF_CONSTRUCTION, DEFAULT_M
    from pglogic.store.db import connect, vector_version

    console.rule("[bold]1. Postgres")
    where = "embedded server (Unix socket)" if api.settings.embedded else "external server"
    with connect(api.dsn) as conn:
        row = conn.execute("SHOW server_version").fetchone()
        console.print(f"{where}: PostgreSQL {row[0] if row else '?'}", soft_wrap=True)
    api.upgrade()
    with connect(api.dsn) as conn:
        console.print(
            f"pgvector {vector_version(conn)}; pglogic schema at revision {migrate.current(api.dsn)}"
        )

    path = find_dataset(dataset)
    spec = _demo_set(path)
    console.rule("[bold]2. Corpus")
    try:
        info = api.corpus_info(corpus_name)
        console.print(f"Corpus {corpus_name!r} exists ({info.documents:,} documents); reusing it")
    except UnknownCorpus:
        created = api.create_corpus(corpus_name)
        console.print(f"Created corpus {created.name!r} ({created.model}, {created.dim}-d, cosine)")

    console.rule("[bold]3. Ingest")
    console.print(f"{path} (first {limit:,} records)" if limit else str(path), soft_wrap=True)
    stats = run_ingest(api, corpus_name, path, limit=limit)
    console.print(
        f"{stats.inserted:,} inserted, {stats.updated:,} updated, {stats.unchanged:,} unchanged"
        f" (re-running skips unchanged documents); embedding {stats.embed_seconds:.1f}s,"
        f" database load {stats.load_seconds:.1f}s"
    )

    console.rule("[bold]4. HNSW index")
    info = api.corpus_info(corpus_name)
    if info.index_name is None:
        seconds = api.build_index(corpus_name)
        console.print(
            f"Built HNSW index (m={DEFAULT_M}, ef_construction={DEFAULT_EF_CONSTRUCTION})"
            f" in {seconds:.1f}s"
        )
    else:
        console.print(f"Index {info.index_name} exists ({info.index_params}); kept up to date")

    console.rule("[bold]5. Plain semantic search")
    for q in spec.plain:
        print_hits(api.search(corpus_name, q, k=5), explain=False, title=f"dense: {q}")

    if spec.contrasts:
        console.rule("[bold]6. Dense vs logical")
    for c in spec.contrasts:
        dense = api.search(corpus_name, c.question, k=10)
        logical = api.search(corpus_name, c.logical, k=10)
        table = Table(title=f"Top 10 for: {c.question}", title_justify="left")
        table.add_column("#", justify="right")
        table.add_column(escape(f"dense: {c.question!r}"), overflow="fold")
        table.add_column(escape(f"logical: {c.logical}"), overflow="fold")
        for i, (a, b) in enumerate(zip(dense.hits, logical.hits, strict=False), 1):
            table.add_row(str(i), _cell(a.title, a.metadata, c), _cell(b.title, b.metadata, c))
        console.print(table)
        n_dense = sum(c.excluded_label in labels for labels in _labels(dense))
        n_logic = sum(c.excluded_label in labels for labels in _labels(logical))
        console.print(
            f"Hits labelled [bold]{c.excluded_label}[/] (the excluded topic): "
            f"dense {n_dense}/10, logical {n_logic}/10\n"
        )
    console.print(
        "Done. Try: pglogic search " + corpus_name + ' \'"grain" AND NOT "wheat"\' --explain'
    )


def _cell(title: str | None, metadata: dict[str, object], c: Contrast) -> str:
    labels = metadata.get("labels") or []
    assert isinstance(labels, list)
    tag = ",".join(str(x) for x in labels[:4])
    mark = " [red](excluded)[/]" if c.excluded_label in labels else ""
    return f"{escape((title or '')[:60])} [dim]\\[{escape(tag)}][/]{mark}"


@click.command(
    epilog=example("pglogic demo", "pglogic demo --limit 0   # the whole Reuters corpus")
)
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
    run_demo(ui.api(ctx), dataset=dataset, limit=limit or None, corpus_name=corpus_name)
