"""Runs: start a graph on a thread (or stateless), wait for it, stream it, cancel it."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, Literal, Unpack

from .._calls import Call, decode_json, drop_none, model, model_list, parse_none, run_output, seg
from .._models import CancelAction, Run, RunStatus
from .._payloads import RunOptions, run_body
from ._http import AsyncHTTP
from ._streams import AsyncRunStream


def _runs_path(thread_id: str | None) -> str:
    return f"/threads/{seg(thread_id)}/runs" if thread_id is not None else "/runs"


class AsyncRuns:
    """`client.runs`: every option of the server's run create is a keyword argument
    (`input`, `command`, `config`, `context`, `checkpoint`, `multitask_strategy`, ...,
    see `RunOptions`). `thread_id=None` starts a stateless run on a temporary thread."""

    def __init__(self, http: AsyncHTTP) -> None:
        self._http = http

    async def create(
        self, thread_id: str | None, assistant_id: str, **options: Unpack[RunOptions]
    ) -> Run:
        """Queue a run and return at once (status `pending`)."""
        body = run_body(assistant_id, options)
        return await self._http.call(Call("POST", _runs_path(thread_id), _run, body=body))

    async def wait(
        self,
        thread_id: str | None,
        assistant_id: str,
        *,
        raise_error: bool = True,
        **options: Unpack[RunOptions],
    ) -> Any:
        """Run to the end and return the final state values.

        A run stopped at an interrupt returns its values with `__interrupt__`. A failed run
        raises RunFailed (or, with `raise_error=False`, returns `{"__error__": ...}`). If the
        connection breaks after the run started, the result is fetched from its join URL.
        """
        body = run_body(assistant_id, options)
        path = f"{_runs_path(thread_id)}/wait"
        call = Call("POST", path, run_output(raise_error), body=body, follow_location=True)
        return await self._http.call(call)

    def stream(
        self, thread_id: str | None, assistant_id: str, **options: Unpack[RunOptions]
    ) -> AsyncRunStream:
        """Start a run and iterate its events (see AsyncRunStream).

        Pass `stream_resumable=True` so that a dropped connection resumes without losing
        events (the server then numbers them).
        """
        body = run_body(assistant_id, options)
        call = Call("POST", f"{_runs_path(thread_id)}/stream", decode_json, body=body)
        return AsyncRunStream(self._http, call, thread_id=thread_id)

    async def join(self, thread_id: str, run_id: str, *, raise_error: bool = True) -> Any:
        """Wait for an existing run to end and return its final values (like `wait`)."""
        path = f"/threads/{seg(thread_id)}/runs/{seg(run_id)}/join"
        call = Call("GET", path, run_output(raise_error), follow_location=True)
        return await self._http.call(call)

    def join_stream(
        self,
        thread_id: str,
        run_id: str,
        *,
        stream_mode: str | Sequence[str] | None = None,
        last_event_id: str | None = None,
        cancel_on_disconnect: bool = False,
    ) -> AsyncRunStream:
        """Stream an existing run's events.

        With `last_event_id` the server first replays the stored events after that id
        (`"-1"` replays from the start; resumable runs only), then continues live.
        """
        modes = [stream_mode] if isinstance(stream_mode, str) else list(stream_mode or ())
        params: dict[str, Any] = {
            "cancel_on_disconnect": "true" if cancel_on_disconnect else "false"
        }
        if modes:
            params["stream_mode"] = modes
        path = f"/threads/{seg(thread_id)}/runs/{seg(run_id)}/stream"
        call = Call("GET", path, decode_json, params=params)
        return AsyncRunStream(self._http, call, thread_id=thread_id, last_event_id=last_event_id)

    async def cancel(
        self,
        thread_id: str,
        run_id: str,
        *,
        wait: bool = False,
        action: CancelAction = "interrupt",
    ) -> Any:
        """Cancel a pending or running run.

        `action="rollback"` also deletes the run and what it wrote. With `wait=True` it
        returns once the run has stopped, with the thread's final values; otherwise None.
        """
        path = f"/threads/{seg(thread_id)}/runs/{seg(run_id)}/cancel"
        params = {"wait": "1" if wait else "0", "action": action}
        parse = run_output(False) if wait else parse_none
        return await self._http.call(Call("POST", path, parse, params=params, follow_location=wait))

    async def cancel_many(
        self,
        *,
        thread_id: str | None = None,
        run_ids: Sequence[str] | None = None,
        status: Literal["pending", "running", "all"] | None = None,
        action: CancelAction = "interrupt",
    ) -> None:
        """Cancel several runs: `run_ids` of one `thread_id`, or every run with `status`."""
        if (run_ids is None) == (status is None):
            raise ValueError("give thread_id and run_ids, or status")
        body = drop_none(
            thread_id=thread_id,
            run_ids=list(run_ids) if run_ids is not None else None,
            status=status,
        )
        params = {"action": action}
        await self._http.call(Call("POST", "/runs/cancel", parse_none, body=body, params=params))

    async def list(
        self,
        thread_id: str,
        *,
        limit: int = 10,
        offset: int = 0,
        status: RunStatus | None = None,
    ) -> builtins.list[Run]:
        """The thread's runs, newest first."""
        params = {"limit": limit, "offset": offset, "status": status}
        return await self._http.call(
            Call("GET", f"/threads/{seg(thread_id)}/runs", _runs, params=params)
        )

    async def get(self, thread_id: str, run_id: str) -> Run:
        """One run by id."""
        path = f"/threads/{seg(thread_id)}/runs/{seg(run_id)}"
        return await self._http.call(Call("GET", path, _run))

    async def delete(self, thread_id: str, run_id: str) -> None:
        """Delete a finished run (and the checkpoints it wrote)."""
        path = f"/threads/{seg(thread_id)}/runs/{seg(run_id)}"
        await self._http.call(Call("DELETE", path, parse_none))


_run = model(Run.from_json)
_runs = model_list(Run.from_json)
