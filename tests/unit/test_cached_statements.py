"""The statements the thread and assistant routes build once per shape and then execute many
times carry no expanding (post-compile) parameter on PostgreSQL. SQLAlchemy renders such a
parameter, e.g. a plain `column.in_(values)`, into the SQL again on every execution of an
otherwise cached statement: that was a third of an assistant search's SQLAlchemy time."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sqlalchemy.dialects import postgresql

from app.assistants import queries as assistant_queries
from app.threads import queries as thread_queries

PG = postgresql.asyncpg.dialect()  # the server's driver: it spells binds as $1
FLAGS = list(itertools.product([False, True], repeat=3))


def _assistant_searches() -> list[Any]:
    return [
        assistant_queries.search_statement(
            graph_ids=graph_ids,
            count=count,
            metadata=metadata,
            graph_id=graph_id,
            name=name,
            sort_by="name",
            sort_order="asc",
        )
        for graph_ids in [("agent", "steps", "asker"), ("agent",), ()]
        for count in (False, True)
        for metadata, graph_id, name in FLAGS
    ]


def _thread_statements() -> list[Any]:
    searches = [
        thread_queries.search_statement(
            count=count, metadata=metadata, values=values, status=status, sort_by="created_at"
        )
        for count in (False, True)
        for metadata, values, status in FLAGS
    ]
    return [
        *searches,
        thread_queries.THREAD_ROW,
        thread_queries.FILTERED_THREAD_ROW_PG,
        thread_queries.HAS_ACTIVE_RUNS,
    ]


@pytest.mark.parametrize("statement", _assistant_searches() + _thread_statements())
def test_a_cached_statement_is_rendered_once(statement: Any) -> None:
    compiled = statement.compile(dialect=PG)
    assert not compiled.post_compile_params, str(compiled)
    assert "POSTCOMPILE" not in str(compiled)


def test_the_graph_ids_are_bound_in_the_assistant_search() -> None:
    """The ids travel as the statement's own binds; no graph at all matches nothing."""
    some = assistant_queries.search_statement(
        graph_ids=("agent", "steps"), count=True, metadata=False, graph_id=False, name=False
    ).compile(dialect=PG)
    assert {"agent", "steps"} <= set(some.params.values())
    none = assistant_queries.search_statement(
        graph_ids=(), count=True, metadata=False, graph_id=False, name=False
    ).compile(dialect=PG)
    assert "false" in str(none).lower()
