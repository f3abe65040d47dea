"""Pagination headers shared by the search endpoints (contract 1.5)."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse


def page_response(
    items: list[dict[str, Any]], *, has_more: bool, limit: int, offset: int
) -> JSONResponse:
    """The page as JSON with X-Pagination-Next (only when more exist) and X-Pagination-Total."""
    headers = {"X-Pagination-Total": str(offset + limit + 1 if has_more else offset + len(items))}
    if has_more:
        headers["X-Pagination-Next"] = str(offset + limit)
    return JSONResponse(items, headers=headers)
