"""Making a job from what a person or the model asked for, and showing jobs as text.

Shared by the agent's cron tools and ``pinclaw cron``, so both check the same
things and describe jobs the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.config.schedule import CronConfig
from bot.core.conversation import ToolCall
from bot.core.durations import format_duration
from bot.core.errors import ToolError, UserError
from bot.core.tool_api import ToolContext
from bot.cron.schedule import Schedule, describe, next_run, parse_schedule
from bot.cron.store import Action, CronJob, JobRun, Misfire, SessionMode, Target
from bot.security.files.paths import PathGuard
from bot.security.policy import Decision

Preflight = Callable[[ToolCall, ToolContext], Decision]


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


def check_command(preflight: Preflight, command: str, ctx: ToolContext) -> str:
    """How the policy sees a shell command about to be scheduled: ``UserError`` if it is
    blocked, a note when each run will ask for approval, else ""."""
    verdict = preflight(ToolCall("cli", "shell", {"command": command}), ctx)
    if verdict.action == "block":
        raise UserError(f"this command cannot be scheduled: {verdict.reason}")
    if verdict.action == "ask":
        return f"{verdict.reason}; each run will ask for approval"
    return ""


def resumed_next_run(job: CronJob, now: datetime) -> float:
    """When a paused job runs next once resumed; ``UserError`` if its schedule is spent."""
    upcoming = next_run(schedule_of(job), now)
    if upcoming is None:
        raise UserError(f"job #{job.id} has no run left; add it again with a new time")
    return upcoming.timestamp()


TARGETS_HELP = (
    "'owner', 'terminal:owner', 'log', 'file:PATH', 'none' or 'CHANNEL:CHAT_ID' such as "
    "'telegram:123456789'"
)


def parse_target(text: str) -> Target:
    """A delivery target from its written form (``TARGETS_HELP`` lists them)."""
    text = text.strip()
    if text in ("owner", "none", "log"):
        return Target(text)  # type: ignore[arg-type]
    channel, _, rest = text.partition(":")
    if channel == "terminal":
        if rest.strip() != "owner":
            raise UserError(
                f"{text!r} is not a delivery target; the terminal target is 'terminal:owner' "
                "(the owner's inbox, read with `pinclaw inbox`)"
            )
        return Target("terminal")
    if channel == "file":
        if not rest.strip():
            raise UserError("a file target needs a path, e.g. 'file:notes/reminders.md'")
        return Target("file", path=rest.strip())
    chat, _, thread = rest.partition(":")
    if not channel or not chat:
        raise UserError(f"{text!r} is not a delivery target; use {TARGETS_HELP}")
    return Target("chat", channel, chat, thread or None, is_direct=not chat.startswith("-"))


def result_files(paths: PathGuard) -> PathGuard:
    """The guard for ``file:`` targets: the workspace only, minus the forbidden places."""
    return PathGuard(paths.workspace, forbidden=paths.forbidden, home=paths.home)


def result_file(target: Target, files: PathGuard) -> Path:
    """The file a ``file:`` target appends to; ``UserError`` if it is not in the workspace."""
    try:
        return files.check(target.path)
    except ToolError as exc:  # PathRefused too: outside, forbidden, unusable
        raise UserError(f"{target} cannot receive results: {exc}") from None


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
    to = f", to {run.delivered_to}" if run.delivered_to else ""
    summary = f": {run.summary}" if run.summary else ""
    return (
        f"{when(run.started_at, zone)} job #{run.job_id} {run.status}{took}{planned}{to}{summary}"
    )
