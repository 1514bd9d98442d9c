"""Cron expressions read as Vixie cron reads them.

APScheduler 3's ``CronTrigger`` differs from cron where it matters: its weekday
numbers start at Monday, it always ANDs day-of-month with day-of-week, and it
steps days by adding 24 hours, which skips a day after a spring-forward change.
So each field is expanded here into its explicit values (a ``CronSpec``), and
``bot.cron.wall_clock`` finds the times they name for the scheduler.

Day-of-month and day-of-week: when both are restricted (neither starts with
``*``), a day matches if either does; otherwise both must match. ``*/2`` starts
with ``*``, so "0 9 */2 * fri" means odd days that are Fridays, as in cron.

DST, judged by the wall clock in the job's zone (details in ``bot.cron.wall_clock``):

- a wall time skipped by a spring-forward gap fires once, at the first instant
  after the gap (a 02:30 Berlin job runs at 03:00 CEST that day), unless the hour
  field covers all 24 hours: then the skipped times are dropped, as croniter does
  (and Vixie cron for ``*`` hours): "30 * * * *" runs at 01:30 CET, 03:30 CEST;
- a wall time that happens twice at fall-back fires once, at its first
  occurrence, when the hour field names hours, even under a minute wildcard
  ("*/15 2 * * *" runs four times that day; croniter and Vixie cron would run it
  eight). When the hour field is a wildcard (starts with ``*`` or lists all 24
  hours) the job keeps its real-time rhythm through the repeated hour, as in croniter.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """A parsed cron expression: the values each field allows (weekdays 0 = Sunday).

    ``days_or_weekdays``: a day matches if either day field does (both restricted).
    ``fixed_hours``: the hour field names hours (neither ``*...`` nor all 24), so a
    repeated wall time at a fall-back change fires only once.
    """

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
