"""The engine's defaults exist once: :mod:`pglogic.engine.defaults`, and the table
``pglogic.defaults`` that the migrations fill and ``pglogic.search`` reads.

A database upgraded to the head holds exactly :data:`pglogic.engine.defaults.SQL`; the Python
options take their defaults from the same module; and the SQL function follows the table (a
changed row changes its result), so no default is written inside a function.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from pglogic.engine import defaults
from pglogic.engine.options import SearchOptions
from pglogic.store import corpus as corpora
from pglogic.store.db import connect

ROOT = Path(__file__).resolve().parents[1]


def test_the_python_options_default_to_the_module() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(SearchOptions)}
    options = {name: value for name, value in defaults.SQL.items() if name in fields}
    assert options == {name: fields[name] for name in options}
    planner = set(defaults.SQL) - set(fields)
    assert planner == {"depth_floor", "depth_per_k", "guide_terms", "guide_only_factor",
                       "exact_switch"}  # fmt: skip


def test_no_function_writes_a_default_as_a_literal() -> None:
    """The option defaults of the SQL function come from pglogic.defaults only."""
    text = (ROOT / "sql" / "search.sql").read_text(encoding="utf-8")
    options = re.findall(r"_(?:int|bool)_option\(opts, '(\w+)', ([^)]*)\)", text)
    assert options and all(dflt == "NULL" for _, dflt in options), options
    assert "#>> '{}', 'blend-not-or')" not in text and "RETURN 'clamp'" not in text
    # the options pglogic._plan takes from the table are its option rows, all of them
    names = re.search(r"_with_defaults\(opts, ARRAY\[(.*?)\]\)", text, re.S)
    assert names is not None
    options = {f.name for f in dataclasses.fields(SearchOptions)}
    assert set(re.findall(r"'(\w+)'", names.group(1))) == set(defaults.SQL) & options


@pytest.mark.db
def test_a_database_at_the_head_holds_the_defaults(dsn: str) -> None:
    with connect(dsn) as conn:
        rows = dict(conn.execute("SELECT name, value FROM pglogic.defaults").fetchall())
    assert rows == defaults.SQL


@pytest.mark.db
def test_the_sql_function_follows_the_table(dsn: str) -> None:
    with connect(dsn, autocommit=True) as c:
        corpus = corpora.create_corpus(c, "defaults_demo", model="m", dim=3, lexical=None)
        c.execute(
            sql.SQL(
                "INSERT INTO {} (external_id, title, text, text_hash, row_hash, embedding)"
                " SELECT i::text, 't', 't', '\\x00', '\\x00', ARRAY[1, i, 0]::vector"
                " FROM generate_series(1, 20) AS i"
            ).format(corpus.table)
        )
    query = Jsonb({"tree": {"term": "x", "vector": [1, 0, 0]}})
    with connect(dsn) as conn:
        count = "SELECT count(*) FROM pglogic.search('defaults_demo', %s)"
        assert conn.execute(count, (query,)).fetchone() == (defaults.K,)
        conn.execute("UPDATE pglogic.defaults SET value = '3' WHERE name = 'k'")
        assert conn.execute(count, (query,)).fetchone() == (3,)
        conn.execute("UPDATE pglogic.defaults SET value = '\"godel\"' WHERE name = 'operators'")
        plan = conn.execute(
            "SELECT pglogic.search_plan('defaults_demo', %s) ->> 'operators'", (query,)
        ).fetchone()
        assert plan == ("and=min,or=max,not=complement",)
        conn.execute("DELETE FROM pglogic.defaults WHERE name IN ('truth', 'k')")
        with pytest.raises(Exception, match=r"pglogic\.defaults has no row 'k', 'truth'"):
            conn.execute(count, (query,))  # (never null: a missing k returned every row)
        conn.rollback()
        conn.execute("DELETE FROM pglogic.defaults WHERE name = 'not_context'")
        with pytest.raises(Exception, match=r"pglogic\.defaults has no row 'not_context'"):
            conn.execute(count, (query,))
        conn.rollback()


#: The most files a change of one engine default touches, besides the results measured with it.
MAX_FILES_FOR_A_DEFAULT = 5


@pytest.mark.db
@pytest.mark.slow
def test_changing_a_default_is_one_value_and_a_revision(tmp_path: Path, empty_dsn: str) -> None:
    """In a clone of the project: one value in pglogic/engine/defaults.py, the revision that
    ``migrations/defaults.py`` writes, the regenerated install script, CLI reference and
    OpenAPI schema; no function is copied, and a database upgraded by the clone's migrations
    searches with it."""
    import os
    import subprocess
    import sys

    from pglogic.store import migrate

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    module = clone / "pglogic" / "engine" / "defaults.py"
    text = module.read_text(encoding="utf-8")
    old = f"NOT_MENTION: Final = {defaults.NOT_MENTION}\n"
    assert old in text
    module.write_text(text.replace(old, "NOT_MENTION: Final = 0.55\n"), encoding="utf-8")
    new_revision = f"{int(migrate.head()) + 1:04d}"
    env = {**os.environ, "PYTHONPATH": str(clone)}

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, *args], cwd=clone, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run("migrations/defaults.py", new_revision)
    (clone / "sql" / "install.sql").write_text(
        run("-c", "from pglogic.cli import main; main()", "db", "sql"), encoding="utf-8"
    )
    (clone / "docs" / "cli.md").write_text(run("-m", "pglogic.cli.reference"), encoding="utf-8")
    openapi = "import json; from pglogic.integrations.http import create_app; "
    openapi += "print(json.dumps(create_app().openapi(), indent=2))"
    (clone / "docs" / "openapi.json").write_text(run("-c", openapi), encoding="utf-8")
    changed = subprocess.run(
        ["git", "-C", str(clone), "status", "--porcelain"],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    files = sorted(line[3:] for line in changed)
    assert files == sorted(
        [
            "docs/cli.md",
            "docs/openapi.json",
            "pglogic/engine/defaults.py",
            "sql/install.sql",
            f"migrations/versions/{new_revision}_defaults.py",
        ]
    )
    assert len(files) <= MAX_FILES_FOR_A_DEFAULT
    assert "0.55" in (clone / "docs" / "cli.md").read_text(encoding="utf-8")

    # the clone's migrations: the row changes, and the SQL function reads it
    run("-c", f"from pglogic.store import migrate; migrate.upgrade({empty_dsn!r})")
    with connect(empty_dsn) as conn:
        row = conn.execute("SELECT value FROM pglogic.defaults WHERE name = 'not_mention'")
        assert row.fetchone() == (0.55,)
        assert conn.execute("SELECT pglogic._default('not_mention')").fetchone() == (0.55,)
    run("-c", f"from pglogic.store import migrate; migrate.downgrade({empty_dsn!r}, '-1')")
    with connect(empty_dsn) as conn:
        row = conn.execute("SELECT value FROM pglogic.defaults WHERE name = 'not_mention'")
        assert row.fetchone() == (defaults.NOT_MENTION,)
