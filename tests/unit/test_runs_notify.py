"""The NOTIFY payload format (app/runs/notify.py): what one process encodes, another decodes."""

from __future__ import annotations

import pytest

from app.runs import notify
from app.runs.notify import Kind, Notice


@pytest.mark.parametrize("kind", list(Kind))
def test_every_kind_round_trips(kind: Kind) -> None:
    payload = notify.encode(kind, "run-1", origin="abc", thread_id="thread-1")
    assert notify.decode(payload) == Notice(kind, "run-1", "abc", "thread-1")


def test_the_shorthands_are_the_encoded_forms() -> None:
    # the run-create and settle statements bind these as parameters of their own SQL
    assert notify.queued("abc") == "q::abc"
    assert notify.events("r", "t", origin="abc") == "e:r:abc:t"
    assert notify.decode(notify.queued("abc")) == Notice(Kind.QUEUED, "", "abc", "")


def test_a_payload_without_a_thread_decodes_with_an_empty_one() -> None:
    assert notify.decode("c:run-1:abc") == Notice(Kind.CANCEL, "run-1", "abc", "")
    assert notify.decode("w::abc:thread-1") == Notice(Kind.WATCH, "", "abc", "thread-1")


@pytest.mark.parametrize("payload", ["", "x:run:abc", "queued:run:abc", "Q::abc"])
def test_an_unknown_kind_is_ignored_not_an_error(payload: str) -> None:
    assert notify.decode(payload) is None
