"""Chat with the example agent, printing its reply token by token.

graphkeep serve &            # serves the example graphs on http://127.0.0.1:8123
python examples/chat.py
"""

from __future__ import annotations

from _common import server_url

from graphkeep_client import Client


def main() -> None:
    with Client(server_url(__doc__ or "")) as client:
        thread = client.threads.create(metadata={"example": "chat"})
        for text in ("Hello there", "What did I just say?"):
            print(f"you:   {text}")
            print("agent: ", end="", flush=True)
            shown = ""
            stream = client.runs.stream(
                thread.thread_id,
                "agent",
                input={"messages": [{"role": "user", "content": text}]},
                stream_mode="messages",
                stream_resumable=True,  # a dropped connection resumes without losing tokens
            )
            for event in stream:
                if event.event == "messages/partial" and event.messages:
                    content = str(event.messages[0].get("content", ""))
                    print(content[len(shown) :], end="", flush=True)
                    shown = content
                elif (error := event.error) is not None:
                    raise SystemExit(f"run failed: {error.error}: {error.message}")
            print()
        state = client.threads.get_state(thread.thread_id)
        print(f"thread {thread.thread_id} now holds {len(state.values['messages'])} messages")


if __name__ == "__main__":
    main()
