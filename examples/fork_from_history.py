"""Time travel: find an earlier checkpoint in a thread's history and branch from it.

python examples/fork_from_history.py
"""

from __future__ import annotations

from typing import Any

from _common import server_url

from graphkeep_client import Client


def say(text: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": text}]}


def transcript(values: Any) -> list[str]:
    return [str(message["content"]) for message in values["messages"]]


def main() -> None:
    with Client(server_url(__doc__ or "")) as client:
        thread = client.threads.create(metadata={"example": "fork"})
        client.runs.wait(thread.thread_id, "agent", input=say("I like tea"))
        client.runs.wait(thread.thread_id, "agent", input=say("Actually, coffee"))
        print("original:", transcript(client.threads.get_state(thread.thread_id).values))

        # History is newest first; pick the checkpoint right after the first exchange.
        history = client.threads.get_history(thread.thread_id, limit=50)
        after_first = next(s for s in history if len(s.values.get("messages", [])) == 2)
        assert after_first.checkpoint is not None
        print(f"forking from checkpoint {after_first.checkpoint.checkpoint_id}")

        forked = client.runs.wait(
            thread.thread_id,
            "agent",
            input=say("Actually, juice"),
            checkpoint=after_first.checkpoint,
        )
        print("fork:    ", transcript(forked))
        checkpoints = client.threads.get_history(thread.thread_id, limit=50)
        print(f"the thread now has {len(checkpoints)} checkpoints: both branches are kept")


if __name__ == "__main__":
    main()
