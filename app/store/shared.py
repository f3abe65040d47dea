"""What every tenant view of one `SQLStore` shares: engine, index, TTL, clock, statements."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from langgraph.store.base import TTLConfig
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.executor import Executor
from app.store.config import StoreIndex
from app.store.direct import DirectStore

Clock = Callable[[], datetime]
PgvectorMode = Literal["auto", "off"]


@dataclass
class Shared:
    """What every tenant view of one store shares."""

    engine: AsyncEngine
    index: StoreIndex | None
    ttl: TTLConfig | None
    clock: Clock
    max_value_bytes: int
    loop: asyncio.AbstractEventLoop | None = field(default=None)
    # "auto": semantic queries use pgvector where setup() made its column; "off": never
    pgvector_mode: PgvectorMode = "auto"
    # None until detected (setup() or the first semantic query)
    pgvector: bool | None = None
    # what the compiled statements run on (None: a fast-path executor of the store's own)
    executor: Executor | None = None
    # put, get, search without a query, list_namespaces: pre-compiled (app/store/direct.py)
    direct: DirectStore = field(init=False)

    def __post_init__(self) -> None:
        self.direct = DirectStore(self.engine, self.executor)
