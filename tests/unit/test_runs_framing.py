"""Pure pieces of the run engine: SSE framing, Last-Event-ID, payload translation."""

from __future__ import annotations

import pytest
from langgraph.types import Command, Interrupt, Send

from app.api.sse import format_event, parse_last_event_id
from app.errors import ValidationFailed
from app.graphs.http_options import HeaderPatterns
from app.graphs.jsonable import dumps
from app.runs.chunks import ChunkTranslator, graph_input, graph_stream_modes
from app.runs.prepare import forwarded_headers


def test_sse_event_framing() -> None:
    assert format_event("values", '{"a":1}') == b'event: values\r\ndata: {"a":1}\r\n\r\n'
    assert format_event("updates|child:1", "null", "7") == (
        b"event: updates|child:1\r\nid: 7\r\ndata: null\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("header", "seq"),
    [(None, None), ("-1", 0), ("0", 0), ("12", 12), ("1724342400000-5", 5), (" 3 ", 3)],
)
def test_last_event_id_forms(header: str | None, seq: int | None) -> None:
    assert parse_last_event_id(header) == seq


@pytest.mark.parametrize("header", ["abc", "1-2-3", "1.5", "-7"])
def test_bad_last_event_id_is_422(header: str) -> None:
    with pytest.raises(ValidationFailed):
        parse_last_event_id(header)


def test_command_translation() -> None:
    cmd = graph_input({"command": {"resume": "y", "update": [["k", 1]], "goto": "n"}})
    assert isinstance(cmd, Command)
    assert cmd.resume == "y" and cmd.update == [("k", 1)] and cmd.goto == ["n"]
    cmd = graph_input({"command": {"goto": [{"node": "a", "input": {"x": 1}}, "b"]}})
    assert cmd.goto == [Send("a", {"x": 1}), "b"]
    assert graph_input({"input": {"q": 1}}) == {"q": 1}


def test_stream_modes_map_to_langgraph() -> None:
    assert graph_stream_modes(["messages", "messages-tuple", "events", "values"]) == [
        "messages",
        "values",
    ]


def test_forwarded_headers_skip_credentials() -> None:
    got = forwarded_headers(
        {
            "x-user-id": "u",
            "X-Api-Key": "secret",
            "authorization": "Bearer t",
            "x-tenant-id": "t",
            "x-service-key": "s",
            "user-agent": "sdk",
            "accept": "json",
        },
        HeaderPatterns(),  # langgraph.json's default: x-* and user-agent
    )
    assert got == {"x-user-id": "u", "user-agent": "sdk"}


def test_translator_names_and_interrupt_encoding() -> None:
    t = ChunkTranslator(["updates", "values"])
    out = list(t.translate(("child:1",), "updates", {"n": {"v": 1}}))
    assert out == [("updates|child:1", '{"n":{"v":1}}')]
    assert list(t.translate((), "custom", {"x": 1})) == []  # not requested
    payload = {"__interrupt__": (Interrupt(value="q", id="i1"),)}
    assert dumps(payload) == '{"__interrupt__":[{"value":"q","id":"i1"}]}'
