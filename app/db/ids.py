"""Identifiers in API input: the one parser of UUID text (threads, assistants, crons, runs)."""

from __future__ import annotations

import uuid

from app.errors import ValidationFailed


def parse_uuid(value: str, *, what: str) -> str:
    """Canonical lowercase UUID text of `value`, or 422 naming the field (`what`)."""
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise ValidationFailed(f"{what}: {value!r} is not a valid UUID") from None
