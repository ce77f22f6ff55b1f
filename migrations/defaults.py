"""Write the revision that changes engine defaults: ``python migrations/defaults.py NNNN``.

The engine's defaults are written once, in ``pglogic/engine/defaults.py`` (its ``SQL`` dict:
what the table ``pglogic.defaults`` holds). A database learns a changed value from a revision
that updates its row: this tool compares the module's values with what the chain of revisions
wrote (0020's ``DEFAULTS``, then each later revision's ``CHANGES``) and writes
``versions/NNNN_defaults.py``, whose upgrade sets the new values and whose downgrade sets the
old ones back. No function is copied: ``pglogic.search`` reads the table.

Changing a default is then: the value in ``pglogic/engine/defaults.py``, this revision,
``pglogic db sql > sql/install.sql``, and the results measured with it (their provenance line
names the defaults' fingerprint; ``tests/test_docs_truth.py`` lists what is stale).

Like ``sqlfiles.py`` it imports nothing from pglogic: it reads the module's text.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS = HERE / "versions"
MODULE = HERE.parent / "pglogic" / "engine" / "defaults.py"


def module_values(text: str) -> dict[str, object]:
    """The ``SQL`` dict of ``pglogic/engine/defaults.py``'s text, its names resolved.

    Example:
        >>> module_values('A: Final = 4\\nSQL: Final = {"a": A, "b": 0.5}')
        {'a': 4, 'b': 0.5}
    """
    tree = ast.parse(text)
    constants: dict[str, object] = {}
    found: dict[str, object] | None = None
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None:
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if not isinstance(target, ast.Name):
                continue
            if target.id == "SQL" and isinstance(node.value, ast.Dict):
                found = {}
                for key, value in zip(node.value.keys, node.value.values, strict=True):
                    assert isinstance(key, ast.Constant), "SQL's keys are strings"
                    found[str(key.value)] = (
                        constants[value.id]
                        if isinstance(value, ast.Name)
                        else ast.literal_eval(value)
                    )
            else:
                try:
                    constants[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    if found is None:
        raise SystemExit(f"{MODULE} has no SQL dict")
    return found


def _revisions() -> list[tuple[str, str, Path]]:
    """(revision, down_revision, path) of every revision file, oldest first."""
    out = []
    for path in VERSIONS.glob("[0-9][0-9][0-9][0-9]_*.py"):
        text = path.read_text(encoding="utf-8")
        rev = re.search(r'^revision = "(\w+)"$', text, re.M)
        down = re.search(r'^down_revision = "(\w+)"$', text, re.M)
        if rev and down:
            out.append((rev.group(1), down.group(1), path))
    return sorted(out)


def chain_values() -> dict[str, object]:
    """What the revisions wrote into ``pglogic.defaults``: 0020's ``DEFAULTS``, then each later
    revision's ``CHANGES`` ({name: (old, new)}).

    Example:
        >>> chain_values()["k"]
        10
    """
    values: dict[str, object] = {}
    for _, _, path in _revisions():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.AnnAssign | ast.Assign) or node.value is None:
                continue
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if isinstance(target, ast.Name) and target.id == "DEFAULTS":
                values = dict(ast.literal_eval(node.value))
            elif isinstance(target, ast.Name) and target.id == "CHANGES":
                for name, (_, new) in ast.literal_eval(node.value).items():
                    values[name] = new
    return values


def _literal(value: object) -> str:
    return "'" + json.dumps(value).replace("'", "''") + "'"


def revision_text(revision: str, down: str, changes: dict[str, tuple[object, object]]) -> str:
    """The revision file that moves ``pglogic.defaults`` from the old to the new values.

    Example:
        >>> "UPDATE pglogic.defaults" in revision_text("0021", "0020", {"k": (10, 20)})
        True
    """
    listed = "\n".join(
        f"- ``{n}``: {json.dumps(o)} -> {json.dumps(v)}" for n, (o, v) in changes.items()
    )
    return f'''"""Engine defaults change (``pglogic/engine/defaults.py``): rows of ``pglogic.defaults``.

{listed}

Written by ``python migrations/defaults.py {revision}``. No function changes: ``pglogic.search``
reads the table. Downgrading sets the old values back.

Revision ID: {revision}
Revises: {down}
"""

from __future__ import annotations

import json

from alembic import op

revision = "{revision}"
down_revision = "{down}"
branch_labels = None
depends_on = None

#: Code one revision older works with a database at this revision, and the reverse: the Python
#: engine reads its own defaults, the SQL function the table.
COMPATIBLE_WITH_PREVIOUS = True

#: {{name: (old value, new value)}}
CHANGES: dict[str, tuple[object, object]] = {changes!r}


def _set(index: int) -> str:
    return "\\n".join(
        f"UPDATE pglogic.defaults SET value = '{{_json(v[index])}}'::jsonb WHERE name = '{{n}}';"
        for n, v in CHANGES.items()
    )


def _json(value: object) -> str:
    return json.dumps(value).replace("'", "''")


def upgrade() -> None:
    op.run_sql(_set(1))
    op.run_sql(
        "INSERT INTO pglogic.schema_compat VALUES "
        f"('{{revision}}', '{{down_revision if COMPATIBLE_WITH_PREVIOUS else revision}}');"
    )


def downgrade() -> None:
    op.run_sql(f"DELETE FROM pglogic.schema_compat WHERE revision = '{{revision}}';")
    op.run_sql(_set(0))
'''


def main(argv: list[str]) -> None:
    if len(argv) != 2 or not re.fullmatch(r"\d{4}", argv[1]):
        raise SystemExit("usage: python migrations/defaults.py NNNN")
    revision = argv[1]
    heads = [r for r, _, _ in _revisions()]
    if revision in heads:
        raise SystemExit(f"revision {revision} exists already")
    now = module_values(MODULE.read_text(encoding="utf-8"))
    before = chain_values()
    if set(now) != set(before):
        raise SystemExit(
            f"{MODULE.name} adds or removes defaults ({sorted(set(now) ^ set(before))}): "
            "that needs a revision of its own (an INSERT or DELETE and the SQL that reads it)"
        )
    changes = {n: (before[n], v) for n, v in now.items() if before[n] != v}
    if not changes:
        raise SystemExit("no default changed since the revisions before")
    out = VERSIONS / f"{revision}_defaults.py"
    out.write_text(revision_text(revision, max(heads), changes), encoding="utf-8")
    print(f"wrote {out.relative_to(HERE.parent)}; now: pglogic db sql > sql/install.sql")


if __name__ == "__main__":
    main(sys.argv)
