"""What MCP and A2A share: the caller, its assistants, and a graph run through the run service.

Both protocols run graphs exactly as the REST API does (`RunService.create` then its
`wait_output`), under the principal the auth middleware resolved for the request, so a tenant
only ever sees and runs its own assistants (and the per-graph system assistants).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.requests import Request

from app.assistants.schemas import AssistantSearch
from app.assistants.service import resolve_assistant_id
from app.auth.principal import Principal
from app.errors import Conflict, NotFound, ValidationFailed
from app.graphs.config import DISABLE_A2A as DISABLE_A2A  # re-exported for mcp / a2a
from app.graphs.config import DISABLE_MCP as DISABLE_MCP
from app.runs.schemas import RunCreate
from app.runs.service import RunService
from app.state import AppState
from app.threads.schemas import Thread
from app.threads.service import parse_thread_id

JSONObject = dict[str, Any]
# Keys of a run's output that are not graph state (RunService.wait_output)
ERROR_KEY = "__error__"
INTERRUPT_KEY = "__interrupt__"
_PAGE = 1000


@dataclass(frozen=True)
class Caller:
    """The authenticated caller of a protocol request and the app it reached."""

    state: AppState
    principal: Principal
    headers: dict[str, str]

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id

    @property
    def runs(self) -> RunService:
        service: RunService = self.state.runs
        return service


async def caller_of(request: Request) -> Caller:
    """The request's principal as the auth middleware resolved it (app/api/auth.py)."""
    state: AppState = request.app.state.graphkeep
    principal: Principal = await request.app.state.resolve_principal(request)
    return Caller(state=state, principal=principal, headers=dict(request.headers))


def switched_off(state: AppState, key: str) -> bool:
    """Whether langgraph.json's `http.<key>` is true (e.g. `http.disable_mcp`)."""
    return bool(state.graphs.config.http_flag(key))


async def list_assistants(caller: Caller) -> list[JSONObject]:
    """Every assistant the caller's tenant can see (its own and the system ones), oldest first."""
    items: list[JSONObject] = []
    offset = 0
    while True:
        page = await caller.state.assistants.search_assistants(
            tenant_id=caller.tenant_id,
            body=AssistantSearch(
                limit=_PAGE, offset=offset, sort_by="created_at", sort_order="asc"
            ),
        )
        items.extend(page.items)
        if not page.has_more:
            return items
        offset += _PAGE


async def find_assistant(caller: Caller, assistant_id: str) -> JSONObject:
    """The assistant by id or graph id, or NotFound (also for another tenant's)."""
    try:
        resolved = resolve_assistant_id(assistant_id, graphs=caller.state.graphs)
    except ValidationFailed:
        raise NotFound(f"Assistant '{assistant_id}' not found") from None
    assistant = await caller.state.assistants.get_assistant(
        tenant_id=caller.tenant_id,
        assistant_id=resolved,
    )
    return assistant.model_dump(mode="json")


def graph_description(caller: Caller, assistant: JSONObject) -> str:
    """The assistant's description, else its graph's from langgraph.json, else its name."""
    if assistant.get("description"):
        return str(assistant["description"])
    for entry in caller.state.graphs.config.graphs:
        if entry.graph_id == assistant["graph_id"] and entry.description:
            return str(entry.description)
    return f"Run the {assistant['name']} graph"


async def thread_of(caller: Caller, thread_id: str) -> Thread | None:
    """The caller's thread, or None; ValidationFailed for an id that is not a UUID."""
    return await caller.state.threads.find_thread(
        tenant_id=caller.tenant_id, thread_id=parse_thread_id(thread_id)
    )


async def start_run(
    caller: Caller,
    *,
    assistant_id: str,
    thread_id: str | None,
    input: Any = None,
    command: JSONObject | None = None,
    metadata: JSONObject | None = None,
    stream_mode: list[str] | None = None,
) -> JSONObject:
    """Queue a run (stateless when `thread_id` is None; the thread is created if missing)."""
    payload = RunCreate(
        assistant_id=assistant_id,
        input=input,
        command=command,
        if_not_exists="create" if thread_id is not None else None,
        multitask_strategy="enqueue",  # a turn during a turn waits for it
        metadata={"protocol": "graphkeep.protocols", **(metadata or {})},
        stream_mode=stream_mode,
    )
    try:
        run = await caller.runs.create(
            principal=caller.principal, thread_id=thread_id, payload=payload, headers=caller.headers
        )
        return run.to_json()
    except Conflict:
        # With `enqueue` the one conflict is a thread id taken by another tenant: it is as
        # missing to this caller as any other tenant's resource (no hint that it exists).
        raise NotFound(f"Thread '{thread_id}' not found") from None


async def run_output(caller: Caller, run: JSONObject, *, from_start: bool = True) -> JSONObject:
    """The run's final output (values, `__error__` or values with `__interrupt__`)."""
    output: JSONObject = {}
    async for item in caller.runs.wait_output(
        tenant_id=caller.tenant_id,
        thread_id=run["thread_id"],
        run_id=run["run_id"],
        from_start=from_start,
    ):
        if item is not None:
            output = item
    return output


# A run's stream modes when its caller wants the model's tokens as they come
TOKEN_STREAM_MODES = ["values", "messages-tuple"]


async def stream_output(caller: Caller, run: JSONObject) -> AsyncIterator[str | JSONObject]:
    """The text of each AI token (or whole AI message) the run streams, as it comes, then
    the run's output (as `run_output`) last. The run was started with TOKEN_STREAM_MODES."""
    last_values: str | None = None
    error: str | None = None
    streamed: set[str] = set()  # ids of messages sent as chunks: their full copy is not new
    async for ev in caller.runs.stream(
        tenant_id=caller.tenant_id, run_id=run["run_id"], after_seq=0, fresh=True
    ):
        if ev is None:
            continue
        if ev.event == "values":
            last_values = ev.data
        elif ev.event == "error":
            error = ev.data
        elif ev.event == "messages":
            text = token_text(orjson.loads(ev.data), streamed)
            if text:
                yield text
    if error is not None:
        yield {ERROR_KEY: orjson.loads(error)}
    elif last_values is not None:
        yield orjson.loads(last_values)
    else:
        yield await caller.runs.thread_output(
            tenant_id=caller.tenant_id, thread_id=run["thread_id"]
        )


def token_text(pair: Any, streamed: set[str]) -> str:
    """The AI text of one `messages-tuple` event ([message, metadata]); '' for the rest."""
    message = pair[0] if isinstance(pair, list) and pair else None
    if not isinstance(message, dict):
        return ""
    kind, msg_id = message.get("type"), str(message.get("id") or "")
    if kind == "AIMessageChunk":
        streamed.add(msg_id)
        return content_text(message.get("content"))
    if kind == "ai" and msg_id not in streamed:
        return content_text(message.get("content"))
    return ""


async def cancel_quietly(caller: Caller, run: JSONObject) -> None:
    """Cancel a run whose caller went away; a run already over is left alone."""
    try:
        await caller.runs.cancel(
            tenant_id=caller.tenant_id,
            thread_id=run["thread_id"],
            run_id=run["run_id"],
            action="interrupt",
        )
    except NotFound:
        pass


def error_text(output: JSONObject) -> str:
    """A run error's message as the run stored it ({"error", "message"})."""
    err = output.get(ERROR_KEY)
    if isinstance(err, dict):
        kind, message = err.get("error"), err.get("message")
        return f"{kind}: {message}" if kind and message else str(message or kind or "run failed")
    return str(err or "run failed")


def last_ai_text(values: JSONObject) -> str | None:
    """The text of the last AI message in a `messages` state, if there is one."""
    messages = values.get("messages")
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if not isinstance(message, dict):
            continue
        if message.get("type") in ("ai", "AIMessageChunk") or message.get("role") == "assistant":
            return content_text(message.get("content"))
    return None


def content_text(content: Any) -> str:
    """A LangChain message content (a string or a list of blocks) as plain text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block if isinstance(block, str) else str(block.get("text", ""))
            for block in content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        )
    return "" if content is None else str(content)
