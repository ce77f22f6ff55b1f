"""The SQL of pglogic's revisions as deltas: each revision freezes only the statements it changes.

``sql/<file>`` (``search.sql``, ``operators.sql``, ``reader.sql``) is what the head installs. A
revision NNNN that changes one freezes ``versions/sql/NNNN_<file>``: the statements of
``sql/<file>`` that are new or different from what the revisions before it installed, in the
file's order, with the file's ``DO`` blocks around them (they set the ``search_path`` the
functions are created with). Its downgrade applies the previous text of exactly those
statements (:func:`restore`), found in the older revisions' deltas. The first revision to
install a file freezes all of it.

A statement is keyed by what it defines: ``function pglogic.NAME`` (pglogic has no overloads),
``comment pglogic.NAME``, the ``DO`` blocks by position, other statements by their text. Leading
``--`` comments are carried along but never make a statement different.

Used by ``migrations/env.py`` (``op.run_sql_file``, ``op.restore_sql_file``), by the tests (the
chain of deltas reproduces ``sql/``) and as a tool for a new revision::

    python migrations/sqlfiles.py NNNN search.sql   # writes versions/sql/NNNN_search.sql

Imports nothing from pglogic (the migrations never do).
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
FROZEN = HERE / "versions" / "sql"
#: sql/ beside migrations/ in the source tree, and inside the package in a wheel.
HEAD_SQL = HERE.parent / "sql"

_FUNCTION = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([\w.\"]+)", re.I)
_COMMENT = re.compile(r"COMMENT\s+ON\s+(FUNCTION|TABLE)\s+([\w.\"]+)", re.I)
_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([\w.\"]+)", re.I)


class Statement(NamedTuple):
    """One statement of a SQL file: its key, its text (without leading comments) and the
    comment lines before it."""

    key: str
    text: str
    lead: str = ""

    def render(self) -> str:
        return f"{self.lead}{self.text}"


def _chunks(script: str) -> list[tuple[str, str]]:
    """Split ``script`` into (leading comments, statement) at each ``;`` outside quotes, dollar
    quotes and comments."""
    out: list[tuple[str, str]] = []
    start, i, n = 0, 0, len(script)
    while i < n:
        c = script[i]
        if script.startswith("--", i):
            end = script.find("\n", i)
            i = n if end < 0 else end
        elif script.startswith("/*", i):
            i = script.index("*/", i + 2) + 2
        elif c == "'":
            j = i + 1
            while True:
                if script.startswith("''", j):
                    j += 2
                elif script[j] == "'":
                    break
                else:
                    j += 1
            i = j + 1
        elif c == '"':
            i = script.index('"', i + 1) + 1
        elif c == "$" and (m := re.match(r"\$([A-Za-z_]\w*)?\$", script[i:])):
            tag = m.group(0)
            i = script.index(tag, i + len(tag)) + len(tag)
        elif c == ";":
            out.append(_split_lead(script[start : i + 1]))
            start = i + 1
            i += 1
        else:
            i += 1
    if script[start:].strip() and any(
        line.strip() and not line.strip().startswith("--") for line in script[start:].splitlines()
    ):
        raise ValueError(f"SQL after the last ';': {script[start:][:80]!r}")
    return out


def _split_lead(chunk: str) -> tuple[str, str]:
    lines = chunk.lstrip("\n").splitlines(keepends=True)
    k = 0
    while k < len(lines) and (not lines[k].strip() or lines[k].lstrip().startswith("--")):
        k += 1
    return "".join(lines[:k]), "".join(lines[k:]).strip()


def parse(script: str) -> list[Statement]:
    """The statements of a SQL file, keyed.

    Example:
        >>> [s.key for s in parse("DO $d$ BEGIN END $d$;\\n-- f\\nCREATE FUNCTION pglogic.f() "
        ...                       "RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;")]
        ['do 0', 'function pglogic.f']
    """
    out: list[Statement] = []
    dos = 0
    for lead, text in _chunks(script):
        if m := _FUNCTION.match(text):
            key = f"function {m.group(1)}"
        elif m := _COMMENT.match(text):
            key = f"comment {m.group(1).lower()} {m.group(2)}"
        elif m := _TABLE.match(text):
            key = f"table {m.group(1)}"
        elif re.match(r"DO\b", text, re.I):
            key, dos = f"do {dos}", dos + 1
        else:
            key = "statement " + " ".join(text.split())
        out.append(Statement(key, text, lead))
    keys = [s.key for s in out]
    if len(keys) != len(set(keys)):
        raise ValueError(
            f"a statement defined twice: {sorted(k for k in keys if keys.count(k) > 1)}"
        )
    return out


def _revision_files(name: str, upto: str | None = None) -> list[Path]:
    """The frozen files of ``name`` (e.g. ``search.sql``), oldest first, up to revision ``upto``
    (inclusive)."""
    files = sorted(FROZEN.glob(f"[0-9][0-9][0-9][0-9]_{name}"))
    return [f for f in files if upto is None or f.name[:4] <= upto]


def resolved(name: str, upto: str | None = None) -> dict[str, Statement]:
    """What the chain of ``name``'s deltas up to revision ``upto`` installed: each key's latest
    statement, in the order of its first appearance.

    Example:
        >>> "function pglogic.search" in resolved("search.sql")
        True
    """
    out: dict[str, Statement] = {}
    for path in _revision_files(name, upto):
        for s in _frozen(path):
            out[s.key] = s
    return out


@functools.cache
def _frozen(path: Path) -> tuple[Statement, ...]:
    """A frozen file's statements (parsed once: frozen files never change)."""
    return tuple(parse(path.read_text(encoding="utf-8")))


def delta(name: str, revision: str, head: str | None = None) -> str:
    """The delta of revision ``revision`` for ``sql/<name>`` (or the text ``head``): the changed
    statements, between the file's ``DO`` blocks; empty when nothing changed.

    Example:
        >>> delta("search.sql", "9999") == ""  # sql/search.sql is what the chain installs
        True
    """
    if head is None:
        head = (HEAD_SQL / name).read_text(encoding="utf-8")
    before = resolved(name, f"{int(revision) - 1:04d}")
    now = parse(head)
    gone = [k for k in before if k not in {s.key for s in now} and not k.startswith("do ")]
    if gone:
        raise ValueError(
            f"{name} no longer has {gone}: drop them in the revision itself; a delta only "
            "adds or replaces statements"
        )
    changed = [s for s in now if s.key not in before or before[s.key].text != s.text]
    if not before:
        changed = now
    if not any(not s.key.startswith("do ") for s in changed):
        return ""
    keep = _with_comments({s.key for s in changed if not s.key.startswith("do ")}, now)
    if any(s.key.startswith("do ") for s in changed):  # all of them: they are keyed by place
        keep |= {s.key for s in now if s.key.startswith("do ")}
    header = (
        f"-- Revision {revision}: the statements of sql/{name} that are new or changed since the "
        "revision before, written\n-- by migrations/sqlfiles.py; frozen: never edit it. It runs "
        "between the file's DO blocks (applied).\n\n"
    )
    return header + "\n\n".join(s.render() for s in now if s.key in keep) + "\n"


def applied(name: str, revision: str) -> str:
    """What revision ``revision`` runs for its frozen ``name``: the delta between the ``DO``
    blocks of the file as of that revision (they set the ``search_path`` the functions are
    created with, and the functions' own); the first revision's full file as it is.

    Example:
        >>> applied("search.sql", "0019").count("CREATE OR REPLACE FUNCTION")
        1
    """
    text = (FROZEN / f"{revision}_{name}").read_text(encoding="utf-8")
    if not _revision_files(name, f"{int(revision) - 1:04d}"):
        return text  # the first revision of the file: all of it
    own = _frozen(FROZEN / f"{revision}_{name}")
    dos = [s for k, s in resolved(name, revision).items() if k.startswith("do ")]
    body = [s for s in own if not s.key.startswith("do ")]
    return "\n\n".join(s.render() for s in [*dos[:1], *body, *dos[1:]]) + "\n"


def restore(name: str, revision: str) -> str:
    """The downgrade of revision ``revision``'s delta of ``name``: the text the revisions before
    it installed for each statement it changed (statements it added have none: the revision
    drops them), between the previous ``DO`` blocks.

    Example:
        >>> "CREATE OR REPLACE FUNCTION pglogic._default(" in restore("search.sql", "0020")
        False
        >>> "CREATE OR REPLACE FUNCTION pglogic._plan" in restore("search.sql", "0020")
        True
    """
    path = FROZEN / f"{revision}_{name}"
    before = resolved(name, f"{int(revision) - 1:04d}")
    keys = _with_comments({s.key for s in _frozen(path)}, before.values())
    body = [s for k, s in before.items() if k in keys and not k.startswith("do ")]
    if not body:
        return ""
    dos = [s for k, s in before.items() if k.startswith("do ")]
    ordered = [*dos[:1], *body, *dos[1:]]
    return "\n\n".join(s.render() for s in ordered) + "\n"


def _with_comments(keys: set[str], statements: Iterable[Statement]) -> set[str]:
    """``keys`` and the comment of each function among them: a function replaced after a
    ``DROP`` (a changed signature) has lost its comment, so the comment goes with it."""
    functions = {k.removeprefix("function ") for k in keys if k.startswith("function ")}
    return keys | {
        s.key
        for s in statements
        if s.key.startswith("comment function ")
        and s.key.removeprefix("comment function ") in functions
    }


def _write(revision: str, name: str) -> None:
    text = delta(name, revision)
    if not text:
        raise SystemExit(f"sql/{name} has no change since the revisions before {revision}")
    out = FROZEN / f"{revision}_{name}"
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out.relative_to(HERE.parent)}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or not re.fullmatch(r"\d{4}", sys.argv[1]):
        raise SystemExit("usage: python migrations/sqlfiles.py NNNN search.sql")
    _write(sys.argv[1], sys.argv[2])
