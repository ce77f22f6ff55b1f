"""Can the similarity space itself tell a NOT's traps from its answers? Exact scoring.

``bench/studies/2026-11-26-not-limits/not_limits.md`` found what limits NOT: within a NOT query, the negated term's
similarity ranks the query's trap documents above its relevant ones with a ROC AUC of only
0.75 on arXiv (0.83 on Reuters and Stack Exchange), so every stronger NOT removes answers with
the traps. Everything measured since changed how the similarity is *used*. This script asks
whether, without labels, the similarities themselves can separate better, in three ways:

* **The space** (every vector of the corpus, passages and texts moved the same way):
  *centred* (the corpus's mean document vector subtracted, then renormalised) and *all but
  the top k* (centred, then without the k principal directions of the documents: the
  anisotropy correction of Mu & Viswanath, 2018), for the negated terms alone or for every text.
* **Feedback inside the query's pool** (the :data:`negation.POOL` documents its positive
  part ranks first): each negated term's similarity plus the documents' projection on
  ``b·(mean of the m pool documents most like the negated term) − a·(mean of the rest)``.
  ``bench/studies/2026-11-26-feedback/feedback.py`` moved the term towards its nearest documents over the whole corpus;
  this direction is learned where the NOT has to choose.
* **Domain adaptation of the model**: all-MiniLM-L6-v2 trained for one epoch, without labels,
  on up to 2,000 of the corpus's documents: unsupervised SimCSE (each document against itself
  under another dropout mask, lr 2e-5) or each title against its text (lr 1e-5), in-batch
  negatives, batch 32. Measured on each document's title and text cut at 128 tokens, against
  the base model the same way (document vectors only, no passages).

The first two score every document with the default engine (passages with ``blend-not-or``,
AND texts 4/1, ``not_context`` 0.5, γ 1.25) on :data:`negation.PER_TEMPLATE` derived queries
per template; the AUCs are those of ``not_limits.md`` (*all*: the negated term's similarity for
its label over every document, the term's own vector against the documents' own vectors;
*traps vs relevant*: per NOT query, its negated similarity as the engine takes it for its traps
against its relevant documents).

    .venv/bin/python bench/studies/2026-11-27-not-separation/not_separation.py --dsn DSN [--only CORPUS]   # ~90 min, 2 cores, with the corpora split over two --only runs; most of it trains the models
    .venv/bin/python bench/studies/2026-11-27-not-separation/not_separation.py --render    # the Markdown from the JSON

``DSN``: the database holding the corpora ``eval_<dataset>`` with passages (as for
``not_signals.py``). Writes ``bench/studies/2026-11-27-not-separation/not_separation.{json,md}``.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root: bench.lib
from bench.lib.benchlib import SHARED_DATA, datasets_main, md_table
from bench.lib.exact import REAL, mean_of, scored_runs
from bench.lib.negation import (
    DEFAULT_GAMMA,
    PER_TEMPLATE,
    POOL,
    Exact,
    auc,
    load_exact,
    positive_part,
    trap_auc,
)
from pglogic.engine.conjunction import DEFAULT_AND_TEXT
from pglogic.engine.operators import evaluate_numpy
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import EvalQuery
from pglogic.eval.metrics import paired_test
from pglogic.query import negated_only_terms

RESULTS_DIR = Path(__file__).resolve().parent  # a study keeps its results beside it

NAME = "not_separation"
K = 100
DEFAULT = "default"
#: The spaces: principal directions removed after centring (0: centred only).
SPACES = {"centred": 0, "all but the top 1": 1, "all but the top 3": 3}
#: In-pool feedback (m, b, a).
FEEDBACK = ((10, 0.5, 0.0), (10, 0.5, 0.5), (10, 0.5, 1.0), (5, 1.0, 1.0), (20, 1.0, 1.0))
#: Domain adaptation: name → (pairs, learning rate).
ADAPT = {"SimCSE": ("self", 2e-5), "title → text": ("title", 1e-5)}
TRAIN_DOCS = 2000
MAX_TOKENS = 128
NOT_LOSS = 0.01


def feedback_label(m: int, b: float, a: float) -> str:
    """The label of in-pool feedback (m, b, a)."""
    return f"pool feedback m {m}, b {b:g}, a {a:g}"


def space(docs: np.ndarray, top: int) -> Callable[[np.ndarray], np.ndarray]:
    """The map of a corpus's space: minus the documents' mean, without their ``top`` principal
    directions, renormalised.

    Example:
        >>> t = space(np.eye(3, dtype=np.float32), 0)
        >>> np.round(np.linalg.norm(t(np.eye(3, dtype=np.float32)), axis=1), 3).tolist()
        [1.0, 1.0, 1.0]
    """
    mu = docs.mean(axis=0)
    directions = np.linalg.svd(docs - mu, full_matrices=False)[2][:top]

    def move(x: np.ndarray) -> np.ndarray:
        y = x - mu
        y = y - (y @ directions.T) @ directions
        return np.asarray(y / np.linalg.norm(y, axis=-1, keepdims=True), dtype=np.float32)

    return move


def _moved(ex: Exact, top: int) -> Exact:
    move = space(ex.docs, top)
    return replace(ex, docs=move(ex.docs), pm=move(ex.pm),
                   vecs={t: move(v) for t, v in ex.vecs.items()})  # fmt: skip


def _within(q: EvalQuery, sims: dict[str, np.ndarray], where: dict[str, int]) -> float | None:
    """The AUC of a NOT query's negated similarity (the largest, with several) for its traps
    against its relevant documents; None without both."""
    rel = [where[d] for d in q.relevant if d in where]
    trap = [where[d] for d in q.negatives if d in where]
    if not (rel and trap):
        return None
    return trap_auc(np.max([sims[t] for t in negated_only_terms(q.tree)], axis=0), trap, rel)


def _overall(
    ex: Exact, docs: np.ndarray, vecs: dict[str, np.ndarray], label_docs: dict[str, frozenset[str]]
) -> float:
    """The mean AUC of the negated terms' vectors (against the documents' ``docs``) for their
    labels over every document."""
    where = {d: i for i, d in enumerate(ex.ids)}
    term_label: dict[str, str] = {}
    for q in ex.derived.queries:
        term_label.update(q.term_labels)
    out = []
    for t in sorted({t for q in ex.derived.queries for t in negated_only_terms(q.tree)}):
        positive = np.zeros(len(ex.ids), bool)
        positive[[where[d] for d in label_docs.get(term_label.get(t, ""), ()) if d in where]] = True
        if 0 < positive.sum() < len(positive):
            out.append(auc(docs @ vecs[t], positive))
    return float(np.mean(out))


def scoring(ex: Exact, name: str, label_docs: dict[str, frozenset[str]]) -> dict[str, Any]:
    """The spaces and the in-pool feedback on the default engine (``ex``: the corpus ``name``
    loaded, ``label_docs``: its documents per label): per-query nDCG@10 and NegRecall@10 of
    every variant and of dense retrieval, and each variant's AUCs (*all* only for the spaces
    and the default: in-pool feedback has no similarity outside its query)."""
    moved = {s: _moved(ex, top) for s, top in SPACES.items()}
    labels = [DEFAULT, *(f"{s}, {scope}" for s in SPACES for scope in ("negated terms",
              "every text")), *(feedback_label(*f) for f in FEEDBACK)]  # fmt: skip
    runs: dict[str, dict[str, list[str]]] = {m: {} for m in [*labels, "dense"]}
    within: dict[str, list[float]] = {m: [] for m in labels}
    where = {d: i for i, d in enumerate(ex.ids)}
    rank = f"and=product,or=max,not=complement^{DEFAULT_GAMMA:g}"
    for q, tree in zip(ex.derived.queries, ex.trees, strict=True):
        negated = negated_only_terms(q.tree)
        raw = ex.similarities(q.tree, tree)
        variants = {DEFAULT: raw}
        for s, e in moved.items():
            there = e.similarities(q.tree, tree)
            variants[f"{s}, negated terms"] = raw | {t: there[t] for t in negated}
            variants[f"{s}, every text"] = there
        if negated:
            pool = np.argsort(-positive_part(tree, raw, negated), kind="stable")[:POOL]
            for near_m, b, a in FEEDBACK:
                fed = dict(raw)
                for t in negated:
                    near = pool[np.argsort(-raw[t][pool], kind="stable")]
                    w = b * ex.docs[near[:near_m]].mean(axis=0) - a * ex.docs[near[near_m:]].mean(
                        axis=0
                    )
                    fed[t] = raw[t] + ex.docs @ w
                variants[feedback_label(near_m, b, a)] = fed
        for label in labels:
            sims = variants.get(label, raw)
            score = evaluate_numpy(tree, sims, rank)
            runs[label][q.id] = [ex.ids[j] for j in np.argsort(-score, kind="stable")[:K]]
            if negated and (value := _within(q, sims, where)) is not None:
                within[label].append(value)
        dense = ex.docs @ ex.vecs[q.text]
        runs["dense"][q.id] = [ex.ids[j] for j in np.argsort(-dense, kind="stable")[:K]]
    out = scored_runs(name, ex.derived.queries, runs)
    overall = {DEFAULT: _overall(ex, ex.docs, ex.vecs, label_docs)}
    for s, e in moved.items():  # the term's own vector: the same for both scopes
        overall[f"{s}, negated terms"] = overall[f"{s}, every text"] = _overall(
            e, e.docs, e.vecs, label_docs
        )
    out["separation"] = {m: {"all": overall.get(m), "within": float(np.mean(within[m]))}
                         for m in labels}  # fmt: skip
    return out


def _texts(name: str) -> tuple[list[str], list[str], list[str]]:
    """The corpus's ids, titles (or first 200 characters) and title + text."""
    with gzip.open(SHARED_DATA / name / "corpus.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    ids = [str(r["id"]) for r in rows]
    titles = [r.get("title") or (r.get("text") or "")[:200] for r in rows]
    texts = [f"{r.get('title') or ''}\n{r.get('text') or ''}".strip() for r in rows]
    return ids, titles, texts


def adaptation(
    ex: Exact, name: str, label_docs: dict[str, frozenset[str]]
) -> dict[str, dict[str, float]]:
    """The AUCs of the base model and of each :data:`ADAPT` model trained on the corpus
    (document vectors of the title and text cut at :data:`MAX_TOKENS`)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from pglogic.config import DEFAULT_MODEL
    from pglogic.embed.st import resolve_model_path

    ids, titles, texts = _texts(name)
    position = {d: i for i, d in enumerate(ids)}
    order = [position[d] for d in ex.ids]
    negs = sorted({t for q in ex.derived.queries for t in negated_only_terms(q.tree)})
    where = {d: i for i, d in enumerate(ex.ids)}
    pick = np.random.default_rng(0).permutation(len(texts))[:TRAIN_DOCS]
    out = {}
    for label in ["base model", *ADAPT]:
        torch.manual_seed(0)
        model = SentenceTransformer(str(resolve_model_path(DEFAULT_MODEL)), device="cpu")
        model.max_seq_length = MAX_TOKENS
        if label in ADAPT:
            pairs, lr = ADAPT[label]
            optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
            model.train()
            for b in range(0, len(pick), 32):
                batch = pick[b : b + 32]
                left = [titles[i] if pairs == "title" else texts[i] for i in batch]
                one = model(dict(model.tokenize(left)))["sentence_embedding"]
                two = model(dict(model.tokenize([texts[i] for i in batch])))["sentence_embedding"]
                logits = torch.nn.functional.normalize(one, dim=-1) @ (
                    torch.nn.functional.normalize(two, dim=-1).T
                )
                loss = torch.nn.functional.cross_entropy(logits * 20, torch.arange(len(batch)))
                optimiser.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                optimiser.step()
            model.eval()
        docs = model.encode(texts, batch_size=64, normalize_embeddings=True)[order]
        vecs = dict(zip(negs, model.encode(negs, normalize_embeddings=True), strict=True))
        aucs = [a for q in ex.derived.queries if q.n_negations
                and (a := _within(q, {t: docs @ vecs[t] for t in negated_only_terms(q.tree)},
                                  where)) is not None]  # fmt: skip
        out[label] = {"all": _overall(ex, docs, vecs, label_docs), "within": float(np.mean(aucs))}
        print(name, label, out[label], flush=True)
    return out


def analyse(d: dict[str, Any], adapted: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per variant: AUCs, NOT queries' nDCG@10 (Δ, Wilcoxon p against the default),
    NegRecall@10 ÷ dense's, and the other queries' nDCG@10."""
    per, nots = d["per"], d["with_not"]
    others = [q for q in d["family"] if q not in set(nots)]
    dense = mean_of(per["dense"], nots, "negrecall")
    rows = {}
    for m, sep in d["separation"].items():
        test = paired_test({q: per[DEFAULT][q]["ndcg"] for q in nots},
                           {q: per[m][q]["ndcg"] for q in nots})  # fmt: skip
        rows[m] = {**sep, "not_ndcg": mean_of(per[m], nots, "ndcg"), "delta": test.delta,
                   "p": test.p_value, "nr_ratio": mean_of(per[m], nots, "negrecall") / dense,
                   "other_ndcg": mean_of(per[m], others, "ndcg")}  # fmt: skip
    return {"dataset": d["dataset"], "not_queries": len(nots), "rows": rows,
            "adaptation": adapted}  # fmt: skip


def measure(dsn: str, name: str) -> dict[str, Any]:
    """One corpus: :func:`scoring`, then :func:`adaptation`."""
    ex = load_exact(dsn, name)
    label_docs = load_dataset(SHARED_DATA / name).label_docs()
    return analyse(scoring(ex, name, label_docs), adaptation(ex, name, label_docs))


def choose(data: dict[str, Any]) -> dict[str, Any]:
    """The variants that raise the traps-vs-relevant AUC on every corpus, and those that keep
    the NOT queries' nDCG@10 within :data:`NOT_LOSS` while removing more traps everywhere."""
    an = data["analysis"]
    rows = list(an[0]["rows"])
    better = [m for m in rows if m != DEFAULT and all(
        a["rows"][m]["within"] > a["rows"][DEFAULT]["within"] for a in an)]  # fmt: skip
    cheaper = [m for m in rows if m != DEFAULT and all(
        a["rows"][m]["delta"] >= -NOT_LOSS
        and a["rows"][m]["nr_ratio"] < a["rows"][DEFAULT]["nr_ratio"] for a in an)]  # fmt: skip
    adapted = [m for m in ADAPT if all(
        a["adaptation"][m]["within"] > a["adaptation"]["base model"]["within"] for a in an)]  # fmt: skip
    return {"separates better everywhere": better, "removes traps cheaply everywhere": cheaper,
            "adaptation separates better everywhere": adapted}  # fmt: skip


def to_markdown(data: dict[str, Any]) -> str:
    """The results file."""
    an = data["analysis"]
    lines = [
        "# Can the similarity space tell a NOT's traps from its answers? "
        "(`bench/studies/2026-11-27-not-separation/not_separation.py`)",
        "",
        f"- {data['machine_line']}",
        f"- Exact NumPy scoring of every document, the default engine (passages with "
        f"`blend-not-or`, AND texts {DEFAULT_AND_TEXT}/1, `not_context` 0.5, γ "
        f"{DEFAULT_GAMMA:g}), {PER_TEMPLATE} derived queries per template, all-MiniLM-L6-v2. "
        "AUC *all*: the negated term's similarity for its label over every document; *traps vs "
        "relevant*: per NOT query, for its traps against its relevant documents (the choice NOT "
        "has to make). NegRecall@10 / dense: the goal is ≤ 0.20.",
        "",
    ]
    if data.get("conclusions"):
        lines += ["## Conclusions", "", data["conclusions"].rstrip(), ""]
    lines += ["## The space and in-pool feedback", "",
              "Per corpus: AUC all / traps vs relevant; NOT queries' nDCG@10 (Δ against the "
              f"default, Wilcoxon p) / NegRecall@10 ÷ dense's; the other queries' nDCG@10. ✗: "
              f"the NOT queries lose more than {NOT_LOSS} nDCG@10.", ""]  # fmt: skip

    def cell(r: dict[str, float], base: bool) -> str:
        flag = " ✗" if r["delta"] < -NOT_LOSS else ""
        change = "" if base else f" ({r['delta']:+.3f}, p {r['p']:.2g})"
        whole = "—" if r["all"] is None else f"{r['all']:.3f}"
        return (f"{whole} / {r['within']:.3f}; {r['not_ndcg']:.3f}{change} / "
                f"{r['nr_ratio']:.2f}{flag}; {r['other_ndcg']:.3f}")  # fmt: skip

    rows = [[m, *(cell(a["rows"][m], m == DEFAULT) for a in an)] for m in an[0]["rows"]]
    lines += [md_table(["variant", *(a["dataset"] for a in an)], rows), ""]
    lines += ["## Domain adaptation of the model", "",
              f"AUC all / traps vs relevant, document vectors only (title and text cut at "
              f"{MAX_TOKENS} tokens), one epoch on up to {TRAIN_DOCS:,} of the corpus's "
              "documents, no labels.", ""]  # fmt: skip
    rows = [[m, *(f"{a['adaptation'][m]['all']:.3f} / {a['adaptation'][m]['within']:.3f}"
                  for a in an)] for m in an[0]["adaptation"]]  # fmt: skip
    lines += [md_table(["model", *(a["dataset"] for a in an)], rows), ""]
    if "choice" in data:
        lines += ["## On every corpus", ""]
        lines += [f"- {k}: {'; '.join(v) if v else 'none'}" for k, v in data["choice"].items()]
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    """Run (or ``--render``) and write ``bench/studies/2026-11-27-not-separation/not_separation.{json,md}``.

    Example:
        >>> main()  # doctest: +SKIP
    """
    datasets_main(__doc__, NAME, REAL, measure, choose, to_markdown, results_dir=RESULTS_DIR)


if __name__ == "__main__":
    main()
