"""The `debug` chunk reshaping of app/runs/chunks.py (official server's extra keys)."""

from __future__ import annotations

from typing import Any

from app.runs.chunks import ChunkTranslator, config_to_checkpoint, debug_chunk


def _config(cid: str | None, **extra: Any) -> dict[str, Any]:
    configurable = {"thread_id": "t", "checkpoint_ns": "", **extra}
    if cid is not None:
        configurable["checkpoint_id"] = cid
    return {"configurable": configurable}


def test_checkpoint_payload_gets_checkpoint_keys_and_tasks_lose_state() -> None:
    sub = {"configurable": {"thread_id": "t", "checkpoint_ns": "child:1"}}
    chunk = {
        "type": "checkpoint",
        "step": 1,
        "payload": {
            "config": _config("c2", checkpoint_map={"": "c2"}, other="x"),
            "parent_config": _config("c1"),
            "values": {},
            "tasks": [{"id": "1", "name": "child", "state": sub}, {"id": "2", "name": "n"}],
        },
    }
    out = debug_chunk(chunk)
    payload = out["payload"]
    assert payload["config"] == chunk["payload"]["config"]  # kept
    assert payload["checkpoint"] == {
        "checkpoint_id": "c2",
        "thread_id": "t",
        "checkpoint_ns": "",
        "checkpoint_map": {"": "c2"},
    }
    assert payload["parent_checkpoint"] == {
        "checkpoint_id": "c1",
        "thread_id": "t",
        "checkpoint_ns": "",
    }
    assert payload["tasks"] == [
        {"id": "1", "name": "child", "checkpoint": sub["configurable"]},
        {"id": "2", "name": "n"},
    ]
    assert "checkpoint" not in chunk["payload"]  # the input is not modified


def test_first_checkpoint_has_no_parent_and_other_chunks_pass() -> None:
    out = debug_chunk({"type": "checkpoint", "payload": {"config": _config("c1"), "tasks": []}})
    assert out["payload"]["parent_checkpoint"] is None
    task = {"type": "task", "payload": {"id": "1", "name": "n"}}
    assert debug_chunk(task) is task
    assert config_to_checkpoint(_config(None)) is None
    assert config_to_checkpoint(None) is None


def test_translator_reshapes_debug_only() -> None:
    chunk = {"type": "checkpoint", "payload": {"config": _config("c1"), "tasks": []}}
    translator = ChunkTranslator(["debug", "checkpoints"])
    [(name, data)] = list(translator.translate((), "debug", chunk))
    assert name == "debug" and '"parent_checkpoint":null' in data
    [(name, data)] = list(translator.translate((), "checkpoints", {"config": _config("c1")}))
    assert name == "checkpoints" and "parent_checkpoint" not in data
