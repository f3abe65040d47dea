"""Custom-auth authorization: every API request passes its `@auth.on` handler before routing.

Installed only when langgraph.json names `auth.path` (no cost otherwise). Pure ASGI, inside
the authentication middleware (the caller is known) and the boundary check (the body is
valid), in front of routing, so a route cannot forget it. For each request it finds the
resource and action the official Agent Server uses (`RULES`; runs are authorised as the thread
actions `create_run`, `read`, `update`, `delete`), builds the handler's `value` from the path
and JSON body, calls the handler, then:

- writes what the handler changed (`metadata` on create/update, a Store `namespace`) back into
  the body the route reads;
- a single resource (`/threads/{id}...`, `/assistants/{id}...`, `/runs/crons/{id}`): tests the
  returned filter against the row in SQL (`*_visibility`); not admitted answers exactly like a
  missing resource (404), so a user learns nothing of another's thread;
- a search or count: folds the filter into the body's own `metadata` filter (one containment
  object, app/auth/filters.py), so the query runs it in SQL with its index; filters no row
  can pass answer an empty page at once.

Paths with no rule under custom auth (MCP, A2A, the console) are refused (403): they would
otherwise read a tenant's data without the user's filters.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.authz_rules import Rule, match
from app.api.routing import read_body, replaying
from app.assistants import service as assistants_service
from app.auth.custom import AuthDenied, CustomAuth
from app.auth.filters import EMPTY, merge_containment
from app.auth.principal import Principal
from app.crons import service as crons_service
from app.errors import AppError
from app.statuses import RunStatus

PRINCIPAL_SCOPE_KEY = "graphkeep.principal"
NOT_UNDER_CUSTOM_AUTH = "this endpoint is not available when a custom auth handler is configured"
REFUSED_PREFIXES = ("/mcp", "/a2a", "/console")
# body fields a handler may change on create/update (what the official server reads back)
WRITABLE = ("metadata",)


class _Answer(Exception):
    """Stop here and answer the client (JSON)."""

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers or {}


def _not_found(kind: str, ident: str) -> _Answer:
    names = {"thread": "Thread", "assistant": "Assistant", "cron": "Cron", "run": "Run"}
    return _Answer(404, {"detail": f"{names[kind]} '{ident}' not found"})


async def _send(send: Send, answer: _Answer) -> None:
    # spelt as Starlette's JSONResponse (the app's error answers): a refusal reads the same
    body = json.dumps(answer.body, ensure_ascii=False, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ] + [(k.lower().encode(), v.encode("latin-1", "replace")) for k, v in answer.headers.items()]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _json_object(raw: bytes) -> Any:
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None  # the route (or the boundary check) answers it; no handler sees it


def _metadata_of(value: Any) -> Any:
    return value.get("metadata") if isinstance(value, dict) else None


class Authorizer:
    """Runs the handler for one request and applies its answer (see the module docstring)."""

    def __init__(self, custom: CustomAuth, state: Any) -> None:
        self.custom = custom
        self.state = state

    async def _filter(
        self, principal: Principal, resource: str, action: str, value: dict[str, Any]
    ) -> dict[str, Any] | None:
        return await self.custom.authorize(principal, resource, action, value)

    async def _guard(
        self,
        kind: str,
        principal: Principal,
        ident: str,
        auth_filter: dict[str, Any] | None,
    ) -> None:
        """404 unless the resource exists in the tenant and the filter admits it (in SQL)."""
        if auth_filter is None:
            return  # unrestricted: the route's own lookup (and 404) applies, no extra query
        engine = self.state.engine
        try:
            if kind == "thread":
                seen = await self.state.threads.thread_visibility(
                    tenant_id=principal.tenant_id, thread_id=ident, auth_filter=auth_filter
                )
            elif kind == "assistant":
                seen = await self.state.assistants.assistant_visibility(
                    tenant_id=principal.tenant_id, assistant_id=ident, auth_filter=auth_filter
                )
            else:
                seen = await crons_service.cron_visibility(
                    engine, tenant_id=principal.tenant_id, cron_id=ident, auth_filter=auth_filter
                )
        except AppError:
            return  # a malformed id: the route answers it (422) and reads nothing
        if not seen:
            raise _not_found(kind, ident)

    async def apply(
        self, rule: Rule, params: dict[str, str], principal: Principal, scope: Scope, body: Any
    ) -> Any:
        """The body the route gets (possibly changed), or `_Answer`."""
        kind = rule.kind
        value: dict[str, Any]
        if kind == "thread_get":
            # the route's own lookup applies the filter (one query, not two)
            value = {"thread_id": params["thread_id"], "run_id": None}
            found = await self._filter(principal, rule.resource, rule.action, value)
            if found is not None:
                narrowed = dataclasses.replace(principal, auth_filter=found)
                scope.setdefault("state", {})[PRINCIPAL_SCOPE_KEY] = narrowed
            return body
        if kind in ("thread", "assistant", "cron"):
            ident = params[f"{kind}_id"]
            value = {f"{kind}_id": ident}
            if "run_id" in params:
                value["run_id"] = params["run_id"]
            if isinstance(body, dict) and rule.action == "update" and "metadata" in body:
                value["metadata"] = body.get("metadata")
            found = await self._filter(principal, rule.resource, rule.action, value)
            await self._guard(kind, principal, ident, found)
            if isinstance(body, dict) and "metadata" in value and "metadata" in body:
                body["metadata"] = value["metadata"]
            return body
        if kind == "run":
            value = {"run_id": params["run_id"], "thread_id": None}
            found = await self._filter(principal, rule.resource, rule.action, value)
            if found is not None:
                await self._guard_run(principal, params["run_id"], found)
            return body
        if not isinstance(body, dict) and kind != "batch" and kind != "store":
            return body
        if kind == "create":
            value = dict(body)
            value.setdefault("metadata", {})
            found = await self._filter(principal, rule.resource, rule.action, value)
            for key in WRITABLE:
                if key in value:
                    body[key] = value[key]
            ident = body.get("thread_id" if rule.resource == "threads" else "assistant_id")
            if isinstance(ident, str) and ident and found is not None:
                await self._refuse_hidden(rule, principal, ident, found)
            return body
        if kind in ("search", "count"):
            value = dict(body)
            found = await self._filter(principal, rule.resource, rule.action, value)
            if found is None:
                return body
            merged = merge_containment(_metadata_of(body) or {}, found)
            if merged is EMPTY:
                raise _Answer(200, 0 if kind == "count" else [])
            body["metadata"] = merged
            return body
        if kind == "prune":
            for thread_id in body.get("thread_ids") or []:
                if isinstance(thread_id, str):
                    found = await self._filter(
                        principal, "threads", "delete", {"thread_id": thread_id}
                    )
                    await self._guard("thread", principal, thread_id, found)
            return body
        if kind == "create_run":
            return await self._create_run(rule, params, principal, body)
        if kind == "batch":
            if isinstance(body, list):
                return [await self._create_run(rule, {}, principal, item) for item in body]
            return body
        if kind == "runs_cancel":
            value = {"thread_id": body.get("thread_id"), "run_ids": body.get("run_ids")}
            found = await self._filter(principal, "threads", "update", value)
            thread_id = body.get("thread_id")
            if isinstance(thread_id, str) and thread_id:
                await self._guard("thread", principal, thread_id, found)
            elif found is not None:
                raise _Answer(403, {"detail": "under custom auth, cancel runs by thread_id"})
            return body
        if kind == "cron_create":
            value = {**body, "thread_id": params.get("thread_id")}
            value.setdefault("metadata", {})
            await self._filter(principal, "crons", "create", value)
            body["metadata"] = value["metadata"]
            if params.get("thread_id"):
                # a cron runs on the thread: the thread's own create_run rule applies too
                found = await self._filter(
                    principal, "threads", "create_run", {"thread_id": params["thread_id"]}
                )
                await self._guard("thread", principal, params["thread_id"], found)
            return body
        return await self._store(rule, principal, scope, body)

    async def _refuse_hidden(
        self, rule: Rule, principal: Principal, ident: str, found: dict[str, Any]
    ) -> None:
        """Creating with the id of a resource the user may not see: 409, never a return of
        someone else's resource through `if_exists: do_nothing`."""
        kind = "thread" if rule.resource == "threads" else "assistant"
        try:
            await self._guard(kind, principal, ident, found)
        except _Answer:
            raise _Answer(409, {"detail": f"{kind} '{ident}' already exists"}) from None

    async def _guard_run_assistant(self, principal: Principal, assistant_id: Any) -> None:
        """A run uses its assistant's config and metadata: a user's own assistant must pass the
        assistants `read` filter. The graphs' system assistants (langgraph.json) are shared
        by every user, as on the official server, where runs name them by graph id."""
        if not isinstance(assistant_id, str) or self.state.graphs.has(assistant_id):
            return
        system = {assistants_service.system_assistant_id(g) for g in self.state.graphs.graph_ids()}
        if assistant_id in system:
            return
        found = await self._filter(principal, "assistants", "read", {"assistant_id": assistant_id})
        await self._guard("assistant", principal, assistant_id, found)

    async def _guard_run(self, principal: Principal, run_id: str, found: dict[str, Any]) -> None:
        runs = self.state.runs
        try:
            run = await runs.get(tenant_id=principal.tenant_id, thread_id=None, run_id=run_id)
        except AppError:
            return  # no such run: the route's 404
        thread_id = run.thread_id
        if not thread_id:
            raise _not_found("run", run_id)
        try:
            await self._guard("thread", principal, str(thread_id), found)
        except _Answer:
            raise _not_found("run", run_id) from None

    async def _create_run(
        self, rule: Rule, params: dict[str, str], principal: Principal, body: Any
    ) -> Any:
        if not isinstance(body, dict):
            return body
        thread_id = params.get("thread_id")
        value = {
            "thread_id": thread_id,
            "assistant_id": body.get("assistant_id"),
            "run_id": None,
            "status": RunStatus.PENDING.value,
            "metadata": dict(body.get("metadata") or {}),
            "prevent_insert_if_inflight": body.get("multitask_strategy") == "reject",
            "multitask_strategy": body.get("multitask_strategy"),
            "if_not_exists": body.get("if_not_exists"),
            "after_seconds": body.get("after_seconds"),
            "kwargs": body,
            "action": None,
        }
        found = await self._filter(principal, rule.resource, "create_run", value)
        body["metadata"] = value["metadata"]
        await self._guard_run_assistant(principal, body.get("assistant_id"))
        if thread_id is not None and not (body.get("if_not_exists") == "create" and found is None):
            await self._guard("thread", principal, thread_id, found)
        return body

    async def _store(self, rule: Rule, principal: Principal, scope: Scope, body: Any) -> Any:
        if rule.action == "get":
            return await self._store_get(principal, scope)
        if not isinstance(body, dict):
            return body
        field = {"search": "namespace_prefix", "list_namespaces": "prefix"}.get(
            rule.action, "namespace"
        )
        value: dict[str, Any] = {
            "namespace": tuple(body.get(field) or ()),
            **{k: v for k, v in body.items() if k != field},
        }
        if rule.action == "search":
            value["filter"] = body.get("filter")
        found = await self.custom.authorize(
            principal, "store", rule.action, value, as_containment=False
        )
        body[field] = list(value.get("namespace") or ())
        if rule.action == "search":
            merged = dict(value.get("filter") or {})
            for key, condition in (found or {}).items():
                if key in merged and merged[key] != condition:
                    raise _Answer(200, {"items": []})
                merged[key] = condition
            body["filter"] = merged or None
        return body

    async def _store_get(self, principal: Principal, scope: Scope) -> None:
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        namespace = query.get("namespace", "")
        value = {
            "namespace": tuple(namespace.split(".")) if namespace else (),
            "key": query.get("key"),
        }
        await self.custom.authorize(principal, "store", "get", value, as_containment=False)
        query["namespace"] = ".".join(value.get("namespace") or ())
        scope["query_string"] = urlencode(query).encode()


class CustomAuthzMiddleware:
    """Pure ASGI; see the module docstring."""

    def __init__(self, app: ASGIApp, *, custom: CustomAuth) -> None:
        self.app = app
        self.custom = custom

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        principal = scope.get("state", {}).get(PRINCIPAL_SCOPE_KEY)
        path: str = scope["path"]
        if not isinstance(principal, Principal):
            await self.app(scope, receive, send)  # public paths: no caller, no data
            return
        found = match(scope["method"], path)
        if found is None:
            if path.startswith(REFUSED_PREFIXES):
                await _send(send, _Answer(403, {"detail": NOT_UNDER_CUSTOM_AUTH}))
                return
            await self.app(scope, receive, send)
            return
        rule, params = found
        state = scope["app"].state.graphkeep
        authorizer = Authorizer(self.custom, state)
        has_body = scope["method"] in ("POST", "PUT", "PATCH", "DELETE")
        raw = await read_body(receive) if has_body else b""
        if raw is None:
            return
        body = _json_object(raw) if has_body else None
        try:
            changed = await authorizer.apply(rule, params, principal, scope, body)
        except AuthDenied as exc:
            await _send(send, _Answer(exc.status, {"detail": exc.detail}, exc.headers))
            return
        except _Answer as answer:
            await _send(send, answer)
            return
        if has_body and body is not None:
            raw = json.dumps(changed).encode()
            scope["headers"] = [
                (k, v) for k, v in scope["headers"] if k.lower() != b"content-length"
            ] + [(b"content-length", str(len(raw)).encode())]
        await self.app(scope, replaying(raw, receive) if has_body else receive, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The thread-protocol socket: authenticated and authorised (thread read) before the
        route accepts it; refused with close code 1008 otherwise."""
        found = match("GET", scope["path"])
        app_state = scope["app"].state
        try:
            if found is None or found[0].kind != "thread":
                raise AuthDenied(403, NOT_UNDER_CUSTOM_AUTH)
            rule, params = found
            principal = await app_state.authenticator.authenticate(Headers(scope=scope), scope)
            authorizer = Authorizer(self.custom, app_state.graphkeep)
            await authorizer.apply(rule, params, principal, scope, None)
        except (AuthDenied, _Answer, AppError):
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})
            return
        scope.setdefault("state", {})[PRINCIPAL_SCOPE_KEY] = principal
        await self.app(scope, receive, send)
