"""The one AES-GCM envelope for every stored copy of state, and the keys that open it.

With `GRAPHKEEP_ENCRYPTION_KEY` set, everything graphkeep stores about a conversation goes
through here: checkpoint bodies, blobs and pending writes (the saver's serializer), the
thread's cached values and interrupts, run kwargs, run events, Store values and (once it
exists) the thread-stream log. The columns that hold them are `SealedJSON` / `SealedText`,
so every statement reading or writing them through SQLAlchemy seals and opens them; code
that binds pre-serialized text or builds its own rows calls `seal_json` / `open_json`.

Envelope (binary): key id (8 bytes) | nonce (12 bytes) | AES-GCM ciphertext and tag. The key
id is the first 8 bytes of HMAC-SHA256(key, "graphkeep key id"), so it names a key without
revealing it, and a rotation can find every row a key still protects. Text form (JSON and
text columns): `gk1:<key id hex>:<base64 of nonce | ciphertext>`.

Several keys may be configured: the current one writes, every one reads (rotation). Without
a key nothing is sealed; a sealed value read without its key raises `DecryptionFailed`,
never garbage and never a plaintext substitute. Plaintext written before encryption was
switched on stays readable until `graphkeep encryption rotate` seals it.

The keyring is process-wide (installed at start-up by `open_state` and the CLI) because
SQLAlchemy column types cannot be handed per-engine state; every process serves one
configuration.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import JSON, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from app.errors import AppError

TEXT_PREFIX = "gk1:"
KEY_ID_BYTES = 8
NONCE_BYTES = 12
KEY_SIZES = (16, 24, 32)
_KEY_ID_LABEL = b"graphkeep key id"
_BAD_KEY = "encryption keys must be 16, 24 or 32 bytes (raw, or base64 encoded)"


class DecryptionFailed(AppError):
    """Stored state cannot be opened: wrong or missing key, or the bytes were altered.

    Answered as 500 with code `encryption_key_error` (app/api/errors.py): a server
    misconfiguration, not the caller's fault and not worth a retry.
    """

    code = "encryption_key_error"


class KeyMismatch(AppError):
    """The configured keys cannot open state this database holds (start-up refuses)."""


def parse_key(raw: str) -> bytes:
    """An AES key: `base64:<b64>`, 16/24/32 raw characters, or base64 of 16/24/32 bytes."""
    if raw.startswith("base64:"):
        key = _b64(raw.removeprefix("base64:"))
    elif len(raw.encode()) in KEY_SIZES:
        key = raw.encode()
    else:
        key = _b64(raw)
    if len(key) not in KEY_SIZES:
        raise ValueError(_BAD_KEY)
    return key


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(_BAD_KEY) from None


def key_id(key: bytes) -> str:
    """The public fingerprint of a key (16 hex characters)."""
    return hmac.new(key, _KEY_ID_LABEL, hashlib.sha256).digest()[:KEY_ID_BYTES].hex()


@dataclass(frozen=True)
class Keyring:
    """The configured keys by id; `current` (if any) seals, all of them open."""

    current: str | None = None
    ciphers: dict[str, AESGCM] = field(default_factory=dict)

    @classmethod
    def from_keys(cls, current: str | None, old: Iterable[str] = ()) -> Keyring:
        """Build from the settings' raw key strings (current first, then older ones)."""
        ciphers: dict[str, AESGCM] = {}
        current_id = None
        if current:
            raw = parse_key(current)
            current_id = key_id(raw)
            ciphers[current_id] = AESGCM(raw)
        for text in old:
            if text.strip():
                raw = parse_key(text.strip())
                ciphers.setdefault(key_id(raw), AESGCM(raw))
        return cls(current_id, ciphers)

    @property
    def enabled(self) -> bool:
        return self.current is not None

    # ---------------------------------------------------------------- binary envelope

    def seal_bytes(self, plaintext: bytes) -> bytes:
        if self.current is None:
            raise DecryptionFailed("no GRAPHKEEP_ENCRYPTION_KEY is configured to seal with")
        nonce = os.urandom(NONCE_BYTES)
        sealed = self.ciphers[self.current].encrypt(nonce, plaintext, None)
        return bytes.fromhex(self.current) + nonce + sealed

    def open_bytes(self, envelope: bytes) -> bytes:
        kid = envelope[:KEY_ID_BYTES].hex()
        return self._open(kid, envelope[KEY_ID_BYTES:])

    def open_legacy(self, data: bytes) -> bytes:
        """Checkpoint rows of graphkeep before key ids (nonce | ciphertext): try each key."""
        for cipher in self.ciphers.values():
            try:
                return cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], None)
            except InvalidTag:
                continue
        raise DecryptionFailed(_missing_message(None, self.enabled))

    def _open(self, kid: str, nonce_and_sealed: bytes) -> bytes:
        cipher = self.ciphers.get(kid)
        if cipher is None:
            raise DecryptionFailed(_missing_message(kid, self.enabled))
        try:
            return cipher.decrypt(
                nonce_and_sealed[:NONCE_BYTES], nonce_and_sealed[NONCE_BYTES:], None
            )
        except InvalidTag:
            raise DecryptionFailed(
                f"stored state sealed with key {kid} failed authentication (altered data)"
            ) from None

    # ---------------------------------------------------------------- text envelope

    def seal_text(self, plaintext: str) -> str:
        envelope = self.seal_bytes(plaintext.encode())
        body = base64.b64encode(envelope[KEY_ID_BYTES:]).decode()
        return f"{TEXT_PREFIX}{self.current}:{body}"

    def open_text(self, sealed: str) -> str:
        kid, _, body = sealed[len(TEXT_PREFIX) :].partition(":")
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise DecryptionFailed("stored state has a damaged encryption envelope") from None
        return self._open(kid, raw).decode()


def _missing_message(kid: str | None, enabled: bool) -> str:
    named = f"key {kid}" if kid else "a key"
    if not enabled:
        return f"stored state is encrypted with {named}; set GRAPHKEEP_ENCRYPTION_KEY to read it"
    return (
        f"stored state is encrypted with {named}, which is not the key configured: set it as "
        "GRAPHKEEP_ENCRYPTION_KEY or add it to GRAPHKEEP_ENCRYPTION_OLD_KEYS"
    )


_active = Keyring()


def install(keyring: Keyring) -> None:
    """Make `keyring` the process's keys (start-up; tests reset it)."""
    global _active
    _active = keyring


def active() -> Keyring:
    return _active


def is_sealed_text(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(TEXT_PREFIX)


def is_empty(value: Any) -> bool:
    """Nothing worth sealing (SQL NULL, JSON null, an empty object or list)."""
    return value is None or value == {} or value == []


def seal_json(value: Any) -> Any:
    """A JSON value as stored: the sealed text envelope of its JSON (a JSON string), or the
    value itself without a key. Empty values stay as they are (nothing to protect)."""
    keyring = _active
    if keyring.current is None or is_empty(value):
        return value
    return keyring.seal_text(json.dumps(value, separators=(",", ":"), allow_nan=False))


def open_json(stored: Any) -> Any:
    """The JSON value back from what `seal_json` stored (plaintext passes through)."""
    if is_sealed_text(stored):
        return json.loads(_active.open_text(stored))
    return stored


def seal_text(text: str) -> str:
    """Text (e.g. compact JSON of a stream event) as stored."""
    keyring = _active
    if keyring.current is None:
        return text
    return keyring.seal_text(text)


def open_text(stored: str) -> str:
    return _active.open_text(stored) if is_sealed_text(stored) else stored


class SealedJSON(TypeDecorator[Any]):
    """JSON (JSONB on PostgreSQL) whose value is sealed when a key is configured.

    SQL on such a column sees a JSON string when sealed: no operator may look inside it
    (filters on it run in Python, or are refused, see the README)."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB())
        return dialect.type_descriptor(JSON())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return seal_json(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return open_json(value)


class SealedText(TypeDecorator[str]):
    """Text sealed when a key is configured (run events' compact JSON)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else seal_text(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else open_text(value)
