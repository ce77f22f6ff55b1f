"""The synthetic data of the speed benchmarks: clustered 384-d unit vectors and query terms near them.

``make_dataset(n, seed, kind="isotropic" | "manifold")``: 100 topics x 10 cluster centres;
``isotropic`` spreads each cluster over all 384 dimensions (the first scale runs, the worst case for
HNSW), ``manifold`` over its own random 48-dimensional subspace plus a little isotropic noise (the
local intrinsic dimension of real all-MiniLM-L6-v2 embeddings: ``bench/perf/realism.py``).
``make_queries``: term vectors near the centres of one topic. Moved out of ``bench/perf/query.py``,
which introduced them; every synthetic benchmark imports them from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DIM = 384


@dataclass
class Dataset:
    """Synthetic clustered unit vectors and the generator of query term vectors."""

    topics: np.ndarray
    centres: np.ndarray  # (n_topics * per_topic, DIM)
    per_topic: int
    vectors: np.ndarray  # (rows, DIM)
    labels: np.ndarray  # centre of each row


def _normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def make_dataset(
    rows: int,
    seed: int,
    n_topics: int = 100,
    per_topic: int = 10,
    kind: str = "isotropic",
    rank: int = 48,
) -> Dataset:
    """Topics -> centres -> points (see the module docstring); deterministic for ``seed``.

    ``kind="isotropic"``: a point is its centre + Gaussian noise over all 384 dimensions (every
    point of a cluster almost equally far from a query: the worst case for an ANN index).
    ``kind="manifold"``: the spread of each cluster lies in its own random ``rank``-dimensional
    subspace, plus a little isotropic noise, so the local intrinsic dimension is low as in real
    sentence embeddings (``bench/perf/realism.py`` compares both with all-MiniLM-L6-v2).
    """
    rng = np.random.default_rng(seed)
    topics = _normalise(rng.standard_normal((n_topics, DIM)))
    centres = _normalise(
        np.repeat(topics, per_topic, axis=0)
        + 1.0 * rng.standard_normal((n_topics * per_topic, DIM)) / np.sqrt(DIM)
    )
    labels = rng.integers(0, len(centres), size=rows)
    if kind == "isotropic":
        noise = 0.8 * rng.standard_normal((rows, DIM)) / np.sqrt(DIM)
        vectors = _normalise(centres[labels] + noise)
        return Dataset(topics, centres, per_topic, vectors, labels)
    if kind != "manifold":
        raise ValueError(f"unknown kind {kind!r}")
    vectors = np.empty((rows, DIM), dtype=np.float32)
    for c in range(len(centres)):
        members = np.flatnonzero(labels == c)
        basis, _ = np.linalg.qr(rng.standard_normal((DIM, rank)))  # the cluster's own subspace
        z = rng.standard_normal((len(members), rank)) / np.sqrt(rank)
        iso = rng.standard_normal((len(members), DIM)) / np.sqrt(DIM)
        vectors[members] = _normalise(
            centres[c] + MANIFOLD_SPREAD * z @ basis.T + MANIFOLD_NOISE * iso
        )
    return Dataset(topics, centres, per_topic, vectors, labels)


#: Spread of a "manifold" cluster within / off its subspace (calibrated in bench/perf/realism.py).
MANIFOLD_SPREAD = 0.8


MANIFOLD_NOISE = 0.25


def make_queries(
    data: Dataset, n_queries: int, n_terms: int, seed: int
) -> list[dict[str, np.ndarray]]:
    """``n_queries`` term-vector maps {"t1": v, ...}: n distinct centres of one random topic."""
    rng = np.random.default_rng(seed)
    out = []
    n_topics = len(data.topics)
    for _ in range(n_queries):
        topic = int(rng.integers(n_topics))
        picks = rng.choice(data.per_topic, size=n_terms, replace=False)
        cs = data.centres[topic * data.per_topic + picks]
        vs = _normalise(cs + 0.3 * rng.standard_normal(cs.shape) / np.sqrt(DIM))
        out.append({f"t{i + 1}": vs[i] for i in range(n_terms)})
    return out
