"""Shared rules for search endpoints: sort columns, sort order, `select` field lists.

`order_by` builds ORDER BY expressions only, never a statement: the domains' queries modules
put them into their search statements.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, func

from app.errors import ValidationFailed


def order_by(
    columns: Mapping[str, ColumnElement[Any]],
    sort_by: str | None,
    sort_order: str | None,
    *,
    case_insensitive: Iterable[str] = (),
    tie_breaker: ColumnElement[Any] | None = None,
) -> list[Any]:
    """ORDER BY clauses: an unknown or missing `sort_by` means created_at; default desc."""
    name = sort_by if sort_by is not None and sort_by in columns else "created_at"
    column: Any = columns[name]
    if name in set(case_insensitive):
        column = func.lower(column)
    ascending = (sort_order or "desc").lower() == "asc"
    clauses = [column.asc() if ascending else column.desc()]
    if tie_breaker is not None:
        clauses.append(tie_breaker.asc() if ascending else tie_breaker.desc())
    return clauses


def check_sort_order(sort_order: str | None) -> None:
    if sort_order is not None and sort_order.lower() not in ("asc", "desc"):
        raise ValidationFailed(f"sort_order: must be 'asc' or 'desc', not {sort_order!r}")


def check_select(select: Sequence[str] | None, allowed: Sequence[str]) -> list[str] | None:
    """Validate a `select` list (422 naming the allowed set); None/empty means every field."""
    if not select:
        return None
    unknown = [name for name in select if name not in allowed]
    if unknown:
        raise ValidationFailed(
            f"select: unknown field(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(allowed)}"
        )
    return list(dict.fromkeys(select))
