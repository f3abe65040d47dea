"""Domain errors. The API maps them to HTTP statuses in one place (app/api/errors.py)."""

from __future__ import annotations


class AppError(Exception):
    """Root of every error graphkeep raises on purpose."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class InvalidInput(AppError):
    """The caller sent something wrong (400)."""


class ValidationFailed(InvalidInput):
    """The request does not match the schema (422)."""


class NotFound(AppError):
    """No such resource for this caller (404); also for another tenant's resource."""


class Conflict(AppError):
    """The resource exists or is busy (409)."""


class Unauthorized(AppError):
    """Missing or invalid credentials (401)."""


class Forbidden(AppError):
    """Authenticated but not allowed (403)."""


class PayloadTooLarge(AppError):
    """A value or body over the configured limit (413)."""


class Unavailable(AppError):
    """A dependency (the database) is down; retry later (503)."""


class SchemaBehind(AppError):
    """The database schema is older than the code; run `graphkeep migrate`."""
