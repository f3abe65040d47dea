"""The authenticated caller. Every data access takes its tenant."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_TENANT = "default"
ANONYMOUS_USER = "anonymous"


@dataclass(frozen=True)
class Principal:
    tenant_id: str
    user_id: str
    read_only: bool = False
    scopes: frozenset[str] = field(default_factory=frozenset)
    kind: str = "anonymous"  # anonymous | jwt | api_key

    @property
    def identity(self) -> str:
        return self.user_id


ANONYMOUS = Principal(tenant_id=DEFAULT_TENANT, user_id=ANONYMOUS_USER)
