"""Lexical vs semantic NOT on the shared labelled corpora: NegRecall@10 and nDCG@10.

For each real corpus (Reuters-21578, Stack Exchange cooking+robotics, arXiv 0704) the derived
queries with NOT (:func:`pglogic.eval.derive.derive_queries`, 30 per template as
``bench/quality/quality.py`` runs them) are split by whether their negated labels have a *literal*
name: a label is literal when its term text (the text of the derived query's term) matches,
as a phrase in the corpus's lexical index (``english`` full-text search, the ``match:``
semantics), at least ``--min-coverage`` (0.5) of the documents that carry the label. A query
qualifies when every negated label is literal.

Every NOT query then runs, with the default engine (k = 100) and the same relevance judgments
(the labels), as

* ``semantic``  — the formula as derived: ``NOT "wheat"``;
* ``lexical``   — every negated term made lexical: ``NOT match:"wheat"`` (crisp truth, 1/0);
* ``both``      — ``NOT ("wheat" OR match:"wheat")`` (crisp);
* ``lexical-rank`` — ``NOT match:"wheat"`` with the rank truth (``ts_rank_cd`` r/(1+r));
* ``dense``     — the formula's text as one vector (the reference, as in ``pglogic eval``).

The variants are built by rewriting the tree (each negated :class:`~pglogic.query.Term` becomes
a :class:`~pglogic.query.Match` or an ``Or(Term, Match)``); positive terms stay semantic.
Reported per corpus and query subset (qualifying / not qualifying): nDCG@10, NegRecall@10
(BoolQuestions' trap measure: the share of the trap documents, which satisfy the positive
part but carry a negated label, found in the top 10; lower is better), how many fewer traps
than dense, the share of queries with a trap in the top 10, paired two-sided Wilcoxon tests of
each variant against the semantic NOT (Holm-adjusted over the variant × metric tests of the
corpus and subset), and two ceilings read from the match sets: the share of trap documents
that mention a negated name (what a lexical NOT can exclude at all) and the share of relevant
documents that do (what it must wrongly exclude).

    .venv/bin/python bench/quality/lexical_quality.py                      # ~15 min once corpora exist
    .venv/bin/python bench/quality/lexical_quality.py --only arxiv_0704 [--max-other N]
    .venv/bin/python bench/quality/lexical_quality.py --render             # Markdown from the JSON

The corpora ``eval_<dataset>`` live in database ``bench_quality`` under ``--home`` (default
``/tmp/plbench``, kept between runs: the first run embeds the 16,789 documents, ~30 min on a
busy 2-core machine). Writes ``bench/quality/results/lexical_quality.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import (
    SHARED_DATA,
    cpu_busy,
    machine,
    machine_line,
    machine_md,
    server_dsn,
)
from bench.lib.corpora import database
from bench.lib.lexical import match_sets
from pglogic import PgLogic
from pglogic.config import DEFAULT_MODEL
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.compile import SearchOptions, compile_query
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, scored_terms
from pglogic.engine.source import Corpus
from pglogic.eval.baselines import QUERY_VECTOR, single_vector
from pglogic.eval.compare import family_of, holm
from pglogic.eval.data import Dataset, load_dataset
from pglogic.eval.derive import EvalQuery, derive_queries
from pglogic.eval.evaluate import DENSE, K, corpus_name_for, prepare_corpus
from pglogic.eval.metrics import aggregate, evaluate_run, paired_test
from pglogic.eval.report import clean_json
from pglogic.query import And, Match, Node, Not, Or, Term, positive_terms
from pglogic.store.db import Connection
from pglogic.store.lexical import DEFAULT_TEXT_CONFIG
from pglogic.store.search import execute, server_has_iterative_scan

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "lexical_quality"
DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")
MIN_COVERAGE = 0.5
#: Method -> (how each negated term is rewritten, the lexical truth).
VARIANTS: dict[str, tuple[str, str]] = {
    "semantic": ("semantic", "crisp"),
    "lexical": ("lexical", "crisp"),
    "both": ("both", "crisp"),
    "lexical-rank": ("lexical", "rank"),
}
METHODS = (DENSE, *VARIANTS)
SHOWN = {
    DENSE: "dense (reference)",
    "semantic": 'semantic NOT `NOT "w"`',
    "lexical": 'lexical NOT `NOT match:"w"` (crisp)',
    "both": 'both `NOT ("w" OR match:"w")` (crisp)',
    "lexical-rank": 'lexical NOT `NOT match:"w"` (rank)',
}
BASE = "semantic"
TESTED = ("ndcg@10", "negrecall@10")
MIN_PRECISION = 0.5
LIT_SPECIFIC = "literal, specific word"
LIT_COMMON = "literal, common word"
KINDS = ("literal", "some literal", "not literal")
#: The query subsets reported, in order (the literal queries split by the lowest precision of
#: their negated names: the share of the documents a name matches that carry its label).
SUBSETS = ("literal", LIT_SPECIFIC, LIT_COMMON, "some literal", "not literal")


# -- the tree rewrite --------------------------------------------------------------------------


def rewrite(tree: Node, kind: str) -> Node:
    """The formula with every negated term made lexical (``kind="lexical"``), made the OR of
    itself and its lexical twin (``"both"``), or kept (``"semantic"``).

    Example:
        >>> from pglogic.query import parse, to_string
        >>> to_string(rewrite(parse('"grain" AND NOT "wheat"'), "lexical"))
        '"grain" AND NOT match:"wheat"'
        >>> to_string(rewrite(parse('"grain" AND NOT "wheat"'), "both"))
        '"grain" AND NOT ("wheat" OR match:"wheat")'
    """
    if kind == "semantic":
        return tree
    if isinstance(tree, Not):
        child = tree.child
        if isinstance(child, Term):
            lex = Match(child.text)
            return Not(lex if kind == "lexical" else Or((child, lex)))
        return Not(rewrite(child, kind))
    if isinstance(tree, And | Or):
        children = tuple(rewrite(c, kind) for c in tree.children)
        return And(children) if isinstance(tree, And) else Or(children)
    return tree


def negated_labels(q: EvalQuery) -> list[str]:
    """The labels of ``q``'s negated terms (every NOT of a derived query wraps one term).

    Example:
        >>> negated_labels(q)  # doctest: +SKIP
        ['wheat']
    """
    labels = q.term_labels
    out: list[str] = []

    def walk(node: Node, under: bool) -> None:
        if isinstance(node, Term | Match):
            if under and labels[node.text] not in out:
                out.append(labels[node.text])
        elif isinstance(node, Not):
            walk(node.child, not under)
        else:
            for c in node.children:
                walk(c, under)

    walk(q.tree, False)
    return out


# -- which labels are literal ------------------------------------------------------------------


def lexemes(conn: Connection, config: str, text: str) -> str:
    """The phrase query PostgreSQL makes of ``text`` (empty: only stop words).

    Example:
        >>> lexemes(conn, "english", "Crude Oil")  # doctest: +SKIP
        "'crude' <-> 'oil'"
    """
    row = conn.execute("SELECT phraseto_tsquery(%s::regconfig, %s)::text", (config, text))
    got = row.fetchone()
    return str(got[0]) if got else ""


def label_table(
    conn: Connection, corpus: Corpus, ds: Dataset, labels: Sequence[str], min_coverage: float
) -> tuple[list[dict[str, Any]], dict[str, set[str]]]:
    """One row per label: its term text, the phrase query, documents with the label, matched
    documents, coverage (matched ∩ labelled / labelled), precision (matched ∩ labelled /
    matched), literal or the reason it is not; and each label's match set.

    Example:
        >>> rows, matched = label_table(conn, corpus, ds, ["wheat"], 0.5)  # doctest: +SKIP
    """
    carrying: dict[str, set[str]] = {label: set() for label in labels}
    for doc, doc_labels in zip(ds.doc_ids, ds.labels, strict=True):
        for label in doc_labels & carrying.keys():
            carrying[label].add(doc)
    texts = {label: ds.term_text[label] for label in labels}
    sets = match_sets(conn, corpus, sorted(set(texts.values())))
    rows = []
    matched: dict[str, set[str]] = {}
    for label in labels:
        text = texts[label]
        hit = sets[text]
        matched[label] = hit
        both = len(hit & carrying[label])
        cov = both / len(carrying[label]) if carrying[label] else 0.0
        tsq = lexemes(conn, corpus.lexical_config or DEFAULT_TEXT_CONFIG, text)
        if not tsq:
            why = "no searchable word (stop words only)"
        elif not hit:
            why = "the name never occurs in the texts"
        elif cov < min_coverage:
            why = f"the name occurs in fewer than {min_coverage:.0%} of its documents"
        else:
            why = ""
        rows.append({
            "label": label, "text": text, "tsquery": tsq, "docs": len(carrying[label]),
            "matched": len(hit), "coverage": round(cov, 4),
            "precision": round(both / len(hit), 4) if hit else None,
            "literal": not why, "why_not": why,
        })  # fmt: skip
    return rows, matched


# -- running the variants ----------------------------------------------------------------------


def run_queries(
    conn: Connection,
    corpus: Corpus,
    queries: Sequence[EvalQuery],
    on_query: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, dict[str, list[str]]], dict[str, float]]:
    """Run dense and every variant of :data:`VARIANTS` on each query: rankings[method][qid]
    (top :data:`K` external ids) and the median ms per method (statement only).

    Example:
        >>> runs, ms = run_queries(conn, corpus, queries)  # doctest: +SKIP
    """
    embedder = get_query_embedder(corpus.model)
    iterative = server_has_iterative_scan(conn)
    one = single_vector(corpus, K)
    runs: dict[str, dict[str, list[str]]] = {m: {} for m in METHODS}
    times: dict[str, list[float]] = {m: [] for m in METHODS}

    def timed(method: str, qid: str, fn: Callable[[], list[str]]) -> None:
        t0 = time.perf_counter()
        runs[method][qid] = fn()
        times[method].append(time.perf_counter() - t0)

    for i, q in enumerate(queries):
        texts = scored_terms(q.tree, DEFAULT_AND_TEXT)  # terms, then the AND texts
        vectors = dict(zip(texts, embedder.embed(texts), strict=True))
        dense_vec: dict[str, object] = {QUERY_VECTOR: embedder.embed([q.text])[0]}

        def dense(v: dict[str, object] = dense_vec) -> list[str]:
            return [h.external_id for h in execute(conn, one, v)]

        timed(DENSE, q.id, dense)
        for method, (kind, truth) in VARIANTS.items():
            tree = rewrite(q.tree, kind)
            opts = SearchOptions(k=K, exact=not positive_terms(tree), lexical=truth)
            compiled = compile_query(tree, corpus, opts, server_has_iterative_scan=iterative)
            need = {t: vectors[t] for t in compiled.terms}

            def go(c: Any = compiled, v: dict[str, Any] = need) -> list[str]:
                return [h.external_id for h in execute(conn, c, v)]

            timed(method, q.id, go)
        if on_query:
            on_query(i + 1, len(queries))
    ms = {m: round(1000 * statistics.median(ts), 2) for m, ts in times.items() if ts}
    return runs, ms


def trap_ceilings(
    queries: Sequence[EvalQuery], matched: Mapping[str, set[str]]
) -> dict[str, float]:
    """What a lexical NOT can do at best on ``queries``: the share of trap documents that
    mention one of the query's negated names (it can exclude those and no other), and the
    share of relevant documents that do (it must exclude those although they are relevant);
    pooled over the queries.

    Example:
        >>> trap_ceilings(queries, matched)  # doctest: +SKIP
        {'traps_mentioning': 0.93, 'relevant_mentioning': 0.12}
    """
    traps = trapped = rel = rel_hit = 0
    for q in queries:
        words: set[str] = set().union(*(matched[lab] for lab in negated_labels(q)))
        traps += len(q.negatives)
        trapped += len(q.negatives & words)
        rel += len(q.relevant)
        rel_hit += len(q.relevant & words)
    return {
        "traps_mentioning": trapped / traps if traps else math.nan,
        "relevant_mentioning": rel_hit / rel if rel else math.nan,
    }


def summarise(
    per_query: Mapping[str, Mapping[str, Mapping[str, float]]], qids: Sequence[str]
) -> dict[str, Any]:
    """Means per method on ``qids``, the share of queries with a trap in the top 10, and the
    paired tests of every variant against :data:`BASE` (Holm over variant × metric).

    Example:
        >>> summarise(per_query, ["q1", "q2"])  # doctest: +SKIP
    """
    means = {m: aggregate(per_query[m], qids) for m in per_query}
    trapped = {
        m: statistics.fmean(per_query[m][q]["negrecall@10"] > 0 for q in qids) if qids else math.nan
        for m in per_query
    }
    tests: dict[tuple[str, str], Any] = {}
    for m in VARIANTS:
        if m == BASE:
            continue
        for metric in TESTED:
            a = {q: per_query[BASE][q][metric] for q in qids}
            b = {q: per_query[m][q][metric] for q in qids}
            tests[(m, metric)] = paired_test(a, b)
    adjusted = holm({key: t.p_value for key, t in tests.items()})
    return {
        "queries": len(qids),
        "means": {
            m: {k: means[m][k] for k in ("ndcg@10", "negrecall@10", "recall@100")} for m in means
        },
        "trapped_share": trapped,
        "tests": [
            {"method": m, "metric": metric, **vars(t), "p_holm": adjusted[(m, metric)]}
            for (m, metric), t in tests.items()
        ],
    }


def run_dataset(
    api: PgLogic,
    name: str,
    per_template: int,
    min_coverage: float,
    max_other: int | None = None,
) -> dict[str, Any]:
    """Everything measured on one dataset (see the module docstring). ``max_other`` caps the
    queries run of each kind other than literal (every n-th, in derivation order).

    Example:
        >>> run_dataset(PgLogic(dsn), "arxiv_0704", 30, 0.5)["subsets"]  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    ds = load_dataset(SHARED_DATA / name)
    derived = derive_queries(ds, per_template=per_template)
    nots = [q for q in derived.queries if q.group != "given" and q.n_negations > 0]
    corpus_name = corpus_name_for(ds, DEFAULT_MODEL)
    corpus = prepare_corpus(api, ds, corpus_name)
    if corpus.lexical_config != DEFAULT_TEXT_CONFIG:
        corpus = api.lexical_index(corpus_name, DEFAULT_TEXT_CONFIG)
    negated = sorted({lab for q in nots for lab in negated_labels(q)})
    with api.connect() as conn:
        rows, matched = label_table(conn, corpus, ds, negated, min_coverage)
        literal = {r["label"] for r in rows if r["literal"]}
        precision = {r["label"]: r["precision"] or 0.0 for r in rows}
        kinds: dict[str, str] = {}
        for q in nots:
            labs = negated_labels(q)
            n_lit = sum(lab in literal for lab in labs)
            kinds[q.id] = (
                "literal" if n_lit == len(labs) else "some literal" if n_lit else "not literal"
            )
        run: list[EvalQuery] = []
        for kind in KINDS:
            qs = [q for q in nots if kinds[q.id] == kind]
            if kind != "literal" and max_other is not None and len(qs) > max_other:
                qs = qs[:: math.ceil(len(qs) / max_other)]
            run += qs
        print(f"{name}: {len(nots)} NOT queries, {Counter(kinds.values())}, running "
              f"{len(run)}", flush=True)  # fmt: skip

        def progress(done: int, total: int) -> None:
            if done % 50 == 0 or done == total:
                print(f"  {name}: {done}/{total} queries", flush=True)

        runs, ms = run_queries(conn, corpus, run, progress)
    relevant = {q.id: q.relevant for q in run}
    negatives = {q.id: q.negatives for q in run}
    per_query = {m: evaluate_run(r, relevant, negatives) for m, r in runs.items()}

    def specific(q: EvalQuery) -> bool:
        return min(precision[lab] for lab in negated_labels(q)) >= MIN_PRECISION

    groups: dict[str, list[EvalQuery]] = {
        "literal": [q for q in run if kinds[q.id] == "literal"],
        LIT_SPECIFIC: [q for q in run if kinds[q.id] == "literal" and specific(q)],
        LIT_COMMON: [q for q in run if kinds[q.id] == "literal" and not specific(q)],
        "some literal": [q for q in run if kinds[q.id] == "some literal"],
        "not literal": [q for q in run if kinds[q.id] == "not literal"],
    }
    subsets: dict[str, Any] = {}
    for label, qs in groups.items():
        if not qs:
            continue
        qids = [q.id for q in qs]
        subsets[label] = summarise(per_query, qids)
        subsets[label]["ceilings"] = trap_ceilings(qs, matched)
        fams: dict[str, list[str]] = {}
        for q in qs:
            fams.setdefault(family_of(q.tree), []).append(q.id)
        subsets[label]["families"] = {
            f: {"queries": len(ids),
                **{m: {k: aggregate(per_query[m], ids)[k] for k in TESTED} for m in METHODS}}
            for f, ids in sorted(fams.items())
        }  # fmt: skip
    return {
        "dataset": name,
        "documents": len(ds.doc_ids),
        "term_source": dict(Counter(ds.term_source.values())),
        "derived_queries": len(derived.queries),
        "not_queries": len(nots),
        "query_kinds": dict(Counter(kinds.values())),
        "queries_run": dict(Counter(kinds[q.id] for q in run)),
        "labels": rows,
        "literal_labels": sorted(literal),
        "subsets": subsets,
        "median_ms": ms,
        "queries": [
            {
                "id": q.id,
                "template": q.template,
                "logical": q.logical,
                "kind": kinds[q.id],
                "negated": negated_labels(q),
                "relevant": len(q.relevant),
                "traps": len(q.negatives),
                **{m: {k: per_query[m][q.id][k] for k in TESTED} for m in METHODS},
            }
            for q in run
        ],
        "seconds": round(time.perf_counter() - t0, 1),
    }


# -- the report --------------------------------------------------------------------------------


def _f(v: float | None, digits: int = 3) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _pct(v: float | None) -> str:
    return "—" if v is None or math.isnan(v) else f"{v:.0%}"


def _p(v: float) -> str:
    s = f"{v:.2g}"
    return f"**{s}**" if v < 0.05 else s


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return [*out, *("| " + " | ".join(r) + " |" for r in rows), ""]


def _subset_md(d: dict[str, Any], label: str) -> list[str]:
    s = d["subsets"].get(label)
    if s is None:
        return [f"No {label} queries.", ""]
    means = s["means"]
    dense_neg = means[DENSE]["negrecall@10"]
    tests = {(t["method"], t["metric"]): t for t in s["tests"]}
    rows = []
    for m in METHODS:
        neg = means[m]["negrecall@10"]
        fewer = f"{1 - neg / dense_neg:.0%}" if dense_neg else "—"
        cells = [SHOWN[m], _f(means[m]["ndcg@10"]), _f(neg), fewer,
                 _pct(s["trapped_share"][m]), _f(means[m]["recall@100"])]  # fmt: skip
        for metric in TESTED:
            t = tests.get((m, metric))
            cells.append("—" if t is None else f"{t['delta']:+.3f} (p={_p(t['p_holm'])})")
        cells.append(_f(d["median_ms"].get(m), 1))
        rows.append(cells)
    c = s["ceilings"]
    out = [
        f"**{label}** — {s['queries']} queries. Trap documents that mention a negated name: "
        f"{_pct(c['traps_mentioning'])}; relevant documents that do: "
        f"{_pct(c['relevant_mentioning'])}.",
        "",
    ]
    return out + _table(
        ["method", "nDCG@10", "NegRecall@10", "fewer traps than dense", "queries with a trap "
         "in top 10", "Recall@100", "Δ nDCG@10 vs semantic (p Holm)",
         "Δ NegRecall@10 vs semantic (p Holm)", "median ms (all queries run)"], rows,
    )  # fmt: skip


def _labels_md(d: dict[str, Any]) -> list[str]:
    rows = d["labels"]
    lit = [r for r in rows if r["literal"]]
    reasons = Counter(r["why_not"] for r in rows if not r["literal"])
    kinds = d["query_kinds"]
    out = [
        f"Negated labels: {len(rows)}, literal {len(lit)}"
        + "".join(f"; {n} not: {why}" for why, n in reasons.most_common())
        + f". NOT queries: {d['not_queries']} — every negated label literal: "
        f"{kinds.get('literal', 0)}, some: {kinds.get('some literal', 0)}, none: "
        f"{kinds.get('not literal', 0)}"
        + (
            " (run: " + ", ".join(f"{k} {v}" for k, v in d["queries_run"].items()) + ")"
            if d.get("queries_run", kinds) != kinds
            else ""
        )
        + ". Term text per label: "
        + ", ".join(f"{k} ({v})" for k, v in d["term_source"].items())
        + ".",
        "",
    ]
    shown = sorted(rows, key=lambda r: -r["docs"])
    out += [
        "<details><summary>Every negated label: coverage = share of its documents the name "
        "matches; precision = share of the matched documents that carry the label</summary>",
        "",
    ]
    out += _table(
        ["label", "term text", "phrase query", "docs", "matched", "coverage", "precision",
         "literal"],
        [[r["label"], r["text"], f"`{r['tsquery']}`" if r["tsquery"] else "(none)",
          str(r["docs"]), str(r["matched"]), _f(r["coverage"], 2), _f(r["precision"], 2),
          "yes" if r["literal"] else r["why_not"]] for r in shown],
    )  # fmt: skip
    return [*out, "</details>", ""]


def _families_md(d: dict[str, Any], label: str) -> list[str]:
    s = d["subsets"].get(label)
    if s is None:
        return []
    rows = []
    for fam, v in s["families"].items():
        rows.append([fam, str(v["queries"])] + [
            f"{_f(v[m]['ndcg@10'])} / {_f(v[m]['negrecall@10'])}" for m in METHODS
        ])  # fmt: skip
    head = f"By template family ({label}), nDCG@10 / NegRecall@10:"
    return [head, "", *_table(["family", "queries", *METHODS], rows)]


def to_markdown(data: dict[str, Any]) -> str:
    """The Markdown report of :func:`main`'s JSON.

    Example:
        >>> print(to_markdown(json.loads(Path("bench/quality/results/lexical_quality.json").read_text())))  # doctest: +SKIP
    """
    out = [
        "# Lexical vs semantic NOT on the shared corpora",
        "",
        f"Machine: {data['machine_line']}; CPU {data['cpu_busy']:.0%} busy before the run "
        "(shared; latency columns are indicative only). Model all-MiniLM-L6-v2, default "
        f"engine ({data['family']}, and_text {DEFAULT_AND_TEXT}), top {K}, the derived "
        f"queries with NOT ({data['per_template']} per template, as `bench/quality/quality.py`). "
        "Relevance and trap documents come from the labels, unchanged for every variant. "
        f"A negated label is *literal* when its term text, as a phrase in the corpus's "
        f"`english` full-text index (what `match:` does), matches at least "
        f"{data['min_coverage']:.0%} of the documents that carry the label; a query is "
        "*literal* when all its negated labels are; literal queries are split by the lowest "
        "*precision* of their negated names (the share of the documents a name matches that "
        f"carry its label): *specific word* at ≥ {MIN_PRECISION:.0%}, else *common word*. "
        "The variants rewrite every negated term: "
        '`NOT "w"` (as derived), `NOT match:"w"`, `NOT ("w" OR match:"w")`, and '
        '`NOT match:"w"` with the rank truth. NegRecall@10 (BoolQuestions\' trap measure, '
        "lower is better): share of the query's trap documents (they satisfy the positive part "
        "but carry a negated label) in the top 10. Δ and p: paired two-sided Wilcoxon against "
        "the semantic NOT, Holm-adjusted over the 6 variant × metric tests of the corpus and "
        "subset (**bold**: < 0.05). Script: `bench/quality/lexical_quality.py`.",
        "",
        "## Headline (literal queries)",
        "",
    ]
    head = []
    for d in data["datasets"]:
        s = d["subsets"].get("literal")
        if s is None:
            head.append([d["dataset"], "0", *["—"] * 10])
            continue
        mm = s["means"]
        dn = mm[DENSE]["negrecall@10"]
        head.append([d["dataset"], str(s["queries"])] + [
            f"{_f(mm[m]['ndcg@10'])} / {_f(mm[m]['negrecall@10'])}"
            + (f" ({1 - mm[m]['negrecall@10'] / dn:.0%})" if dn and m != DENSE else "")
            for m in METHODS
        ])  # fmt: skip
    out += _table(
        ["dataset", "queries", *(f"{m}: nDCG@10 / NegRecall@10 (fewer traps than dense)"
                                 for m in METHODS)], head,
    )  # fmt: skip
    conclusions = data.get("conclusions")
    if conclusions:
        out += ["## When to use which kind of term", "", conclusions.strip(), ""]
    for d in data["datasets"]:
        out += [f"## {d['dataset']} ({d['documents']:,} documents)", ""]
        out += _labels_md(d)
        for label in SUBSETS:
            if label in d["subsets"]:
                out += _subset_md(d, label)
        out += _families_md(d, "literal")
    out += ["## Machine", "", machine_md(data["machine"]), ""]
    return "\n".join(out)


def main() -> None:
    """Run (or ``--render``) the benchmark; write ``bench/quality/results/lexical_quality.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--home", type=Path, default=Path("/tmp/plbench"))
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--only", action="append", help="dataset name (repeatable)")
    ap.add_argument("--per-template", type=int, default=30)
    ap.add_argument("--min-coverage", type=float, default=MIN_COVERAGE)
    ap.add_argument(
        "--max-other", type=int, default=None, help="cap the non-literal queries run per kind"
    )
    ap.add_argument("--render", action="store_true", help="rewrite the Markdown from the JSON")
    ap.add_argument(
        "--conclusions", type=Path, help="Markdown file: the conclusions kept in the JSON"
    )
    args = ap.parse_args()
    jp, mp = RESULTS_DIR / f"{NAME}.json", RESULTS_DIR / f"{NAME}.md"
    if args.render:
        data = json.loads(jp.read_text())
        if args.conclusions:
            data["conclusions"] = args.conclusions.read_text()
            jp.write_text(json.dumps(data, indent=1) + "\n")
        mp.write_text(provenance.stamp(to_markdown(data), provenance.of(data)).rstrip() + "\n")
        print(mp.read_text())
        return
    from pglogic.engine.operators import DEFAULT_FAMILY

    busy = cpu_busy()
    dsn = database(server_dsn(args.home, args.dsn))
    api = PgLogic(dsn)
    old = json.loads(jp.read_text()) if jp.exists() else {}
    done = {d["dataset"]: d for d in old.get("datasets", [])}
    for name in args.only or DATASETS:
        done[name] = run_dataset(api, name, args.per_template, args.min_coverage, args.max_other)
    data = {
        "machine": machine(dsn),
        "machine_line": machine_line(),
        "cpu_busy": busy,
        "family": DEFAULT_FAMILY,
        "per_template": args.per_template,
        "min_coverage": args.min_coverage,
        "conclusions": (
            args.conclusions.read_text() if args.conclusions else old.get("conclusions", "")
        ),
        "datasets": [done[n] for n in DATASETS if n in done],
    }
    data = clean_json(data)
    prov = provenance.current()
    jp.write_text(json.dumps(provenance.record(data, prov), indent=1) + "\n")
    mp.write_text(provenance.stamp(to_markdown(data), prov).rstrip() + "\n")
    print(mp.read_text())


if __name__ == "__main__":
    main()
