"""What limits NOT on arXiv, and what closes the papers' gap on Reuters (issue 21's open targets).

Issue 21 has two targets left: NegRecall@10 at least 80% lower than dense retrieval on every
real corpus (arXiv: 66%), and a significant win (p < 0.01) over every paper's method on every
corpus (Reuters against NSFL: p = 0.032). ``bench/quality/results/frontier.md`` (operator strengths,
adaptive NOTs over the corpus) and ``bench/studies/2026-11-26-feedback/feedback.md`` (feedback on the terms) found
no default that reaches the first. This benchmark measures the directions left, every document
scored exactly in NumPy with the default engine (product AND, max OR, NOT (1 − x)^γ with
γ = 1.25, each AND's own text at weight 4, 1 beside a NOT), 30 derived queries per template:

* **A. Separation.** How well a negated term's similarity tells the documents that carry its
  label from the rest: over every document, and *within the query's positive part* (the trap
  documents against the relevant ones of the same NOT query, which is the choice NOT makes).
  For the raw similarity and the two document-side changes below.
* **B. Other NOTs.** On the NOT queries, nDCG@10 and NegRecall@10 relative to dense for:
  - a stronger γ;
  - *neighbour smoothing*: the negated term scored against each document's vector moved
    towards the mean of its k nearest documents (d' = normalise(d + α·mean kNN(d))), so a
    document in a category's cluster scores like its neighbours;
  - *sentence level*: the negated term takes the document's best 64-word-piece passage (a
    label named in one sentence of a long abstract);
  - *pool-relative NOTs*: the negated similarity rescaled within the query's pool (the top M
    documents of the positive part, a window over the statement's candidates): divided by the
    pool's maximum (NSFL's S̃), min–max, its percentile, or a z-score sigmoid;
  - *the question's own text* (the whole formula as one phrase, "grain but not wheat", NSFL's
    fused query) as one more factor of the score at weight w, with a stronger γ to pay for it.
* **C. An upper bound for a per-query strength.** With the labels, the best γ per query (a
  Lagrangian sweep of nDCG@10 − λ·NegRecall@10) bounds what any rule choosing the NOT's
  strength per query could reach. Then whether an unsupervised signal predicts it: the NOT
  queries binned by the cosine between the positive and the negated terms' vectors, each bin's
  nDCG@10 at every γ.
* **D. The papers' gap on Reuters, one vector per document.** The default against NSFL over
  every Reuters query, as ``bench/quality/quality.py`` measured it over one vector per document (its
  run committed at :data:`ONE_VECTOR_RUN`; paired Wilcoxon on the per-query nDCG@10), and
  with each query's exact change from feedback on the positive terms of queries without NOT
  (m = 10, β = 0.5, ``bench/studies/2026-11-26-feedback/feedback.md``) added.

    .venv/bin/python bench/studies/2026-11-26-not-limits/not_limits.py     # ~10-20 min the first time (embeds the sentences); no database

Vectors come from ``bench/studies/2026-11-26-feedback/feedback.py``'s cache (it embeds what is missing); the sentence
passages are cached under ``/tmp/pglogic-limits``. Writes ``bench/studies/2026-11-26-not-limits/not_limits.{json,md}``.
"""

from __future__ import annotations

import itertools
import json
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit
from scipy.stats import wilcoxon

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib.benchlib import BENCH_DIR, SHARED_DATA, machine_line, md_table, results_main
from bench.lib.exact import REAL, metrics
from bench.lib.negation import auc, trap_auc
from bench.lib.prf import NOT_POWER, Candidate, combine, load, negated_terms
from bench.lib.prf import Corpus as Vectors
from bench.lib.prf import score as feedback_score
from pglogic.config import DEFAULT_MODEL
from pglogic.embed.passages import split, tokenizer_of
from pglogic.embed.registry import get_embedder
from pglogic.eval.data import load_dataset
from pglogic.query import And, Node, Not, Or, Term, terms
from pglogic.store.readers import read_records

RESULTS_DIR = Path(__file__).resolve().parent  # a study keeps its results beside it

CACHE = Path("/tmp/pglogic-limits")
#: The commit whose ``bench/quality`` results are the last run over one vector per document
#: (before the quality benchmark moved to the default layout, passages).
ONE_VECTOR_RUN = "3a0afe1"
SENTENCE_TOKENS, SENTENCE_OVERLAP = 64, 16
GAMMAS = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 10.0)
POOL = 100
SMOOTHING = ((10, 1.0), (20, 3.0))  # (k, α)
QUESTION = ((0.25, 1.25), (0.25, 2.0), (0.5, 2.0), (0.5, 3.0))  # (weight, γ)
#: A truth for a negated term's similarity ``s`` given the pool's indices ``p``.
Truth = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _pct(s: np.ndarray, p: np.ndarray) -> np.ndarray:
    return np.asarray(np.searchsorted(np.sort(s[p]), s) / len(p))


POOL_NOTS: dict[str, tuple[Truth, float]] = {
    "pool max (S̃), γ 1.25": (lambda s, p: s / (s[p].max() + 1e-6), 1.25),
    "pool min–max, γ 1.25": (lambda s, p: (s - s[p].min()) / (np.ptp(s[p]) + 1e-6), 1.25),
    "pool percentile, γ 0.5": (_pct, 0.5),
    "pool percentile, γ 1": (_pct, 1.0),
    "pool z-sigmoid σ(2z)": (lambda s, p: expit(2 * (s - s[p].mean()) / (s[p].std() + 1e-6)), 1.0),
    "pool z-sigmoid σ(2(z − 1))": (
        lambda s, p: expit(2 * ((s - s[p].mean()) / (s[p].std() + 1e-6) - 1)), 1.0),
}  # fmt: skip


def sentence_max(name: str, c: Vectors) -> Callable[[str], np.ndarray]:
    """``text`` -> every document's best similarity over its 64-word-piece passages (and its
    own vector), the passages embedded once and cached."""
    path = CACHE / f"{name}_{SENTENCE_TOKENS}_{SENTENCE_OVERLAP}.pkl"
    if path.exists():
        owner, vectors = pickle.loads(path.read_bytes())
    else:
        ds = load_dataset(SHARED_DATA / name)
        embedder = get_embedder(DEFAULT_MODEL)
        tok = tokenizer_of(embedder)
        texts, owners = [], []
        for i, r in enumerate(read_records(ds.corpus_file)):
            t = r.embed_text
            for sp in split(t, tok.offsets(t), SENTENCE_TOKENS, SENTENCE_OVERLAP):
                texts.append(t[sp.start : sp.end])
                owners.append(i)
        vectors = np.concatenate(
            [np.asarray(embedder.embed(texts[i : i + 256]), np.float32)
             for i in range(0, len(texts), 256)]
        )  # fmt: skip
        owner = np.array(owners)
        CACHE.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps((owner, vectors)))
    starts = np.r_[0, np.flatnonzero(np.diff(owner)) + 1]
    memo: dict[str, np.ndarray] = {}

    def best(text: str) -> np.ndarray:
        if text not in memo:
            per = np.maximum.reduceat(vectors @ c.vectors[c.sims.col[text]], starts)
            memo[text] = np.maximum(per, c.sims.s(text))
        return memo[text]

    return best


def smoothed(c: Vectors, k: int, alpha: float) -> Callable[[str], np.ndarray]:
    """``text`` -> its similarity to every document's vector moved towards its k neighbours."""
    docs = c.docs
    near = np.empty((len(docs), k), np.int64)
    for i in range(0, len(docs), 1024):
        s = docs[i : i + 1024] @ docs.T
        s[np.arange(s.shape[0]), np.arange(i, i + s.shape[0])] = -np.inf  # not itself
        near[i : i + 1024] = np.argpartition(-s, k, axis=1)[:, :k]
    moved = docs + alpha * docs[near].mean(1)
    moved /= np.linalg.norm(moved, axis=1, keepdims=True)
    memo: dict[str, np.ndarray] = {}

    def sim(text: str) -> np.ndarray:
        if text not in memo:
            memo[text] = moved @ c.vectors[c.sims.col[text]]
        return memo[text]

    return sim


def engine(
    c: Vectors,
    node: Node,
    *,
    gamma: float = NOT_POWER,
    negated_sim: Callable[[str], np.ndarray] | None = None,
    truth: Truth | None = None,
    pool: np.ndarray | None = None,
    negated: bool = False,
) -> np.ndarray:
    """The default engine's score of every document; negated terms may take another
    similarity (``negated_sim``) and a pool-relative truth (``truth`` over ``pool``).
    ``pool=None`` with ``truth`` set scores the positive part (every NOT is 1)."""
    kw: dict[str, Any] = {"gamma": gamma, "negated_sim": negated_sim, "truth": truth, "pool": pool}
    if isinstance(node, Term):
        s = (negated_sim or c.sims.s)(node.text) if negated else c.sims.s(node.text)
        s = np.clip(s, 0.0, 1.0)
        if negated and truth is not None and pool is not None:
            s = np.clip(truth(s, pool), 0.0, 1.0)
        return np.asarray(s)
    if isinstance(node, Not):
        if truth is not None and pool is None:
            return np.ones(len(c.docs))
        return np.asarray((1.0 - engine(c, node.child, negated=not negated, **kw)) ** gamma)
    if not isinstance(node, And | Or):
        raise TypeError(f"no lexical terms in the derived queries: {node!r}")
    return combine(c.sims, node, [engine(c, k, negated=negated, **kw) for k in node.children])


def not_queries(c: Vectors) -> list[dict[str, Any]]:
    """The derived queries with a NOT."""
    return [q for q in c.sims.queries if q["n_neg"]]


def table_row(
    c: Vectors, fn: Callable[[dict[str, Any]], np.ndarray], dense_nr: float
) -> dict[str, float]:
    """Mean NOT nDCG@10, NegRecall@10 and its ratio to dense, of a scoring ``fn`` per query."""
    res = np.array([metrics(c.sims, q, fn(q)) for q in not_queries(c)])
    nr = float(np.nanmean(res[:, 1]))
    return {"not_ndcg": float(res[:, 0].mean()), "negrecall": nr, "ratio": nr / dense_nr}


def pooled(c: Vectors, q: dict[str, Any], truth: Truth, gamma: float) -> np.ndarray:
    """Score ``q`` with a pool-relative NOT: the pool is the positive part's top :data:`POOL`."""
    positive = engine(c, q["tree"], truth=truth)
    pool = np.argpartition(-positive, POOL)[:POOL]
    return engine(c, q["tree"], gamma=gamma, truth=truth, pool=pool)


def separation(c: Vectors, sims: dict[str, Callable[[str], np.ndarray]]) -> dict[str, Any]:
    """Mean AUC of negated terms for their labels over every document, and of the queries'
    negated similarity (the largest, with several) for trap against relevant documents."""
    where = {d: i for i, d in enumerate(c.sims.ids)}
    texts = sorted(set().union(*(negated_terms(q["tree"]) for q in c.sims.queries)))
    out: dict[str, Any] = {}
    for name, sim in sims.items():
        overall = []
        for t in texts:
            if t in c.label_of:
                positive = np.zeros(len(where), bool)
                positive[[where[d] for d in c.label_docs[c.label_of[t]] if d in where]] = True
                overall.append(auc(sim(t), positive))
        within = []
        for q in not_queries(c):
            rel = [where[d] for d in q["relevant"] if d in where]
            trap = [where[d] for d in q["negatives"] if d in where]
            if rel and trap:
                s = np.max([sim(t) for t in negated_terms(q["tree"])], axis=0)
                within.append(trap_auc(s, trap, rel))
        out[name] = {"overall": float(np.mean(overall)), "within": float(np.mean(within)),
                     "queries": len(within)}  # fmt: skip
    return out


def oracle(c: Vectors, dense_nr: float) -> dict[str, Any]:
    """Per-query best γ with the labels (upper bound), and nDCG@10 per γ in bins of the cosine
    between the positive and negated terms' vectors."""
    qs = not_queries(c)
    grid = np.array([[metrics(c.sims, q, engine(c, q["tree"], gamma=g)) for g in GAMMAS]
                     for q in qs])  # fmt: skip
    grid = np.nan_to_num(grid)
    bound = {}
    for lam in (0.5, 1.0, 2.0):
        pick = np.argmax(grid[:, :, 0] - lam * grid[:, :, 1], axis=1)
        sel = grid[np.arange(len(qs)), pick]
        bound[f"{lam:g}"] = {"not_ndcg": float(sel[:, 0].mean()),
                             "ratio": float(sel[:, 1].mean() / dense_nr)}  # fmt: skip

    def vec(t: str) -> np.ndarray:
        return np.asarray(c.vectors[c.sims.col[t]])

    cos = []
    for q in qs:
        neg = negated_terms(q["tree"])
        pos = set(terms(q["tree"])) - neg
        cos.append(max([float(vec(a) @ vec(b)) for a in pos for b in neg] or [-1.0]))
    cosines = np.array(cos)
    bins = []
    edges = (-1.0, 0.2, 0.3, 0.4, 0.5, 1.01)
    for lo, hi in itertools.pairwise(edges):
        m = (cosines >= lo) & (cosines < hi)
        if m.sum():
            bins.append({"range": [lo, min(hi, 1.0)], "queries": int(m.sum()),
                         "ndcg": grid[m, :, 0].mean(0).tolist(),
                         "negrecall": grid[m, :, 1].mean(0).tolist()})  # fmt: skip
    return {"bound": bound, "bins": bins}


def papers_gap(c: Vectors, name: str) -> dict[str, Any]:
    """Default against NSFL on the committed per-query nDCG@10, and with feedback's change."""
    path = f"bench/quality/{name}/results.json"
    shown = subprocess.run(["git", "show", f"{ONE_VECTOR_RUN}:{path}"], cwd=BENCH_DIR.parent,
                           capture_output=True, text=True, check=True)  # fmt: skip
    results = json.loads(shown.stdout)
    ours, nsfl = (
        results["per_query"]["pglogic[product-max-strong]"],
        results["per_query"]["pglogic-nsfl"],
    )
    memo: dict[Any, np.ndarray] = {}
    fb = Candidate(pos=(10, 0.5), pos_without_not=True)
    delta = {}
    for q in c.sims.queries:
        has_not = bool(q["n_neg"])
        before = metrics(
            c.sims, q, feedback_score(c, q["tree"], Candidate(), memo, has_not=has_not)
        )
        after = metrics(c.sims, q, feedback_score(c, q["tree"], fb, memo, has_not=has_not))
        delta[q["id"]] = after[0] - before[0]
    ids = sorted(set(ours) & set(nsfl) & set(delta))
    a = np.array([ours[i][0] for i in ids])
    b = np.array([nsfl[i][0] for i in ids])
    d = np.array([delta[i] for i in ids])
    return {"queries": len(ids), "default": float(a.mean()), "nsfl": float(b.mean()),
            "p": float(wilcoxon(a, b).pvalue), "with_feedback": float((a + d).mean()),
            "p_with_feedback": float(wilcoxon(a + d, b).pvalue),
            "changed": int((d != 0).sum())}  # fmt: skip


def measure(name: str) -> dict[str, Any]:
    """Sections A to C for one corpus."""
    c = load(name)
    dense_nr = float(np.nanmean([metrics(c.sims, q, c.sims.s(q["text"]))[1]
                                 for q in not_queries(c)]))  # fmt: skip
    sentence = sentence_max(name, c)
    smooth = {f"neighbours k={k}, α={a:g}": smoothed(c, k, a) for k, a in SMOOTHING}
    rows: dict[str, dict[str, float]] = {}
    for g in GAMMAS:
        label = "default (γ 1.25)" if g == NOT_POWER else f"γ {g:g}"
        rows[label] = table_row(c, lambda q, g=g: engine(c, q["tree"], gamma=g), dense_nr)
    for label, sim in {**smooth, "best 64-piece passage": sentence}.items():
        for g in (NOT_POWER, 2.0):
            rows[f"{label}, γ {g:g}"] = table_row(
                c, lambda q, s=sim, g=g: engine(c, q["tree"], gamma=g, negated_sim=s), dense_nr
            )
    for label, (truth, g) in POOL_NOTS.items():
        rows[label] = table_row(c, lambda q, t=truth, g=g: pooled(c, q, t, g), dense_nr)
    for w, g in QUESTION:
        rows[f"question's text at weight {w:g}, γ {g:g}"] = table_row(
            c,
            lambda q, w=w, g=g: (
                engine(c, q["tree"], gamma=g) * np.clip(c.sims.s(q["text"]), 0.0, 1.0) ** w
            ),
            dense_nr,
        )
    print(name, {k: round(v["ratio"], 2) for k, v in rows.items()}, flush=True)
    return {
        "dense_negrecall": dense_nr,
        "separation": separation(c, {"raw": c.sims.s, **smooth, "best 64-piece passage": sentence}),
        "rows": rows,
        "oracle": oracle(c, dense_nr),
    }


def run() -> dict[str, Any]:
    """The measurements (see the module docstring)."""
    return {"machine": machine_line(), "pool": POOL, "gammas": GAMMAS,
            "corpora": {name: measure(name) for name in REAL},
            "papers_gap": {"reuters21578": papers_gap(load("reuters21578"), "reuters21578")}}  # fmt: skip


def markdown(data: dict[str, Any]) -> str:
    """The results as Markdown."""
    corpora = data["corpora"]
    lines = [
        "# What limits NOT, and the papers' gap (`bench/studies/2026-11-26-not-limits/not_limits.py`)",
        "",
        f"Machine: {data['machine']}. Every document scored exactly (NumPy), 30 derived queries "
        "per template, all-MiniLM-L6-v2, the default engine; NOT queries only unless said. "
        "NegRecall@10 / dense: the goal is ≤ 0.20 (80% fewer traps than dense retrieval). The "
        "rule of `bench/quality/frontier.py`: NOT queries may lose at most 0.01 nDCG@10 against the "
        "default.",
        "",
        "## A. Separation",
        "",
        "Mean ROC AUC of the negated terms' similarity: over every document for the term's "
        "label (*all*), and per NOT query for its trap documents against its relevant ones "
        "(*traps vs relevant*: the choice NOT has to make).",
        "",
    ]
    names = list(next(iter(corpora.values()))["separation"])
    lines.append(
        md_table(
            ["corpus", *(f"{n}: all / traps vs relevant" for n in names)],
            [[c, *(f"{v['separation'][n]['overall']:.3f} / {v['separation'][n]['within']:.3f}"
                   for n in names)] for c, v in corpora.items()],
        )
    )  # fmt: skip
    lines += ["", "## B. NOT queries: nDCG@10 / NegRecall@10 relative to dense", ""]
    labels = list(next(iter(corpora.values()))["rows"])
    rows = []
    for label in labels:
        cells = []
        for v in corpora.values():
            r, base = v["rows"][label], v["rows"]["default (γ 1.25)"]
            flag = " ✗" if r["not_ndcg"] < base["not_ndcg"] - 0.01 else ""
            cells.append(f"{r['not_ndcg']:.3f} / {r['ratio']:.2f}{flag}")
        rows.append([label, *cells])
    lines.append(md_table(["NOT", *corpora], rows))
    lines += ["", "✗: loses more than 0.01 nDCG@10 on NOT queries against the default.", ""]
    lines += ["## C. A per-query strength: the upper bound, and what predicts it", ""]
    lines.append(
        "With the labels, the best γ of "
        + ", ".join(f"{g:g}" for g in data["gammas"])
        + " for each query (maximising nDCG@10 − λ·NegRecall@10):"
    )
    lines.append("")
    lams = list(next(iter(corpora.values()))["oracle"]["bound"])
    lines.append(
        md_table(
            ["corpus", "default", *(f"best γ per query, λ = {lam}" for lam in lams)],
            [[c, f"{v['rows']['default (γ 1.25)']['not_ndcg']:.3f} / "
                 f"{v['rows']['default (γ 1.25)']['ratio']:.2f}",
              *(f"{v['oracle']['bound'][lam]['not_ndcg']:.3f} / "
                f"{v['oracle']['bound'][lam]['ratio']:.2f}" for lam in lams)]
             for c, v in corpora.items()],
        )
    )  # fmt: skip
    lines += ["", "nDCG@10 at each γ, NOT queries binned by the largest cosine between a "
              "positive and a negated term of the query (no labels needed):", ""]  # fmt: skip
    for c, v in corpora.items():
        lines += [f"**{c}**", ""]
        lines.append(
            md_table(
                ["cosine", "queries", *(f"γ {g:g}" for g in data["gammas"])],
                [[f"{b['range'][0]:.1f}–{b['range'][1]:.1f}", b["queries"],
                  *(f"{x:.3f}" for x in b["ndcg"])] for b in v["oracle"]["bins"]],
            )
        )  # fmt: skip
        lines.append("")
    gap = data["papers_gap"]["reuters21578"]
    lines += [
        "## D. Reuters, one vector per document: the default against NSFL",
        "",
        md_table(
            ["", "queries", "default nDCG@10", "NSFL", "Wilcoxon p (two-sided)"],
            [[f"as `bench/quality/quality.py` measured at {ONE_VECTOR_RUN}", gap["queries"], f"{gap['default']:.4f}",
              f"{gap['nsfl']:.4f}", f"{gap['p']:.4f}"],
             [f"+ feedback on positive terms without NOT ({gap['changed']} queries change)",
              gap["queries"], f"{gap['with_feedback']:.4f}", f"{gap['nsfl']:.4f}",
              f"{gap['p_with_feedback']:.4f}"]],
        ),
    ]  # fmt: skip
    if data.get("conclusions"):
        lines += ["", "## Conclusions", "", data["conclusions"].rstrip()]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run the measurements; write ``bench/studies/2026-11-26-not-limits/not_limits.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    results_main("not_limits", __doc__, run, markdown, results_dir=RESULTS_DIR)


if __name__ == "__main__":
    main()
