"""Authorization filters (what a `langgraph_sdk.Auth` handler returns) as JSON containment.

A handler returns `{"owner": "alice"}`, `{"owner": {"$eq": "alice"}}` or
`{"participants": {"$contains": "alice"}}` / `{"$contains": ["alice", "bob"]}` (the operators
`langgraph_sdk.auth.types.FilterType` documents). Each one is a containment test on the
resource's metadata, which both dialects run in SQL (`app.db.dialect.json_contains`):

- `"v"` and `{"$eq": "v"}`: the stored value is `"v"` (for a string, containment is equality);
- `{"$contains": "v"}`: the stored value is a list holding `"v"`;
- `{"$contains": ["v", "w"]}`: the stored value is a list holding both.

So a filter becomes one containment object, and a filter combined with the client's own
metadata filter is still one (`merge_containment`): searches and counts keep their single
indexed `metadata @> :filter` predicate. Anything else a handler returns (another operator, a
non-string key) is refused: authorization fails closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

OPERATORS = frozenset({"$eq", "$contains"})


class BadFilter(ValueError):
    """The handler's filter is not one the SDK documents; the request is refused."""


class _Empty:
    """The AND of two containment tests no value can pass (e.g. owner=alice and owner=bob)."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _Empty()


def _one(key: str, condition: Any) -> Any:
    if not isinstance(condition, Mapping):
        return condition
    if len(condition) != 1:
        raise BadFilter(f"filter on {key!r}: an operator object holds exactly one operator")
    ((operator, operand),) = condition.items()
    if operator not in OPERATORS:
        raise BadFilter(f"filter on {key!r}: unsupported operator {str(operator)[:40]!r}")
    if operator == "$eq":
        return operand
    if isinstance(operand, list):
        return list(operand)
    return [operand]


def to_containment(handler_filter: Mapping[str, Any]) -> dict[str, Any]:
    """The containment object equivalent to a handler's filter (BadFilter if unsupported)."""
    out: dict[str, Any] = {}
    for key, condition in handler_filter.items():
        if not isinstance(key, str) or not key:
            raise BadFilter("filter keys are metadata field names (non-empty strings)")
        out[key] = _one(key, condition)
    return out


def merge_containment(left: Any, right: Any) -> Any:
    """A containment object matched exactly by the values that match both (or EMPTY).

    Objects: every key of either, merged recursively. Lists: the union (a list contains both
    lists iff it contains their union). Anything else must be equal, since containment of a
    scalar is equality.
    """
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        merged: dict[str, Any] = dict(left)
        for key, value in right.items():
            if key in merged:
                both = merge_containment(merged[key], value)
                if both is EMPTY:
                    return EMPTY
                merged[key] = both
            else:
                merged[key] = value
        return merged
    if isinstance(left, list) and isinstance(right, list):
        return left + [item for item in right if item not in left]
    if type(left) is type(right) and left == right:
        return left
    return EMPTY
