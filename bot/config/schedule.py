"""``[cron]`` and ``[heartbeat]``: scheduled jobs and the periodic check-in."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from bot.config.base import Section, check_zone, is_hours
from bot.core.durations import ScheduleError, parse_duration


class CronConfig(Section):
    """Scheduled jobs: defaults for new jobs, catch-up after downtime, failures."""

    enabled: bool = True
    timezone: str | None = None
    misfire: Literal["skip", "run_once"] = "run_once"
    misfire_grace_s: float = Field(default=3600.0, ge=0)
    catchup_spacing_s: float = Field(default=5.0, ge=0)
    max_failures: int = Field(default=3, ge=1, le=100)
    retry_after_s: float = Field(default=60.0, gt=0)
    min_interval_s: float = Field(default=60.0, gt=0)
    max_jobs: int = Field(default=100, ge=1)

    _check_timezone = field_validator("timezone")(check_zone)


class HeartbeatConfig(Section):
    """The heartbeat: every ``interval`` the agent works through HEARTBEAT.md."""

    interval: str = "30m"
    file: str = "HEARTBEAT.md"
    active_hours: str = ""
    timezone: str | None = None
    target: str = ""

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
