"""The cross-user matrix's handlers: the official owner-only pattern on every resource, and
Store namespaces scoped to the user. Tokens: `Bearer <user>` for alice, bob, carol (tenant via
`org`), plus tokens that make the handlers fail in the ways the tests check."""

from langgraph_sdk import Auth

auth = Auth()
USERS = {
    "alice": {"org": "acme", "permissions": ["threads:write"]},
    "bob": {"org": "acme", "permissions": []},
    "mallory": {"org": "globex", "permissions": []},
}


@auth.authenticate
async def authenticate(authorization: str | None, path: str, method: str) -> dict:
    if not authorization:
        raise Auth.exceptions.HTTPException(status_code=401, detail="no token")
    token = authorization.partition(" ")[2]
    if token == "forbidden":
        raise Auth.exceptions.HTTPException(status_code=403, detail="banned user")
    if token == "crash":
        raise RuntimeError("secret-token-crash")  # must surface as 401, never 500
    if token == "noident":
        return {"name": "no identity"}
    if token not in USERS:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="bad token", headers={"WWW-Authenticate": "Bearer"}
        )
    return {"identity": token, "path_seen": path, "method_seen": method, **USERS[token]}


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: dict) -> dict:
    filters = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    if isinstance(metadata, dict):
        metadata.update(filters)
    return filters


@auth.on.threads.update
async def no_bad_update(ctx: Auth.types.AuthContext, value: dict) -> dict:
    metadata = value.get("metadata") or {}
    if metadata.get("explode"):
        raise ValueError("handler bug")  # an unexpected error: 403, never 500, never access
    if metadata.get("deny"):
        return False
    return {"owner": ctx.user.identity}


@auth.on.crons.search
async def crons_of_owner(ctx: Auth.types.AuthContext, value: dict) -> dict:
    return {"owner": {"$eq": ctx.user.identity}}  # the SDK's operator form of the same filter


@auth.on.store
async def scope_store(ctx: Auth.types.AuthContext, value: dict) -> None:
    namespace = tuple(value["namespace"]) if value.get("namespace") else ()
    if not namespace or namespace[0] != ctx.user.identity:
        namespace = (ctx.user.identity, *namespace)
    value["namespace"] = namespace


@auth.on.assistants.create
async def assistant_readers(ctx: Auth.types.AuthContext, value: dict) -> None:
    metadata = value.setdefault("metadata", {})
    metadata.update({"owner": ctx.user.identity, "readers": [ctx.user.identity]})


@auth.on.assistants.search
async def assistants_shared_with_me(ctx: Auth.types.AuthContext, value: dict) -> dict:
    # the SDK's membership operator: the stored `readers` list holds the caller
    return {"readers": {"$contains": ctx.user.identity}}
