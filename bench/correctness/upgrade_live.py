"""Upgrade in place under load: 8 client processes search through ``pglogic.search()`` while
``pglogic.store.migrate.upgrade`` moves the schema from the revision before head to head.

    .venv/bin/python bench/correctness/upgrade_live.py              # ~5 min on 2 cores: 20,000 documents
    .venv/bin/python bench/correctness/upgrade_live.py --quick      # ~1 min smoke run (3,000 documents)

A database ``bench_upgrade_live`` is migrated to ``head-1`` (the revision before this pglogic's
head, whatever it is), then gets data in every kind of pglogic table (``fill`` of
``tests/every_table.py``): corpus ``plain``, ``--rows`` synthetic clustered 384-d vectors
(``synthetic.make_dataset``, manifold clusters) with a lexical index and its HNSW index; corpus
``passages``, ``--rows`` / 2 documents of 1-3 passages each (same generator, another seed), its
passage layout, lexical index and HNSW indexes on the documents and the passages; term cache rows
(each AND's phrase, and the terms of the queries sent without vectors) and two stored calibrations
(one for ``plain``, one for the model). The fixed query set (``query_set`` of the same module;
per corpus: 1 term; AND / OR / NOT of 3 and of 8 terms, the last half negated; k = 10 and 100; a
lexical term under AND and under NOT, cached terms, ``"truth": "calibrated"``, a metadata filter,
``"exact": true``, k = 10) runs through the SQL function, as the clients of a rolling deploy do
(the Python API refuses a schema at a revision other than its own); its rankings are recorded.

Each round then starts ``--clients`` processes (one connection each) that search the query set
without pause, in turn, and checks every result against the recorded ranking; after ``--settle``
seconds ``migrate.upgrade(dsn)`` runs in the main process, ``--settle`` seconds more, stop. A
thread reads ``pg_locks`` (``granted = false``) joined with ``pg_stat_activity`` every 10 ms from
its own connection: the longest lock wait of any backend of the database (the server's
``clock_timestamp() - waitstart``), which lock, and the statement holding it. Per round: the
upgrade's duration, the searches' p50 / p99 / max latency before, during (overlapping the
upgrade) and after it, failed searches (count, first errors) and searches that ranked
differently; after it, the query set again on a new connection: same ids, scores equal to 1e-6.
Rounds after the first downgrade the database to their start first (no load then) and check that
the start's rankings are back. ``--starts`` lists each round's start (default three rounds from
``head-1`` and one from ``head-2``: a longer upgrade that replaces every search function while
the clients call them). Queries whose defaults a revision on the way changes
(``CHANGED_DEFAULTS`` of the test module) are left out of the comparisons.

Goals: 0 failed searches, 0 lock waits over 1 s, identical rankings.
Writes ``bench/correctness/results/upgrade_live.{json,md}`` (``--quick``: ``upgrade_live_quick.*``, ignored
by git).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

# The repository root: bench.lib, and the procedure, which lives in the test modules (tests never
# import bench/; the bench runs their helpers).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.lib.benchlib import (
    DEFAULT_HOME,
    drop_database,
    machine,
    machine_md,
    md_table,
    server_dsn,
    wait_idle,
    write_results,
)
from bench.lib.synthetic import make_dataset, make_queries
from pglogic.store import migrate
from tests.every_table import (
    Data,
    differences,
    fill,
    max_score_change,
    query_set,
    sql_rankings,
)
from tests.test_upgrade_live import SCORE_TOLERANCE, changed_defaults, upgrade_under_load

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "upgrade_live"
DB_NAME = "bench_upgrade_live"


def resolve(revision: str) -> str:
    """A revision given as ``head`` or ``head-N`` as the revision it is now."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(migrate.script_location()))
    script = ScriptDirectory.from_config(cfg)
    match = re.fullmatch(r"head(?:-(\d+))?", revision)
    if match is None:
        return revision
    rev = script.get_current_head()
    for _ in range(int(match.group(1) or 0)):
        down = script.get_revision(rev).down_revision
        assert isinstance(down, str), f"no single revision below {rev}"
        rev = down
    assert rev is not None
    return rev


def make_data(rows: int, seed: int) -> Data:
    """The benchmark's vectors: manifold clusters for both corpora (``synthetic.make_dataset``),
    query terms near centres of one topic (``synthetic.make_queries``)."""
    plain = make_dataset(rows, seed, kind="manifold")
    counts = [1 + i % 3 for i in range(rows // 2)]
    pas = make_dataset(sum(counts), seed + 1, kind="manifold")
    bounds = np.cumsum([0, *counts])
    passages = [pas.vectors[bounds[i] : bounds[i + 1]] for i in range(len(counts))]
    sets = {"plain": plain, "passages": pas}

    def term_vectors(corpus: str, group: str, n: int) -> list[np.ndarray]:
        terms = make_queries(sets[corpus], 1, n, seed + zlib.crc32(group.encode()))[0]
        return [terms[f"t{i + 1}"] for i in range(n)]

    return Data(plain.vectors, plain.labels, passages, pas.labels[bounds[:-1]], term_vectors)


def create_database(base: str, start: str) -> str:
    with psycopg.connect(base, autocommit=True) as conn:
        name = sql.Identifier(DB_NAME)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    dsn = make_conninfo(base, dbname=DB_NAME)
    migrate.upgrade(dsn, start)
    return dsn


def run(args: argparse.Namespace) -> dict[str, Any]:
    starts = [resolve(s) for s in args.starts.split(",")]
    head = resolve("head")
    base = server_dsn(args.home, args.dsn)
    print(f"== database at {starts[0]} (head {head}), {args.rows:,} documents", flush=True)
    dsn = create_database(base, starts[0])
    res: dict[str, Any] = {"machine": machine(dsn), "args": vars(args), "head": head}
    try:
        data = make_data(args.rows, args.seed)
        queries = query_set(data.term_vectors)
        res["data"] = fill(dsn, data, queries, calibration_source=NAME)
        res["queries"] = [
            {"name": q.name, "query": q.text,
             **({"options": q.json_options()} if q.json_options() else {}),
             **({"terms": "from the term cache"} if q.cached else {})}
            for q in queries
        ]  # fmt: skip
        print(f"   {res['data']}", flush=True)
        first = sql_rankings(dsn, queries)
        res["idle"] = wait_idle(args.idle_wait)
        rounds = []
        for n, start in enumerate(starts):
            if n:
                migrate.downgrade(dsn, start)
            assert migrate.current(dsn) == start
            skip = changed_defaults(start, head)
            before = sql_rankings(dsn, queries)
            lo, hi = sorted((starts[0], start))
            back = differences(first, before, changed_defaults(lo, hi), tolerance=SCORE_TOLERANCE)
            print(f"== round {n + 1}: upgrade {start} -> {head} under load", flush=True)
            r = upgrade_under_load(
                dsn, queries, before, clients=args.clients, processes=True,
                settle=args.settle, skip=skip,
            )  # fmt: skip
            after = sql_rankings(dsn, queries)
            diffs = differences(before, after, skip, tolerance=SCORE_TOLERANCE)
            r |= {
                "round": n + 1,
                "start_rankings_as_first": not back,
                "start_ranking_differences": back,
                "compared_queries": len(queries) - len(skip),
                "left_out_queries": sorted(skip),
                "ranking_differences": diffs,
                "identical_rankings": len(queries) - len(skip) - len(diffs),
                "max_score_change": max_score_change(
                    {k: v for k, v in before.items() if k not in skip},
                    {k: v for k, v in after.items() if k not in skip},
                ),
            }
            rounds.append(r)
            lat = r["latency"]["during"]
            print(f"   upgrade {r['upgrade_s']} s; searches {r['searches']} ({lat['searches']} "
                  f"during: p99 {lat['p99_ms']} ms, max {lat['max_ms']} ms); failed "
                  f"{r['failed']}, wrong {r['wrong']}; longest lock wait "
                  f"{r['locks']['longest_wait_s']} s; rankings identical "
                  f"{r['identical_rankings']}/{r['compared_queries']}", flush=True)  # fmt: skip
        res["rounds"] = rounds
        res["goals"] = goals(rounds)
    finally:
        if not args.keep:
            drop_database(base, DB_NAME)
    return res


def goals(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    failed = sum(r["failed"] for r in rounds)
    wrong = sum(r["wrong"] for r in rounds)
    longest = max(r["locks"]["longest_wait_s"] for r in rounds)
    identical = all(not r["ranking_differences"] for r in rounds)
    return {
        "failed_searches": failed,
        "wrong_rankings_during": wrong,
        "longest_lock_wait_s": longest,
        "identical_rankings_after": identical,
        "met": failed == 0 and wrong == 0 and longest < 1.0 and identical,
    }


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:,.1f}"


ROUND_HEADERS = [
    "round", "upgrade", "upgrade s", "searches", "during: searches", "p50 ms", "p99 ms", "max ms",
    "before p99 / max ms", "after p99 / max ms", "failed", "ranked differently",
    "lock waits seen", "longest wait ms", "rankings after",
]  # fmt: skip


def round_row(r: dict[str, Any]) -> list[Any]:
    lat = r["latency"]
    during = lat["during"]
    return [
        r["round"],
        f"{r['from_revision']} → {r['to_revision']}",
        f"{r['upgrade_s']:.2f}",
        r["searches"],
        during["searches"],
        _ms(during["p50_ms"]),
        _ms(during["p99_ms"]),
        _ms(during["max_ms"]),
        f"{_ms(lat['before']['p99_ms'])} / {_ms(lat['before']['max_ms'])}",
        f"{_ms(lat['after']['p99_ms'])} / {_ms(lat['after']['max_ms'])}",
        r["failed"],
        r["wrong"],
        r["locks"]["waits"],
        f"{1000 * r['locks']['longest_wait_s']:,.1f}",
        f"{r['identical_rankings']}/{r['compared_queries']} identical",
    ]


def wait_row(n: int, w: dict[str, Any]) -> list[Any]:
    held = "; ".join(f"{h['backend']}: `{_one_line(h['query'])}`" for h in w["blocked_by"])
    waiting = f"{w['backend']}: `{_one_line(w['query'])}`"
    return [n, f"{1000 * w['wait_s']:,.1f}", w["lock"], waiting, held or "—"]


def query_row(q: dict[str, Any]) -> list[Any]:
    text = f"`{q['query']}`"
    if "options" in q:
        text += f" `{json.dumps(q['options'])}`"
    if "terms" in q:
        text += " (terms from the term cache)"
    return [q["name"], text]


def markdown(res: dict[str, Any]) -> str:
    a = res["args"]
    g = res["goals"]
    rows = res["data"]["rows"]
    sampled = res["rounds"][0]["locks"]
    lines = [
        "# Upgrade in place under load (`bench/correctness/upgrade_live.py`)",
        "",
        machine_md(res["machine"]),
        f"- Run: corpus `plain` {rows.get('corpus_1', 0):,} documents (384-d manifold clusters), "
        f"corpus `passages` {rows.get('corpus_2', 0):,} documents in "
        f"{rows.get('corpus_2_passages', 0):,} passages; {a['clients']} client processes "
        f"(one connection each) on the same machine as the server, {a['settle']:g} s of "
        f"searches before and after each upgrade; CPU busy before the runs: "
        f"{res['idle']['cpu_busy_before']:.0%}",
        "",
        f"Goals: no failed search (**{g['failed_searches']}** failed), no lock wait over 1 s "
        f"(longest seen: **{1000 * g['longest_lock_wait_s']:,.0f} ms**), the same rankings "
        f"during the upgrade (**{g['wrong_rankings_during']}** searches differed) and after it "
        f"(**{'identical' if g['identical_rankings_after'] else 'changed'}**): "
        f"{'met' if g['met'] else '**not met**'}.",
        "",
        "## Rounds",
        "",
        md_table(ROUND_HEADERS, [round_row(r) for r in res["rounds"]]),
        "",
        "*during*: the searches that overlapped the upgrade (they started before it ended and "
        "ended after it started); *ranked differently*: searches whose ids or scores (to 1e-6) "
        "differed from the query's ranking before the round; *rankings after*: the query set "
        "run again on a new connection after the upgrade (same ids in the same order, scores "
        "equal to 1e-6). Lock waits: `pg_locks` with `granted = false` joined with "
        "`pg_stat_activity`, sampled every 10 ms from a separate connection during the whole "
        f"round (round 1: {sampled['samples']} samples, mean interval "
        f"{sampled['mean_interval_ms']} ms, longest {sampled['max_interval_ms']} ms); a wait's "
        "length is the server's `clock_timestamp() - waitstart`.",
        "",
    ]
    waits = sorted(
        ((r["round"], w) for r in res["rounds"] for w in r["locks"]["longest"]),
        key=lambda x: -x[1]["wait_s"],
    )
    if waits:
        headers = ["round", "waited ms", "lock", "waiting (backend: statement)", "held by"]
        lines += ["## Lock waits seen", "", md_table(headers, [wait_row(*x) for x in waits[:10]])]
        lines.append("")
    errors = [e for r in res["rounds"] for e in r["first_errors"] + r["first_wrong"]]
    if errors:
        lines += ["## First failed or differing searches", ""]
        lines += [f"- `{e}`" for e in errors[:10]]
        lines.append("")
    tables = ", ".join(f"`{k}` {v:,}" for k, v in rows.items())
    steps = ", ".join(f"{k} {v}" for k, v in res["data"]["steps_s"].items())
    lines += [
        "## Data and queries",
        "",
        f"Rows per table of schema `pglogic` before the first upgrade: {tables}. Load and HNSW "
        f"builds (s): {steps}.",
        "",
        f"{len(res['queries'])} queries through `pglogic.search(corpus, query)` (term vectors in "
        "the JSON, each AND's phrase from `pglogic.term_cache`):",
        "",
        md_table(["name", "query"], [query_row(q) for q in res["queries"]]),
    ]
    return "\n".join(lines) + "\n"


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())[:120].replace("`", "'").replace("|", "\\|")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000, help="documents of corpus plain")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds of searches before/after")
    ap.add_argument("--starts", default="head-1,head-1,head-1,head-2",
                    help="each round's start revision (head-N or a revision)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--home", type=Path, default=DEFAULT_HOME, help="embedded server home")
    ap.add_argument("--dsn", default=None, help="an existing server instead of the embedded one")
    ap.add_argument("--idle-wait", type=float, default=120.0)
    ap.add_argument("--keep", action="store_true", help=f"keep the database {DB_NAME}")
    ap.add_argument("--quick", action="store_true", help="3,000 documents, one round, 1 s")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.settle, args.starts, args.idle_wait = 3_000, 1.0, "head-1", 10.0
    res = run(args)
    _, md = write_results(
        f"{NAME}_quick" if args.quick else NAME, res, markdown(res), results_dir=RESULTS_DIR
    )
    print(md.read_text())


if __name__ == "__main__":
    main()
