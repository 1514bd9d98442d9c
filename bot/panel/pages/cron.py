"""The Cron page: jobs, their next runs and history; pause, resume, run now, delete, add.

Everything goes through the job store and the checks ``pinclaw cron`` uses
(``bot.cron.jobs``), so a job added here is checked exactly like one added at
the command line and a mistake reads the same. Every change bumps the store's
version, which the running scheduler polls (``CronService``), so it is picked
up within seconds, as after ``pinclaw cron add``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from aiohttp import web

from bot.config import resolve_timezone
from bot.config.schedule import CronConfig
from bot.core.durations import format_duration
from bot.core.errors import UserError
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext
from bot.cron.jobs import (
    TARGETS_HELP,
    JobRequest,
    Preflight,
    build_job,
    check_command,
    parse_target,
    result_file,
    result_files,
    resumed_next_run,
    schedule_of,
    when,
)
from bot.cron.schedule import describe
from bot.cron.store import Action, CronJob, CronStore, JobRun, Misfire, SessionMode
from bot.panel.actions import done, record_action
from bot.panel.context import panel_deps, panel_session
from bot.panel.render import render
from bot.panel.router import PanelRouter
from bot.security.files.paths import PathGuard

HISTORY_SHOWN = 10
KINDS = ("cron", "every", "at", "after")
CREATOR_ID = "owner"  # a job the owner set up: its turns are the owner's (PeopleStore.speaker)
_SESSIONS: dict[str, SessionMode] = {"isolated": "isolated", "chat": "chat"}
_MISFIRES: dict[str, Misfire | None] = {"": None, "skip": "skip", "run_once": "run_once"}


@dataclass(frozen=True, slots=True)
class CronDeps:
    """What the Cron page works with, taken from the running daemon."""

    store: CronStore
    settings: CronConfig
    zone: ZoneInfo
    files: PathGuard  # where ``file:`` targets may write (``result_files``)
    preflight: Preflight  # the policy gate's look at a shell command
    workspace: Path
    running: bool  # whether the scheduler runs (``[cron] enabled``)


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run of a job, as the history table shows it."""

    started: str
    status: str
    took: str
    due: str
    delivered_to: str
    summary: str


@dataclass(frozen=True, slots=True)
class JobRow:
    """One job, as the jobs table shows it."""

    id: int
    name: str
    schedule: str
    next_run: str
    target: str
    state: str
    failures: int
    action: str  # "agent" or "shell"
    payload: str
    creator: str
    last: RunRow | None
    runs: tuple[RunRow, ...]


@dataclass(frozen=True, slots=True)
class JobForm:
    """The "add a job" form as sent (kept to fill the form again after an error)."""

    name: str = ""
    kind: str = "cron"
    schedule: str = ""
    action: str = "agent"
    text: str = ""
    target: str = "owner"
    session: str = "isolated"
    misfire: str = ""
    timezone: str = ""

    @classmethod
    def from_fields(cls, fields: Mapping[str, object]) -> JobForm:
        """The form from posted fields (missing ones take the defaults)."""
        names = cls.__dataclass_fields__
        return cls(**{k: str(v).strip() for k, v in fields.items() if k in names})


@dataclass(frozen=True, slots=True)
class CronView:
    """Everything the Cron page shows."""

    running: bool
    timezone: str
    jobs: tuple[JobRow, ...]


async def cron_view(deps: CronDeps, history: int = HISTORY_SHOWN) -> CronView:
    """Every job with its latest runs, oldest job first (as ``pinclaw cron list``)."""
    rows = []
    for job in await deps.store.jobs():
        runs = tuple(run_row(run, deps.zone) for run in await deps.store.history(job.id, history))
        rows.append(job_row(job, runs, deps.zone))
    return CronView(deps.running, deps.zone.key, tuple(rows))


def job_row(job: CronJob, runs: tuple[RunRow, ...], zone: ZoneInfo) -> JobRow:
    """A stored job for the table."""
    upcoming = when(job.next_run, zone) if job.state == "active" else "-"
    return JobRow(
        id=job.id,
        name=job.name,
        schedule=describe(schedule_of(job)),
        next_run=upcoming,
        target=str(job.target),
        state=job.state,
        failures=job.failures,
        action=job.action,
        payload=job.payload,
        creator=job.creator_name or job.creator_id,
        last=runs[0] if runs else None,
        runs=runs,
    )


def run_row(run: JobRun, zone: ZoneInfo) -> RunRow:
    """A stored run for the history (the parts of ``run_line``)."""
    took = ""
    if run.ended_at is not None and run.status != "skipped":
        took = format_duration(max(run.ended_at - run.started_at, 0))
    due = when(run.scheduled_for, zone) if run.scheduled_for else ""
    return RunRow(when(run.started_at, zone), run.status, took, due, run.delivered_to, run.summary)


async def add_job(deps: CronDeps, form: JobForm, creator_name: str) -> tuple[CronJob, str]:
    """Check and store a new job as ``pinclaw cron add`` does; the job and a note ("" or
    why each run will ask for approval). ``UserError`` says what is wrong, in the
    command line's words."""
    if form.kind not in KINDS:
        raise UserError(f"the schedule kind '{form.kind}' is not known; use {', '.join(KINDS)}")
    if form.session not in _SESSIONS:
        raise UserError("the session is either 'isolated' or 'chat'")
    if form.misfire not in _MISFIRES:
        raise UserError("a missed run is either skipped ('skip') or run once ('run_once')")
    action: Action = "shell" if form.action == "shell" else "agent"
    target = parse_target(form.target or "owner")
    request = JobRequest(
        form.name, form.kind, form.schedule, action, form.text, target,
        _SESSIONS[form.session], _MISFIRES[form.misfire], form.timezone or deps.zone.key,
    )  # fmt: skip
    job = build_job(
        request,
        creator_id=CREATOR_ID,
        creator_name=creator_name,
        settings=deps.settings,
        zone=deps.zone,
    )
    if target.kind == "file":
        result_file(target, deps.files)
    note = ""
    if action == "shell":
        ctx = ToolContext(
            session=SessionKey(target.channel or "cron", target.chat_id or "panel"),
            workspace=deps.workspace,
            timezone=deps.zone,
            origin="panel",
        )
        note = check_command(deps.preflight, form.text, ctx)
    return await deps.store.add(job), note


async def pause_job(store: CronStore, job_id: int) -> CronJob:
    """Stop a job from running until it is resumed (``pinclaw cron pause``)."""
    job = await _job(store, job_id)
    await store.update(job.id, state="paused")
    return job


async def resume_job(store: CronStore, job_id: int) -> CronJob:
    """Let a paused job run again from its next time (``pinclaw cron resume``)."""
    job = await _job(store, job_id)
    upcoming = resumed_next_run(job, datetime.now(UTC))
    await store.update(job.id, state="active", failures=0, next_run=upcoming)
    return job


async def run_job_now(store: CronStore, job_id: int) -> CronJob:
    """Ask the scheduler to run a job within seconds (``pinclaw cron run``)."""
    job = await _job(store, job_id)
    await store.update(job.id, run_requested=1)
    return job


async def delete_job(store: CronStore, job_id: int) -> CronJob:
    """Delete a job and its history (``pinclaw cron remove``)."""
    job = await _job(store, job_id)
    await store.remove(job.id)
    return job


async def _job(store: CronStore, job_id: int) -> CronJob:
    job = await store.get(job_id)
    if job is None:
        raise UserError(f"there is no job #{job_id} (it may have been deleted meanwhile)")
    return job


def routes(router: PanelRouter) -> None:
    """``/cron``, ``/cron/add`` and each job's pause, resume, run and delete."""
    router.get("/cron", page)
    router.post("/cron/add", add)
    for action in _ACTIONS:
        router.post(f"/cron/{{job_id:\\d+}}/{action}", change)


async def page(request: web.Request) -> web.StreamResponse:
    """The jobs, their history and the form to add one."""
    return await _render(request, await cron_deps(request), JobForm(), "")


async def add(request: web.Request) -> web.StreamResponse:
    """Add a job from the form; on a mistake, the page again with the error by the form."""
    deps = await cron_deps(request)
    form = JobForm.from_fields(await request.post())
    session = panel_session(request)
    try:
        job, note = await add_job(deps, form, f"{session.person_name} (web panel)")
    except UserError as exc:
        await record_action(request, "cron.add", outcome="refused", name=form.name, error=str(exc))
        return await _render(request, deps, form, str(exc), status=400)
    await record_action(
        request, "cron.add", job=job.id, name=job.name, schedule=describe(schedule_of(job)),
        does=job.action, payload=job.payload, target=str(job.target),
    )  # fmt: skip
    added = f"Added job #{job.id} '{job.name}'."
    done(request, "/cron", added + (f" Note: {note}." if note else ""))


async def change(request: web.Request) -> web.StreamResponse:
    """Pause, resume, run now or delete one job."""
    action = request.path.rsplit("/", 1)[1]
    job_id = int(request.match_info["job_id"])
    deps = await cron_deps(request)
    func, said = _ACTIONS[action]
    try:
        job = await func(deps.store, job_id)
    except UserError as exc:
        await record_action(
            request, f"cron.{action}", outcome="refused", job=job_id, error=str(exc)
        )
        done(request, "/cron", f"Could not {action} job #{job_id}: {exc}.")
    await record_action(request, f"cron.{action}", job=job.id, name=job.name)
    done(request, "/cron", said.format(id=job.id, name=job.name))


async def cron_deps(request: web.Request) -> CronDeps:
    """The Cron page's view of the running daemon."""
    deps = panel_deps(request)
    config, app = deps.app.loaded.config, deps.app
    service = deps.scheduling.service if deps.scheduling is not None else None
    if service is not None:
        store = service.store
    else:  # [cron] is off: the jobs are still there to see and change
        store = CronStore(app.db)
        await store.setup()
    return CronDeps(
        store=store,
        settings=config.cron,
        zone=resolve_timezone(config.cron.timezone or config.general.timezone),
        files=result_files(app.security.paths),
        preflight=app.gate.preflight,
        workspace=app.loaded.workspace,
        running=service is not None,
    )


async def _render(
    request: web.Request, deps: CronDeps, form: JobForm, error: str, status: int = 200
) -> web.StreamResponse:
    return render(
        request,
        "cron.html",
        status=status,
        title="Cron",
        view=await cron_view(deps),
        form=form,
        error=error,
        kinds=_KIND_LABELS,
        targets_help=f"One of {TARGETS_HELP}.",
    )


_KIND_LABELS = (
    ("cron", "on a cron schedule (5 fields)"),
    ("every", "every … (an interval)"),
    ("at", "once, at a time"),
    ("after", "once, after a delay"),
)
_ACTIONS: dict[str, tuple[Callable[[CronStore, int], Awaitable[CronJob]], str]] = {
    "pause": (pause_job, "Paused job #{id} '{name}'."),
    "resume": (resume_job, "Resumed job #{id} '{name}'."),
    "run": (run_job_now, "Job #{id} '{name}' will run within seconds."),
    "delete": (delete_job, "Deleted job #{id} '{name}' and its history."),
}
