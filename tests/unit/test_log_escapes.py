"""Text and JSON log lines carry no terminal escape codes: uvicorn's `color_message` copy is
dropped, and an escape in a message or a string field is removed."""

from __future__ import annotations

import json
import logging

from app.logging import JsonFormatter, TextFormatter


def _record() -> logging.LogRecord:
    record = logging.LogRecord(
        "uvicorn.error",
        logging.INFO,
        __file__,
        1,
        "Uvicorn running on %s",
        ("\x1b[1mhttp\x1b[0m",),
        None,
    )
    record.color_message = "Uvicorn running on \x1b[1m%s\x1b[0m"
    record.where = "\x1b[36mhere\x1b[0m"
    return record


def test_text_line_is_plain() -> None:
    line = TextFormatter().format(_record())
    assert "\x1b" not in line and "color_message" not in line
    assert line.endswith("uvicorn.error: Uvicorn running on http where=here")


def test_json_line_is_plain() -> None:
    line = JsonFormatter().format(_record())
    assert "\x1b" not in line and "\\u001b" not in line
    payload = json.loads(line)
    assert "color_message" not in payload
    assert (payload["message"], payload["where"]) == ("Uvicorn running on http", "here")
