"""Cancel delivery: a cancel request (local, or a `c` NOTIFY from another process) reaches the
worker executing the run here through the hook it registered."""

from __future__ import annotations

from collections.abc import Callable


class CancelDelivery:
    def __init__(self) -> None:
        self._handlers: dict[str, Callable[[], None]] = {}

    def on_cancel(self, run_id: str, handler: Callable[[], None]) -> Callable[[], None]:
        """Register the executing worker's cancel hook; returns the unregister function."""
        self._handlers[run_id] = handler

        def unregister() -> None:
            if self._handlers.get(run_id) is handler:
                del self._handlers[run_id]

        return unregister

    def deliver(self, run_id: str) -> None:
        """Tell a run executing in this process that a cancel was requested (no-op if not here)."""
        handler = self._handlers.get(run_id)
        if handler is not None:
            handler()
