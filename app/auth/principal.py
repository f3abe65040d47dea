"""The authenticated caller. Every data access takes its tenant."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_TENANT = "default"
ANONYMOUS_USER = "anonymous"


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    user_id: str
    read_only: bool = False
    scopes: frozenset[str] = field(default_factory=frozenset)
    kind: str = "anonymous"  # anonymous | jwt | api_key | custom
    # custom auth: the user the authenticate handler returned (JSON fields), for ctx.user and
    # langgraph_auth_user; not part of equality (two principals are the same caller by ids)
    user: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    # custom auth: the request's resource filter (metadata containment) when the route applies
    # it in its own lookup (GET /threads/{id}: no second query); None elsewhere
    auth_filter: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def identity(self) -> str:
        return self.user_id


ANONYMOUS = Principal(tenant_id=DEFAULT_TENANT, user_id=ANONYMOUS_USER)
