"""The one place thread-log payloads are encoded for storage and decoded for delivery.

Stored payloads are compact JSON text. An at-rest codec (e.g. AES-GCM) plugs in here and
nowhere else: every write goes through `encode_payload`, every read through `decode_payload`.
"""

from __future__ import annotations

from typing import Any

from app.graphs.jsonable import dumps


def encode_payload(data: Any) -> str:
    """A channel's `data` as stored in `thread_events.data`."""
    return dumps(data)


def decode_payload(stored: str) -> str:
    """The stored payload back as compact JSON text (sent as is, never re-parsed)."""
    return stored
