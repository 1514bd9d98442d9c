"""Wiring the scheduler into ``pinclaw run``: jobs, their tools, the heartbeat, the
daily memory hygiene (old conversation entries pruned, the snapshot written), and
the sensor sampling of ``[hardware] sample_every``."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

from bot.approvals.approvers import Approvers
from bot.config import LoadedConfig, resolve_timezone
from bot.core.channel import Channel
from bot.core.durations import parse_duration
from bot.core.errors import ConfigError, UserError, log_bug
from bot.cron.heartbeat import Heartbeat
from bot.cron.jobs import parse_target, result_file, result_files
from bot.cron.outbox import Outbox
from bot.cron.runs import JobRunner
from bot.cron.service import CronService
from bot.cron.store import CronStore
from bot.daemon.app import App
from bot.security.files.paths import PathGuard
from bot.store.owner_inbox import OwnerInbox
from tools.cron import cron_tools

if TYPE_CHECKING:
    from bot.daemon.router import Router

log = logging.getLogger(__name__)

HYGIENE_DELAY_S = 60.0


class Scheduling:
    """The APScheduler instance with the job service and the heartbeat on it."""

    def __init__(
        self,
        scheduler: AsyncIOScheduler,
        service: CronService | None,
        heartbeat: Heartbeat | None,
        heartbeat_s: float,
        hygiene: Callable[[], Awaitable[object]] | None = None,
        outbox: Outbox | None = None,
    ) -> None:
        self.outbox = outbox  # where triggers deliver too
        self._hygiene = hygiene
        self.scheduler = scheduler
        self.service = service
        self.heartbeat = heartbeat
        self._heartbeat_s = heartbeat_s

    async def start(self) -> None:
        """Start the scheduler in the running loop, then the jobs and the heartbeat."""
        if self.scheduler.running:
            return
        self.scheduler.start()
        if self.service is not None:
            await self.service.start()
        if self.heartbeat is not None:
            self.heartbeat.ensure_file()
            self.scheduler.add_job(
                self._beat,
                IntervalTrigger(seconds=self._heartbeat_s),
                id="heartbeat",
                coalesce=True,
                max_instances=1,
                misfire_grace_time=None,
            )
            log.info("heartbeat every %.0f s", self._heartbeat_s)
        if self._hygiene is not None:
            self.scheduler.add_job(
                self._clean,
                IntervalTrigger(days=1),
                id="memory hygiene",
                next_run_time=datetime.now(UTC) + timedelta(seconds=HYGIENE_DELAY_S),
                coalesce=True,
                max_instances=1,
                misfire_grace_time=None,
            )

    async def stop(self, grace_s: float) -> None:
        """Stop firing; let runs in progress deliver within ``grace_s``."""
        if self.service is not None:
            await self.service.stop(grace_s)
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)

    async def _clean(self) -> None:
        assert self._hygiene is not None
        try:
            await self._hygiene()
        except Exception as exc:
            log_bug(log, "the memory hygiene job failed", exc)

    async def _beat(self) -> None:
        assert self.heartbeat is not None
        try:
            await self.heartbeat.tick()
        except Exception as exc:
            log_bug(log, "the heartbeat failed", exc)


async def scheduling(
    app: App,
    loaded: LoadedConfig,
    router: Router,
    channels: Mapping[str, Channel],
    approvers: Approvers,
) -> Scheduling:
    """Build the scheduler, the job service and tools (unless disabled) and the heartbeat."""
    config = loaded.config
    zone = resolve_timezone(config.cron.timezone or config.general.timezone)
    inbox = OwnerInbox(app.db)
    await inbox.setup()
    files = result_files(app.security.paths)
    outbox = Outbox(
        channels=channels,
        approvers=approvers,
        agent=app.agent,
        inbox=inbox,
        files=files,
        zone=zone,
    )
    scheduler = AsyncIOScheduler(timezone=UTC)
    service = None
    if config.cron.enabled:
        store = CronStore(app.db)
        await store.setup()
        runner = JobRunner(
            router=router, tools=app.gate, outbox=outbox, workspace=loaded.workspace, zone=zone
        )
        service = CronService(
            store=store, runner=runner, outbox=outbox, settings=config.cron, scheduler=scheduler
        )
        disabled = set(config.tools.disabled)
        for tool in cron_tools(
            store,
            settings=config.cron,
            zone=zone,
            preflight=app.gate.preflight,
            run_now=service.run_now,
            files=files,
        ):
            if tool.name not in disabled:
                app.tools.add(tool)
    interval = config.heartbeat.interval.strip()
    seconds = 0.0 if interval in ("", "0") else parse_duration(interval).total_seconds()
    heartbeat = None
    if seconds:
        _check_heartbeat_target(config.heartbeat.target, files)
        heartbeat = Heartbeat(
            settings=config.heartbeat,
            router=router,
            outbox=outbox,
            workspace=loaded.workspace,
            zone=resolve_timezone(config.heartbeat.timezone or config.general.timezone),
        )
    hygiene = None
    if app.memory is not None:
        memory, snapshot = app.memory, loaded.workspace / config.memory.snapshot_file
        hygiene = functools.partial(memory.hygiene, snapshot)
    _sample_sensors(scheduler, app, config.hardware.sample_every_s)
    return Scheduling(scheduler, service, heartbeat, seconds, hygiene, outbox)


def _sample_sensors(scheduler: AsyncIOScheduler, app: App, every_s: float) -> None:
    """Read every sensor each ``[hardware] sample_every`` for the readings history."""
    if app.readings is None or not every_s:
        return
    scheduler.add_job(
        app.readings.sample,
        IntervalTrigger(seconds=every_s),
        id="sensor sampling",
        coalesce=True,
        max_instances=1,
        misfire_grace_time=None,
    )
    log.info("sensors read every %.0f s for the readings history", every_s)


def _check_heartbeat_target(text: str, files: PathGuard) -> None:
    """Refuse at start a ``heartbeat.target`` that could never receive anything."""
    try:
        target = parse_target(text) if text else None
        if target is not None and target.kind == "file":
            result_file(target, files)
    except UserError as exc:
        raise ConfigError(f"heartbeat.target: {exc}") from None
