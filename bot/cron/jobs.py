"""Making a job from what a person or the model asked for, and showing jobs as text.

Shared by the agent's cron tools and ``pinclaw cron``, so both check the same
things and describe jobs the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.config.schedule import CronConfig
from bot.core.durations import format_duration
from bot.core.errors import UserError
from bot.cron.schedule import Schedule, describe, next_run, parse_schedule
from bot.cron.store import Action, CronJob, JobRun, Misfire, SessionMode, Target


@dataclass(frozen=True, slots=True)
class JobRequest:
    """A new job as asked for, before it is checked."""

    name: str
    schedule_kind: str
    schedule_value: str
    action: Action
    payload: str
    target: Target
    session_mode: SessionMode = "isolated"
    misfire: Misfire | None = None
    timezone: str | None = None


def schedule_of(job: CronJob) -> Schedule:
    """The job's schedule as the trigger maths understands it."""
    return Schedule(job.schedule_kind, job.schedule_expr, job.timezone, job.anchor)  # type: ignore[arg-type]


def build_job(
    request: JobRequest,
    *,
    creator_id: str,
    creator_name: str,
    settings: CronConfig,
    zone: ZoneInfo,
    now: datetime | None = None,
) -> CronJob:
    """A checked job ready to store; ``UserError`` says plainly what is wrong."""
    now = now or datetime.now(UTC)
    name = " ".join(request.name.split())[:60]
    if not name:
        raise UserError("the job needs a short name, like 'water plants'")
    if not request.payload.strip():
        what = "command" if request.action == "shell" else "prompt"
        raise UserError(f"the job needs a {what}: what should happen when it runs")
    schedule = parse_schedule(
        request.schedule_kind, request.schedule_value, request.timezone or zone.key, now
    )
    if schedule.kind == "every" and float(schedule.expr) < settings.min_interval_s:
        raise UserError(
            f"'every {request.schedule_value}' is too often; the shortest interval is "
            f"{format_duration(settings.min_interval_s)} (cron.min_interval_s)"
        )
    first = next_run(schedule, now)
    if first is None:
        raise UserError(f"the schedule {describe(schedule)} never runs")
    return CronJob(
        id=0,
        name=name,
        schedule_kind=schedule.kind,
        schedule_expr=schedule.expr,
        timezone=schedule.timezone,
        anchor=schedule.anchor,
        action=request.action,
        payload=request.payload.strip(),
        session_mode=request.session_mode,
        target=request.target,
        creator_id=creator_id,
        creator_name=creator_name,
        created_at=time.time(),
        misfire=request.misfire or settings.misfire,
        next_run=first.timestamp(),
    )


def parse_target(text: str) -> Target:
    """'owner', 'none', or 'CHANNEL:CHAT[:THREAD]' as a target."""
    text = text.strip()
    if text in ("owner", "none"):
        return Target(text)  # type: ignore[arg-type]
    channel, _, rest = text.partition(":")
    chat, _, thread = rest.partition(":")
    if not channel or not chat:
        raise UserError(
            f"{text!r} is not a delivery target; use 'owner', 'none' or "
            "'CHANNEL:CHAT_ID' such as 'telegram:123456789'"
        )
    return Target("chat", channel, chat, thread or None, is_direct=not chat.startswith("-"))


def when(timestamp: float | None, zone: ZoneInfo) -> str:
    """A stored time for people: "2026-11-21 19:20"."""
    if timestamp is None:
        return "-"
    return datetime.fromtimestamp(timestamp, zone).strftime("%Y-%m-%d %H:%M")


def job_line(job: CronJob, zone: ZoneInfo) -> str:
    """One line per job for lists: id, name, schedule, next run, target, state."""
    state = "" if job.state == "active" else f" [{job.state}]"
    failing = f", {job.failures} failure(s) in a row" if job.failures else ""
    what = f"runs `{job.payload}`" if job.action == "shell" else "asks the agent"
    repeats = job.schedule_kind != "at"
    next_at = f", next {when(job.next_run, zone)}" if repeats and job.state == "active" else ""
    return (
        f"#{job.id} {job.name}{state}: {describe(schedule_of(job))}{next_at}, "
        f"{what}, to {job.target}{failing}"
    )


def run_line(run: JobRun, zone: ZoneInfo) -> str:
    """One line per run for histories."""
    took = ""
    if run.ended_at is not None and run.status not in ("skipped",):
        took = f" ({format_duration(max(run.ended_at - run.started_at, 0))})"
    planned = f" (due {when(run.scheduled_for, zone)})" if run.scheduled_for else ""
    summary = f": {run.summary}" if run.summary else ""
    return f"{when(run.started_at, zone)} job #{run.job_id} {run.status}{took}{planned}{summary}"
