"""Reliability: bad input, faults, load and access; one row per test, with what was lost.

    python bench/correctness/reliability.py [--quick] [--only bad,faults,load,access] [--home DIR]
                                            [--load-seconds 660]     # ~25 min

Every row says what was tried, how much of it, what was lost (committed data that is gone or
wrong, searches that failed or returned fewer than k rows) and how many unexpected errors came
up (an exception other than pglogic's documented error types, an SQLSTATE other than the SQL
function's documented ones, a traceback on the command line). The answer must be 0 and 0.

* **bad**: generated query strings through the parser (``pglogic.query.parse``) and the
  compiler, generated JSON (hypothesis) through the SQL function ``pglogic.search_plan``,
  random queries through the CLI, hostile text (quotes, ``'); DROP TABLE``, ``%s``, NUL
  bytes, unicode) as terms, corpus names, filter keys and values through the CLI, the Python
  API, the SQL function and the SQLAlchemy helper with a canary table watching, and oversized
  inputs (query length, term count, k, depth, vectors of the wrong size or with NaN);
* **faults**: ``kill -9`` of the embedded Postgres during an ingest (then every committed batch
  checked against the source, and the ingest resumed), ``kill -9`` of the client during an index
  build and during a model switch's index build (the next command repairs), Ctrl-C during a
  search (no backend left running), ``--timeout``, two servers started at once, a stale
  ``postmaster.pid`` after a crash;
* **load**: 8 threads searching through one :class:`pglogic.PgLogic` (its pool) while an ingest,
  an index rebuild and a model switch run one after another: errors, short results, p50/p99
  per phase;
* **access**: ``pglogic_reader`` against every table and function, the server's sockets and
  its data directory's mode.

The bench runs its own embedded server under ``--home`` (default ``/tmp/pglogic-rel``).
Results: ``bench/correctness/results/reliability.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import machine, machine_md, md_table, percentile, write_results
from bench.lib.fuzz import arbitrary
from pglogic import PgLogic
from pglogic.engine.compile import MODES, SearchOptions, compile_query
from pglogic.engine.filters import Comparison, Contains
from pglogic.engine.operators import PRESETS
from pglogic.engine.source import Corpus
from pglogic.errors import PglogicError, QuerySyntaxError
from pglogic.query import parse, quote_term
from pglogic.store import server
from pglogic.store.corpus import create_corpus, get_corpus
from pglogic.store.db import connect
from pglogic.store.search import search
from pglogic.store.term_cache import remember_term_vectors

RESULTS_DIR = Path(__file__).resolve().parent / "results"

ROOT = Path(__file__).resolve().parents[2]
PGLOGIC = str(ROOT / ".venv" / "bin" / "pglogic")
DIM = 384
MODEL = "all-MiniLM-L6-v2"
#: SQLSTATEs the SQL function documents: invalid parameter value, an unknown corpus or
#: calibration (undefined object), a malformed vector or number (invalid text representation),
#: a vector pgvector refuses (data exception), a NUL character (\u0000) that jsonb cannot hold
#: (untranslatable character: PostgreSQL's own input check, before the function runs).
SQL_STATES = {"22023", "42704", "22P02", "22000", "22P05"}
HOSTILE = [
    "it's",
    'say "hi"',
    "'); DROP TABLE public.canary; --",
    '"; DROP TABLE public.canary; --',
    "$$; DELETE FROM public.canary; $$",
    "%s %(k)s {0} %% \\",
    "x\x00y",
    "\u202e\u0000\ufeff emoji \U0001f600 \u00e9",
    "NOT OR AND ( )",
    "a" * 5000,
    "back\\slash \\' \\\"",
    "SELECT pg_sleep(10)",
]

ROWS: list[dict[str, Any]] = []


def row(area: str, test: str, tried: str, amount: int, lost: int, unexpected: int,
        note: str = "") -> None:  # fmt: skip
    """Record one result row and print it."""
    ROWS.append({"area": area, "test": test, "tried": tried, "amount": amount, "lost": lost,
                 "unexpected": unexpected, "note": note})  # fmt: skip
    print(f"[{area}] {test}: {amount} tried, lost {lost}, unexpected {unexpected}  {note}",
          flush=True)  # fmt: skip


def unit(rng: np.random.Generator, n: int = 1) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


class HashEmbedder:
    """Deterministic unit vectors from a text's hash: a stand-in model for SQL-path checks."""

    name, dim = MODEL, DIM

    def embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for t in texts:
            seed = int.from_bytes(
                t.encode("utf-8", "surrogatepass")[:64].ljust(8, b"\0")[:8], "little"
            )
            out.append(unit(np.random.default_rng(seed))[0])
        return np.stack(out) if out else np.zeros((0, DIM), dtype=np.float32)


def cli(
    *args: str, home: Path, timeout: float = 600, **kw: Any
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PGLOGIC_HOME": str(home), "PYTHONWARNINGS": "ignore"}
    env.pop("PGLOGIC_DSN", None)
    return subprocess.run([PGLOGIC, *args], env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)  # fmt: skip


def start_cli(*args: str, home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PGLOGIC_HOME": str(home), "PYTHONWARNINGS": "ignore"}
    env.pop("PGLOGIC_DSN", None)
    return subprocess.Popen([PGLOGIC, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip


def write_jsonl(path: Path, start: int, n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    vecs = unit(rng, n)
    docs = [{"id": f"doc{start + i}", "title": f"Title {start + i}",
             "text": f"document {start + i} about topic {(start + i) % 37}",
             "g": (start + i) % 100, "emb": [round(float(x), 6) for x in vecs[i]]}
            for i in range(n)]  # fmt: skip
    with open(path, "w") as f:
        for d in docs:
            f.write(json.dumps(d) + "\n")
    return docs


# -- bad input ---------------------------------------------------------------------------------

WORDS = ["oil", "gas", "grain", "wheat", "a", "b", "x y", "é", "中文", ""]
TOKENS = ['"', "'", "\\", "AND", "OR", "NOT", "and", "or", "not", "(", ")", " ", "  ", "\t",
          "\n", "&&", "|", "!", "-", "*", "\x00", "\u00a0"]  # fmt: skip


def gen_query(rng: random.Random) -> str:
    """A random query string: half built from well-formed pieces, half token soup."""
    if rng.random() < 0.5:

        def node(depth: int) -> str:
            r = rng.random()
            if depth > 3 or r < 0.4:
                return quote_term(rng.choice(WORDS[:-1]) + rng.choice(["", " prices", "'s"]))
            if r < 0.55:
                return "NOT " + node(depth + 1)
            op = rng.choice([" AND ", " OR ", " and ", " or "])
            return "(" + op.join(node(depth + 1) for _ in range(rng.randint(2, 3))) + ")"

        q = node(0)
        if rng.random() < 0.3:  # then break it somewhere
            i = rng.randrange(len(q) + 1)
            q = q[:i] + rng.choice(TOKENS) + q[i:]
        return q
    parts = [rng.choice(TOKENS + WORDS) for _ in range(rng.randint(0, 30))]
    return "".join(parts)


def check_syntax_error(q: str, err: QuerySyntaxError) -> bool:
    """A syntax error names the position: a column within the query (or just past it); an empty
    (or blank) query has nothing to point at and says so."""
    if str(err) == "Empty query":
        return not q.strip()
    return 1 <= err.column <= len(q) + 1 and "col" in str(err)


def bad_parser(n: int) -> list[str]:
    rng = random.Random(1)
    unexpected, positional_missing = 0, 0
    parsed: list[str] = []
    for _ in range(n):
        q = gen_query(rng)
        try:
            parse(q)
            parsed.append(q)
        except QuerySyntaxError as err:
            if not check_syntax_error(q, err):
                positional_missing += 1
        except PglogicError:
            pass
        except Exception:
            unexpected += 1
    row("bad input", "parser: generated query strings", "pglogic.query.parse", n,
        0, unexpected + positional_missing,
        f"{len(parsed)} parsed, {n - len(parsed)} refused; syntax errors without a position: "
        f"{positional_missing}")  # fmt: skip
    return parsed


def bad_compiler(queries: list[str]) -> None:
    rng = random.Random(2)
    corpus = Corpus(1, "c", "corpus_1", MODEL, DIM, "cosine", "embedding", None, None)
    unexpected = 0
    modes = [*MODES, "bogus"]
    families = [*PRESETS, "and=min", "bogus", "and=max"]
    for q in queries:
        opts = SearchOptions(
            k=rng.choice([0, 1, 10, 1000, 1001, 10**9, -5]),
            depth=rng.choice([None, 0, 5, 2000, 10**7]),
            ef_search=rng.choice([None, 0, 1, 1000, 1001]),
            exact=rng.random() < 0.2,
            mode=rng.choice(modes),
            operators=rng.choice(families),
            truth=rng.choice(["clamp", "affine", "sigmoid:0.2:10", "sigmoid:x:y", "bogus"]),
            filters=rng.choice([(), (Comparison("year", ">=", 1990),),
                                (Comparison("k'ey", "=", "v'al"),), (Contains({"a": [1]}),),
                                (Comparison("x", "<", True),)]),
            timeout=rng.choice([None, 1.0, 0.0, -1.0]),
        )  # fmt: skip
        try:
            compile_query(parse(q), corpus, opts)
        except PglogicError:
            pass
        except Exception:
            unexpected += 1
    row("bad input", "compiler: parsed queries x random options", "compile_query", len(queries),
        0, unexpected, "k, depth, ef_search, mode, operators, truth, filters, timeout")  # fmt: skip


def bad_sql_function(dsn: str, n: int, queries: list[str]) -> None:
    from hypothesis import HealthCheck, given, settings
    from psycopg.types.json import Jsonb

    states: Counter[str] = Counter()
    unexpected = [0]
    ok = [0]
    with connect(dsn, autocommit=True) as conn:

        @settings(max_examples=n, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(arbitrary())
        def run(value: Any) -> None:
            try:
                conn.execute("SELECT pglogic.search_plan('rel', %s)", (Jsonb(value),))
                ok[0] += 1
            except psycopg.Error as exc:
                state = exc.sqlstate or "?"
                states[state] += 1
                if state not in SQL_STATES:
                    unexpected[0] += 1
                    print("  unexpected", state, str(exc)[:200], json.dumps(value)[:200])

        run()
        # and well-formed trees of generated queries, planned and run (random k and filters)
        from pglogic.engine.render import search_json

        rng = random.Random(4)
        emb = HashEmbedder()
        ran = 0
        for q in queries[:n]:
            tree = parse(q)
            from pglogic.query import terms

            vecs = dict(zip(terms(tree), emb.embed(terms(tree)), strict=True))
            opts = SearchOptions(k=rng.choice([1, 10, 100]), exact=rng.random() < 0.1,
                                 filters=rng.choice([(), (Comparison("g", "<", 5),)]))  # fmt: skip
            try:
                conn.execute("SELECT * FROM pglogic.search('rel', %s)",
                             (Jsonb(search_json(tree, opts, vecs)),)).fetchall()  # fmt: skip
                ran += 1
            except psycopg.Error as exc:
                state = exc.sqlstate or "?"
                states[state] += 1
                if state not in SQL_STATES:
                    unexpected[0] += 1
                    print("  unexpected", state, str(exc)[:200], q[:100])
    row("bad input", "SQL function: generated JSON (hypothesis) and generated trees",
        "pglogic.search_plan, pglogic.search", n + min(n, len(queries)), 0, unexpected[0],
        f"{ok[0]} of the hypothesis values planned, {ran} trees searched; SQLSTATEs "
        f"{dict(states)}")  # fmt: skip


def bad_cli(home: Path, n: int) -> None:
    rng = random.Random(3)
    unexpected = 0
    codes: Counter[int] = Counter()
    for _ in range(n):
        q = gen_query(rng).replace("\x00", "")  # (argv cannot hold NUL)
        proc = cli("compile", q, home=home, timeout=60)
        codes[proc.returncode] += 1
        if (
            proc.returncode not in (0, 2)
            or "Traceback" in proc.stderr
            or (proc.returncode == 2 and "Error:" not in proc.stderr)
        ):
            unexpected += 1
    row("bad input", "CLI: random queries", "pglogic compile QUERY", n, 0, unexpected,
        f"exit codes {dict(codes)}")  # fmt: skip


def canary(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    a = conn.execute("SELECT count(*) FROM public.canary").fetchone()
    b = conn.execute("SELECT count(*) FROM pglogic.corpora").fetchone()
    return int(a[0]) if a else -1, int(b[0]) if b else -1


def bad_hostile(dsn: str, home: Path) -> None:
    from psycopg.types.json import Jsonb
    from sqlalchemy import MetaData, Table, create_engine

    from pglogic.engine.render import search_json
    from pglogic.integrations.sqlalchemy import execute as orm_execute
    from pglogic.integrations.sqlalchemy import logical_search, url_from_dsn

    emb = HashEmbedder()
    tried = 0
    unexpected = 0
    with connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.canary (x int)")
        conn.execute("TRUNCATE public.canary")
        conn.execute("INSERT INTO public.canary VALUES (1)")
        before = canary(conn)
        corpus = get_corpus(conn, "rel")
        pl = PgLogic(dsn, pool_size=1)
        engine = create_engine(url_from_dsn(dsn))
        table = Table(corpus.table_name, MetaData(), schema="pglogic", autoload_with=engine)

        def attempt(fn: Callable[[], Any]) -> None:
            nonlocal tried, unexpected
            tried += 1
            try:
                fn()
            except PglogicError:
                pass
            except psycopg.Error as exc:
                refused_by_driver = exc.sqlstate is None and isinstance(exc, psycopg.DataError)
                if (exc.sqlstate or "") not in SQL_STATES and not refused_by_driver:
                    unexpected += 1
                    print("  unexpected", type(exc).__name__, str(exc)[:200])
            except Exception as exc:
                unexpected += 1
                print("  unexpected", type(exc).__name__, str(exc)[:200])

        def one(bad: str) -> None:
            nonlocal tried, unexpected
            q = quote_term(bad) + " AND NOT " + quote_term(bad + "x")
            vecs = dict(zip([bad, bad + "x"], emb.embed([bad, bad + "x"]), strict=True))
            opts = SearchOptions(k=3, filters=(Comparison(bad, "=", bad), Contains({bad: [bad]})))
            attempt(lambda: search(conn, corpus, q, embedder=emb, options=opts))  # Python
            attempt(lambda: pl.search(bad, '"oil"'))  # corpus name
            attempt(lambda: pl.create_corpus(bad))
            attempt(lambda: conn.execute("SELECT * FROM pglogic.search(%s, %s)",
                                         ("rel", Jsonb(search_json(parse(q), opts, vecs)))))  # fmt: skip
            attempt(lambda: conn.execute("SELECT * FROM pglogic.search(%s, %s)",
                                         (bad, Jsonb({"term": bad}))))  # fmt: skip

            def orm() -> None:
                from sqlalchemy.orm import Session

                stmt = logical_search(table, table.c.embedding, q, k=3, vectors=vecs)
                with Session(engine) as s, s.begin():
                    orm_execute(s, stmt.where(table.c.title != bad))

            attempt(orm)
            clean = bad.replace("\x00", "")
            for args in (("compile", q.replace("\x00", ""), "--where", f"{{\"{clean[:50]}\": 1}}"),
                         ("search", clean or "x", '"oil"'), ("corpus", "create", clean or "x", "--dim", "4")):  # fmt: skip
                tried += 1
                proc = cli(*args, home=home, timeout=120)
                if proc.returncode not in (0, 2) or "Traceback" in proc.stderr:
                    unexpected += 1
                    print("  unexpected CLI", args[:2], proc.returncode, proc.stderr[-300:])

        for bad in HOSTILE:
            one(bad)
        after = canary(conn)
        pl.close()
        engine.dispose()
    lost = 0 if after == before else 1
    row("bad input", "hostile terms, corpus names, filter keys and JSON", "CLI, Python API, SQL "
        "function, SQLAlchemy helper", tried, lost, unexpected,
        f"canary and pglogic.corpora rows before/after: {before} / {after}")  # fmt: skip


def bad_oversized(dsn: str) -> None:
    from psycopg.types.json import Jsonb

    emb = HashEmbedder()
    cases: list[tuple[str, Callable[[Any, Corpus], Any]]] = [
        ("1 MB query", lambda c, k: parse('"a" AND ' * 131_072 + '"b"')),
        ("33 terms", lambda c, k: parse(" AND ".join(f'"t{i}"' for i in range(33)))),
        ("nesting 10,000 deep", lambda c, k: parse("(" * 10_000 + '"a"' + ")" * 10_000)),
        ("k = 10^9", lambda c, k: search(c, k, '"a" AND "b"', embedder=emb,
                                         options=SearchOptions(k=10**9))),
        ("depth = 10^7", lambda c, k: search(c, k, '"a" AND "b"', embedder=emb,
                                             options=SearchOptions(depth=10**7))),
        ("a 3-d vector", lambda c, k: c.execute("SELECT * FROM pglogic.search('rel', %s)",
                                                (Jsonb({"term": "a", "vector": [1, 2, 3]}),))),
        ("a NaN vector (SQL)", lambda c, k: c.execute(
            "SELECT * FROM pglogic.search('rel', %s)",
            (Jsonb({"term": "a", "vector": "[" + ",".join(["NaN"] * DIM) + "]"}),))),
        ("a NaN query vector (Python)", lambda c, k: search(
            c, k, '"a"', embedder=_NaNEmbedder())),
        ("a zero query vector (Python)", lambda c, k: search(
            c, k, '"a"', embedder=_ZeroEmbedder())),
    ]  # fmt: skip
    unclear = []
    with connect(dsn, autocommit=True) as conn:
        corpus = get_corpus(conn, "rel")
        for name, fn in cases:
            try:
                fn(conn, corpus)
                unclear.append(f"{name}: accepted")
            except PglogicError:
                pass
            except psycopg.Error as exc:
                if (exc.sqlstate or "") not in SQL_STATES:
                    unclear.append(f"{name}: {exc.sqlstate}")
            except Exception as exc:
                unclear.append(f"{name}: {type(exc).__name__}")
    row("bad input", "oversized and invalid inputs", "parser, search(), SQL function", len(cases),
        0, len(unclear), "; ".join(unclear) or "each one a clear error")  # fmt: skip


class _NaNEmbedder(HashEmbedder):
    def embed(self, texts: list[str]) -> np.ndarray:
        return np.full((len(texts), DIM), np.nan, dtype=np.float32)


class _ZeroEmbedder(HashEmbedder):
    def embed(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), DIM), dtype=np.float32)


# -- faults ------------------------------------------------------------------------------------


def postmaster_pid(home: Path) -> int:
    return int((server.pgdata_dir(home) / "postmaster.pid").read_text().splitlines()[0])


def committed(dsn: str, name: str) -> dict[str, tuple[str, np.ndarray]]:
    with connect(dsn) as conn:
        c = get_corpus(conn, name)
        rows = conn.execute(sql.SQL("SELECT external_id, text, embedding FROM {}").format(c.table))
        return {r[0]: (r[1], r[2].to_numpy()) for r in rows}


def mismatches(rows: dict[str, tuple[str, np.ndarray]], docs: list[dict[str, Any]]) -> int:
    source = {d["id"]: d for d in docs}
    bad = 0
    for ext, (text, vec) in rows.items():
        d = source.get(ext)
        if d is None or d["text"] != text or not np.allclose(vec, d["emb"], atol=1e-6):
            bad += 1
    return bad


def wait_for(pred: Callable[[], bool], timeout: float, step: float = 0.1) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def fault_ingest(home: Path, work: Path) -> None:
    dsn = server.ensure_running(home)
    docs = write_jsonl(work / "fault.jsonl", 0, 20_000, seed=5)
    assert cli("corpus", "create", "fault", "--model", MODEL, home=home).returncode == 0
    proc = start_cli("ingest", "fault", str(work / "fault.jsonl"), "--vector-field", "emb",
                     "--batch-size", "500", home=home)  # fmt: skip

    def count() -> int:
        try:
            with connect(dsn) as conn:
                c = get_corpus(conn, "fault")
                r = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(c.table)).fetchone()
                return int(r[0]) if r else 0
        except PglogicError:
            return 0

    wait_for(lambda: count() >= 1500, 120)
    os.kill(postmaster_pid(home), signal.SIGKILL)
    proc.wait(timeout=120)
    dsn = server.ensure_running(home)  # restart after the crash (stale postmaster.pid)
    rows = committed(dsn, "fault")
    partial = len(rows)
    lost = (partial % 500 != 0) + mismatches(rows, docs)  # whole batches, each row intact
    resumed = cli("ingest", "fault", str(work / "fault.jsonl"), "--vector-field", "emb",
                  "--batch-size", "500", home=home)  # fmt: skip
    rows = committed(dsn, "fault")
    lost += (len(rows) != len(docs)) + mismatches(rows, docs)
    unexpected = int(proc.returncode == 0) + int(resumed.returncode != 0)
    row("faults", "kill -9 of Postgres during an ingest, restart, resume", "pglogic ingest of "
        "20,000 records in batches of 500", len(docs), lost, unexpected,
        f"{partial} rows committed at the kill (whole batches, every row equal to its source); "
        f"resumed to {len(rows)}")  # fmt: skip


def index_state(dsn: str, name: str) -> tuple[int, int]:
    """(invalid indexes, valid HNSW indexes) on the corpus table."""
    with connect(dsn) as conn:
        c = get_corpus(conn, name)
        r = conn.execute(
            "SELECT count(*) FILTER (WHERE NOT i.indisvalid),"
            " count(*) FILTER (WHERE i.indisvalid AND am.amname = 'hnsw')"
            " FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid"
            " JOIN pg_am am ON am.oid = x.relam WHERE i.indrelid = %s::regclass",
            (f"pglogic.{c.table_name}",),
        ).fetchone()
        return (int(r[0]), int(r[1])) if r else (-1, -1)


def building(dsn: str) -> bool:
    with connect(dsn) as conn:
        r = conn.execute("SELECT count(*) FROM pg_stat_progress_create_index"
                         " WHERE phase LIKE 'building%%'").fetchone()  # fmt: skip
        return bool(r and r[0])


def fault_index(home: Path) -> None:
    dsn = server.ensure_running(home)
    proc = start_cli("index", "fault", home=home)
    started = wait_for(lambda: building(dsn), 120, 0.05)
    proc.kill()
    proc.wait()
    time.sleep(2.5)  # the server notices the dead client (client_connection_check_interval)
    left = index_state(dsn, "fault")
    again = cli("index", "fault", home=home)
    final = index_state(dsn, "fault")
    lost = int(final != (0, 1))
    row("faults", "kill -9 of the client during an index build", "pglogic index, killed mid-build,"
        " then run again", 1, lost, int(again.returncode != 0 or not started),
        f"after the kill (invalid, valid hnsw) = {left}; after the next command {final}")  # fmt: skip


def fault_switch(home: Path, work: Path) -> None:
    dsn = server.ensure_running(home)
    write_jsonl(work / "switch.jsonl", 0, 2_000, seed=6)
    cli("corpus", "create", "switchme", "--model", MODEL, home=home)
    cli("ingest", "switchme", str(work / "switch.jsonl"), "--vector-field", "emb", home=home)
    cli("index", "switchme", home=home)
    steps = [cli("embedding", "add", "switchme", "--model", "minilm-int8", home=home),
             cli("embedding", "backfill", "switchme", "--model", "minilm-int8", home=home)]  # fmt: skip
    proc = start_cli("embedding", "index", "switchme", "--model", "minilm-int8", home=home)
    started = wait_for(lambda: building(dsn), 120, 0.05)
    proc.kill()
    proc.wait()
    time.sleep(2.5)
    left = index_state(dsn, "switchme")
    steps.append(cli("embedding", "index", "switchme", "--model", "minilm-int8", home=home))
    steps.append(cli("embedding", "switch", "switchme", "--model", "minilm-int8", home=home))
    with connect(dsn) as conn:
        model = get_corpus(conn, "switchme").model
    final = index_state(dsn, "switchme")
    failed = [p.args[1:4] for p in steps if p.returncode != 0]
    lost = int(model != "minilm-int8") + int(final[0] != 0)
    row("faults", "kill -9 of the client during a model switch", "embedding add, backfill, index "
        "(killed mid-build), index again, switch", len(steps) + 1, lost,
        len(failed) + int(not started),
        f"after the kill (invalid, valid hnsw) = {left}; then {final}, active model {model}"
        + (f"; failed: {failed}" if failed else ""))  # fmt: skip


def backend_count(dsn: str, needle: str) -> int:
    with connect(dsn) as conn:
        r = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                         " AND query LIKE %s AND pid <> pg_backend_pid()",
                         (f"%{needle}%",)).fetchone()  # fmt: skip
        return int(r[0]) if r else 0


def blocked_search(home: Path, dsn: str, extra: list[str]) -> tuple[subprocess.Popen[str], Any]:
    """A CLI search that waits on a lock held by another transaction (so it runs long)."""
    holder = connect(dsn)
    c = get_corpus(holder, "fault")
    holder.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(c.table))
    proc = start_cli("search", "fault", '"q0" AND "q1"', *extra, home=home)
    return proc, holder


def fault_interrupt(home: Path) -> None:
    dsn = server.ensure_running(home)
    with connect(dsn) as conn:
        c = get_corpus(conn, "fault")
        remember_term_vectors(conn, c, dict(zip(["q0", "q1"], unit(np.random.default_rng(9), 2),
                                                strict=True)))  # fmt: skip
        conn.commit()
    proc, holder = blocked_search(home, dsn, [])
    waiting = wait_for(lambda: backend_count(dsn, "ORDER BY score DESC") > 0, 60)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    gone = wait_for(lambda: backend_count(dsn, "ORDER BY score DESC") == 0, 5)
    holder.rollback()
    holder.close()
    row("faults", "Ctrl-C during a search", "SIGINT to pglogic search while its statement waits",
        1, 0, int(not (waiting and gone)) + int(proc.returncode not in (1, 2, 130)),
        f"exit code {proc.returncode}; backend left running: {not gone}")  # fmt: skip
    proc, holder = blocked_search(home, dsn, ["--timeout", "1"])
    _, err = proc.communicate(timeout=60)
    holder.rollback()
    holder.close()
    clear = proc.returncode == 4 and "timeout of 1 s" in err
    row("faults", "statement_timeout", "pglogic search --timeout 1 against a blocked statement",
        1, 0, int(not clear), f"exit code {proc.returncode}: {err.strip()[:120]}")  # fmt: skip


def fault_server(work: Path) -> None:
    home = work / "twice"
    shutil.rmtree(home, ignore_errors=True)
    env = {**os.environ, "PGLOGIC_HOME": str(home)}
    env.pop("PGLOGIC_DSN", None)
    procs = [subprocess.Popen([PGLOGIC, "server", "start"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]  # fmt: skip
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]

    def postmasters() -> int:
        out = subprocess.run(["pgrep", "-f", f"postgres -D {home}/pgdata"], capture_output=True,
                             text=True).stdout  # fmt: skip
        return len(out.split())

    running = server.is_running(home)
    ok_twice = running and postmasters() == 1 and all(c == 0 for c in codes)
    row("faults", "the embedded server started twice at once", "two pglogic server start", 2,
        0, int(not ok_twice), f"exit codes {codes}; postmasters {postmasters()}"
        + ("" if ok_twice else f"; stderr {[o[1][-200:] for o in outs]}"))  # fmt: skip
    os.kill(postmaster_pid(home), signal.SIGKILL)
    time.sleep(1)
    stale = (server.pgdata_dir(home) / "postmaster.pid").exists()
    again = cli("server", "start", home=home)
    ok = again.returncode == 0 and server.is_running(home)
    dsn = server.ensure_running(home)
    with connect(dsn) as conn:
        alive = conn.execute("SELECT 1").fetchone() == (1,)
    row("faults", "start after a crash with a stale pid file", "kill -9 of the postmaster, then "
        "pglogic server start", 1, 0, int(not (ok and alive)),
        f"postmaster.pid left behind: {stale}; exit code {again.returncode}")  # fmt: skip
    server.stop(home)
    shutil.rmtree(home, ignore_errors=True)


# -- load --------------------------------------------------------------------------------------


def load(home: Path, work: Path, seconds: float) -> None:
    dsn = server.ensure_running(home)
    name = "load"
    write_jsonl(work / "load1.jsonl", 0, 8_000, seed=7)
    write_jsonl(work / "load2.jsonl", 8_000, 8_000, seed=8)
    cli("corpus", "drop", name, "--yes", home=home)
    assert cli("corpus", "create", name, "--model", MODEL, home=home).returncode == 0
    assert cli("ingest", name, str(work / "load1.jsonl"), "--vector-field", "emb",
               home=home).returncode == 0  # fmt: skip
    assert cli("index", name, home=home).returncode == 0
    rng = np.random.default_rng(10)
    terms = [f"t{i}" for i in range(40)]
    with connect(dsn) as conn:
        remember_term_vectors(conn, get_corpus(conn, name),
                              dict(zip(terms, unit(rng, len(terms)), strict=True)))  # fmt: skip
        conn.commit()
    shapes = ['"{0}"', '"{0}" AND "{1}"', '"{0}" OR "{1}"', '"{0}" AND NOT "{1}"',
              '("{0}" OR "{1}") AND NOT "{2}"', '"{0}" AND "{1}" AND "{2}"']  # fmt: skip
    phase = ["baseline"]
    lat: dict[str, list[float]] = {}
    errors: Counter[str] = Counter()
    short = Counter[str]()
    stop = threading.Event()
    pl = PgLogic(dsn, pool_size=8)

    def worker(seed: int) -> None:
        r = random.Random(seed)
        while not stop.is_set():
            q = r.choice(shapes).format(*r.sample(terms, 3))
            where = [] if r.random() < 0.7 else [Comparison("g", "<", r.choice([10, 50]))]
            p = phase[0]
            t0 = time.perf_counter()
            try:
                hits = pl.search(name, q, k=10, filters=where, remember_terms=True).hits
                if len(hits) != 10:
                    short[p] += 1
            except Exception as exc:
                errors[f"{p}: {type(exc).__name__}: {str(exc)[:80]}"] += 1
            lat.setdefault(p, []).append(time.perf_counter() - t0)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    started = time.monotonic()
    for t in threads:
        t.start()
    tail = max(30.0, seconds / 6)

    def run_phase(label: str, fn: Callable[[], Any], at_least: float = 0.0) -> float:
        phase[0] = label
        t0 = time.monotonic()
        fn()
        rest = at_least - (time.monotonic() - t0)
        if rest > 0:
            time.sleep(rest)
        return time.monotonic() - t0

    steps: dict[str, Any] = {}
    durations = {
        "baseline": run_phase("baseline", lambda: None, tail),
        "ingest": run_phase("ingest", lambda: steps.setdefault("ingest", cli(
            "ingest", name, str(work / "load2.jsonl"), "--vector-field", "emb", home=home))),
        "index rebuild": run_phase("index rebuild", lambda: steps.setdefault(
            "index", cli("index", name, home=home))),
        "model switch": run_phase("model switch", lambda: steps.setdefault("switch", [
            cli("embedding", "add", name, "--model", "minilm-int8", home=home),
            cli("embedding", "backfill", name, "--model", "minilm-int8", home=home),
            cli("embedding", "index", name, "--model", "minilm-int8", home=home),
            cli("embedding", "switch", name, "--model", "minilm-int8", home=home)])),
    }  # fmt: skip
    remaining = seconds - (time.monotonic() - started)
    durations["after"] = run_phase("after", lambda: None, max(tail, remaining))
    stop.set()
    for t in threads:
        t.join()
    pl.close()
    total = sum(len(v) for v in lat.values())
    failed_steps = [k for k, v in steps.items()
                    if any(p.returncode != 0 for p in (v if isinstance(v, list) else [v]))]  # fmt: skip
    per = "; ".join(
        f"{p} ({durations[p]:.0f} s): {len(lat.get(p, []))} searches, p50 "
        f"{1000 * percentile(lat.get(p, [0]), 50):.1f} ms, p99 {1000 * percentile(lat.get(p, [0]), 99):.1f} ms"
        for p in durations
    )  # fmt: skip
    row("load", "8 threads searching through ingest, index rebuild and model switch",
        "PgLogic(pool_size=8).search, k = 10, 6 shapes, 30% filtered", total,
        sum(short.values()), sum(errors.values()) + len(failed_steps),
        f"{time.monotonic() - started:.0f} s in all; {per}"
        + (f"; errors {dict(errors)}" if errors else "")
        + (f"; failed steps {failed_steps}" if failed_steps else ""))  # fmt: skip


# -- access ------------------------------------------------------------------------------------


def refused_to_reader(admin: psycopg.Connection[Any], stmt: sql.Composable) -> bool:
    """Run ``stmt`` as pglogic_reader and roll it back; True when privileges refused it. Any
    other outcome (success, or a later error such as a NOT NULL violation, which means the
    privilege check passed) counts as a write the reader could make."""
    try:
        with admin.transaction():
            admin.execute("SET LOCAL ROLE pglogic_reader")
            try:
                admin.execute(stmt)
            except psycopg.errors.InsufficientPrivilege:
                raise
            except psycopg.Error:
                print("  reader passed the privilege check:", stmt.as_string(admin)[:120])
                return False
            raise RuntimeError("rollback")  # it ran: undo it
    except psycopg.errors.InsufficientPrivilege:
        return True
    except RuntimeError:
        print("  reader wrote:", stmt.as_string(admin)[:120])
        return False


def access(home: Path) -> None:
    dsn = server.ensure_running(home)
    tried = 0
    wrote = 0
    with connect(dsn, autocommit=True) as admin:
        tables = [r[0] for r in admin.execute(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables"
            " WHERE schemaname = 'pglogic' OR tablename LIKE 'pglogic%'")]  # fmt: skip
        definers = admin.execute(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'pglogic' AND p.prosecdef").fetchone()  # fmt: skip
        functions = admin.execute(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'pglogic'").fetchone()  # fmt: skip
        for table in tables:
            cols = admin.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
                " AND NOT attisdropped AND attidentity = '' AND attgenerated = '' LIMIT 1", (table,)).fetchone()  # fmt: skip
            col = sql.Identifier(cols[0]) if cols else sql.SQL("ctid")
            t = sql.SQL(table)  # (a name from the catalog, quoted by format('%I'))
            for stmt in (sql.SQL("INSERT INTO {} DEFAULT VALUES").format(t),
                         sql.SQL("UPDATE {} SET {} = {}").format(t, col, col),
                         sql.SQL("DELETE FROM {}").format(t), sql.SQL("TRUNCATE {}").format(t),
                         sql.SQL("ALTER TABLE {} ADD COLUMN evil int").format(t)):  # fmt: skip
                tried += 1
                wrote += not refused_to_reader(admin, stmt)
        for text in ("CREATE TABLE pglogic.evil (x int)", "CREATE FUNCTION pglogic.evil() "
                     "RETURNS int LANGUAGE sql RETURN 1", "CREATE SCHEMA evil"):  # fmt: skip
            tried += 1
            wrote += not refused_to_reader(admin, sql.SQL(text))
        listen = admin.execute("SHOW listen_addresses").fetchone()
    row("access", "pglogic_reader cannot write", f"INSERT/UPDATE/DELETE/TRUNCATE/ALTER on "
        f"{len(tables)} tables, CREATE in the schema; {functions[0] if functions else '?'} "
        "functions checked for SECURITY DEFINER", tried, wrote,
        int(definers[0] if definers else 1),
        f"security-definer functions: {definers[0] if definers else '?'} (every function runs "
        "with the caller's rights)")  # fmt: skip
    mode = stat.S_IMODE(server.pgdata_dir(home).stat().st_mode)
    tcp = listen[0] if listen else "?"
    row("access", "embedded server: Unix socket only, private data directory",
        "listen_addresses, data directory mode", 2, 0, int(tcp != "") + int(mode != 0o700),
        f"listen_addresses = '{tcp}'; data directory mode {oct(mode)}")  # fmt: skip


# -- main --------------------------------------------------------------------------------------


def setup_rel(dsn: str) -> None:
    with connect(dsn, autocommit=True) as conn:
        try:
            get_corpus(conn, "rel")
            return
        except PglogicError:
            pass
        from pglogic.store.ingest import ingest_records
        from pglogic.store.readers import Record

        corpus = create_corpus(conn, "rel", model=MODEL, dim=DIM)
        vecs = unit(np.random.default_rng(4), 500)
        ingest_records(conn, corpus, [Record(f"r{i}", f"text {i}", f"T{i}", {"g": i % 10},
                                             tuple(map(float, v))) for i, v in enumerate(vecs)],
                       embedder=None)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small amounts, a 1-minute load phase")
    ap.add_argument("--only", default="bad,faults,load,access")
    ap.add_argument("--home", type=Path, default=Path("/tmp/pglogic-rel"))
    ap.add_argument("--load-seconds", type=float, default=660.0)
    ap.add_argument("--merge", action="store_true",
                    help="with --only: replace only those areas' rows in the committed results")  # fmt: skip
    args = ap.parse_args()
    only = set(args.only.split(","))
    work = args.home.parent / (args.home.name + "-work")
    work.mkdir(parents=True, exist_ok=True)
    dsn = server.ensure_running(args.home)
    from pglogic.store import migrate

    migrate.upgrade(dsn)
    setup_rel(dsn)
    q = args.quick
    if "bad" in only:
        parsed = bad_parser(5_000 if q else 100_000)
        bad_compiler(parsed[: 2_000 if q else 20_000])
        bad_sql_function(dsn, 500 if q else 10_000, parsed)
        bad_cli(args.home, 10 if q else 200)
        bad_hostile(dsn, args.home)
        bad_oversized(dsn)
    if "faults" in only:
        for name in ("fault", "switchme"):
            cli("corpus", "drop", name, "--yes", home=args.home)
        fault_ingest(args.home, work)
        fault_index(args.home)
        fault_switch(args.home, work)
        fault_interrupt(args.home)
        fault_server(work)
    if "access" in only:
        access(args.home)
    if "load" in only:
        load(args.home, work, 60.0 if q else args.load_seconds)
    if args.merge:  # keep the other areas' rows of the last full run
        areas = {r["area"] for r in ROWS}
        old = json.loads((RESULTS_DIR / "reliability.json").read_text())["rows"]
        ROWS[:0] = [r for r in old if r["area"] not in areas]
        ROWS.sort(key=lambda r: ["bad input", "faults", "access", "load"].index(r["area"]))
    data = {"machine": machine(dsn), "quick": q, "rows": ROWS}
    body = md_table(["area", "test", "tried", "how much", "lost", "unexpected errors", "notes"],
                    [[r["area"], r["test"], r["tried"], r["amount"], r["lost"], r["unexpected"],
                      r["note"]] for r in ROWS])  # fmt: skip
    md = ("# Reliability (`bench/correctness/reliability.py`)\n\n" + machine_md(data["machine"]) + "\n\n"
          + ("**Quick run (small amounts).**\n\n" if q else "") + body + "\n")  # fmt: skip
    name = "reliability_quick" if q else "reliability"
    write_results(name, data, md, results_dir=RESULTS_DIR)
    bad = [r for r in ROWS if r["lost"] or r["unexpected"]]
    print(f"{len(ROWS)} rows, {len(bad)} with losses or unexpected errors")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
