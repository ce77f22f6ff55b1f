"""Write an evaluation's results: JSON (everything), a Markdown report and PNG plots (no DB I/O).

The Markdown report holds, in order: what was evaluated (documents, model, where each term's text
came from, queries per group, templates skipped), every method on every metric, the queries
with and without NOT, nDCG@10 by number of negations over the 3-term ITLR templates (like ITLR's
Table 1) and by number of terms over the AND and the OR chains (their Figure 3), per template, the Wilcoxon tests against the dense baseline, and the
issue's targets checked. Plots: ``ndcg_by_negations.png`` and ``ndcg_by_terms.png``.

Example:
    >>> paths = write_report(result, Path("bench/quality/limit_small"))  # doctest: +SKIP
    >>> sorted(p.name for p in paths)  # doctest: +SKIP
    ['ndcg_by_negations.png', 'ndcg_by_terms.png', 'results.json', 'results.md']
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pglogic.eval.compare import ALPHA, Comparison, compare, family_of, losses
from pglogic.eval.derive import EvalQuery
from pglogic.eval.evaluate import (
    DECOMPOSED,
    DENSE,
    GEOMETRIC,
    HEADLINE,
    SUBSETS,
    EvalResult,
    with_not,
    without_not,
)
from pglogic.eval.metrics import KEPT_TRAPS, METRICS, aggregate

#: The methods of the papers behind pglogic (ITLR's operators, NSFL's modes and geometric
#: baseline, BoolQuestions' decomposed set operations) and dense retrieval.
PAPER_METHODS = (
    DENSE, "pglogic[itlr]", "pglogic-nsfl", "pglogic-nsfl-rerank", "pglogic-sqo",
    "pglogic-sqo-rerank", GEOMETRIC, DECOMPOSED,
)  # fmt: skip
#: Significance level of "the default beats every paper's method over all queries".
OVERALL_ALPHA = 0.01

#: The issue's targets for queries with NOT, against the dense baseline.
NEG_RECALL_CUT = 0.80  # NegRecall@10 at least 80% lower
NDCG_GAIN = 0.15  # nDCG@10 at least +0.15


def clean_json(x: Any) -> Any:
    """JSON-ready data without NaN (NaN becomes null; floats kept to 6 significant digits).

    Example:
        >>> clean_json({"a": float("nan"), "b": [0.1234567, 3.14159e-21]})
        {'a': None, 'b': [0.123457, 3.14159e-21]}
    """
    if isinstance(x, float):
        return None if math.isnan(x) else float(f"{x:.6g}")
    if isinstance(x, Mapping):
        return {str(k): clean_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [clean_json(v) for v in x]
    return x


def _fmt(x: float, digits: int = 3) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def key_methods(result: EvalResult) -> list[str]:
    """The methods shown in the breakdowns: dense, the default engine, ITLR's default, the best
    other family (by nDCG@10 over all queries), Gödel, the other scoring modes and calibrated
    maps, and the two baselines.

    Example:
        >>> key_methods(result)  # doctest: +SKIP
        ['dense', 'pglogic[product-max]', 'pglogic[itlr]', 'pglogic[godel]', ...]
    """
    engine = [
        m for m in result.methods if m.startswith("pglogic[") and m != HEADLINE and "|" not in m
    ]
    best = max(engine, key=lambda m: _nan0(result.summary[m]["ndcg@10"]), default=None)
    others = [m for m in result.methods if m.startswith("pglogic-") or "|" in m]
    wanted = [DENSE, HEADLINE, "pglogic[itlr]", best, "pglogic[godel]", *others]
    wanted += [DECOMPOSED, GEOMETRIC]
    out: list[str] = []
    for m in wanted:
        if m and m in result.methods and m not in out:
            out.append(m)
    return out


def _nan0(x: float) -> float:
    return -1.0 if math.isnan(x) else x


def breakdown(
    result: EvalResult, key: Callable[[EvalQuery], Any], methods: Sequence[str]
) -> dict[Any, dict[str, Any]]:
    """Metrics per value of ``key(query)``: ``{value: {"queries": n, method: {metric: mean}}}``.

    Example:
        >>> breakdown(result, lambda q: q.n_negations, ["dense"])[0]["queries"]  # doctest: +SKIP
        212
    """
    groups: dict[Any, list[str]] = {}
    for q in result.queries:
        groups.setdefault(key(q), []).append(q.id)
    out: dict[Any, dict[str, Any]] = {}
    for value in sorted(groups, key=lambda v: (str(type(v)), v)):
        qids = groups[value]
        row: dict[str, Any] = {"queries": len(qids)}
        for m in methods:
            row[m] = aggregate(result.per_query[m], qids)
        out[value] = row
    return out


def targets(result: EvalResult) -> dict[str, dict[str, Any]]:
    """The issue's targets for the default engine against ``dense``, each with ``met``.

    The gap (nDCG@10 of the engine minus dense) "grows with the number of negations / terms"
    when the least-squares slope of the gap over that number is positive.

    Example:
        >>> targets(result)["NOT: NegRecall@10 at least 80% lower"]["met"]  # doctest: +SKIP
        True
    """
    if DENSE not in result.per_query or HEADLINE not in result.per_query:
        return {}
    nots = result.subset(with_not)
    without = result.subset(without_not)
    d, p = result.per_query[DENSE], result.per_query[HEADLINE]
    out: dict[str, dict[str, Any]] = {}
    if nots:
        nr_d, nr_p = aggregate(d, nots)["negrecall@10"], aggregate(p, nots)["negrecall@10"]
        cut = 1 - nr_p / nr_d if nr_d > 0 else math.nan
        out["NOT: NegRecall@10 at least 80% lower"] = {
            "dense": nr_d,
            "pglogic": nr_p,
            "reduction": cut,
            "met": bool(nr_d > 0 and cut >= NEG_RECALL_CUT) or (nr_d == 0 and nr_p == 0),
        }
        kept = aggregate(p, nots).get(KEPT_TRAPS, math.nan)
        if not math.isnan(kept):
            out["NOT: at least 80% of dense's top-10 traps excluded"] = {
                "excluded": 1 - kept,
                "met": 1 - kept >= NEG_RECALL_CUT,
            }
        nd_d, nd_p = aggregate(d, nots)["ndcg@10"], aggregate(p, nots)["ndcg@10"]
        out["NOT: nDCG@10 at least +0.15"] = {
            "dense": nd_d,
            "pglogic": nd_p,
            "gain": nd_p - nd_d,
            "met": nd_p - nd_d >= NDCG_GAIN,
        }
    if without:
        nd_d, nd_p = aggregate(d, without)["ndcg@10"], aggregate(p, without)["ndcg@10"]
        out["no NOT: nDCG@10 not lower"] = {
            "dense": nd_d,
            "pglogic": nd_p,
            "gain": nd_p - nd_d,
            "met": nd_p >= nd_d - 1e-9,
        }
    for label, _title, key in BREAKDOWNS:
        rows = breakdown(result, key, [DENSE, HEADLINE])
        gaps = {
            v: row[HEADLINE]["ndcg@10"] - row[DENSE]["ndcg@10"]
            for v, row in rows.items()
            if v is not None
        }
        values = sorted(v for v in gaps if not math.isnan(gaps[v]))
        # "grows": the least-squares slope of the gap over the number of negations / terms
        slope = (
            float(np.polyfit(values, [gaps[v] for v in values], 1)[0])
            if len(values) >= 2
            else math.nan
        )
        out[f"gap grows with the number of {label}"] = {
            "gaps": gaps,
            "slope": slope,
            "met": slope > 0,
        }
    return out


def comparisons(result: EvalResult) -> dict[str, list[Comparison]]:
    """The default engine against every other method, nDCG@10, Holm-corrected per table.

    ``family``: per template family (:func:`pglogic.eval.compare.family_of`); ``template``:
    per template; ``overall``: all queries, against :data:`PAPER_METHODS` only.

    Example:
        >>> [c.method for c in comparisons(result)["overall"] if c.loss]  # doctest: +SKIP
        []
    """
    if HEADLINE not in result.per_query:
        return {}
    others = [m for m in result.methods if m != HEADLINE]
    by_family: dict[str, list[str]] = {}
    by_template: dict[str, list[str]] = {}
    for q in result.queries:
        by_family.setdefault(family_of(q.tree), []).append(q.id)
        by_template.setdefault(q.template, []).append(q.id)
    every = {"all queries": [q.id for q in result.queries]}
    papers = [m for m in PAPER_METHODS if m in result.per_query]
    return {
        "family": compare(result.per_query, by_family, HEADLINE, others),
        "template": compare(result.per_query, by_template, HEADLINE, others),
        "overall": compare(result.per_query, every, HEADLINE, papers),
    }


def _negations(q: EvalQuery) -> int | None:
    """Negations of a 3-term ITLR template (their Table 1: same length, more NOTs)."""
    return q.n_negations if q.group == "itlr3" else None


def _and_terms(q: EvalQuery) -> int | None:
    """Length of an AND-only chain (ITLR's Figure 3)."""
    return q.n_terms if q.group == "chain" and q.template.startswith("AND") else None


def _or_terms(q: EvalQuery) -> int | None:
    """Length of an OR-only chain."""
    return q.n_terms if q.group == "chain" and q.template.startswith("OR") else None


#: The breakdowns: (name, title, key); queries whose key is None are not in it.
BREAKDOWNS: tuple[tuple[str, str, Callable[[EvalQuery], int | None]], ...] = (
    ("negations", "number of negations (3-term ITLR templates)", _negations),
    ("AND terms", "number of terms (AND chains)", _and_terms),
    ("OR terms", "number of terms (OR chains)", _or_terms),
)


def to_json(result: EvalResult) -> dict[str, Any]:
    """Everything measured, as JSON-ready data (NaN as null).

    Example:
        >>> to_json(result)["summary"]["dense"]["ndcg@10"]  # doctest: +SKIP
        0.41
    """
    ds = result.dataset
    methods = key_methods(result)
    by_template = breakdown(result, lambda q: q.template, result.methods)
    data: dict[str, Any] = clean_json(
        {
            "dataset": ds.name,
            "path": str(ds.path),
            "documents": len(ds.doc_ids),
            "model": result.model,
            "truth": result.truth,
            "k": result.k,
            "seconds": result.seconds,
            "term_text": {
                "sources": dict(Counter(ds.term_source.values())),
                "labels": dict(sorted(ds.term_text.items())),
            },
            "queries_per_group": dict(Counter(q.group for q in result.queries)),
            "skipped_templates": result.derived.skipped,
            "methods": result.methods,
            "latency_ms": result.latency_ms,
            "summary": result.summary,
            "subsets": _subsets_json(result),
            "breakdowns": {
                label: breakdown(result, key, result.methods) for label, _t, key in BREAKDOWNS
            },
            "by_template": by_template,
            "key_methods": methods,
            "significance": _paired_json(result.significance),
            "versus_headline": _paired_json(result.versus_headline),
            "targets": targets(result),
            "comparisons": {
                table: [{**vars(c), "loss": c.loss} for c in rows]
                for table, rows in comparisons(result).items()
            },
            "queries": [_query_json(q) for q in result.queries],
            # per_query[method][qid] = the values of "metrics", in that order (compact)
            "metrics": list(METRICS),
            "per_query": {
                m: {q: [vals[x] for x in METRICS] for q, vals in per.items()}
                for m, per in result.per_query.items()
            },
        }
    )
    return data


def _subsets_json(result: EvalResult) -> dict[str, dict[str, Any]]:
    """Every method's metrics on each subset of :data:`SUBSETS`, with its number of queries."""
    out: dict[str, dict[str, Any]] = {}
    for label, keep in SUBSETS.items():
        qids = result.subset(keep)
        out[label] = {
            "queries": len(qids),
            **{m: aggregate(result.per_query[m], qids) for m in result.methods},
        }
    return out


def _paired_json(tests: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Paired tests per method and subset, as dictionaries."""
    return {m: {s: vars(p) for s, p in by_subset.items()} for m, by_subset in tests.items()}


def _query_json(q: EvalQuery) -> dict[str, Any]:
    """One evaluated query: its formula and the sizes of its relevant and trap sets."""
    return {
        "id": q.id,
        "group": q.group,
        "template": q.template,
        "logical": q.logical,
        "text": q.text,
        "labels": list(q.labels),
        "n_terms": q.n_terms,
        "n_negations": q.n_negations,
        "relevant": len(q.relevant),
        "negatives": len(q.negatives),
    }


def md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Lines of a Markdown table (and a blank line).

    Example:
        >>> md_table(["a", "b"], [["1", "2"]])
        ['| a | b |', '|---|---|', '| 1 | 2 |', '']
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return [*lines, ""]


def to_markdown(result: EvalResult) -> str:
    """The Markdown report (see the module docstring for its sections): one function per section.

    Example:
        >>> print(to_markdown(result).splitlines()[0])  # doctest: +SKIP
        # pglogic eval: limit_small
    """
    methods = key_methods(result)
    sections = (
        _md_overview(result),
        _md_all_methods(result),
        _md_with_and_without_not(result, methods),
        _md_breakdowns(result, methods),
        _md_per_template(result, methods),
        _md_losses(result),
        _md_significance(result, methods),
        _md_versus_headline(result),
        _md_targets(result),
    )
    return "\n".join(line for section in sections for line in section)


def _md_overview(result: EvalResult) -> list[str]:
    """The title, what was evaluated, where each term's text came from, the skipped templates."""
    ds = result.dataset
    sources = Counter(ds.term_source.values())
    groups = Counter(q.group for q in result.queries)
    out = [
        f"# pglogic eval: {ds.name}",
        "",
        f"{len(ds.doc_ids):,} documents (`{ds.path}`), model `{result.model}`, truth map "
        f"`{result.truth}`, top k = "
        f"{result.k}, {len(result.queries)} queries "
        f"({', '.join(f'{g} {n}' for g, n in sorted(groups.items()))}), "
        f"{result.seconds:.0f} s.",
        "",
        "Term text per label: "
        + ", ".join(f"{src} ({n})" for src, n in sorted(sources.items()))
        + ". Metrics by pytrec_eval (trec_eval); NegRecall@10 (lower is better) is recall@10 of "
        "the trap documents: they satisfy the formula's positive part but carry a negated label.",
        "",
    ]
    if result.derived.skipped:
        out += ["Templates with fewer queries than asked:", ""]
        out += [f"- `{t}`: {why}" for t, why in sorted(result.derived.skipped.items())]
        out.append("")
    return out


def _md_all_methods(result: EvalResult) -> list[str]:
    """Every method on every metric, with its median latency."""
    header = ["method", *METRICS, "median ms"]
    rows = [
        [m, *(_fmt(result.summary[m][x]) for x in METRICS), _fmt(result.latency_ms[m], 1)]
        for m in result.methods
    ]
    return ["## All methods, all queries", "", *md_table(header, rows)]


def _md_with_and_without_not(result: EvalResult, methods: Sequence[str]) -> list[str]:
    """The key methods on the queries with NOT and on those without."""
    nots = result.subset(with_not)
    without = result.subset(without_not)
    rows = []
    for m in methods:
        a, b = aggregate(result.per_query[m], nots), aggregate(result.per_query[m], without)
        rows.append(
            [
                m,
                _fmt(a["ndcg@10"]),
                _fmt(a["negrecall@10"]),
                _fmt(a["map@100"]),
                _fmt(b["ndcg@10"]),
                _fmt(b["map@100"]),
            ]
        )
    header = [
        "method",
        f"NOT ({len(nots)}) nDCG@10",
        "NegRecall@10",
        "mAP@100",
        f"no NOT ({len(without)}) nDCG@10",
        "mAP@100",
    ]
    return ["## With and without NOT", "", *md_table(header, rows)]


def _md_breakdowns(result: EvalResult, methods: Sequence[str]) -> list[str]:
    """nDCG@10 by number of negations and by number of terms (:data:`BREAKDOWNS`)."""
    out: list[str] = []
    for _label, title, key in BREAKDOWNS:
        table = breakdown(result, key, methods)
        out += [f"## nDCG@10 by {title}", ""]
        vals = [v for v in table if v is not None]
        out += md_table(
            ["method", *(f"{v} ({table[v]['queries']})" for v in vals)],
            [[m, *(_fmt(table[v][m]["ndcg@10"]) for v in vals)] for m in methods],
        )
    return out


def _md_per_template(result: EvalResult, methods: Sequence[str]) -> list[str]:
    """nDCG@10 / NegRecall@10 of the key methods per template."""
    table = breakdown(result, lambda q: q.template, methods)
    rows = [
        [
            f"`{t}`",
            str(row["queries"]),
            *(f"{_fmt(row[m]['ndcg@10'])} / {_fmt(row[m]['negrecall@10'])}" for m in methods),
        ]
        for t, row in table.items()
    ]
    header = ["template", "queries", *methods]
    return ["## Per template (nDCG@10 / NegRecall@10)", "", *md_table(header, rows)]


def _comparison_rows(rows: Iterable[Comparison]) -> list[list[str]]:
    return [
        [
            f"`{c.group}`", c.method, str(c.n), _fmt(c.base), _fmt(c.other), f"{-c.delta:+.3f}",
            f"{c.p:.2g}", f"**{c.p_holm:.2g}**" if c.loss else f"{c.p_holm:.2g}",
        ]
        for c in rows
    ]  # fmt: skip


def _md_losses(result: EvalResult) -> list[str]:
    """Where the default engine's nDCG@10 is below another method's: per template family and
    per template (Holm-corrected Wilcoxon), and over all queries against the papers' methods."""
    tables = comparisons(result)
    if not tables:
        return []
    header = ["group", "method", "n", HEADLINE, "method", "Δ default", "p", "p (Holm)"]
    out = [
        f"## Where {HEADLINE} is below another method (nDCG@10)",
        "",
        "Two-sided Wilcoxon signed-rank test per group and method; p (Holm) is adjusted over "
        f"all the tests of its table (family-wise error {ALPHA}); **bold**: a significant loss. "
        "Groups with fewer than 5 queries are not tested.",
        "",
    ]
    for table, title in (("family", "Per template family"), ("template", "Per template")):
        rows = losses(tables[table])
        n_loss = sum(c.loss for c in rows)
        out += [
            f"### {title}: {n_loss} significant loss(es), {len(rows)} lower mean(s) "
            f"of {len(tables[table])} comparisons",
            "",
        ]
        out += md_table(header, _comparison_rows(rows)) if rows else ["None.", ""]
    overall = tables["overall"]
    beats = [c for c in overall if c.delta < 0 and c.p_holm < OVERALL_ALPHA]
    out += [
        f"### All queries, against the papers' methods: {HEADLINE} significantly better "
        f"(Holm-adjusted p < {OVERALL_ALPHA}) than {len(beats)} of {len(overall)}",
        "",
        *md_table(header, _comparison_rows(overall)),
    ]
    return out


def _md_significance(result: EvalResult, methods: Sequence[str]) -> list[str]:
    """The Wilcoxon tests of the key methods against dense (none: no section)."""
    if not result.significance:
        return []
    rows = []
    for m in methods:
        if m not in result.significance:
            continue
        for label, p in result.significance[m].items():
            rows.append(
                [
                    m,
                    label,
                    str(p.n),
                    _fmt(p.mean_a),
                    _fmt(p.mean_b),
                    f"{p.delta:+.3f}",
                    f"{p.p_value:.2g}",
                ]
            )
    header = ["method", "queries", "n", "dense", "method", "Δ", "p"]
    return ["## Wilcoxon signed-rank test of nDCG@10 against dense", "", *md_table(header, rows)]


def _md_versus_headline(result: EvalResult) -> list[str]:
    """The scoring modes and calibrated maps tested against the default engine (none: no
    section)."""
    if not result.versus_headline:
        return []
    out = [f"## Scoring modes and calibrated maps against {HEADLINE}", ""]
    out += [
        "Wilcoxon signed-rank test of nDCG@10 against the default engine on the same "
        "queries; median ms is the whole query path after embedding (SQO: its ascent too).",
        "",
    ]
    rows = [
        [
            m, label, str(p.n), _fmt(p.mean_a), _fmt(p.mean_b), f"{p.delta:+.3f}",
            f"{p.p_value:.2g}", _fmt(result.latency_ms[m], 1),
        ]
        for m, tests in result.versus_headline.items()
        for label, p in tests.items()
    ]  # fmt: skip
    out += md_table(["method", "queries", "n", HEADLINE, "method", "Δ", "p", "median ms"], rows)
    return out


def _md_targets(result: EvalResult) -> list[str]:
    """The issue's targets (:func:`targets`), met or missed, with what was measured."""
    checks = targets(result)
    if not checks:
        return []
    rows = []
    for name, c in checks.items():
        detail = ", ".join(
            f"{k} {_fmt(v) if isinstance(v, float) else _gaps(v)}"
            for k, v in c.items()
            if k != "met"
        )
        rows.append([name, "met" if c["met"] else "**missed**", detail])
    return [f"## Targets ({HEADLINE} vs dense)", "", *md_table(["target", "", "measured"], rows)]


def _gaps(v: Any) -> str:
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {x:+.3f}" for k, x in v.items()) + "}"
    return str(v)


def plot(result: EvalResult, out_dir: Path) -> list[Path]:
    """``ndcg_by_negations.png`` and ``ndcg_by_terms.png`` for the key methods.

    Example:
        >>> [p.name for p in plot(result, Path("out"))]  # doctest: +SKIP
        ['ndcg_by_negations.png', 'ndcg_by_terms.png']
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = key_methods(result)
    figures = (
        ("ndcg_by_negations.png", BREAKDOWNS[:1]),
        ("ndcg_by_terms.png", BREAKDOWNS[1:]),
    )
    paths = []
    for fname, panels in figures:
        fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.2), squeeze=False)
        for ax, (_label, title, key) in zip(axes[0], panels, strict=True):
            table = breakdown(result, key, methods)
            xs = [v for v in table if v is not None]
            for m in methods:
                ys = [table[v][m]["ndcg@10"] for v in xs]
                ax.plot(xs, ys, marker="o", label=m, linewidth=2.2 if m == HEADLINE else 1.2)
            ax.set_xlabel(title)
            ax.set_ylabel("nDCG@10")
            ax.set_ylim(0, 1)
            ax.set_xticks(xs)
            ax.set_title(f"{result.dataset.name}: nDCG@10 by {title}", fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def write_report(result: EvalResult, out_dir: Path, *, plots: bool = True) -> list[Path]:
    """Write ``results.json``, ``results.md`` and (unless ``plots`` is off) the PNG plots.

    Example:
        >>> write_report(result, Path("bench/quality/limit_small"))  # doctest: +SKIP
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / "results.json"
    # compact: the per-query values make it large (LIMIT-small: 1,300 queries × 17 methods)
    js.write_text(json.dumps(to_json(result), ensure_ascii=False, separators=(",", ":")) + "\n")
    md = out_dir / "results.md"
    md.write_text(to_markdown(result) + "\n")
    return [js, md, *(plot(result, out_dir) if plots else [])]
