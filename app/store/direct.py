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
from datetime import datetime
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool

from app.db.dialect import autocommit_read_options
from app.db.direct import PARK_SECONDS, DirectExecutor, DirectStatement, Runner
from app.db.engine import create_engine
from app.store import queries
from app.store.filters import Leaf

# keys per get statement: 1, 2, 4, ... 64 slots (unused slots repeat the first pair), so a
# batch of up to 64 distinct keys is one query and only seven statements are ever compiled
MAX_GET_SLOTS = 64
# filter shapes whose compiled search statement is kept (least recently used dropped)
SEARCH_CACHE_SIZE = 256


def _generic_plan_engine(engine: AsyncEngine) -> AsyncEngine:
    """On PostgreSQL, a pool of the store's own whose connections plan every prepared
    statement once (`plan_cache_mode = force_generic_plan`), disposed with `engine`.

    A store statement's plan never depends on its values (the primary key range of a
    namespace, a key lookup), yet PostgreSQL re-plans a prepared statement for every
    execution while its generic plan's estimate looks worse than the custom plans': with
    100,000 items (a prefix range then estimated at 500 rows) it kept custom plans, ~50 us
    of planning per search, which made searches grow with the table. Other statements on
    the app's pool keep PostgreSQL's choice. SQLite: `engine` itself.
    """
    if engine.dialect.name != "postgresql":
        return engine
    pool = engine.sync_engine.pool
    size = pool.size() if isinstance(pool, QueuePool) else 0
    own = create_engine(  # at most the app pool's size: no overflow
        engine.url.render_as_string(hide_password=False),
        pool_size=max(size, 1),
        max_overflow=0,
        null_pool=not size,
        server_settings={"plan_cache_mode": "force_generic_plan"},
    )

    def dispose(_engine: Any) -> None:  # in the greenlet of `engine.dispose()`
        own.sync_engine.dispose()

    event.listen(engine.sync_engine, "engine_disposed", dispose)
    return own


class DirectStore:
    """Compiled Store statements for one engine (shared by every tenant view)."""

    def __init__(self, engine: AsyncEngine) -> None:
        dialect = engine.dialect
        self._dialect = dialect.name
        # runs units on a connection each; `session()` keeps one for several
        options = autocommit_read_options(dialect)
        self.executor = DirectExecutor(
            engine.execution_options(**options),
            park_seconds=PARK_SECONDS,
            unobserved=_generic_plan_engine(engine).execution_options(**options),
            disposed_with=engine,
        )
        prepare = self.executor.prepare
        # values come serialized by validation (the JSON text is bound as it is)
        self.upsert = prepare(queries.upsert_items(dialect), raw=("value",))
        self.delete_items = prepare(queries.delete_item())
        self.delete_vectors = prepare(queries.delete_item_vectors())
        self.refresh = prepare(queries.refresh_expiry())
        self._gets: dict[int, DirectStatement] = {}
        self._searches: OrderedDict[tuple[bool, tuple[Leaf, ...]], DirectStatement] = OrderedDict()
        self._listings: dict[tuple[bool, bool], DirectStatement] = {}

    def session(self) -> Any:
        """`async with store.session() as s`: one pooled connection (`DirectSession`)."""
        return self.executor.session()

    async def get(
        self,
        runner: Runner,
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
