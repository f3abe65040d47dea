"""API keys: created by the operator CLI, stored hashed, mapped to a tenant and a user.

A key is `gk_` plus 32 random bytes (base64url). Only its SHA-256 digest is stored. A fast,
unsalted hash is right here, unlike for passwords: the key has 256 bits of entropy, so no
dictionary or brute-force attack on the digest is feasible, and a deterministic digest lets
every request find its key with one indexed equality lookup (`key_hash` is unique). bcrypt or
argon2 would add ~100 ms of CPU to every request and force a scan, buying nothing.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.auth import queries as q
from app.auth.principal import Principal
from app.db.access import read, transaction
from app.db.tables import SYSTEM_TENANT
from app.db.types import utcnow
from app.errors import InvalidInput, NotFound

KEY_PREFIX = "gk_"
_KEY_BYTES = 32
_MAX_KEY_CHARS = 256
_MAX_ID_CHARS = 255


@dataclass(frozen=True)
class ApiKeyInfo:
    """What may be shown about a key after creation (never the key itself)."""

    key_id: str
    tenant_id: str
    user_id: str
    read_only: bool
    name: str | None
    created_at: datetime
    revoked_at: datetime | None


def hash_key(key: str) -> str:
    """Hex SHA-256 of the key text."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def looks_like_api_key(value: str) -> bool:
    """True for values shaped like our keys (LangSmith keys and JWTs are not)."""
    return value.startswith(KEY_PREFIX) and len(value) <= _MAX_KEY_CHARS


async def create_api_key(
    engine: AsyncEngine,
    *,
    tenant_id: str,
    user_id: str | None = None,
    read_only: bool = False,
    name: str | None = None,
) -> tuple[ApiKeyInfo, str]:
    """Store a new key and return its info and the plaintext key (shown once, never stored)."""
    if not tenant_id or tenant_id == SYSTEM_TENANT:
        raise InvalidInput(f"tenant must be a non-empty name other than {SYSTEM_TENANT!r}")
    if len(tenant_id) > _MAX_ID_CHARS or len(user_id or "") > _MAX_ID_CHARS:
        raise InvalidInput(f"tenant and user must be at most {_MAX_ID_CHARS} characters")
    key_id = str(uuid.uuid4())
    key = KEY_PREFIX + secrets.token_urlsafe(_KEY_BYTES)
    info = ApiKeyInfo(
        key_id=key_id,
        tenant_id=tenant_id,
        user_id=user_id or f"api-key:{key_id}",
        read_only=read_only,
        name=name,
        created_at=utcnow(),
        revoked_at=None,
    )
    async with transaction(engine) as conn:
        await conn.execute(
            q.insert_key(
                {
                    "key_id": info.key_id,
                    "tenant_id": info.tenant_id,
                    "user_id": info.user_id,
                    "key_hash": hash_key(key),
                    "read_only": info.read_only,
                    "name": info.name,
                    "created_at": info.created_at,
                    "revoked_at": None,
                }
            )
        )
    return info, key


async def list_api_keys(engine: AsyncEngine, *, tenant_id: str | None) -> list[ApiKeyInfo]:
    """Keys of one tenant, oldest first; `tenant_id=None` lists every tenant (operator CLI)."""
    async with read(engine) as conn:
        rows = (await conn.execute(q.list_keys(tenant_id))).mappings().all()
    return [ApiKeyInfo(**row) for row in rows]


async def revoke_api_key(
    engine: AsyncEngine, *, key_id: str, tenant_id: str | None = None
) -> ApiKeyInfo:
    """Revoke a key (idempotent); raise NotFound if no such key (in that tenant, if given)."""
    async with transaction(engine) as conn:
        await conn.execute(q.revoke_key(key_id, tenant_id, utcnow()))
        row = (await conn.execute(q.get_key(key_id, tenant_id))).mappings().first()
    if row is None:
        raise NotFound(f"API key {key_id} not found")
    return ApiKeyInfo(**row)


async def authenticate_api_key(engine: AsyncEngine, key: str) -> Principal | None:
    """The principal a live key maps to, or None for an unknown, revoked or malformed key.

    The lookup is by digest, not by tenant: finding the tenant is its purpose.
    """
    if not looks_like_api_key(key):
        return None
    async with read(engine) as conn:
        row = (await conn.execute(q.live_key_by_hash(hash_key(key)))).first()
    if row is None:
        return None
    return Principal(
        tenant_id=row.tenant_id, user_id=row.user_id, read_only=row.read_only, kind="api_key"
    )
