"""Where the top-level ``migrations/`` and ``sql/`` directories are, installed or not.

A wheel carries them inside the package (``pglogic/migrations``, ``pglogic/sql``: the build
backend's force-include); a source checkout or an editable install has them beside the package,
at the top of the repository. This module is the one place that knows both.

Example:
    >>> (resource_dir("sql") / "search.sql").is_file()
    True
    >>> (resource_dir("migrations") / "env.py").is_file()
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Resource = Literal["migrations", "sql"]

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: Resource) -> Path:
    """The directory ``name`` (``"migrations"`` or ``"sql"``) shipped with this pglogic.

    Example:
        >>> resource_dir("sql").name
        'sql'
    """
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"pglogic's {name}/ directory is missing: looked in {_PACKAGE / name} and "
        f"{_PACKAGE.parent / name}; reinstall pglogic"
    )


def sql_text(name: str) -> str:
    """The text of ``sql/<name>``.

    Example:
        >>> "pglogic.and_product" in sql_text("operators.sql")
        True
    """
    return (resource_dir("sql") / name).read_text(encoding="utf-8")


__all__ = ["Resource", "resource_dir", "sql_text"]
