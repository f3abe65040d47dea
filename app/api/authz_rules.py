"""Which `langgraph_sdk.Auth` resource and action each API request is (app/api/authz.py).

The official Agent Server's mapping: runs are thread actions (`create_run`, `read`, `update`,
`delete`), counts are searches, the Store's actions are its own. First match wins, so the
specific paths come before the `{rest}` catch-alls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    method: str
    pattern: re.Pattern[str]
    resource: str
    action: str
    kind: str  # create | search | count | thread | assistant | cron | run | store | ...


def _param(found: re.Match[str]) -> str:
    name = found[1]
    return "(?P<rest>.*)" if name == "rest" else f"(?P<{name}>[^/]+)"


def _rule(method: str, path: str, resource: str, action: str, kind: str) -> Rule:
    """`{name}` matches one path segment; `{rest}` the remainder."""
    regex = re.sub(r"\{(\w+)\}", _param, path)
    return Rule(method, re.compile(f"^{regex}/?$"), resource, action, kind)


RULES: tuple[Rule, ...] = (
    # threads (runs on a thread are thread actions, as on the official server)
    _rule("POST", "/threads", "threads", "create", "create"),
    _rule("POST", "/threads/search", "threads", "search", "search"),
    _rule("POST", "/threads/count", "threads", "search", "count"),
    _rule("POST", "/threads/prune", "threads", "delete", "prune"),
    _rule("POST", "/threads/{thread_id}/runs", "threads", "create_run", "create_run"),
    _rule("POST", "/threads/{thread_id}/runs/stream", "threads", "create_run", "create_run"),
    _rule("POST", "/threads/{thread_id}/runs/wait", "threads", "create_run", "create_run"),
    _rule("POST", "/threads/{thread_id}/runs/crons", "crons", "create", "cron_create"),
    _rule("POST", "/threads/{thread_id}/runs/{run_id}/cancel", "threads", "update", "thread"),
    _rule("DELETE", "/threads/{thread_id}/runs/{run_id}", "threads", "delete", "thread"),
    _rule("PATCH", "/threads/{thread_id}", "threads", "update", "thread"),
    _rule("DELETE", "/threads/{thread_id}", "threads", "delete", "thread"),
    _rule("POST", "/threads/{thread_id}/state", "threads", "update", "thread"),
    _rule("POST", "/threads/{thread_id}/commands", "threads", "update", "thread"),
    _rule("POST", "/threads/{thread_id}/copy", "threads", "read", "thread"),
    _rule("POST", "/threads/{thread_id}/{rest}", "threads", "read", "thread"),  # read-like
    _rule("GET", "/threads/{thread_id}", "threads", "read", "thread_get"),
    _rule("GET", "/threads/{thread_id}/{rest}", "threads", "read", "thread"),
    # stateless runs
    _rule("POST", "/runs", "threads", "create_run", "create_run"),
    _rule("POST", "/runs/stream", "threads", "create_run", "create_run"),
    _rule("POST", "/runs/wait", "threads", "create_run", "create_run"),
    _rule("POST", "/runs/batch", "threads", "create_run", "batch"),
    _rule("POST", "/runs/cancel", "threads", "update", "runs_cancel"),
    # crons
    _rule("POST", "/runs/crons", "crons", "create", "cron_create"),
    _rule("POST", "/runs/crons/search", "crons", "search", "search"),
    _rule("POST", "/runs/crons/count", "crons", "search", "count"),
    _rule("GET", "/runs/crons/{cron_id}", "crons", "read", "cron"),
    _rule("PATCH", "/runs/crons/{cron_id}", "crons", "update", "cron"),
    _rule("DELETE", "/runs/crons/{cron_id}", "crons", "delete", "cron"),
    _rule("GET", "/runs/{run_id}/stream", "threads", "read", "run"),
    # assistants
    _rule("POST", "/assistants", "assistants", "create", "create"),
    _rule("POST", "/assistants/search", "assistants", "search", "search"),
    _rule("POST", "/assistants/count", "assistants", "search", "count"),
    _rule("PATCH", "/assistants/{assistant_id}", "assistants", "update", "assistant"),
    _rule("DELETE", "/assistants/{assistant_id}", "assistants", "delete", "assistant"),
    _rule("POST", "/assistants/{assistant_id}/latest", "assistants", "update", "assistant"),
    _rule("POST", "/assistants/{assistant_id}/versions", "assistants", "read", "assistant"),
    _rule("GET", "/assistants/{assistant_id}", "assistants", "read", "assistant"),
    _rule("GET", "/assistants/{assistant_id}/{rest}", "assistants", "read", "assistant"),
    # store: the handler scopes the namespace
    _rule("PUT", "/store/items", "store", "put", "store"),
    _rule("GET", "/store/items", "store", "get", "store"),
    _rule("DELETE", "/store/items", "store", "delete", "store"),
    _rule("POST", "/store/items/search", "store", "search", "store"),
    _rule("POST", "/store/namespaces", "store", "list_namespaces", "store"),
)


def match(method: str, path: str) -> tuple[Rule, dict[str, str]] | None:
    """The rule for a request and its path parameters (also the authenticate handler's)."""
    for rule in RULES:
        if rule.method != method:
            continue
        found = rule.pattern.match(path)
        if found is not None:
            return rule, {k: v for k, v in found.groupdict().items() if k != "rest"}
    return None
