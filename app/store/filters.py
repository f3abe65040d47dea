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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, and_, false, func, not_, or_, true
from sqlalchemy.engine import Dialect

from app.db.dialect import (
    JsonPath,
    json_array_length,
    json_equals,
    json_kind_is,
    json_missing,
    json_number,
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


def compile_filter(
    dialect: Dialect | str, column: ColumnElement[Any], filter: Mapping[str, Any] | None
) -> list[ColumnElement[bool]]:
    """WHERE conditions for a validated filter on the JSON `column` (empty: no filter)."""
    if not filter:
        return []
    return [_match(dialect, column, (key,), value) for key, value in filter.items()]


def _is_true(cond: ColumnElement[bool]) -> ColumnElement[bool]:
    # SQL three-valued logic: a missing path yields NULL, which must count as "no match"
    # before it is negated.
    return func.coalesce(cond, false())


def _equals(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath, value: Any
) -> ColumnElement[bool]:
    if value is None:  # the reference store reads a missing key as None
        return or_(json_missing(dialect, column, path), json_kind_is(dialect, column, path, "null"))
    return _is_true(json_equals(dialect, column, path, value))


def _match(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath, value: Any
) -> ColumnElement[bool]:
    if isinstance(value, Mapping):
        if any(k.startswith("$") for k in value):
            return and_(
                true(), *(_operator(dialect, column, path, op, x) for op, x in value.items())
            )
        return and_(
            json_kind_is(dialect, column, path, "object"),
            *(_match(dialect, column, (*path, k), v) for k, v in value.items()),
        )
    if isinstance(value, list | tuple):
        return and_(
            json_array_length(dialect, column, path) == len(value),
            *(_match(dialect, column, (*path, i), v) for i, v in enumerate(value)),
        )
    return _equals(dialect, column, path, value)


def _operator(
    dialect: Dialect | str, column: ColumnElement[Any], path: JsonPath, op: str, operand: Any
) -> ColumnElement[bool]:
    if op == "$eq":
        return _equals(dialect, column, path, operand)
    if op == "$ne":
        return not_(_equals(dialect, column, path, operand))
    number = json_number(dialect, column, path)
    bound = float(operand)
    if op == "$gt":
        return number > bound
    if op == "$gte":
        return number >= bound
    if op == "$lt":
        return number < bound
    return number <= bound
