"""Checkpoint <-> rows: what goes inline, what becomes a per-(channel, version) blob.

A checkpoint row keeps the checkpoint without its large values (serialized, so encrypted
when a key is set) plus `value_versions`, the index of the values it holds. Small scalars
stay inline, as langgraph's PostgreSQL saver does; everything else lives in
`checkpoint_blobs` under (channel, version) and is written once: a channel whose version did
not move is not in `new_versions` and is not sent again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    PendingWrite,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from app.checkpoint.errors import InvalidCheckpointInput
from app.checkpoint.serde import DecryptionFailed, is_encrypted_type

INLINE = ""  # value_versions marker: the value is inline in the checkpoint body
_INLINE_STR_MAX = 256  # longer strings get a blob, so they are not rewritten every step
MAX_ID_LENGTH = 255


def check_text(value: Any, what: str, max_length: int = MAX_ID_LENGTH) -> str:
    """Refuse ids that are not strings or exceed the column size, before any SQL runs."""
    if not isinstance(value, str):
        raise InvalidCheckpointInput(f"{what} must be a string, got {type(value).__name__}")
    if len(value) > max_length:
        raise InvalidCheckpointInput(f"{what} is longer than {max_length} characters")
    return value


def is_inline(value: Any) -> bool:
    if value is None or isinstance(value, bool | int | float):
        return True
    return isinstance(value, str) and len(value) <= _INLINE_STR_MAX


def dumps(serde: SerializerProtocol, value: Any) -> tuple[str, bytes]:
    return serde.dumps_typed(value)


def loads(serde: SerializerProtocol, type_tag: str, data: bytes | None) -> Any:
    """Decode one stored value; encrypted data without the key is a clear error."""
    if is_encrypted_type(type_tag) and not hasattr(serde, "cipher"):
        raise DecryptionFailed(
            "stored checkpoint state is encrypted; set GRAPHKEEP_ENCRYPTION_KEY to read it"
        )
    return serde.loads_typed((type_tag, data or b""))


def json_safe(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata as plain JSON (filters run on it in SQL); odd values become strings and
    NUL characters, which PostgreSQL JSON refuses, are dropped."""
    text = json.dumps(metadata, default=str).replace("\\u0000", "")
    result: dict[str, Any] = json.loads(text)
    return result


def encode_checkpoint(
    serde: SerializerProtocol,
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
) -> tuple[str, bytes, dict[str, str], dict[str, tuple[str, tuple[str, bytes]]]]:
    """Split a checkpoint into (type, body, value_versions, new blobs by channel)."""
    versions = checkpoint["channel_versions"]
    inline: dict[str, Any] = {}
    value_versions: dict[str, str] = {}
    blobs: dict[str, tuple[str, tuple[str, bytes]]] = {}
    for channel, value in checkpoint["channel_values"].items():
        if is_inline(value) or channel not in versions:
            inline[channel] = value
            value_versions[channel] = INLINE
            continue
        version = str(versions[channel])
        value_versions[channel] = version
        if channel in new_versions:
            blobs[channel] = (version, dumps(serde, value))
    body = {**checkpoint, "channel_values": inline}
    type_tag, data = dumps(serde, body)
    return type_tag, data, value_versions, blobs


def decode_checkpoint(
    serde: SerializerProtocol,
    type_tag: str,
    body: bytes,
    value_versions: Mapping[str, str],
    blob_values: Mapping[tuple[str, str], tuple[str, bytes | None]],
) -> Checkpoint:
    """Rebuild a checkpoint from its body and the blobs it references."""
    checkpoint: dict[str, Any] = loads(serde, type_tag, body)
    values: dict[str, Any] = dict(checkpoint.get("channel_values") or {})
    for channel, version in value_versions.items():
        if version == INLINE:
            continue
        stored = blob_values.get((channel, version))
        if stored is None or stored[0] == "empty":
            continue
        values[channel] = loads(serde, stored[0], stored[1])
    checkpoint["channel_values"] = values
    return checkpoint  # type: ignore[return-value]


def encode_writes(
    serde: SerializerProtocol,
    key: Mapping[str, str],
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> list[dict[str, Any]]:
    """Rows for `checkpoint_writes`; special channels take their fixed negative index."""
    rows = []
    for idx, (channel, value) in enumerate(writes):
        type_tag, data = dumps(serde, value)
        rows.append(
            {
                **key,
                "task_id": task_id,
                "task_path": task_path,
                "idx": WRITES_IDX_MAP.get(channel, idx),
                "channel": channel,
                "type": type_tag,
                "blob": data,
            }
        )
    return rows


def decode_writes(
    serde: SerializerProtocol, rows: Sequence[tuple[str, str, str, int, str, bytes | None]]
) -> list[PendingWrite]:
    """(task_id, channel, task_path, idx, type, blob) rows -> pending writes in
    langgraph's `writes_sort_key` order."""
    ordered = sorted(rows, key=lambda r: writes_sort_key(r[2], r[0], r[3]))
    return [(task_id, channel, loads(serde, t, b)) for task_id, channel, _, _, t, b in ordered]
