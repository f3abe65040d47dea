"""The official "make conversations private" tutorial, scoped handlers: threads are private
to their owner, assistants are off limits to end users, Store namespaces start with the user.

Serve it unchanged:  graphkeep serve --config examples/auth-private-conversations/langgraph.json
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


@auth.on.threads.create
async def on_thread_create(
    ctx: Auth.types.AuthContext, value: Auth.types.on.threads.create.value
) -> None:
    """Record the owner on the new thread; creating is allowed."""
    metadata = value.setdefault("metadata", {})
    metadata["owner"] = ctx.user.identity


@auth.on.threads.read
async def on_thread_read(
    ctx: Auth.types.AuthContext, value: Auth.types.on.threads.read.value
) -> Auth.types.FilterType:
    """Only the owner reads a thread (its state, history, runs and streams)."""
    return {"owner": ctx.user.identity}


@auth.on.threads
async def on_threads(ctx: Auth.types.AuthContext, value: dict) -> Auth.types.FilterType:
    """Every other thread action (search, update, delete, create_run): the owner's only."""
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def on_assistants(ctx: Auth.types.AuthContext, value: dict) -> None:
    raise Auth.exceptions.HTTPException(
        status_code=403, detail="User lacks the required permissions."
    )


@auth.on.store()
async def authorize_store(ctx: Auth.types.AuthContext, value: dict) -> None:
    """A user's Store namespaces start with their identity."""
    namespace: tuple = value["namespace"]
    if not namespace or namespace[0] != ctx.user.identity:
        raise Auth.exceptions.HTTPException(status_code=403, detail="Not authorized")
