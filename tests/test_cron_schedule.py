"""Trigger maths for scheduled jobs: cron fields, DST, intervals, one-off times, misfires."""

from __future__ import annotations

import asyncio
import pickle
import time
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from apscheduler.schedulers.asyncio import (  # type: ignore[import-untyped, unused-ignore]
    AsyncIOScheduler,
)

from bot.core.durations import ScheduleError, format_duration, parse_duration
from bot.core.errors import UserError
from bot.cron.schedule import (
    Misfire,
    Schedule,
    describe,
    make_trigger,
    misfire_decision,
    next_run,
    parse_schedule,
    runs_between,
)

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 21, 17, 0, tzinfo=UTC)  # 18:00 in Berlin
# Python adds to, subtracts and compares two datetimes of one zone by the wall clock,
# so the DST tests do their arithmetic in UTC.
HOUR = timedelta(hours=1)
HOURS_5 = timedelta(hours=5)


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, sec, tzinfo=UTC)


def cron(expr: str, zone: str = "UTC") -> Schedule:
    return parse_schedule("cron", expr, zone, NOW)


def stamps(fires: list[datetime]) -> list[str]:
    return [fire.astimezone(UTC).strftime("%Y-%m-%d %H:%M") for fire in fires]


@pytest.mark.parametrize(
    ("weekdays", "expected"),
    [
        ("0", ["sun"]),
        ("7", ["sun"]),
        ("sun", ["sun"]),
        ("sat-sun", ["sun", "sat"]),
        ("5-7", ["sun", "fri", "sat"]),
        ("0-2", ["sun", "mon", "tue"]),
        ("thu-sat", ["thu", "fri", "sat"]),
        ("mon-fri", ["mon", "tue", "wed", "thu", "fri"]),
        ("MON,Wed,fri", ["mon", "wed", "fri"]),
        ("*/2", ["sun", "tue", "thu", "sat"]),
        ("1/2", ["sun", "mon", "wed", "fri"]),
        ("*", ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]),
    ],
)
def test_weekdays_count_from_sunday_as_in_cron(weekdays: str, expected: list[str]) -> None:
    week = runs_between(cron(f"0 9 * * {weekdays}"), utc(2026, 1, 4), utc(2026, 1, 11))
    assert [fire.strftime("%a").lower() for fire in week] == expected


@pytest.mark.parametrize(
    ("expr", "days"),
    [
        # Both day fields restricted: a day matches when either does.
        ("0 9 13 * fri", [2, 9, 13, 16, 23, 30]),
        ("0 9 1-7 * mon", [1, 2, 3, 4, 5, 6, 7, 12, 19, 26]),
        ("0 9 1-31 * mon", list(range(1, 32))),
        # One field starts with "*" (even "*/2"): both must match.
        ("0 9 13 * *", [13]),
        ("0 9 * * fri", [2, 9, 16, 23, 30]),
        ("0 9 */2 * fri", [9, 23]),
        ("0 9 */10 * *", [1, 11, 21, 31]),
    ],
)
def test_day_of_month_and_day_of_week_combine_as_in_cron(expr: str, days: list[int]) -> None:
    january = runs_between(cron(expr), utc(2026, 1, 1), utc(2026, 1, 31, 23, 59))
    assert [fire.day for fire in january] == days


def test_an_impossible_day_of_month_still_leaves_its_weekdays() -> None:
    february = runs_between(cron("0 9 31 2 mon"), utc(2026, 2, 1), utc(2026, 2, 28))
    assert [fire.day for fire in february] == [2, 9, 16, 23]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("*/20 * * * *", ["2025-12-31 23:40", "2026-01-01 00:00", "2026-01-01 00:20"]),
        ("50/5 * * * *", ["2025-12-31 23:50", "2025-12-31 23:55", "2026-01-01 00:50"]),
        ("5-15/5 8 * * *", ["2026-01-01 08:05", "2026-01-01 08:10", "2026-01-01 08:15"]),
        ("0 8,12,18 * * *", ["2026-01-01 08:00", "2026-01-01 12:00", "2026-01-01 18:00"]),
        ("30 9 * * 1-5", ["2026-01-01 09:30", "2026-01-02 09:30", "2026-01-05 09:30"]),
        ("0 0 1 jan,JUL *", ["2026-01-01 00:00", "2026-07-01 00:00", "2027-01-01 00:00"]),
        ("0 0 1 mar-may *", ["2026-03-01 00:00", "2026-04-01 00:00", "2026-05-01 00:00"]),
        ("0 12 29 2 *", ["2028-02-29 12:00", "2032-02-29 12:00", "2036-02-29 12:00"]),
        ("@yearly", ["2026-01-01 00:00", "2027-01-01 00:00", "2028-01-01 00:00"]),
        ("@annually", ["2026-01-01 00:00", "2027-01-01 00:00", "2028-01-01 00:00"]),
        ("@monthly", ["2026-01-01 00:00", "2026-02-01 00:00", "2026-03-01 00:00"]),
        ("@weekly", ["2026-01-04 00:00", "2026-01-11 00:00", "2026-01-18 00:00"]),
        ("@daily", ["2026-01-01 00:00", "2026-01-02 00:00", "2026-01-03 00:00"]),
        ("@midnight", ["2026-01-01 00:00", "2026-01-02 00:00", "2026-01-03 00:00"]),
        ("@hourly", ["2026-01-01 00:00", "2026-01-01 01:00", "2026-01-01 02:00"]),
    ],
)
def test_steps_ranges_lists_names_and_macros(expr: str, expected: list[str]) -> None:
    fires = runs_between(cron(expr), utc(2025, 12, 31, 23, 30), utc(2040, 1, 1), limit=3)
    assert stamps(fires) == expected


def test_cron_text_is_stored_normalised() -> None:
    assert cron("  0   9 * *  MON-FRI ", "Europe/Berlin") == Schedule(
        "cron", "0 9 * * mon-fri", "Europe/Berlin"
    )
    assert cron("@Daily").expr == "@daily"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 25 * * *", "the cron expression '0 25 * * *' has hour 25; hours go from 0 to 23"),
        ("60 * * * *", "the cron expression '60 * * * *' has minute 60; minutes go from 0 to 59"),
        (
            "0 0 0 * *",
            "the cron expression '0 0 0 * *' has day of month 0; days of the month go from 1 to 31",
        ),
        ("0 0 * 13 *", "the cron expression '0 0 * 13 *' has month 13; months go from 1 to 12"),
        (
            "0 9 * * 8",
            "the cron expression '0 9 * * 8' has day of week 8; days of the week go from 0 to 7",
        ),
        ("0 9 * * mun", "the day-of-week field 'mun' is not a day; use 0-7 or sun-sat"),
        ("0 9 * jon *", "the month field 'jon' is not a month; use 1-12 or jan-dec"),
        ("x 9 * * *", "the minute field 'x' is not a number; use 0-59"),
        ("*/0 * * * *", "the minute field '*/0' has a step of 0; steps must be 1 or more"),
        (
            "*/x * * * *",
            "the minute field '*/x' has a step that is not a whole number; write steps like */5",
        ),
        (
            "0 17-9 * * *",
            "the hour field '17-9' goes backwards; put the smaller value first, "
            "or write 17-23,0-9 to wrap around",
        ),
        (
            "0 9 * * fri-mon",
            "the day-of-week field 'fri-mon' goes backwards; put the smaller value first, "
            "or write 5-7,0-1 to wrap around",
        ),
        (
            "0 9 * *",
            "the cron expression '0 9 * *' has 4 fields but needs 5: "
            "minute, hour, day of month, month and day of week",
        ),
        (
            "@reboot",
            "the cron shortcut '@reboot' is not known; "
            "use @hourly, @daily, @weekly, @monthly or @yearly",
        ),
        ("  ", "the cron expression is empty; write five fields like '0 9 * * mon'"),
    ],
)
def test_bad_cron_expressions_say_which_part_is_wrong(expr: str, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        cron(expr)
    assert str(caught.value) == message
    assert isinstance(caught.value, UserError)


@pytest.mark.parametrize(
    ("expr", "days"), [("0 0 30 2 *", 30), ("0 0 31 4,6,9,11 *", 31), ("0 0 30 feb */2", 30)]
)
def test_a_cron_expression_that_never_runs_is_refused(expr: str, days: int) -> None:
    with pytest.raises(ScheduleError, match="never runs") as caught:
        cron(expr)
    assert str(caught.value) == (
        f"the cron expression '{expr}' never runs, because none of its months has {days} days"
    )


@pytest.mark.parametrize(
    ("expr", "zone", "day", "expected"),
    [
        # Spring forward: 02:30 does not exist, so the job runs once as the gap ends.
        ("30 2 * * *", "Europe/Berlin", (2026, 3, 29), ["03-29 01:00", "03-30 00:30"]),
        ("30 2 * * *", "America/New_York", (2026, 3, 8), ["03-08 07:00", "03-09 06:30"]),
        ("0,30 2 * * *", "Europe/Berlin", (2026, 3, 29), ["03-29 01:00", "03-30 00:00"]),
        ("*/15 2 * * *", "Europe/Berlin", (2026, 3, 29), ["03-29 01:00", "03-30 00:00"]),
        # Fall back: the wall time happens twice; the job runs at the first one only.
        ("30 2 * * *", "Europe/Berlin", (2026, 10, 25), ["10-25 00:30", "10-26 01:30"]),
        ("30 1 * * *", "America/New_York", (2026, 11, 1), ["11-01 05:30", "11-02 06:30"]),
        ("0,30 2 * * *", "Europe/Berlin", (2026, 10, 25), ["10-25 00:00", "10-25 00:30"]),
        ("0 1-3 * * *", "America/New_York", (2026, 11, 1), ["11-01 05:00", "11-01 07:00"]),
    ],
)
def test_fixed_hour_jobs_run_once_on_dst_change_days(
    expr: str, zone: str, day: tuple[int, int, int], expected: list[str]
) -> None:
    start = datetime(*day, tzinfo=ZoneInfo(zone)).astimezone(UTC) - timedelta(hours=12)
    fires = runs_between(cron(expr, zone), start, start + timedelta(days=2), limit=2)
    assert [stamp[5:] for stamp in stamps(fires)] == expected


def test_fixed_hour_jobs_on_dst_change_days_in_full() -> None:
    spring = runs_between(
        cron("30 2 * * *", "Europe/Berlin"), utc(2026, 3, 28, 12), utc(2026, 3, 30, 12)
    )
    assert [fire.isoformat() for fire in spring] == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    fall = runs_between(
        cron("0,30 2 * * *", "Europe/Berlin"), utc(2026, 10, 24, 12), utc(2026, 10, 26, 12)
    )
    assert [fire.isoformat() for fire in fall] == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:00:00+01:00",
        "2026-10-26T02:30:00+01:00",
    ]
    quarters = runs_between(
        cron("*/15 2 * * *", "Europe/Berlin"), utc(2026, 10, 24, 12), utc(2026, 10, 25, 12)
    )
    assert [fire.strftime("%H:%M%z") for fire in quarters] == [
        "02:00+0200",
        "02:15+0200",
        "02:30+0200",
        "02:45+0200",
    ]


def test_the_first_occurrence_as_previous_fire_time_does_not_bring_back_the_second() -> None:
    schedule = cron("30 2 * * *", "Europe/Berlin")
    first = utc(2026, 10, 25, 0, 30)
    tomorrow = utc(2026, 10, 26, 1, 30)
    trigger = make_trigger(schedule)
    for now in (first, first + timedelta(minutes=50), first + timedelta(hours=3)):
        assert trigger.get_next_fire_time(first, now) == tomorrow
        assert trigger.get_next_fire_time(first.astimezone(BERLIN), now) == tomorrow
    repeated_hour = [
        first,
        first.astimezone(BERLIN),
        datetime(2026, 10, 25, 2, 45, tzinfo=BERLIN),
        datetime(2026, 10, 25, 2, 10, tzinfo=BERLIN, fold=1),
        datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN, fold=1),
    ]
    for after in repeated_hour:
        assert next_run(schedule, after) == tomorrow


@pytest.mark.parametrize(
    ("expr", "zone", "local_start", "minutes"),
    [
        ("*/15 * * * *", "Europe/Berlin", (2026, 10, 25), 15),
        ("*/15 * * * *", "Europe/Berlin", (2026, 3, 29), 15),
        ("*/15 * * * *", "America/New_York", (2026, 11, 1), 15),
        ("*/15 * * * *", "America/New_York", (2026, 3, 8), 15),
        ("0 * * * *", "Europe/Berlin", (2026, 10, 25), 60),
        ("0 * * * *", "America/New_York", (2026, 3, 8), 60),
        ("0 0-23 * * *", "Europe/Berlin", (2026, 10, 25), 60),
    ],
)
def test_wildcard_hour_jobs_keep_real_time_rhythm_through_dst(
    expr: str, zone: str, local_start: tuple[int, int, int], minutes: int
) -> None:
    start = datetime(*local_start, tzinfo=ZoneInfo(zone)).astimezone(UTC)
    fires = [
        fire.astimezone(UTC) for fire in runs_between(cron(expr, zone), start, start + HOURS_5)
    ]
    gaps = {b - a for a, b in pairwise(fires)}
    assert gaps == {timedelta(minutes=minutes)}
    assert len(fires) == 5 * 60 // minutes


def test_a_wildcard_hour_job_runs_in_both_copies_of_the_repeated_hour() -> None:
    start = datetime(2026, 10, 25, 2, 0, tzinfo=BERLIN).astimezone(UTC)
    fires = runs_between(cron("*/15 * * * *", "Europe/Berlin"), start, start + timedelta(hours=2))
    assert [fire.strftime("%H:%M%z") for fire in fires] == [
        "02:15+0200",
        "02:30+0200",
        "02:45+0200",
        "02:00+0100",
        "02:15+0100",
        "02:30+0100",
        "02:45+0100",
        "03:00+0100",
    ]


def test_a_stepped_hour_is_a_wildcard_and_runs_in_both_copies_of_the_repeated_hour() -> None:
    start = datetime(2026, 10, 25, 0, 0, tzinfo=BERLIN).astimezone(UTC)
    fires = runs_between(cron("30 */2 * * *", "Europe/Berlin"), start, start + 6 * HOUR)
    assert [fire.strftime("%H:%M%z") for fire in fires] == [
        "00:30+0200",
        "02:30+0200",
        "02:30+0100",
        "04:30+0100",
    ]


def test_a_wall_time_lost_to_the_gap_runs_at_the_gap_end_for_stepped_hours_too() -> None:
    start = datetime(2026, 3, 29, 0, 0, tzinfo=BERLIN).astimezone(UTC)
    fires = runs_between(cron("30 */2 * * *", "Europe/Berlin"), start, start + HOURS_5)
    assert [fire.strftime("%H:%M%z") for fire in fires] == [
        "00:30+0100",
        "03:00+0200",
        "04:30+0200",
    ]


def test_every_counts_from_its_anchor() -> None:
    anchor = utc(2026, 1, 1, 0, 0, 7)
    schedule = parse_schedule("every", "10m", "Europe/Berlin", anchor)
    assert schedule == Schedule("every", "600", "Europe/Berlin", anchor.timestamp())
    assert next_run(schedule, anchor) == anchor + timedelta(minutes=10)
    assert next_run(schedule, anchor - timedelta(days=1)) == anchor + timedelta(minutes=10)
    long_gap = anchor + timedelta(days=3, hours=5, minutes=1)
    assert next_run(schedule, long_gap) == anchor + timedelta(days=3, hours=5, minutes=10)
    on_the_dot = anchor + timedelta(days=3, minutes=20)
    assert next_run(schedule, on_the_dot) == on_the_dot + timedelta(minutes=10)


def test_every_is_real_time_across_a_dst_change() -> None:
    schedule = parse_schedule("every", "1h", "Europe/Berlin", utc(2026, 10, 24, 20, 0))
    fires = runs_between(schedule, utc(2026, 10, 24, 20), utc(2026, 10, 25, 6))
    assert len(fires) == 10
    assert {b.astimezone(UTC) - a.astimezone(UTC) for a, b in pairwise(fires)} == {HOUR}


@pytest.mark.parametrize(
    ("kind", "value", "zone", "expr"),
    [
        ("at", "2026-11-21T19:00", "Europe/Berlin", "2026-11-21T18:00:00+00:00"),
        ("at", "2026-11-21 19:00", "Europe/Berlin", "2026-11-21T18:00:00+00:00"),
        ("AT", " 2026-11-21 19:20:30 ", "Europe/Berlin", "2026-11-21T18:20:30+00:00"),
        ("at", "2026-11-21T19:00:00+01:00", "America/New_York", "2026-11-21T18:00:00+00:00"),
        ("at", "2026-11-21T19:00-05:00", "Europe/Berlin", "2026-11-22T00:00:00+00:00"),
        ("at", "2026-11-21T17:30Z", "Europe/Berlin", "2026-11-21T17:30:00+00:00"),
        ("at", "19:00", "Europe/Berlin", "2026-11-21T18:00:00+00:00"),
        ("at", "18:00", "Europe/Berlin", "2026-11-22T17:00:00+00:00"),
        ("at", "7:05", "Europe/Berlin", "2026-11-22T06:05:00+00:00"),
        ("at", "13:00", "America/New_York", "2026-11-21T18:00:00+00:00"),
        ("at", "2027-10-31 02:30", "Europe/Berlin", "2027-10-31T00:30:00+00:00"),
        ("at", "2027-11-07 01:30", "America/New_York", "2027-11-07T05:30:00+00:00"),
        ("at", "2027-03-28 02:30", "Europe/Berlin", "2027-03-28T01:00:00+00:00"),
        ("at", "2027-03-14 02:30", "America/New_York", "2027-03-14T07:00:00+00:00"),
        ("after", "20m", "Europe/Berlin", "2026-11-21T17:20:00+00:00"),
        ("After", "1h30m", "UTC", "2026-11-21T18:30:00+00:00"),
        ("after", "2 days", "UTC", "2026-11-23T17:00:00+00:00"),
    ],
)
def test_one_off_times(kind: str, value: str, zone: str, expr: str) -> None:
    assert parse_schedule(kind, value, zone, NOW) == Schedule("at", expr, zone)


def test_after_rounds_up_to_a_whole_second() -> None:
    schedule = parse_schedule("after", "90s", "UTC", NOW + timedelta(microseconds=250))
    assert schedule.expr == "2026-11-21T17:01:31+00:00"


@pytest.mark.parametrize(
    ("kind", "value", "zone", "message"),
    [
        (
            "at",
            "2026-11-21 17:59",
            "Europe/Berlin",
            "the time '2026-11-21 17:59' has already passed; give a time in the future",
        ),
        (
            "at",
            "2026-11-21T17:00Z",
            "Europe/Berlin",
            "the time '2026-11-21T17:00Z' has already passed; give a time in the future",
        ),
        (
            "at",
            "25:00",
            "UTC",
            "the time '25:00' is not a time of day; hours go from 0 to 23 and minutes from 0 to 59",
        ),
        (
            "at",
            "tomorrow",
            "UTC",
            "the time 'tomorrow' is not understood; write it like 19:00 or 2026-11-21 19:00",
        ),
        (
            "at",
            "2026-11-22",
            "UTC",
            "the time '2026-11-22' has no time of day; write it like 2026-11-22 19:00",
        ),
        (
            "at",
            "19:00",
            "Mars/Olympus",
            "the time zone 'Mars/Olympus' is not known; "
            "use a name like Europe/Berlin or America/New_York",
        ),
        (
            "cron",
            "0 9 * * *",
            "Europe",
            "the time zone 'Europe' is not known; "
            "use a name like Europe/Berlin or America/New_York",
        ),
        (
            "sometimes",
            "9:00",
            "UTC",
            "the schedule kind 'sometimes' is not known; use cron, every, at or after",
        ),
        ("every", "0m", "UTC", "the duration '0m' must be longer than zero"),
    ],
)
def test_bad_schedules_are_refused_plainly(kind: str, value: str, zone: str, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(kind, value, zone, NOW)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("20m", 1200),
        ("2h", 7200),
        ("1h30m", 5400),
        ("2d", 172800),
        ("1w", 604800),
        ("20 minutes", 1200),
        ("1 hour", 3600),
        ("2 hours 30 minutes", 9000),
        ("1 hour and 30 minutes", 5400),
        ("1h, 30m", 5400),
        ("30sec", 30),
        ("5min", 300),
        ("  1H 30M ", 5400),
        ("1.5h", 5400),
    ],
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("45", "the duration '45' has no unit; write 45m for minutes or 45s for seconds"),
        ("0m", "the duration '0m' must be longer than zero"),
        ("0 hours 0 minutes", "the duration '0 hours 0 minutes' must be longer than zero"),
        ("-5m", "the duration '-5m' must be longer than zero"),
        ("", "the duration is empty; write it like 20m, 1h30m or 2 hours"),
        ("soon", "the duration 'soon' is not understood; write it like 20m, 1h30m or 2 hours"),
        ("1h30", "the duration '1h30' is not understood; write it like 20m, 1h30m or 2 hours"),
        (
            "3 fortnights",
            "the duration '3 fortnights' uses 'fortnights', which is not a unit of time; "
            "use s, m, h, d or w",
        ),
    ],
)
def test_parse_duration_refusals(text: str, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_duration(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5400, "1h30m"),
        (90, "1m30s"),
        (86400, "1d"),
        (1800, "30m"),
        (3600, "1h"),
        (90061, "1d1h1m1s"),
        (604800, "7d"),
        (59.6, "1m"),
        (0, "0s"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("schedule", "text"),
    [
        (
            Schedule("cron", "0 9 * * mon-fri", "Europe/Berlin"),
            "cron 0 9 * * mon-fri (Europe/Berlin)",
        ),
        (Schedule("cron", "@daily", "UTC"), "cron @daily (UTC)"),
        (Schedule("every", "1800", "UTC", 0.0), "every 30m"),
        (Schedule("every", "5400", "UTC", 0.0), "every 1h30m"),
        (
            Schedule("at", "2026-11-21T18:20:00+00:00", "Europe/Berlin"),
            "once at 2026-11-21 19:20 (Europe/Berlin)",
        ),
        (
            Schedule("at", "2026-11-21T18:20:05+00:00", "America/New_York"),
            "once at 2026-11-21 13:20:05 (America/New_York)",
        ),
    ],
)
def test_describe(schedule: Schedule, text: str) -> None:
    assert describe(schedule) == text


def test_runs_between_counts_and_limits() -> None:
    every = parse_schedule("every", "10m", "UTC", NOW)
    assert len(runs_between(every, NOW, NOW + timedelta(hours=2))) == 12
    assert runs_between(every, NOW, NOW + timedelta(minutes=10)) == [NOW + timedelta(minutes=10)]
    assert runs_between(every, NOW, NOW + timedelta(minutes=9)) == []
    minutely = cron("* * * * *")
    assert len(runs_between(minutely, NOW, NOW + timedelta(days=1))) == 1000
    assert len(runs_between(minutely, NOW, NOW + timedelta(days=1), limit=5)) == 5
    assert runs_between(minutely, NOW, NOW + timedelta(days=1), limit=0) == []
    once = parse_schedule("after", "1h", "UTC", NOW)
    assert runs_between(once, NOW, NOW + timedelta(days=1)) == [NOW + timedelta(hours=1)]
    assert runs_between(once, NOW + timedelta(hours=1), NOW + timedelta(days=1)) == []


def test_a_one_off_time_has_no_next_run_once_passed() -> None:
    once = parse_schedule("at", "19:20", "Europe/Berlin", NOW)
    assert next_run(once, NOW) == utc(2026, 11, 21, 18, 20)
    assert next_run(once, utc(2026, 11, 21, 18, 20)) is None
    assert next_run(once, utc(2027, 1, 1)) is None


@pytest.mark.parametrize(
    "schedule",
    [
        Schedule("cron", "30 2 * * *", "Europe/Berlin"),
        Schedule("cron", "*/15 * * * *", "America/New_York"),
        Schedule("cron", "0 9 13 * fri", "Europe/Berlin"),
        Schedule("cron", "0,30 1-3 * * sat-sun", "America/New_York"),
        Schedule("every", "5400", "Europe/Berlin", utc(2026, 3, 1, 0, 0, 13).timestamp()),
        Schedule("at", "2026-10-25T00:30:00+00:00", "Europe/Berlin"),
    ],
)
def test_next_run_agrees_with_the_trigger_as_the_scheduler_steps_it(schedule: Schedule) -> None:
    start = utc(2026, 3, 7)
    trigger = make_trigger(schedule)
    fire = trigger.get_next_fire_time(None, start + timedelta(microseconds=1))
    stepped: list[datetime] = []
    while fire is not None and fire <= utc(2026, 11, 10) and len(stepped) < 400:
        stepped.append(fire)
        late_wake_up = fire.astimezone(UTC) + timedelta(seconds=42)
        fire = trigger.get_next_fire_time(fire, late_wake_up)
    ours = runs_between(schedule, start, utc(2026, 11, 10), limit=400)
    assert ours
    assert stamps(ours) == stamps(stepped)
    assert ours == stepped
    just_before = [fire.astimezone(UTC) - timedelta(seconds=1) for fire in ours]
    assert [next_run(schedule, after) for after in just_before] == ours


@pytest.mark.parametrize(
    ("policy", "late_by", "expected"),
    [
        ("skip", timedelta(0), "skip"),
        ("skip", timedelta(seconds=5), "skip"),
        ("skip", timedelta(days=3), "skip"),
        ("run_once", timedelta(0), "run"),
        ("run_once", timedelta(minutes=59), "run"),
        ("run_once", timedelta(hours=1), "run"),
        ("run_once", timedelta(hours=1, seconds=1), "skip"),
        ("run_once", timedelta(days=3), "skip"),
    ],
)
def test_misfire_decision(policy: Misfire, late_by: timedelta, expected: str) -> None:
    scheduled_for = utc(2026, 10, 25, 0, 30)
    now = scheduled_for + late_by
    assert misfire_decision(policy, scheduled_for, now, timedelta(hours=1)) == expected
    in_berlin = (scheduled_for.astimezone(BERLIN), now.astimezone(BERLIN))
    assert misfire_decision(policy, *in_berlin, timedelta(hours=1)) == expected


def test_the_cron_trigger_pickles_and_names_itself() -> None:
    trigger = make_trigger(cron("30 2 * * *", "Europe/Berlin"))
    copy = pickle.loads(pickle.dumps(trigger))
    after = utc(2026, 10, 25)
    assert copy.get_next_fire_time(None, after) == trigger.get_next_fire_time(None, after)
    assert str(trigger) == "cron[30 2 * * * Europe/Berlin]"


async def test_apscheduler_runs_jobs_from_these_triggers() -> None:
    called = {"every": asyncio.Event(), "at": asyncio.Event()}

    async def job(name: str) -> None:
        called[name].set()

    soon = datetime.now(UTC) + timedelta(milliseconds=200)
    every = Schedule("every", "1", "UTC", time.time() - 0.8)
    once = Schedule("at", soon.isoformat(), "Europe/Berlin")
    scheduler = AsyncIOScheduler(timezone=UTC)
    scheduler.start()
    try:
        for name, schedule in (("every", every), ("at", once)):
            scheduler.add_job(job, make_trigger(schedule), args=[name], misfire_grace_time=60)
        leap_day = cron("0 9 29 2 *", "Europe/Berlin")
        added = scheduler.add_job(job, make_trigger(leap_day), args=["cron"])
        assert added.next_run_time == next_run(leap_day, datetime.now(UTC))
        waits = (event.wait() for event in called.values())
        await asyncio.wait_for(asyncio.gather(*waits), timeout=10)
    finally:
        scheduler.shutdown(wait=False)
