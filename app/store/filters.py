"""Search filters on item values, validated and compiled to SQL.

Semantics follow langgraph's `BaseStore` (its in-memory store is the reference):

- `{"k": v}` with a plain value: equality. A nested object matches when each of its keys
  matches (recursively, so `{"a": {"b": 1}}` tests `value.a.b == 1`); a list matches
  element-wise with the same length.
- `{"k": {"$eq"|"$ne"|"$gt"|"$gte"|"$lt"|"$lte": x, ...}}`: operators, ANDed. `$eq`/`$ne`
  compare exactly; `$ne` also matches when the key is missing. Range operators compare
  numbers and need a number; a missing or non-numeric stored value does not match.
- JSON types are strict: `1` matches `1.0` but neither `true` nor `"1"`.

Anything else (an unknown operator, a range bound that is not a number, a key with `"`) is
`InvalidInput` before any query runs.

This module builds WHERE-clause expressions only, never a statement: app/store/queries.py
puts them into its statements (so it stays here, beside the validation it shares).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, Float, bindparam, false, func, not_, or_
from sqlalchemy.engine import Dialect

from app.db.dialect import (
    JsonPath,
    json_array_length,
    json_equals,
    json_kind_is,
    json_missing,
    json_number,
    json_scalar_equals,
)
from app.errors import InvalidInput

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_MAX_DEPTH = 16


def _check_json(value: Any, where: str, depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        raise InvalidInput(f"filter {where}: nested too deeply")
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput(f"filter {where}: numbers must be finite")
        return
    if isinstance(value, list | tuple):
        for element in value:
            _check_json(element, where, depth + 1)
        return
    if isinstance(value, Mapping):
        for key, sub in value.items():
            _check_key(key, where)
            _check_json(sub, where, depth + 1)
        return
    raise InvalidInput(f"filter {where}: {type(value).__name__} is not a JSON value")


def _check_key(key: Any, where: str) -> None:
    if not isinstance(key, str) or not key:
        raise InvalidInput(f"filter {where}: keys must be non-empty strings")
    if '"' in key or "\x00" in key:
        raise InvalidInput(f"filter {where}: keys may not contain '\"' or NUL")


def validate_filter(filter: Any) -> None:
    """Raise InvalidInput unless `filter` is a well-formed search filter (or None)."""
    if filter is None:
        return
    if not isinstance(filter, Mapping):
        raise InvalidInput("filter must be an object")
    for key, value in filter.items():
        _check_key(key, f"key {key!r}")
        _validate_match(value, f"key {key!r}", 1)


def _validate_match(value: Any, where: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise InvalidInput(f"filter {where}: nested too deeply")
    if isinstance(value, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in value):
            for op, operand in value.items():
                if op not in OPERATORS:
                    raise InvalidInput(
                        f"filter {where}: unknown operator {op!r}"
                        f" (supported: {', '.join(sorted(OPERATORS))})"
                    )
                if op in ("$eq", "$ne"):
                    _check_json(operand, where)
                elif isinstance(operand, bool) or not isinstance(operand, int | float):
                    raise InvalidInput(f"filter {where}: {op} needs a number")
                elif not math.isfinite(operand):
                    raise InvalidInput(f"filter {where}: numbers must be finite")
            return
        for key, sub in value.items():
            _check_key(key, where)
            _validate_match(sub, f"{where}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for element in value:
            _validate_match(element, where, depth + 1)
        return
    _check_json(value, where)


# A validated filter flattens to a conjunction of leaves, each a hashable tuple, plus one
# value per leaf (None when the leaf has none). Statements are built and cached per tuple of
# leaves (the filter's shape) with the values as bound parameters, so a filter of a known
# shape costs no SQL construction.
Leaf = tuple[Any, ...]


def flatten_filter(filter: Mapping[str, Any] | None) -> tuple[tuple[Leaf, ...], list[Any]]:
    """(leaves, values) of a validated filter; empty for no filter."""
    leaves: list[Leaf] = []
    values: list[Any] = []
    for key, value in (filter or {}).items():
        _flatten_match((key,), value, leaves, values)
    return tuple(leaves), values


def _eq_kind(value: Any) -> tuple[str, Any]:
    """How an equality is spelt: bound number or string, or part of the shape itself."""
    if value is None:
        return "null", None
    if isinstance(value, bool):
        return ("true" if value else "false"), None
    if isinstance(value, int | float):
        return "number", value
    if isinstance(value, str):
        return "string", value
    # objects and lists: compared as a whole, rare; the JSON text is part of the shape
    return "json:" + json.dumps(value, sort_keys=True), None


def _flatten_match(path: JsonPath, value: Any, leaves: list[Leaf], values: list[Any]) -> None:
    if isinstance(value, Mapping):
        if any(k.startswith("$") for k in value):
            for op, operand in value.items():
                if op in ("$eq", "$ne"):
                    kind, bound = _eq_kind(operand)
                    leaves.append((op[1:], path, kind))
                    values.append(bound)
                else:
                    leaves.append((op[1:], path))
                    values.append(float(operand))
            return
        leaves.append(("object", path))
        values.append(None)
        for key, sub in value.items():
            _flatten_match((*path, key), sub, leaves, values)
        return
    if isinstance(value, list | tuple):
        leaves.append(("len", path, len(value)))
        values.append(None)
        for i, element in enumerate(value):
            _flatten_match((*path, i), element, leaves, values)
        return
    kind, bound = _eq_kind(value)
    leaves.append(("eq", path, kind))
    values.append(bound)


def filter_params(values: list[Any]) -> dict[str, Any]:
    """Bound parameters for the statement built from the same flattening."""
    return {f"f{i}": value for i, value in enumerate(values) if value is not None}


def build_conditions(
    dialect: Dialect | str, column: ColumnElement[Any], leaves: tuple[Leaf, ...]
) -> list[ColumnElement[bool]]:
    """WHERE conditions for flattened leaves; leaf i with a value binds `f<i>`."""
    return [_leaf(dialect, column, i, leaf) for i, leaf in enumerate(leaves)]


def _is_true(cond: ColumnElement[bool]) -> ColumnElement[bool]:
    # SQL three-valued logic: a missing path yields NULL, which must count as "no match"
    # before it is negated.
    return func.coalesce(cond, false())


def _equals(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath, kind: str, name: str
) -> ColumnElement[bool]:
    if kind == "null":  # the reference store reads a missing key as None
        return or_(json_missing(dialect, column, path), json_kind_is(dialect, column, path, "null"))
    if kind in ("number", "string"):
        return _is_true(json_scalar_equals(dialect, column, path, kind, name))
    if kind in ("true", "false"):
        return _is_true(json_equals(dialect, column, path, kind == "true"))
    return _is_true(json_equals(dialect, column, path, json.loads(kind[len("json:") :])))


def _leaf(
    dialect: Dialect | str, column: ColumnElement[Any], i: int, leaf: Leaf
) -> ColumnElement[bool]:
    op, path = leaf[0], leaf[1]
    if op == "eq":
        return _equals(dialect, column, path, leaf[2], f"f{i}")
    if op == "ne":
        return not_(_equals(dialect, column, path, leaf[2], f"f{i}"))
    if op == "object":
        return _is_true(json_kind_is(dialect, column, path, "object"))
    if op == "len":
        length: ColumnElement[bool] = json_array_length(dialect, column, path) == leaf[2]
        return length
    number = json_number(dialect, column, path)
    bound = bindparam(f"f{i}", type_=Float)
    if op == "gt":
        return number > bound
    if op == "gte":
        return number >= bound
    if op == "lt":
        return number < bound
    return number <= bound
