"""Search filters evaluated in Python, for Store values sealed at rest.

A sealed value is an opaque string to SQL (app/db/sealed.py), so with an encryption key the
Store fetches the live items under the namespace prefix and applies the filter here, to the
decrypted values, with the same semantics as the SQL of app/store/filters.py (the same
flattened leaves). The cost is a scan of the prefix for a filtered search (README).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from app.store.filters import Leaf

_MISSING = object()


def _at(value: Any, path: Sequence[Any]) -> Any:
    for step in path:
        if isinstance(step, int) and isinstance(value, list):
            if not -len(value) <= step < len(value) or step < 0:
                return _MISSING
            value = value[step]
        elif isinstance(step, str) and isinstance(value, Mapping):
            if step not in value:
                return _MISSING
            value = value[step]
        else:
            return _MISSING
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    """JSON equality with strict types: 1 == 1.0, but true != 1."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _equals(found: Any, kind: str, bound: Any) -> bool:
    if kind == "null":
        return found is _MISSING or found is None
    if found is _MISSING:
        return False
    if kind == "number":
        return _is_number(found) and found == bound
    if kind == "string":
        return isinstance(found, str) and found == bound
    if kind in ("true", "false"):
        return found is (kind == "true")
    return _same(found, json.loads(kind[len("json:") :]))


def _leaf(value: Any, leaf: Leaf, bound: Any) -> bool:
    op, path = leaf[0], leaf[1]
    found = _at(value, path)
    if op == "eq":
        return _equals(found, leaf[2], bound)
    if op == "ne":
        return not _equals(found, leaf[2], bound)
    if op == "object":
        return isinstance(found, Mapping)
    if op == "len":
        return isinstance(found, list) and len(found) == leaf[2]
    if not _is_number(found):
        return False
    if op == "gt":
        return bool(found > bound)
    if op == "gte":
        return bool(found >= bound)
    if op == "lt":
        return bool(found < bound)
    return bool(found <= bound)


def matches(value: Any, leaves: tuple[Leaf, ...], values: Sequence[Any]) -> bool:
    """Whether a (decrypted) item value satisfies every flattened filter leaf."""
    return all(_leaf(value, leaf, bound) for leaf, bound in zip(leaves, values, strict=True))
