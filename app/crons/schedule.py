"""Cron-expression math: validation and the next due time, in the cron's own timezone.

The library is cronsim (healthchecks.io's evaluator). Its DST rules are the ones users expect
of Debian cron and the ones issue 19 asks for: a time that falls in a spring-forward gap fires
once at the first valid instant after the gap (02:30 -> 03:00), and a time that occurs twice on
a fall-back day fires once, at its first occurrence. croniter (the official server's choice)
fires a 01:30 daily cron twice on a fall-back day.

Policy, stated once:
- Only standard 5-field expressions (minute hour day month weekday). Six fields (seconds) are
  refused: cron implementations disagree on where the seconds field goes.
- `next_after(t)` is the first slot strictly after `t`. The scheduler computes a fired cron's
  next due time from *now*, not from the slot it fired, so after downtime a cron fires once,
  not once per missed slot, and re-enabling a cron does not fire the slots it skipped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from app.errors import ValidationFailed

DEFAULT_TIMEZONE = "UTC"
_FIELDS = 5


def parse_timezone(name: str | None) -> ZoneInfo:
    """An IANA zone (None: UTC); 422 for a name the tz database does not know."""
    if name is None:
        return ZoneInfo(DEFAULT_TIMEZONE)
    if not name or len(name) > 64 or name.startswith(("/", ".")) or ".." in name:
        raise ValidationFailed(f"timezone: {name!r} is not an IANA timezone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationFailed(f"timezone: {name!r} is not an IANA timezone") from None


def validate_schedule(schedule: str) -> str:
    """The expression, normalised to single spaces; 422 if it is not a 5-field cron that fires."""
    fields = schedule.split()
    if len(fields) != _FIELDS:
        raise ValidationFailed(
            f"schedule: {schedule!r} must have 5 fields (minute hour day month weekday); "
            "seconds are not supported"
        )
    normalised = " ".join(fields)
    try:
        # cronsim refuses impossible dates at parse time ("0 0 30 2 *": Bad day-of-month)
        next(CronSim(normalised, datetime(2000, 1, 1, tzinfo=UTC)))
    except (CronSimError, StopIteration) as exc:
        raise ValidationFailed(
            f"schedule: {schedule!r} is not a valid cron expression: {exc}"
        ) from None
    return normalised


def next_after(schedule: str, tz: ZoneInfo, after: datetime) -> datetime:
    """The first due time strictly after `after` (aware), as UTC."""
    local = after.astimezone(tz)
    due = next(CronSim(schedule, local))
    return due.astimezone(UTC)
