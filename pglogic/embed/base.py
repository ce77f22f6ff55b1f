"""The embedding interface: what pglogic needs from a model (no model is loaded here).

Example:
    >>> class Ones:
    ...     name, dim = "ones", 2
    ...     def embed(self, texts): return np.full((len(texts), 2), 0.5**0.5, np.float32)
    >>> isinstance(Ones(), Embedder)
    True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
Side = Literal["query", "passage"]


@runtime_checkable
class Embedder(Protocol):
    """What pglogic needs from an embedding model."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Return an (n, dim) float32 array of unit-length vectors."""
        ...


#: A provider: builds an embedder from the part of the spec after ``<provider>:``. Texts reach
#: it with the side's prefix already added. An embedder without a :data:`MODELS` entry may give
#: its prefixes as ``query_prefix`` / ``passage_prefix`` attributes.
Factory = Callable[[str], Embedder]
