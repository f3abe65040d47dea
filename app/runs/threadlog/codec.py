"""The one place thread-log payloads are encoded for storage and decoded for delivery.

Stored payloads are compact JSON text, sealed with the at-rest key when one is configured
(app/db/sealed.py, the envelope of every stored copy of state): every write goes through
`encode_payload` (the append in its two steps, `plain_payload` then `seal_payload`, since it
hands the plain text to this process's followers too), every read through `decode_payload`.
The column stays plain Text because the fenced append is an INSERT ... SELECT whose values
are not typed by the column.
"""

from __future__ import annotations

from typing import Any

from app.db.sealed import TEXT_PREFIX, open_text, seal_text
from app.graphs.jsonable import dumps


def encode_payload(data: Any) -> str:
    """A channel's `data` as stored in `thread_events.data`."""
    return seal_payload(plain_payload(data))


def plain_payload(data: Any) -> str:
    """A channel's `data` as delivered (what `decode_payload` gives back once stored)."""
    return dumps(data)


def seal_payload(plain: str) -> str:
    """`plain_payload`'s text as stored."""
    return seal_text(plain)


def decode_payload(stored: str) -> str:
    """The stored payload back as compact JSON text (sent as is, never re-parsed). A replay
    decodes every row, so plaintext (JSON, which never starts with the sealed prefix) is
    told apart here in one test; a sealed payload is opened (and fails loudly without its
    key), whether or not a key is configured now."""
    if stored.startswith(TEXT_PREFIX):
        return open_text(stored)
    return stored
