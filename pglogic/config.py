"""Where pglogic finds its database and keeps its files.

Resolution order for the database: an explicit DSN (``--dsn``), then ``PGLOGIC_DSN``, then the
embedded server under ``PGLOGIC_HOME`` (default ``~/.local/share/pglogic``).

Example:
    >>> Settings(dsn="postgresql://u@db/x").resolve_dsn()
    'postgresql://u@db/x'
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_MODEL = "all-MiniLM-L6-v2"


def default_home() -> Path:
    """Return the directory for pglogic's files (``PGLOGIC_HOME`` or ``~/.local/share/pglogic``).

    Example:
        >>> isinstance(default_home(), Path)
        True
    """
    env = os.environ.get("PGLOGIC_HOME")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "pglogic"


@dataclass
class Settings:
    """Connection settings: ``dsn`` (None = ``PGLOGIC_DSN`` or the embedded server) and ``home``.

    Example:
        >>> Settings(home=Path("/tmp/x")).home
        PosixPath('/tmp/x')
    """

    dsn: str | None = None
    home: Path = field(default_factory=default_home)

    @property
    def embedded(self) -> bool:
        """True when no DSN is given anywhere, so the embedded server is used."""
        return not (self.dsn or os.environ.get("PGLOGIC_DSN"))

    def resolve_dsn(self) -> str:
        """Return the DSN to connect to, starting the embedded server if that is the one.

        Example:
            >>> Settings(dsn="dbname=test").resolve_dsn()
            'dbname=test'
        """
        explicit = self.dsn or os.environ.get("PGLOGIC_DSN")
        if explicit:
            return explicit
        from pglogic import server

        return server.ensure_running(self.home)
