"""Calibrated truth: the parameters of ``truth(s) = σ((s − τ)·λ)`` (ITLR, appendix E).

Pure (NumPy only). Fitting them lives in :mod:`pglogic.eval.calibrate`; storing them per model or
corpus in :mod:`pglogic.store.calibration_store`.

Example:
    >>> Calibration(tau=0.3, lam=20.0, method="corpus", n_pairs=0, auc=None).to_dict()["tau"]
    0.3
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["FIELDS", "METHODS", "Calibration"]

METHODS = ("logistic", "corpus")
"""Allowed values of :attr:`Calibration.method`."""


FIELDS = ("tau", "lam", "method", "n_pairs", "auc")


@dataclass(frozen=True)
class Calibration:
    """Fitted parameters of ``truth(s) = σ((s − tau)·lam)`` for one embedding model.

    Attributes:
        tau: similarity at which the truth value is 0.5.
        lam: slope (> 0); larger means a sharper step around ``tau``.
        method: ``"logistic"`` (supervised, :func:`fit_logistic`) or ``"corpus"``
            (unsupervised, :func:`fit_corpus`).
        n_pairs: number of labelled pairs used (0 when unsupervised).
        auc: ROC AUC of the similarity on the labelled pairs (``None`` when unsupervised).

    Example:
        >>> cal = Calibration(tau=0.3, lam=20.0, method="corpus", n_pairs=0, auc=None)
        >>> [round(float(x), 3) for x in cal.truth([0.1, 0.3, 0.5])]
        [0.018, 0.5, 0.982]
    """

    tau: float
    lam: float
    method: str
    n_pairs: int
    auc: float | None

    def __post_init__(self) -> None:
        if not math.isfinite(self.tau):
            raise ValueError(f"Calibration: tau must be finite, got {self.tau!r}")
        if not (math.isfinite(self.lam) and self.lam > 0):
            raise ValueError(f"Calibration: lam must be finite and > 0, got {self.lam!r}")
        if self.method not in METHODS:
            raise ValueError(f"Calibration: method must be one of {METHODS}, got {self.method!r}")
        if self.n_pairs < 0:
            raise ValueError(f"Calibration: n_pairs must be >= 0, got {self.n_pairs!r}")
        if self.auc is not None and not 0.0 <= self.auc <= 1.0:
            raise ValueError(f"Calibration: auc must be in [0, 1] or None, got {self.auc!r}")

    def truth(self, s: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Truth values ``σ((s − tau)·lam)`` of similarities ``s`` (any shape), as float64.

        Computed as ``(1 + tanh(z/2))/2``, which neither overflows nor returns NaN for large
        ``|(s − tau)·lam|``; values saturate to exactly 0.0 or 1.0 there.

        Example:
            >>> cal = Calibration(tau=0.4, lam=10.0, method="logistic", n_pairs=100, auc=0.9)
            >>> float(cal.truth(0.4))
            0.5
            >>> cal.truth([-1e300, 1e300]).tolist()
            [0.0, 1.0]
        """
        x = np.asarray(s, dtype=np.float64)
        z = (x - self.tau) * self.lam
        return np.asarray(0.5 * (1.0 + np.tanh(0.5 * z)), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable dictionary of the parameters (inverse of :meth:`from_dict`).

        Example:
            >>> Calibration(0.3, 12.5, "corpus", 0, None).to_dict()
            {'tau': 0.3, 'lam': 12.5, 'method': 'corpus', 'n_pairs': 0, 'auc': None}
        """
        return {
            "tau": float(self.tau),
            "lam": float(self.lam),
            "method": self.method,
            "n_pairs": int(self.n_pairs),
            "auc": None if self.auc is None else float(self.auc),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibration:
        """Rebuild a :class:`Calibration` from :meth:`to_dict` output.

        Raises ``ValueError`` when keys are missing or unknown, or values are invalid.

        Example:
            >>> d = {"tau": 0.41, "lam": 18.0, "method": "logistic", "n_pairs": 550, "auc": 0.93}
            >>> Calibration.from_dict(d).to_dict() == d
            True
        """
        missing = [k for k in FIELDS if k not in d]
        unknown = sorted(set(d) - set(FIELDS))
        if missing or unknown:
            raise ValueError(
                f"Calibration.from_dict: missing keys {missing}, unknown keys {unknown}"
            )
        auc = d["auc"]
        return cls(
            tau=float(d["tau"]),
            lam=float(d["lam"]),
            method=str(d["method"]),
            n_pairs=int(d["n_pairs"]),
            auc=None if auc is None else float(auc),
        )
