"""The shared request core: what a call sends and how its answer is read, without I/O.

Every client method builds a `Call` (method, path, query, JSON body, idempotency, parser);
the sync and async HTTP layers only differ in how they send it. Error statuses become the
typed exceptions of `_errors`, with the server's `detail` message.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Mapping,
)
from datetime import date, datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote
from uuid import UUID

import httpx

from ._errors import ProtocolError, RateLimited, RunFailed, error_class_for
from ._json import loads
from ._models import Checkpoint
from ._policy import retry_after

T = TypeVar("T")
M = TypeVar("M")

TokenSource = str | Callable[[], str] | Callable[[], Awaitable[str]]
Timeout = float | httpx.Timeout | None
# looks at an answer and raises to refuse it (the stream readers' `refused` / `opened`)
ResponseCheck = Callable[[httpx.Response], None]

USER_AGENT = "graphkeep-client/0.1.0"
DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=300.0, write=300.0, pool=5.0)
_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class _Omitted:
    """Marks 'no body at all' (not even `null`)."""


NO_BODY: Any = _Omitted()


@dataclasses.dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One API call: what to send and how to read the answer.

    `idempotent` defaults by method (GET/PUT/DELETE yes, POST/PATCH no); read-like POSTs set
    it. `follow_location` makes a cut-off JSON answer (wait / join) re-read from the
    response's `Location` (the run's join URL) instead of failing.
    """

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    body: Any = NO_BODY
    params: Mapping[str, Any] | None = None
    headers: Mapping[str, str] | None = None
    idempotent: bool | None = None
    follow_location: bool = False

    @property
    def safe_to_repeat(self) -> bool:
        """Whether the call may be sent again after a failure."""
        if self.idempotent is not None:
            return self.idempotent
        return self.method in _IDEMPOTENT_METHODS

    def build(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        """The httpx request for this call."""
        headers = dict(self.headers or {})
        content: bytes | None = None
        if not isinstance(self.body, _Omitted):
            content = encode_json(self.body)
            headers["Content-Type"] = "application/json"
        params = {k: v for k, v in (self.params or {}).items() if v is not None}
        return client.build_request(
            self.method, self.path, params=params, headers=headers, content=content
        )


def seg(value: str | UUID) -> str:
    """One path segment, percent-encoded (a graph id or namespace may hold `/`)."""
    text = str(value)
    if text in (".", ".."):  # httpx would collapse these as relative path segments
        return text.replace(".", "%2E")
    return quote(text, safe="")


def drop_none(**fields: Any) -> dict[str, Any]:
    """A JSON body without the keys whose value is None (the server treats both alike)."""
    return {k: v for k, v in fields.items() if v is not None}


def encode_json(value: Any) -> bytes:
    """Compact UTF-8 JSON; understands UUIDs, datetimes, tuples and our request models."""
    return json.dumps(value, separators=(",", ":"), default=_json_default).encode()


def _json_default(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def decode_json(response: httpx.Response) -> Any:
    """The response body as JSON; an empty body is None (204, store misses)."""
    body = response.content
    if not body.strip():
        return None
    try:
        return loads(body)
    except ValueError as exc:
        raise ProtocolError(
            f"{response.request.method} {response.request.url.path}: answer is not JSON"
        ) from exc


def raise_for_status(response: httpx.Response) -> None:
    """Raise the typed error for an error status, carrying the server's message."""
    if response.status_code < 400:
        return
    try:
        body = loads(response.content) if response.content.strip() else None
    except ValueError:
        body = response.text
    detail = _detail(body) or response.reason_phrase
    kwargs: dict[str, Any] = {
        "method": response.request.method,
        "url": str(response.request.url),
        "request_id": response.headers.get("x-request-id"),
        "body": body,
    }
    cls = error_class_for(response.status_code)
    if cls is RateLimited:
        raise RateLimited(response.status_code, detail, retry_after=retry_after(response), **kwargs)
    raise cls(response.status_code, detail, **kwargs)


def _detail(body: Any) -> str:
    if isinstance(body, str):
        return body.strip()[:1000]
    if not isinstance(body, Mapping):
        return ""
    for key in ("detail", "message", "error"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, list) and value:  # FastAPI's validation list
            return "; ".join(_validation_item(v) for v in value)
    return ""


def _validation_item(item: Any) -> str:
    if not isinstance(item, Mapping):
        return str(item)
    where = ".".join(str(p) for p in item.get("loc", ()))
    return f"{where}: {item.get('msg', '')}" if where else str(item.get("msg", ""))


# --- parsers ---------------------------------------------------------------------------


def parse_none(response: httpx.Response) -> None:
    """For 204 answers and bodies the caller does not need."""
    return None


def parse_json(response: httpx.Response) -> Any:
    """The JSON body as is."""
    return decode_json(response)


def parse_object(response: httpx.Response) -> dict[str, Any]:
    """A JSON object body as a dict."""
    return dict(_object(decode_json(response)))


def parse_int(response: httpx.Response) -> int:
    """A bare integer body (count endpoints)."""
    value = decode_json(response)
    if not isinstance(value, int):
        raise ProtocolError(f"expected an integer, got {value!r}")
    return value


def model(factory: Callable[[Mapping[str, Any]], M]) -> Callable[[httpx.Response], M]:
    """Parser of one JSON object into a model."""

    def parse(response: httpx.Response) -> M:
        return factory(_object(decode_json(response)))

    return parse


def optional_model(
    factory: Callable[[Mapping[str, Any]], M],
) -> Callable[[httpx.Response], M | None]:
    """Parser of a JSON object or `null` (a missing store item)."""

    def parse(response: httpx.Response) -> M | None:
        value = decode_json(response)
        return None if value is None else factory(_object(value))

    return parse


def model_list(
    factory: Callable[[Mapping[str, Any]], M], key: str | None = None
) -> Callable[[httpx.Response], list[M]]:
    """Parser of a JSON array of objects (or of the array under `key`)."""

    def parse(response: httpx.Response) -> list[M]:
        value = decode_json(response)
        if key is not None:
            value = _object(value).get(key)
        if not isinstance(value, list):
            raise ProtocolError(f"expected a JSON array, got {type(value).__name__}")
        return [factory(_object(v)) for v in value]

    return parse


def run_output(raise_error: bool) -> Callable[[httpx.Response], Any]:
    """Parser of a wait / join answer: the final values, or RunFailed for `__error__`."""

    def parse(response: httpx.Response) -> Any:
        value = decode_json(response)
        if raise_error and isinstance(value, Mapping) and "__error__" in value:
            err = value["__error__"]
            if isinstance(err, Mapping):
                raise RunFailed(str(err.get("error", "Error")), str(err.get("message", "")))
            raise RunFailed("Error", str(err))
        return value

    return parse


def parse_pruned(response: httpx.Response) -> int:
    """`{"pruned_count": n}` of threads.prune."""
    value = decode_json(response)
    if not isinstance(value, Mapping) or not isinstance(value.get("pruned_count"), int):
        raise ProtocolError(f"expected {{'pruned_count': int}}, got {value!r}")
    return int(value["pruned_count"])


def parse_checkpoint_ref(response: httpx.Response) -> Checkpoint:
    """`{"checkpoint": {...}}` of threads.update_state."""
    value = decode_json(response)
    if not isinstance(value, Mapping) or not isinstance(value.get("checkpoint"), Mapping):
        raise ProtocolError(f"expected {{'checkpoint': {{...}}}}, got {value!r}")
    return Checkpoint.from_json(value["checkpoint"])


def parse_namespaces(response: httpx.Response) -> list[tuple[str, ...]]:
    """`{"namespaces": [[...], ...]}` of store.list_namespaces."""
    value = decode_json(response)
    namespaces = value.get("namespaces") if isinstance(value, Mapping) else None
    if not isinstance(namespaces, list):
        raise ProtocolError(f"expected {{'namespaces': [...]}}, got {value!r}")
    return [tuple(str(label) for label in ns) for ns in namespaces]


def _object(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ProtocolError(f"expected a JSON object, got {type(value).__name__}")
    return value


# --- client construction -----------------------------------------------------------------


class Credentials(httpx.Auth):
    """Adds `Authorization: Bearer` (a fixed token, or a fresh one per request from a
    callable, which may be async for AsyncClient) and/or `x-api-key`."""

    def __init__(self, *, token: TokenSource | None, api_key: str | None) -> None:
        self._token = token
        self._api_key = api_key

    def _apply(self, request: httpx.Request, token: str | None) -> None:
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        if self._api_key:
            request.headers["x-api-key"] = self._api_key

    def sync_auth_flow(
        self, request: httpx.Request
    ) -> Generator[httpx.Request, httpx.Response, None]:
        """httpx hook (sync client)."""
        token = self._token() if callable(self._token) else self._token
        if isinstance(token, Awaitable):
            if isinstance(token, Coroutine):
                token.close()  # never awaited: close it so it does not warn later
            raise TypeError("an async token callable needs AsyncClient")
        self._apply(request, token)
        yield request

    async def async_auth_flow(
        self, request: httpx.Request
    ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        """httpx hook (async client)."""
        token = self._token() if callable(self._token) else self._token
        if isinstance(token, Awaitable):
            token = await token
        self._apply(request, token)
        yield request


def client_options(
    url: str,
    *,
    token: TokenSource | None,
    api_key: str | None,
    headers: Mapping[str, str] | None,
    timeout: Timeout,
) -> dict[str, Any]:
    """Keyword arguments shared by the httpx.Client and httpx.AsyncClient we build."""
    return {
        "base_url": url,
        "headers": {"User-Agent": USER_AGENT, **(headers or {})},
        "timeout": DEFAULT_TIMEOUT if timeout is None else timeout,
        "auth": Credentials(token=token, api_key=api_key),
        "follow_redirects": False,
    }
