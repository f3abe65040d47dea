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
    """Turn the query's rows into per-channel `DeltaChannelHistory` (oldest write first)."""
    writes: dict[int, list[tuple[tuple[int, str, str, int], PendingWrite]]] = {
        i: [] for i in range(len(channels))
    }
    seeds: dict[int, Any] = {}
    for row in rows:
        i = int(row.ch_index)
        channel = channels[i]
        if row.kind == KIND_WRITE:
            path, task_id, idx = row.task_path or "", row.task_id, int(row.idx)
            order = (-int(row.depth), *writes_sort_key(path, task_id, idx))
            writes[i].append((order, (task_id, channel, loads(row.type, row.blob))))
        elif row.kind == KIND_BLOB_SEED:
            if row.type != "empty":
                seeds[i] = loads(row.type, row.blob)
        else:
            stored = loads(row.type, row.blob)
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
