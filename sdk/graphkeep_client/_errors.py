"""Exceptions raised by graphkeep_client.

Every exception derives from `GraphkeepError`, so one `except GraphkeepError` catches all:

    GraphkeepError
    ├── TransportError      the server could not be reached or the connection broke
    │                       (after the configured retries); wraps the httpx error
    ├── ProtocolError       the server answered something this client cannot read
    │                       (bad JSON, a stream that is not text/event-stream)
    ├── RunFailed           a run ended in error (`runs.wait` / `runs.join` with raise_error)
    └── APIError            the server answered with an error status (`status`, `detail`)
        ├── InvalidInput    400 and 422: the request was wrong
        ├── Unauthorized    401: missing or bad credentials
        ├── Forbidden       403: the credentials do not allow this
        ├── NotFound        404
        ├── Conflict        409: already exists, or the thread is busy
        ├── RateLimited     429 (`retry_after` in seconds, if the server said)
        └── ServerError     5xx

`APIError.detail` is the server's own message (`{"detail": "..."}` body), so
`str(error)` reads like "404 Not Found: Thread 1f0c... not found".
"""

from __future__ import annotations

from typing import Any


class GraphkeepError(Exception):
    """Root of every error this client raises."""


class TransportError(GraphkeepError):
    """The request could not be sent or its answer could not be read (network level)."""


class ProtocolError(GraphkeepError):
    """The server's answer does not follow the protocol (unreadable body, wrong content type)."""


class RunFailed(GraphkeepError):
    """A run ended in error. `error` is the exception type name, `message` its text."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}" if message else error)
        self.error = error
        self.message = message


class APIError(GraphkeepError):
    """The server answered with an error status.

    `status` is the HTTP status, `detail` the server's message, `request_id` the
    `x-request-id` response header when the server sent one.
    """

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        method: str = "",
        url: str = "",
        request_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(f"{status} {detail}" if detail else str(status))
        self.status = status
        self.detail = detail
        self.method = method
        self.url = url
        self.request_id = request_id
        self.body = body


class InvalidInput(APIError):
    """400 or 422: the server rejected the request's content."""


class Unauthorized(APIError):
    """401: credentials missing or not valid."""


class Forbidden(APIError):
    """403: the credentials are valid but do not allow this action."""


class NotFound(APIError):
    """404: the resource does not exist (or belongs to another tenant)."""


class Conflict(APIError):
    """409: the resource already exists, or the thread has a run in flight."""


class RateLimited(APIError):
    """429: too many requests. `retry_after` is the server's hint in seconds, if any."""

    def __init__(self, status: int, detail: str, *, retry_after: float | None = None, **kw: Any):
        super().__init__(status, detail, **kw)
        self.retry_after = retry_after


class ServerError(APIError):
    """5xx: the server failed or is unavailable."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidInput,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: InvalidInput,
    429: RateLimited,
}


def error_class_for(status: int) -> type[APIError]:
    """The exception class for an HTTP error status."""
    if status >= 500:
        return ServerError
    return _BY_STATUS.get(status, APIError)


class ThreadStreamError(GraphkeepError):
    """A thread-stream command was refused (`code` is the protocol's error code, e.g.
    `no_such_interrupt`, `unknown_error`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


class ResumeGap(ThreadStreamError):
    """The thread's log no longer holds the events after `since` (retention trimmed them):
    the first event still available has seq `min_available_seq`. Nothing was skipped
    silently; reopen without `since` to read what is left."""

    def __init__(self, since: int, min_available_seq: int, message: str = "") -> None:
        super().__init__("resume_gap", message or f"events after seq {since} are gone")
        self.since = since
        self.min_available_seq = min_available_seq
