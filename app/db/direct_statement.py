"""Statements compiled once for the fast path (app/db/direct.py runs them).

A `DirectStatement` is one SQLAlchemy statement compiled by the engine's own dialect: its SQL
in the driver's positional paramstyle, its binds in order with the bind processors SQLAlchemy's
execution would apply, and (for a query, or a write that RETURNs) its columns with their result
processors. So values are encoded and decoded exactly as SQLAlchemy would, while each call only
maps parameters to positions and rows to named tuples. The portable path
(app/db/portable.py) runs the same objects through SQLAlchemy Core.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from typing import Any

from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import ClauseElement

_SUPPLIED = object()  # marks a bind whose value comes with each call

# (statement, rows of parameters): one step of a write; each row runs the statement once
Step = tuple["DirectStatement", Sequence[Mapping[str, Any]]]


class DirectStatement:
    """One statement compiled for the engine's dialect, with its positional bind order, bind
    processors and (for queries) result processors and column names.

    Binds named in `raw` skip their processor: the caller passes what the driver takes (e.g.
    JSON text it has already serialized while validating a value).

    `session_settings=False`: the statement needs none of its executor's session settings
    (see `DirectExecutor`), so a connection taken from the pool for it skips their SET and
    RESET (two round trips).
    """

    def __init__(
        self,
        statement: ClauseElement,
        engine: AsyncEngine,
        raw: Collection[str] = (),
        *,
        session_settings: bool = True,
    ) -> None:
        dialect = engine.dialect
        self.statement: Any = statement  # for the portable path (app/db/portable.py)
        self.raw = frozenset(raw)
        self.session_settings = session_settings
        compiled: Any = statement.compile(dialect=dialect)  # a SQLCompiler
        if compiled.positiontup is None:
            raise ValueError("DirectStatement needs a positional paramstyle")
        supplied = {
            name
            for name, bind in compiled.binds.items()
            if bind.required or bind.callable is not None
        }
        if supplied & {bind.key for bind in compiled.post_compile_params}:
            raise ValueError("DirectStatement cannot expand a list supplied per call")
        # literal IN lists (e.g. SQLite's `json_type(...) IN ('integer', 'real')` of a
        # filter) are expanded here, once
        state = compiled.construct_expanded_state(dict.fromkeys(supplied))
        self.sql = state.statement
        # each bind's processor, from its type's implementation for this dialect (what
        # SQLAlchemy's own execution applies), plus those of expanded list elements
        processors: dict[str, Callable[[Any], Any]] = {}
        for bind, name in compiled.bind_names.items():
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                processors[name] = process
        processors.update(state.processors)
        # (name, processor, constant): a bind the caller supplies, or a literal the statement
        # itself carries (e.g. the `idx < 0` of the writes upsert), processed once here
        self._binds: list[tuple[str, Callable[[Any], Any] | None, Any]] = []
        for name in state.positiontup or ():
            process = processors.get(name)
            if name in supplied:
                self._binds.append((name, None if name in raw else process, _SUPPLIED))
            else:
                value = state.parameters[name]
                self._binds.append((name, None, value if process is None else process(value)))
        # the columns a query selects, or a write RETURNs
        columns = list(getattr(statement, "exported_columns", []))
        self._row_type: Any = namedtuple("DirectRow", [c.key for c in columns])  # type: ignore[misc]
        self._results: list[Callable[[Any], Any] | None] = [
            _result_processor(c.type, dialect) for c in columns
        ]

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        """Positional driver arguments for one row of named parameters."""
        return [
            constant
            if constant is not _SUPPLIED
            else params[name]
            if process is None
            else process(params[name])
            for name, process, constant in self._binds
        ]

    def rows(self, raw: Sequence[Sequence[Any]]) -> list[Any]:
        """Driver rows as named tuples, each value through its type's result processor."""
        processors = self._results
        if not any(processors):
            return [self._row_type(*row) for row in raw]
        return [
            self._row_type(
                *[v if p is None else p(v) for p, v in zip(processors, row, strict=True)]
            )
            for row in raw
        ]


def _result_processor(type_: Any, dialect: Any) -> Callable[[Any], Any] | None:
    try:
        processor: Callable[[Any], Any] | None = type_.dialect_impl(dialect).result_processor(
            dialect, None
        )
    except (TypeError, ValueError, LookupError, InvalidRequestError):
        # PostgreSQL's Float picks its processor by the column's type OID, which a compiled
        # statement does not know; asyncpg already returns float8 as a Python float
        return None
    return processor


# (statement, driver argument lists): one step of a unit of work, ready to send
Work = list[tuple[DirectStatement, list[list[Any]]]]


class Preparer:
    """Compiles statements for one engine, and keeps the ones callers name (both executors)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._prepared: dict[Hashable, DirectStatement] = {}

    def prepare(
        self, statement: ClauseElement, raw: Collection[str] = (), *, session_settings: bool = True
    ) -> DirectStatement:
        return DirectStatement(statement, self._engine, raw, session_settings=session_settings)

    def prepared(
        self, key: Hashable, build: Callable[[], ClauseElement], *, session_settings: bool = True
    ) -> DirectStatement:
        """The statement `build` makes, compiled once per `key` (a statement family and its
        filter shape: a bounded set) for this executor's engine."""
        found = self._prepared.get(key)
        if found is None:
            found = self.prepare(build(), session_settings=session_settings)
            self._prepared[key] = found
        return found
