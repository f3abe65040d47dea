"""What every stream that survives a dropped connection remembers, without I/O (the run
streams' `StreamResume` and the thread streams' `Cursor` build on it): the event ids already
delivered, so the overlap of a replay after a reconnect is dropped and each event reaches the
caller once, and the reconnect attempts since the last progress, with their backoff.
"""

from __future__ import annotations

from collections import OrderedDict

from ._errors import TransportError
from ._policy import backoff_delay

_SEEN_IDS = 10_000  # as the official client: enough for any overlap of two connections


class Resume:
    """Delivered event ids and reconnect attempts of one stream."""

    def __init__(self, *, max_reconnects: int, backoff: float, max_backoff: float) -> None:
        self.reconnects = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._failures = 0
        self._max_reconnects = max_reconnects
        self._backoff = backoff
        self._max_backoff = max_backoff

    def first_time(self, event_id: str | None) -> bool:
        """Whether an event is new (one without an id always is); a new one is progress,
        which earns a fresh set of reconnect attempts."""
        if event_id is not None:
            if event_id in self._seen:
                return False
            self._seen[event_id] = None
            if len(self._seen) > _SEEN_IDS:
                self._seen.popitem(last=False)
        self._failures = 0
        return True

    def next_delay(self, cause: BaseException) -> float:
        """Seconds to wait before the next reconnect; TransportError once the attempts
        since the last progress are used up."""
        if self._failures >= self._max_reconnects:
            raise TransportError(
                f"stream lost and {self._max_reconnects} reconnect attempts failed: {cause}"
            ) from cause
        self._failures += 1
        self.reconnects += 1
        return backoff_delay(self._failures - 1, base=self._backoff, cap=self._max_backoff)
