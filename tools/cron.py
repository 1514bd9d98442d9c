"""The cron tools: the agent sets up, lists, removes and runs scheduled jobs.

A job made in a chat delivers to that chat unless told otherwise (the owner,
the owner's inbox in the terminal, the log, a file in the workspace, nowhere).
Turns started by a job or the heartbeat cannot make jobs, so nothing
reschedules itself in a loop. A shell job is checked by the security policy now
and again at each run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

from pydantic import Field

from bot.config.schedule import CronConfig
from bot.core.conversation import ToolCall
from bot.core.errors import ToolError, UserError
from bot.core.tool_api import Assessment, Tool, ToolContext, tool
from bot.cron.jobs import JobRequest, build_job, job_line, result_file, run_line
from bot.cron.store import CronStore, Target
from bot.security.files.paths import PathGuard
from bot.security.policy import Decision

Preflight = Callable[[ToolCall, ToolContext], Decision]
RunNow = Callable[[int], Awaitable[bool]]

_SCHEDULE_HELP = (
    "The schedule, written for schedule_kind: cron -> 5 fields 'min hour day month weekday' "
    "like '0 9 * * mon-fri' (weekday 0 or 7 = Sunday); every -> an interval like '30m', "
    "'2h'; at -> a date and time like '2026-11-21 19:00' or just '19:00' (next one); "
    "after -> a delay from now like '20m', '1h30m'"
)


def cron_tools(
    store: CronStore,
    *,
    settings: CronConfig,
    zone: ZoneInfo,
    preflight: Preflight,
    run_now: RunNow,
    files: PathGuard,
) -> list[Tool]:
    """The four cron tools, bound to the daemon's store and scheduler (``files`` judges
    the paths of ``file`` targets)."""

    def assess_add(ctx: ToolContext, command: str | None = None, **_: object) -> Assessment:
        """A reminder is harmless; a scheduled command is rated like the command itself."""
        if not command:
            return Assessment("low")
        verdict = preflight(ToolCall("cron-check", "shell", {"command": command}), ctx)
        why = f"schedules the command {command!r} to run unattended; {verdict.reason}"
        return Assessment(verdict.risk, why, forbidden=verdict.action == "block")

    @tool(effect="write", assess=assess_add, approval_fields=("command",))
    async def cron_add(
        ctx: ToolContext,
        name: Annotated[str, Field(description="A short name, e.g. 'water plants'")],
        schedule_kind: Annotated[
            Literal["cron", "every", "at", "after"],
            Field(description="cron and every repeat; at and after run once"),
        ],
        schedule: Annotated[str, Field(description=_SCHEDULE_HELP)],
        prompt: Annotated[
            str | None,
            Field(
                description="What you will be asked to do when it runs, e.g. 'Remind the "
                "user to check the oven.' Give prompt or command, not both"
            ),
        ] = None,
        command: Annotated[
            str | None, Field(description="A shell command to run instead of a prompt")
        ] = None,
        deliver_to: Annotated[
            Literal["this_chat", "owner", "terminal", "log", "file", "none"],
            Field(description="Where the result goes; this_chat unless the user says so. "
                  "owner: the owner's private chat (their terminal inbox if there is none); "
                  "terminal: the owner's inbox, read in the terminal with `pinclaw inbox`; "
                  "log: PinClaw's log; file: appended to file_path; none: only the job's "
                  "history"),
        ] = "this_chat",
        file_path: Annotated[
            str | None,
            Field(description="For deliver_to=file: a file in the workspace, e.g. "
                  "'notes/plants.md'; each result is appended under a time heading"),
        ] = None,
        session: Annotated[
            Literal["isolated", "chat"],
            Field(description="isolated: the job keeps its own history; chat: it runs in "
                  "this chat's conversation"),
        ] = "isolated",
        timezone: Annotated[
            str | None, Field(description="IANA zone for cron and at; omit for the user's")
        ] = None,
    ) -> str:  # fmt: skip
        """Schedule a reminder or a recurring job: a prompt you answer when it runs (its
        reply is sent to the chat), or a shell command whose output is sent."""
        if ctx.origin != "chat":
            raise ToolError("a scheduled job or heartbeat cannot create jobs")
        if bool(prompt and prompt.strip()) == bool(command and command.strip()):
            raise ToolError("give either prompt or command (exactly one of them)")
        if len(await store.jobs()) >= settings.max_jobs:
            raise ToolError(f"there are already {settings.max_jobs} jobs (cron.max_jobs)")
        target = _target(ctx, deliver_to, file_path, files)
        request = JobRequest(
            name, schedule_kind, schedule, "shell" if command else "agent",
            command or prompt or "", target, session, None, timezone or ctx.timezone.key,
        )  # fmt: skip
        try:
            job = build_job(
                request,
                creator_id=ctx.sender_id,
                creator_name=ctx.sender_name,
                settings=settings,
                zone=ctx.timezone,
                now=ctx.now(),
            )
        except UserError as exc:
            raise ToolError(str(exc)) from None
        job = await store.add(job)
        return f"Scheduled {job_line(job, ctx.timezone)}."

    @tool()
    async def cron_list(ctx: ToolContext) -> str:
        """List the scheduled jobs with their next runs and last results."""
        jobs = await store.jobs()
        if not jobs:
            return "No scheduled jobs."
        lines = []
        for job in jobs:
            lines.append(job_line(job, ctx.timezone))
            lines.extend(
                "  last: " + run_line(r, ctx.timezone) for r in await store.history(job.id, 1)
            )
        return "\n".join(lines)

    @tool(effect="write")
    async def cron_remove(
        ctx: ToolContext,
        job_id: Annotated[int, Field(description="The job's number, from cron_list")],
    ) -> str:
        """Remove a scheduled job for good (it stops at once)."""
        if ctx.origin != "chat":
            raise ToolError("a scheduled job or heartbeat cannot remove jobs")
        if not await store.remove(job_id):
            raise ToolError(f"there is no job #{job_id}; see cron_list")
        return f"Removed job #{job_id}."

    @tool(effect="write")
    async def cron_run(
        ctx: ToolContext,
        job_id: Annotated[int, Field(description="The job's number, from cron_list")],
    ) -> str:
        """Run a scheduled job now, once, outside its schedule; its output goes where it
        always goes."""
        if ctx.origin != "chat":
            raise ToolError("a scheduled job or heartbeat cannot start jobs")
        if not await run_now(job_id):
            raise ToolError(f"there is no job #{job_id}; see cron_list")
        return f"Job #{job_id} is running now; its output goes to its usual place."

    return [cron_add, cron_list, cron_remove, cron_run]


def _target(ctx: ToolContext, deliver_to: str, file_path: str | None, files: PathGuard) -> Target:
    """The target ``cron_add`` was asked for; ``ToolError`` for a file it may not use."""
    if deliver_to == "this_chat":
        s = ctx.session
        return Target("chat", s.channel, s.chat_id, s.thread_id, ctx.is_direct)
    if deliver_to != "file":
        return Target(deliver_to)  # type: ignore[arg-type]
    if not (file_path and file_path.strip()):
        raise ToolError("deliver_to=file needs file_path, a file in the workspace")
    target = Target("file", path=file_path.strip())
    try:
        result_file(target, files)
    except UserError as exc:
        raise ToolError(str(exc)) from None
    return target
