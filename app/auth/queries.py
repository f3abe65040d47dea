"""Statement builders of the auth domain (API keys): pure functions, nothing executed here.

The operator CLI lists and revokes keys across tenants (`tenant_id=None`); requests find a key
by its digest, whose purpose is to find the tenant. Every other caller passes its tenant.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Insert, Select, Update, select, update

from app.db.tables import api_keys

# What may be shown about a key (never its digest), in `ApiKeyInfo`'s field order.
_INFO_COLUMNS = (
    api_keys.c.key_id,
    api_keys.c.tenant_id,
    api_keys.c.user_id,
    api_keys.c.read_only,
    api_keys.c.name,
    api_keys.c.created_at,
    api_keys.c.revoked_at,
)


def _key_in(key_id: str, tenant_id: str | None) -> list[Any]:
    where: list[Any] = [api_keys.c.key_id == key_id]
    if tenant_id is not None:
        where.append(api_keys.c.tenant_id == tenant_id)
    return where


def insert_key(values: dict[str, Any]) -> Insert:
    return api_keys.insert().values(**values)


def list_keys(tenant_id: str | None) -> Select[Any]:
    """Keys oldest first; `tenant_id=None` is every tenant (operator CLI)."""
    query = select(*_INFO_COLUMNS).order_by(api_keys.c.created_at, api_keys.c.key_id)
    if tenant_id is not None:
        query = query.where(api_keys.c.tenant_id == tenant_id)
    return query


def revoke_key(key_id: str, tenant_id: str | None, now: datetime) -> Update:
    """Idempotent: a key revoked already keeps its first revocation time."""
    return (
        update(api_keys)
        .where(*_key_in(key_id, tenant_id), api_keys.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )


def get_key(key_id: str, tenant_id: str | None) -> Select[Any]:
    return select(*_INFO_COLUMNS).where(*_key_in(key_id, tenant_id))


def live_key_by_hash(key_hash: str) -> Select[Any]:
    return select(api_keys.c.tenant_id, api_keys.c.user_id, api_keys.c.read_only).where(
        api_keys.c.key_hash == key_hash, api_keys.c.revoked_at.is_(None)
    )
