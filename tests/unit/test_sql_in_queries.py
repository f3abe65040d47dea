"""SQL lives in the domain's queries modules (docs/architecture.md, "one way").

A structural check over app/: outside a queries module (`queries.py` or `*_queries.py`) no
module imports SQLAlchemy's statement constructors (select, insert, update, delete, text, from
any sqlalchemy module, dialect inserts included), reaches them as `sqlalchemy.<name>`, or
calls them as methods of a table from app/db/tables.py (`threads.update()`). Expression
helpers (func, and_, bindparam, ...) are not statements and stay allowed, so a shared
where-clause builder such as app/store/filters.py needs no exception.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"
CONSTRUCTORS = frozenset({"select", "insert", "update", "delete", "text"})

# Modules that legitimately build statements outside a queries module, with the reason.
ALLOWED: dict[str, str] = {
    # the only branch on dialect.name: dialect inserts (upsert / on conflict), the claim lock
    "db/dialect.py": "shared dialect builders, used by the queries modules",
    # server_default=text(...) in the table declarations (DDL, not a statement)
    "db/tables.py": "server defaults in the table declarations",
}
# Packages not yet checked, with the reason (none left: every domain builds in its queries).
ALLOWED_UNDER: dict[str, str] = {}


def is_queries_module(path: Path) -> bool:
    return path.name == "queries.py" or path.name.endswith("_queries.py")


def statement_construction(source: str) -> list[str]:
    """Where `source` builds a SQL statement itself, as `name@line` strings."""
    tree = ast.parse(source)
    tables: set[str] = set()
    modules: set[str] = set()  # names bound to a sqlalchemy module (`import sqlalchemy as sa`)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "app.db.tables":
                tables.update(alias.asname or alias.name for alias in node.names)
            elif node.module.split(".")[0] == "sqlalchemy":
                for alias in node.names:
                    if alias.name in CONSTRUCTORS:
                        found.append(f"import {alias.name}@{node.lineno}")
                    else:  # `from sqlalchemy.dialects import postgresql` is a module
                        modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "sqlalchemy":
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in CONSTRUCTORS
            and isinstance(node.value, ast.Name)
        ):
            if node.value.id in tables:
                found.append(f"{node.value.id}.{node.attr}@{node.lineno}")
            elif node.value.id in modules:
                found.append(f"{node.value.id}.{node.attr}@{node.lineno}")
    return found


def test_statements_are_built_in_queries_modules() -> None:
    offenders = {}
    for path in sorted(APP.rglob("*.py")):
        name = path.relative_to(APP).as_posix()
        if is_queries_module(path) or name in ALLOWED or name.startswith(tuple(ALLOWED_UNDER)):
            continue
        found = statement_construction(path.read_text())
        if found:
            offenders[name] = found
    assert not offenders, (
        "build statements in the domain's queries module (queries.py / *_queries.py), "
        f"not here: {offenders}"
    )


def test_allow_list_has_no_stale_entries() -> None:
    """An allowed module that no longer builds SQL (or is gone) leaves the list."""
    stale = [
        name
        for name in ALLOWED
        if not (APP / name).exists() or not statement_construction((APP / name).read_text())
    ]
    assert not stale, f"remove from ALLOWED: {stale}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from sqlalchemy import select, func\n", ["import select@1"]),
        ("from sqlalchemy.dialects.postgresql import insert\n", ["import insert@1"]),
        ("from sqlalchemy import text as sql\n", ["import text@1"]),
        ("import sqlalchemy as sa\nsa.update(t)\n", ["sa.update@2"]),
        ("from sqlalchemy import sql\nsql.delete(t)\n", ["sql.delete@2"]),
        ("from app.db.tables import threads\nthreads.delete()\n", ["threads.delete@2"]),
        # not statements: expressions, a list's insert, a dict's update, a module's select
        ("from sqlalchemy import func, and_, bindparam\n", []),
        ("rows = []\nrows.insert(0, 1)\nd = {}\nd.update(a=1)\n", []),
        ("import select\nselect.select([], [], [])\n", []),
    ],
)
def test_the_check_sees_each_form(source: str, expected: list[str]) -> None:
    assert statement_construction(source) == expected
