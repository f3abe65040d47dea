"""Start a run that pauses for human approval, look at the question, approve it.

python examples/approve_interrupt.py
"""

from __future__ import annotations

from _common import server_url

from graphkeep_client import Client, Command


def main() -> None:
    with Client(server_url(__doc__ or "")) as client:
        thread = client.threads.create(metadata={"example": "approval"})
        paused = client.runs.wait(thread.thread_id, "approval", input={"request": "deploy v2"})
        question = paused["__interrupt__"][0]["value"]
        print(f"the graph asks: {question['question']} ({question['proposal']})")

        state = client.threads.get_state(thread.thread_id)
        print(f"thread status: {client.threads.get(thread.thread_id).status}, next: {state.next}")

        result = client.runs.wait(
            thread.thread_id, "approval", command=Command(resume={"approved": True})
        )
        print(f"approved -> {result['result']}")


if __name__ == "__main__":
    main()
