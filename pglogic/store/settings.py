"""Where pglogic finds its database.

Resolution order: an explicit DSN (``--dsn``), then ``PGLOGIC_DSN``, then the embedded server
under ``PGLOGIC_HOME`` (default ``~/.local/share/pglogic``), started on first use.

Example:
    >>> Settings(dsn="postgresql://u@db/x").resolve_dsn()
    'postgresql://u@db/x'
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pglogic.config import default_home
from pglogic.store import server


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

        return server.ensure_running(self.home)
