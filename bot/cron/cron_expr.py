"""Cron expressions read as Vixie cron reads them, and the APScheduler trigger for them.

APScheduler 3's own cron fields differ from cron where it matters: its weekday
numbers start at Monday, and it always ANDs day-of-month with day-of-week. So each
field is expanded here into its explicit values, and the CronTriggers are built
from those (weekdays by name).

Day-of-month and day-of-week: when both are restricted (neither starts with
``*``), a day matches if either does; otherwise both must match. ``*/2`` starts
with ``*``, so "0 9 */2 * fri" means odd days that are Fridays, as in cron.

DST, judged by the wall clock in the job's zone:

- a wall time skipped by a spring-forward gap fires once, at the first instant
  after the gap (a 02:30 Berlin job runs at 03:00 CEST that day), whatever the
  hour field says (Vixie cron drops such times for wildcard-hour jobs);
- a wall time that happens twice at fall-back fires once, at its first
  occurrence, when the hour field names hours, even under a minute wildcard
  ("*/15 2 * * *" runs four times that day; Vixie cron would run it eight).
  When the hour field is a wildcard (starts with ``*`` or lists all 24 hours)
  the job keeps its real-time rhythm through the repeated hour, as in Vixie cron.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from apscheduler.triggers.base import BaseTrigger  # type: ignore[import-untyped, unused-ignore]
from apscheduler.triggers.combining import OrTrigger  # type: ignore[import-untyped, unused-ignore]
from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped, unused-ignore]

MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_TICK = timedelta(microseconds=1)
_LONGEST_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class CronSyntaxError(ValueError):
    """A cron expression that cannot run; ``str(exc)`` is one plain sentence."""


@dataclass(frozen=True, slots=True)
class _Field:
    label: str
    unit: str
    plural: str
    low: int
    high: int
    noun: str = "a number"
    names: tuple[str, ...] = ()


_FIELDS = (
    _Field("minute", "minute", "minutes", 0, 59),
    _Field("hour", "hour", "hours", 0, 23),
    _Field("day-of-month", "day of month", "days of the month", 1, 31),
    _Field("month", "month", "months", 1, 12, "a month", MONTH_NAMES),
    _Field("day-of-week", "day of week", "days of the week", 0, 7, "a day", DAY_NAMES),
)


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A parsed cron expression: the values each field allows (weekdays 0 = Sunday)."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_or_weekdays: bool
    fixed_hours: bool


def parse_cron(text: str) -> CronSpec:
    """Read five cron fields or an @macro; raise ``CronSyntaxError`` naming the bad part."""
    normal = " ".join(text.lower().split())
    if not normal:
        raise CronSyntaxError("the cron expression is empty; write five fields like '0 9 * * mon'")
    if normal.startswith("@") and normal not in MACROS:
        raise CronSyntaxError(
            f"the cron shortcut '{normal}' is not known; "
            "use @hourly, @daily, @weekly, @monthly or @yearly"
        )
    parts = MACROS.get(normal, normal).split()
    if len(parts) != 5:
        raise CronSyntaxError(
            f"the cron expression '{normal}' has {len(parts)} field{'s' * (len(parts) != 1)} "
            "but needs 5: minute, hour, day of month, month and day of week"
        )
    minutes, hours, days, months, weekdays = (
        _expand(part, field, normal) for part, field in zip(parts, _FIELDS, strict=True)
    )
    spec = CronSpec(
        text=normal,
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(day % 7 for day in weekdays),
        days_or_weekdays=not (parts[2].startswith("*") or parts[4].startswith("*")),
        fixed_hours=not parts[1].startswith("*") and len(hours) < 24,
    )
    if not spec.days_or_weekdays and not _days_fit(spec):
        raise CronSyntaxError(
            f"the cron expression '{normal}' never runs, "
            f"because none of its months has {min(days)} days"
        )
    return spec


def _expand(text: str, field: _Field, expr: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        values.update(_expand_part(part, field, expr, text))
    return frozenset(values)


def _expand_part(part: str, field: _Field, expr: str, whole: str) -> range:
    base, slash, step_text = part.partition("/")
    step = 1
    if slash:
        if not (step_text.isascii() and step_text.isdigit()):
            raise CronSyntaxError(
                f"the {field.label} field '{part}' has a step that is not a whole number; "
                "write steps like */5"
            )
        step = int(step_text)
        if step == 0:
            raise CronSyntaxError(
                f"the {field.label} field '{part}' has a step of 0; steps must be 1 or more"
            )
    if base == "*":
        return range(field.low, field.high + 1, step)
    start, dash, end = base.partition("-")
    first = _value(start, field, expr, whole, range_end=False)
    if dash:
        last = _value(end, field, expr, whole, range_end=True)
    else:
        last = field.high if slash else first
    if first > last:
        raise CronSyntaxError(
            f"the {field.label} field '{part}' goes backwards; put the smaller value first, "
            f"or write {first}-{field.high},{field.low}-{last} to wrap around"
        )
    return range(first, last + 1, step)


def _value(token: str, field: _Field, expr: str, whole: str, *, range_end: bool) -> int:
    if token.isascii() and token.isdigit():
        number = int(token)
        if not field.low <= number <= field.high:
            raise CronSyntaxError(
                f"the cron expression '{expr}' has {field.unit} {number}; "
                f"{field.plural} go from {field.low} to {field.high}"
            )
        return number
    if token in field.names:
        # "sat-sun" means 6-7: Sunday closing a range is day 7, not a backwards 6-0.
        if range_end and token == "sun":
            return 7
        return field.low + field.names.index(token)
    hint = f" or {field.names[0]}-{field.names[-1]}" if field.names else ""
    raise CronSyntaxError(
        f"the {field.label} field '{token or whole}' is not {field.noun}; "
        f"use {field.low}-{field.high}{hint}"
    )


def _days_fit(spec: CronSpec) -> bool:
    return min(spec.days) <= max(_LONGEST_MONTH[month] for month in spec.months)


def _listing(values: frozenset[int], low: int, high: int) -> str:
    if len(values) == high - low + 1:
        return "*"
    return ",".join(str(value) for value in sorted(values))


def cron_trigger(spec: CronSpec, zone: tzinfo) -> WallClockTrigger:
    """The APScheduler trigger that fires on ``spec`` in ``zone``, with the DST rules above."""
    shared: dict[str, Any] = {
        "minute": _listing(spec.minutes, 0, 59),
        "hour": _listing(spec.hours, 0, 23),
        "month": _listing(spec.months, 1, 12),
        "timezone": zone,
    }
    day = _listing(spec.days, 1, 31)
    weekday = ",".join(DAY_NAMES[number] for number in sorted(spec.weekdays))
    if len(spec.weekdays) == 7:
        weekday = "*"
    if not spec.days_or_weekdays:
        inner = CronTrigger(day=day, day_of_week=weekday, **shared)
    elif _days_fit(spec):
        by_day = CronTrigger(day=day, **shared)
        inner = OrTrigger([by_day, CronTrigger(day_of_week=weekday, **shared)])
    else:
        # The day-of-month half never matches (say day 31 in February) and APScheduler
        # would search to the year 9999 for it on every call, so leave it out.
        inner = CronTrigger(day_of_week=weekday, **shared)
    return WallClockTrigger(inner, zone, spec.text, once_per_wall_time=spec.fixed_hours)


class WallClockTrigger(BaseTrigger):  # type: ignore[misc, unused-ignore]
    """Fires when an inner cron trigger does, moved and thinned by PinClaw's DST rules."""

    __slots__ = ("inner", "label", "once_per_wall_time", "zone")

    def __init__(self, inner: Any, zone: tzinfo, label: str, *, once_per_wall_time: bool) -> None:
        self.inner = inner
        self.zone = zone
        self.label = label
        self.once_per_wall_time = once_per_wall_time

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        """The next fire time after ``previous_fire_time``, or from ``now`` if there is none."""
        if previous_fire_time is not None:
            # CronTrigger hands back previous_fire_time itself when ``now`` equals it, it
            # is written in another zone (say UTC) and it falls in a repeated hour: PEP 495
            # makes such datetimes unequal across zones, so its "step past it" check misses.
            now = max(now.astimezone(UTC), previous_fire_time.astimezone(UTC) + _TICK)
        fire: datetime | None = self.inner.get_next_fire_time(previous_fire_time, now)
        while fire is not None:
            if not (self.once_per_wall_time and _is_repeat(fire, self.zone)):
                return real_instant(fire, self.zone)
            fire = self.inner.get_next_fire_time(fire, fire.astimezone(UTC) + _TICK)
        return None

    def __str__(self) -> str:
        return f"cron[{self.label} {self.zone}]"

    def __repr__(self) -> str:
        return f"<WallClockTrigger {self.label!r} in {self.zone} inner={self.inner!r}>"


def _is_repeat(fire: datetime, zone: tzinfo) -> bool:
    local = fire.astimezone(UTC).astimezone(zone)
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def real_instant(wall: datetime, zone: tzinfo) -> datetime:
    """The instant a wall-clock reading in ``zone`` means (for one lost to a DST gap: its end).

    ``wall`` is naive or already in ``zone``; its ``fold`` picks between the two
    instants of a repeated reading (0, the default, is the first).
    """
    local = wall.replace(tzinfo=zone)
    normal = local.astimezone(UTC).astimezone(zone)
    if normal.replace(tzinfo=None) == local.replace(tzinfo=None):
        return normal
    # In a gap, fold=1 reads the wall time with the new offset (an instant before the
    # change) and fold=0 with the old one (an instant after it); the change lies between.
    early = math.floor(local.replace(fold=1).timestamp())
    late = math.ceil(local.replace(fold=0).timestamp())
    new_offset = datetime.fromtimestamp(late, zone).utcoffset()
    while late - early > 1:
        middle = (early + late) // 2
        if datetime.fromtimestamp(middle, zone).utcoffset() == new_offset:
            late = middle
        else:
            early = middle
    return datetime.fromtimestamp(late, zone)
