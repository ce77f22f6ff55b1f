"""Score calibration: turn a term's cosine similarity into a fuzzy truth value (fitting stage).

Fuzzy operators (``x·y``, ``x+y``, ``1−x``, min/max) expect truth values in [0, 1] where 0 means
"certainly not about this term" and 1 "certainly about it". Raw cosine similarities are not that:
with all-MiniLM-L6-v2 a document that carries a label scores only about 0.3–0.6 against the
label's name, and an unrelated one about 0–0.2. Clamping keeps those numbers, so ``NOT`` as
``1 − clamp(s)`` never comes near 0 and cannot exclude anything: a document squarely about the
negated term keeps half its score. Calibration, as in ITLR (Faltings et al., 2025, appendix E),
maps a similarity ``s`` through a fitted logistic curve

    ŷ = σ((s − τ)·λ)

per embedding model: ``τ`` is the similarity at which a document is as likely relevant as not
(truth 0.5) and ``λ > 0`` the slope, so the narrow band where relevant documents live is
stretched over the whole of [0, 1] and ``NOT`` can drive a score to ~0.

Two ways to fit ``(τ, λ)``; both return a :class:`Calibration`:

- :func:`fit_logistic` (``method="logistic"``, supervised): one-dimensional logistic regression
  of "relevant?" on ``s`` over labelled (similarity, relevant) pairs, by default with the two
  classes weighted equally because positives are rare. :func:`label_pairs` samples such pairs
  from a labelled corpus (each label's name is a query term; documents carrying the label are
  positives, a fixed multiple of documents that do not are negatives).
- :func:`fit_corpus` (``method="corpus"``, unsupervised, for users without labels): from a
  sample of similarities of terms to corpus documents, ``τ`` is the ``1 − top_fraction``
  quantile (a document must be in a term's top 1 % to be more true than not) and ``λ`` is the
  slope that makes the median document ≲ 0.02 true and the top 0.1 % ≳ 0.98 true.

Everything here is pure (no database, no embedding model). The fitted map is used as the truth
map ``sigmoid:TAU:LAMBDA`` (:func:`pglogic.engine.operators.sigmoid_truth`, also in ``pglogic.search()``
in SQL); :mod:`pglogic.store.calibration_store` stores parameters per model or corpus in the database
for ``truth="calibrated"``, and :mod:`pglogic.eval.calibrate_corpus` fits a corpus from its stored
embeddings and searched terms.

Example:
    >>> import numpy as np
    >>> s = np.array([0.05, 0.10, 0.15, 0.20, 0.35, 0.40, 0.50, 0.55])
    >>> relevant = np.array([False, False, False, True, False, True, True, True])
    >>> cal = fit_logistic(s, relevant)
    >>> cal.method, cal.n_pairs, cal.auc
    ('logistic', 8, 0.9375)
    >>> 0.1 < cal.tau < 0.4 and cal.lam > 0
    True
    >>> t = cal.truth([0.0, 0.6])
    >>> bool(t[0] < 0.2 and t[1] > 0.8)
    True
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

import numpy as np
import numpy.typing as npt
from scipy import optimize, special, stats

from pglogic.engine.calibration import METHODS as METHODS
from pglogic.engine.calibration import Calibration as Calibration

__all__ = ["METHODS", "Calibration", "fit_corpus", "fit_logistic", "label_pairs"]

_L2 = 1e-6
"""L2 penalty on the slope of the *standardised* similarity (keeps separable data finite)."""

_EDGE_LOGIT = 4.0
"""Logit of the corpus rule's anchors: σ(−4) ≈ 0.018 for the median, σ(4) ≈ 0.982 for the top."""


def _roc_auc(s: npt.NDArray[np.float64], y: npt.NDArray[np.bool_]) -> float:
    """ROC AUC of score ``s`` for labels ``y`` (Mann–Whitney U; ties count one half)."""
    n_pos = int(y.sum())
    n_neg = int(y.size - n_pos)
    ranks = np.asarray(stats.rankdata(s), dtype=np.float64)
    u = float(ranks[y].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def fit_logistic(
    similarities: npt.ArrayLike, relevant: npt.ArrayLike, *, balance: bool = True
) -> Calibration:
    """Fit ``truth = σ(w·s + b)`` by logistic regression of ``relevant`` on ``s``.

    Minimises the (weighted) mean log loss plus a tiny L2 penalty on the slope of the
    standardised similarity (``scipy.optimize.minimize``, L-BFGS-B, exact gradient; convex and
    deterministic), then returns ``tau = −b/w`` and ``lam = w``. With ``balance=True`` each
    class gets half the total weight, so rare positives count as much as the many negatives and
    ``tau`` is where P(relevant | s) = 0.5 as if both classes were equally frequent; with
    ``balance=False`` it is that point under the sample's own base rate, which is higher by
    about ``log(n_neg / n_pos) / lam`` when positives are rare. ``auc`` is the ROC AUC of ``s`` on the pairs.

    Raises:
        ValueError: inputs not 1-D of equal length, empty or not finite; no positive or no
            negative pairs; or fitted slope ``w <= 0`` (similarity does not predict relevance).

    Example:
        >>> cal = fit_logistic([0.1, 0.2, 0.3, 0.25, 0.5, 0.6], [0, 0, 0, 1, 1, 1])
        >>> cal.method, cal.n_pairs, round(cal.auc, 4)
        ('logistic', 6, 0.8889)
        >>> bool(float(cal.truth(0.1)) < 0.5 < float(cal.truth(0.6)))
        True
    """
    s = np.asarray(similarities, dtype=np.float64)
    y = np.asarray(relevant).astype(bool)
    if s.ndim != 1 or y.ndim != 1 or s.shape != y.shape:
        raise ValueError(
            "fit_logistic: similarities and relevant must be 1-D arrays of equal length, "
            f"got shapes {s.shape} and {y.shape}"
        )
    if not np.all(np.isfinite(s)):
        raise ValueError("fit_logistic: similarities must be finite")
    n = int(s.size)
    n_pos = int(y.sum())
    n_neg = n - n_pos
    if n_pos == 0:
        raise ValueError("fit_logistic: no positive pairs (every relevant is False)")
    if n_neg == 0:
        raise ValueError("fit_logistic: no negative pairs (every relevant is True)")

    mean = float(s.mean())
    sd = float(s.std())
    if sd == 0.0:
        raise ValueError(
            "fit_logistic: similarity does not predict relevance (all similarities are equal)"
        )
    x = (s - mean) / sd
    t = y.astype(np.float64)
    # Weights sum to 1: the loss is a (class-balanced) mean.
    weights = np.where(y, 0.5 / n_pos, 0.5 / n_neg) if balance else np.full(n, 1.0 / n)

    def loss_and_grad(params: npt.NDArray[np.float64]) -> tuple[float, npt.NDArray[np.float64]]:
        a, c = float(params[0]), float(params[1])
        z = a * x + c
        loss = float(np.sum(weights * (np.logaddexp(0.0, z) - t * z))) + _L2 * a * a
        r = weights * (np.asarray(special.expit(z), dtype=np.float64) - t)
        grad = np.array([float(np.sum(r * x)) + 2.0 * _L2 * a, float(np.sum(r))])
        return loss, grad

    result = optimize.minimize(
        loss_and_grad,
        np.zeros(2),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 1000, "gtol": 1e-10, "ftol": 1e-15},
    )
    a, c = (float(v) for v in result.x)
    if not (math.isfinite(a) and math.isfinite(c)):
        raise ValueError("fit_logistic: optimisation diverged")
    w = a / sd
    if w <= 0.0:
        raise ValueError(
            f"fit_logistic: similarity does not predict relevance (fitted slope w = {w:.4g} <= 0)"
        )
    # z = a·(s − mean)/sd + c = w·(s − tau)  with  tau = mean − c·sd/a
    tau = mean - c * sd / a
    return Calibration(tau=tau, lam=w, method="logistic", n_pairs=n, auc=_roc_auc(s, y))


def fit_corpus(similarities: npt.ArrayLike, *, top_fraction: float = 0.01) -> Calibration:
    """Fit a calibration without labels, from a sample of similarities to corpus documents.

    ``similarities`` is any array (it is flattened): e.g. one term's similarities to a random
    sample of documents, or a matrix of many terms × sampled documents pooled into one fit.
    The rule, with ``f = top_fraction``, ``med`` the median, ``q(p)`` the ``p`` quantile:

    - ``tau = q(1 − f)``: a document must be in a term's top ``f`` (1 %) to be more true
      than not. Most documents are *not* about a given term, so the bulk of the distribution
      is the "false" population and only its upper tail can be "true".
    - ``lam = 4 / min(tau − med, q(1 − f/10) − tau)``: the smallest slope that makes both
      anchors hold — the typical (median) document gets truth ≤ σ(−4) ≈ 0.018 and a document in
      the top ``f/10`` (0.1 %) gets truth ≥ σ(4) ≈ 0.982. So the truth goes from ~0 for a
      typical document to ~1 for the best ones, and ``NOT`` can exclude them.

    Raises:
        ValueError: ``top_fraction`` not in (0, 0.5); fewer than ``1/top_fraction``
            similarities or any not finite; or the sample is too concentrated (the median,
            ``tau`` and the top quantile are not strictly increasing).

    Example:
        >>> import numpy as np
        >>> s = np.linspace(0.0, 0.6, 1001)
        >>> cal = fit_corpus(s)
        >>> cal.method, cal.n_pairs, cal.auc, round(cal.tau, 4)
        ('corpus', 0, None, 0.594)
        >>> bool(float(cal.truth(np.median(s))) < 0.02 and float(cal.truth(s.max())) > 0.98)
        True
    """
    if not 0.0 < top_fraction < 0.5:
        raise ValueError(f"fit_corpus: top_fraction must be in (0, 0.5), got {top_fraction!r}")
    s = np.asarray(similarities, dtype=np.float64).ravel()
    need = math.ceil(1.0 / top_fraction)
    if s.size < need:
        raise ValueError(
            f"fit_corpus: need at least {need} similarities for top_fraction={top_fraction}, "
            f"got {s.size}"
        )
    if not np.all(np.isfinite(s)):
        raise ValueError("fit_corpus: similarities must be finite")
    med, tau, top = (
        float(v) for v in np.quantile(s, [0.5, 1.0 - top_fraction, 1.0 - top_fraction / 10.0])
    )
    gap = min(tau - med, top - tau)
    if not gap > 0.0:
        raise ValueError(
            "fit_corpus: similarities too concentrated (median, top quantile and its top tenth "
            f"are {med:.4g}, {tau:.4g}, {top:.4g}; they must be strictly increasing)"
        )
    return Calibration(tau=tau, lam=_EDGE_LOGIT / gap, method="corpus", n_pairs=0, auc=None)


def label_pairs(
    term_vectors: Mapping[str, npt.ArrayLike],
    doc_matrix: npt.ArrayLike,
    doc_labels: Sequence[Collection[str]],
    label_of_term: Mapping[str, str],
    *,
    negatives_per_positive: int = 10,
    seed: int = 0,
    max_positives_per_label: int = 200,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Sample labelled (similarity, relevant) pairs for :func:`fit_logistic` from a corpus.

    For each term (a label's query text, e.g. the label's name), in sorted order of the term:
    positives are the documents whose ``doc_labels`` entry contains ``label_of_term[term]`` —
    all of them, or ``max_positives_per_label`` drawn without replacement when there are more;
    negatives are ``negatives_per_positive`` × (number of positives) documents drawn from those
    that do not carry the label (all of them if there are fewer). Draws use one
    ``numpy.random.default_rng(seed)`` over the sorted candidate indices, terms in sorted order,
    so the result is a deterministic function of the inputs. Terms whose label no document
    carries contribute nothing.

    The similarity is the dot product of the document row with the term vector scaled to unit
    length; ``doc_matrix`` rows must already be unit vectors (then it is the cosine).
    Returns ``(similarities, relevant)``: float64 and bool arrays, per term positives first.

    Raises:
        ValueError: a term has no entry in ``label_of_term``; shapes disagree; a term vector
            is zero; or the counts are out of range.

    Example:
        >>> import numpy as np
        >>> docs = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [-1.0, 0.0]])
        >>> labels = [{"cat"}, {"cat", "dog"}, {"dog"}, set()]
        >>> s, rel = label_pairs({"a cat": [2.0, 0.0]}, docs, labels, {"a cat": "cat"},
        ...                      negatives_per_positive=1)
        >>> s.tolist(), rel.tolist()
        ([1.0, 0.6, 0.0, -1.0], [True, True, False, False])
    """
    if negatives_per_positive < 0:
        raise ValueError(
            f"label_pairs: negatives_per_positive must be >= 0, got {negatives_per_positive}"
        )
    if max_positives_per_label < 1:
        raise ValueError(
            f"label_pairs: max_positives_per_label must be >= 1, got {max_positives_per_label}"
        )
    docs = np.asarray(doc_matrix, dtype=np.float64)
    if docs.ndim != 2:
        raise ValueError(f"label_pairs: doc_matrix must be 2-D, got shape {docs.shape}")
    if docs.shape[0] != len(doc_labels):
        raise ValueError(
            f"label_pairs: doc_matrix has {docs.shape[0]} rows but doc_labels has "
            f"{len(doc_labels)} entries"
        )
    rng = np.random.default_rng(seed)
    sims: list[npt.NDArray[np.float64]] = []
    rels: list[npt.NDArray[np.bool_]] = []
    for term in sorted(term_vectors):
        if term not in label_of_term:
            raise ValueError(f"label_pairs: term {term!r} has no entry in label_of_term")
        label = label_of_term[term]
        v = np.asarray(term_vectors[term], dtype=np.float64)
        if v.shape != (docs.shape[1],):
            raise ValueError(
                f"label_pairs: vector of term {term!r} has shape {v.shape}, "
                f"expected ({docs.shape[1]},)"
            )
        norm = float(np.linalg.norm(v))
        if norm == 0.0:
            raise ValueError(f"label_pairs: vector of term {term!r} is zero")
        v = v / norm
        has = np.fromiter((label in labels for labels in doc_labels), dtype=bool, count=len(docs))
        pos = np.flatnonzero(has)
        neg = np.flatnonzero(~has)
        if pos.size == 0:
            continue
        if pos.size > max_positives_per_label:
            pos = np.sort(rng.choice(pos, size=max_positives_per_label, replace=False))
        k = min(negatives_per_positive * int(pos.size), int(neg.size))
        if k < neg.size:
            neg = np.sort(rng.choice(neg, size=k, replace=False))
        idx = np.concatenate([pos, neg])
        sims.append(np.asarray(docs[idx] @ v, dtype=np.float64))
        rels.append(np.concatenate([np.ones(pos.size, bool), np.zeros(neg.size, bool)]))
    if not sims:
        return np.zeros(0, dtype=np.float64), np.zeros(0, dtype=bool)
    return np.concatenate(sims), np.concatenate(rels)
