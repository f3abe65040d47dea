"""The JS `useStream` hook (@langchain/react, pinned in tests/js/package-lock.json) against a
live `graphkeep serve` on SQLite and PostgreSQL, over SSE and over WebSocket, unchanged.

tests/js/use_stream_check.mjs renders a real React component calling `useStream` into a jsdom
document and prints what it rendered and what crossed the wire; this module asserts it, and
checks the server's side of each thread. Node 20+ and npm: skipped locally without them, a
failure under CI=true (scripts/test installs Debian's nodejs and npm there). `npm ci` runs from
the committed lock whenever tests/js/node_modules is missing or was installed from another lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx
import pytest

from tests.conftest import drop_pg_database
from tests.e2e.runs_fixtures import fresh_database
from tests.e2e.runs_server import ROOT, serve

pytestmark = pytest.mark.e2e

JS = ROOT / "tests" / "js"
LOCK = JS / "package-lock.json"
STAMP = JS / "node_modules" / ".graphkeep-lock.sha256"
TRANSPORTS = ["sse", "websocket"]
CHAT = [{"type": "human", "text": "hi there"}, {"type": "ai", "text": "echo hi there"}]


NODE_MAJOR = 20  # the pinned @langchain packages' engines (they do not load on Node 18)


def _missing(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: required in CI (scripts/test installs Debian's nodejs and npm)")
    pytest.skip(reason)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        _missing(f"{name} not installed")
    return path


def _node() -> str:
    node = _tool("node")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    major = int(version.stdout.strip().lstrip("v").split(".")[0])
    if major < NODE_MAJOR:
        # Debian 12's nodejs is 18; Debian 13's is 20
        _missing(f"node {version.stdout.strip()} is older than {NODE_MAJOR}")
    return node


def _lock_digest() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((JS / name).read_bytes())
    return digest.hexdigest()


def ensure_node_modules() -> str:
    """node's path, with tests/js/node_modules installed from the committed lock (`npm ci`
    only when missing or stale, so a checkout that has it needs no network)."""
    node, npm = _node(), _tool("npm")
    want = _lock_digest()
    if not (STAMP.exists() and STAMP.read_text().strip() == want):
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=JS,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        STAMP.write_text(want + "\n")
    return node


@dataclass
class Checked:
    url: str
    result: dict[str, Any]

    def scenario(self, transport: str, name: str) -> dict[str, Any]:
        got = self.result["transports"][transport][name]
        assert "failure" not in got, got["failure"]
        return dict(got)

    def get(self, path: str) -> Any:
        response = httpx.get(f"{self.url}{path}", timeout=30)
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture(
    scope="module",
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def checked(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Checked]:
    node = ensure_node_modules()
    dialect = str(request.param)
    tmp = tmp_path_factory.mktemp(f"js_use_stream_{dialect}")
    db_url = fresh_database(dialect, tmp)
    try:
        # auth off: a browser WebSocket cannot send headers, and useStream refuses
        # defaultHeaders on its WebSocket transport
        with serve(db_url, tmp, workers=2) as proc:
            assert proc.url is not None
            done = subprocess.run(
                [node, "use_stream_check.mjs", "--url", proc.url, "--timeout", "30000"],
                cwd=JS,
                capture_output=True,
                text=True,
                timeout=300,
            )
            # exit 1 with a result: some scenario failed, and its test says which and why
            assert done.returncode in (0, 1) and done.stdout.strip(), done.stderr[-4000:]
            yield Checked(proc.url, json.loads(done.stdout))
    finally:
        if dialect == "postgres":
            drop_pg_database(db_url)


def _chain_of_prefixes(texts: list[str]) -> bool:
    return all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))


def _distinct(items: list[Any]) -> list[Any]:
    return [v for i, v in enumerate(items) if i == 0 or v != items[i - 1]]


def _wire_ok(wire: dict[str, Any], *, transport: str, connections: int = 1) -> None:
    # each stream the hook opened delivered in seq order without repeats; an event seen on
    # two streams is the same event
    assert wire["per_stream_in_order"] and wire["same_id_same_event"], wire
    assert wire["events"] == wire["distinct_seqs"], wire
    if transport == "sse":
        # the hook's two SSE streams (content pump, lifecycle watcher) per connection: no
        # reconnect the test did not cause
        assert (wire["sse_streams"], wire["sockets"]) == (2 * connections, 0), wire
    else:
        assert (wire["sse_streams"], wire["sockets"]) == (0, connections), wire


def _commands(wire: dict[str, Any]) -> list[str]:
    """The run commands the hook sent (WebSocket subscriptions left out)."""
    return [c for c in wire["commands"] if not c.startswith("subscription.")]


def test_pinned_versions_ran(checked: Checked) -> None:
    lock = json.loads(LOCK.read_text())["packages"]
    for name, version in checked.result["versions"].items():
        assert lock[f"node_modules/{name}"]["version"] == version, name
    assert checked.result["versions"]["@langchain/react"] == "1.1.0"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_submit_streams_values_and_tokens(checked: Checked, transport: str) -> None:
    chat = checked.scenario(transport, "chat")
    assert chat["initial"] == {"threadId": None, "isLoading": False, "messages": 0}
    assert chat["loading_seen"] is True
    # the thread id is made on the first submit and reported once
    thread_id = chat["thread_id"]
    assert uuid.UUID(thread_id)
    assert chat["on_thread_id"] == [thread_id]
    assert chat["dom_thread"] == thread_id
    assert chat["messages"] == CHAT and chat["dom_messages"] == CHAT
    assert chat["dom_loading"] == "idle" and chat["error"] is None
    # the rendered reply only ever grew, to the full text
    texts = chat["ai_texts_rendered"]
    assert texts[-1] == "echo hi there" and _chain_of_prefixes(texts), texts
    if transport == "sse":
        # frames handed to the hook one at a time (the check paces them): the component
        # rendered the reply part-way, from `messages` deltas, before it was whole (how many
        # renders is React's batching; over WebSocket it depends on the socket's reads)
        assert [t for t in texts if t not in ("", "echo hi there")], texts
    wire = chat["wire"]
    _wire_ok(wire, transport=transport)
    # what the server sent, replayed from the thread's log once the run ended
    server = chat["server"]
    assert server["deltas"] == ["echo", " ", "hi", " ", "there"]
    assert server["root_lifecycle"] == ["running", "completed"]
    assert server["methods"] == ["lifecycle", "messages", "values"]
    assert [len(v["messages"]) for v in server["values"]] == [1, 2]
    assert server["values"][-1]["messages"][-1]["content"][0]["text"] == "echo hi there"
    # what the hook read live: the same events, but its content stream may stop before the
    # last frames once its lifecycle watcher saw the end (the hook's choice, not the server's)
    assert wire["root_lifecycle"] == ["running", "completed"]
    assert wire["deltas"] and wire["deltas"] == server["deltas"][: len(wire["deltas"])]
    assert wire["values"] and wire["values"] == server["values"][: len(wire["values"])]
    assert _commands(wire) == ["run.start"]
    # the server's side: one ordinary, successful run of `chat` on that thread
    runs = checked.get(f"/threads/{thread_id}/runs")
    assert [r["status"] for r in runs] == ["success"]
    state = checked.get(f"/threads/{thread_id}/state")
    assert [m["type"] for m in state["values"]["messages"]] == ["human", "ai"]
    assert state["values"]["messages"][0]["content"] == "hi there"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_interrupt_then_respond(checked: Checked, transport: str) -> None:
    got = checked.scenario(transport, "interrupt")
    thread_id = got["thread_id"]
    assert uuid.UUID(thread_id) and got["on_thread_id"] == [thread_id]
    wire = got["wire"]
    _wire_ok(wire, transport=transport)
    [requested] = wire["input_requested"]
    asked = got["asked"]
    # the hook adds its (empty) messages key to every graph's values
    assert asked["values"] == {"question": "ship it?", "messages": []}
    assert asked["interrupt"] == {
        "id": requested["interrupt_id"],
        "value": {"question": "ship it?"},
    }
    assert requested["payload"] == {"question": "ship it?"}
    assert asked["interrupts"] == 1
    assert got["dom_interrupt"] == '{"question":"ship it?"}'
    assert got["done"] == {
        "values": {"question": "ship it?", "answer": "yes!", "messages": []},
        "interrupt": None,
        "interrupts": 0,
        "error": None,
    }
    assert got["dom_interrupt_after"] == ""
    assert wire["root_lifecycle"] == ["running", "interrupted", "running", "completed"]
    assert _distinct(wire["values"]) == [
        {"question": "ship it?"},
        {"question": "ship it?", "answer": "yes"},
        {"question": "ship it?", "answer": "yes!"},
    ]
    assert _commands(wire) == ["run.start", "input.respond"]
    runs = checked.get(f"/threads/{thread_id}/runs")
    assert [r["status"] for r in runs] == ["success", "success"]
    state = checked.get(f"/threads/{thread_id}/state")
    assert state["values"] == {"question": "ship it?", "answer": "yes!"} and state["next"] == []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_hydrate_finished_thread(checked: Checked, transport: str) -> None:
    chat = checked.scenario(transport, "chat")
    shown = checked.scenario(transport, "hydrate_finished")
    assert shown["thread_id"] == chat["thread_id"]
    assert shown["messages"] == CHAT and shown["dom_messages"] == CHAT
    assert shown["isLoading"] is False and shown["error"] is None
    # hydrating ran nothing
    runs = checked.get(f"/threads/{chat['thread_id']}/runs")
    assert [r["status"] for r in runs] == ["success"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_hydrate_interrupted_thread_then_respond(checked: Checked, transport: str) -> None:
    got = checked.scenario(transport, "hydrate_interrupted")
    thread_id = got["thread_id"]
    wire = got["wire"]
    _wire_ok(wire, transport=transport)
    [requested] = wire["input_requested"]
    assert got["shown"] == {
        "values": {"question": "merge it?", "messages": []},
        "interrupt": {"id": requested["interrupt_id"], "value": {"question": "merge it?"}},
        "threadId": thread_id,
        "error": None,
    }
    assert got["done"] == {
        "values": {"question": "merge it?", "answer": "no!", "messages": []},
        "interrupt": None,
        "error": None,
    }
    # the second component replayed the first run from the log, then followed the resume live
    assert wire["root_lifecycle"] == ["running", "interrupted", "running", "completed"]
    assert _commands(wire) == ["input.respond"]
    runs = checked.get(f"/threads/{thread_id}/runs")
    assert [r["status"] for r in runs] == ["success", "success"]
    state = checked.get(f"/threads/{thread_id}/state")
    assert state["values"] == {"question": "merge it?", "answer": "no!"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_reconnect_mid_run(checked: Checked, transport: str) -> None:
    got = checked.scenario(transport, "reconnect")
    thread_id = got["thread_id"]
    wire = got["wire"]
    # every stream was cut once while node b slept, and the hook opened them again itself
    assert wire["cuts"] == (2 if transport == "sse" else 1), wire
    assert wire["per_stream_in_order"] and wire["same_id_same_event"], wire
    assert wire["events"] == wire["distinct_seqs"], wire
    if transport == "sse":
        # the content pump reopened (it brought b and c); the lifecycle watcher reopens after
        # its own backoff, which on a loaded machine may come after the run ended
        assert 3 <= wire["sse_streams"] <= 4 and wire["sockets"] == 0, wire
    else:
        assert (wire["sse_streams"], wire["sockets"]) == (0, 2), wire
    start = {"tag": f"js-{transport}", "sleep": 2}
    assert got["before_cut"] == {
        "values": {**start, "trail": ["a"], "messages": []},
        "isLoading": True,
    }
    assert got["done"] == {
        "values": {**start, "trail": ["a", "b", "c"], "messages": []},
        "isLoading": False,
        "error": None,
    }
    # what the component showed only moved forward, each state at most once (whether "a,b"
    # gets a render of its own depends on when the reconnect lands: a replay after node b
    # brings "a,b" and "a,b,c" together, and React renders their end)
    trails = got["trails_rendered"]
    order = ["", "a", "a,b", "a,b,c"]
    assert trails[:2] == ["", "a"] and trails[-1] == "a,b,c", trails
    assert trails == [t for t in order if t in trails], trails
    # across the cut the streams together carried each of the run's events (one event_id, one
    # content) and nothing else; the reconnected ones replayed the log from its start
    assert wire["values"] == [
        {**start, "trail": t} for t in ([], ["a"], ["a", "b"], ["a", "b", "c"])
    ]
    assert wire["root_lifecycle"] == ["running", "completed"]
    assert _commands(wire) == ["run.start"]
    runs = checked.get(f"/threads/{thread_id}/runs")
    assert [r["status"] for r in runs] == ["success"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stop_cancels_the_run(checked: Checked, transport: str) -> None:
    got = checked.scenario(transport, "stop")
    thread_id = got["thread_id"]
    start = {"tag": f"stop-{transport}", "sleep": 5}
    assert got["stopped"] == {
        "values": {**start, "trail": ["a"], "messages": []},
        "isLoading": False,
        "error": None,
    }
    _wire_ok(got["wire"], transport=transport)
    assert got["wire"]["values"] == [{**start, "trail": []}, {**start, "trail": ["a"]}]
    # stop() cancelled the run the hook was told about (onCreated), through the classic
    # cancel route: interrupted (the default action) before node b finished
    runs = checked.get(f"/threads/{thread_id}/runs")
    assert [(r["run_id"], r["status"]) for r in runs] == [(got["run_ids"][0], "interrupted")]
    state = checked.get(f"/threads/{thread_id}/state")
    assert state["values"] == {**start, "trail": ["a"]} and state["next"] == ["b"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_failing_graph_shows_its_error(checked: Checked, transport: str) -> None:
    got = checked.scenario(transport, "failure")
    thread_id = got["thread_id"]
    assert got["failed"] == {"error": f"boom: fail-{transport}", "isLoading": False}
    assert got["submit"] is None  # submit() resolves; the error is the hook's state
    wire = got["wire"]
    _wire_ok(wire, transport=transport)
    assert wire["root_lifecycle"] == ["running", "failed"]
    assert wire["values"] == [{"tag": f"fail-{transport}"}]
    runs = checked.get(f"/threads/{thread_id}/runs")
    assert [r["status"] for r in runs] == ["error"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_subgraph_card_shows_its_own_values(checked: Checked, transport: str) -> None:
    got = checked.scenario(transport, "subgraph")
    # the child subgraph's output (its whole state) is added to the parent's by the reducer
    full = ["start", "parent", "start", "parent", "child"]
    assert got["values"] == {"items": full, "messages": []}
    # the hook discovered the subgraph node `child`, and the card mounted for it showed the
    # child's own values through its namespace-scoped subscription
    assert got["cards"] == ["child"]
    assert got["card"] == {
        "node": "child",
        "depth": 1,
        "status": "complete",
        "values": {"items": ["start", "parent", "child"]},
    }
    wire = got["wire"]
    assert wire["per_stream_in_order"] and wire["same_id_same_event"], wire
    assert wire["values"] == [{"items": ["start"]}, {"items": ["start", "parent"]}, {"items": full}]
    assert wire["root_lifecycle"] == ["running", "completed"]
    if transport == "sse":
        # content pump, lifecycle watcher, and the card's own stream
        assert wire["sse_streams"] >= 3 and wire["sockets"] == 0, wire
    else:
        # the card's subscription rides the hook's one socket
        assert wire["sse_streams"] == 0 and wire["sockets"] == 1, wire
