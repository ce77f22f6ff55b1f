"""Exact scoring on the real corpora: every document ranked in NumPy, and the leave-one-corpus-out
rule that chose the defaults.

From ``bench/quality/frontier.py``: the three real corpora (:data:`REAL`), the texts and vectors of
the derived queries (:func:`query_texts`), nDCG@10 and NegRecall@10 of a ranking (:func:`metrics`),
the objective J and its rule (:func:`objective`, :func:`leave_one_out`). From
``bench/quality/passages_aggregate.py``: a corpus's document and passage vectors
(:func:`load_corpus`), a text's per-document values over passages (:func:`per_document`) and every
derived query scored under each variant (:func:`score_variants`). From
``bench/quality/family_losses.py``: per-query metrics of methods' rankings (:func:`scored_runs`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql

from pglogic.config import DEFAULT_MODEL
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, own_weights, scored_terms, with_and_texts
from pglogic.engine.operators import DEFAULT_FAMILY, evaluate_numpy
from pglogic.eval.compare import family_of
from pglogic.eval.derive import derive_queries
from pglogic.eval.metrics import evaluate_run
from pglogic.query import And, Node, Not, Or, negated_only_terms, terms, to_text
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect

REAL = ("reuters21578", "stackexchange_cooking_robotics", "arxiv_0704")


PER_TEMPLATE = 30


CUT = 0.2  # NegRecall@10 at most 20% of dense retrieval's


#: An excess of 0.1 in NegRecall@10 / dense (above 0.2) costs as much as 0.025 nDCG@10.
PENALTY = 0.25


#: The most nDCG@10 on NOT queries a candidate may lose against the old default, per corpus.
KEEP = 0.01


def and_texts(node: Node) -> set[str]:
    """The texts of every AND node's positive operands (two or more), and of every OR node, as
    one phrase each."""
    out: set[str] = set()
    if isinstance(node, Not):
        return and_texts(node.child)
    if isinstance(node, And | Or):
        if isinstance(node, And):
            pos = [c for c in node.children if not isinstance(c, Not)]
            if len(pos) >= 2:
                out.add(to_text(And(tuple(pos))))
        else:
            out.add(to_text(node))
        for c in node.children:
            out |= and_texts(c)
    return out


@dataclass
class Corpus:
    """One corpus: every query's texts' similarities to every document."""

    name: str
    ids: np.ndarray
    sims: np.ndarray  # documents × texts
    col: dict[str, int]
    queries: list[dict[str, Any]]

    def s(self, text: str) -> np.ndarray:
        return self.sims[:, self.col[text]]

    def z(self, text: str) -> np.ndarray:
        s = self.s(text)
        return (s - s.mean()) / s.std()


def query_texts(derived: Any) -> tuple[list[str], np.ndarray, list[dict[str, Any]]]:
    """Every text the derived queries score (terms, whole queries, AND and OR texts), sorted,
    with its vector, and each query as a dict."""
    texts: set[str] = set()
    queries = []
    for q in derived.queries:
        texts |= set(terms(q.tree)) | {q.text} | and_texts(q.tree)
        queries.append(
            {"id": q.id, "template": q.template, "tree": q.tree, "text": q.text,
             "relevant": q.relevant, "negatives": q.negatives, "n_neg": q.n_negations}
        )  # fmt: skip
    ordered = sorted(texts)
    vectors = np.asarray(get_query_embedder(DEFAULT_MODEL).embed(ordered), dtype=np.float32)
    return ordered, vectors, queries


def metrics(c: Corpus, q: dict[str, Any], scores: np.ndarray) -> tuple[float, float]:
    """(nDCG@10, NegRecall@10) of one ranking (binary relevance, as trec_eval)."""
    top = np.argpartition(-scores, 10)[:10]
    top = top[np.argsort(-scores[top], kind="stable")]
    docs = c.ids[top]
    gains = np.array([d in q["relevant"] for d in docs], dtype=float)
    dcg = float((gains / np.log2(np.arange(2, 12))).sum())
    ideal = float((1 / np.log2(np.arange(2, 2 + min(10, len(q["relevant"]))))).sum())
    neg = q["negatives"]
    nr = sum(d in neg for d in docs) / len(neg) if neg else math.nan
    return (dcg / ideal if ideal else 0.0), nr


def summary(c: Corpus, res: dict[str, tuple[float, float]]) -> dict[str, float]:
    nots = [q["id"] for q in c.queries if q["n_neg"]]
    plain = [q["id"] for q in c.queries if not q["n_neg"]]
    return {
        "ndcg": float(np.mean([res[q][0] for q in res])),
        "not_ndcg": float(np.mean([res[q][0] for q in nots])),
        "plain_ndcg": float(np.mean([res[q][0] for q in plain])),
        "negrecall": float(np.nanmean([res[q][1] for q in nots])),
    }


def objective(
    rows: dict[str, dict[str, float]],
    dense: dict[str, dict[str, float]],
    old: dict[str, dict[str, float]] | None = None,
) -> float:
    """Mean nDCG@10 minus :data:`PENALTY` × the mean excess of NegRecall@10 / dense over 0.2;
    minus infinity when, on some corpus, NOT queries lose more than :data:`KEEP` nDCG@10 against
    the old default ``old`` (today's NOT gains are kept)."""
    if old is not None and any(r["not_ndcg"] < old[n]["not_ndcg"] - KEEP for n, r in rows.items()):
        return -math.inf
    nd = float(np.mean([r["ndcg"] for r in rows.values()]))
    excess = [max(0.0, r["negrecall"] / dense[n]["negrecall"] - CUT) for n, r in rows.items()]
    return nd - PENALTY * float(np.mean(excess))


def leave_one_out(
    table: dict[str, dict[str, dict[str, float]]], dense: dict[str, dict[str, float]], base: str
) -> dict[str, dict[str, Any]]:
    """For each real corpus: the candidate of ``table`` with the best :func:`objective` on the
    other two (``base``: the old default of the rule), and its results on the held-out one."""
    loco = {}
    for held in REAL:
        tune = [n for n in REAL if n != held]
        old = {n: table[base][n] for n in tune}
        best = max(
            table,
            key=lambda m: objective(
                {n: table[m][n] for n in tune}, {n: dense[n] for n in tune}, old
            ),
        )
        loco[held] = {"chosen": best, "tuned_on": tune, "held_out": table[best][held]}
    return loco


K = 100


def per_document(d: np.ndarray, ps: np.ndarray, starts: np.ndarray) -> dict[str, np.ndarray]:
    """Every kind of per-document value of one text: ``ps`` holds its similarity to every
    passage, grouped by document (``starts``: each document's first passage)."""
    counts = np.diff(np.append(starts, len(ps)))
    mx = np.maximum.reduceat(ps, starts)
    mean = np.add.reduceat(ps, starts) / counts
    rest = ps.copy()
    best = starts + np.array(
        [int(np.argmax(ps[a : a + n])) for a, n in zip(starts, counts, strict=True)]
    )
    rest[best] = -np.inf
    second = np.maximum.reduceat(rest, starts)
    top2 = np.where(counts > 1, (mx + second) / 2, mx)
    return {"documents": d, "max": mx, "top2": top2, "mean": mean, "half": (d + mx) / 2}


def load_corpus(dsn: str, name: str) -> tuple[list[str], np.ndarray, list[np.ndarray]]:
    """External ids, document vectors and each document's passage vectors."""
    with connect(dsn) as conn:
        c = get_corpus(conn, name)
        assert c.passage_table is not None
        rows = conn.execute(
            sql.SQL("SELECT id, external_id, embedding FROM {} ORDER BY id").format(c.table)
        ).fetchall()
        prow = conn.execute(
            sql.SQL("SELECT doc_id, embedding FROM {} ORDER BY doc_id, ord").format(c.passage_table)
        ).fetchall()
    pos = {int(r[0]): i for i, r in enumerate(rows)}
    passages: list[list[np.ndarray]] = [[] for _ in rows]
    for doc_id, v in prow:
        passages[pos[int(doc_id)]].append(np.asarray(v.to_numpy(), dtype=np.float32))
    docs = np.stack([np.asarray(r[2].to_numpy(), dtype=np.float32) for r in rows])
    return [str(r[1]) for r in rows], docs, [np.stack(p) for p in passages]


#: How a variant makes a text's similarity per document: (the text's per-document values of
#: :func:`per_document`, is it a negated-only term, has the formula a negated term) -> values.
Variant = Callable[[dict[str, np.ndarray], bool, bool], np.ndarray]


@dataclass
class Scored:
    """Every derived query of a corpus ranked exactly by every variant: per-query metrics
    (:func:`pglogic.eval.metrics.evaluate_run`) and the corpus's vectors."""

    ids: list[str]
    docs: np.ndarray
    passages: list[np.ndarray]
    per: dict[str, dict[str, dict[str, float]]]
    with_not: list[str]
    without: list[str]
    #: Dense retrieval of the question over the documents' own vectors, exactly, on the same
    #: queries: mean nDCG@10 over all of them and NegRecall@10 over those with NOT.
    dense: dict[str, float]

    def mean(self, variant: str, metric: str, qids: list[str]) -> float:
        """The mean of ``metric`` over ``qids`` (undefined values left out)."""
        vals = [self.per[variant][q][metric] for q in qids]
        vals = [v for v in vals if v == v]
        return statistics.fmean(vals) if vals else float("nan")


def score_variants(
    dsn: str,
    ds: Any,
    per_template: int,
    variants: dict[str, Variant],
    families: dict[str, str] | None = None,
) -> Scored:
    """Rank every derived query of ``ds`` (its corpus ``eval_<name>`` read from ``dsn``) over
    all its documents with each variant's similarities, the default AND texts and the variant's
    operator family in ``families`` (default: the engine's)."""
    families = families or {}
    ids, docs, passages = load_corpus(dsn, f"eval_{ds.name}")
    derived = derive_queries(ds, per_template=per_template)
    emb = get_query_embedder(DEFAULT_MODEL)
    texts = sorted({t for q in derived.queries for t in scored_terms(q.tree, DEFAULT_AND_TEXT)}
                   | {q.text for q in derived.queries})  # fmt: skip
    vecs = dict(zip(texts, emb.embed(texts), strict=True))
    pm = np.concatenate(passages)
    starts = np.cumsum([0] + [len(p) for p in passages[:-1]])
    values = {t: per_document(docs @ vecs[t], pm @ vecs[t], starts) for t in texts}
    runs: dict[str, dict[str, list[str]]] = {a: {} for a in variants}
    dense_run: dict[str, list[str]] = {}
    for q in derived.queries:
        has_not = bool(negated_only_terms(q.tree))
        tree = with_and_texts(q.tree, DEFAULT_AND_TEXT)
        qtexts = scored_terms(q.tree, DEFAULT_AND_TEXT)
        weights = own_weights(q.tree, qtexts, "blend")
        positive = {t: w > 0 for t, w in zip(qtexts, weights, strict=True)}
        dense_run[q.id] = [ids[i] for i in np.argsort(-(docs @ vecs[q.text]), kind="stable")[:K]]
        for a, variant in variants.items():
            sims = {t: variant(values[t], not positive[t], has_not) for t in qtexts}
            scores = evaluate_numpy(tree, sims, families.get(a, DEFAULT_FAMILY))
            top = np.argsort(-scores, kind="stable")[:K]
            runs[a][q.id] = [ids[i] for i in top]
    relevant = {q.id: q.relevant for q in derived.queries}
    negatives = {q.id: q.negatives for q in derived.queries}
    with_not = [q.id for q in derived.queries if q.n_negations > 0]
    dense = evaluate_run(dense_run, relevant, negatives)
    return Scored(
        ids, docs, passages, {a: evaluate_run(r, relevant, negatives) for a, r in runs.items()},
        with_not, [q.id for q in derived.queries if q.n_negations == 0],
        {"ndcg": statistics.fmean(v["ndcg@10"] for v in dense.values()),
         "negrecall": statistics.fmean(dense[q]["negrecall@10"] for q in with_not
                                       if dense[q]["negrecall@10"] == dense[q]["negrecall@10"])},
    )  # fmt: skip


def scored_runs(
    name: str, queries: Sequence[Any], runs: dict[str, dict[str, list[str]]]
) -> dict[str, Any]:
    """Per-query nDCG@10 / NegRecall@10 of every method's ranking of the derived ``queries``,
    with each query's template family and the queries with NOT."""
    relevant = {q.id: q.relevant for q in queries}
    negatives = {q.id: q.negatives for q in queries}
    per = {m: evaluate_run(r, relevant, negatives) for m, r in runs.items()}
    return {
        "dataset": name,
        "family": {q.id: family_of(q.tree) for q in queries},
        "with_not": [q.id for q in queries if q.n_negations > 0],
        "per": {
            m: {
                qid: {"ndcg": v["ndcg@10"], "negrecall": v["negrecall@10"]}
                for qid, v in rows.items()
            }
            for m, rows in per.items()
        },
    }


def mean_of(per: dict[str, dict[str, float]], qids: list[str], key: str) -> float:
    """The mean of ``key`` over ``qids`` (NaN values, queries without traps, left out)."""
    vals = [per[q][key] for q in qids if per[q][key] == per[q][key]]
    return float(np.mean(vals)) if vals else float("nan")
