"""DeltaChannel history from the rows of its one statement (app/checkpoint/delta_queries.py,
whose docstring describes the walk): per channel, the seed and the writes since, oldest first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite, writes_sort_key

from app.checkpoint.delta_queries import KIND_BLOB_SEED, KIND_WRITE


def assemble_history(
    channels: Sequence[str],
    rows: Sequence[Any],
    loads: Callable[[str, bytes], Any],
) -> dict[str, DeltaChannelHistory]:
    """Turn the query's rows into per-channel `DeltaChannelHistory` (oldest write first).

    Rows are unpacked by position, in the statement's column order
    (`delta_queries.HISTORY_COLUMNS`): a history is one row per write, and a Row's attribute
    access is a name lookup each time, about a microsecond, several times per row."""
    writes: dict[int, list[tuple[tuple[int, str, str, int], PendingWrite]]] = {
        i: [] for i in range(len(channels))
    }
    seeds: dict[int, Any] = {}
    for kind, ch_index, depth, task_path, task_id, idx, type_tag, blob in rows:
        i = int(ch_index)
        channel = channels[i]
        if kind == KIND_WRITE:
            order = (-int(depth), *writes_sort_key(task_path or "", task_id, int(idx)))
            writes[i].append((order, (task_id, channel, loads(type_tag, blob))))
        elif kind == KIND_BLOB_SEED:
            if type_tag != "empty":
                seeds[i] = loads(type_tag, blob)
        else:
            stored = loads(type_tag, blob)
            values = stored.get("channel_values") or {}
            if channel in values:
                seeds[i] = values[channel]
    result: dict[str, DeltaChannelHistory] = {}
    for i, channel in enumerate(channels):
        entry: DeltaChannelHistory = {
            "writes": [write for _, write in sorted(writes[i], key=lambda item: item[0])]
        }
        if i in seeds:
            entry["seed"] = seeds[i]
        result[channel] = entry
    return result
