"""Custom auth: a `langgraph_sdk.Auth` object named by langgraph.json's `auth.path`, run as the
official Agent Server runs it.

- `authenticate`: the `@auth.authenticate` handler, called with the parameters its signature
  names (the caller supplies them lazily: `request`, `body`, `path`, `method`, `path_params`,
  `query_params`, `headers`, `authorization`, `scope`). Its user (a string identity, a dict
  with `identity`, or an object with `identity`) becomes a `Principal`; the tenant is the user
  field named by `GRAPHKEEP_AUTH_TENANT_FIELD` (else the default tenant).
- `authorize`: the most specific `@auth.on` handler for (resource, action) - exact, then the
  resource's, then the action's, then the global one; none means allowed. True/None allows,
  False is a 403, a dict is a filter (app/auth/filters.py) applied in SQL by the API layer.

The handler's `HTTPException` keeps its status and detail; any other error is a 401 (in
authenticate) or 403 (in authorize): never a 500, never access.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph_sdk import Auth
from langgraph_sdk.auth.exceptions import HTTPException
from langgraph_sdk.auth.types import AuthContext

from app.auth.filters import BadFilter, to_containment
from app.auth.identity import AuthUser
from app.auth.principal import DEFAULT_TENANT, Principal
from app.auth.tokens import AuthConfigError
from app.db.storable import MAX_ID_CHARS, text_problem
from app.user_modules import UserModuleError, import_user_module

log = logging.getLogger(__name__)

AUTHENTICATE_PARAMS = frozenset(
    {
        "request",
        "body",
        "path",
        "method",
        "path_params",
        "query_params",
        "headers",
        "authorization",
        "scope",
    }
)
HANDLER_FAILED = "authorization handler failed"
AUTHENTICATE_FAILED = "authentication failed"
FORBIDDEN = "Forbidden"


class CustomAuthError(AuthConfigError):
    """`auth.path` cannot be loaded (start-up stops, naming the path)."""


class AuthDenied(Exception):
    """A request refused by a handler: status, detail and headers for the JSON answer."""

    def __init__(self, status: int, detail: str, headers: Mapping[str, str] | None = None):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.headers = dict(headers or {})


@dataclass(frozen=True)
class Registered:
    """The handlers an `Auth` object holds."""

    authenticate: Callable[..., Awaitable[Any]] | None
    handlers: Mapping[tuple[str, str], Callable[..., Awaitable[Any]]]
    global_handler: Callable[..., Awaitable[Any]] | None


def registered(auth: Auth) -> Registered:
    """Read the handlers off an `Auth` object.

    The SDK has no public accessor: its source marks `_authenticate_handler`, `_handlers` and
    `_global_handlers` as the attributes the server reads ("accessed by the API; changes to
    their names or types will be considered a breaking change"), so this is the one place
    graphkeep reads them, as the official server does.
    """
    handlers = {key: fns[0] for key, fns in auth._handlers.items() if fns}
    global_handler = auth._global_handlers[0] if auth._global_handlers else None
    return Registered(auth._authenticate_handler, handlers, global_handler)


def _import(target: str, base_dir: Path) -> Any:
    module_part, _, attr = target.rpartition(":")
    if not module_part or not attr:
        raise CustomAuthError(f"auth.path {target!r} is not of the form './auth.py:auth'")
    try:
        module = import_user_module(module_part, base_dir, namespace="graphkeep_user_auth")
    except UserModuleError as exc:
        raise CustomAuthError(f"auth.path {target!r}: {exc.detail}") from None
    except CustomAuthError:
        raise
    except Exception as exc:
        raise CustomAuthError(
            f"auth.path {target!r}: importing {module_part!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if not hasattr(module, attr):
        raise CustomAuthError(f"auth.path {target!r}: {module_part!r} has no attribute {attr!r}")
    return getattr(module, attr)


def _user_fields(user: Any) -> dict[str, Any]:
    """The user as a JSON-able dict with `identity` (str), `permissions` (list of str)."""
    if isinstance(user, str):
        fields: dict[str, Any] = {"identity": user}
    elif isinstance(user, Mapping):
        fields = dict(user)
    elif hasattr(user, "identity"):
        fields = {"identity": user.identity}
        for name in ("display_name", "is_authenticated", "permissions"):
            if hasattr(user, name):
                fields[name] = getattr(user, name)
    else:
        raise AuthDenied(401, "the authenticate handler returned no user")
    identity = fields.get("identity")
    if not isinstance(identity, str) or not identity or len(identity) > MAX_ID_CHARS:
        raise AuthDenied(401, "the authenticate handler returned a user without an identity")
    if text_problem(identity):
        raise AuthDenied(401, "the user identity holds characters storage cannot keep")
    permissions = fields.get("permissions") or []
    if isinstance(permissions, str) or not isinstance(permissions, Sequence):
        raise AuthDenied(401, "the user's permissions must be a list of strings")
    fields["permissions"] = [str(p) for p in permissions]
    fields.setdefault("display_name", identity)
    fields.setdefault("is_authenticated", True)
    # the user travels with the run's stored kwargs (langgraph_auth_user): JSON fields only
    return {str(k): v for k, v in fields.items() if _jsonable(v)}


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


class CustomAuth:
    """One loaded `Auth` object and how to call it."""

    def __init__(self, auth: Auth, *, tenant_field: str | None, source: str) -> None:
        self.auth = auth
        self.source = source
        self.tenant_field = tenant_field
        found = registered(auth)
        self.authenticate_handler = found.authenticate
        self.handlers = found.handlers
        self.global_handler = found.global_handler
        self.authenticate_params: tuple[str, ...] = ()
        if found.authenticate is not None:
            params = tuple(inspect.signature(found.authenticate).parameters)
            unknown = [p for p in params if p not in AUTHENTICATE_PARAMS]
            if unknown:
                raise CustomAuthError(
                    f"auth.path {source!r}: the authenticate handler asks for {unknown}; "
                    f"it may take {sorted(AUTHENTICATE_PARAMS)}"
                )
            self.authenticate_params = params

    @classmethod
    def load(cls, target: str, *, base_dir: Path, tenant_field: str | None) -> CustomAuth:
        """Import `target` ("./auth.py:auth" or "module:attr"); CustomAuthError names it."""
        if str(base_dir) not in sys.path:
            sys.path.insert(0, str(base_dir))  # the auth file's own imports, as for graphs
        obj = _import(target, base_dir)
        if not isinstance(obj, Auth):
            raise CustomAuthError(
                f"auth.path {target!r} is a {type(obj).__name__}, not a langgraph_sdk.Auth"
            )
        return cls(obj, tenant_field=tenant_field, source=target)

    @property
    def has_authenticate(self) -> bool:
        return self.authenticate_handler is not None

    async def authenticate(self, provide: Callable[[str], Awaitable[Any]]) -> Principal:
        """The caller as a Principal, or AuthDenied. `provide(name)` supplies a parameter."""
        handler = self.authenticate_handler
        if handler is None:
            raise AuthDenied(401, AUTHENTICATE_FAILED)
        kwargs = {name: await provide(name) for name in self.authenticate_params}
        try:
            user = await handler(**kwargs)
        except HTTPException as exc:
            raise AuthDenied(exc.status_code, str(exc.detail), exc.headers) from None
        except Exception as exc:
            # the handler's message may quote the credential: log the type only
            log.warning("authenticate handler raised %s", type(exc).__name__)
            raise AuthDenied(401, AUTHENTICATE_FAILED) from None
        return self.principal_for(_user_fields(user))

    def principal_for(self, fields: dict[str, Any]) -> Principal:
        tenant = DEFAULT_TENANT
        if self.tenant_field:
            value = fields.get(self.tenant_field)
            if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
                # fail closed: a user without a tenant must not land in the default one
                detail = f"the user has no {self.tenant_field!r} field naming a tenant"
                raise AuthDenied(401, detail)
            if text_problem(value):
                raise AuthDenied(401, "the user's tenant holds characters storage cannot keep")
            tenant = value
        return Principal(
            tenant_id=tenant,
            user_id=fields["identity"],
            scopes=frozenset(fields["permissions"]),
            kind="custom",
            user=fields,
        )

    def handler_for(self, resource: str, action: str) -> Callable[..., Awaitable[Any]] | None:
        for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
            found = self.handlers.get(key)
            if found is not None:
                return found
        return self.global_handler

    async def authorize(
        self,
        principal: Principal,
        resource: str,
        action: str,
        value: dict[str, Any],
        *,
        as_containment: bool = True,
    ) -> dict[str, Any] | None:
        """The filter for this action (None: unrestricted), or AuthDenied. By default as a
        metadata containment object; `as_containment=False` returns the handler's dict as is
        (the Store's own value filter).

        `value` is handed to the handler as is; the caller reads back what it changed."""
        handler = self.handler_for(resource, action)
        if handler is None:
            return None
        user = as_base_user(principal)
        ctx = AuthContext(
            permissions=list(principal.scopes),
            user=user,
            resource=resource,  # type: ignore[arg-type]
            action=action,  # type: ignore[arg-type]
        )
        try:
            result = await handler(ctx=ctx, value=value)
        except HTTPException as exc:
            raise AuthDenied(exc.status_code, str(exc.detail), exc.headers) from None
        except Exception as exc:
            log.warning("auth handler for %s.%s raised %s", resource, action, type(exc).__name__)
            raise AuthDenied(403, HANDLER_FAILED) from None
        if result is None or result is True:
            return None
        if result is False:
            raise AuthDenied(403, FORBIDDEN)
        if isinstance(result, Mapping) and not as_containment:
            return dict(result) or None
        if isinstance(result, Mapping):
            try:
                return to_containment(result) or None
            except BadFilter as exc:
                log.warning("auth handler for %s.%s: %s", resource, action, exc)
                raise AuthDenied(403, HANDLER_FAILED) from None
        log.warning("auth handler for %s.%s returned a %s", resource, action, type(result).__name__)
        raise AuthDenied(403, HANDLER_FAILED)


def as_base_user(principal: Principal) -> Any:
    """`ctx.user`: the user dict with the attributes of `langgraph_sdk.auth.types.BaseUser`."""
    fields = dict(principal.user or {})
    fields.setdefault("identity", principal.user_id)
    fields.setdefault("permissions", sorted(principal.scopes))
    fields.setdefault("is_authenticated", principal.kind != "anonymous")
    return AuthUser(fields)
