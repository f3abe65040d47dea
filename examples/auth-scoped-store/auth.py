"""Scoped Store namespaces (the `langgraph_sdk.Auth` reference's `@auth.on.store` pattern):
every Store call is rewritten into the caller's own namespace, so `("memories",)` is
`("user1", "memories")` for Alice and `("user2", "memories")` for Bob, whatever the client
sends. Threads are owner-only as in auth-owner-threads.

Serve it unchanged:  graphkeep serve --config examples/auth-scoped-store/langgraph.json
"""

from langgraph_sdk import Auth

VALID_TOKENS = {
    "user1-token": {"id": "user1", "name": "Alice"},
    "user2-token": {"id": "user2", "name": "Bob"},
}

auth = Auth()


@auth.authenticate
async def get_current_user(authorization: str | None) -> Auth.types.MinimalUserDict:
    if not authorization:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Missing token")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or token not in VALID_TOKENS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    return {"identity": VALID_TOKENS[token]["id"]}


@auth.on.threads
async def owner_only(ctx: Auth.types.AuthContext, value: dict) -> Auth.types.FilterType:
    filters = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    metadata.update(filters)
    return filters


@auth.on.store
async def scope_store(ctx: Auth.types.AuthContext, value: dict) -> None:
    namespace = tuple(value["namespace"]) if value.get("namespace") else ()
    if not namespace or namespace[0] != ctx.user.identity:
        namespace = (ctx.user.identity, *namespace)
    value["namespace"] = namespace
