"""Pseudo-relevance feedback on a query's terms, over one vector per document (the first window),
scored exactly: the model of the feedback study (``bench/studies/2026-11-26-feedback``) that the
NOT-limits study (``bench/studies/2026-11-26-not-limits``) builds on. Corpora are embedded once
and cached under :data:`CACHE`; no database.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.lib.benchlib import SHARED_DATA
from bench.lib.exact import PER_TEMPLATE, query_texts
from bench.lib.exact import Corpus as Sims
from pglogic.config import DEFAULT_MODEL
from pglogic.embed.registry import get_embedder
from pglogic.eval.data import load_dataset
from pglogic.eval.derive import derive_queries
from pglogic.query import And, Node, Not, Or, Term, to_text
from pglogic.store.readers import read_records

CACHE = Path("/tmp/pglogic-feedback")


AND_WEIGHT, NOT_POWER = 4, 1.25  # the default's (bench/quality/results/frontier.md)


INF = math.inf


@dataclass
class Corpus:
    """One corpus: its documents' vectors, the queries' texts' vectors and similarities."""

    sims: Sims
    docs: np.ndarray  # documents × dim, unit rows
    vectors: np.ndarray  # texts × dim, unit rows
    label_of: dict[str, str]  # term text -> label
    label_docs: dict[str, frozenset[str]]

    def feedback(self, text: str, m: int, beta: float, memo: dict[Any, np.ndarray]) -> np.ndarray:
        """The similarity of every document to ``text``'s vector moved towards the mean of its
        ``m`` nearest documents (``beta`` = ∞: that mean alone)."""
        key = (text, m, beta)
        if key not in memo:
            s = self.sims.s(text)
            centre = self.docs[np.argpartition(-s, m)[:m]].mean(0)
            centre /= np.linalg.norm(centre)
            v = centre if beta == INF else self.vectors[self.sims.col[text]] + beta * centre
            memo[key] = self.docs @ (v / np.linalg.norm(v))
        return memo[key]


def load(name: str) -> Corpus:
    """``name``'s derived queries and vectors (cached under :data:`CACHE`)."""
    path = CACHE / f"{name}_{PER_TEMPLATE}.pkl"
    if path.exists():
        out: Corpus = pickle.loads(path.read_bytes())
        return out
    ds = load_dataset(SHARED_DATA / name)
    derived = derive_queries(ds, per_template=PER_TEMPLATE, include_given=False)
    records = list(read_records(ds.corpus_file))
    embedder = get_embedder(DEFAULT_MODEL)
    docs = np.concatenate(
        [np.asarray(embedder.embed([r.embed_text for r in records[i : i + 256]]), np.float32)
         for i in range(0, len(records), 256)]
    )  # fmt: skip
    ordered, vectors, queries = query_texts(derived)
    sims = Sims(name, np.array([r.external_id for r in records]), docs @ vectors.T,
                {t: i for i, t in enumerate(ordered)}, queries)  # fmt: skip
    label_of = {text: label for label, text in ds.term_text.items()}
    out = Corpus(sims, docs, vectors, label_of, ds.label_docs())
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(out))
    return out


@dataclass(frozen=True)
class Candidate:
    """Feedback (m, β) on the negated terms, on the positive ones, or neither."""

    neg: tuple[int, float] | None = None
    pos: tuple[int, float] | None = None
    pos_without_not: bool = False  # positive feedback only in queries without NOT

    @property
    def name(self) -> str:
        parts = []
        if self.neg:
            parts.append(f"neg m={self.neg[0]}, β={self.neg[1]:g}")
        if self.pos:
            where = "pos (no NOT)" if self.pos_without_not else "pos"
            parts.append(f"{where} m={self.pos[0]}, β={self.pos[1]:g}")
        return " + ".join(parts) or "default (no feedback)"


def score(
    c: Corpus,
    node: Node,
    cand: Candidate,
    memo: dict[Any, np.ndarray],
    *,
    negated: bool = False,
    has_not: bool = False,
) -> np.ndarray:
    """The default engine's score of every document, with the candidate's feedback vectors."""
    if isinstance(node, Term):
        fb = cand.neg if negated else cand.pos
        if fb and not negated and cand.pos_without_not and has_not:
            fb = None
        s = c.feedback(node.text, *fb, memo) if fb else c.sims.s(node.text)
        return np.asarray(np.clip(s, 0.0, 1.0))
    if isinstance(node, Not):
        inner = score(c, node.child, cand, memo, negated=not negated, has_not=has_not)
        return (1.0 - inner) ** NOT_POWER
    if not isinstance(node, And | Or):
        raise TypeError(f"no lexical terms in the derived queries: {node!r}")
    kids = [score(c, k, cand, memo, negated=negated, has_not=has_not) for k in node.children]
    return combine(c.sims, node, kids)


def combine(sims: Sims, node: And | Or, kids: list[np.ndarray]) -> np.ndarray:
    """The default engine's OR (max) or AND (product, times the AND's own text at weight 4, 1
    beside a NOT) of the operands' scores ``kids``."""
    if isinstance(node, Or):
        return np.asarray(np.maximum.reduce(kids))
    out = np.prod(kids, axis=0)
    pos = [k for k in node.children if not isinstance(k, Not)]
    if len(pos) >= 2:
        weight = AND_WEIGHT if len(pos) == len(node.children) else 1
        out = out * np.clip(sims.s(to_text(And(tuple(pos)))), 0.0, 1.0) ** weight
    return np.asarray(out)


def negated_terms(node: Node, neg: bool = False) -> set[str]:
    """The texts of the terms under an odd number of NOTs."""
    if isinstance(node, Term):
        return {node.text} if neg else set()
    if isinstance(node, Not):
        return negated_terms(node.child, not neg)
    if isinstance(node, And | Or):
        return set().union(*(negated_terms(k, neg) for k in node.children))
    return set()
