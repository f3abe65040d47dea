"""Custom auth pieces without a server: filters as containment, handler precedence, users."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import Auth

from app.auth.custom import AuthDenied, CustomAuth, CustomAuthError
from app.auth.filters import EMPTY, BadFilter, merge_containment, to_containment
from app.auth.principal import Principal


def test_sdk_filters_become_containment() -> None:
    assert to_containment({"owner": "a"}) == {"owner": "a"}
    assert to_containment({"owner": {"$eq": "a"}}) == {"owner": "a"}
    assert to_containment({"p": {"$contains": "a"}}) == {"p": ["a"]}
    assert to_containment({"p": {"$contains": ["a", "b"]}}) == {"p": ["a", "b"]}


@pytest.mark.parametrize(
    "bad",
    [{"k": {"$ne": "a"}}, {"k": {"$eq": "a", "$contains": "b"}}, {"": "a"}, {"k": {}}],
)
def test_unsupported_filters_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(BadFilter):
        to_containment(bad)


def test_merge_is_the_and_of_both() -> None:
    assert merge_containment({"a": 1}, {"b": 2}) == {"a": 1, "b": 2}
    assert merge_containment({"p": ["x"]}, {"p": ["y"]}) == {"p": ["x", "y"]}
    assert merge_containment({"o": {"x": 1}}, {"o": {"y": 2}}) == {"o": {"x": 1, "y": 2}}
    assert merge_containment({"owner": "bob"}, {"owner": "alice"}) is EMPTY
    assert merge_containment({"owner": ["a"]}, {"owner": "a"}) is EMPTY
    assert merge_containment({"n": 1}, {"n": True}) is EMPTY  # 1 is not true in JSON


def _auth() -> Auth:
    auth = Auth()

    @auth.on
    async def everything(ctx: Any, value: Any) -> Any:
        return {"level": "global"}

    @auth.on.threads
    async def threads(ctx: Any, value: Any) -> Any:
        return {"level": "resource"}

    @auth.on.threads.delete
    async def delete(ctx: Any, value: Any) -> Any:
        return False

    @auth.on(actions=["search"])
    async def searches(ctx: Any, value: Any) -> Any:
        return {"level": "action"}

    @auth.on.store
    async def store(ctx: Any, value: Any) -> Any:
        raise RuntimeError("boom")

    return auth


async def test_most_specific_handler_wins_and_results_map_to_statuses() -> None:
    custom = CustomAuth(_auth(), tenant_field=None, source="t")
    p = Principal(tenant_id="default", user_id="u", kind="custom")
    assert await custom.authorize(p, "threads", "read", {}) == {"level": "resource"}
    assert await custom.authorize(p, "assistants", "search", {}) == {"level": "action"}
    assert await custom.authorize(p, "crons", "read", {}) == {"level": "global"}
    with pytest.raises(AuthDenied) as denied:
        await custom.authorize(p, "threads", "delete", {})
    assert denied.value.status == 403
    with pytest.raises(AuthDenied) as crashed:
        await custom.authorize(p, "store", "put", {"namespace": ()})
    assert crashed.value.status == 403 and "boom" not in crashed.value.detail


class _User:
    identity = "obj"
    permissions = ("p",)
    display_name = "Obj"


@pytest.mark.parametrize(
    ("returned", "identity", "permissions"),
    [
        ("plain", "plain", []),
        ({"identity": "d", "permissions": ["x"]}, "d", ["x"]),
        (_User(), "obj", ["p"]),
    ],
)
async def test_users_of_every_documented_shape(
    returned: Any, identity: str, permissions: list[str]
) -> None:
    auth = Auth()
    seen: dict[str, Any] = {}

    @auth.authenticate
    async def authenticate(authorization: str | None, path: str) -> Any:
        seen.update(authorization=authorization, path=path)
        return returned

    async def provide(name: str) -> Any:
        return {"authorization": "Bearer t", "path": "/threads"}[name]

    custom = CustomAuth(auth, tenant_field=None, source="t")
    principal = await custom.authenticate(provide)
    assert seen == {"authorization": "Bearer t", "path": "/threads"}
    assert principal.user_id == identity and principal.tenant_id == "default"
    assert principal.user is not None and list(principal.user["permissions"]) == permissions


@pytest.mark.parametrize("returned", [None, {"name": "no identity"}, {"identity": ""}, 42])
async def test_a_user_without_identity_is_a_401(returned: Any) -> None:
    auth = Auth()

    @auth.authenticate
    async def authenticate() -> Any:
        return returned

    async def provide(name: str) -> Any:
        raise AssertionError(name)

    with pytest.raises(AuthDenied) as info:
        await CustomAuth(auth, tenant_field=None, source="t").authenticate(provide)
    assert info.value.status == 401


async def test_tenant_field_fails_closed() -> None:
    custom = CustomAuth(Auth(), tenant_field="org", source="t")
    assert custom.principal_for({"identity": "u", "permissions": [], "org": "acme"}).tenant_id == (
        "acme"
    )
    with pytest.raises(AuthDenied) as info:
        custom.principal_for({"identity": "u", "permissions": []})
    assert info.value.status == 401


def test_unknown_authenticate_parameter_is_a_start_up_error(tmp_path: Path) -> None:
    (tmp_path / "auth.py").write_text(
        "from langgraph_sdk import Auth\n"
        "auth = Auth()\n"
        "@auth.authenticate\n"
        "async def who(cookie_jar):\n"
        "    return 'x'\n"
    )
    with pytest.raises(CustomAuthError, match="cookie_jar"):
        CustomAuth.load("./auth.py:auth", base_dir=tmp_path, tenant_field=None)
