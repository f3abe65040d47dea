"""graphkeep_client: a thin, typed client for graphkeep (sync `Client`, async `AsyncClient`).

from graphkeep_client import Client

with Client("http://127.0.0.1:8123") as client:
    thread = client.threads.create()
    for event in client.runs.stream(thread.thread_id, "agent", input={...}):
        print(event.event, event.data)
"""

from ._async._client import AsyncClient
from ._async._streams import AsyncRunStream
from ._async._thread_stream import AsyncThreadEvents, AsyncThreadStream
from ._errors import (
    APIError,
    Conflict,
    Forbidden,
    GraphkeepError,
    InvalidInput,
    NotFound,
    ProtocolError,
    RateLimited,
    ResumeGap,
    RunFailed,
    ServerError,
    ThreadStreamError,
    TransportError,
    Unauthorized,
)
from ._models import (
    Assistant,
    Checkpoint,
    Command,
    Cron,
    Health,
    Interrupt,
    Item,
    Run,
    RunStatus,
    ServerInfo,
    Thread,
    ThreadState,
    ThreadStatus,
    ThreadTask,
)
from ._payloads import RunOptions
from ._streams import RunMetadata, StreamError, StreamEvent
from ._sync._client import Client
from ._sync._streams import RunStream
from ._sync._thread_stream import ThreadEvents, ThreadStream

__version__ = "0.1.0"

__all__ = [
    "APIError",
    "Assistant",
    "AsyncClient",
    "AsyncRunStream",
    "AsyncThreadEvents",
    "AsyncThreadStream",
    "Checkpoint",
    "Client",
    "Command",
    "Conflict",
    "Cron",
    "Forbidden",
    "GraphkeepError",
    "Health",
    "Interrupt",
    "InvalidInput",
    "Item",
    "NotFound",
    "ProtocolError",
    "RateLimited",
    "ResumeGap",
    "Run",
    "RunFailed",
    "RunMetadata",
    "RunOptions",
    "RunStatus",
    "RunStream",
    "ServerError",
    "ServerInfo",
    "StreamError",
    "StreamEvent",
    "Thread",
    "ThreadState",
    "ThreadStatus",
    "ThreadEvents",
    "ThreadStream",
    "ThreadStreamError",
    "ThreadTask",
    "TransportError",
    "Unauthorized",
    "__version__",
]
