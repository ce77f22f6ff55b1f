"""Where a results file's numbers come from: the commit and the engine defaults they were measured
with.

Every results file a gate writes (``bench/<purpose>/results/<name>.md``,
``bench/quality/<dataset>/results.md``, ``bench/quality/summary.md``, ...) holds one line right
after its title::

    Measured at commit e20adea with engine defaults 0123456789ab (pglogic/engine/defaults.py).

and its JSON, when the top level is an object, the same under the key ``"provenance"``
(``{"commit": ..., "engine_defaults": ...}``): the commit is ``git rev-parse --short HEAD``, with
``+dirty`` when ``pglogic/`` or ``sql/`` had uncommitted changes; the defaults are
:func:`pglogic.engine.defaults.fingerprint` of the defaults the run used.
``tests/test_docs_truth.py`` reads it back (:func:`read`) and fails when a result the docs cite
was measured under other defaults than today's, unless it lists the result as not depending on
them or as stale.

A run records what it ran with (:func:`current`); ``--render`` of a committed JSON keeps the
JSON's (:func:`of`), so a table rendered again keeps the commit it was measured at. A script that
merges a new run into the JSON of an earlier one drops the earlier provenance first
(:func:`fresh`): the file then names the newest run, so after a change of the defaults rerun every
section of such a file, not one.

Results written before this line existed were backfilled (``backfill`` below): the commit is the
last one that changed the file's numbers (renames followed: the move of bench/ into purpose
folders changed no number; the JSON's numbers decide for the Markdown beside it), the
fingerprint over today's defaults of the values they had at that commit, read from its
``pglogic/engine/defaults.py`` or from the modules that held them before (:data:`LEGACY`), or
``unknown`` when one of them did not exist yet. A fingerprint names values under a set of names:
when ``defaults.py`` starts to cover one more default, ``refresh`` computes the recorded commits'
fingerprints again.

    python bench/lib/provenance.py line                      # the line a run would write now
    python bench/lib/provenance.py show [FILE ...]           # each results file against today
    python bench/lib/provenance.py backfill [--dry-run] [--force] [FILE ...]
    python bench/lib/provenance.py refresh [--dry-run] [FILE ...]  # after defaults.py covers more

Standard library only (and :mod:`pglogic.engine.defaults`, pure): the tests import it.

Example:
    >>> p = Provenance("e20adea", "0123456789ab")
    >>> p.line()
    'Measured at commit e20adea with engine defaults 0123456789ab (pglogic/engine/defaults.py).'
    >>> parse(stamp("# Title\\n\\n| a |\\n", p)) == p
    True
"""

from __future__ import annotations

import argparse
import ast
import collections
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS_MODULE = "pglogic/engine/defaults.py"
#: The commit or the fingerprint when it cannot be told (a default did not exist yet, no git).
UNKNOWN = "unknown"
#: The key of a results JSON that holds its provenance.
KEY = "provenance"
#: The provenance line of a Markdown results file.
LINE = re.compile(
    r"^Measured at commit (?P<commit>[0-9a-f]{7,40}(?:\+dirty)?|unknown) with engine defaults "
    r"(?P<defaults>[0-9a-f]{12}|unknown) \(pglogic/engine/defaults\.py\)\.[ \t]*$",
    re.M,
)
_COMMIT = re.compile(r"[0-9a-f]{7,40}(?:\+dirty)?|unknown")
_DEFAULTS = re.compile(r"[0-9a-f]{12}|unknown")

T = TypeVar("T")


@dataclass(frozen=True)
class Provenance:
    """The commit a result was measured at and the fingerprint of the engine defaults it used.

    Example:
        >>> Provenance("e20adea+dirty", "unknown").as_json()
        {'commit': 'e20adea+dirty', 'engine_defaults': 'unknown'}
    """

    commit: str
    defaults: str

    def line(self) -> str:
        """The line of a Markdown results file.

        Example:
            >>> Provenance("abc1234", "unknown").line()[:34]
            'Measured at commit abc1234 with en'
        """
        return (
            f"Measured at commit {self.commit} with engine defaults {self.defaults} "
            f"({DEFAULTS_MODULE})."
        )

    def as_json(self) -> dict[str, str]:
        """The value of a results JSON's ``"provenance"`` key.

        Example:
            >>> Provenance("abc1234", "0123456789ab").as_json()["engine_defaults"]
            '0123456789ab'
        """
        return {"commit": self.commit, "engine_defaults": self.defaults}


# -- now ---------------------------------------------------------------------------------------


def _git(*args: str, root: Path = ROOT) -> str | None:
    """Standard output of a git command in ``root``, or None when it fails."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def commit(root: Path = ROOT) -> str:
    """``git rev-parse --short HEAD``, with ``+dirty`` when ``pglogic/`` or ``sql/`` has
    uncommitted changes (untracked files included); ``unknown`` outside a git checkout.

    Example:
        >>> bool(_COMMIT.fullmatch(commit()))
        True
    """
    sha = _git("rev-parse", "--short", "HEAD", root=root)
    if not sha:
        return UNKNOWN
    dirty = _git("status", "--porcelain", "--", "pglogic", "sql", root=root)
    return sha.strip() + ("+dirty" if dirty and dirty.strip() else "")


def current(root: Path = ROOT) -> Provenance:
    """What a run measures with now: :func:`commit` and the fingerprint of the defaults this
    process imported (those of the work tree).

    Example:
        >>> current().defaults == __import__("pglogic.engine.defaults").engine.defaults.fingerprint()
        True
    """
    from pglogic.engine.defaults import fingerprint

    return Provenance(commit(root), fingerprint())


# -- reading and writing -------------------------------------------------------------------------


def parse(text: str) -> Provenance | None:
    """The provenance line of a Markdown results file's text, or None.

    Example:
        >>> parse("# T\\n\\nMeasured at commit 1a2b3c4+dirty with engine defaults unknown "
        ...       "(pglogic/engine/defaults.py).\\n")
        Provenance(commit='1a2b3c4+dirty', defaults='unknown')
        >>> parse("# T\\n\\nno line\\n") is None
        True
    """
    m = LINE.search(text)
    return Provenance(m["commit"], m["defaults"]) if m else None


def from_json(value: object) -> Provenance | None:
    """The provenance a results JSON's ``"provenance"`` value states, or None when it is not one.

    Example:
        >>> from_json({"commit": "abc1234", "engine_defaults": "unknown"})
        Provenance(commit='abc1234', defaults='unknown')
        >>> from_json({"commit": "HEAD"}) is None
        True
    """
    if not isinstance(value, Mapping):
        return None
    sha, fp = value.get("commit"), value.get("engine_defaults")
    if not (isinstance(sha, str) and isinstance(fp, str)):
        return None
    if not (_COMMIT.fullmatch(sha) and _DEFAULTS.fullmatch(fp)):
        return None
    return Provenance(sha, fp)


def read(path: Path) -> Provenance | None:
    """The provenance a results file records: a Markdown file's line, a JSON object's key. A JSON
    whose top level is a list has no room for a key: its Markdown sibling's line is its
    provenance.

    Example:
        >>> read(ROOT / "bench/quality/summary.md") is not None  # doctest: +SKIP
        True
    """
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".json":
        return parse(text)
    data = json.loads(text)
    if isinstance(data, dict):
        return from_json(data.get(KEY))
    sibling = path.with_suffix(".md")
    return parse(sibling.read_text(encoding="utf-8")) if sibling.is_file() else None


def without(text: str) -> str:
    """The text of a Markdown results file without its provenance line (whose digits are no
    measurement).

    Example:
        >>> without("# T\\n\\n" + Provenance("abc1234", "unknown").line() + "\\n\\n| 1 |\\n")
        '# T\\n\\n\\n\\n| 1 |\\n'
    """
    return LINE.sub("", text)


def stamp(markdown: str, provenance: Provenance) -> str:
    """The Markdown with its provenance line: in place of an earlier one, else right after the
    title (a first line ``# ...``), a blank line either side; else first.

    Example:
        >>> p = Provenance("abc1234", "unknown")
        >>> stamp("# Scale\\n\\n- CPU: x\\n", p).splitlines()[:4] == ["# Scale", "", p.line(), ""]
        True
        >>> stamp(stamp("# Scale\\n", p), p) == stamp("# Scale\\n", p)
        True
    """
    line = provenance.line()
    if LINE.search(markdown):
        return LINE.sub(lambda _: line, markdown, count=1)
    first, sep, rest = markdown.partition("\n")
    if first.startswith("# "):
        return f"{first}\n\n{line}\n\n{rest.lstrip(chr(10))}" if sep else f"{first}\n\n{line}\n"
    return f"{line}\n\n{markdown}"


def record(data: T, provenance: Provenance) -> T:
    """The results data with its provenance as the first key (an object's only; a list is
    returned as it is).

    Example:
        >>> record({"rows": [1]}, Provenance("abc1234", "unknown"))
        {'provenance': {'commit': 'abc1234', 'engine_defaults': 'unknown'}, 'rows': [1]}
    """
    if not isinstance(data, dict):
        return data
    rest = {k: v for k, v in data.items() if k != KEY}
    return {KEY: provenance.as_json(), **rest}  # type: ignore[return-value]


def of(data: object) -> Provenance:
    """The provenance to write with ``data``: the one it holds (a committed JSON rendered again
    keeps the run it comes from), else :func:`current`.

    Example:
        >>> of({"provenance": {"commit": "abc1234", "engine_defaults": "unknown"}}).commit
        'abc1234'
        >>> of({"rows": []}) == current()
        True
    """
    held = from_json(data.get(KEY)) if isinstance(data, dict) else None
    return held or current()


def fresh(data: T) -> T:
    """An earlier run's data without its provenance, for a script that merges a new run into it
    (the file then records the new run: :func:`of` gives :func:`current`).

    Example:
        >>> fresh({"provenance": {"commit": "abc1234"}, "runs": {}})
        {'runs': {}}
    """
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if k != KEY}  # type: ignore[return-value]
    return data


def combined(provenances: Iterable[Provenance | None]) -> Provenance:
    """The provenance of a file made from other results (``bench/quality/summary.md`` from the
    datasets' ``results.json``): theirs when they agree; else the first measured under other
    defaults than today's (the file is as stale as its stalest part); else the first. A part
    without provenance counts as ``unknown``.

    Example:
        >>> a, b = Provenance("abc1234", current().defaults), Provenance("def5678", "unknown")
        >>> combined([a, a]) == a, combined([a, b, a]) == b, combined([a, None]).defaults
        (True, True, 'unknown')
    """
    parts = [p or Provenance(UNKNOWN, UNKNOWN) for p in provenances]
    if not parts:
        return current()
    if all(p == parts[0] for p in parts):
        return parts[0]
    today = current().defaults
    return next((p for p in parts if p.defaults != today), parts[0])


def _json_styles() -> Iterator[dict[str, Any]]:
    """The ways the bench scripts call json.dumps (indent, ASCII or not, separators)."""
    for indent in (None, 1, 2, 4):
        for ensure_ascii in (True, False):
            seps = [(",", ":"), (", ", ": ")] if indent is None else [(",", ": ")]
            for separators in seps:
                yield {"indent": indent, "ensure_ascii": ensure_ascii, "separators": separators}


def stamp_json(text: str, provenance: Provenance) -> str:
    """A results JSON's text with its provenance as the first key, every other byte as
    json.dumps wrote it (the style is found by writing the data again until it gives the text).
    Raises ValueError for a top level that is not an object or a style it cannot reproduce.

    Example:
        >>> stamp_json('{\\n "rows": [\\n  1\\n ]\\n}\\n', Provenance("abc1234", "unknown"))[:41]
        '{\\n "provenance": {\\n  "commit": "abc1234",'
    """
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("the top level is not an object: the Markdown sibling holds the line")
    body = text.rstrip("\n")
    tail = text[len(body) :]
    for style in _json_styles():
        if json.dumps(data, **style) == body:
            return json.dumps(record(data, provenance), **style) + tail
    raise ValueError("not in a json.dumps style this can write again")


def stamp_file(path: Path, provenance: Provenance) -> bool:
    """Write ``provenance`` into a results file (Markdown: :func:`stamp`; JSON: :func:`stamp_json`);
    False for a JSON whose top level is a list (its Markdown sibling carries the line).

    Example:
        >>> stamp_file(OUT / name / "results.md", current())  # doctest: +SKIP
        True
    """
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            new = stamp_json(text, provenance)
        except ValueError:
            if isinstance(json.loads(text), list):
                return False
            raise
    else:
        new = stamp(text, provenance)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return True


# -- the past ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Legacy:
    """Where a default lived before ``pglogic/engine/defaults.py``: a module-level constant
    (``name``), a field default of a class (``name`` = ``Class.field``), or the first group of
    ``pattern`` in the source of ``function``.

    Example:
        >>> _legacy_value("class O:\\n    k: int = 10\\n", Legacy("options.py", "O.k"))
        10
    """

    path: str
    name: str = ""
    function: str = ""
    pattern: str = ""


#: Where each default was before ``pglogic/engine/defaults.py`` (commit e20adea moved them there,
#: same values), by its key in ``pglogic.engine.defaults._ALL``. A key not listed here is looked
#: up as the field of the same name of ``SearchOptions`` (``k``, ``exact``, ``guide``, ...).
LEGACY: dict[str, Legacy] = {
    "operators": Legacy("pglogic/engine/operators.py", "DEFAULT_FAMILY"),
    "truth": Legacy("pglogic/engine/operators.py", "DEFAULT_TRUTH"),
    "mode": Legacy("pglogic/engine/options.py", "SearchOptions.mode"),
    "lexical": Legacy("pglogic/engine/options.py", "SearchOptions.lexical"),
    "and_text": Legacy("pglogic/engine/conjunction.py", "DEFAULT_AND_TEXT"),
    "passage_score": Legacy("pglogic/engine/options.py", "DEFAULT_PASSAGE_SCORE"),
    "not_context": Legacy("pglogic/engine/negation.py", "DEFAULT_NOT_CONTEXT"),
    "not_mention": Legacy("pglogic/engine/negation.py", "DEFAULT_NOT_MENTION"),
    "not_power": Legacy("pglogic/engine/operators.py", "DEFAULT_NOT_POWER"),
    "depth_floor": Legacy(
        "pglogic/engine/plans.py", function="default_depth", pattern=r"max\((\d+), math\.ceil\("
    ),
    "depth_per_k": Legacy(
        "pglogic/engine/plans.py", function="default_depth", pattern=r"math\.ceil\((\d+) \* k\b"
    ),
    "guide_terms": Legacy(
        "pglogic/engine/plans.py", function="guide_depth", pattern=r"default_depth\(k, (\d+)\)"
    ),
    "guide_only_factor": Legacy(
        "pglogic/engine/plans.py", function="guide_only_depth", pattern=r"(\d+) \* guide_depth\("
    ),
    "exact_switch": Legacy("pglogic/engine/plans.py", "EXACT_SWITCH"),
}


def today() -> dict[str, object]:
    """The engine defaults this process imported: what :func:`pglogic.engine.defaults.fingerprint`
    hashes.

    Example:
        >>> today()["and_text"]
        4
    """
    from pglogic.engine import defaults

    return dict(defaults._ALL)


def _show(rev: str, path: str, root: Path = ROOT) -> str | None:
    return _git("show", f"{rev}:{path}", root=root)


def _legacy_value(source: str, where: Legacy) -> object | None:
    """The value ``where`` names in a module's source, or None when it is not there."""
    tree = ast.parse(source)
    if where.pattern:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == where.function:
                m = re.search(where.pattern, ast.get_source_segment(source, node) or "")
                return int(m.group(1)) if m else None
        return None
    owner, _, field = where.name.rpartition(".")
    body: list[ast.stmt] = tree.body
    if owner:
        cls = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner]
        body = cls[0].body if cls else []
    for node in body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        if isinstance(target, ast.Name) and target.id == field and value is not None:
            try:
                literal: object = ast.literal_eval(value)
                return literal
            except ValueError:
                return None  # not a literal: another constant's name
    return None


def defaults_at(rev: str, root: Path = ROOT) -> dict[str, object]:
    """The engine defaults at a commit, by the keys of today's (:func:`today`): from that
    commit's ``pglogic/engine/defaults.py`` where it holds the key, else from where the value
    was before (:data:`LEGACY`). A default that did not exist then is missing.

    Example:
        >>> defaults_at("e20adea")["not_mention"]
        0.4
        >>> "not_mention" in defaults_at("61be26c")
        False
    """
    held: dict[str, object] = {}
    source = _show(rev, DEFAULTS_MODULE, root)
    if source is not None:
        namespace: dict[str, Any] = {"__name__": "pglogic_defaults_at"}
        exec(compile(source, f"{rev}:{DEFAULTS_MODULE}", "exec"), namespace)
        held = dict(namespace.get("_ALL") or namespace.get("SQL") or {})
    sources: dict[str, str | None] = {}
    out: dict[str, object] = {}
    for key in today():
        if key in held:
            out[key] = held[key]
            continue
        where = LEGACY.get(key, Legacy("pglogic/engine/options.py", f"SearchOptions.{key}"))
        if where.path not in sources:
            sources[where.path] = _show(rev, where.path, root)
        text = sources[where.path]
        value = _legacy_value(text, where) if text is not None else None
        if value is not None:
            out[key] = value
    return out


def fingerprint_of(values: Mapping[str, object]) -> str:
    """Twelve hex digits over a set of defaults, as :func:`pglogic.engine.defaults.fingerprint`
    computes them over its own.

    Example:
        >>> from pglogic.engine import defaults
        >>> fingerprint_of(today()) == defaults.fingerprint()
        True
    """
    text = json.dumps(dict(values), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def fingerprint_at(rev: str, root: Path = ROOT) -> str:
    """The fingerprint the engine defaults had at a commit, over today's keys
    (:func:`defaults_at`, :func:`fingerprint_of`): today's fingerprint when every default had
    today's value; ``unknown`` when one of them did not exist yet.

    Example:
        >>> fingerprint_at("61be26c")  # before not_context and not_mention
        'unknown'
    """
    values = defaults_at(rev, root)
    return fingerprint_of(values) if set(values) == set(today()) else UNKNOWN


def changed_since(rev: str, root: Path = ROOT) -> dict[str, tuple[object, object]]:
    """The defaults whose value at ``rev`` is not today's: name -> (then, now); ``None`` for one
    that did not exist then.

    Example:
        >>> changed_since("c96c062")
        {}
        >>> changed_since("61be26c")["not_mention"]
        (None, 0.4)
    """
    then = defaults_at(rev.removesuffix("+dirty"), root)
    return {k: (then.get(k), v) for k, v in today().items() if then.get(k) != v}


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
#: Not measurements: code spans and link targets (paths, options).
_NOT_TEXT = re.compile(r"`[^`\n]*`|\]\([^)\s]*\)")


def _numbers(path: str, text: str) -> collections.Counter[str]:
    """The numbers a results file holds: a JSON's numeric leaves, a Markdown file's numbers
    outside code spans, link targets and its provenance line."""
    if path.endswith(".json"):
        out: collections.Counter[str] = collections.Counter()

        def walk(node: object) -> None:
            if isinstance(node, dict):
                for k, v in node.items():
                    if k != KEY:
                        walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
            elif isinstance(node, int | float) and not isinstance(node, bool):
                out[repr(node)] += 1

        walk(json.loads(text) if text.strip() else {})
        return out
    return collections.Counter(_NUMBER.findall(_NOT_TEXT.sub(" ", without(text))))


def measured_at(path: Path, root: Path = ROOT) -> str | None:
    """The last commit that changed a results file's numbers (renames followed; a change of
    paths or words only is no new measurement), or None for a file git does not know.

    Example:
        >>> measured_at(ROOT / "bench/perf/results/scale_1m.md")
        'c534e03'
    """
    rel = str(path.resolve().relative_to(root))
    log = _git("log", "--follow", "--name-only", "--format=@%h", "--", rel, root=root) or ""
    history: list[tuple[str, str]] = []  # (commit, the file's path in it), newest first
    for line in log.splitlines():
        if line.startswith("@"):
            history.append((line[1:], rel))
        elif line.strip() and history:
            history[-1] = (history[-1][0], line.strip())
    for (rev, name), older in zip(history, [*history[1:], None], strict=True):
        now = _numbers(name, _show(rev, name, root) or "")
        before = _numbers(older[1], _show(older[0], older[1], root) or "") if older else None
        if now != before:
            return rev
    return None


# -- the results files ---------------------------------------------------------------------------

#: The results files of the gates (studies keep theirs as they were: they are frozen).
RESULTS_GLOBS = (
    "bench/perf/results/*.md",
    "bench/perf/results/*.json",
    "bench/quality/results/*.md",
    "bench/quality/results/*.json",
    "bench/correctness/results/*.md",
    "bench/correctness/results/*.json",
    "bench/quality/**/results.md",
    "bench/quality/**/results.json",
    "bench/quality/summary.md",
    "bench/quality/summary.json",
)


def results_files(root: Path = ROOT) -> list[Path]:
    """Every results file of the gates (not the ``--quick`` ones git ignores).

    Example:
        >>> ROOT / "bench/perf/results/scale_1m.md" in results_files()
        True
    """
    found = {p for pattern in RESULTS_GLOBS for p in root.glob(pattern)}
    return sorted(p for p in found if "_quick" not in p.name and "studies" not in p.parts)


def backfill(
    paths: Sequence[Path], *, dry_run: bool = False, force: bool = False, root: Path = ROOT
) -> list[tuple[Path, Provenance | None, str]]:
    """Stamp results files written before the provenance line existed: the commit that last
    changed their numbers (:func:`measured_at` of the JSON where there is one, for the Markdown
    beside it too: an edit of the Markdown's words is no new run) and the fingerprint of the
    defaults then (:func:`fingerprint_at`). A file that has a provenance is left alone unless
    ``force``.
    Returns (file, provenance written or None, what was done).

    Example:
        >>> backfill([ROOT / "bench/perf/results/scale_1m.md"], dry_run=True)  # doctest: +SKIP
        [(PosixPath('.../scale_1m.md'), Provenance(commit='c534e03', defaults='unknown'), 'stamped')]
    """
    out: list[tuple[Path, Provenance | None, str]] = []
    fingerprints: dict[str, str] = {}
    for path in paths:
        held = read(path)
        if held and not force:
            out.append((path, held, "has one"))
            continue
        data_file = path.with_suffix(".json")  # the run's numbers; the Markdown adds words
        rev = measured_at(data_file if data_file.is_file() else path, root)
        if rev is None:
            out.append((path, None, "not in git: run its script to write it"))
            continue
        if rev not in fingerprints:
            fingerprints[rev] = fingerprint_at(rev, root)
        prov = Provenance(rev, fingerprints[rev])
        if path.suffix == ".json" and not isinstance(json.loads(path.read_text()), dict):
            out.append((path, prov, "a list: the Markdown sibling holds the line"))
            continue
        if not dry_run:
            stamp_file(path, prov)
        out.append((path, prov, "stamped" if not dry_run else "would stamp"))
    return out


def refresh(
    paths: Sequence[Path], *, dry_run: bool = False, root: Path = ROOT
) -> list[tuple[Path, Provenance | None, str]]:
    """Compute each file's fingerprint again from the commit it records, over today's keys: for
    when ``pglogic/engine/defaults.py`` starts to cover a default that keeps the value it always
    had (the fingerprint of every result changes, the values they were measured with do not).
    A ``+dirty`` commit cannot be read back: such a file is left for a rerun.

    Example:
        >>> refresh([ROOT / "bench/quality/summary.md"], dry_run=True)[0][2]  # doctest: +SKIP
        'unchanged'
    """
    out: list[tuple[Path, Provenance | None, str]] = []
    for path in paths:
        held = read(path)
        if held is None or held.commit == UNKNOWN or held.commit.endswith("+dirty"):
            out.append((path, held, "left: no commit to read the defaults of"))
            continue
        prov = Provenance(held.commit, fingerprint_at(held.commit, root))
        if prov == held:
            out.append((path, held, "unchanged"))
        elif path.suffix == ".json" and not isinstance(json.loads(path.read_text()), dict):
            out.append((path, prov, "a list: the Markdown sibling holds the line"))
        else:
            if not dry_run:
                stamp_file(path, prov)
            out.append((path, prov, f"was {held.defaults}"))
    return out


def _rel(path: Path, root: Path = ROOT) -> str:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring).

    Example:
        >>> main(["line"])  # doctest: +SKIP
        Measured at commit e20adea with engine defaults ... (pglogic/engine/defaults.py).
        0
    """
    ap = argparse.ArgumentParser(
        prog="bench/lib/provenance.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("line", help="the provenance line a run would write now")
    show = sub.add_parser("show", help="each results file's provenance against today's defaults")
    show.add_argument("files", nargs="*", type=Path)
    fill = sub.add_parser("backfill", help="stamp results files that have no provenance")
    fill.add_argument("files", nargs="*", type=Path)
    fill.add_argument("--dry-run", action="store_true", help="print, write nothing")
    fill.add_argument("--force", action="store_true", help="also files that have one")
    again = sub.add_parser("refresh", help="fingerprints again from the recorded commits")
    again.add_argument("files", nargs="*", type=Path)
    again.add_argument("--dry-run", action="store_true", help="print, write nothing")
    args = ap.parse_args(argv)
    if args.command == "line":
        print(current().line())
        return 0
    files = [p.resolve() for p in args.files] or results_files()
    if args.command in ("backfill", "refresh"):
        done = (
            backfill(files, dry_run=args.dry_run, force=args.force)
            if args.command == "backfill"
            else refresh(files, dry_run=args.dry_run)
        )
        for path, prov, what in done:
            where = f"{prov.commit} {prov.defaults}" if prov else "-"
            print(f"{_rel(path):60} {where:28} {what}")
        return 0
    today = current().defaults
    for path in files:
        prov = read(path)
        if prov is None:
            print(f"{_rel(path):60} no provenance")
            continue
        state = "current" if prov.defaults == today else "other defaults"
        changed = ""
        if state != "current" and prov.commit != UNKNOWN:
            changed = ", ".join(
                f"{k} {then!r}->{now!r}" for k, (then, now) in changed_since(prov.commit).items()
            )
        print(f"{_rel(path):60} {prov.commit:14} {prov.defaults:13} {state} {changed}".rstrip())
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
