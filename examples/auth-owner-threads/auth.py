"""The official "add custom authentication" + "make conversations private" tutorials, step 2:
every resource belongs to the user who created it.

Serve it unchanged:  graphkeep serve --config examples/auth-owner-threads/langgraph.json
Then call with `Authorization: Bearer user1-token` (Alice) or `user2-token` (Bob): neither
sees, searches, counts, streams, copies or deletes the other's threads, runs or crons.
"""

from langgraph_sdk import Auth

# A toy token table standing in for your identity provider.
VALID_TOKENS = {
    "user1-token": {"id": "user1", "name": "Alice"},
    "user2-token": {"id": "user2", "name": "Bob"},
}

auth = Auth()


@auth.authenticate
async def get_current_user(authorization: str | None) -> Auth.types.MinimalUserDict:
    """Check the bearer token; raise 401 for anything else."""
    if not authorization:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Missing token")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or token not in VALID_TOKENS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    user = VALID_TOKENS[token]
    return {"identity": user["id"], "display_name": user["name"]}


@auth.on
async def add_owner(ctx: Auth.types.AuthContext, value: dict) -> dict:
    """Stamp the owner on what is created; only the owner's resources match afterwards."""
    filters = {"owner": ctx.user.identity}
    metadata = value.setdefault("metadata", {})
    metadata.update(filters)
    return filters
