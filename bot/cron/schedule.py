"""When scheduled jobs run: reading schedules, their APScheduler triggers, fire-time maths.

A schedule is stored as plain text so it survives restarts, in one of three kinds:
``cron`` (five Vixie-cron fields read in a zone, see ``bot.cron.cron_expr``; their
fire times across DST changes are worked out in ``bot.cron.wall_clock``),
``every`` (a fixed interval of real time counted from an anchor instant) and
``at`` (one instant; "after 20m" is stored as the instant it names).

Wall-clock input follows one DST rule: a reading that happens twice means its
first occurrence, and a reading skipped by a spring-forward gap means the first
instant after the gap. Cron jobs with a wildcard hour keep their rhythm in real
time instead (both copies of a repeated hour; skipped times dropped when the hour
field covers all 24 hours); ``bot.cron.wall_clock`` has the details.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from itertools import islice, takewhile
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger  # type: ignore[import-untyped, unused-ignore]
from apscheduler.triggers.date import DateTrigger  # type: ignore[import-untyped, unused-ignore]
from apscheduler.triggers.interval import (  # type: ignore[import-untyped, unused-ignore]
    IntervalTrigger,
)

from bot.core.durations import ScheduleError, format_duration, parse_duration
from bot.cron.cron_expr import CronSpec, CronSyntaxError, parse_cron
from bot.cron.wall_clock import cron_trigger, real_instant

Kind = Literal["cron", "every", "at"]
Misfire = Literal["skip", "run_once"]

_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a job runs, as stored: kind, normalised text, IANA zone and (for every) anchor."""

    kind: Kind
    expr: str
    timezone: str
    anchor: float = 0.0


def parse_schedule(kind: str, value: str, timezone: str, now: datetime) -> Schedule:
    """The schedule a person asked for; ``ScheduleError`` if it is unreadable or never runs."""
    zone = _zone(timezone)
    now = now.astimezone(UTC)
    match kind.strip().lower():
        case "cron":
            return Schedule("cron", _cron(value).text, zone.key)
        case "every":
            seconds = max(1, round(parse_duration(value).total_seconds()))
            return Schedule("every", str(seconds), zone.key, now.timestamp())
        case "after":
            return Schedule("at", _iso_utc(now + parse_duration(value)), zone.key)
        case "at":
            return Schedule("at", _iso_utc(_parse_at(value, zone, now)), zone.key)
    raise ScheduleError(f"the schedule kind '{kind}' is not known; use cron, every, at or after")


def make_trigger(schedule: Schedule) -> BaseTrigger:
    """The trigger to hand to ``AsyncIOScheduler.add_job`` for ``schedule``."""
    zone = _zone(schedule.timezone)
    if schedule.kind == "cron":
        return cron_trigger(_cron(schedule.expr), zone)
    if schedule.kind == "every":
        seconds = float(schedule.expr)
        start = datetime.fromtimestamp(schedule.anchor + seconds, zone)
        return IntervalTrigger(seconds=seconds, start_date=start, timezone=zone)
    run_date = datetime.fromisoformat(schedule.expr).astimezone(zone)
    return DateTrigger(run_date=run_date, timezone=zone)


def next_run(schedule: Schedule, after: datetime) -> datetime | None:
    """The first fire time strictly after ``after``, or None if the schedule is spent."""
    return next(_fire_times(schedule, after), None)


def runs_between(
    schedule: Schedule, start: datetime, end: datetime, limit: int = 1000
) -> list[datetime]:
    """Fire times ``t`` with ``start < t <= end``, at most ``limit`` of them."""
    last = end.astimezone(UTC)
    upcoming = takewhile(lambda fire: fire <= last, _fire_times(schedule, start))
    return list(islice(upcoming, max(limit, 0)))


def describe(schedule: Schedule) -> str:
    """A short text for people: "cron 0 9 * * mon-fri (Europe/Berlin)", "every 30m"."""
    if schedule.kind == "cron":
        return f"cron {schedule.expr} ({schedule.timezone})"
    if schedule.kind == "every":
        return f"every {format_duration(float(schedule.expr))}"
    local = datetime.fromisoformat(schedule.expr).astimezone(_zone(schedule.timezone))
    shown = f"{local:%Y-%m-%d %H:%M:%S}" if local.second else f"{local:%Y-%m-%d %H:%M}"
    return f"once at {shown} ({schedule.timezone})"


def misfire_decision(
    policy: Misfire, scheduled_for: datetime, now: datetime, grace: timedelta
) -> Literal["run", "skip"]:
    """Whether a run missed while the daemon was down should still happen now."""
    late = now.astimezone(UTC) - scheduled_for.astimezone(UTC)
    if policy == "run_once" and late <= grace:
        return "run"
    return "skip"


def _fire_times(schedule: Schedule, after: datetime) -> Iterator[datetime]:
    # Steps the trigger as APScheduler's scheduler does after each run:
    # get_next_fire_time(previous run, a "now" no earlier than that run). Times are
    # compared in UTC because Python compares two datetimes of one zone by wall
    # clock, which gets the repeated hour at a DST fall-back wrong.
    after = after.astimezone(UTC)
    trigger = make_trigger(schedule)
    fire: datetime | None = trigger.get_next_fire_time(None, after)
    while fire is not None:
        if fire > after:
            yield fire
        fire = trigger.get_next_fire_time(fire, fire)


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"the time zone '{name}' is not known; "
            "use a name like Europe/Berlin or America/New_York"
        ) from None


def _cron(text: str) -> CronSpec:
    try:
        return parse_cron(text)
    except CronSyntaxError as exc:
        raise ScheduleError(str(exc)) from None


def _parse_at(value: str, zone: ZoneInfo, now: datetime) -> datetime:
    text = value.strip()
    clock = _CLOCK.fullmatch(text)
    if clock:
        hour, minute, second = (int(group or 0) for group in clock.groups())
        if hour > 23 or minute > 59 or second > 59:
            raise ScheduleError(
                f"the time '{text}' is not a time of day; "
                "hours go from 0 to 23 and minutes from 0 to 59"
            )
        today = now.astimezone(zone).date()
        when = real_instant(datetime.combine(today, time(hour, minute, second)), zone)
        if when <= now:
            tomorrow = today + timedelta(days=1)
            when = real_instant(datetime.combine(tomorrow, time(hour, minute, second)), zone)
        return when
    if _DATE_ONLY.fullmatch(text):
        raise ScheduleError(f"the time '{text}' has no time of day; write it like {text} 19:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ScheduleError(
            f"the time '{text}' is not understood; write it like 19:00 or 2026-11-21 19:00"
        ) from None
    when = real_instant(parsed, zone) if parsed.tzinfo is None else parsed
    if when <= now:
        raise ScheduleError(f"the time '{text}' has already passed; give a time in the future")
    return when


def _iso_utc(instant: datetime) -> str:
    exact = instant.astimezone(UTC)
    if exact.microsecond:
        exact = exact.replace(microsecond=0) + timedelta(seconds=1)
    return exact.isoformat()
