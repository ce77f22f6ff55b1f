"""Metadata filters: jsonb containment and simple comparisons, compiled to SQL with placeholders.

Filter text forms (repeatable on the command line with ``--where``):

- ``{"site": "cooking"}`` — JSON object: the document's metadata contains it (``@>``);
- ``key=value``, ``key!=value``, ``key<value``, ``key<=value``, ``key>value``, ``key>=value`` —
  the value is read as JSON when it parses (``year>=1990`` compares numbers), else as a string.

Example:
    >>> f = parse_filter('year>=1987')
    >>> f
    Comparison(key='year', op='>=', value=1987)
    >>> expr, params = filters_sql([f], sql.Identifier("metadata"), prefix="f")
    >>> expr.as_string(None), params
    ('("metadata" -> %(f0_key)s) >= %(f0)s::jsonb', {'f0_key': 'year', 'f0': '1987'})
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from pglogic.errors import InvalidInput

OPS = ("=", "!=", "<", "<=", ">", ">=")
_COMPARISON = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*(!=|<=|>=|=|<|>)\s*(.*?)\s*$", re.S)


@dataclass(frozen=True)
class Contains:
    """Metadata contains this JSON object (``metadata @> value``)."""

    value: dict[str, Any]


@dataclass(frozen=True)
class Comparison:
    """``metadata -> key <op> value`` compared as jsonb (numbers numerically, strings by text)."""

    key: str
    op: str
    value: Any


Filter = Contains | Comparison


def parse_filter(text: str) -> Filter:
    """Parse one filter from its text form.

    Example:
        >>> parse_filter('{"labels": ["grain"]}')
        Contains(value={'labels': ['grain']})
        >>> parse_filter('site=cooking')
        Comparison(key='site', op='=', value='cooking')
    """
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"Invalid filter {text!r}: not valid JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise InvalidInput(f"Invalid filter {text!r}: expected a JSON object")
        return Contains(value)
    m = _COMPARISON.match(stripped)
    if not m:
        raise InvalidInput(
            f"Invalid filter {text!r}: use KEY=VALUE, KEY>=VALUE (=, !=, <, <=, >, >=) "
            'or a JSON object like {"site": "cooking"}'
        )
    key, op, raw = m.groups()
    try:
        parsed: Any = json.loads(raw)
    except json.JSONDecodeError:
        parsed = raw
    return Comparison(key, op, parsed)


def filters_sql(
    filters: Sequence[Filter], column: sql.Composable, *, prefix: str = "f"
) -> tuple[sql.Composable, dict[str, Any]]:
    """Return one SQL boolean expression (AND of all filters) and its parameters.

    Example:
        >>> expr, params = filters_sql([Contains({"a": 1})], sql.Identifier("metadata"))
        >>> expr.as_string(None), params
        ('"metadata" @> %(f0)s::jsonb', {'f0': '{"a": 1}'})
    """
    parts: list[sql.Composable] = []
    params: dict[str, Any] = {}
    for i, f in enumerate(filters):
        name = f"{prefix}{i}"
        if isinstance(f, Contains):
            parts.append(sql.SQL("{} @> {}::jsonb").format(column, sql.Placeholder(name)))
            params[name] = json.dumps(f.value)
        else:
            if f.op not in OPS:
                raise InvalidInput(f"Invalid filter operator {f.op!r}")
            op = "<>" if f.op == "!=" else f.op
            parts.append(
                sql.SQL("({} -> {}) {} {}::jsonb").format(
                    column, sql.Placeholder(f"{name}_key"), sql.SQL(op), sql.Placeholder(name)
                )
            )
            params[f"{name}_key"] = f.key
            params[name] = json.dumps(f.value)
    if not parts:
        return sql.SQL("TRUE"), params
    return sql.SQL(" AND ").join(parts), params
