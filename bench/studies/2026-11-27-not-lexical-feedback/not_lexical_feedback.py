"""Can the *words* of a negated term's nearest documents tell a NOT's traps from its answers?
Exact scoring.

``not_mention.md`` gave NOT a second kind of evidence: whether a document's words match the
negated term as a phrase. It reached the goal on Reuters and Stack Exchange, where 52–58% of a
NOT query's traps mention the term, but not on arXiv, whose category names are not words of its
abstracts (5% of the traps mention them). This script asks whether the words that *go with* a
negated term can stand in for its name there, learned without labels (pseudo-relevance
feedback in the lexical space, as the vectors' in ``feedback.md`` and ``not_separation.md``):

* take the p documents most similar to the negated term (*corpus*: over every document;
  *pool*: among the 300 documents the query's positive part ranks first, which one statement
  already fetches);
* its *signature*: the n lexemes of the corpus's lexical index (``tsv``: the same words
  ``match:`` and ``not_mention`` use) most over-represented in those p documents against the
  corpus (or the pool), log-odds with ½ smoothing, each in at least 3 of them, the lexemes of
  the query's positive terms left out;
* a document's *lexical score* m: the share of the signature's weight its lexemes carry.

Per NOT query, the ROC AUC of its traps against its relevant documents (ties: mean rank) of
the negated similarity as the default engine takes it (*s*; the largest, with several negated
terms), of m, and of ``s + β·m``; and of the default's mention floor ``max(s, 0.4·mention)``
for reference. The AUC is what limits a NOT (``not_limits.md``): 0.75 on arXiv.

    .venv/bin/python bench/studies/2026-11-27-not-lexical-feedback/not_lexical_feedback.py --dsn DSN [--only CORPUS]   # ~5-10 min, 2 cores
    .venv/bin/python bench/studies/2026-11-27-not-lexical-feedback/not_lexical_feedback.py --render    # the Markdown from the JSON

``DSN``: the database holding the corpora ``eval_<dataset>`` with passages and a lexical index
(as for ``not_mention.py``). Writes ``bench/studies/2026-11-27-not-lexical-feedback/not_lexical_feedback.{json,md}``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib.benchlib import datasets_main, md_table
from bench.lib.exact import REAL
from bench.lib.negation import lexemes, load_exact, mentions, positive_part, signature, trap_auc
from pglogic.engine.negation import DEFAULT_NOT_MENTION
from pglogic.query import negated_only_terms, terms

RESULTS_DIR = Path(__file__).resolve().parent  # a study keeps its results beside it

NAME = "not_lexical_feedback"
POOL = 300
#: (where the p documents come from, p, n).
SETTINGS = tuple((w, p, n) for w in ("corpus", "pool") for p in (10, 30) for n in (10, 30))
BETAS = (0.2, 0.4, 0.8)


def setting(where: str, p: int, n: int) -> str:
    """A feedback setting's name.

    Example:
        >>> setting("pool", 10, 30)
        'pool, p 10, n 30'
    """
    return f"{where}, p {p}, n {n}"


def run_dataset(dsn: str, name: str) -> dict[str, Any]:
    """Per NOT query, the AUC of its traps against its relevant documents for every score."""
    ex = load_exact(dsn, name)
    queries = [(q, tr) for q, tr in zip(ex.derived.queries, ex.trees, strict=True) if q.n_negations]
    texts = sorted({t for q, _ in queries for t in terms(q.tree)})
    x, own = lexemes(dsn, name, ex.ids, texts)
    negs = sorted({t for q, _ in queries for t in negated_only_terms(q.tree)})
    said = mentions(dsn, name, ex.ids, negs)
    where = {d: i for i, d in enumerate(ex.ids)}
    everyone = np.arange(len(ex.ids))
    out: dict[str, list[float]] = {}
    for q, tree in queries:
        rel = [where[d] for d in q.relevant if d in where]
        trap = [where[d] for d in q.negatives if d in where]
        negated = negated_only_terms(q.tree)
        if not (rel and trap and negated):
            continue
        sims = ex.similarities(q.tree, tree)
        s = np.max([sims[t] for t in negated], axis=0)
        floor = np.max([np.maximum(sims[t], DEFAULT_NOT_MENTION * said[t]) for t in negated], 0)
        scores = {"s": s, f"max(s, {DEFAULT_NOT_MENTION:g}·mention)": floor}
        pool = np.argsort(-positive_part(tree, sims, negated), kind="stable")[:POOL]
        leave_out = set().union(*(own[t] for t in terms(q.tree) if t not in negated))
        for w, p, n in SETTINGS:
            base = everyone if w == "corpus" else pool
            m = np.zeros(len(ex.ids))
            for t in negated:
                top = base[np.argsort(-sims[t][base], kind="stable")[:p]]
                sig = signature(x, top, base, n, leave_out)
                m = np.maximum(m, (x @ sig) / max(sig.sum(), 1e-9))
            scores[f"m: {setting(w, p, n)}"] = m
            for b in BETAS:
                scores[f"s + {b:g}·m: {setting(w, p, n)}"] = s + b * m
        for k, v in scores.items():
            out.setdefault(k, []).append(trap_auc(v, trap, rel))
    return {"dataset": name, "queries": len(out["s"]),
            "auc": {k: float(np.mean(v)) for k, v in out.items()}}  # fmt: skip


def choose(data: dict[str, Any]) -> dict[str, Any]:
    """The best score per corpus (by mean AUC), and its gain over ``s``."""
    out = {}
    for a in data["analysis"]:
        best = max(a["auc"], key=a["auc"].get)
        out[a["dataset"]] = {"best": best, "gain": a["auc"][best] - a["auc"]["s"]}
    return out


def to_markdown(data: dict[str, Any]) -> str:
    """The results page."""
    names = [a["dataset"] for a in data["analysis"]]
    by = {a["dataset"]: a for a in data["analysis"]}
    keys = list(data["analysis"][0]["auc"])
    lines = [
        "# Lexical feedback for NOT: the words of a negated term's nearest documents "
        "(`bench/studies/2026-11-27-not-lexical-feedback/not_lexical_feedback.py`)",
        "",
        f"{data['machine_line']}. Every document scored exactly (NumPy) at the default engine, "
        "50 derived queries per template, all-MiniLM-L6-v2; NOT queries with both traps and "
        "relevant documents. Cells: the mean over queries of the ROC AUC of a query's traps "
        "against its relevant documents (higher: the score tells them apart better; 0.5: not "
        "at all). *s*: the negated similarity as the default engine takes it; *m*: the share of "
        "the signature's weight a document's lexemes carry (*corpus* / *pool*: feedback from the "
        "p documents nearest the negated term over the corpus / among the 300 the positive part "
        "ranks first; n lexemes).",
        "",
    ]
    if data.get("conclusions"):
        lines += ["## Conclusions", "", data["conclusions"].strip(), ""]
    lines += ["## Mean AUC, traps against relevant documents", ""]
    head = ["score", *(f"{n} ({by[n]['queries']} queries)" for n in names)]
    lines.append(md_table(head, [[k, *(f"{by[n]['auc'][k]:.3f}" for n in names)] for k in keys]))
    lines += ["", "Best per corpus:", ""]
    for n, c in data["choice"].items():
        lines.append(f"- {n}: `{c['best']}`, {c['gain']:+.3f} over *s*")
    return "\n".join(lines) + "\n"


def main() -> None:
    """The command line (see the module docstring)."""
    datasets_main(__doc__, NAME, REAL, run_dataset, choose, to_markdown, results_dir=RESULTS_DIR)


if __name__ == "__main__":
    main()
