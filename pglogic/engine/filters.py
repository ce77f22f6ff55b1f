"""Metadata filters: jsonb containment and typed comparisons, compiled to SQL with placeholders.

Filter text forms (repeatable on the command line with ``--where``):

- ``{"site": "cooking"}`` — JSON object: the document's metadata contains it (``@>``);
- ``key=value``, ``key!=value``, ``key<value``, ``key<=value``, ``key>value``, ``key>=value`` —
  the value is read as JSON when it parses (``year>=1990`` compares numbers), else as a string.

Semantics (``key`` is one top-level key of the metadata object, taken literally):

- ``key=value`` holds when the metadata contains ``{key: value}``, or, for a string or number,
  when ``metadata[key]`` is an array holding it (``labels=grain`` matches ``"labels": ["grain",
  "wheat"]``); a number also matches the same number written as a string (``year=1995``
  matches ``"1995"``). Containment is served by the corpus's GIN index on ``metadata``.
- ``key!=value`` is its negation: documents without the key pass.
- ``<``, ``<=``, ``>``, ``>=`` compare a number with numbers (and strings that hold a number:
  ``"1995" >= 1990`` holds), a string with strings (in the database's collation); a document
  whose value has another type, or that lacks the key, does not pass. Other values (true, null,
  arrays, objects) cannot be ordered: :class:`~pglogic.errors.InvalidInput`.

Example:
    >>> f = parse_filter('year>=1987')
    >>> f
    Comparison(key='year', op='>=', value=1987)
    >>> expr, params = filters_sql([f], sql.Identifier("metadata"), prefix="f")
    >>> params
    {'f0_key': 'year', 'f0': 1987}
"""

from __future__ import annotations

import json
import math
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
    """``metadata[key] <op> value``, with the semantics of the module docstring."""

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


def _json(value: Any) -> str:
    """``value`` as JSON text for a jsonb parameter; InvalidInput for what jsonb cannot hold (NaN,
    infinities, NUL characters)."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"Invalid filter value {value!r}: not JSON ({exc})") from None
    if "\\u0000" in text:
        raise InvalidInput("A filter cannot contain a NUL character (\\x00)")
    return text


#: A JSON string that holds a number, as PostgreSQL's numeric input reads it.
NUMERIC_TEXT = r"^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\s*$"


def _equals(
    column: sql.Composable, key: str, value: Any, name: str
) -> tuple[sql.Composable, dict[str, Any]]:
    """``key=value`` as containment (GIN-indexable): the value, the array holding it, and for a
    number its text form."""
    forms: list[Any] = [{key: value}]
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        forms.append({key: [value]})
        if not isinstance(value, str):
            forms.append({key: json.dumps(value)})
    params = {f"{name}_{j}": _json(form) for j, form in enumerate(forms)}
    expr = sql.SQL(" OR ").join(
        sql.SQL("{} @> {}::jsonb").format(column, sql.Placeholder(p)) for p in params
    )
    return sql.SQL("({})").format(expr), params


def _ordered(
    column: sql.Composable, f: Comparison, name: str
) -> tuple[sql.Composable, dict[str, Any]]:
    """``key < value`` (and ``<=``, ``>``, ``>=``): numbers with numbers, strings with strings."""
    value = f.value
    _json([f.key, value])  # (refuses NUL characters)
    kname = f"{name}_key"
    params: dict[str, Any] = {kname: f.key, name: value}
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidInput(f"Invalid filter {f.key}{f.op}{value}: not a finite number")
        # CASE evaluates lazily: only a string that holds a number is cast.
        expr = sql.SQL(
            "CASE jsonb_typeof({col} -> {key}) WHEN 'number' THEN ({col} -> {key})::numeric"
            " WHEN 'string' THEN CASE WHEN ({col} ->> {key}) ~ {pattern}"
            " THEN ({col} ->> {key})::numeric END END {op} {value}::numeric"
        )
        return expr.format(
            col=column, key=sql.Placeholder(kname), pattern=sql.Literal(NUMERIC_TEXT),
            op=sql.SQL(f.op), value=sql.Placeholder(name),
        ), params  # fmt: skip
    if isinstance(value, str):
        expr = sql.SQL(
            "(jsonb_typeof({col} -> {key}) = 'string' AND ({col} ->> {key}) {op} {value}::text)"
        )
        return expr.format(
            col=column, key=sql.Placeholder(kname), op=sql.SQL(f.op), value=sql.Placeholder(name)
        ), params  # fmt: skip
    raise InvalidInput(
        f"Invalid filter {f.key}{f.op}{json.dumps(value)}: only numbers and strings can be "
        f"compared with {f.op}; use {f.key}={json.dumps(value)} for equality"
    )


def filters_sql(
    filters: Sequence[Filter], column: sql.Composable, *, prefix: str = "f"
) -> tuple[sql.Composable, dict[str, Any]]:
    """Return one SQL boolean expression (AND of all filters) and its parameters.

    Example:
        >>> expr, params = filters_sql([Contains({"a": 1})], sql.Identifier("metadata"))
        >>> expr.as_string(None), params
        ('"metadata" @> %(f0)s::jsonb', {'f0': '{"a": 1}'})
        >>> expr, params = filters_sql([parse_filter("site!=cooking")], sql.Identifier("m"))
        >>> expr.as_string(None)
        'NOT coalesce(("m" @> %(f0_0)s::jsonb OR "m" @> %(f0_1)s::jsonb), false)'
        >>> params
        {'f0_0': '{"site": "cooking"}', 'f0_1': '{"site": ["cooking"]}'}
    """
    parts: list[sql.Composable] = []
    params: dict[str, Any] = {}
    for i, f in enumerate(filters):
        name = f"{prefix}{i}"
        if isinstance(f, Contains):
            parts.append(sql.SQL("{} @> {}::jsonb").format(column, sql.Placeholder(name)))
            params[name] = _json(f.value)
            continue
        if f.op not in OPS:
            raise InvalidInput(f"Invalid filter operator {f.op!r}")
        if f.op in ("=", "!="):
            expr, fparams = _equals(column, f.key, f.value, name)
            # (a NULL metadata holds no key: it passes !=)
            parts.append(sql.SQL("NOT coalesce({}, false)").format(expr) if f.op == "!=" else expr)
        else:
            expr, fparams = _ordered(column, f, name)
            parts.append(expr)
        params.update(fparams)
    if not parts:
        return sql.SQL("TRUE"), params
    return sql.SQL(" AND ").join(parts), params
