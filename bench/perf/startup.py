"""Start-up cost of the ``pglogic`` command, and whether the int8 ONNX twin may embed queries.

    .venv/bin/python bench/perf/startup.py                 # ~3 min on 2 cores (--runs 7)
    .venv/bin/python bench/perf/startup.py --runs 3 --skip-fidelity
    .venv/bin/python bench/perf/startup.py --render           # rewrite startup.md from startup.json

Wall time (median of ``--runs`` fresh processes) of:

- ``pglogic --help`` and ``pglogic compile '"a" AND NOT "b"'`` (no database);
- ``python -X importtime -c "import pglogic.cli"`` and ``-c "from pglogic.query import parse"``:
  the cumulative import time of the top-level ``pglogic`` entries (importtime's own overhead
  included, so larger than the same imports without it);
- ``pglogic search demo '"grain" AND NOT "wheat"'`` with both terms in ``pglogic.term_cache``
  (cached: no model is loaded), searches whose terms are not cached (a new pair per run:
  the model loads, then the search caches them), and the same searches again (cached);
- loading each model able to embed the demo corpus's queries in a fresh process (import +
  load + one term): all-MiniLM-L6-v2 (PyTorch) and its int8 ONNX twin ``minilm-int8``.

The demo corpus is the one of ``pglogic demo`` (3,000 Reuters stories; ``./run demo`` makes it) in the database the
commands use (``PGLOGIC_DSN``, else the embedded server under ``PGLOGIC_HOME``, default
~/.local/share/pglogic). The cached run caches
its two terms first; every entry the runs add is removed at the end.

Fidelity of ``minilm-int8`` as the query side of an all-MiniLM-L6-v2 corpus: the cosine between
the two models' query vectors of ~1,200 real terms (the Reuters labels the evaluation derives
its queries from, the label and tag names of the three shared datasets, the natural-language
benchmark's questions and their terms), and the top 10 on the demo corpus of the 355 derived
Reuters queries, the news questions' queries and the demo's queries, with each model's
vectors: identical lists, identical sets, mean overlap.

The "before" column is the old code (commit ce5b9db, before the package split and before this
benchmark), measured on the same machine and idle, three runs each: those numbers are constants
here, not measured by this script. Writes ``bench/perf/results/startup.{json,md}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib.benchlib import (
    SHARED_DATA,
    host,
    machine_line,
    md_table,
    wait_idle,
    write_results,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"

ROOT = Path(__file__).resolve().parents[2]
PYTHON = Path(sys.executable)
PGLOGIC = PYTHON.with_name("pglogic")
CORPUS = "demo"
CACHED_QUERY = '"grain" AND NOT "wheat"'
#: Term pairs of the uncached runs (one per run; skipped when already cached).
UNCACHED_PAIRS = [
    ("coffee", "cocoa"),
    ("copper", "zinc"),
    ("sugar", "corn"),
    ("gold", "silver"),
    ("crude oil", "natural gas"),
    ("interest rates", "inflation"),
    ("barley", "sorghum"),
    ("rubber", "tin"),
]

#: The old code (commit ce5b9db), same machine, idle, 2026-11-23: seconds per run.
BEFORE: dict[str, dict[str, Any]] = {
    "help": {"runs_s": [3.28, 3.49, 3.22]},
    "compile": {"runs_s": [3.38, 2.88, 2.98]},
    "importtime_cli": {"runs_s": [2.09], "note": "pglogic.calibrate alone 1.25 s (scipy)"},
    "importtime_query": {
        "runs_s": [2.13],
        "note": "loaded alembic, numpy, psycopg, scipy, sqlalchemy",
    },
    "search_cached": {
        "runs_s": [14.81, 16.42, 14.38],
        "note": "no term-cache path then: every search loaded the model",
    },
    "search_uncached": {"runs_s": [14.81, 16.42, 14.38], "note": "the same runs"},
    "search_remembered": {"runs_s": [14.81, 16.42, 14.38], "note": "the same runs"},
}
BEFORE_SOURCE = (
    "the old code (commit ce5b9db: before the package split), measured on this machine, idle, "
    "3 runs each (importtime: 1 run), 2026-11-23; not re-measured by this script"
)

LABELS = {
    "help": "`pglogic --help`",
    "compile": '`pglogic compile \'"a" AND NOT "b"\'`',
    "importtime_cli": '`python -X importtime -c "import pglogic.cli"` (cumulative)',
    "importtime_query": '`python -X importtime -c "from pglogic.query import parse"` (cumulative)',
    "search_cached": '`pglogic search demo \'"grain" AND NOT "wheat"\'`, terms cached',
    "search_uncached": "`pglogic search demo` with new (uncached) terms",
    "search_remembered": "the same search again (its terms cached by the first)",
    "load_torch": "import + load all-MiniLM-L6-v2 (PyTorch) + embed 1 term",
    "load_onnx": "import + load minilm-int8 (ONNX Runtime) + embed 1 term",
}
GOALS = {
    "help": 0.5,
    "compile": 0.5,
    "search_cached": 1.0,
    "search_remembered": 1.0,
    "search_uncached": 2.0,
}


def run(args: list[str], env: dict[str, str] | None = None) -> tuple[float, str, str]:
    """Run a process; return (wall seconds, stdout, stderr); fail on a non-zero exit."""
    t0 = time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{args} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return wall, out.stdout, out.stderr


def summary(runs: list[float]) -> dict[str, Any]:
    return {
        "median_s": round(statistics.median(runs), 3),
        "min_s": round(min(runs), 3),
        "max_s": round(max(runs), 3),
        "runs_s": [round(r, 3) for r in runs],
    }


def timed(name: str, args: list[str], n: int) -> dict[str, Any]:
    run(args)  # warm the OS file cache and the bytecode once
    runs = [run(args)[0] for _ in range(n)]
    s = summary(runs)
    print(f"  {name}: median {s['median_s']:.3f} s", flush=True)
    return s


def importtime_total(stderr: str) -> float:
    """Seconds: the cumulative time of the top-level ``pglogic`` entries of -X importtime."""
    total = 0
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)$", line)
        if m and m.group(2).startswith("pglogic"):
            total += int(m.group(1))
    return total / 1e6


def importtime(name: str, statement: str, n: int) -> dict[str, Any]:
    args = [str(PYTHON), "-X", "importtime", "-c", statement]
    run(args)
    runs = [importtime_total(run(args)[2]) for _ in range(n)]
    s = summary(runs)
    heavy = ("torch", "scipy", "alembic", "sqlalchemy", "psycopg_pool", "matplotlib", "psycopg")
    probe = (
        f"{statement}; import json, sys; "
        f"print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))"
    )
    s["heavy_modules_loaded"] = json.loads(run([str(PYTHON), "-c", probe])[1])
    print(f"  {name}: median {s['median_s']:.3f} s, loads {s['heavy_modules_loaded']}")
    return s


def searches(n: int) -> dict[str, Any]:
    """The CLI searches on the demo corpus; the term cache is left as it was found.

    ``search_cached``: both terms in the cache. ``search_uncached``: a new pair of terms per
    run (the model loads; the search then caches the pair). ``search_remembered``: the same
    queries again, now answered from the cache; their output must equal the first run's.
    """
    from pglogic import PgLogic
    from pglogic.store.term_cache import (
        cache_terms,
        cached_term_vectors,
        cached_terms,
        uncache_terms,
    )

    api = PgLogic()
    corpus = api.corpus(CORPUS)
    out: dict[str, Any] = {
        "corpus": {
            "name": CORPUS,
            "model": corpus.model,
            "documents": api.corpus_info(CORPUS).documents,
        }
    }
    with api.connect() as conn:
        before = set(cached_terms(conn, corpus.model))
        pairs = [p for p in UNCACHED_PAIRS if not cached_term_vectors(conn, corpus, list(p))][:n]
        cache_terms(conn, corpus, [t for t in ("grain", "wheat") if t not in before])
    cmd = [str(PGLOGIC), "search", CORPUS]
    try:
        out["search_cached"] = timed("search, cached", [*cmd, CACHED_QUERY], n)
        first, again, outputs_equal = [], [], []
        for a, b in pairs:
            query = f'"{a}" AND NOT "{b}"'
            wall, text, _ = run([*cmd, query])
            first.append(wall)
            wall_again, text_again, _ = run([*cmd, query])
            again.append(wall_again)
            outputs_equal.append(text == text_again)
    finally:
        with api.connect() as conn:
            added = sorted(set(cached_terms(conn, corpus.model)) - before)
            uncache_terms(conn, corpus.model, added)
    queries = [f'"{a}" AND NOT "{b}"' for a, b in pairs]
    out["search_uncached"] = {**summary(first), "queries": queries}
    out["search_remembered"] = {
        **summary(again),
        "queries": queries,
        "same_output_as_first_run": all(outputs_equal),
    }
    out["term_cache_entries_added_then_removed"] = added
    for key in ("search_uncached", "search_remembered"):
        print(f"  {key}: median {out[key]['median_s']:.3f} s", flush=True)
    return out


def model_loads(n: int) -> dict[str, Any]:
    out = {}
    for key, spec in (("load_torch", "all-MiniLM-L6-v2"), ("load_onnx", "minilm-int8")):
        stmt = (
            "from pglogic.embed.registry import get_query_embedder; "
            f"get_query_embedder({spec!r}).embed(['grain'])"
        )
        out[key] = timed(f"load {spec}", [str(PYTHON), "-c", stmt], n)
    return out


def real_terms() -> list[str]:
    """~1,200 distinct real terms: derived Reuters query terms, label/tag names, NL questions."""
    from pglogic.eval.data import load_dataset
    from pglogic.eval.derive import derive_queries
    from pglogic.query import terms, to_tree

    out: list[str] = []
    for q in derive_queries(load_dataset(SHARED_DATA / "reuters21578")).queries:
        out += terms(q.tree)
    for line in (ROOT / "bench" / "quality" / "nl" / "questions.jsonl").read_text().splitlines():
        q = json.loads(line)
        out += [*terms(to_tree(q["gold"])), q["question"]]
    for name in ("reuters21578", "arxiv_0704", "stackexchange_cooking_robotics"):
        for label in json.loads((SHARED_DATA / name / "labels.json").read_text())["labels"]:
            out.append(label["label"].replace("-", " "))
            if label.get("name"):
                out.append(label["name"])
    return list(dict.fromkeys(t for t in out if t.strip()))


def ranking_queries() -> dict[str, list[Any]]:
    from pglogic.cli.demo import DEMO_SETS
    from pglogic.eval.data import load_dataset
    from pglogic.eval.derive import derive_queries
    from pglogic.query import to_tree

    demo = DEMO_SETS["reuters21578"]
    nl = [
        json.loads(line)
        for line in (ROOT / "bench/quality/nl/questions.jsonl").read_text().splitlines()
    ]
    return {
        "demo": [to_tree(t) for t in demo.plain]
        + [to_tree(c.logical) for c in demo.contrasts]
        + [to_tree(c.question) for c in demo.contrasts],
        "nl_news": [to_tree(q["gold"]) for q in nl if q["topic"] == "news"],
        "derived": [
            q.tree for q in derive_queries(load_dataset(SHARED_DATA / "reuters21578")).queries
        ],
    }


def fidelity() -> dict[str, Any]:
    """How close minilm-int8's query vectors and rankings are to all-MiniLM-L6-v2's."""
    from pglogic import PgLogic
    from pglogic.embed.registry import CachedEmbedder, get_embedder
    from pglogic.engine.compile import SearchOptions
    from pglogic.query import positive_terms
    from pglogic.store.search import search

    terms = real_terms()
    torch_side = get_embedder("all-MiniLM-L6-v2", "query")
    onnx_side = get_embedder("minilm-int8", "query")
    a = torch_side.embed(terms)
    b = onnx_side.embed(terms)
    cos = (a * b).sum(axis=1)
    single = np.stack([torch_side.embed([t])[0] for t in terms[:200]])  # batch vs alone
    floor = (single * a[:200]).sum(axis=1)
    worst = [(terms[i], round(float(cos[i]), 5)) for i in np.argsort(cos)[:5]]
    out: dict[str, Any] = {
        "terms": len(terms),
        "cosine": {
            "mean": round(float(cos.mean()), 5),
            "min": round(float(cos.min()), 5),
            "p1": round(float(np.percentile(cos, 1)), 5),
            "below_0_99": int((cos < 0.99).sum()),
            "worst": worst,
        },
        "torch_batch_vs_alone_cosine_min": round(float(floor.min()), 7),
    }
    api = PgLogic()
    embedders = {"torch": CachedEmbedder(torch_side), "onnx": CachedEmbedder(onnx_side)}
    rankings: dict[str, Any] = {}
    with api.connect() as conn:
        corpus = api.corpus(CORPUS)
        for group, trees in ranking_queries().items():
            same_list = same_set = 0
            overlaps: list[float] = []
            score_diffs: list[float] = []  # |torch - onnx| score at the same rank
            gaps: list[float] = []  # torch's score gap between adjacent ranks
            for tree in trees:
                opts = SearchOptions(k=10, exact=not positive_terms(tree))
                hits = {
                    side: search(conn, corpus, tree, embedder=e, options=opts).hits
                    for side, e in embedders.items()
                }
                ids = {side: [h.external_id for h in hs] for side, hs in hits.items()}
                same_list += ids["torch"] == ids["onnx"]
                same_set += set(ids["torch"]) == set(ids["onnx"])
                overlaps.append(len(set(ids["torch"]) & set(ids["onnx"])) / 10)
                t_scores = [h.score for h in hits["torch"]]
                o_scores = [h.score for h in hits["onnx"]]
                score_diffs += [abs(x - y) for x, y in zip(t_scores, o_scores, strict=False)]
                gaps += [x - y for x, y in itertools.pairwise(t_scores)]
            rankings[group] = {
                "queries": len(trees),
                "identical_top10": same_list,
                "same_top10_set": same_set,
                "mean_overlap_at_10": round(statistics.fmean(overlaps), 4),
                "median_abs_score_diff": round(statistics.median(score_diffs), 5),
                "median_adjacent_rank_gap": round(statistics.median(gaps), 5),
            }
            print(f"  rankings {group}: {rankings[group]}", flush=True)
    out["rankings"] = rankings
    faithful = out["cosine"]["min"] >= 0.99 and all(
        r["identical_top10"] == r["queries"] for r in rankings.values()
    )
    out["faithful"] = faithful
    return out


def fmt(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def markdown(data: dict[str, Any]) -> str:
    r = data["results"]
    rows = []
    for key, label in LABELS.items():
        if key not in r:
            continue
        before = data["before"].get(key)
        b = statistics.median(before["runs_s"]) if before else None
        goal = GOALS.get(key)
        rows.append(
            [
                label,
                fmt(b),
                f"{r[key]['median_s']:.2f} ({r[key]['min_s']:.2f}-{r[key]['max_s']:.2f})",
                f"<= {goal:g}" if goal else "",
            ]
        )
    parts = [
        "# Start-up cost of the `pglogic` command (`bench/perf/startup.py`)",
        "",
        f"Machine: {machine_line()}; no GPU; Python {data['host']['python']}. "
        f"After {data['runs']} runs each (a warm-up first), the median wall time in seconds "
        f"(min-max); each run a fresh process. CPU busy before the runs: "
        f"{data['idle']['cpu_busy_before']:.0%}; 1-minute load average after them: "
        f"{data['loadavg_after']:.1f} (the machine is shared: other work slows every row).",
        "",
        f"**Before**: {data['before_source']}.",
        "",
        md_table(["command", "before s", "now s (min-max)", "goal s"], rows),
        "",
        "- The importtime rows are the cumulative import time of the top-level `pglogic` "
        "entries under `-X importtime` (which adds its own overhead). `import pglogic.cli` now "
        "loads only click and rich's console: each command's module loads when it runs, and "
        f"`--help` lists the commands from a table. Loaded by the two imports, of torch, scipy, "
        f"alembic, sqlalchemy, psycopg_pool, matplotlib, psycopg: "
        f"`{r['importtime_cli']['heavy_modules_loaded']}` and "
        f"`{r['importtime_query']['heavy_modules_loaded']}`.",
    ]
    if "search_cached" in r:
        su, sr = r["search_uncached"], r["search_remembered"]
        parts.append(
            "- Cached search: the terms' vectors come from `pglogic.term_cache` (one query); no "
            "model is loaded. Uncached: new terms each run "
            f"({', '.join(su['queries'])}); PyTorch and sentence-transformers load (the load "
            "rows), which is most of the time; the search then stores the terms it embedded in "
            "the cache, so the same query again (the remembered row) loads no model. Same output "
            f"both times: {sr['same_output_as_first_run']}. The cache entries the runs added "
            "were removed afterwards."
        )
    f = data.get("fidelity")
    if f:
        c = f["cosine"]
        parts += [
            "",
            "## Can the int8 ONNX twin embed the queries of an all-MiniLM-L6-v2 corpus?",
            "",
            f"Cosine between the query vectors of all-MiniLM-L6-v2 (PyTorch) and `minilm-int8` "
            f"over {f['terms']:,} real terms: mean {c['mean']}, min {c['min']} (1st percentile "
            f"{c['p1']}; {c['below_0_99']} below 0.99; lowest: "
            + ", ".join(f"{t!r} {v}" for t, v in c["worst"])
            + f"). For scale, PyTorch's own batch-vs-alone noise: min cosine "
            f"{f['torch_batch_vs_alone_cosine_min']}.",
            "",
            md_table(
                [
                    "queries on the demo corpus",
                    "n",
                    "identical top 10",
                    "same top-10 set",
                    "mean overlap@10",
                    "median score change",
                    "median gap between ranks",
                ],
                [
                    [
                        g,
                        x["queries"],
                        x["identical_top10"],
                        x["same_top10_set"],
                        f"{x['mean_overlap_at_10']:.3f}",
                        f"{x['median_abs_score_diff']:.5f}",
                        f"{x['median_adjacent_rank_gap']:.5f}",
                    ]
                    for g, x in f["rankings"].items()
                ],
            ),
            "",
            (
                "Faithful by the bar (min cosine >= 0.99 and identical top 10 on every query): "
                f"**{f['faithful']}**. "
            )
            + (
                "The twin is therefore not used for queries: a search gives the same ranking "
                "whether its terms were cached or embedded, and an uncached search loads the "
                "corpus's own PyTorch model. The int8 vectors move a score by a median of "
                f"{f['rankings']['derived']['median_abs_score_diff']:.4f} on the derived "
                "queries, where adjacent ranks are a median "
                f"{f['rankings']['derived']['median_adjacent_rank_gap']:.4f} apart (last two "
                "columns, over every rank of every query): near-tied documents swap places."
                if not f["faithful"]
                else "The twin may embed the queries."
            ),
        ]
    return "\n".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=7, help="runs per measurement (median)")
    ap.add_argument("--search-runs", type=int, default=5, help="runs per search measurement")
    ap.add_argument("--skip-fidelity", action="store_true")
    ap.add_argument("--skip-search", action="store_true", help="only the commands without a DB")
    ap.add_argument("--max-wait", type=float, default=120, help="s to wait for an idle CPU")
    ap.add_argument("--render", action="store_true", help="rewrite startup.md from startup.json")
    args = ap.parse_args()
    if args.render:
        data = json.loads((RESULTS_DIR / "startup.json").read_text())
        write_results("startup", data, markdown(data), results_dir=RESULTS_DIR)
        return
    idle = wait_idle(args.max_wait)
    results: dict[str, Any] = {}
    print("commands without a database", flush=True)
    results["help"] = timed("pglogic --help", [str(PGLOGIC), "--help"], args.runs)
    results["compile"] = timed(
        "pglogic compile", [str(PGLOGIC), "compile", '"a" AND NOT "b"'], args.runs
    )
    results["importtime_cli"] = importtime("importtime cli", "import pglogic.cli", args.runs)
    results["importtime_query"] = importtime(
        "importtime query", "from pglogic.query import parse", args.runs
    )
    data: dict[str, Any] = {
        "host": host(),
        "runs": args.runs,
        "search_runs": args.search_runs,
        "idle": idle,
        "before_source": BEFORE_SOURCE,
        "before": BEFORE,
        "goals_s": GOALS,
        "results": results,
    }
    if not args.skip_search:
        print("searches on the demo corpus", flush=True)
        found = searches(args.search_runs)
        data["corpus"] = found.pop("corpus")
        results.update(found)
        results.update(model_loads(args.search_runs))
    data["loadavg_after"] = os.getloadavg()[0]  # after the timed part (the fidelity is not)
    if not args.skip_fidelity:
        print("fidelity of minilm-int8 for queries", flush=True)
        data["fidelity"] = fidelity()
    jp, mp = write_results("startup", data, markdown(data), results_dir=RESULTS_DIR)
    print(f"wrote {jp} and {mp}")


if __name__ == "__main__":
    main()
