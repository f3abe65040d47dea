"""The console's browser session: where its credential lives and how actions prove intent.

A browser cannot send `Authorization` on a plain link, so after sign-in the console keeps
the same token the API takes (a JWT or a `gk_` key) in an HttpOnly, SameSite=Strict cookie
scoped to the console's path; the auth middleware reads it there for console paths only,
and verifies it exactly as a bearer token (same principal, same tenant, same read-only
rule). Actions are POSTs that must also carry the CSRF token: a random value in a second,
script-readable cookie, echoed in a form field or the `x-csrf-token` header (double submit;
SameSite=Strict alone would leave older browsers open).
"""

from __future__ import annotations

import hmac
import secrets

CONSOLE_PREFIX = "/console"
SESSION_COOKIE = "gk_console_session"
CSRF_COOKIE = "gk_console_csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"
# reachable signed out: the sign-in form and the static assets it needs
PUBLIC_CONSOLE_PATHS = frozenset({f"{CONSOLE_PREFIX}/login"})
PUBLIC_CONSOLE_PREFIXES = (f"{CONSOLE_PREFIX}/static/",)
# POSTs that change only the browser's session, which a read-only token may do too
SESSION_ONLY_PATHS = frozenset({f"{CONSOLE_PREFIX}/logout"})
_COOKIE_MAX = 16 * 1024


def is_console_path(path: str) -> bool:
    return path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")


def is_public_console_path(path: str) -> bool:
    return path in PUBLIC_CONSOLE_PATHS or path.startswith(PUBLIC_CONSOLE_PREFIXES)


def session_token(cookie_header: str | None) -> str | None:
    """The console session's token from a Cookie header, if one is there."""
    return _cookie(cookie_header, SESSION_COOKIE)


def _cookie(cookie_header: str | None, name: str) -> str | None:
    if not cookie_header or len(cookie_header) > _COOKIE_MAX:
        return None
    for part in cookie_header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None


def new_csrf_token() -> str:
    return secrets.token_urlsafe(32)


def csrf_cookie(cookie_header: str | None) -> str | None:
    return _cookie(cookie_header, CSRF_COOKIE)


def csrf_ok(cookie_value: str | None, submitted: str | None) -> bool:
    """Whether the submitted CSRF token matches the cookie (constant time)."""
    if not cookie_value or not submitted:
        return False
    return hmac.compare_digest(cookie_value.encode(), submitted.encode())
