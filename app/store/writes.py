"""The write statements of one Store batch (pure: built here, executed by store.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from langgraph.store.base import PutOp
from sqlalchemy import Executable
from sqlalchemy.engine import Dialect

from app.db import sealed
from app.db.direct_statement import Step
from app.store import queries
from app.store.config import StoreIndex
from app.store.direct import DirectStore

_CHUNK = 500  # rows per statement: well under both dialects' parameter limits


def item_rows(
    tenant: str,
    puts: dict[tuple[str, str], PutOp],
    now: datetime,
    encoded: dict[tuple[str, str], str] | None = None,
) -> list[dict[str, Any]]:
    """Upsert rows (`queries.upsert_items`) of the puts that store a value; `encoded` holds
    values already serialized to JSON text (the direct path binds them as they are)."""
    rows: list[dict[str, Any]] = []
    for ident, op in puts.items():
        value = op.value
        if value is None:
            continue
        ttl = op.ttl
        rows.append(
            {
                "tenant_id": tenant,
                "prefix": ident[0],
                "key": ident[1],
                "value": encoded[ident] if encoded is not None else dict(value),
                "created_at": now,
                "updated_at": now,
                "expires_at": now + timedelta(minutes=ttl) if ttl is not None else None,
                "ttl_minutes": float(ttl) if ttl is not None else None,
                "index_fields": [] if op.index is False else op.index,
            }
        )
    return rows


def write_statements(
    dialect: Dialect,
    tenant: str,
    index: StoreIndex | None,
    puts: dict[tuple[str, str], PutOp],
    put_vectors: dict[tuple[str, str], list[tuple[str, bytes]]],
    now: datetime,
) -> list[tuple[Executable, list[dict[str, Any]] | None]]:
    """Every statement (with executemany rows, if any) that applies a batch's puts.

    Deletes first (vectors of every rewritten item when there is an index, items whose
    value is None), then the upsert, then the new vectors; chunked below both dialects'
    parameter limits.
    """
    removed = [ident for ident, op in puts.items() if op.value is None]
    rows = item_rows(tenant, puts, now)
    statements: list[tuple[Executable, list[dict[str, Any]] | None]] = []
    stale = list(puts) if index is not None else removed
    for start in range(0, len(stale), _CHUNK):
        statements.append((queries.delete_vectors(tenant, stale[start : start + _CHUNK]), None))
    for start in range(0, len(removed), _CHUNK):
        statements.append((queries.delete_items(tenant, removed[start : start + _CHUNK]), None))
    for start in range(0, len(rows), _CHUNK):
        statements.append((queries.upsert_items(dialect), rows[start : start + _CHUNK]))
    vector_rows = [
        {
            "tenant_id": tenant,
            "prefix": prefix,
            "key": key,
            "field_name": field_name,
            "model": index.model_id if index else "",
            "dims": index.dims if index else 0,
            "embedding": blob,
            "created_at": now,
        }
        for (prefix, key), pairs in put_vectors.items()
        for field_name, blob in pairs
    ]
    for start in range(0, len(vector_rows), _CHUNK):
        statements.append((queries.insert_vectors(), vector_rows[start : start + _CHUNK]))
    return statements


def refresh_rows(tenant: str, refresh: dict[tuple[str, str], datetime]) -> list[dict[str, Any]]:
    """Rows of `queries.refresh_expiry` for the items whose TTL a batch's reads refreshed."""
    return [
        {"b_tenant": tenant, "b_prefix": p, "b_key": k, "b_expires_at": expires}
        for (p, k), expires in refresh.items()
    ]


def direct_writes(
    direct: DirectStore,
    tenant: str,
    puts: dict[tuple[str, str], PutOp],
    encoded: dict[tuple[str, str], str],
    now: datetime,
) -> list[Step]:
    """The puts of a store without an index as direct steps: deletes (vectors an indexed
    store may have left, then the items), then one upsert (one row per item)."""
    steps: list[Step] = []
    removed = [
        {"b_tenant": tenant, "b_prefix": p, "b_key": k}
        for (p, k), op in puts.items()
        if op.value is None
    ]
    if removed:
        steps += [(direct.delete_vectors, removed), (direct.delete_items, removed)]
    rows = item_rows(tenant, puts, now, sealed_values(encoded))
    if rows:
        steps.append((direct.upsert, rows))
    return steps


def sealed_values(encoded: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    """Values as the direct upsert binds them (JSON text, bound raw): with a key, the JSON
    string of their sealed envelope, as the `SealedJSON` column type would store them."""
    keyring = sealed.active()
    if not keyring.enabled:
        return encoded
    return {
        ident: text if text == "{}" else json.dumps(keyring.seal_text(text))
        for ident, text in encoded.items()
    }
