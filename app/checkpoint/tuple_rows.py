"""Turn the rows of the get/list reads (`tuple_queries`) back into `CheckpointTuple`s.

Pure decoding, no I/O: the saver fetches the rows and decides whether a result is big enough
to decode in a worker thread (these functions hold no state, so either place is safe).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol

from app.checkpoint import codec
from app.checkpoint.tuple_queries import KIND_GUARD, KIND_HEADER, KIND_VALUE, KIND_WRITE

# (task_id, channel, task_path, idx, type, blob) of one pending write, as codec decodes them
WriteRow = tuple[str, str, str, int, str, bytes | None]
Blobs = Mapping[tuple[str, str], tuple[str, bytes | None]]


class Header:
    """The checkpoint row of a get/list union, shaped like a `select_checkpoints` row (the
    union carries no thread columns, and the checkpoint body in `blob`)."""

    def __init__(self, thread_id: str, checkpoint_ns: str, row: Any) -> None:
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id: str = row.checkpoint_id
        self.parent_checkpoint_id: str | None = row.parent_checkpoint_id
        self.type: str = row.type
        self.checkpoint: bytes = row.blob
        self.metadata: Any = row.metadata
        self.value_versions: Any = row.value_versions


def blob_bytes(rows: Sequence[Any]) -> int:
    """Bytes of the values and writes in a union's rows (what decoding costs)."""
    return sum(len(r.blob or b"") for r in rows)


def guard_values(rows: Sequence[Any]) -> list[Any]:
    """The values of the caller's guard query that rode along (see `guard_rows`)."""
    return [r.metadata for r in rows if r.kind == KIND_GUARD]


def tuple_from(
    serde: SerializerProtocol, header: Any, blobs: Blobs, writes: Sequence[WriteRow]
) -> CheckpointTuple:
    """One `CheckpointTuple` from its header row, the blobs it references and its writes."""
    checkpoint = codec.decode_checkpoint(
        serde, header.type, header.checkpoint, header.value_versions or {}, blobs
    )
    conf = {"thread_id": header.thread_id, "checkpoint_ns": header.checkpoint_ns}
    return CheckpointTuple(
        config={"configurable": {**conf, "checkpoint_id": header.checkpoint_id}},
        checkpoint=checkpoint,
        metadata=header.metadata,
        parent_config=(
            {"configurable": {**conf, "checkpoint_id": header.parent_checkpoint_id}}
            if header.parent_checkpoint_id
            else None
        ),
        pending_writes=codec.decode_writes(serde, writes),
    )


def get_tuple(
    serde: SerializerProtocol, thread_id: str, checkpoint_ns: str, rows: Sequence[Any]
) -> CheckpointTuple | None:
    """The checkpoint of a `select_tuple` result (None: no header row, no checkpoint)."""
    header = next((r for r in rows if r.kind == KIND_HEADER), None)
    if header is None:
        return None
    blobs = {(r.channel, r.key): (r.type, r.blob) for r in rows if r.kind == KIND_VALUE}
    writes = [
        (r.key, r.channel, r.task_path or "", r.idx, r.type, r.blob)
        for r in rows
        if r.kind == KIND_WRITE
    ]
    return tuple_from(serde, Header(thread_id, checkpoint_ns, header), blobs, writes)


def page_tuples(
    serde: SerializerProtocol, thread_id: str, checkpoint_ns: str, rows: Sequence[Any]
) -> list[CheckpointTuple]:
    """The checkpoints of a `select_list` result, newest first (header rows carry their rank
    in `idx`; write rows their checkpoint id in `checkpoint_id`)."""
    headers: list[Any] = []
    blobs: dict[tuple[str, str], tuple[str, bytes | None]] = {}
    writes: dict[str, list[Any]] = {}
    for r in rows:
        if r.kind == KIND_VALUE:
            blobs[(r.channel, r.key)] = (r.type, r.blob)
        elif r.kind == KIND_WRITE:
            writes.setdefault(r.checkpoint_id, []).append(
                (r.key, r.channel, r.task_path or "", r.idx, r.type, r.blob)
            )
        elif r.kind == KIND_HEADER:
            headers.append(r)
    headers.sort(key=lambda h: h.idx)
    result = []
    for h in headers:
        mine = {
            (channel, version): blobs[(channel, version)]
            for channel, version in (h.value_versions or {}).items()
            if (channel, version) in blobs
        }
        head = Header(thread_id, checkpoint_ns, h)
        result.append(tuple_from(serde, head, mine, writes.get(h.checkpoint_id, [])))
    return result


def build_tuples(
    serde: SerializerProtocol, headers: Sequence[Any], rows: Sequence[Any]
) -> list[CheckpointTuple]:
    """The checkpoints of one page of the general `alist`: `headers` from
    `select_checkpoints`, `rows` (thread_id, checkpoint_ns, row) from `select_page` (value
    rows carry the version in `key`, write rows `checkpoint_id|task_id`)."""
    blobs: dict[tuple[str, str, str, str], tuple[str, bytes | None]] = {}
    writes: dict[tuple[str, str, str], list[Any]] = {}
    for thread, namespace, row in rows:
        if row.kind == KIND_VALUE:
            blobs[(thread, namespace, row.channel, row.key)] = (row.type, row.blob)
        else:
            checkpoint_id, task_id = row.key.split("|", 1)
            writes.setdefault((thread, namespace, checkpoint_id), []).append(
                (task_id, row.channel, row.task_path or "", row.idx, row.type, row.blob)
            )
    result = []
    for header in headers:
        thread, namespace = header.thread_id, header.checkpoint_ns
        mine = {
            (channel, version): blobs[(thread, namespace, channel, version)]
            for channel, version in (header.value_versions or {}).items()
            if (thread, namespace, channel, version) in blobs
        }
        pending = writes.get((thread, namespace, header.checkpoint_id), [])
        result.append(tuple_from(serde, header, mine, pending))
    return result
