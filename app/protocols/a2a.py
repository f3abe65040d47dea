"""A2A at /a2a/{assistant_id} (JSON-RPC 2.0) and the agent cards, on the `a2a-sdk` server pieces.

The SDK's JSON-RPC dispatcher parses and answers the protocol (both A2A 1.0 method names and,
through its v0.3 adapter, `message/send`, `message/stream`, `tasks/get`, `tasks/cancel`);
this module is its `RequestHandler`, which runs the assistant through the run service
(app/protocols/a2a_tasks.py has the mapping). Tasks are runs and contexts are threads, so
nothing is kept in memory: any replica answers any request. A message without contextId gets
a new persisted thread, as on the official server (langgraph-api's message/send creates its
run with `if_not_exists="create"` on a fresh uuid): the answer's contextId must continue the
conversation, so a stateless run (cheaper, its thread deleted at its end) cannot serve it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONParseError, JSONRPCError
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    HTTPAuthSecurityScheme,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app import __version__
from app.assistants.service import resolve_assistant_id
from app.db.storable import NOT_UTF8, body_problem
from app.errors import AppError, NotFound, ValidationFailed
from app.protocols import shared
from app.protocols.a2a_tasks import (
    TASK_KEY,
    MessageInput,
    echo_user_message,
    ended_task,
    no_internals,
    task_id_of,
    task_of,
    token_artifact,
)
from app.protocols.shared import Caller, JSONObject
from app.statuses import ACTIVE_RUN_STATUSES as ACTIVE_STATUSES
from app.statuses import RunStatus, ThreadStatus
from app.threads.service import new_thread_id

A2A_PATH = "/a2a/{assistant_id}"
CARD_NAME = ".well-known/agent-card.json"
_CALLER = "graphkeep.protocols.caller"
_ASSISTANT = "graphkeep.protocols.assistant_id"
# How long tasks/cancel waits for the run to stop before answering with its state then
_CANCEL_WAIT_SECONDS = 30.0
_MODES = ["text/plain", "application/json"]
# How many of a thread's newest runs are searched for the latest run of a resumed task
_TASK_RUNS = 100


# The SDK's dispatcher logs every client mistake: a warning per error answer and a traceback
# for a frame it cannot parse, both quoting what the client sent. Those are the client's
# errors (answered with the protocol's error object), not the server's, and logs never carry
# request content; an unexpected failure (an ERROR with another message) still gets through.
_CLIENT_MISTAKES = frozenset(
    {"Failed to validate base JSON-RPC request", "Failed to parse request params"}
)


class _QuietClientMistakes(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR and record.msg not in _CLIENT_MISTAKES


def quiet_sdk_logs() -> None:
    sdk = logging.getLogger("a2a.server.routes.jsonrpc_dispatcher")
    if not any(isinstance(f, _QuietClientMistakes) for f in sdk.filters):
        sdk.addFilter(_QuietClientMistakes())


class _ContextBuilder(DefaultServerCallContextBuilder):
    """Carries the authenticated caller and the path's assistant into the handler."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[_CALLER] = request.scope["state"][_CALLER]
        context.state[_ASSISTANT] = request.path_params["assistant_id"]
        return context


def _target(context: ServerCallContext) -> tuple[Caller, str]:
    """The caller and the path's assistant id, resolved without a query: the run service
    checks that the tenant may run it, and a task of another assistant is not found."""
    caller: Caller = context.state[_CALLER]
    assistant_id: str = context.state[_ASSISTANT]
    try:
        return caller, resolve_assistant_id(assistant_id, graphs=caller.state.graphs)
    except ValidationFailed:
        raise InvalidParamsError(message=f"Assistant '{assistant_id}' not found") from None


async def _run_of(caller: Caller, assistant_id: str, task_id: str) -> JSONObject:
    """The run behind a task id of this assistant, or TaskNotFoundError."""
    try:
        found = await caller.runs.get(tenant_id=caller.tenant_id, thread_id=None, run_id=task_id)
    except (NotFound, ValidationFailed):
        raise TaskNotFoundError(message=f"Task {task_id} not found") from None
    run = found.to_json()
    if run["assistant_id"] != assistant_id:
        raise TaskNotFoundError(message=f"Task {task_id} not found")
    return run


async def _task_run(caller: Caller, assistant_id: str, task_id: str) -> JSONObject:
    """The newest run of a task: the run `task_id` names, or, when it is a task's first run,
    the last run that resumed that task (the task keeps its first run's id)."""
    run = await _run_of(caller, assistant_id, task_id)
    if task_id_of(run) != run["run_id"] or run["status"] != RunStatus.SUCCESS:
        return run  # a resumed run itself, or a task that never asked for input
    try:
        newer = await caller.runs.list_runs(
            tenant_id=caller.tenant_id,
            thread_id=run["thread_id"],
            limit=_TASK_RUNS,
            offset=0,
            status=None,
        )
    except NotFound:
        return run
    for candidate in (r.to_json() for r in newer):  # newest first
        if task_id_of(candidate) == run["run_id"]:
            return candidate
    return run


async def _ended(
    caller: Caller, run: JSONObject, output: JSONObject, history: list[Message]
) -> Task:
    # An error or an interrupt in the output already decides the task's state (a cancel
    # leaves neither); only plain values need the status, which tells a cancelled run
    # (its output is the values it reached) from a finished one: one read fewer otherwise.
    if shared.ERROR_KEY in output or output.get(shared.INTERRUPT_KEY):
        return ended_task({**run, "status": None}, output, history)
    latest = await caller.runs.get(tenant_id=caller.tenant_id, thread_id=None, run_id=run["run_id"])
    return ended_task(latest.to_json(), output, history)


class GraphkeepRequestHandler(RequestHandler):
    """A2A requests on graphkeep runs (see the module docstring)."""

    async def _start(
        self, params: SendMessageRequest, context: ServerCallContext, *, tokens: bool = False
    ) -> tuple[Caller, JSONObject, Message]:
        caller, assistant_id = _target(context)
        if not params.HasField("message"):
            raise InvalidParamsError(message="params.message is required")
        message = params.message
        said = MessageInput(message)
        thread_id = message.context_id or None
        metadata: JSONObject = {}
        if message.task_id:
            prior = await _run_of(caller, assistant_id, message.task_id)
            if thread_id is not None and thread_id != prior["thread_id"]:
                raise InvalidParamsError(message="taskId belongs to another contextId")
            thread_id = prior["thread_id"]
            metadata[TASK_KEY] = task_id_of(prior)
        command: JSONObject | None = None
        if thread_id is not None:
            try:
                thread = await shared.thread_of(caller, thread_id)
            except ValidationFailed:
                raise InvalidParamsError(message="contextId must be a UUID") from None
            if message.task_id and (
                thread is None or thread.status != ThreadStatus.INTERRUPTED.value
            ):
                raise UnsupportedOperationError(
                    message=f"Task {message.task_id} is not waiting for input; "
                    "send a new message without taskId"
                )
            if thread is not None and thread.status == ThreadStatus.INTERRUPTED.value:
                command = {"resume": said.resume_value()}
        try:
            run = await shared.start_run(
                caller,
                assistant_id=assistant_id,
                thread_id=thread_id or new_thread_id(),
                input=None if command is not None else said.graph_input(),
                command=command,
                metadata=metadata,
                stream_mode=shared.TOKEN_STREAM_MODES if tokens else None,
            )
        except AppError as exc:  # e.g. "Thread or assistant not found." (or another tenant's)
            raise InvalidParamsError(message=exc.detail) from None
        return caller, run, echo_user_message(message, run)

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        with no_internals():
            caller, run, said = await self._start(params, context)
            if params.configuration.return_immediately:
                return task_of(run, state=TaskState.TASK_STATE_SUBMITTED, history=[said])
            output = await shared.run_output(caller, run)
            return await _ended(caller, run, output, [said])

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        with no_internals():
            async for event in self._stream(params, context):
                yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        with no_internals():
            return await self._get_task(params, context)

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        with no_internals():
            return await self._cancel_task(params, context)

    async def _stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        caller, run, said = await self._start(params, context, tokens=True)
        ids = {"task_id": task_id_of(run), "context_id": run["thread_id"]}
        yield task_of(run, state=TaskState.TASK_STATE_SUBMITTED, history=[said])
        yield TaskStatusUpdateEvent(**ids, status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
        # the model's tokens as they come, appended to one `stream` artifact; the run's
        # output follows as the `result` artifact (the whole reply and the state)
        output: JSONObject = {}
        first = True
        async for item in shared.stream_output(caller, run):
            if isinstance(item, dict):
                output = item
                continue
            yield TaskArtifactUpdateEvent(
                **ids, artifact=token_artifact(run, item), append=not first, last_chunk=False
            )
            first = False
        task = await _ended(caller, run, output, [said])
        for artifact in task.artifacts:
            yield TaskArtifactUpdateEvent(**ids, artifact=artifact, last_chunk=True)
        yield TaskStatusUpdateEvent(**ids, status=task.status)

    async def _get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        caller, assistant_id = _target(context)
        run = await _task_run(caller, assistant_id, params.id)
        if run["status"] == RunStatus.PENDING:
            return task_of(run, state=TaskState.TASK_STATE_SUBMITTED)
        if run["status"] == RunStatus.RUNNING:
            return task_of(run, state=TaskState.TASK_STATE_WORKING)
        output = await caller.runs.thread_output(
            tenant_id=caller.tenant_id, thread_id=run["thread_id"]
        )
        return ended_task(run, output, None)

    async def _cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        caller, assistant_id = _target(context)
        run = await _task_run(caller, assistant_id, params.id)
        if run["status"] not in ACTIVE_STATUSES:
            raise TaskNotCancelableError(message=f"Task {params.id} has already ended")
        try:
            await caller.runs.cancel(
                tenant_id=caller.tenant_id,
                thread_id=run["thread_id"],
                run_id=run["run_id"],
                action="interrupt",
            )
        except NotFound:
            raise TaskNotCancelableError(message=f"Task {params.id} has already ended") from None
        output: JSONObject = {}
        try:
            async with asyncio.timeout(_CANCEL_WAIT_SECONDS):
                output = await shared.run_output(caller, run, from_start=False)
        except TimeoutError:
            pass  # still stopping: the task's state says so
        return await _ended(caller, run, output, [])

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(message="tasks/list is not supported")

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Any]:
        raise UnsupportedOperationError(message="tasks/resubscribe is not supported")
        yield  # an async generator, as the interface declares

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError()


# ---------------------------------------------------------------------- agent cards


def _endpoint(base_url: str, assistant_id: str) -> str:
    return f"{base_url.rstrip('/')}/a2a/{assistant_id}"


def _interfaces(url: str) -> list[AgentInterface]:
    # one JSON-RPC endpoint answers both protocol versions (the SDK's v0.3 adapter)
    return [
        AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0"),
        AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="0.3"),
    ]


def _skill(caller: Caller, assistant: JSONObject, skill_id: str) -> AgentSkill:
    return AgentSkill(
        id=skill_id,
        name=str(assistant["name"]),
        description=shared.graph_description(caller, assistant),
        tags=["graphkeep", str(assistant["graph_id"])],
        input_modes=_MODES,
        output_modes=_MODES,
    )


def _security(caller: Caller) -> dict[str, Any]:
    """The card's auth: the REST API's own (a bearer JWT or API key, or an API key header)."""
    if caller.state.settings.auth == "none":
        return {}
    schemes = {
        "bearer": SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer", bearer_format="JWT or gk_ API key"
            )
        ),
        "apiKey": SecurityScheme(
            api_key_security_scheme=APIKeySecurityScheme(location="header", name="x-api-key")
        ),
    }
    either = [SecurityRequirement(schemes={name: StringList()}) for name in schemes]
    return {"security_schemes": schemes, "security_requirements": either}


def agent_card(caller: Caller, assistant: JSONObject, base_url: str) -> AgentCard:
    return AgentCard(
        **_security(caller),
        name=str(assistant["name"]),
        description=shared.graph_description(caller, assistant),
        version=__version__,
        supported_interfaces=_interfaces(_endpoint(base_url, assistant["assistant_id"])),
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=_MODES,
        default_output_modes=_MODES,
        skills=[_skill(caller, assistant, str(assistant["graph_id"]))],
    )


def service_card(caller: Caller, assistants: list[JSONObject], base_url: str) -> AgentCard:
    """The server's card: a skill per assistant of the caller (skill id = assistant id)."""
    interfaces = [
        AgentInterface(
            url=_endpoint(base_url, a["assistant_id"]),
            protocol_binding="JSONRPC",
            protocol_version="1.0",
        )
        for a in assistants
    ]
    return AgentCard(
        **_security(caller),
        name="graphkeep",
        description="graphkeep assistants; each one is an A2A agent at /a2a/{assistant_id}",
        version=__version__,
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=_MODES,
        default_output_modes=_MODES,
        skills=[_skill(caller, a, str(a["assistant_id"])) for a in assistants],
    )


def _not_found(detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=404)


def _switched_off(request: Request) -> bool:
    return shared.switched_off(request.app.state.graphkeep, shared.DISABLE_A2A)


async def assistant_card(request: Request) -> Response:
    """GET /a2a/{assistant_id}/.well-known/agent-card.json"""
    if _switched_off(request):
        return _not_found("Not Found")
    caller = await shared.caller_of(request)
    try:
        assistant = await shared.find_assistant(caller, request.path_params["assistant_id"])
    except NotFound as exc:
        return _not_found(exc.detail)
    return JSONResponse(agent_card_to_dict(agent_card(caller, assistant, str(request.base_url))))


async def well_known_card(request: Request) -> Response:
    """GET /.well-known/agent-card.json[?assistant_id=...] (the official server's query)."""
    if _switched_off(request):
        return _not_found("Not Found")
    caller = await shared.caller_of(request)
    base = str(request.base_url)
    wanted = request.query_params.get("assistant_id")
    if wanted:
        try:
            assistant = await shared.find_assistant(caller, wanted)
        except NotFound as exc:
            return _not_found(exc.detail)
        return JSONResponse(agent_card_to_dict(agent_card(caller, assistant, base)))
    card = service_card(caller, await shared.list_assistants(caller), base)
    return JSONResponse(agent_card_to_dict(card))


def _unstorable(body: bytes) -> A2AError | JSONRPCError | None:
    """The boundary check's verdict (`body_problem`) on a body it may not have seen: the SDK
    decodes the body as JSON whatever its content type, and HTTP's boundary check reads only
    JSON ones. Bytes that are not UTF-8 are a parse error; malformed JSON is left to the SDK's."""
    refused = body_problem(body)
    if refused is None:
        return None
    detail = refused[1]
    return (
        JSONParseError(message=detail)
        if detail == NOT_UTF8
        else InvalidRequestError(message=detail)
    )


class A2AEndpoint:
    """POST /a2a/{assistant_id}: size check, caller, then the SDK's JSON-RPC dispatcher."""

    def __init__(self, *, max_message_bytes: int) -> None:
        quiet_sdk_logs()
        self.max_message_bytes = max_message_bytes
        self.dispatcher = JsonRpcDispatcher(
            request_handler=GraphkeepRequestHandler(),
            context_builder=_ContextBuilder(),
            enable_v0_3_compat=True,
        )

    async def __call__(self, request: Request) -> Response:
        if _switched_off(request):
            return _not_found("Not Found")
        body = await request.body()  # cached: the dispatcher's request.json() reads it again
        if len(body) > self.max_message_bytes:
            error = InvalidRequestError(
                message=f"message too large: over {self.max_message_bytes} bytes"
            )
            return JSONResponse(build_error_response(None, error))
        refused = _unstorable(body)
        if refused is not None:
            return JSONResponse(build_error_response(None, refused))
        request.scope.setdefault("state", {})[_CALLER] = await shared.caller_of(request)
        return await self.dispatcher.handle_requests(request)
