"""Where pglogic finds its database.

Resolution order: an explicit DSN (``--dsn``), then ``PGLOGIC_DSN``, then the embedded server
under ``PGLOGIC_HOME`` (default ``~/.local/share/pglogic``), started on first use. Searches may
go to another server, a read replica: ``--read-dsn``, then ``PGLOGIC_READ_DSN``, else the same
server as everything else.

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
    """Connection settings: ``dsn`` (None = ``PGLOGIC_DSN`` or the embedded server), ``home``
    and ``read_dsn`` (None = ``PGLOGIC_READ_DSN`` or no separate read server).

    Example:
        >>> Settings(home=Path("/tmp/x")).home
        PosixPath('/tmp/x')
    """

    dsn: str | None = None
    home: Path = field(default_factory=default_home)
    read_dsn: str | None = None

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

    def resolve_read_dsn(self) -> str | None:
        """Return the DSN searches go to when it is not the primary's, else None.

        Example:
            >>> Settings(dsn="dbname=x", read_dsn="host=replica dbname=x").resolve_read_dsn()
            'host=replica dbname=x'
            >>> Settings(dsn="dbname=x", read_dsn="dbname=x").resolve_read_dsn() is None
            True
        """
        read = self.read_dsn or os.environ.get("PGLOGIC_READ_DSN")
        if not read or read == (self.dsn or os.environ.get("PGLOGIC_DSN")):
            return None
        return read
