"""Store maintenance: the TTL sweep and re-embedding after a model or field change.

Both work across every tenant: they are operator tasks (the sweeper, `graphkeep store
reindex`), never reachable from a request.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.access import read, transaction
from app.store import queries
from app.store.config import StoreIndex
from app.store.queries import Ident
from app.store.vectors import embed_fields, texts_to_embed


async def sweep(engine: AsyncEngine, now: datetime) -> int:
    """Delete items expired at `now` and their vectors; returns the number of items."""
    async with transaction(engine) as conn:
        await conn.execute(queries.expired_vectors(now))
        result = await conn.execute(queries.expired_items(now))
        return int(result.rowcount or 0)


async def reindex_items(engine: AsyncEngine, index: StoreIndex, *, batch_size: int = 256) -> int:
    """Re-embed every item whose vectors are missing, older than the item, or of another
    model; returns how many items got new vectors.

    Vectors are stamped with the item's `updated_at` as read, so an item written while this
    runs keeps counting as stale (and is skipped by semantic search) until the next pass.
    """
    after: Ident | None = None
    done = 0
    while True:
        async with read(engine) as conn:
            items = (await conn.execute(queries.reindex_batch(after, batch_size))).all()
            if not items:
                return done
            idents: list[Ident] = [(r.tenant_id, r.prefix, r.key) for r in items]
            meta = await conn.execute(queries.vector_stamps(idents))
            vectors: dict[Ident, list[tuple[str, datetime]]] = defaultdict(list)
            for v in meta:
                vectors[(v.tenant_id, v.prefix, v.key)].append((v.model, v.created_at))
        after = idents[-1]
        stale = {}
        stamps = {}
        for row, ident in zip(items, idents, strict=True):
            fields = row.index_fields
            if fields == []:
                continue
            have = vectors.get(ident, [])
            fresh = have and all(m == index.model_id and c >= row.updated_at for m, c in have)
            if fresh:
                continue
            texts = texts_to_embed(index, row.value, fields)
            if not texts and not have:
                continue
            stale[ident] = texts
            stamps[ident] = row.updated_at
        if not stale:
            continue
        embedded = await embed_fields(index, stale)
        async with transaction(engine) as conn:
            await conn.execute(queries.delete_vectors_of(list(stale)))
            rows = [
                {
                    "tenant_id": ident[0],
                    "prefix": ident[1],
                    "key": ident[2],
                    "field_name": field_name,
                    "model": index.model_id,
                    "dims": index.dims,
                    "embedding": blob,
                    "created_at": stamps[ident],
                }
                for ident, pairs in embedded.items()
                for field_name, blob in pairs
            ]
            if rows:
                await conn.execute(queries.insert_vectors(), rows)
        done += sum(1 for pairs in embedded.values() if pairs)
