"""Cron fire times across daylight-saving changes, with croniter as the oracle.

APScheduler 3.11's ``CronTrigger`` steps days by adding 24 hours, so a midnight
job skipped the day after a spring-forward change. PinClaw's ``WallClockTrigger``
walks the wall clock itself; here its fire times are compared with croniter's for
a corpus of expressions in three zones, from a few days before each clock change
of 2025 and 2026 until well after it.

croniter reads a few things differently from PinClaw. Each difference is applied
to croniter's answer here, in the open, and pinned by a test of its own:

1. Day-of-month with day-of-week: PinClaw, like Vixie cron, ORs them only when
   neither field starts with ``*``. croniter's ``day_or=True`` ORs whenever both
   are restricted after expansion, so ``0 9 */2 * fri`` would be "odd days or
   Fridays" there; croniter gets ``day_or=False`` (AND) for such expressions.
2. Weekday steps: ``1/2`` is ``1-7/2`` in PinClaw and Vixie cron (Mon, Wed, Fri,
   Sun) but ``1-6/2`` in croniter; croniter is given the explicit list instead.
3. The repeated hour at fall-back: when the hour field names hours (neither
   ``*...`` nor all 24), PinClaw fires a repeated wall time once, at its first
   occurrence; croniter fires it at both. Those second occurrences are removed
   from croniter's list. Jobs with a wildcard hour fire in both copies in both.

The spring gap needs no adjustment: a time lost to the gap fires once at the gap's
end, except that jobs whose hour field covers all 24 hours drop it, in both.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter  # type: ignore[import-untyped, unused-ignore]
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.cron.cron_expr import CronSpec, parse_cron
from bot.cron.schedule import Schedule, make_trigger, next_run, runs_between

BERLIN = ZoneInfo("Europe/Berlin")
ZONES = ("Europe/Berlin", "America/New_York", "Australia/Sydney")
YEARS = (2025, 2026)
DAY = timedelta(days=1)
HOUR = timedelta(hours=1)
LEAD = 4 * DAY  # how long before (and at least how long after) each change to compare
AFTER_CHANGE = 3  # and at least this many fires after the change

CORPUS = (
    # every minute, every few minutes, hourly
    "* * * * *",
    "*/5 * * * *",
    "50/5 * * * *",
    "*/15 * * * *",
    "0 * * * *",
    "30 * * * *",
    "@hourly",
    "0 0-23 * * *",
    "0 */1 * * *",
    "45 */2 * * *",
    "15 */3 * * *",
    # macros
    "@daily",
    "@midnight",
    "@weekly",
    "@monthly",
    "@yearly",
    "@annually",
    # times of day, in and around the gap and the repeated hour of each zone
    "0 0 * * *",
    "30 0 * * *",
    "30 1 * * *",
    "59 1 * * *",
    "0 2 * * *",
    "30 2 * * *",
    "59 2 * * *",
    "0 3 * * *",
    "30 3 * * *",
    "0,30 2 * * *",
    "*/15 2 * * *",
    "*/20 1,2 * * *",
    "0 1-3 * * *",
    "30 1-3 * * *",
    "0,30 1,2,3 * * *",
    "5-15/5 8 * * *",
    "0 8,12,18 * * *",
    "0 22 * * *",
    # days of the month, last days of months, leap day
    "0 0 1 * *",
    "0 0 31 * *",
    "0 0 28-31 * *",
    "30 23 30,31 * *",
    "0 12 29 2 *",
    "0 0 1 jan,JUL *",
    "0 0 1 mar-may *",
    "0 2 1-7 * *",
    # days of the week: names, ranges, 7 = Sunday, steps
    "0 9 * * mon-fri",
    "0 9 * * MON,Wed,fri",
    "0 0 * * sat-sun",
    "0 0 * * 5-7",
    "0 2 * * 0",
    "30 2 * * 7",
    "30 1 * * sun",
    "0 0 * * */2",
    "0 9 * * 1/2",
    "*/15 9-17 * * 1-5",
    "0 3 * mar,apr,oct,nov sun",
    # day-of-month with day-of-week: OR when both are restricted, else AND
    "0 9 13 * fri",
    "0 0 1-7 * mon",
    "30 2 1,15 * sun",
    "0 9 */2 * fri",
    "0 9 13 * */1",
)
# How long before and after each change dense expressions are compared (else LEAD).
DENSE = {
    "* * * * *": 2 * HOUR,
    "*/5 * * * *": 6 * HOUR,
    "50/5 * * * *": 12 * HOUR,
    "*/15 * * * *": DAY,
    "*/15 2 * * *": 2 * DAY,
    "*/15 9-17 * * 1-5": 2 * DAY,
}
# Difference 2: the same times in croniter's reading of weekday steps.
CRONITER_TEXT = {"0 9 * * 1/2": "0 9 * * 0,1,3,5"}


@cache
def changes(zone_name: str) -> tuple[datetime, ...]:
    """The instants (UTC) at which the zone's UTC offset changes in ``YEARS``."""
    zone = ZoneInfo(zone_name)
    found: list[datetime] = []
    instant = datetime(YEARS[0], 1, 1, tzinfo=UTC)
    offset = utc_offset(instant, zone)
    while instant.year <= YEARS[-1]:
        instant += HOUR
        now_offset = utc_offset(instant, zone)
        if now_offset != offset:
            found.append(instant)
            offset = now_offset
    return tuple(found)


def utc_offset(instant: datetime, zone: ZoneInfo) -> timedelta:
    """The zone's UTC offset at ``instant``."""
    offset = instant.astimezone(zone).utcoffset()
    assert offset is not None
    return offset


def is_second_copy(fire: datetime, zone: ZoneInfo) -> bool:
    """Whether ``fire`` is the later of two instants with the same wall-clock reading."""
    local = fire.astimezone(zone)
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def croniter_times(spec: CronSpec, zone: ZoneInfo, after: datetime) -> Iterator[datetime]:
    """croniter's fire times after ``after``, with the three differences applied."""
    text = CRONITER_TEXT.get(spec.text, spec.text)
    # Difference 1: AND the day fields unless PinClaw ORs them.
    times = croniter(text, after.astimezone(zone), day_or=spec.days_or_weekdays)
    while True:
        fire: datetime = times.get_next(datetime)
        # Difference 3: named hours fire once in a repeated hour.
        if not (spec.fixed_hours and is_second_copy(fire, zone)):
            yield fire.astimezone(UTC)


def pinclaw_times(schedule: Schedule, after: datetime) -> Iterator[datetime]:
    """PinClaw's fire times after ``after``, one ``next_run`` at a time."""
    fire = next_run(schedule, after)
    while fire is not None:
        yield fire.astimezone(UTC)
        fire = next_run(schedule, fire)


def around(times: Iterator[datetime], change: datetime, lead: timedelta) -> list[datetime]:
    """Fire times until ``lead`` after ``change`` and at least AFTER_CHANGE after it."""
    taken: list[datetime] = []
    for fire in times:
        taken.append(fire)
        if fire > change + lead and sum(t > change for t in taken) >= AFTER_CHANGE:
            return taken
    return taken


def label(fires: list[datetime], zone: ZoneInfo) -> list[str]:
    """Fire times as the zone's wall clock shows them, with their UTC offsets."""
    return [fire.astimezone(zone).strftime("%Y-%m-%d %H:%M%z") for fire in fires]


@pytest.mark.parametrize("zone_name", ZONES)
@pytest.mark.parametrize("expr", CORPUS)
def test_fire_times_agree_with_croniter_across_both_changes(expr: str, zone_name: str) -> None:
    zone = ZoneInfo(zone_name)
    spec = parse_cron(expr)
    schedule = Schedule("cron", spec.text, zone_name)
    lead = DENSE.get(expr, LEAD)
    assert len(changes(zone_name)) == 2 * len(YEARS)
    for change in changes(zone_name):
        start = change - lead
        ours = around(pinclaw_times(schedule, start), change, lead)
        theirs = around(croniter_times(spec, zone, start), change, lead)
        assert label(ours, zone) == label(theirs, zone), f"{expr} in {zone_name} at {change}"


def test_the_corpus_is_large_and_covers_both_changes() -> None:
    assert len(set(CORPUS)) == len(CORPUS) >= 40
    for zone_name in ZONES:
        zone = ZoneInfo(zone_name)
        for year in YEARS:
            jumps = [
                utc_offset(change, zone) - utc_offset(change - HOUR, zone)
                for change in changes(zone_name)
                if change.year == year
            ]
            assert sorted(jumps) == [-HOUR, HOUR], (zone_name, year)  # spring and autumn


# The reported cases: midnight jobs skipped the day after the spring change.


@pytest.mark.parametrize(
    ("expr", "zone_name", "start", "expected"),
    [
        (
            "@daily",
            "Europe/Berlin",
            datetime(2025, 3, 29, 12, tzinfo=UTC),
            ["2025-03-30 00:00+0100", "2025-03-31 00:00+0200", "2025-04-01 00:00+0200"],
        ),
        (
            "@daily",
            "Europe/Berlin",
            datetime(2026, 3, 28, 12, tzinfo=UTC),
            ["2026-03-29 00:00+0100", "2026-03-30 00:00+0200", "2026-03-31 00:00+0200"],
        ),
        (
            "0 0 1 * *",
            "Europe/Berlin",
            datetime(2025, 3, 15, tzinfo=UTC),
            ["2025-04-01 00:00+0200", "2025-05-01 00:00+0200", "2025-06-01 00:00+0200"],
        ),
        (
            "0 0 1 * *",
            "Europe/Berlin",
            datetime(2026, 3, 15, tzinfo=UTC),
            ["2026-04-01 00:00+0200", "2026-05-01 00:00+0200", "2026-06-01 00:00+0200"],
        ),
        (
            "@daily",
            "America/New_York",
            datetime(2025, 3, 8, 12, tzinfo=UTC),
            ["2025-03-09 00:00-0500", "2025-03-10 00:00-0400", "2025-03-11 00:00-0400"],
        ),
        (
            "@monthly",
            "America/New_York",
            datetime(2026, 3, 1, 12, tzinfo=UTC),
            ["2026-04-01 00:00-0400", "2026-05-01 00:00-0400", "2026-06-01 00:00-0400"],
        ),
        (
            "@daily",
            "Australia/Sydney",
            datetime(2025, 10, 4, tzinfo=UTC),
            ["2025-10-05 00:00+1000", "2025-10-06 00:00+1100", "2025-10-07 00:00+1100"],
        ),
    ],
)
def test_midnight_jobs_run_every_day_after_the_spring_change(
    expr: str, zone_name: str, start: datetime, expected: list[str]
) -> None:
    schedule = Schedule("cron", parse_cron(expr).text, zone_name)
    fires = runs_between(schedule, start, start + timedelta(days=120), limit=3)
    assert label(fires, ZoneInfo(zone_name)) == expected


def test_the_scheduler_steps_a_midnight_job_over_the_spring_change() -> None:
    trigger = make_trigger(Schedule("cron", "0 0 * * *", "Europe/Berlin"))
    fire = trigger.get_next_fire_time(None, datetime(2025, 3, 29, 12, tzinfo=UTC))
    fires = []
    for _ in range(4):
        fires.append(fire)
        fire = trigger.get_next_fire_time(fire, fire.astimezone(UTC) + timedelta(seconds=3))
    assert [f.strftime("%m-%d %H:%M") for f in fires] == [
        "03-30 00:00",
        "03-31 00:00",
        "04-01 00:00",
        "04-02 00:00",
    ]


# Each difference from croniter, pinned where it shows.


def test_named_hours_fire_once_in_the_repeated_hour_where_croniter_fires_twice() -> None:
    start = datetime(2026, 10, 24, 12, tzinfo=UTC)
    raw = croniter("30 2 * * *", start.astimezone(BERLIN))
    theirs = [raw.get_next(datetime) for _ in range(3)]
    assert label(theirs, BERLIN) == [
        "2026-10-25 02:30+0200",
        "2026-10-25 02:30+0100",
        "2026-10-26 02:30+0100",
    ]
    ours = runs_between(Schedule("cron", "30 2 * * *", "Europe/Berlin"), start, start + 2 * DAY)
    assert label(ours, BERLIN) == ["2026-10-25 02:30+0200", "2026-10-26 02:30+0100"]


def test_wildcard_hours_fire_in_both_copies_of_the_repeated_hour_as_croniter_does() -> None:
    new_york = ZoneInfo("America/New_York")
    start = datetime(2026, 11, 1, 0, 50, tzinfo=new_york)
    schedule = Schedule("cron", "*/30 * * * *", "America/New_York")
    ours = runs_between(schedule, start, start + 3 * HOUR)
    raw = croniter("*/30 * * * *", start)
    assert label(ours, new_york) == label([raw.get_next(datetime) for _ in ours], new_york)
    assert label(ours, new_york)[:4] == [
        "2026-11-01 01:00-0400",
        "2026-11-01 01:30-0400",
        "2026-11-01 01:00-0500",
        "2026-11-01 01:30-0500",
    ]


@pytest.mark.parametrize(
    ("expr", "zone_name", "start", "expected"),
    [
        # Named hours: a time lost to the gap fires once, at the gap's end.
        ("30 2 * * *", "Europe/Berlin", (2026, 3, 29, 1), ["03:00+0200", "02:30+0200"]),
        ("*/15 2 * * *", "America/New_York", (2026, 3, 8, 1), ["03:00-0400", "02:00-0400"]),
        ("0 2 * * *", "Australia/Sydney", (2025, 10, 5, 1), ["03:00+1100", "02:00+1100"]),
        # A stepped hour does not cover all 24 hours, so it fires at the gap's end too.
        ("45 */2 * * *", "Europe/Berlin", (2026, 3, 29, 1), ["03:00+0200", "04:45+0200"]),
        # All 24 hours: the lost time is dropped and the rhythm kept in real time.
        ("30 * * * *", "Europe/Berlin", (2026, 3, 29, 1), ["01:30+0100", "03:30+0200"]),
        ("45 0-23 * * *", "America/New_York", (2026, 3, 8, 1), ["01:45-0500", "03:45-0400"]),
    ],
)
def test_times_lost_to_the_spring_gap_as_croniter_has_them(
    expr: str, zone_name: str, start: tuple[int, int, int, int], expected: list[str]
) -> None:
    zone = ZoneInfo(zone_name)
    begin = datetime(*start, tzinfo=zone)
    ours = runs_between(Schedule("cron", expr, zone_name), begin, begin + 2 * DAY, limit=2)
    theirs = croniter(expr, begin)
    assert [fire.strftime("%H:%M%z") for fire in ours] == expected
    assert label(ours, zone) == label([theirs.get_next(datetime) for _ in ours], zone)


@pytest.mark.parametrize(
    ("expr", "croniter_days", "our_days"),
    [
        ("0 9 */2 * fri", [1, 2, 3, 5, 7], [9, 23]),  # AND: odd days that are Fridays
        ("0 9 13 * */1", [1, 2, 3, 4, 5], [13]),  # AND: the 13th, any weekday
    ],
)
def test_a_day_field_starting_with_a_star_ands_the_days_unlike_croniter_by_default(
    expr: str, croniter_days: list[int], our_days: list[int]
) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    theirs = croniter(expr, start)  # day_or=True, croniter's default
    assert [theirs.get_next(datetime).day for _ in croniter_days] == croniter_days
    ours = runs_between(Schedule("cron", expr, "UTC"), start, datetime(2026, 1, 31, tzinfo=UTC))
    assert [fire.day for fire in ours] == our_days
    anded = croniter(expr, start, day_or=False)
    assert [anded.get_next(datetime).astimezone(UTC) for _ in ours] == ours


def test_a_weekday_step_runs_to_day_7_unlike_croniter() -> None:
    start = datetime(2026, 1, 4, tzinfo=UTC)  # a Sunday
    theirs = croniter("0 9 * * 1/2", start)
    assert [theirs.get_next(datetime).strftime("%a") for _ in range(4)] == [
        "Mon",
        "Wed",
        "Fri",
        "Mon",
    ]
    ours = runs_between(Schedule("cron", "0 9 * * 1/2", "UTC"), start, start + 7 * DAY)
    assert [fire.strftime("%a") for fire in ours] == ["Sun", "Mon", "Wed", "Fri"]


# Starting anywhere, not only from the previous fire time.


@settings(max_examples=150, deadline=None, database=None)
@given(
    expr=st.sampled_from(
        ["*/20 * * * *", "30 * * * *", "*/15 1,2 * * *", "30 2 * * *", "0 */2 * * *"]
    ),
    zone_name=st.sampled_from(ZONES),
    change_index=st.integers(0, 3),
    seconds=st.integers(-3 * 3600, 3 * 3600),
)
def test_next_run_from_any_instant_near_a_change_agrees_with_croniter(
    expr: str, zone_name: str, change_index: int, seconds: int
) -> None:
    zone = ZoneInfo(zone_name)
    spec = parse_cron(expr)
    after = changes(zone_name)[change_index] + timedelta(seconds=seconds, microseconds=seconds)
    # croniter's walk from a start inside a repeated hour is its own affair, so the
    # oracle is the sequence croniter walks from a day before, cut at ``after``.
    walked = croniter_times(spec, zone, after - DAY)
    expected = next(fire for fire in walked if fire > after)
    fire = next_run(Schedule("cron", spec.text, zone_name), after)
    assert fire is not None
    assert fire.astimezone(UTC) == expected


# Fast enough for the scheduler to call for every job.


def test_next_fire_time_is_fast_even_for_rare_expressions() -> None:
    rare = Schedule("cron", "0 0 29 2 */7", "Europe/Berlin")  # 29 February on a Sunday
    start = datetime(2033, 1, 1, tzinfo=UTC)
    began = time.perf_counter()
    fire = next_run(rare, start)
    assert fire is not None
    assert fire.strftime("%Y-%m-%d %a") == "2060-02-29 Sun"
    theirs = croniter("0 0 29 2 */7", start.astimezone(BERLIN), day_or=False)
    assert label([theirs.get_next(datetime)], BERLIN) == label([fire], BERLIN)
    schedules = [Schedule("cron", parse_cron(expr).text, zone) for expr in CORPUS for zone in ZONES]
    triggers = [make_trigger(schedule) for schedule in schedules]
    instant = changes("Europe/Berlin")[-1] - HOUR
    for trigger in triggers:
        for step in range(10):
            trigger.get_next_fire_time(None, instant + step * 17 * timedelta(minutes=7))
    per_call = (time.perf_counter() - began) / (10 * len(triggers))
    assert per_call < 0.002
