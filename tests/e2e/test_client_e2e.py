"""graphkeep_client against a live `graphkeep serve` (example graphs, SQLite temp file).

One server per module on a free loopback port (plus one with the slow run-engine test graphs).
The examples/ scripts run against it too. The stream resume tests put a TCP proxy in front
that drops the first run stream in the middle of an event, so the client's reconnect with
Last-Event-ID runs against the real join-stream endpoint, once after the run ended and once
while it still runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphkeep_client import (
    AsyncClient,
    Checkpoint,
    Client,
    Command,
    Conflict,
    InvalidInput,
    NotFound,
    StreamEvent,
)
from tests.e2e.runs_server import ROOT, serve

pytestmark = pytest.mark.e2e

EXAMPLES = ROOT / "app" / "examples" / "langgraph.json"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp: Path = tmp_path_factory.mktemp("client_e2e")
    db_url = f"sqlite+aiosqlite:///{tmp / 'client.db'}"
    with serve(db_url, tmp, workers=2, env={"GRAPHKEEP_CONFIG_FILE": str(EXAMPLES)}) as proc:
        assert proc.url is not None
        yield proc.url


@pytest.fixture(scope="module")
def slow_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server with the run-engine test graphs (`steps` sleeps in its middle node)."""
    tmp: Path = tmp_path_factory.mktemp("client_e2e_slow")
    with serve(f"sqlite+aiosqlite:///{tmp / 'slow.db'}", tmp, workers=1) as proc:
        assert proc.url is not None
        yield proc.url


@pytest.fixture
def client(url: str) -> Iterator[Client]:
    with Client(url, max_retries=1, backoff=0.05) as c:
        yield c


def human(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


def test_health_and_info(client: Client) -> None:
    assert client.health().ok is True
    info = client.info()
    assert info.version and info.flags["assistants"] is True


def test_assistant_lifecycle_with_versions(client: Client) -> None:
    tag = uuid.uuid4().hex
    created = client.assistants.create("agent", name="a", metadata={"tag": tag})
    assert (created.graph_id, created.version) == ("agent", 1)
    assert client.assistants.get(created.assistant_id) == created

    updated = client.assistants.update(created.assistant_id, name="b", metadata={"more": 1})
    assert (updated.version, updated.name) == (2, "b")
    assert updated.metadata == {"tag": tag, "more": 1}
    assert [v.version for v in client.assistants.versions(created.assistant_id)] == [2, 1]
    assert client.assistants.set_latest(created.assistant_id, 1).name == "a"

    assert [a.assistant_id for a in client.assistants.search(metadata={"tag": tag})] == [
        created.assistant_id
    ]
    assert client.assistants.count(metadata={"tag": tag}) == 1
    with pytest.raises(Conflict):
        client.assistants.create("agent", assistant_id=created.assistant_id)
    same = client.assistants.create(
        "agent", assistant_id=created.assistant_id, if_exists="do_nothing"
    )
    assert same.assistant_id == created.assistant_id

    client.assistants.delete(created.assistant_id)
    with pytest.raises(NotFound) as info:
        client.assistants.get(created.assistant_id)
    assert info.value.status == 404 and info.value.detail


def test_thread_lifecycle(client: Client) -> None:
    tag = uuid.uuid4().hex
    thread = client.threads.create(metadata={"tag": tag})
    assert thread.status == "idle" and thread.metadata == {"tag": tag}
    assert client.threads.update(thread.thread_id, metadata={"n": 1}).metadata == {
        "tag": tag,
        "n": 1,
    }
    copy = client.threads.copy(thread.thread_id)
    assert copy.thread_id != thread.thread_id and copy.metadata["tag"] == tag
    found = {t.thread_id for t in client.threads.search(metadata={"tag": tag})}
    assert found == {thread.thread_id, copy.thread_id}
    assert client.threads.count(metadata={"tag": tag}) == 2
    assert client.threads.prune([copy.thread_id]) == 1
    client.threads.delete(thread.thread_id)
    with pytest.raises(NotFound):
        client.threads.get(thread.thread_id)
    with pytest.raises(InvalidInput):
        client.threads.get("not-a-uuid")


def test_store_remember_a_fact(client: Client) -> None:
    ns = ("users", uuid.uuid4().hex, "facts")
    client.store.put(ns, "tea", {"text": "likes green tea", "kind": "preference"})
    client.store.put(ns, "city", {"text": "lives in Lyon", "kind": "place"}, ttl=60)
    item = client.store.get(ns, "tea")
    assert item is not None and item.value["text"] == "likes green tea"
    assert item.namespace == ns and item.created_at is not None
    assert [i.key for i in client.store.search(ns[:2], filter={"kind": "place"})] == ["city"]
    assert ns in client.store.list_namespaces(prefix=ns[:2])
    client.store.delete(ns, "tea")
    assert client.store.get(ns, "tea") is None
    client.store.delete(ns, "tea")  # deleting twice is fine


def test_chat_stream_then_join(client: Client) -> None:
    thread = client.threads.create()
    stream = client.runs.stream(
        thread.thread_id, "agent", input=human("hello"), stream_mode=["values", "messages"]
    )
    events = list(stream)
    assert events[0].run_metadata is not None and stream.run_id == events[0].run_metadata.run_id
    partial = [
        e.messages[0]["content"] for e in events if e.event == "messages/partial" and e.messages
    ]
    assert partial and partial[-1] == "You said: hello"
    final = [e.values for e in events if e.values is not None][-1]
    assert final["messages"][-1]["content"] == "You said: hello"

    assert stream.run_id is not None
    run = client.runs.get(thread.thread_id, stream.run_id)
    assert run.status == "success" and run.done
    assert client.runs.join(thread.thread_id, stream.run_id)["messages"][-1]["content"] == (
        "You said: hello"
    )
    assert [r.run_id for r in client.runs.list(thread.thread_id)] == [stream.run_id]
    assert client.threads.get(thread.thread_id).status == "idle"


def test_approve_an_interrupt(client: Client) -> None:
    thread = client.threads.create()
    paused = client.runs.wait(thread.thread_id, "approval", input={"request": "deploy"})
    assert paused["__interrupt__"][0]["value"]["proposal"] == "execute: deploy"
    state = client.threads.get_state(thread.thread_id)
    assert state.next == ["review"] and state.interrupts[0].value["question"]
    assert client.threads.get(thread.thread_id).status == "interrupted"

    done = client.runs.wait(thread.thread_id, "approval", command=Command(resume=True))
    assert done["result"] == "done: execute: deploy"
    assert client.threads.get_state(thread.thread_id).next == []


def test_fork_from_history(client: Client) -> None:
    # Fork 1: a chat, forked after the first turn with a different second message.
    chat = client.threads.create()
    client.runs.wait(chat.thread_id, "agent", input=human("first"))
    client.runs.wait(chat.thread_id, "agent", input=human("second"))
    after_first = next(
        s
        for s in client.threads.get_history(chat.thread_id, limit=20)
        if len(s.values.get("messages", [])) == 2
    )
    assert after_first.checkpoint is not None
    forked_chat = client.runs.wait(
        chat.thread_id, "agent", input=human("other"), checkpoint=after_first.checkpoint
    )
    assert [m["content"] for m in forked_chat["messages"]] == [
        "first",
        "You said: first",
        "other",
        "You said: other",
    ]

    # Fork 2: write state as if `review` had answered differently, then continue from there.
    thread = client.threads.create()
    client.runs.wait(thread.thread_id, "approval", input={"request": "deploy"})
    client.runs.wait(thread.thread_id, "approval", command=Command(resume=True))
    history = client.threads.get_history(thread.thread_id, limit=20)
    assert history[0].values["result"] == "done: execute: deploy"
    at_review = next(s for s in history if s.next == ["review"])
    assert at_review.checkpoint is not None
    fork = client.threads.update_state(
        thread.thread_id, {"approved": False}, as_node="review", checkpoint=at_review.checkpoint
    )
    assert isinstance(fork, Checkpoint) and fork.checkpoint_id
    forked = client.threads.get_state(thread.thread_id, checkpoint=fork)
    assert forked.next == ["execute"]
    assert forked.parent_checkpoint is not None
    assert forked.parent_checkpoint.checkpoint_id == at_review.checkpoint.checkpoint_id
    assert client.runs.wait(thread.thread_id, "approval", input=None)["result"] == "rejected"


def test_run_errors_and_cancel(client: Client) -> None:
    missing = str(uuid.uuid4())
    with pytest.raises(NotFound):
        client.runs.wait(missing, "agent", input=human("x"))
    with pytest.raises(NotFound):
        client.runs.create(None, "no-such-graph", input={})

    thread = client.threads.create()
    later = client.runs.create(thread.thread_id, "agent", input=human("x"), after_seconds=60)
    assert later.status == "pending"
    with pytest.raises(Conflict):
        client.runs.create(thread.thread_id, "agent", input={}, multitask_strategy="reject")
    client.runs.cancel(thread.thread_id, later.run_id)
    assert client.runs.get(thread.thread_id, later.run_id).status == "interrupted"
    with pytest.raises(NotFound):  # nothing left to cancel
        client.runs.cancel(thread.thread_id, later.run_id)


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("chat.py", "agent: You said: Hello there"),
        ("approve_interrupt.py", "approved -> done: execute: deploy v2"),
        ("fork_from_history.py", "'Actually, juice', 'You said: Actually, juice'"),
        ("remember_fact.py", "My dog is called Rex"),
    ],
)
def test_examples_run(url: str, script: str, expected: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), "--url", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout


async def test_stream_cut_mid_way_resumes_exactly_once(url: str) -> None:
    """The run has finished by the time the client is back: the rest comes from the replay."""
    async with _CuttingProxy(url, cut_in_event=4) as proxy:
        async with AsyncClient(proxy.url, backoff=0.05) as client:
            thread = await client.threads.create()
            stream = client.runs.stream(
                thread.thread_id,
                "agent",
                input=human("resume me please"),
                stream_mode=["values", "messages"],
                stream_resumable=True,
            )
            got = [event async for event in stream]
            assert stream.run_id is not None
            replay = client.runs.join_stream(thread.thread_id, stream.run_id, last_event_id="-1")
            everything = [event async for event in replay]
    assert proxy.cuts == 1 and stream.reconnects >= 1
    assert_exactly_once(got, everything)
    assert got[-1].values is not None


async def test_stream_cut_while_the_run_is_running(slow_url: str) -> None:
    """The client is back while the run still runs: replay, then live events."""
    async with _CuttingProxy(slow_url, cut_in_event=3) as proxy:
        async with AsyncClient(proxy.url, backoff=0.05) as client:
            thread = await client.threads.create()
            stream = client.runs.stream(
                thread.thread_id, "steps", input={"sleep": 1.0}, stream_resumable=True
            )
            got = [event async for event in stream]
            assert stream.run_id is not None
            run = await client.runs.get(thread.thread_id, stream.run_id)
            replay = client.runs.join_stream(thread.thread_id, stream.run_id, last_event_id="-1")
            everything = [event async for event in replay]
    assert proxy.cuts == 1 and stream.reconnects >= 1
    assert run.status == "success"
    assert_exactly_once(got, everything)
    assert [e.values["trail"] for e in got if e.values is not None][-1] == ["a", "b", "c"]


def assert_exactly_once(got: list[StreamEvent], everything: list[StreamEvent]) -> None:
    ids = [e.id for e in got]
    assert None not in ids and len(ids) == len(set(ids))  # nothing twice
    assert [(e.event, e.data, e.id) for e in got] == [
        (e.event, e.data, e.id) for e in everything
    ]  # nothing lost, same order


class _CuttingProxy:
    """TCP proxy in front of the server that hard-drops the first event-stream connection
    in the middle of its `cut_in_event`-th event; every other connection passes untouched."""

    def __init__(self, upstream_url: str, *, cut_in_event: int) -> None:
        host, port = upstream_url.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        self._cut_in_event = cut_in_event
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.cuts = 0
        self.url = ""

    async def __aenter__(self) -> _CuttingProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await task
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        try:
            await asyncio.gather(
                self._pipe(reader, up_writer), self._pipe(up_reader, writer, downstream=True)
            )
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (writer, up_writer):
                w.close()
            self._tasks.discard(task)

    async def _pipe(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, *, downstream: bool = False
    ) -> None:
        seen = b""  # what this connection sent downstream so far, while it may be cut
        while chunk := await src.read(512):
            if downstream and self.cuts == 0:
                seen += chunk
                if (
                    b"text/event-stream" in seen
                    and (cut := _nth(seen, b"event: ", self._cut_in_event)) is not None
                ):
                    self.cuts += 1
                    dst.write(chunk[: len(chunk) - (len(seen) - cut - 10)])
                    await dst.drain()
                    dst.transport.abort()  # a hard drop in the middle of an event
                    return
            dst.write(chunk)
            await dst.drain()
        with contextlib.suppress(OSError):
            dst.write_eof()


def _nth(data: bytes, needle: bytes, n: int) -> int | None:
    """Offset of the n-th occurrence of `needle` in `data` (n >= 1), if there are that many."""
    at = -1
    for _ in range(n):
        at = data.find(needle, at + 1)
        if at == -1:
            return None
    return at
