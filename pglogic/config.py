"""Where pglogic keeps its files, and its default embedding model (no I/O, no imports).

Example:
    >>> DEFAULT_MODEL
    'all-MiniLM-L6-v2'
"""

from __future__ import annotations

import os
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
