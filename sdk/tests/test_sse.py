"""The SSE decoder: line ends, chunk boundaries, comments, multi-line data, ids."""

from __future__ import annotations

import pytest

from graphkeep_client._sse import RawEvent, SSEDecoder

STREAM = (
    b"\xef\xbb\xbf: heartbeat\r\n"
    b'id: 1\r\nevent: metadata\r\ndata: {"run_id": "r"}\r\n\r\n'
    b'event: values\ndata: {"a":\ndata: 1}\n\n'
    b'id: 2\revent: custom\rdata: "x"\r\r'
    b": another heartbeat\n\n"
    b"event: end\r\ndata:\r\n\r\n"
)
EXPECTED = [
    RawEvent("metadata", {"run_id": "r"}, "1"),
    RawEvent("values", {"a": 1}, None),  # no id line of its own
    RawEvent("custom", "x", "2"),
    RawEvent("end", None, None),
]


def decode(chunks: list[bytes]) -> list[RawEvent]:
    decoder = SSEDecoder()
    out = [event for chunk in chunks for event in decoder.feed(chunk)]
    return out + decoder.flush()


def test_whole_stream() -> None:
    assert decode([STREAM]) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 7, 16])
def test_any_chunking_gives_the_same_events(size: int) -> None:
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert decode(chunks) == EXPECTED


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert decode([b"event: a\r", b"\ndata: 1\r", b"\n\r", b"\n"]) == [RawEvent("a", 1, None)]


def test_last_event_id_persists_and_an_unterminated_event_is_flushed() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 7\nevent: a\ndata: 1\n\nevent: b\ndata: 2") == [RawEvent("a", 1, "7")]
    assert decoder.last_event_id == "7"
    assert decoder.flush() == [RawEvent("b", 2, None)]


def test_non_json_data_is_kept_as_text() -> None:
    assert decode([b"event: x\ndata: not json\n\n"]) == [RawEvent("x", "not json", None)]


def test_stdlib_json_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without orjson installed the decoder uses the standard library, with the same result."""
    import json

    from graphkeep_client import _sse

    monkeypatch.setattr(_sse, "loads", json.loads)
    assert decode([STREAM]) == EXPECTED
