"""What every command shares: consoles, progress bars, help epilogs, the search options' flags,
the API from the context, hit tables. Imports nothing from the command modules; the library loads
on first use.

Example:
    >>> example("pglogic corpus list").splitlines()[1:]
    ['Examples:', '  pglogic corpus list']
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from rich.progress import Progress, Task

    from pglogic.api import PgLogic
    from pglogic.store.ingest import IngestStats
    from pglogic.store.search import SearchResult

console = Console(emoji=False)  # user text such as "a:x:b" must not become emoji
err_console = Console(stderr=True, emoji=False)


@dataclass
class State:
    """The root options; the :class:`~pglogic.api.PgLogic` is built when a command needs it.

    Example:
        >>> State(dsn="dbname=x").dsn
        'dbname=x'
    """

    dsn: str | None = None
    home: Path | None = None
    read_dsn: str | None = None
    _api: Any = field(default=None, repr=False)

    def api(self) -> PgLogic:
        """The API for these options (built once)."""
        if self._api is None:
            from pglogic.api import PgLogic

            self._api = PgLogic(self.dsn, home=self.home, read_dsn=self.read_dsn)
        api: PgLogic = self._api
        return api


_LAST: list[State] = []  # the root command's options, for errors raised after its context ended


def last_dsn() -> str | None:
    """The DSN of the API the last command built (None before any), to explain a refused
    privilege after the command's context is gone."""
    if not _LAST or _LAST[-1]._api is None:
        return None
    dsn: str = _LAST[-1]._api.dsn
    return dsn


def api(ctx: click.Context) -> PgLogic:
    """The :class:`~pglogic.api.PgLogic` of the root command's ``--dsn`` / ``--read-dsn`` /
    ``--home``."""
    state = ctx.find_root().obj
    assert isinstance(state, State)
    if not _LAST or _LAST[-1] is not state:
        _LAST[:] = [state]
    return state.api()


def home(ctx: click.Context) -> Path:
    """The directory of the embedded server's data and fetched models."""
    state = ctx.find_root().obj
    assert isinstance(state, State)
    if state.home is not None:
        return state.home
    from pglogic.config import default_home

    return default_home()


def _rate(task: Task) -> Text:
    """Items per second (the column of :func:`progress_bar`)."""
    speed = task.finished_speed or task.speed
    return Text("" if speed is None else f"{speed:,.0f}/s", style="progress.data.speed")


def download_progress() -> Progress:
    """A progress bar in bytes (size, speed, ETA) for the fetch commands (quiet off a terminal)."""
    from rich.progress import (  # rich.progress loads on first use: --help stays fast
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

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
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    class RateColumn(ProgressColumn):
        """Items per second."""

        def render(self, task: Task) -> Text:
            return _rate(task)

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


F = TypeVar("F", bound=Callable[..., Any])


def search_option(name: str, *decls: str, note: str = "", **attrs: Any) -> Callable[[F], F]:
    """The click option of search option ``name`` as :data:`pglogic.engine.options.OPTIONS`
    declares it: its help (and ``note``), default, and type: a choice, a range where the option
    has bounds that hold in every search (the bounds of index scans are the engine's to check:
    an exact search ignores them), a flag for a bool. ``decls`` default to ``--name``;
    ``attrs`` are click's (``multiple``, ``metavar``, ...).

    Example:
        >>> @search_option("and_text")
        ... def f(and_text: int) -> None: ...
        >>> p = f.__click_params__[0]
        >>> p.opts, p.default, (p.type.min, p.type.max)
        (['--and-text'], 4, (0, 10))
    """
    from pglogic.engine.options import OPTIONS  # (numpy, psycopg: when a command loads)

    spec = OPTIONS[name]
    kw: dict[str, Any] = {"help": spec.help + note}
    if spec.default is not None and spec.default is not False and spec.default != ():
        kw.update(default=spec.default, show_default=True)
    if spec.type is bool:
        kw.setdefault("default", spec.default)
        if not any("/" in d for d in decls):  # (--x/--no-x declares a flag itself)
            kw["is_flag"] = True
    elif spec.choices:
        kw["type"] = click.Choice(list(spec.choices))
    elif spec.type is int and spec.bounded:
        low, high = (None if x is None else int(x) for x in (spec.minimum, spec.maximum))
        kw["type"] = click.IntRange(low, high, min_open=spec.exclusive, max_open=spec.exclusive)
    elif spec.type is float and spec.bounded:
        kw["type"] = click.FloatRange(
            spec.minimum, spec.maximum, min_open=spec.exclusive, max_open=spec.exclusive
        )
    elif spec.type in (int, float):
        kw["type"] = spec.type
    kw.update(attrs)
    return click.option(*(decls or ("--" + name.replace("_", "-"),)), **kw)


def run_ingest(api: PgLogic, corpus_name: str, path: Path, **kwargs: Any) -> IngestStats:
    """Ingest with a progress bar; on Ctrl-C say what was kept."""
    from pglogic.store.ingest import IngestStats

    committed = IngestStats()
    api.corpus(corpus_name)  # fail on an unknown corpus before drawing anything
    with progress_bar() as bar:
        task = bar.add_task(f"ingest {corpus_name}", total=None)

        def on_start(total: int) -> None:
            bar.update(task, total=total)

        def on_batch(stats: IngestStats, n: int) -> None:
            nonlocal committed
            committed = stats
            passages = f" · {stats.passages:,} passages" if stats.passages else ""
            bar.update(task, description=f"ingest {corpus_name}{passages}")
            bar.advance(task, n)

        said = _SaidByCaller()  # ingest_summary prints these warnings itself
        logging.getLogger("pglogic").addFilter(said)
        try:
            return api.ingest(corpus_name, path, on_start=on_start, on_batch=on_batch, **kwargs)
        except KeyboardInterrupt:
            bar.stop()
            err_console.print(
                f"Interrupted: {committed.changed:,} documents were committed; "
                "run the same command again to resume."
            )
            raise
        finally:
            logging.getLogger("pglogic").removeFilter(said)


class _SaidByCaller(logging.Filter):
    """Drops the log records of warnings that the CLI prints from the stats."""

    def filter(self, record: logging.LogRecord) -> bool:
        from pglogic.store.ingest import SAID_BY_CALLER

        return not getattr(record, SAID_BY_CALLER, False)


def ingest_summary(s: IngestStats) -> str:
    """The ingest's counts, and what the model could not read whole.

    Example:
        >>> from pglogic.store.ingest import IngestStats
        >>> print(ingest_summary(IngestStats(seen=2, inserted=2, embedded=2, truncated=1)))
        2 records: 2 inserted, 0 updated, 0 unchanged; 2 embedded in 0.0s, database load 0.0s
        Warning: 1 document is longer than the model's window: it read only the first part. Make the corpus with passages (pglogic corpus create NAME --passages) to search all of it.
        >>> print(ingest_summary(IngestStats(seen=3, inserted=2, repeated=1)).splitlines()[1])
        Warning: 1 record repeats the id of an earlier record: the last record of each id is kept.
        >>> print(ingest_summary(IngestStats()).splitlines()[1])
        Warning: the input has no records.
    """
    text = (
        f"{s.seen:,} records: {s.inserted:,} inserted, {s.updated:,} updated, "
        f"{s.unchanged:,} unchanged; {s.embedded:,} embedded in {s.embed_seconds:.1f}s, "
        f"database load {s.load_seconds:.1f}s"
    )
    if s.passages:
        text += f"; {s.passages:,} passages written"
    if s.truncated:
        one = s.truncated == 1
        text += (
            f"\nWarning: {s.truncated:,} document{'' if one else 's'} "
            f"{'is' if one else 'are'} longer than the model's window: it read only the first "
            "part. Make the corpus with passages (pglogic corpus create NAME --passages) to "
            "search all of it."
        )
    if s.over_window:
        text += (
            f"\nWarning: {s.over_window:,} passages are longer than the model's window, which "
            "cuts them: make the corpus again with a smaller --passage-tokens."
        )
    if not s.seen:
        text += "\nWarning: the input has no records."
    if s.repeated:
        one = s.repeated == 1
        text += (
            f"\nWarning: {s.repeated:,} record{'' if one else 's'} repeat{'s' if one else ''} "
            "the id of an earlier record: the last record of each id is kept."
        )
    return text


def print_hits(result: SearchResult, *, explain: bool, title: str | None = None) -> None:
    """Print hits as a table (with per-term similarities when ``explain``)."""
    from rich.table import Table

    table = Table(title=Text(title or str(result.tree)), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("id")
    table.add_column("title", overflow="fold", max_width=60)
    terms = result.compiled.terms if explain else []
    lexical = result.compiled.lexical if explain else ()
    for t in terms:
        table.add_column(Text(t if len(t) <= 24 else t[:23] + "…"), justify="right")
    for t in lexical:  # a lexical term's truth: 1/0 (crisp) or its normalised rank
        name = f"match:{t}"
        table.add_column(Text(name if len(name) <= 24 else name[:23] + "…"), justify="right")
    for i, h in enumerate(result.hits, 1):
        sims = [f"{h.similarities[t]:.3f}" for t in terms]
        sims += [f"{h.lexical[t]:.3f}" for t in lexical]
        table.add_row(
            str(i), f"{h.score:.4f}", Text(h.external_id), Text((h.title or "")[:120]), *sims
        )
    console.print(table)
    if not result.hits:
        console.print("No hits.")
    if explain and result.passages:
        print_passages(result)


def print_passages(result: SearchResult) -> None:
    """Per hit and scored text, the passage that decided its similarity (``--explain``)."""
    console.print("Deciding passages (characters of title + text):")
    for i, h in enumerate(result.hits, 1):
        for p in result.passages.get(h.id, []):
            snippet = " ".join(p.snippet.split())
            snippet = snippet if len(snippet) <= 90 else snippet[:89] + "…"
            line = Text(f"  #{i} {h.external_id}  ")
            line.append(f'"{p.term}" {p.similarity:.3f}', style="bold")
            own = h.similarities.get(p.term)
            if own is not None and abs(own - p.similarity) > 5e-4:  # a blended positive text
                line.append(f" (with the document's own vector: {own:.3f})")
            line.append(f"  passage {p.ord} [{p.start}:{p.end}]  {snippet}")
            console.print(line)
