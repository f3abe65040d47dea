"""The thread-stream protocol's client side without I/O (shared by the sync and async
`threads.stream`): command envelopes and their answers, the reconnect cursor with its
de-duplication by `event_id`, and the resume-gap error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from ._errors import ResumeGap, ThreadStreamError
from ._resume import Resume

# every channel a subscription may name (`custom:<name>` selects one named channel)
ALL_CHANNELS = ["values", "updates", "messages", "tools", "custom", "lifecycle", "input"]


def is_root(event: Mapping[str, Any], *names: str) -> bool:
    """A root-namespace lifecycle event with one of `names`."""
    params = event.get("params") or {}
    data = params.get("data")
    return (
        event.get("method") == "lifecycle"
        and not params.get("namespace")
        and isinstance(data, Mapping)
        and data.get("event") in names
    )


def command_result(body: Any) -> dict[str, Any]:
    """The `result` of a command's answer; ThreadStreamError / ResumeGap for an error."""
    if not isinstance(body, Mapping) or "id" not in body:
        raise ThreadStreamError("invalid_response", "the answer is not a command envelope")
    if body.get("type") == "error":
        gap = gap_from(body)
        if gap is not None:
            raise gap
        raise ThreadStreamError(str(body.get("error")), str(body.get("message") or ""))
    result = body.get("result")
    return dict(result) if isinstance(result, Mapping) else {}


def gap_from(body: Any) -> ResumeGap | None:
    """The ResumeGap a `resume_gap` error envelope (or 410 body) describes, else None."""
    if not isinstance(body, Mapping) or body.get("error") != "resume_gap":
        return None
    since, first = body.get("since"), body.get("min_available_seq")
    if not isinstance(since, int) or not isinstance(first, int):
        return None
    return ResumeGap(since, first, str(body.get("message") or ""))


def websocket_url(base_url: httpx.URL, path: str) -> str:
    """The `ws://` / `wss://` URL of a path under the client's base URL."""
    url = base_url.join(path)
    return str(url.copy_with(scheme="wss" if url.scheme == "https" else "ws"))


class Cursor(Resume):
    """Where a subscription is: the highest seq delivered (sent back as `since` when it
    reconnects), plus `Resume`'s delivered event ids (a replay overlaps; each event is
    handed out once) and reconnect attempts."""

    def __init__(
        self, since: int | None, *, max_reconnects: int, backoff: float, max_backoff: float
    ) -> None:
        super().__init__(max_reconnects=max_reconnects, backoff=backoff, max_backoff=max_backoff)
        self.since = since

    def body(self, subscription: Mapping[str, Any]) -> dict[str, Any]:
        """The filter to (re)open with, carrying the cursor."""
        out = dict(subscription)
        if self.since is not None:
            out["since"] = self.since
        return out

    def accept(self, envelope: Any) -> bool:
        """Should this frame go to the caller? (An event not delivered before.)"""
        if not isinstance(envelope, Mapping) or envelope.get("type") != "event":
            return False
        seq = envelope.get("seq")
        if isinstance(seq, int) and not isinstance(seq, bool):
            self.since = seq if self.since is None else max(self.since, seq)
        event_id = envelope.get("event_id")
        return self.first_time(event_id if isinstance(event_id, str) else None)
