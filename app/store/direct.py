"""The Store's hot statements, pre-compiled and run on the pooled driver connection.

Put, get, search without a query and list_namespaces run through `app.db.direct` (asyncpg
prepared statements / one aiosqlite worker-thread hop per unit), skipping SQLAlchemy's
per-execute work, which cost more CPU than the indexed queries take on the server. Every
statement binds the tenant (one statement serves every tenant view) and is compiled once per
shape: gets per padded key count, searches per filter shape (a bounded LRU, since the SQL
text varies with the filter's keys and operators), namespace listings per bound.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.direct import fast_executor
from app.db.direct_statement import DirectStatement
from app.db.executor import Executor, Units
from app.store import queries
from app.store.filters import Leaf

# keys per get statement: 1, 2, 4, ... 64 slots (unused slots repeat the first pair), so a
# batch of up to 64 distinct keys is one query and only seven statements are ever compiled
MAX_GET_SLOTS = 64
# filter shapes whose compiled search statement is kept (least recently used dropped)
SEARCH_CACHE_SIZE = 256


class DirectStore:
    """Compiled Store statements for one engine (shared by every tenant view)."""

    def __init__(self, engine: AsyncEngine, executor: Executor | None = None) -> None:
        dialect = engine.dialect
        self._dialect = dialect.name
        # runs units on a connection each; `session()` keeps one for several
        self.executor: Executor = executor or fast_executor(engine)
        prepare = self.executor.prepare
        # values come serialized by validation (the JSON text is bound as it is)
        self.upsert = prepare(queries.upsert_items(dialect), raw=("value",))
        self.delete_items = prepare(queries.delete_item())
        self.delete_vectors = prepare(queries.delete_item_vectors())
        self.refresh = prepare(queries.refresh_expiry())
        self._gets: dict[int, DirectStatement] = {}
        self._searches: OrderedDict[tuple[bool, tuple[Leaf, ...]], DirectStatement] = OrderedDict()
        self._listings: dict[tuple[bool, bool], DirectStatement] = {}

    def session(self) -> AbstractAsyncContextManager[Units]:
        """`async with store.session() as s`: one pooled connection (`DirectSession`)."""
        return self.executor.session()

    async def get(
        self,
        runner: Units,
        tenant: str,
        keys: Sequence[tuple[str, str]],
        now: datetime,
    ) -> list[Any]:
        """Live rows of the (prefix, key) pairs (distinct), MAX_GET_SLOTS per query."""
        rows: list[Any] = []
        for start in range(0, len(keys), MAX_GET_SLOTS):
            chunk = keys[start : start + MAX_GET_SLOTS]
            slots = 1
            while slots < len(chunk):
                slots *= 2
            statement = self._gets.get(slots)
            if statement is None:
                statement = self._gets[slots] = self.executor.prepare(queries.get_statement(slots))
            params: dict[str, Any] = {"b_tenant": tenant, "b_now": now}
            for i in range(slots):
                params[f"b_p{i}"], params[f"b_k{i}"] = chunk[i if i < len(chunk) else 0]
            rows.extend(await runner.fetch(statement, params))
        return rows

    @property
    def search_shapes(self) -> int:
        """How many compiled search statements are cached."""
        return len(self._searches)

    def search(self, has_prefix: bool, leaves: tuple[Leaf, ...]) -> DirectStatement:
        """The compiled search (no query) of one shape: prefix or not, and filter leaves."""
        shape = (has_prefix, leaves)
        cache = self._searches
        statement = cache.get(shape)
        if statement is None:
            statement = self.executor.prepare(
                queries.search_statement(self._dialect, has_prefix, leaves)
            )
            cache[shape] = statement
            if len(cache) > SEARCH_CACHE_SIZE:
                cache.popitem(last=False)
        else:
            cache.move_to_end(shape)
        return statement

    def listing(self, bounded_above: bool, limited: bool) -> DirectStatement:
        """The compiled namespace walk (`queries.next_namespace`)."""
        shape = (bounded_above, limited)
        statement = self._listings.get(shape)
        if statement is None:
            statement = self._listings[shape] = self.executor.prepare(
                queries.next_namespace(bounded_above, limited)
            )
        return statement
