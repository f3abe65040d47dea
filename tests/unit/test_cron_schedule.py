"""Cron schedule math with fixed datetimes: DST gap and overlap, validation, the policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.crons.schedule import next_after, parse_timezone, validate_schedule
from app.errors import ValidationFailed

NY = ZoneInfo("America/New_York")


def _run(schedule: str, tz: ZoneInfo, start: datetime, n: int) -> list[datetime]:
    out, t = [], start
    for _ in range(n):
        t = next_after(schedule, tz, t)
        out.append(t)
    return out


def test_spring_forward_gap_fires_once_after_the_gap() -> None:
    # 2026-03-08: New York skips 02:00-03:00; a 02:30 daily cron fires once, at 03:00 EDT
    fired = _run("30 2 * * *", NY, datetime(2026, 3, 7, 12, tzinfo=NY), 3)
    local = [t.astimezone(NY) for t in fired]
    assert [t.date().day for t in local] == [8, 9, 10]
    assert local[0].hour == 3 and local[0].minute == 0
    assert local[1].hour == 2 and local[1].minute == 30
    assert all(t.tzinfo == UTC for t in fired)


def test_fall_back_overlap_fires_once() -> None:
    # 2026-11-01: 01:00-02:00 happens twice; a 01:30 daily cron fires once that day
    fired = _run("30 1 * * *", NY, datetime(2026, 10, 31, 12, tzinfo=NY), 3)
    days = [t.astimezone(NY).date().day for t in fired]
    assert days == [1, 2, 3]
    assert fired[0] == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # the first 01:30 (EDT)


def test_next_is_strictly_after_and_collapses_missed_slots() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert next_after("*/5 * * * *", ZoneInfo("UTC"), now) == now + timedelta(minutes=5)
    # after ten hours down, the next slot counts from now: one firing, not 120
    assert next_after("*/5 * * * *", ZoneInfo("UTC"), now + timedelta(hours=10, seconds=1)) == (
        now + timedelta(hours=10, minutes=5)
    )


def test_timezone_shifts_the_slot() -> None:
    now = datetime(2026, 6, 1, 0, 0, tzinfo=UTC)
    assert next_after("0 9 * * *", ZoneInfo("Asia/Tokyo"), now) == datetime(
        2026, 6, 2, 0, 0, tzinfo=UTC
    )


@pytest.mark.parametrize(
    "bad",
    ["", "bad", "* * * *", "* * * * * *", "61 * * * *", "0 0 30 2 *", "0 0 31 4 *", "@daily"],
)
def test_bad_schedules_are_422(bad: str) -> None:
    with pytest.raises(ValidationFailed):
        validate_schedule(bad)


def test_leap_day_is_valid_and_spaces_normalised() -> None:
    assert validate_schedule(" 0  0 29 2 * ") == "0 0 29 2 *"


@pytest.mark.parametrize("bad", ["Mars/Olympus", "", "../etc/passwd", "/etc/localtime", "x" * 80])
def test_unknown_timezone_is_422(bad: str) -> None:
    with pytest.raises(ValidationFailed):
        parse_timezone(bad)


def test_default_timezone_is_utc() -> None:
    assert parse_timezone(None) == ZoneInfo("UTC")
