"""The authenticated caller as graphs see it: run config `configurable` entries.

The official Agent Server puts the user in `configurable["langgraph_auth_user"]` (an object
with `identity`, `display_name`, `is_authenticated`, `permissions`, also readable as a dict)
and its id in `configurable["langgraph_auth_user_id"]`; LangGraph turns the former into
`runtime.server_info.user`. graphkeep adds the tenant, so memory graphs can build Store
namespaces from identity instead of client input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.auth.principal import Principal

AUTH_USER_KEY = "langgraph_auth_user"
AUTH_USER_ID_KEY = "langgraph_auth_user_id"
AUTH_PERMISSIONS_KEY = "langgraph_auth_permissions"
TENANT_KEY = "tenant_id"
# LangGraph's memory examples namespace the Store by `configurable["user_id"]`. With auth off
# the client's value passes through untouched (the official server's behaviour); with auth on
# it is the authenticated user, so a caller cannot read another user's memories by naming them.
USER_ID_KEY = "user_id"
IDENTITY_KEYS = frozenset({AUTH_USER_KEY, AUTH_USER_ID_KEY, AUTH_PERMISSIONS_KEY, TENANT_KEY})


class AuthUser(dict[str, Any]):
    """A user dict that also offers the attributes of `langgraph_sdk.auth.types.BaseUser`.

    It stays a plain `dict` for JSON, so it survives being stored with the run's kwargs;
    `restore_auth_user` re-wraps the dict after such a round trip.
    """

    @property
    def identity(self) -> str:
        return str(self["identity"])

    @property
    def display_name(self) -> str:
        return str(self.get("display_name") or self["identity"])

    @property
    def is_authenticated(self) -> bool:
        return bool(self.get("is_authenticated", False))

    @property
    def permissions(self) -> list[str]:
        return list(self.get("permissions") or [])

    @property
    def tenant_id(self) -> str:
        return str(self["tenant_id"])


def identity_configurable(principal: Principal) -> dict[str, Any]:
    """The `configurable` entries that carry the caller into a run.

    For the runs engineer: merge this LAST into the run's `config["configurable"]` (after the
    assistant's config and the client's config), so a client can never choose its own user or
    tenant:

        configurable = {**assistant_conf, **client_conf, **identity_configurable(principal)}

    When the config is rebuilt from stored JSON in a worker, pass it through
    `restore_auth_user` so `runtime.server_info.user` is populated again.
    """
    # a custom auth handler's user keeps its own fields (and permission order), as on the
    # official server; the ids and the tenant are always the server's
    extra = dict(principal.user or {})
    permissions = list(extra.get("permissions") or sorted(principal.scopes))
    user = AuthUser(
        {
            **extra,
            "identity": principal.user_id,
            "display_name": extra.get("display_name") or principal.user_id,
            "is_authenticated": principal.kind != "anonymous",
            "permissions": permissions,
            "tenant_id": principal.tenant_id,
            "kind": principal.kind,
            "read_only": principal.read_only,
        }
    )
    trusted = {USER_ID_KEY: principal.user_id} if principal.kind != "anonymous" else {}
    return {
        AUTH_USER_KEY: user,
        AUTH_USER_ID_KEY: principal.user_id,
        AUTH_PERMISSIONS_KEY: permissions,
        TENANT_KEY: principal.tenant_id,
        **trusted,
    }


def strip_identity(configurable: Mapping[str, Any]) -> dict[str, Any]:
    """A copy without the identity keys (for client-supplied configs before they are stored)."""
    return {k: v for k, v in configurable.items() if k not in IDENTITY_KEYS}


def restore_auth_user(configurable: Mapping[str, Any]) -> dict[str, Any]:
    """A copy whose `langgraph_auth_user` is an `AuthUser` again (after a JSON round trip)."""
    out = dict(configurable)
    user = out.get(AUTH_USER_KEY)
    if isinstance(user, Mapping) and not isinstance(user, AuthUser) and "identity" in user:
        out[AUTH_USER_KEY] = AuthUser(user)
    return out
