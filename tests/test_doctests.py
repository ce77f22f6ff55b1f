"""Every docstring example in the package runs (examples marked +SKIP need a live database)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import pglogic

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(pglogic.__path__, "pglogic.")
    if not m.name.startswith("pglogic.migrations")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} failing examples in {name}"
