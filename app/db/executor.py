"""What the saver and the Store run their statements on, as types: the fast path
(`app.db.direct.DirectExecutor`) or SQLAlchemy Core (`app.db.portable.PortableExecutor`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from sqlalchemy.sql import ClauseElement

from app.db.direct_statement import DirectStatement, Step


class Units(Protocol):
    """Runs units of work: a `app.db.direct.Runner`, or `app.db.portable.PortableExecutor`."""

    async def write(self, *steps: Step) -> None: ...

    async def fetch(self, query: DirectStatement, params: Mapping[str, Any]) -> list[Any]: ...


class Executor(Units, Protocol):
    """What the saver and the Store run their statements on: `DirectExecutor` (the fast
    path) or `PortableExecutor` (SQLAlchemy Core), which take the same statements and steps."""

    def prepare(
        self, statement: ClauseElement, raw: Collection[str] = (), *, session_settings: bool = True
    ) -> DirectStatement: ...

    def prepared(
        self, key: Hashable, build: Callable[[], ClauseElement], *, session_settings: bool = True
    ) -> DirectStatement: ...

    def session(self) -> AbstractAsyncContextManager[Units]: ...
