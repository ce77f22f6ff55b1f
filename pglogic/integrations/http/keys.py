"""API keys of ``pglogic serve``: random tokens, stored only as SHA-256 hashes.

A key is ``pgl_`` + 32 random bytes (URL-safe base64), shown once when it is created. The key
file (JSON, mode 0600) keeps each key's name, the SHA-256 of the key and when it was made, never
the key itself; a request's key is hashed and compared in constant time. A key has 256 random
bits, so a plain (unsalted, fast) hash is enough: no dictionary or brute force reaches it.

Example:
    >>> import tempfile, pathlib
    >>> store = KeyStore(pathlib.Path(tempfile.mkdtemp()) / "keys.json")
    >>> key = store.create("ci")
    >>> key.startswith("pgl_"), store.verify(key), store.verify("pgl_wrong")
    (True, 'ci', None)
    >>> key in store.path.read_text()
    False
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from pglogic.errors import ConfigError, InvalidInput

__all__ = ["KEY_PREFIX", "KeyStore", "StoredKey", "hash_key"]

KEY_PREFIX = "pgl_"


def hash_key(key: str) -> str:
    """The SHA-256 (hex) of a key: what the key file stores.

    Example:
        >>> hash_key("pgl_x")[:12]
        'bc0a2d4e6703'
    """
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredKey:
    """One key as stored: its name, hash and creation time (Unix seconds).

    Example:
        >>> StoredKey("ci", "ab" * 32, 0.0).name
        'ci'
    """

    name: str
    sha256: str
    created: float


class KeyStore:
    """The API keys in one JSON file (read on every check, so new keys count at once).

    Example:
        >>> KeyStore(Path("/nonexistent/keys.json")).stored()
        []
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: tuple[float, list[StoredKey]] | None = None

    def stored(self) -> list[StoredKey]:
        """The stored keys (none when the file does not exist).

        Example:
            >>> KeyStore(Path("/nonexistent/keys.json")).stored()
            []
        """
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            return []
        if self._cache is not None and self._cache[0] == mtime:
            return self._cache[1]
        try:
            raw = json.loads(self.path.read_text())
            keys = [StoredKey(str(k["name"]), str(k["sha256"]), float(k["created"])) for k in raw]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"Unreadable API key file {self.path}: {exc}") from None
        self._cache = (mtime, keys)
        return keys

    def _write(self, keys: list[StoredKey]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        data = [{"name": k.name, "sha256": k.sha256, "created": k.created} for k in keys]
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, self.path)
        self._cache = None

    def create(self, name: str) -> str:
        """Make a new key called ``name``, store its hash and return the key (shown once).

        Example:
            >>> KeyStore(Path(tempfile.mkdtemp()) / "k.json").create("app")[:4]  # doctest: +SKIP
            'pgl_'
        """
        name = name.strip()
        if not name or len(name) > 100:
            raise InvalidInput("A key name is 1 to 100 characters")
        keys = self.stored()
        if any(k.name == name for k in keys):
            raise InvalidInput(f"A key named {name!r} exists; revoke it first or pick another name")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        self._write([*keys, StoredKey(name, hash_key(key), time.time())])
        return key

    def revoke(self, name: str) -> bool:
        """Remove key ``name``; False when there is none.

        Example:
            >>> import tempfile
            >>> KeyStore(Path(tempfile.mkdtemp()) / "k.json").revoke("app")
            False
        """
        keys = self.stored()
        kept = [k for k in keys if k.name != name]
        if len(kept) == len(keys):
            return False
        self._write(kept)
        return True

    def verify(self, key: str) -> str | None:
        """The name of the stored key equal to ``key``, or None (constant-time comparisons).

        Example:
            >>> KeyStore(Path("/nonexistent/keys.json")).verify("pgl_x") is None
            True
        """
        digest = hash_key(key)
        found = None
        for k in self.stored():
            if hmac.compare_digest(digest, k.sha256):
                found = k.name
        return found
