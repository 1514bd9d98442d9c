"""``[cron]`` and ``[heartbeat]``: scheduled jobs and the periodic check-in."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from bot.config.base import Section, check_zone, is_hours
from bot.core.durations import ScheduleError, parse_duration


class CronConfig(Section):
    """Scheduled jobs (reminders and recurring work): whether they run, the timezone they are
    read in, catching up after downtime, and what happens when one keeps failing."""

    enabled: bool = Field(
        default=True,
        description=(
            "Run scheduled jobs; `false` turns the scheduler and its tools (`cron_add` and "
            "the others) off. The heartbeat has its own table."
        ),
    )
    timezone: str | None = Field(
        default=None,
        description=(
            "The IANA timezone cron expressions and times like `19:00` are read in, like "
            "`Europe/Lisbon`. Not set: `[general] timezone`, else the host's."
        ),
    )
    misfire: Literal["skip", "run_once"] = Field(
        default="run_once",
        description=(
            "What a new job does about a run missed while PinClaw was down: `run_once` "
            "catches up once after the start, if the miss is at most `misfire_grace_s` old; "
            "`skip` never catches up. `pinclaw cron add --misfire` overrides it per job."
        ),
    )
    misfire_grace_s: float = Field(
        default=3600.0,
        ge=0,
        description=(
            "How late, in seconds, a missed run may be and still be caught up; older misses "
            "are skipped (the history records them)."
        ),
    )
    catchup_spacing_s: float = Field(
        default=5.0,
        ge=0,
        description="Seconds between catch-up runs after a start, so they do not all run at once.",
    )
    max_failures: int = Field(
        default=3,
        ge=1,
        le=100,
        description=(
            "Failures in a row after which a job is paused and the owner told once; "
            "`pinclaw cron resume ID` lets it run again."
        ),
    )
    retry_after_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "Seconds before a failed job is tried again; the wait doubles after each further "
            "failure, up to an hour."
        ),
    )
    min_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="The shortest interval an `every` job may have, in seconds.",
    )
    max_jobs: int = Field(
        default=100,
        ge=1,
        description=(
            "The most jobs the agent may make: with this many, its `cron_add` tool refuses "
            "new ones (`pinclaw cron add` is not limited)."
        ),
    )

    _check_timezone = field_validator("timezone")(check_zone)


class HeartbeatConfig(Section):
    """The heartbeat: every ``interval`` the agent works through the tasks in HEARTBEAT.md,
    and you hear from it only when something needs attention."""

    interval: str = Field(
        default="30m",
        description="How often it runs, as a duration like `30m` or `2h`. `0` turns it off.",
    )
    file: str = Field(
        default="HEARTBEAT.md",
        description=(
            "The task file in the workspace, one task per line, created with a template. "
            "With no tasks in it, no model call is made."
        ),
    )
    active_hours: str = Field(
        default="",
        description=(
            "Run only between these times, like `08:00-22:00` (a range may cross midnight); "
            "a tick outside them is skipped, not queued. Empty: always."
        ),
    )
    timezone: str | None = Field(
        default=None,
        description=(
            "The IANA timezone of `active_hours`, like `Europe/Lisbon`. Not set: "
            "`[general] timezone`, else the host's."
        ),
    )
    target: str = Field(
        default="",
        description=(
            "Where findings go. Empty: the owner's private chat, else the owner's inbox "
            "(`pinclaw inbox`); or any job target, like `terminal:owner`, `log`, "
            "`file:heartbeat.md` or `telegram:123456789`."
        ),
    )

    _check_timezone = field_validator("timezone")(check_zone)

    @field_validator("interval")
    @classmethod
    def _check_interval(cls, value: str) -> str:
        if value.strip() in ("0", ""):
            return value
        try:
            parse_duration(value)
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("active_hours")
    @classmethod
    def _check_hours(cls, value: str) -> str:
        if value and not is_hours(value):
            raise ValueError(f"expected a range like '08:00-22:00', got {value!r}")
        return value
