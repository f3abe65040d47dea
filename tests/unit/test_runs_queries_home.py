"""Issue 17's rule for the runs domain: statements are built in its `*queries.py` modules
(pure builders) and only executed elsewhere. Checked on the source: a runs module outside
them that imports SQLAlchemy's statement constructors, a table, or a dialect to compile with
fails here. Plus the builders the hot paths share: cached ones are one object, and the
fencing predicates re-exported with the token are the builders themselves."""

from __future__ import annotations

import ast
from pathlib import Path

from sqlalchemy.dialects import postgresql, sqlite

from app.db.types import utcnow
from app.runs import fencing, finish_queries, queries, queue_queries

RUNS = Path(__file__).resolve().parents[2] / "app" / "runs"

# SQLAlchemy names that build SQL (types such as Insert or Row, engines and errors are fine)
CONSTRUCTORS = {
    "and_", "bindparam", "case", "cast", "column", "delete", "exists", "false", "func",
    "insert", "literal", "literal_column", "not_", "null", "or_", "select", "table", "text",
    "true", "tuple_", "type_coerce", "union", "union_all", "update", "values",
}  # fmt: skip

# Modules other helpers of issue 17 move (their SQL is theirs to move): shrink, never grow.
NOT_YET_MOVED: set[str] = set()


def _builds_sql(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {a.name for a in node.names}
            if node.module == "sqlalchemy" and names & CONSTRUCTORS:
                found.append(f"sqlalchemy: {sorted(names & CONSTRUCTORS)}")
            if node.module.startswith("sqlalchemy.dialects") or node.module == "app.db.tables":
                found.append(node.module)
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("sqlalchemy")]
    return found


def test_runs_modules_build_no_sql_outside_queries_modules() -> None:
    offenders = {}
    for path in sorted(RUNS.rglob("*.py")):
        rel = path.relative_to(RUNS).as_posix()
        if path.name == "queries.py" or path.name.endswith("_queries.py"):
            continue
        if rel in NOT_YET_MOVED:
            continue
        if found := _builds_sql(path):
            offenders[rel] = found
    assert offenders == {}


def test_the_guard_sees_sql_building() -> None:
    # the check itself: a queries module is what it would flag anywhere else
    assert _builds_sql(RUNS / "queue_queries.py")
    assert not _builds_sql(RUNS / "worker.py")


def test_fixed_shape_builders_are_one_statement_each() -> None:
    for build in (queue_queries.ping, finish_queries.insert_events):
        assert build() is build()
    assert queue_queries.ping_sql() == "SELECT 1"
    for name in ("postgresql", "sqlite"):
        assert queue_queries.claim(name) is queue_queries.claim(name)
        assert queries.notify(name) is queries.notify(name)
    assert queries.notify("sqlite") is None
    pg_notify = queries.notify("postgresql")
    assert pg_notify is not None
    assert set(pg_notify.compile(dialect=postgresql.dialect()).params) == {"channel", "payload"}


def test_fencing_re_exports_the_predicates() -> None:
    assert fencing.owns_run is queue_queries.owns_run
    assert fencing.owns_run_bound is queue_queries.owns_run_bound
    assert fencing.still_owned is queue_queries.still_owned
    token = fencing.FencingToken("r1", 3)
    params = fencing.owns_run(token).compile(dialect=sqlite.dialect()).params
    # the owned status is a plain bind (`one_of`), not a list SQLAlchemy expands per execution
    assert sorted(map(str, params.values())) == ["3", "r1", "running"]
    bound = fencing.owns_run_bound().compile(dialect=sqlite.dialect()).params
    assert set(fencing.fence_params(token)) <= set(bound)


def test_reap_adds_each_liveness_test_only_when_asked() -> None:
    def sql(**kw: bool) -> str:
        return str(queue_queries.reap(**kw).compile(dialect=postgresql.dialect()))

    leases = sql(liveness_locks=False, dead_workers=False)
    assert "pg_locks" not in leases and " IN " not in leases
    assert "pg_locks" in sql(liveness_locks=True, dead_workers=False)
    assert " IN " in sql(liveness_locks=False, dead_workers=True)
    now = utcnow()
    assert queue_queries.reap_params(now, []) == {"p_now": now}
    assert queue_queries.reap_params(now, ("h:1:n",)) == {"p_now": now, "p_dead": ["h:1:n"]}


def test_lease_statements_are_built_once_per_shape() -> None:
    for build in (queue_queries.renew, queue_queries.release):
        assert build(with_attempt=True) is build(with_attempt=True)
        fenced = str(build(with_attempt=True).compile(dialect=sqlite.dialect()))
        assert "attempt" in fenced.split("WHERE")[1]
        assert "attempt" not in str(build(with_attempt=False).compile()).split("WHERE")[1]
    now = utcnow()
    assert queue_queries.lease_params("r", "w", None, now) == {
        "p_run_id": "r",
        "p_worker": "w",
        "p_when": now,
    }
    assert queue_queries.lease_params("r", "w", 2, now)["p_attempt"] == 2
