"""State values for humans: pretty JSON, big values collapsed with their size, diffs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

# a value longer than this (as JSON) is drawn collapsed, with its size
COLLAPSE_BYTES = 2048
# and never drawn beyond this: a 50 MB value must not become a 50 MB page
SHOW_BYTES = 64 * 1024


@dataclass
class Shown:
    text: str
    size: int
    collapsed: bool
    truncated: bool


def to_json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS, default=str)


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def show(value: Any) -> Shown:
    raw = to_json(value)
    size = len(raw)
    text = raw[:SHOW_BYTES].decode("utf-8", "replace")
    return Shown(text=text, size=size, collapsed=size > COLLAPSE_BYTES, truncated=size > SHOW_BYTES)


@dataclass
class KeyChange:
    key: str
    kind: str  # added | removed | changed | same
    before: Shown | None
    after: Shown | None


def diff_values(before: Any, after: Any) -> list[KeyChange]:
    """Key-by-key changes between two checkpoints' values (changed keys first)."""
    left = before if isinstance(before, dict) else {"(value)": before}
    right = after if isinstance(after, dict) else {"(value)": after}
    changes: list[KeyChange] = []
    for key in sorted(set(left) | set(right)):
        if key not in left:
            changes.append(KeyChange(key, "added", None, show(right[key])))
        elif key not in right:
            changes.append(KeyChange(key, "removed", show(left[key]), None))
        elif to_json(left[key]) != to_json(right[key]):
            changes.append(KeyChange(key, "changed", show(left[key]), show(right[key])))
        else:
            changes.append(KeyChange(key, "same", show(left[key]), None))
    order = {"changed": 0, "added": 1, "removed": 2, "same": 3}
    return sorted(changes, key=lambda c: order[c.kind])
