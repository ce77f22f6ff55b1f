"""How a document's passages should make a term's similarity: exact scoring of every aggregate.

On the long documents of each shared corpus (longer than all-MiniLM-L6-v2's 254-word-piece
window, as ``pglogic eval --long-only`` keeps them; the corpora ``eval_<dataset>_long`` that
``bench/quality/passages_quality.py`` loads), every derived query (30 per template) is scored exactly in
NumPy over all the documents with the default family (and its AND texts), with each term's
similarity per document taken as:

* ``documents`` — the document's own vector (the model's first window: one vector per document);
* ``max`` — the best passage (pglogic's aggregate);
* ``top2`` — the mean of the two best passages (the best one for a one-passage document);
* ``mean`` — the mean over the passages;
* ``max NOT / documents`` — the best passage for negated terms, the document's vector for positive ones;
* ``max NOT / (documents + max) / 2`` — the best passage for negated terms, for positive ones the
  mean of the document's vector and its best passage.

Reported per corpus: nDCG@10 and NegRecall@10 (trap documents in the top 10, lower is better)
on the queries with NOT, nDCG@10 on those without, paired Wilcoxon tests of each aggregate
against ``documents``; and the label separation that explains them: per label of ≥ 10 long
documents, the AUC of a label's term similarity between the documents that carry the label and
those that do not, with ``documents`` and ``max``, and how much ``max`` raises the similarity of
each group. ``--subset all`` does the same over every document of the corpora
``eval_<dataset>`` (``passages_quality.py --subsets all``): the queries of all the labels.

    .venv/bin/python bench/quality/passages_aggregate.py --dsn "$DSN" [--only DATASET]   # minutes
    .venv/bin/python bench/quality/passages_aggregate.py --dsn "$DSN" --subset all
    .venv/bin/python bench/quality/passages_aggregate.py --render [--conclusions FILE]

Writes ``bench/quality/results/passages_aggregate.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: bench.lib
from bench.lib import provenance
from bench.lib.benchlib import SHARED_DATA, machine_line, md_table
from bench.lib.exact import Variant, score_variants
from pglogic.config import DEFAULT_MODEL
from pglogic.embed.passages import tokenizer_of
from pglogic.embed.registry import get_embedder, get_query_embedder
from pglogic.eval.data import load_dataset
from pglogic.eval.long_docs import long_only
from pglogic.eval.metrics import paired_test

RESULTS_DIR = Path(__file__).resolve().parent / "results"

NAME = "passages_aggregate"
DATASETS = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")

#: aggregate -> (the similarity of a positive term, of a negated term), by kind of per-document
#: value: ``documents`` (the document's own vector), ``max``, ``top2``, ``mean`` over its
#: passages, ``half`` = (documents + max) / 2.
AGGREGATES: dict[str, tuple[str, str]] = {
    "documents": ("documents", "documents"),
    "max": ("max", "max"),
    "top2": ("top2", "top2"),
    "mean": ("mean", "mean"),
    "max NOT / documents": ("documents", "max"),
    "max NOT / (documents + max) / 2": ("half", "max"),
}


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(a random positive scores above a random negative)."""
    if not len(pos) or not len(neg):
        return float("nan")
    ranks = np.concatenate([pos, neg]).argsort().argsort() + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _aggregate(pos_kind: str, neg_kind: str) -> Variant:
    return lambda values, negated, _has_not: values[neg_kind if negated else pos_kind]


def run_dataset(dsn: str, name: str, per_template: int, subset: str = "long") -> dict[str, Any]:
    """Score every query with every aggregate; the label separation. ``subset``: ``long``
    (the documents longer than the window) or ``all``."""
    ds = load_dataset(SHARED_DATA / name)
    if subset == "long":
        ds = long_only(ds, tokenizer_of(get_embedder(DEFAULT_MODEL)))
    sc = score_variants(
        dsn, ds, per_template, {a: _aggregate(*kinds) for a, kinds in AGGREGATES.items()}
    )
    ids, docs, passages, per = sc.ids, sc.docs, sc.passages, sc.per
    with_not, without, mean = sc.with_not, sc.without, sc.mean
    emb = get_query_embedder(DEFAULT_MODEL)

    table = {
        a: {
            "NOT ndcg@10": mean(a, "ndcg@10", with_not),
            "NOT negrecall@10": mean(a, "negrecall@10", with_not),
            "no-NOT ndcg@10": mean(a, "ndcg@10", without),
        }
        for a in AGGREGATES
    }
    tests = {}
    for a in AGGREGATES:
        if a == "documents":
            continue
        for label, qids, metric in (
            ("NOT ndcg@10", with_not, "ndcg@10"),
            ("NOT negrecall@10", with_not, "negrecall@10"),
            ("no-NOT ndcg@10", without, "ndcg@10"),
        ):
            r = paired_test(
                {q: per["documents"][q][metric] for q in qids}, {q: per[a][q][metric] for q in qids}
            )
            tests[f"{a} | {label}"] = {"delta": r.delta, "p": r.p_value, "n": r.n}
        if a == "max":
            continue
        for label, metric in (("NOT ndcg@10", "ndcg@10"), ("NOT negrecall@10", "negrecall@10")):
            r = paired_test(
                {q: per["max"][q][metric] for q in with_not},
                {q: per[a][q][metric] for q in with_not},
            )
            tests[f"{a} | {label} | vs max"] = {"delta": r.delta, "p": r.p_value, "n": r.n}
    separation = label_separation(ds, ids, docs, passages, emb)
    return {
        "dataset": name, "subset": subset, "documents": len(ids),
        "queries": len(with_not) + len(without),
        "with_not": len(with_not), "without_not": len(without),
        "passages_per_document": sum(len(p) for p in passages) / len(passages),
        "table": table, "tests": tests, "separation": separation,
    }  # fmt: skip


def label_separation(
    ds: Any, ids: list[str], docs: np.ndarray, passages: list[np.ndarray], emb: Any
) -> dict[str, Any]:
    """Per label (≥ 10 long documents): AUC of its term's similarity, documents vs max."""
    labels = dict(zip(ds.doc_ids, ds.labels, strict=True))
    counts: dict[str, int] = {}
    for doc in ids:
        for lab in labels[doc]:
            counts[lab] = counts.get(lab, 0) + 1
    rows = []
    npass = np.array([len(p) for p in passages])
    for lab, n in sorted(counts.items(), key=lambda x: -x[1]):
        if n < 10:
            continue
        v = emb.embed([ds.term_text[lab]])[0]
        sd = docs @ v
        sm = np.array([float((p @ v).max()) for p in passages])
        has = np.array([lab in labels[d] for d in ids])
        rows.append({
            "label": lab, "n": n, "auc_documents": auc(sd[has], sd[~has]),
            "auc_max": auc(sm[has], sm[~has]),
            "raise_with": float((sm - sd)[has].mean()), "raise_without": float((sm - sd)[~has].mean()),
            "corr_raise_passages": float(np.corrcoef(sm - sd, npass)[0, 1]),
        })  # fmt: skip
    keys = ["auc_documents", "auc_max", "raise_with", "raise_without", "corr_raise_passages"]
    return {
        "labels": len(rows),
        "mean": {k: float(np.nanmean([r[k] for r in rows])) for k in keys},
        "rows": rows,
    }


def to_markdown(data: dict[str, Any]) -> str:
    """The results file."""
    out = [
        "# How passages make a term's similarity (`bench/quality/passages_aggregate.py`)",
        "",
        f"- {data['machine_line']}",
        "- Exact NumPy scoring over every long document (longer than the 254-word-piece window) "
        "of each corpus, and over all of its documents (`all`); default family with its AND "
        "texts; 30 derived queries per template; p = two-sided Wilcoxon against `documents` "
        "(unadjusted), and on the NOT queries of `all` also against `max`.",
        "",
    ]
    if data.get("conclusions"):
        out += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    for d in data["datasets"]:
        out += [
            f"## {d['dataset']}: {d['documents']:,} "
            f"{'long documents' if d.get('subset', 'long') == 'long' else 'documents (all)'}, "
            f"{d['passages_per_document']:.2f} passages each; {d['with_not']} queries with NOT, "
            f"{d['without_not']} without",
            "",
        ]
        rows = []
        for a, v in d["table"].items():
            cells = [a]
            for metric in ("NOT ndcg@10", "NOT negrecall@10", "no-NOT ndcg@10"):
                t = d["tests"].get(f"{a} | {metric}")
                extra = "" if t is None else f" ({t['delta']:+.3f}, p {t['p']:.2g})"
                cells.append(f"{v[metric]:.3f}{extra}")
            rows.append(cells)
        out.append(md_table(
            ["aggregate", "NOT nDCG@10", "NOT NegRecall@10 ↓", "no-NOT nDCG@10"], rows
        ))  # fmt: skip
        versus = [
            f"`{a}` nDCG@10 {t['delta']:+.3f} (p {t['p']:.2g}), NegRecall@10 "
            f"{u['delta']:+.3f} (p {u['p']:.2g})"
            for a in d["table"]
            if (t := d["tests"].get(f"{a} | NOT ndcg@10 | vs max"))
            and (u := d["tests"].get(f"{a} | NOT negrecall@10 | vs max"))
        ]
        if versus:
            out += ["", "Against `max` on the NOT queries: " + "; ".join(versus) + "."]
        s = d["separation"]["mean"]
        out += [
            "",
            f"Label separation over {d['separation']['labels']} labels: mean AUC "
            f"{s['auc_documents']:.3f} (documents) → {s['auc_max']:.3f} (max); max raises a "
            f"label's similarity by {s['raise_with']:+.3f} on documents with the label and "
            f"{s['raise_without']:+.3f} on those without; correlation of the raise with the "
            f"number of passages {s['corr_raise_passages']:.2f}.",
            "",
        ]
    return "\n".join(out) + "\n"


def main() -> None:
    """Run (or ``--render``) and write ``bench/quality/results/passages_aggregate.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dsn", required=False)
    ap.add_argument("--only", action="append")
    ap.add_argument("--subset", choices=("long", "all"), default="long")
    ap.add_argument("--per-template", type=int, default=30)
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--conclusions", type=Path)
    args = ap.parse_args()
    jp, mp = RESULTS_DIR / f"{NAME}.json", RESULTS_DIR / f"{NAME}.md"
    data = json.loads(jp.read_text()) if jp.exists() else {"datasets": []}
    if not args.render:
        data = provenance.fresh(data)  # merged with this run: the file names it
        done = {(d["dataset"], d.get("subset", "long")): d for d in data["datasets"]}
        for name in args.only or DATASETS:
            key = (name, args.subset)
            done[key] = run_dataset(args.dsn, name, args.per_template, args.subset)
            print(json.dumps(done[key]["table"], indent=1), flush=True)
            data["datasets"] = [done[(n, s)] for s in ("long", "all") for n in DATASETS
                                if (n, s) in done]  # fmt: skip
            data["machine_line"] = machine_line()
            jp.write_text(json.dumps(data, indent=1) + "\n")
    prov = provenance.of(data)  # this run's, or (--render) the one the JSON holds
    if args.conclusions:
        data["conclusions"] = args.conclusions.read_text()
    jp.write_text(json.dumps(provenance.record(data, prov), indent=1) + "\n")
    mp.write_text(provenance.stamp(to_markdown(data), prov))
    print(mp.read_text())


if __name__ == "__main__":
    main()
