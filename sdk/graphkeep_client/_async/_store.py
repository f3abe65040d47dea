"""The Store: long-term memory as JSON items under hierarchical namespaces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .._calls import (
    Call,
    drop_none,
    model_list,
    optional_model,
    parse_namespaces,
    parse_none,
)
from .._models import Item
from ._http import AsyncHTTP


def _labels(namespace: Sequence[str]) -> list[str]:
    """Validate a namespace before sending: GET joins labels with '.', so none may hold one."""
    if isinstance(namespace, str):
        raise TypeError("namespace must be a sequence of labels, e.g. ('users', 'u1')")
    labels = list(namespace)
    for label in labels:
        if not isinstance(label, str) or not label or "." in label:
            raise ValueError(f"invalid namespace label {label!r}: non-empty, without '.'")
    return labels


class AsyncStore:
    """`client.store`: put, get, delete and search items; list namespaces."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    async def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        index: Literal[False] | Sequence[str] | None = None,
        ttl: float | None = None,
    ) -> None:
        """Create or replace an item. `index=False` skips embedding; `ttl` is in minutes."""
        labels = _labels(namespace)
        if not labels:
            raise ValueError("namespace must have at least one label")
        body: dict[str, Any] = {"namespace": labels, "key": key, "value": dict(value)}
        if index is not None:
            body["index"] = False if index is False else list(index)
        if ttl is not None:
            body["ttl"] = ttl
        await self._http.call(Call("PUT", "/store/items", parse_none, body=body))

    async def get(
        self, namespace: Sequence[str], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """The item, or None if there is none (a missing item is not an error)."""
        params: dict[str, Any] = {"namespace": ".".join(_labels(namespace)), "key": key}
        if refresh_ttl is not None:
            params["refresh_ttl"] = "true" if refresh_ttl else "false"
        return await self._http.call(Call("GET", "/store/items", _item, params=params))

    async def delete(self, namespace: Sequence[str], key: str) -> None:
        """Delete an item; deleting a missing item is not an error."""
        body = {"namespace": _labels(namespace), "key": key}
        await self._http.call(Call("DELETE", "/store/items", parse_none, body=body))

    async def search(
        self,
        namespace_prefix: Sequence[str],
        *,
        filter: Mapping[str, Any] | None = None,
        query: str | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[Item]:
        """Items under a namespace prefix (`()` = all), filtered on their value.

        `filter` matches values (`{"kind": "fact"}` or operators like `{"age": {"$gte": 18}}`);
        `query` asks for semantic search (needs an index on the server; sets `Item.score`).
        """
        body = drop_none(
            namespace_prefix=_labels(namespace_prefix),
            filter=filter,
            query=query,
            limit=limit,
            offset=offset,
            refresh_ttl=refresh_ttl,
        )
        return await self._http.call(
            Call("POST", "/store/items/search", _items, body=body, idempotent=True)
        )

    async def list_namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """Namespaces in use; `"*"` in `prefix` / `suffix` matches any one label."""
        body = drop_none(
            prefix=list(prefix) if prefix is not None else None,
            suffix=list(suffix) if suffix is not None else None,
            max_depth=max_depth,
            limit=limit,
            offset=offset,
        )
        return await self._http.call(
            Call("POST", "/store/namespaces", parse_namespaces, body=body, idempotent=True)
        )


_item = optional_model(Item.from_json)
_items = model_list(Item.from_json, key="items")
