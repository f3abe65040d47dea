"""The statements built once (per shape) and executed on every request or run carry no
expanding or literal-execute (post-compile) parameter. SQLAlchemy renders such a parameter, a
plain `column.in_(values)` or `literal(..., literal_execute=True)`, into the SQL again on every
execution of an otherwise cached statement: that was a third of an assistant search's
SQLAlchemy time, and it ran on the claim, the thread log's append and the settle of every
run. `app.db.dialect.one_of` is the way to write such an IN."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from app.assistants import queries as assistant_queries
from app.runs import fencing, finish_queries, queue_queries
from app.runs.threadlog import queries as log_queries
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


def _run_statements() -> list[Any]:
    """Each run's own: claimed, started (fenced), logged, settled (PostgreSQL's one-statement
    settle and delete)."""
    return [
        queue_queries.claim("postgresql"),
        select(fencing.owns_run_bound()),
        log_queries.append_events("postgresql"),
        log_queries.append_events("postgresql", settled=True),
        log_queries.append_announced(),
        log_queries.append_announced(settled=True),
        finish_queries.settle_in_one(),
        finish_queries.delete_temporary_in_one(),
    ]


@pytest.mark.parametrize(
    "statement", _assistant_searches() + _thread_statements() + _run_statements()
)
def test_a_cached_statement_is_rendered_once(statement: Any) -> None:
    compiled = statement.compile(dialect=PG)
    assert not compiled.post_compile_params, str(compiled)
    assert not compiled.literal_execute_params, str(compiled)
    assert "POSTCOMPILE" not in str(compiled)


def test_the_claim_is_rendered_once_on_sqlite_too() -> None:
    compiled = queue_queries.claim("sqlite").compile(dialect=sqlite.dialect())
    assert not compiled.post_compile_params and not compiled.literal_execute_params


@pytest.mark.parametrize("dialect", [PG, sqlite.dialect()], ids=["postgresql", "sqlite"])
def test_the_claim_still_writes_its_statuses_and_limit_into_the_sql(dialect: Any) -> None:
    """Rendered once, but still literals: as bound values PostgreSQL's generic plan misjudged
    how many runs are pending and planned the claim afresh on almost every call."""
    sql = str(queue_queries.claim(dialect.name).compile(dialect=dialect))
    candidate = sql[sql.index("SELECT") :]
    assert "cand.status = 'pending'" in candidate
    assert "other.status = 'running'" in candidate
    assert "LIMIT 1" in candidate


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
