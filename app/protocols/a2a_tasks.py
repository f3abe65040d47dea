"""A2A <-> graphkeep mapping: message parts to graph input, runs and outputs to A2A tasks.

A task is a run (task id = run id), a context is a thread (context id = thread id). Text parts
become one human message of the graph's `messages` input and object data parts are merged into
the input, as langgraph-api does; a message to an interrupted thread resumes it
(`Command(resume=...)`) with a data part's `resume` value, else its text, else its data.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
)
from google.protobuf import json_format, struct_pb2

from app.protocols import shared
from app.protocols.shared import JSONObject
from app.statuses import RunStatus

# a stopped run (a cancel ends a run as `interrupted`) and a failed one, whatever the output
_CANCELLED_STATUS = RunStatus.INTERRUPTED.value
_FAILED_STATUSES = frozenset({RunStatus.ERROR.value, RunStatus.TIMEOUT.value})
# A run that resumes an input-required task carries the task's id in its metadata: the task
# keeps the id of its first run across resumes (A2A tasks keep their id), and each resumed
# run is still reachable by its own run id (tasks/get answers both with the task's id).
TASK_KEY = "a2a_task_id"
STREAM_ARTIFACT = "stream"
# What an unexpected failure answers (no_internals)
INTERNAL_MESSAGE = "the server could not answer this request; retry shortly"

log = logging.getLogger(__name__)


def task_id_of(run: JSONObject) -> str:
    """The id of the A2A task the run belongs to: its first run's id."""
    metadata = run.get("metadata")
    task_id = metadata.get(TASK_KEY) if isinstance(metadata, dict) else None
    return str(task_id) if task_id else str(run["run_id"])


def _value(data: Any) -> struct_pb2.Value:
    return json_format.ParseDict(data, struct_pb2.Value())


def _plain(value: struct_pb2.Value) -> Any:
    return json_format.MessageToDict(value)


def data_part(data: Any) -> Part:
    return Part(data=_value(data), media_type="application/json")


def text_part(text: str) -> Part:
    return Part(text=text, media_type="text/plain")


class MessageInput:
    """What one A2A message says: its text and its merged object data parts."""

    def __init__(self, message: Message) -> None:
        self.message_id = message.message_id
        texts: list[str] = []
        data: JSONObject = {}
        has_data = False
        for part in message.parts:
            kind = part.WhichOneof("content")
            if kind == "text":
                texts.append(part.text)
            elif kind == "data":
                value = _plain(part.data)
                if not isinstance(value, dict):
                    raise InvalidParamsError(message="a data part must hold a JSON object")
                data.update(value)
                has_data = True
            else:
                raise ContentTypeNotSupportedError(
                    message=f"{kind or 'empty'} parts are not supported; send text or data parts"
                )
        if not texts and not has_data:
            raise InvalidParamsError(message="the message has no text or data part")
        self.text = "\n".join(texts)
        self.data = data
        self.has_text = bool(texts)
        self.has_data = has_data

    def graph_input(self) -> JSONObject:
        """The graph input: the text as a human message, data parts merged in."""
        graph_input: JSONObject = dict(self.data)
        if self.has_text:
            human = {"role": "human", "content": self.text}
            if self.message_id:
                human["id"] = self.message_id
            messages = graph_input.get("messages")
            graph_input["messages"] = [*messages, human] if isinstance(messages, list) else [human]
        return graph_input

    def resume_value(self) -> Any:
        """The answer to an interrupt: a data part's `resume` (as langgraph-api reads it),
        else the text, else the data parts' object."""
        if "resume" in self.data:
            return self.data["resume"]
        return self.text if self.has_text else self.data


def _agent_message(run: JSONObject, parts: list[Part]) -> Message:
    return Message(
        message_id=f"{run['run_id']}-status",
        context_id=run["thread_id"],
        task_id=task_id_of(run),
        role=Role.ROLE_AGENT,
        parts=parts,
    )


def _artifact(run: JSONObject, values: JSONObject) -> Artifact:
    parts: list[Part] = []
    text = shared.last_ai_text(values)
    if text is not None:
        parts.append(text_part(text))
    parts.append(data_part(values))
    return Artifact(artifact_id=f"{run['run_id']}-result", name="result", parts=parts)


def task_of(
    run: JSONObject,
    *,
    state: Any,
    output: JSONObject | None = None,
    history: list[Message] | None = None,
) -> Task:
    """The A2A task for a run in `state`, with its output when it has ended."""
    status = TaskStatus(state=state)
    artifacts: list[Artifact] = []
    if output is not None:
        if shared.ERROR_KEY in output:
            status = TaskStatus(
                state=TaskState.TASK_STATE_FAILED,
                message=_agent_message(run, [text_part(shared.error_text(output))]),
            )
        elif output.get(shared.INTERRUPT_KEY):
            interrupts = output[shared.INTERRUPT_KEY]
            values = [i.get("value") if isinstance(i, dict) else i for i in interrupts]
            question = values[0] if len(values) == 1 else values
            text = question if isinstance(question, str) else None
            if isinstance(question, dict) and isinstance(question.get("question"), str):
                text = question["question"]
            parts = ([text_part(text)] if text else []) + [data_part({"interrupts": interrupts})]
            status = TaskStatus(
                state=TaskState.TASK_STATE_INPUT_REQUIRED, message=_agent_message(run, parts)
            )
        elif state == TaskState.TASK_STATE_COMPLETED:
            artifacts.append(_artifact(run, output))
    return Task(
        id=task_id_of(run),
        context_id=run["thread_id"],
        status=status,
        artifacts=artifacts,
        history=history or [],
        metadata=_value(
            {"assistant_id": run["assistant_id"], "run_id": run["run_id"]}
        ).struct_value,
    )


def ended_task(run: JSONObject, output: JSONObject, history: list[Message] | None) -> Task:
    """The task of a run that has finished with `output` (run_output / thread output): its
    state comes from the run's status, its messages and artifacts from the output."""
    status = run.get("status")
    if status == _CANCELLED_STATUS:
        return task_of(run, state=TaskState.TASK_STATE_CANCELED, history=history)
    if status in _FAILED_STATUSES and shared.ERROR_KEY not in output:
        output = {shared.ERROR_KEY: {"error": status, "message": f"the run ended in {status}"}}
    return task_of(run, state=TaskState.TASK_STATE_COMPLETED, output=output, history=history)


def token_artifact(run: JSONObject, text: str) -> Artifact:
    """One streamed token of the run's AI reply, appended to the `stream` artifact."""
    return Artifact(
        artifact_id=f"{run['run_id']}-{STREAM_ARTIFACT}",
        name=STREAM_ARTIFACT,
        parts=[text_part(text)],
    )


def echo_user_message(message: Message, run: JSONObject) -> Message:
    """The caller's message as it belongs to the task (history)."""
    copy = Message()
    copy.CopyFrom(message)
    copy.task_id = task_id_of(run)
    copy.context_id = run["thread_id"]
    if not copy.message_id:
        copy.message_id = f"{run['run_id']}-input"
    copy.role = Role.ROLE_USER
    return copy


@contextlib.contextmanager
def no_internals() -> Iterator[None]:
    """An unexpected failure (the database refusing connections, a bug) answers the protocol's
    InternalError (-32603) with a fixed message: the SDK would answer with the exception's
    text (driver messages, SQL; a loaded bench got asyncpg's "too many clients" with code 0)."""
    try:
        yield
    except A2AError:
        raise
    except Exception:
        log.exception("an A2A request failed")
        raise InternalError(message=INTERNAL_MESSAGE) from None
