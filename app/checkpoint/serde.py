"""The checkpoint serializer: langgraph's JsonPlusSerializer, optionally AES-GCM encrypted.

Pickle fallback stays off, so loading stored state never runs arbitrary code. With a key,
every value the saver stores (checkpoint bodies, channel values, pending writes) goes through
langgraph's `EncryptedSerializer` with our cipher over the one envelope of app/db/sealed.py
(key id | nonce | AES-GCM), so the plaintext never reaches the database and each value names
the key that sealed it. Type tags read `<type>+gk1`; `<type>+aesgcm` rows (written before key
ids) are still read with any configured key. Checkpoint *metadata* stays plain JSON: `list`
filters on it in SQL.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.base import CipherProtocol, SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from app.db.sealed import DecryptionFailed, Keyring, parse_key

CIPHER_NAME = "gk1"  # the sealed envelope with a key id
LEGACY_CIPHER_NAME = "aesgcm"  # nonce | ciphertext, no key id

__all__ = ["CIPHER_NAME", "DecryptionFailed", "KeyringCipher", "make_serde", "parse_key"]


class KeyringCipher(CipherProtocol):
    """AES-GCM (authenticated): a wrong key or tampered bytes fail loudly, never as garbage."""

    def __init__(self, keyring: Keyring) -> None:
        if not keyring.enabled:
            raise ValueError("an encrypting serializer needs a current key")
        self.keyring = keyring

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return CIPHER_NAME, self.keyring.seal_bytes(plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        if ciphername == CIPHER_NAME:
            return self.keyring.open_bytes(ciphertext)
        if ciphername == LEGACY_CIPHER_NAME:
            return self.keyring.open_legacy(ciphertext)
        raise DecryptionFailed(f"stored state uses unknown cipher {ciphername!r}")


def make_serde(keys: str | Keyring | None, **jsonplus: Any) -> SerializerProtocol:
    """The serializer for checkpoints: JsonPlus (no pickle), AES-GCM encrypted when keyed.

    `keys`: a raw key string (library use, `SQLSaver.from_url`) or the configured keyring.
    `jsonplus`: langgraph.json's `checkpointer.serde` (`allowed_msgpack_modules`)."""
    plain = JsonPlusSerializer(**jsonplus, pickle_fallback=False)
    keyring = Keyring.from_keys(keys) if isinstance(keys, str) else keys
    if keyring is None or not keyring.enabled:
        return plain
    return EncryptedSerializer(KeyringCipher(keyring), plain)


def is_encrypted_type(type_tag: str) -> bool:
    """Whether a stored type tag (e.g. `msgpack+gk1`) names an encrypted value."""
    return "+" in type_tag
