"""Metadata filters: one language for every interface, compiled to SQL with placeholders.

A filter is one of (one, or a list of them; :func:`parse_filters` reads every form, and the SQL
function ``pglogic.search`` reads the same ones with ``pglogic._parse_filters``):

- ``"key=value"``, ``"key!=value"``, ``"key<value"``, ``"key<=value"``, ``"key>value"``,
  ``"key>=value"`` — the value is read as JSON when it parses (``year>=1990`` compares numbers),
  else as a string (``places=usa``);
- an object — the document's metadata contains it (``@>``): ``{"places": ["usa"]}``, also as
  JSON text (``'{"places": ["usa"]}'``, as ``--where`` takes it);
- ``{"contains": {...}}`` — the same, explicitly;
- ``{"key": KEY, "op": OP, "value": VALUE}`` — the comparison ``KEY OP VALUE`` (OP one of the
  six above). An object with a key ``key``, ``op`` or ``value`` is read as this form, one with a
  key ``contains`` as the one before: to match metadata with such a field, wrap it in
  ``{"contains": ...}`` or write ``"key=value"``.

Any other shape is refused (:class:`~pglogic.errors.InvalidInput`) with a message that shows
these forms.

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
    >>> parse_filters(["year>=1987", {"places": ["usa"]}])
    (Comparison(key='year', op='>=', value=1987), Contains(value={'places': ['usa']}))
    >>> f = parse_filter('year>=1987')
    >>> expr, params = filters_sql([f], sql.Identifier("metadata"), prefix="f")
    >>> params
    {'f0_key': 'year', 'f0': 1987}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from pglogic.errors import InvalidInput

OPS = ("=", "!=", "<", "<=", ">", ">=")
#: The accepted forms, as every refusal of a filter's shape shows them.
FORMS = (
    'a filter is "KEY=VALUE" or "KEY>=VALUE" (=, !=, <, <=, >, >=), an object the metadata '
    'contains like {"places": ["usa"]}, {"contains": {...}} or {"key": KEY, "op": OP, "value": '
    "VALUE}; give one filter or a list of them"
)
#: The keys of the explicit comparison form.
EXPLICIT = ("key", "op", "value")
#: JSON's whitespace, which the text form ignores around the key, the operator and the value.
_SPACE = " \t\n\r"
_COMPARISON = re.compile(
    r"^[ \t\n\r]*([A-Za-z_][A-Za-z0-9_.-]*)[ \t\n\r]*(!=|<=|>=|=|<|>)(.*)\Z", re.S
)
#: Python rounds a JSON number from here up to infinity (2**1024 - 2**970, DBL_MAX and half an ulp).
_OVERFLOW = 2**1024 - 2**970


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
#: One filter in any of its forms (module docstring), and what ``filters=`` takes: one or a list.
FilterForm = str | Mapping[str, Any] | Filter
Filters = FilterForm | Sequence[FilterForm] | None


def show(text: str) -> str:
    """``text`` as a JSON string, cut to 100 characters: how refusals quote what they refuse
    (``pglogic._show`` of the SQL function writes the same).

    Example:
        >>> print(show('places = "usa'))
        "places = \\"usa"
    """
    shown = json.dumps(text, ensure_ascii=False)
    return shown if len(shown) <= 100 else shown[:97] + "..."


def _kind(value: Any) -> str:
    """What a value that is no filter is, in JSON's words (Python's for what JSON has not)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return show(value)
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def _keys(obj: Mapping[str, Any]) -> str:
    """An object's keys, JSON-quoted, in the order jsonb keeps them (shorter first)."""
    order = sorted(obj, key=lambda k: (len(k.encode("utf-8")), k.encode("utf-8")))
    return ", ".join(show(k) for k in order)


def _check_values(value: Any) -> None:
    """Refuse what a jsonb value cannot hold: NaN, infinities and numbers past a double's range,
    NUL characters (``pglogic._parse_filters`` refuses the same)."""
    stack = [value]
    while stack:  # (not recursive: a deeply nested value is no RecursionError)
        v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            raise InvalidInput(
                "Invalid filter: a number is out of range (NaN, an infinity or past 1.8e308)"
            )
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= _OVERFLOW:
            raise InvalidInput(
                "Invalid filter: a number is out of range (NaN, an infinity or past 1.8e308)"
            )
        if isinstance(v, str) and "\x00" in v:
            raise InvalidInput("A filter cannot contain a NUL character (\\x00)")
        if isinstance(v, Mapping):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list | tuple):
            stack.extend(v)


def filter_from_object(obj: Mapping[str, Any]) -> Filter:
    """One filter from an object: ``{"contains": {...}}``, ``{"key": K, "op": OP, "value": V}``
    or any other object, which the metadata must contain.

    Example:
        >>> filter_from_object({"key": "year", "op": ">=", "value": 1990})
        Comparison(key='year', op='>=', value=1990)
        >>> filter_from_object({"places": ["usa"]})
        Contains(value={'places': ['usa']})
        >>> filter_from_object({"key": "places", "value": "usa"})
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid filter with keys "key", "value": {"key": KEY, "op": OP, "value": VALUE} takes these three keys and no other (for metadata with a field named key, op or value, use {"contains": {...}}); a filter is "KEY=VALUE" or "KEY>=VALUE" (=, !=, <, <=, >, >=), an object the metadata contains like {"places": ["usa"]}, {"contains": {...}} or {"key": KEY, "op": OP, "value": VALUE}; give one filter or a list of them
    """
    if not all(isinstance(k, str) for k in obj):
        raise InvalidInput(f"Invalid filter: an object's keys are strings; {FORMS}")
    if "contains" in obj:
        if len(obj) != 1 or not isinstance(obj["contains"], Mapping):
            raise InvalidInput(
                f'Invalid filter with keys {_keys(obj)}: {{"contains": {{...}}}} takes one '
                f"object and no other key; {FORMS}"
            )
        return _contains(obj["contains"])
    if any(k in obj for k in EXPLICIT):
        if len(obj) != 3 or not all(k in obj for k in EXPLICIT):
            raise InvalidInput(
                f'Invalid filter with keys {_keys(obj)}: {{"key": KEY, "op": OP, "value": '
                "VALUE} takes these three keys and no other (for metadata with a field named "
                f'key, op or value, use {{"contains": {{...}}}}); {FORMS}'
            )
        return _comparison(obj["key"], obj["op"], obj["value"])
    return _contains(obj)


def _contains(obj: Any) -> Contains:
    if not isinstance(obj, Mapping):
        raise InvalidInput(f"Invalid filter: got {_kind(obj)}; {FORMS}")
    if not all(isinstance(k, str) for k in obj):
        raise InvalidInput(f"Invalid filter: an object's keys are strings; {FORMS}")
    _check_values(obj)
    return Contains(dict(obj))


def _comparison(key: Any, op: Any, value: Any) -> Comparison:
    if not isinstance(key, str):
        raise InvalidInput(f'Invalid filter: "key" takes a string (got {_kind(key)})')
    if not isinstance(op, str) or op not in OPS:
        raise InvalidInput(f'Invalid filter: "op" is one of {", ".join(OPS)} (got {_kind(op)})')
    _check_values(value)
    return Comparison(key, op, value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # (NaN, Infinity: jsonb has neither)


def parse_filter(text: str) -> Filter:
    """Parse one filter from its text form: ``KEY OP VALUE`` or a JSON object.

    Example:
        >>> parse_filter('{"labels": ["grain"]}')
        Contains(value={'labels': ['grain']})
        >>> parse_filter('site=cooking')
        Comparison(key='site', op='=', value='cooking')
        >>> parse_filter('places')
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid filter "places": a filter is "KEY=VALUE" or "KEY>=VALUE" (=, !=, <, <=, >, >=), an object the metadata contains like {"places": ["usa"]}, {"contains": {...}} or {"key": KEY, "op": OP, "value": VALUE}; give one filter or a list of them
    """
    stripped = text.strip(_SPACE)
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped, parse_constant=_no_constant)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise InvalidInput(f"Invalid filter {show(text)}: not a JSON object; {FORMS}")
        return filter_from_object(value)
    m = _COMPARISON.match(text)
    if not m:
        raise InvalidInput(f"Invalid filter {show(text)}: {FORMS}")
    key, op, raw = m.groups()
    raw = raw.strip(_SPACE)
    try:
        parsed: Any = json.loads(raw, parse_constant=_no_constant)
    except ValueError:
        parsed = raw
    return _comparison(key, op, parsed)


def parse_filters(value: Any) -> tuple[Filter, ...]:
    """Every filter form (module docstring): one filter or a list (or tuple) of them; None is
    no filter. Parsed filters (:class:`Contains`, :class:`Comparison`) pass as they are.

    Example:
        >>> parse_filters("places=usa")
        (Comparison(key='places', op='=', value='usa'),)
        >>> parse_filters([{"contains": {"labels": ["grain"]}}, {"key": "n", "op": "<", "value": 3}])
        (Contains(value={'labels': ['grain']}), Comparison(key='n', op='<', value=3))
        >>> parse_filters(5)
        Traceback (most recent call last):
        pglogic.errors.InvalidInput: Invalid filter: got a number; a filter is "KEY=VALUE" or "KEY>=VALUE" (=, !=, <, <=, >, >=), an object the metadata contains like {"places": ["usa"]}, {"contains": {...}} or {"key": KEY, "op": OP, "value": VALUE}; give one filter or a list of them
    """
    if value is None:
        return ()
    items = list(value) if isinstance(value, list | tuple) else [value]
    out: list[Filter] = []
    for item in items:
        if isinstance(item, Contains):
            out.append(_contains(item.value))
        elif isinstance(item, Comparison):
            out.append(_comparison(item.key, item.op, item.value))
        elif isinstance(item, str):
            out.append(parse_filter(item))
        elif isinstance(item, Mapping):
            out.append(filter_from_object(item))
        else:
            kind = "a list inside the list" if isinstance(item, list | tuple) else _kind(item)
            raise InvalidInput(f"Invalid filter: got {kind}; {FORMS}")
    return tuple(out)


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
        if not isinstance(f.op, str) or f.op not in OPS:
            _comparison(f.key, f.op, f.value)  # (raises: the op is not one of OPS)
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
