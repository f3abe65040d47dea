"""MCP at /mcp: every assistant of the caller's tenant is a tool (the official `mcp` SDK).

Streamable HTTP, stateless and with JSON responses, as langgraph-api's /mcp: no session is
kept between requests, so any API replica answers any request (no sticky routing). Each
request carries the same credentials as the REST API; the tool list and every call are
scoped to that caller's tenant.

- `tools/list`: one tool per assistant; its name is the assistant's name (made safe for MCP
  and suffixed with the assistant id when two share a name), its description the assistant's
  or its graph's, its `inputSchema` the graph's input JSON schema.
- `tools/call`: the arguments are the graph input; the run is stateless, or on the thread named
  by `_meta.thread_id` (created if missing). The output comes back as JSON text and as
  `structuredContent`; a failed run, a bad thread id or an unknown input is a tool error
  (`isError`), an unknown tool name a protocol error (-32602). A client that goes away
  before the answer cancels its run (MCPEndpoint watches the connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import mcp_types as types
import orjson
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from app import __version__
from app.assistants.introspection import get_schemas
from app.assistants.service import system_assistant_id
from app.errors import AppError, ValidationFailed
from app.protocols import shared
from app.protocols.shared import Caller, JSONObject

MCP_PATH = "/mcp"
THREAD_META_KEY = "thread_id"
_STARTED = "graphkeep.protocols.mcp_runs"  # (caller, run) started by this HTTP request
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME = 128
_ANY_OBJECT: JSONObject = {"type": "object"}
_LANGCHAIN_MESSAGES = frozenset(
    f"{kind}{chunk}"
    for kind in ("AI", "Human", "Chat", "System", "Function", "Tool")
    for chunk in ("Message", "MessageChunk")
)
_LANGCHAIN_DEFS = _LANGCHAIN_MESSAGES | {
    "ToolCall",
    "ToolCallChunk",
    "InvalidToolCall",
    "UsageMetadata",
    "InputTokenDetails",
    "OutputTokenDetails",
}
# a graph run may write anything and reach anything: nothing to promise an MCP client
_ANNOTATIONS = types.ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)


def _is_system(assistant: JSONObject) -> bool:
    return bool(assistant["assistant_id"] == system_assistant_id(str(assistant["graph_id"])))


def tool_names(assistants: list[JSONObject]) -> dict[str, JSONObject]:
    """Tool name -> assistant: the name made MCP-safe, unique by an id suffix when taken.

    The per-graph system assistants come first, so a graph id always names its graph's
    default assistant (tools/call resolves those without listing)."""
    names: dict[str, JSONObject] = {}
    for assistant in sorted(assistants, key=lambda a: not _is_system(a)):
        base = _UNSAFE.sub("_", str(assistant["name"]))[:_MAX_NAME] or "assistant"
        name = base
        if name in names:
            suffix = "-" + str(assistant["assistant_id"])[:8]
            name = base[: _MAX_NAME - len(suffix)] + suffix
        names[name] = assistant
    return names


async def _caller(ctx: Any) -> Caller:
    request = ctx.request
    if not isinstance(request, Request):  # pragma: no cover - only served over HTTP
        raise MCPError(types.INTERNAL_ERROR, "no HTTP request")
    return await shared.caller_of(request)


def simplify_messages_schema(schema: JSONObject) -> JSONObject:
    """A `messages` list of LangChain message types becomes a string (the user's message), as
    langgraph-api does: an LLM can fill that in, and add_messages turns it into a human
    message. The LangChain definitions it no longer refers to are dropped."""
    defs = schema.get("$defs")
    if not isinstance(defs, dict) or not set(defs) & _LANGCHAIN_MESSAGES:
        return schema
    properties = dict(schema.get("properties") or {})
    for key, prop in properties.items():
        items = prop.get("items") if isinstance(prop, dict) else None
        options = (
            (items.get("oneOf") or items.get("anyOf") or []) if isinstance(items, dict) else []
        )
        refs = {str(o.get("$ref", "")).removeprefix("#/$defs/") for o in options}
        if prop.get("type") == "array" and refs & _LANGCHAIN_MESSAGES:
            properties[key] = {
                "type": "string",
                "title": prop.get("title", key),
                "description": "The user message to send to the agent.",
            }
    kept = {k: v for k, v in defs.items() if k not in _LANGCHAIN_DEFS}
    out = {**schema, "properties": properties}
    if kept:
        out["$defs"] = kept
    else:
        out.pop("$defs", None)
    return out


async def _input_schema(caller: Caller, assistant: JSONObject) -> JSONObject:
    schemas = await get_schemas(
        caller.state.assistants,
        tenant_id=caller.tenant_id,
        assistant_id=assistant["assistant_id"],
        graphs=caller.state.graphs,
    )
    schema = schemas.input_schema
    # MCP requires an object schema at the root (a graph without one takes any object)
    if not isinstance(schema, dict) or schema.get("type") not in (None, "object"):
        return dict(_ANY_OBJECT)
    return {"type": "object", **simplify_messages_schema(schema)}


async def list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    caller = await _caller(ctx)
    tools = []
    for name, assistant in tool_names(await shared.list_assistants(caller)).items():
        tools.append(
            types.Tool(
                name=name,
                title=str(assistant["name"]),
                description=shared.graph_description(caller, assistant),
                input_schema=await _input_schema(caller, assistant),
                annotations=_ANNOTATIONS,
                _meta={"assistant_id": assistant["assistant_id"]},
            )
        )
    return types.ListToolsResult(tools=tools)


def _tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _thread_id(params: types.CallToolRequestParams) -> str | None:
    meta = params.meta or {}
    value = meta.get(THREAD_META_KEY)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValidationFailed("_meta.thread_id must be a string")
    return value


READ_ONLY_CALL = "read-only credentials: tools/call runs a graph and needs the write scope"


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    caller = await _caller(ctx)
    if caller.principal.read_only:
        # POST /mcp passes the auth middleware's read-only check (app/api/auth.py): the
        # JSON-RPC method is what writes, refused here before anything runs
        raise MCPError(types.INVALID_REQUEST, READ_ONLY_CALL)
    if caller.state.graphs.has(params.name):
        assistant_id = system_assistant_id(params.name)
    else:
        assistant = tool_names(await shared.list_assistants(caller)).get(params.name)
        if assistant is None:
            # another tenant's assistant is as unknown as one that does not exist
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        assistant_id = assistant["assistant_id"]
    try:
        thread_id = _thread_id(params)
        run = await shared.start_run(
            caller,
            assistant_id=assistant_id,
            thread_id=thread_id,
            input=params.arguments or {},
        )
    except AppError as exc:
        return _tool_error(exc.detail)
    # MCPEndpoint cancels it if the client goes away before the answer
    ctx.request.scope["state"].setdefault(_STARTED, []).append((caller, run))
    # Cancelled here only when the server stops: the run goes on (another worker resumes it),
    # as a REST runs/wait's does
    output = await shared.run_output(caller, run)
    if shared.ERROR_KEY in output:
        return _tool_error(shared.error_text(output))
    text = orjson.dumps(output, option=orjson.OPT_NON_STR_KEYS).decode()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=output,
        # a stateless run's temporary thread is gone: only a named thread is worth returning
        _meta={"run_id": run["run_id"], **({"thread_id": thread_id} if thread_id else {})},
    )


def build_server() -> Server[Any]:
    return Server(
        "graphkeep",
        version=__version__,
        instructions="Each tool runs one graphkeep assistant; its arguments are the graph input.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


class MCPEndpoint:
    """The ASGI endpoint behind /mcp; its session manager lives as long as the app's lifespan."""

    def __init__(self, *, max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run a session manager while the app runs (a manager runs once: a new one each time).

        Its anyio task group lives in a task of its own: a lifespan may be entered and left
        in different tasks (pytest-asyncio fixtures do), a task group may not."""
        manager = StreamableHTTPSessionManager(
            build_server(),
            stateless=True,
            json_response=True,
            max_request_body_size=self.max_body_bytes,
        )
        started, stop = asyncio.Event(), asyncio.Event()

        async def serve() -> None:
            async with manager.run():
                self.manager = manager
                started.set()
                try:
                    await stop.wait()
                finally:
                    self.manager = None

        task = asyncio.create_task(serve(), name="gk-mcp-sessions")
        ready = asyncio.create_task(started.wait())
        await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if task.done():
            task.result()  # it failed to start: say why
        try:
            yield
        finally:
            stop.set()
            await task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self.manager
        state = scope["app"].state.graphkeep
        if manager is None or shared.switched_off(state, shared.DISABLE_MCP):
            await JSONResponse({"detail": "Not Found"}, status_code=404)(scope, receive, send)
            return
        await self._serve(manager, state, scope, receive, send)

    async def _serve(
        self,
        manager: StreamableHTTPSessionManager,
        state: Any,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """Serve the request; if the client goes away first, cancel the runs it started.

        A stateless JSON answer has nothing else to notice it (a `notifications/cancelled`
        could not reach the request it names), and a graph may run for long."""
        started: list[tuple[Caller, JSONObject]] = []
        scope.setdefault("state", {})[_STARTED] = started
        body_read = asyncio.Event()

        async def reading() -> Message:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body"):
                body_read.set()
            return message

        async def disconnected() -> None:
            await body_read.wait()
            while (await receive())["type"] != "http.disconnect":
                pass

        handler = asyncio.ensure_future(manager.handle_request(scope, reading, send))
        watcher = asyncio.ensure_future(disconnected())
        try:
            await asyncio.wait({handler, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
        if not handler.done():
            # ended runs are left alone by cancel_quietly
            for caller, run in started:
                state.spawn(shared.cancel_quietly(caller, run), name="gk-mcp-disconnect")
        await handler


def wrap_lifespan(
    inner: Callable[[Any], contextlib.AbstractAsyncContextManager[Any]],
    endpoint: MCPEndpoint,
) -> Callable[[Any], contextlib.AbstractAsyncContextManager[Any]]:
    """The app's lifespan with the MCP session manager running inside it."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with inner(app) as value, endpoint.running():
            yield value

    return lifespan
