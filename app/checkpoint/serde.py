"""The checkpoint serializer: langgraph's JsonPlusSerializer, optionally AES-GCM encrypted.

Pickle fallback stays off, so loading stored state never runs arbitrary code. With a key,
every value the saver stores (checkpoint bodies, channel values, pending writes) goes through
langgraph's `EncryptedSerializer` with an AES-GCM cipher from the `cryptography` package, so
the plaintext never reaches the database. Checkpoint *metadata* stays plain JSON: `list`
filters on it in SQL.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

CIPHER_NAME = "aesgcm"
_NONCE_BYTES = 12
_KEY_SIZES = (16, 24, 32)


class DecryptionFailed(RuntimeError):
    """Stored state cannot be decrypted: wrong or missing GRAPHKEEP_ENCRYPTION_KEY."""


class AesGcmCipher(CipherProtocol):
    """AES-GCM (authenticated): a wrong key or tampered bytes fail loudly, never as garbage."""

    def __init__(self, key: bytes) -> None:
        if len(key) not in _KEY_SIZES:
            raise ValueError("AES key must be 16, 24 or 32 bytes")
        self._aead = AESGCM(key)

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(_NONCE_BYTES)
        return CIPHER_NAME, nonce + self._aead.encrypt(nonce, plaintext, None)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        if ciphername != CIPHER_NAME:
            raise DecryptionFailed(f"stored state uses unknown cipher {ciphername!r}")
        try:
            return self._aead.decrypt(ciphertext[:_NONCE_BYTES], ciphertext[_NONCE_BYTES:], None)
        except InvalidTag:
            raise DecryptionFailed(
                "cannot decrypt stored checkpoint state: GRAPHKEEP_ENCRYPTION_KEY is not the "
                "key it was written with (or the data was altered)"
            ) from None


def parse_key(raw: str) -> bytes:
    """Read an AES key: `base64:<b64>`, 16/24/32 raw characters, or base64 of 16/24/32 bytes."""
    if raw.startswith("base64:"):
        key = _b64(raw.removeprefix("base64:"))
    elif len(raw.encode()) in _KEY_SIZES:
        key = raw.encode()
    else:
        key = _b64(raw)
    if len(key) not in _KEY_SIZES:
        raise ValueError(
            "GRAPHKEEP_ENCRYPTION_KEY must be 16, 24 or 32 bytes (raw, or base64 encoded)"
        )
    return key


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "GRAPHKEEP_ENCRYPTION_KEY must be 16, 24 or 32 bytes (raw, or base64 encoded)"
        ) from None


def make_serde(encryption_key: str | None) -> SerializerProtocol:
    """The serializer for checkpoints: JsonPlus (no pickle), AES-GCM encrypted when keyed."""
    plain = JsonPlusSerializer(pickle_fallback=False)
    if not encryption_key:
        return plain
    return EncryptedSerializer(AesGcmCipher(parse_key(encryption_key)), plain)


def is_encrypted_type(type_tag: str) -> bool:
    """Whether a stored type tag (e.g. `msgpack+aesgcm`) names an encrypted value."""
    return "+" in type_tag
