"""The CLI reference (``docs/cli.md``), written from the click tree itself.

``python -m pglogic.cli.reference > docs/cli.md`` regenerates it; tests/test_docs.py fails when
the file is not what the commands say, so the reference cannot drift from the code.

Example:
    >>> text = reference()
    >>> "## pglogic db upgrade" in text and "--cascade" in text
    True
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import click

from pglogic.cli import cli

_HEADER = """\
# CLI reference

Every `pglogic` command with its arguments and options, written from the commands themselves by
`python -m pglogic.cli.reference > docs/cli.md` (a test keeps it current). `pglogic COMMAND
--help` shows the same with examples. The task-oriented guides are in the README and the other
pages of `docs/`.
"""


def _walk(cmd: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Command]]:
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from _walk(cmd.commands[name], [*path, name])


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _section(path: list[str], cmd: click.Command) -> str:
    ctx = click.Context(cmd, info_name=" ".join(path))
    lines = [f"## {' '.join(path)}", ""]
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    lines += ["```", f"{' '.join(path)} {usage}".rstrip(), "```", ""]
    if cmd.help:
        lines += [inspect.cleandoc(click.unstyle(cmd.help).split("\f")[0]), ""]
    if isinstance(cmd, click.Group):
        subs = ", ".join(f"`{name}`" for name in sorted(cmd.commands))
        lines += [f"Commands: {subs}.", ""]
    rows = []
    for param in cmd.get_params(ctx):
        record = param.get_help_record(ctx)  # what --help shows: names, help and [default]
        if record is not None and "--help" not in record[0]:
            rows.append(f"| `{_cell(record[0])}` | {_cell(record[1])} |")
    if rows:
        lines += ["| option | meaning |", "|---|---|", *rows, ""]
    return "\n".join(lines)


def _exit_codes() -> str:
    """The exit status of each error (``pglogic.errors``), by code."""
    import pglogic.errors as errors

    by_code: dict[int, list[str]] = {}
    for name, cls in sorted(inspect.getmembers(errors, inspect.isclass)):
        if issubclass(cls, errors.PglogicError) and cls is not errors.PglogicError:
            by_code.setdefault(cls.exit_code, []).append(name)
    rows = [
        "| 0 | success |",
        "| 1 | aborted at a confirmation prompt, or an unexpected error (a traceback) |",
        *(f"| {code} | {', '.join(names)} |" for code, names in sorted(by_code.items())),
        "| 130 | interrupted (Ctrl-C) |",
    ]
    return "\n".join(
        ["## Exit status", "", "Errors print one sentence (`Error: ...`) on stderr and exit with the"
         " code of their kind (`pglogic.errors`); click's own usage errors exit 2.", "",
         "| code | meaning |", "|---|---|", *rows, ""]
    )  # fmt: skip


def reference() -> str:
    """The whole reference as Markdown, one section per command, in the order of the tree.

    Example:
        >>> reference().startswith("# CLI reference")
        True
    """
    sections = [_section(p, c) for p, c in _walk(cli, ["pglogic"])]
    return _HEADER + "\n" + _exit_codes() + "\n" + "\n".join(sections)


if __name__ == "__main__":
    click.echo(reference(), nl=False)
