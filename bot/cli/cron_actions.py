"""What ``pinclaw cron`` does, on the same store and checks the daemon and tools use."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from bot.config import LoadedConfig, resolve_timezone
from bot.core.errors import UsageError, UserError
from bot.core.messages import SessionKey
from bot.core.tool_api import ToolContext
from bot.cron.jobs import (
    JobRequest,
    build_job,
    check_command,
    job_line,
    parse_target,
    result_file,
    result_files,
    resumed_next_run,
    run_line,
)
from bot.cron.store import CronStore
from bot.daemon.app import App, open_app


class CronActions:
    """One ``pinclaw cron`` action against the database."""

    def __init__(self, loaded: LoadedConfig, app: App, store: CronStore) -> None:
        self._loaded = loaded
        self._app = app
        self._store = store
        config = loaded.config
        self._zone = resolve_timezone(config.cron.timezone or config.general.timezone)

    @classmethod
    @asynccontextmanager
    async def open(cls, loaded: LoadedConfig) -> AsyncIterator[CronActions]:
        """The core (for the policy check) and the job store."""
        async with open_app(loaded) as app:
            store = CronStore(app.db)
            await store.setup()
            yield cls(loaded, app, store)

    async def do(self, args: argparse.Namespace) -> int:
        """Carry out ``args.cron_command``."""
        action = args.cron_command
        if action == "list":
            return await self._list()
        if action == "add":
            return await self._add(args)
        if action == "history":
            runs = await self._store.history(args.job_id, args.limit)
            if not runs:
                of = f" of job #{args.job_id}" if args.job_id is not None else ""
                print(f"No runs{of} yet.")
            for run in runs:
                print(run_line(run, self._zone))
            return 0
        job = await self._store.get(args.job_id)
        if job is None:
            raise UserError(f"there is no job #{args.job_id} (see `pinclaw cron list`)")
        if action == "remove":
            await self._store.remove(job.id)
            print(f"Removed job #{job.id} '{job.name}'.")
        elif action == "run":
            await self._store.update(job.id, run_requested=1)
            print(f"Job #{job.id} '{job.name}' will run within seconds if PinClaw is running, "
                  "otherwise when it next starts.")  # fmt: skip
        elif action == "pause":
            await self._store.update(job.id, state="paused")
            print(f"Paused job #{job.id} '{job.name}'.")
        else:
            upcoming = resumed_next_run(job, datetime.now(UTC))
            await self._store.update(job.id, state="active", failures=0, next_run=upcoming)
            print(f"Resumed {job_line(await self._store.get(job.id) or job, self._zone)}.")
        return 0

    async def _list(self) -> int:
        jobs = await self._store.jobs()
        if not jobs:
            print("No scheduled jobs. Add one with `pinclaw cron add` or ask the bot.")
        for job in jobs:
            print(job_line(job, self._zone))
            for run in await self._store.history(job.id, 3):
                print("    " + run_line(run, self._zone))
        return 0

    async def _add(self, args: argparse.Namespace) -> int:
        kind = next(k for k in ("cron", "every", "at", "after") if getattr(args, k))
        try:  # what the command line asks for is checked first: a mistake there is usage
            target = parse_target(args.to)
            request = JobRequest(
                args.name, kind, getattr(args, kind), "shell" if args.command else "agent",
                args.command or args.prompt, target, args.session, args.misfire,
                args.tz or self._zone.key,
            )  # fmt: skip
            job = build_job(
                request,
                creator_id="owner",
                creator_name="the owner (command line)",
                settings=self._loaded.config.cron,
                zone=self._zone,
            )
        except UsageError:
            raise
        except UserError as exc:
            raise UsageError(str(exc)) from None
        if target.kind == "file":
            try:
                result_file(target, result_files(self._app.security.paths))
            except UserError as exc:
                raise UsageError(str(exc)) from None
        if args.command:
            self._check_command(args.command, target.channel or "cron", target.chat_id)
        job = await self._store.add(job)
        print(f"Added {job_line(job, self._zone)}.")
        return 0

    def _check_command(self, command: str, channel: str, chat: str) -> None:
        ctx = ToolContext(
            session=SessionKey(channel, chat or "cli"),
            workspace=self._loaded.workspace,
            timezone=self._zone,
            origin="cli",
        )
        note = check_command(self._app.gate.preflight, command, ctx)
        if note:
            print(f"Note: {note}.")
