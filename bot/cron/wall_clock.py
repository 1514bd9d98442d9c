"""When a cron expression fires: its wall-clock times in a zone, as real instants.

APScheduler 3's ``CronTrigger`` moves from one day to the next by adding 24 hours
of real time, so after a spring-forward change it lands on 01:00 instead of 00:00
and skips that day's midnight run (APScheduler issues #529 and #606). PinClaw
keeps APScheduler for the scheduling, but ``WallClockTrigger`` works out the fire
times itself: it walks the wall-clock minutes the expression names in calendar
order (year, month, day, hour, minute; never by adding durations) and turns each
into the real instant it means in the zone:

- a reading that happens once is that instant;
- a reading lost to a spring-forward gap (02:30 in Berlin on the last Sunday of
  March) fires once at the first instant after the gap (03:00 CEST), however many
  of the job's times fell into it; but if the hour field covers all 24 hours
  ("30 * * * *", "*/15 * * * *") the lost times are dropped and the job keeps its
  rhythm in real time. Both as croniter does (and Vixie cron for "*" hours).
- a reading that happens twice at a fall-back change (02:30 in Berlin on the last
  Sunday of October) fires at both instants when the hour field starts with "*"
  or covers all 24 hours, so those jobs keep their real-time rhythm, and only at
  the first otherwise: "30 2 * * *" runs once that day, "*/15 2 * * *" four
  times. Here PinClaw differs from croniter on purpose: croniter runs a job
  with named hours at both instants (a daily 02:30 job twice that night).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from calendar import monthrange
from collections.abc import Iterator, Sequence
from datetime import MAXYEAR, UTC, datetime, timedelta, tzinfo

from apscheduler.triggers.base import BaseTrigger  # type: ignore[import-untyped, unused-ignore]

from bot.cron.cron_expr import CronSpec

_TICK = timedelta(microseconds=1)
# The Gregorian calendar repeats its dates and weekdays every 400 years, so an
# expression with no match in that long never matches again.
_CYCLE_YEARS = 400


class WallClockTrigger(BaseTrigger):  # type: ignore[misc, unused-ignore]
    """The APScheduler trigger for a cron expression in a zone, with the DST rules above."""

    __slots__ = ("spec", "zone")

    def __init__(self, spec: CronSpec, zone: tzinfo) -> None:
        self.spec = spec
        self.zone = zone

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        """The first fire time at or after ``now`` and after ``previous_fire_time``.

        Times are compared in UTC: Python compares two datetimes of one zone by their
        wall-clock readings, which gets the repeated hour of a fall-back change wrong.
        """
        after = now.astimezone(UTC) - _TICK
        if previous_fire_time is not None:
            after = max(after, previous_fire_time.astimezone(UTC))
        return next_fire_after(self.spec, self.zone, after)

    def __str__(self) -> str:
        return f"cron[{self.spec.text} {self.zone}]"

    def __repr__(self) -> str:
        return f"<WallClockTrigger {self.spec.text!r} in {self.zone}>"


def next_fire_after(spec: CronSpec, zone: tzinfo, after: datetime) -> datetime | None:
    """The first instant strictly after ``after`` at which ``spec`` fires in ``zone``.

    Each wall-clock match ``w`` has a first instant ``first(w)`` (the gap end for a
    reading lost to a gap) and a second one (the same, except in a repeated hour).
    Both grow with ``w``, so the earliest ``first`` after ``after`` is the first one
    found walking forward from ``after``'s own reading, and the earliest ``second``
    is found on the way there if the walk starts one fold earlier. The walk stops at
    the first ``w`` whose first instant is after ``after``: a few steps, or about
    an hour of matches when ``after`` lies in a repeated hour.
    """
    after = after.astimezone(UTC)
    local = after.astimezone(zone)
    reading = local.replace(tzinfo=None, fold=0)
    both_copies = not spec.fixed_hours
    if both_copies:
        reading -= _fold_size(reading, zone)
    drop_gap_times = len(spec.hours) == 24
    earliest_second: datetime | None = None
    for wall in wall_times(spec, reading):
        instants = _instants(wall, zone, drop_gap_times=drop_gap_times)
        if instants is None:
            continue
        first, second = instants
        if both_copies and earliest_second is None and second > after:
            earliest_second = second
        if first > after:
            if earliest_second is not None:
                first = min(first, earliest_second)
            return first.astimezone(zone)
    return None


def wall_times(spec: CronSpec, start: datetime) -> Iterator[datetime]:
    """The naive wall-clock minutes from ``start`` on that ``spec`` names, in order.

    Bounded: it ends after 400 years (a whole calendar cycle) or at the year 9998.
    """
    start = start.replace(second=0, microsecond=0)
    hours = sorted(spec.hours)
    minutes = sorted(spec.minutes)
    months = sorted(spec.months)
    last_year = min(start.year + _CYCLE_YEARS, MAXYEAR - 1)
    for year in range(start.year, last_year + 1):
        this_year = year == start.year
        for month in _tail(months, start.month if this_year else 1):
            this_month = this_year and month == start.month
            for day in _days(spec, year, month, start.day if this_month else 1):
                today = this_month and day == start.day
                for hour in _tail(hours, start.hour if today else 0):
                    now_hour = today and hour == start.hour
                    for minute in _tail(minutes, start.minute if now_hour else 0):
                        yield datetime(year, month, day, hour, minute)


def real_instant(wall: datetime, zone: tzinfo) -> datetime:
    """The instant a wall-clock reading in ``zone`` means (for one lost to a DST gap: its end).

    ``wall`` is naive or already in ``zone``; its ``fold`` picks between the two
    instants of a repeated reading (0, the default, is the first).
    """
    local = wall.replace(tzinfo=zone)
    normal = local.astimezone(UTC).astimezone(zone)
    if normal.replace(tzinfo=None) == local.replace(tzinfo=None):
        return normal
    return _gap_end(local).astimezone(zone)


def _tail(values: Sequence[int], low: int) -> Sequence[int]:
    return values[bisect_left(values, low) :]


def _days(spec: CronSpec, year: int, month: int, low: int) -> Iterator[int]:
    """The days of a month, from ``low`` on, that the day-of-month and weekday fields allow."""
    first_weekday, length = monthrange(year, month)  # Monday = 0
    sunday_first = (first_weekday + 1) % 7  # weekday of the 1st, Sunday = 0
    if spec.days_or_weekdays or len(spec.days) == 31:
        candidates: Sequence[int] = range(low, length + 1)
    else:
        candidates = [day for day in _tail(sorted(spec.days), low) if day <= length]
    for day in candidates:
        on_day = day in spec.days
        on_weekday = (sunday_first + day - 1) % 7 in spec.weekdays
        if (on_day or on_weekday) if spec.days_or_weekdays else (on_day and on_weekday):
            yield day


def _fold_size(reading: datetime, zone: tzinfo) -> timedelta:
    """How far a repeated reading's second instant lies after its first (else zero)."""
    first = reading.replace(tzinfo=zone, fold=0).utcoffset()
    second = reading.replace(tzinfo=zone, fold=1).utcoffset()
    if first is None or second is None:
        return timedelta(0)
    return max(first - second, timedelta(0))


def _instants(
    wall: datetime, zone: tzinfo, *, drop_gap_times: bool
) -> tuple[datetime, datetime] | None:
    """The first and second instant (UTC) of a naive reading; None if a gap drops it.

    Once-only readings give the same instant twice, and so do readings lost to a
    gap (its end). Per PEP 495, fold=0 reads a repeated time with the offset from
    before the change (the earlier instant), and a time in a gap likewise, which
    puts it after the gap, while fold=1 puts it before.
    """
    first = wall.replace(tzinfo=zone).astimezone(UTC)
    second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    if first <= second:
        return first, second
    if drop_gap_times:
        return None
    end = _gap_end(wall.replace(tzinfo=zone))
    return end, end


def _gap_end(local: datetime) -> datetime:
    """The first instant (UTC) after the gap that the reading ``local`` falls in."""
    zone = local.tzinfo
    # fold=1 reads the wall time with the new offset (an instant before the change)
    # and fold=0 with the old one (an instant after it); the change lies between.
    early = math.floor(local.replace(fold=1).timestamp())
    late = math.ceil(local.replace(fold=0).timestamp())
    new_offset = datetime.fromtimestamp(late, zone).utcoffset()
    while late - early > 1:  # about 12 halvings for an hour
        middle = (early + late) // 2
        if datetime.fromtimestamp(middle, zone).utcoffset() == new_offset:
            late = middle
        else:
            early = middle
    return datetime.fromtimestamp(late, UTC)


def cron_trigger(spec: CronSpec, zone: tzinfo) -> WallClockTrigger:
    """The APScheduler trigger that fires on ``spec`` in ``zone``, with the DST rules above."""
    return WallClockTrigger(spec, zone)
