"""Long-term memory: store a fact in the Store, find it again, and let the memory agent
recall what it was told across threads.

    python examples/remember_fact.py
"""

from __future__ import annotations

import uuid

from _common import server_url

from graphkeep_client import Client


def main() -> None:
    with Client(server_url(__doc__ or "")) as client:
        # 1. The Store directly: items are JSON values under a namespace and a key.
        namespace = ("examples", uuid.uuid4().hex[:8], "facts")
        client.store.put(namespace, "drink", {"text": "prefers green tea", "kind": "preference"})
        item = client.store.get(namespace, "drink")
        assert item is not None
        print(f"stored {item.namespace}/{item.key}: {item.value['text']}")
        found = client.store.search(namespace[:2], filter={"kind": "preference"})
        print(f"search by kind finds {[i.key for i in found]}")

        # 2. The memory agent writes what you tell it into the Store; a new thread recalls it.
        for text in ("My dog is called Rex", "I live in Lyon"):
            thread = client.threads.create()
            message = {"role": "user", "content": text}
            client.runs.wait(thread.thread_id, "memory", input={"messages": [message]})
        recall = client.runs.wait(
            client.threads.create().thread_id,
            "memory",
            input={"messages": [{"role": "user", "content": "What do you know?"}]},
        )
        print(f"agent: {recall['messages'][-1]['content']}")

        client.store.delete(namespace, "drink")
        print(f"after delete: {client.store.get(namespace, 'drink')}")


if __name__ == "__main__":
    main()
