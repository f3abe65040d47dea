"""Checks every op of a batch before anything runs, so bad input leaves the store unchanged."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from langgraph.store.base import (
    GetOp,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchOp,
    tokenize_path,
)

from app.db.storable import (
    MAX_KEY_BYTES,
    MAX_NAMESPACE_BYTES,
    MAX_NAMESPACE_DEPTH,
    MAX_OFFSET,
    text_problem,
    value_problem,
)
from app.errors import InvalidInput, PayloadTooLarge
from app.store.filters import validate_filter

SEPARATOR = "."
DEFAULT_MAX_VALUE_BYTES = 1024 * 1024


def join_namespace(namespace: tuple[str, ...]) -> str:
    """The `prefix` column: labels joined by "." (labels never contain ".")."""
    return SEPARATOR.join(namespace)


def split_prefix(prefix: str) -> tuple[str, ...]:
    return tuple(prefix.split(SEPARATOR))


def _label_problem(label: Any) -> str | None:
    """What makes `label` unusable as a namespace label: the rules of LangGraph's BaseStore
    (strings, not empty, no '.', which joins labels in the `prefix` column)."""
    if not isinstance(label, str):
        return f"labels must be strings, not {type(label).__name__}"
    if not label:
        return "labels cannot be empty strings"
    if SEPARATOR in label:
        return f"labels cannot contain periods ({SEPARATOR!r})"
    return None


def _labels(namespace: Any, what: str, *, allow_empty: bool) -> None:
    if not isinstance(namespace, tuple | list):
        raise InvalidInput(f"{what} must be a list of labels")
    if not namespace and not allow_empty:
        raise InvalidInput(f"{what} cannot be empty")
    for label in namespace:
        problem = _label_problem(label)
        if problem:
            raise InvalidInput(f"{what}: {problem}")
    if len(namespace) > MAX_NAMESPACE_DEPTH:
        raise InvalidInput(f"{what} has {len(namespace)} labels; at most {MAX_NAMESPACE_DEPTH}")
    for label in namespace:
        problem = text_problem(label)
        if problem:
            raise InvalidInput(f"{what}: a label contains {problem}")
    if len(join_namespace(tuple(namespace)).encode()) > MAX_NAMESPACE_BYTES:
        raise InvalidInput(f"{what}: labels joined by '.' exceed {MAX_NAMESPACE_BYTES} bytes")


def _key(key: Any) -> None:
    if not isinstance(key, str):
        raise InvalidInput(f"key must be a string, not {type(key).__name__}")
    problem = text_problem(key)
    if problem:
        raise InvalidInput(f"key contains {problem}")
    if len(key.encode()) > MAX_KEY_BYTES:
        raise InvalidInput(f"key exceeds {MAX_KEY_BYTES} bytes")


def _count(value: Any, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OFFSET:
        raise InvalidInput(f"{what} must be an integer from 0 to {MAX_OFFSET}")


def encode_value(value: Any, max_bytes: int) -> str:
    """The value as JSON text; InvalidInput / PayloadTooLarge when it cannot be stored."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"value must be an object (a dict), not {type(value).__name__}")
    try:
        text = json.dumps(dict(value), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"value is not JSON-serializable: {exc}") from exc
    problem = value_problem(value, "value")
    if problem:
        raise InvalidInput(problem)
    size = len(text.encode())
    if size > max_bytes:
        raise PayloadTooLarge(f"value is {size} bytes; the limit is {max_bytes}")
    return text


def _ttl(ttl: Any) -> None:
    if ttl is None:
        return
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not math.isfinite(ttl):
        raise InvalidInput("ttl must be a number of minutes")
    if ttl <= 0:
        raise InvalidInput("ttl must be positive")


def _index(index: Any) -> None:
    if index is None or index is False:
        return
    if not isinstance(index, list) or not all(isinstance(p, str) and p for p in index):
        raise InvalidInput("index must be false, null or a list of JSON paths")
    for path in index:
        if path != "$":
            try:
                tokenize_path(path)
            except (ValueError, IndexError) as exc:
                raise InvalidInput(f"index path {path!r} is malformed") from exc


def validate_op(op: Op, max_value_bytes: int) -> str | None:
    """Raise InvalidInput / PayloadTooLarge when `op` cannot run as given; a put's value
    comes back as its JSON text (None for every other op)."""
    if isinstance(op, GetOp):
        _labels(op.namespace, "namespace", allow_empty=False)
        _key(op.key)
    elif isinstance(op, PutOp):
        _labels(op.namespace, "namespace", allow_empty=False)
        if op.namespace and op.namespace[0] == "langgraph":
            raise InvalidInput('the root label "langgraph" is reserved')
        _key(op.key)
        if op.value is not None:
            text = encode_value(op.value, max_value_bytes)
            _index(op.index)
            _ttl(op.ttl)
            return text
    elif isinstance(op, SearchOp):
        _labels(op.namespace_prefix, "namespace_prefix", allow_empty=True)
        validate_filter(op.filter)
        problem = value_problem([op.filter, op.query], "search")
        if problem:
            raise InvalidInput(problem)
        _count(op.limit, "limit")
        _count(op.offset, "offset")
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidInput("query must be a string")
    elif isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            if condition.match_type not in ("prefix", "suffix"):
                raise InvalidInput(f"unknown match type {condition.match_type!r}")
            _labels(condition.path, f"{condition.match_type}", allow_empty=True)
        if op.max_depth is not None:
            _count(op.max_depth, "max_depth")
            if op.max_depth < 1:
                raise InvalidInput("max_depth must be at least 1")
        _count(op.limit, "limit")
        _count(op.offset, "offset")
    else:
        raise InvalidInput(f"unknown store operation {type(op).__name__}")
    return None
