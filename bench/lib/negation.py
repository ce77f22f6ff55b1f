"""NOT on the real corpora, scored exactly: what the NOT gates and studies share.

From ``bench/quality/not_projection.py``: the NOT template families, the methods measured through
the index (``bench/quality/<dataset>/results.json``) and the per-family tests against them
(:func:`index_runs`, :func:`family_tests`, :func:`losses`). From the NOT-signals study
(``bench/studies/2026-11-27-not-signals``): a corpus loaded for exact scoring at the default engine
(:class:`Exact`, :func:`load_exact`), a formula's positive part (:func:`positive_part`) and the
leave-one-corpus-out choice under both rules (:func:`leave_one_out`, :func:`loco_lines`). From
``bench/quality/not_mention.py``: which documents mention a text as a phrase (:func:`mentions`).
From the lexical-feedback study: documents' lexemes and a term's lexical signature
(:func:`lexemes`, :func:`signature`). From the feedback study: the ROC AUC of a NOT query's traps
against its answers (:func:`auc`, :func:`trap_auc`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import sql
from scipy import sparse

from bench.lib.benchlib import BENCH_DIR, SHARED_DATA, md_table
from bench.lib.exact import REAL, load_corpus, objective, per_document
from bench.lib.lexical import match_sets
from pglogic.config import DEFAULT_MODEL
from pglogic.embed.registry import get_query_embedder
from pglogic.engine.conjunction import DEFAULT_AND_TEXT, own_weights, with_and_texts
from pglogic.engine.negation import DEFAULT_NOT_CONTEXT, with_context
from pglogic.engine.operators import evaluate_numpy
from pglogic.eval.compare import holm
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import Derived, derive_queries
from pglogic.eval.metrics import paired_test
from pglogic.query import Node, terms
from pglogic.store.corpus import get_corpus
from pglogic.store.db import connect

NOT_FAMILIES = ("NOT in AND", "NOT with OR")


#: The methods of ``bench/quality`` each variant is tested against per NOT family.
INDEX_METHODS = (
    "dense",
    "pglogic[product-max]",
    "pglogic[itlr]",
    "pglogic-nsfl",
    "pglogic-nsfl-rerank",
    "pglogic-sqo",
    "pglogic-sqo-rerank",
    "geometric",
    "decomposed",
)


PAPERS = INDEX_METHODS[2:]


def index_runs(name: str) -> dict[str, dict[str, float]]:
    """Per-query nDCG@10 of :data:`INDEX_METHODS` measured through the index."""
    data = json.loads((BENCH_DIR / "quality" / name / "results.json").read_text())
    i = data["metrics"].index("ndcg@10")
    return {m: {q: v[i] for q, v in data["per_query"][m].items()} for m in INDEX_METHODS}


def family_tests(
    family: dict[str, str], mine: dict[str, dict[str, float]], idx: dict[str, dict[str, float]]
) -> dict[str, Any]:
    """Per NOT family (``family``: each query's), the nDCG@10 of ``mine`` (per query) against
    each of :data:`INDEX_METHODS` measured through the index (:func:`index_runs`): Wilcoxon,
    Holm over the family × method tests."""
    raw: dict[tuple[str, str], float] = {}
    cells: dict[str, Any] = {}
    for f in NOT_FAMILIES:
        qids = [q for q, g in family.items() if g == f]
        ndcg = {q: mine[q]["ndcg"] for q in qids}
        cells[f] = {"n": len(qids), "ndcg": float(np.mean(list(ndcg.values()))), "vs": {}}
        for m in INDEX_METHODS:
            r = paired_test({q: idx[m][q] for q in qids}, ndcg)
            cells[f]["vs"][m] = {"delta": r.delta, "p": r.p_value}
            raw[(f, m)] = r.p_value
    for (f, m), p in holm(raw).items():
        cells[f]["vs"][m]["p_holm"] = p
    return cells


def losses(a: dict[str, Any], label: str, methods: tuple[str, ...] = INDEX_METHODS) -> list[str]:
    """The NOT families where ``label`` is significantly below one of ``methods``."""
    out = []
    for f, c in a["families"][label].items():
        worse = [m for m in methods if c["vs"][m]["p_holm"] < 0.05 and c["vs"][m]["delta"] < 0]
        if worse:
            out.append(f"{f}: {', '.join(worse)}")
    return out


PER_TEMPLATE = 50


POOL = 100


DEFAULT_GAMMA = 1.25


@dataclass(frozen=True)
class Exact:
    """A corpus loaded for exact scoring at the default engine: its derived queries (``trees``:
    each with its AND texts at the default's weights), the documents' external ids and own
    vectors, every passage vector (``pm``; ``starts``: each document's first) and every text's
    query vector (the terms, the AND texts and each question)."""

    derived: Derived
    trees: list[Node]
    ids: list[str]
    docs: np.ndarray
    pm: np.ndarray
    starts: np.ndarray
    vecs: dict[str, np.ndarray]

    def similarities(self, query: Node, tree: Node) -> dict[str, np.ndarray]:
        """Every scored text's similarity to every document as the default engine takes it:
        the ``query``'s negated terms without :data:`DEFAULT_NOT_CONTEXT` of their AND's
        positive span, each text's passage score of ``blend-not-or`` (``tree``: ``query`` with
        its AND texts)."""
        scored = terms(tree)
        projected = with_context(query, {t: self.vecs[t] for t in scored}, DEFAULT_NOT_CONTEXT)
        weights = dict(zip(scored, own_weights(query, scored, "blend-not-or"), strict=True))
        sims = {}
        for t in scored:
            v = per_document(self.docs @ projected[t], self.pm @ projected[t], self.starts)
            sims[t] = weights[t] * v["documents"] + (1 - weights[t]) * v["max"]
        return sims


def positive_part(tree: Node, sims: dict[str, np.ndarray], negated: list[str]) -> np.ndarray:
    """Every document's score of the formula's positive part: each of the ``negated`` terms
    taken as true (similarity 0 under its NOT). The *pool* is its top :data:`POOL`.

    Example:
        >>> positive_part(tree, sims, negated_only_terms(query)).shape  # doctest: +SKIP
        (2000,)
    """
    off = {t: (np.zeros_like(v) if t in negated else v) for t, v in sims.items()}
    return evaluate_numpy(tree, off, "and=product,or=max,not=complement^1")


def load_exact(dsn: str, name: str) -> Exact:
    """Load ``eval_<name>`` of ``dsn`` and its derived queries (:data:`PER_TEMPLATE` per
    template) for exact scoring.

    Example:
        >>> load_exact(DSN, "arxiv_0704").docs.shape  # doctest: +SKIP
        (2000, 384)
    """
    ds = load_dataset(SHARED_DATA / name)
    ids, docs, passages = load_corpus(dsn, f"eval_{name}")
    derived = derive_queries(ds, per_template=PER_TEMPLATE)
    trees = [with_and_texts(q.tree, DEFAULT_AND_TEXT, 1) for q in derived.queries]
    texts = sorted({t for tr in trees for t in terms(tr)} | {q.text for q in derived.queries})
    vecs = {t: np.asarray(v, dtype=np.float32)
            for t, v in zip(texts, get_query_embedder(DEFAULT_MODEL).embed(texts), strict=True)}  # fmt: skip
    pm = np.concatenate(passages)
    starts = np.cumsum([0] + [len(p) for p in passages[:-1]])
    return Exact(derived, trees, ids, docs, pm, starts, vecs)


#: The two selection rules of :func:`leave_one_out`: J alone, and J among the candidates with no
#: NOT family significantly below a paper's method on a tuning corpus.
SELECTION = (("J", False), ("J, no NOT family below a paper's method", True))


def leave_one_out(
    names: list[str],
    rows: Callable[[str, str], dict[str, float]],
    below: Callable[[str, str], list[str]],
    dense: Callable[[str], dict[str, float]],
    base: str,
) -> dict[str, Any]:
    """For each rule of :data:`SELECTION`: the candidate of ``names`` chosen on each pair of
    real corpora by ``exact.objective`` (against ``base``, the default), and on all three.
    ``rows(corpus, name)``: its NOT nDCG@10, all-query nDCG@10 and NegRecall@10;
    ``below(corpus, name)``: its NOT families below a paper's method; ``dense(corpus)``:
    dense retrieval's NegRecall@10.

    Example:
        >>> leave_one_out(["a", "b"], rows, below, dense, "a")["J"]["on_all"]  # doctest: +SKIP
        'b'
    """

    def j(m: str, corpora: list[str], families: bool) -> float:
        if families and any(below(n, m) for n in corpora):
            return -math.inf
        old = {n: rows(n, base) for n in corpora}
        return objective({n: rows(n, m) for n in corpora}, {n: dense(n) for n in corpora}, old)

    out: dict[str, Any] = {}
    for rule, families in SELECTION:
        loco = {}
        for held in REAL:
            tune = [n for n in REAL if n != held]
            best = max(names, key=lambda m: j(m, tune, families))
            loco[held] = {"chosen": best, "held_out": rows(held, best),
                          "losses_there": below(held, best)}  # fmt: skip
        out[rule] = {"loco": loco, "on_all": max(names, key=lambda m: j(m, list(REAL), families))}
    return out


def loco_lines(rule: str, c: dict[str, Any]) -> list[str]:
    """The Markdown of one rule of :func:`leave_one_out`: the choice per held-out corpus and
    how it does there, then the choice on all three.

    Example:
        >>> loco_lines("J", data["choice"]["J"])[0]  # doctest: +SKIP
        '**J**'
    """
    rows = [[held, x["chosen"], f"{x['held_out']['not_ndcg']:.3f}",
             f"{x['held_out']['nr_ratio']:.2f}", "; ".join(x["losses_there"]) or "none"]
            for held, x in c["loco"].items()]  # fmt: skip
    return [f"**{rule}**", "", md_table(["held-out corpus", "chosen on the other two",
            "NOT nDCG@10 there", "NegRecall@10 / dense there",
            "NOT families below a paper's method there"], rows), "",
            f"Chosen on all three: `{c['on_all']}`.", ""]  # fmt: skip


def mentions(dsn: str, name: str, ids: list[str], texts: list[str]) -> dict[str, np.ndarray]:
    """For each text, which documents (in ``ids``' order) its phrase matches in the lexical
    index of ``eval_<name>``."""
    with connect(dsn) as conn:
        corpus = get_corpus(conn, f"eval_{name}")
        if corpus.lexical_config is None:
            raise SystemExit(
                f"eval_{name} has no lexical index: pglogic corpus lexical eval_{name}"
            )
        found = match_sets(conn, corpus, texts)
    where = {d: i for i, d in enumerate(ids)}
    out = {}
    for t in texts:
        m = np.zeros(len(ids))
        m[[where[d] for d in found[t] if d in where]] = 1.0
        out[t] = m
    return out


MIN_DF = 3


def lexemes(
    dsn: str, name: str, ids: list[str], texts: list[str]
) -> tuple[sparse.csr_matrix, dict[str, set[int]]]:
    """The documents' lexemes (rows in ``ids``' order, binary) and each text's own, as column
    numbers, from the lexical index of ``eval_<name>``."""
    with connect(dsn) as conn:
        corpus = get_corpus(conn, f"eval_{name}")
        if corpus.lexical_config is None:
            raise SystemExit(
                f"eval_{name} has no lexical index: pglogic corpus lexical eval_{name}"
            )
        rows = conn.execute(
            sql.SQL(
                "SELECT external_id, tsvector_to_array(tsv) FROM {} ORDER BY external_id"
            ).format(corpus.table)
        ).fetchall()
        own = dict(
            conn.execute(  # every text's lexemes in one round trip
                "SELECT t, tsvector_to_array(to_tsvector(%s::regconfig, t))"
                " FROM unnest(%s::text[]) AS t",
                (corpus.lexical_config, texts),
            ).fetchall()
        )
    vocab: dict[str, int] = {}
    words = {str(d): [vocab.setdefault(w, len(vocab)) for w in ws or []] for d, ws in rows}
    indptr, cols = [0], []
    for d in ids:
        cols.extend(words[d])
        indptr.append(len(cols))
    x = sparse.csr_matrix(
        (np.ones(len(cols), np.float32), np.array(cols), np.array(indptr)), (len(ids), len(vocab))
    )
    return x, {t: {vocab[w] for w in ws if w in vocab} for t, ws in own.items()}


def signature(x: sparse.csr_matrix, top: np.ndarray, rows: np.ndarray, n: int,
              leave_out: set[int]) -> np.ndarray:  # fmt: skip
    """The weights of the n lexemes most over-represented in the documents ``top`` against
    ``rows`` (log-odds, ½ smoothing, each in at least :data:`MIN_DF` of ``top``), 0 elsewhere.

    Example:
        >>> x = sparse.csr_matrix(np.array([[1, 1], [1, 0], [1, 0], [0, 1]], np.float32))
        >>> signature(x, np.array([0, 1, 2]), np.arange(4), 1, set()).round(3)
        array([0.223, 0.   ])
    """
    in_top = np.asarray(x[top].sum(axis=0), dtype=float).ravel()
    in_rows = np.asarray(x[rows].sum(axis=0), dtype=float).ravel()
    score = np.log((in_top + 0.5) / (len(top) + 1)) - np.log((in_rows + 0.5) / (len(rows) + 1))
    score[(in_top < MIN_DF) | (score <= 0)] = 0.0
    score[list(leave_out)] = 0.0
    w = np.zeros_like(score)
    keep = np.argsort(-score)[:n]
    w[keep] = score[keep]
    return w


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """ROC AUC of ``scores`` for the boolean labels ``positive`` (ties: mean rank)."""
    from scipy.stats import rankdata

    ranks = rankdata(scores)
    n1 = int(positive.sum())
    n0 = len(positive) - n1
    return float((ranks[positive].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def trap_auc(scores: np.ndarray, traps: list[int], relevant: list[int]) -> float:
    """The ROC AUC of ``scores`` for a NOT query's trap documents (rows ``traps``) against its
    relevant ones (rows ``relevant``): how well the scores tell them apart (0.5: not at all).

    Example:
        >>> trap_auc(np.array([0.9, 0.1, 0.5, 0.5]), [0, 2], [1, 3])
        0.875
    """
    rows = np.array([*traps, *relevant], dtype=np.int64)
    return auc(scores[rows], np.r_[np.ones(len(traps), bool), np.zeros(len(relevant), bool)])
