"""Per-query Python cost of the engine: compiling, rendering and the guide vector (no database).

For each shape (1–8 terms): the median time to compile a query of a shape never seen (the statement cache
cleared first), to compile one of a shape seen before (a cache hit: other words, same shape),
to render the statement to text (what a cache hit skips too), and to compute the guide vector
(384-d random term vectors). Writes ``bench/perf/results/fixed_cost.{json,md}``.

    .venv/bin/python bench/perf/fixed_cost.py        # ~10 s
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import machine_line, phrase_vectors
from pglogic.engine import compile as compile_module
from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.source import Corpus
from pglogic.query import parse, terms

RESULTS_DIR = Path(__file__).resolve().parent / "results"

CORPUS = Corpus(1, "c", "corpus_1", "m", 384, "cosine", "embedding", None, None)
SHAPES = {
    "1 term": '"{0}"',
    "AND 3": '"{0}" AND "{1}" AND "{2}"',
    "NOT 3": '"{0}" AND "{1}" AND NOT "{2}"',
    "OR 5": " OR ".join(f'"{{{i}}}"' for i in range(5)),
    "AND 8": " AND ".join(f'"{{{i}}}"' for i in range(8)),
}
REPEAT = 200


def median_ms(fn: Callable[[int], object]) -> float:
    times = []
    for i in range(REPEAT):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def measure(name: str, template: str, rng: np.random.Generator) -> dict[str, object]:
    """The four timings of one shape."""
    n = template.count("{")
    trees = [parse(template.format(*(f"w{i}_{j}" for j in range(n)))) for i in range(REPEAT)]
    opts = SearchOptions(k=10)

    def cold(i: int) -> object:
        compile_module._SHAPES.clear()
        return compile_query(trees[i], CORPUS, opts)

    def warm(i: int) -> object:
        return compile_query(trees[i], CORPUS, opts)

    compiled = compile_query(trees[0], CORPUS, opts)
    vecs = phrase_vectors(trees[0], {t: rng.standard_normal(384) for t in terms(trees[0])})
    return {
        "shape": name,
        "compile_ms": median_ms(cold),
        "cached_compile_ms": median_ms(warm),
        "render_ms": median_ms(lambda _i: compiled.statement.as_string(None)),
        "guide_ms": median_ms(lambda _i: compiled.with_vectors(vecs)),
    }


def main() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for name, template in SHAPES.items():
        rows.append(measure(name, template, rng))
        print(rows[-1], flush=True)
    machine = machine_line()
    (RESULTS_DIR / "fixed_cost.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = [
        "# Per-query Python cost: compile, render, guide (`bench/perf/fixed_cost.py`)",
        "",
        f"Machine: {machine}. Median of {REPEAT} queries per shape, k = 10, 384-d. A new shape "
        "is compiled and rendered to text once (before the statement cache, every query paid "
        "this); a cached shape (other words, same shape) costs a lookup. The guide vector is "
        "computed per query.",
        "",
        "| shape | new shape: compile + render ms | of which render ms | cached shape ms | guide ms |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['shape']} | {r['compile_ms']:.3f} | {r['render_ms']:.3f} | "
        f"{r['cached_compile_ms']:.3f} | {r['guide_ms']:.3f} |"
        for r in rows
    ]
    md = provenance.stamp("\n".join(lines) + "\n", provenance.current())  # the JSON is a list
    (RESULTS_DIR / "fixed_cost.md").write_text(md)


if __name__ == "__main__":
    main()
