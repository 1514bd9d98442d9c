"""``pinclaw run``: the long-running daemon with its chat channels (none is fine too:
then it runs the scheduled jobs and the heartbeat, which deliver elsewhere).

``Daemon.open`` builds everything from the config (the core, the stores, the
enabled channels, the router, the scheduler); ``start`` runs each channel under
supervision, replays messages left unanswered and starts the scheduled jobs and
the heartbeat; ``stop`` stops taking messages, lets
running turns finish within ``[daemon] shutdown_grace_s`` (later ones are
recorded as interrupted and answered after the next start), then closes the
channels. ``run_daemon`` does all three around waiting for SIGTERM or SIGINT.
Tests drive the same ``Daemon`` the command runs.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from bot.approvals.approvers import Approvers
from bot.approvals.service import ApprovalService
from bot.config import Config, LoadedConfig
from bot.config.channel import ChannelSettings
from bot.core import metrics
from bot.core.channel import Channel, ChannelDeps
from bot.core.channel_registry import adapter_class
from bot.core.chat_commands import CHAT_COMMANDS
from bot.core.errors import ConfigError
from bot.core.tls import shared_ssl_context
from bot.core.version import pinclaw_version
from bot.daemon import systemd
from bot.daemon.access import AccessControl
from bot.daemon.app import App, open_app
from bot.daemon.approvals import approval_service
from bot.daemon.cron import Scheduling, scheduling
from bot.daemon.files_out import file_outlet
from bot.daemon.health import Reporter
from bot.daemon.linking import Linking
from bot.daemon.models import ChatModels
from bot.daemon.notify import add_notify
from bot.daemon.router import Router
from bot.daemon.stopping import CANCEL_WAIT_S, CHANNELS_S, CLOSE_S, cancel_within, within
from bot.daemon.storage import StorageWatch, storage_watch
from bot.daemon.supervisor import supervise
from bot.daemon.triggers import trigger_service
from bot.daemon.web import WebEndpoint
from bot.panel.context import PanelDeps
from bot.security.audit import AuditLog
from bot.store.inbound import InboundStore
from bot.store.kv import KeyValueStore
from bot.store.pairing import PairingStore
from bot.triggers.service import TriggerService

if TYPE_CHECKING:  # loaded only when [agent] usage_footer is on
    from bot.daemon.usage_footer import UsageFooter

log = logging.getLogger(__name__)


class Daemon:
    """The running parts of ``pinclaw run``."""

    def __init__(
        self,
        *,
        app: App,
        router: Router,
        channels: dict[str, Channel],
        inbound: InboundStore,
        pairing: PairingStore,
        grace_s: float,
        approvals: ApprovalService | None = None,
        scheduling: Scheduling | None = None,
        storage: StorageWatch | None = None,
        triggers: TriggerService | None = None,
    ) -> None:
        self.triggers = triggers
        self.storage = storage
        self.approvals = approvals
        self.scheduling = scheduling
        self.app = app
        self.router = router
        self.channels = channels
        self.inbound = inbound
        self.pairing = pairing
        self._grace_s = grace_s
        self._tasks: list[asyncio.Task[None]] = []
        self._replay: asyncio.Task[None] | None = None
        self._stopped = False
        web = app.loaded.config.web
        self.reporter = Reporter(
            app=app,
            channels=channels,
            inbound=inbound,
            scheduling=scheduling,
            grace_s=web.health_grace_s,
            storage=storage,
            triggers=triggers,
        )
        self.web = WebEndpoint(web, self.reporter, self._panel_deps(), triggers)
        if web.address is not None:
            metrics.enable()  # counted from the start, served once the endpoint listens

    def _panel_deps(self) -> PanelDeps:
        """What the web panel's pages use of this daemon."""
        loaded = self.app.loaded
        return PanelDeps(
            app=self.app,
            channels=self.channels,
            reporter=self.reporter,
            audit=AuditLog(loaded.data_dir / loaded.config.security.audit_log),
            web=loaded.config.web,
            approvals=self.approvals,
            scheduling=self.scheduling,
            triggers=self.triggers,
        )

    @classmethod
    @asynccontextmanager
    async def open(cls, loaded: LoadedConfig) -> AsyncIterator[Daemon]:
        """Build the daemon from ``loaded``; it is stopped and closed on exit."""
        settings = {
            name: s
            for name, s in loaded.config.enabled_channels().items()
            if isinstance(s, ChannelSettings)
        }
        if not settings:
            # Jobs and the heartbeat deliver to the log, files and the owner's inbox.
            log.info("running without chat channels: scheduler and heartbeat only")
        async with open_app(loaded, check="quick") as app:
            inbound, pairing, state = (
                InboundStore(app.db),
                PairingStore(app.db),
                KeyValueStore(app.db),
            )
            for store in (inbound, pairing, state):
                await store.setup()
            deps = ChannelDeps(
                state,
                shared_ssl_context(),
                loaded.data_dir,
                CHAT_COMMANDS,
                stream=loaded.config.agent.stream,
            )
            channels: dict[str, Channel] = {
                name: _load_adapter(name, loaded)(channel_settings, deps)
                for name, channel_settings in settings.items()
            }
            app.agent.send_files_with(file_outlet(channels))
            approvers = Approvers(settings, pairing, people=app.people)
            approvals = await approval_service(app, loaded, channels, approvers, inbound)
            storage = await storage_watch(loaded.data_dir, app.db, state, channels, approvers)
            assert app.client is not None, "open_app gives every App its client"
            access = AccessControl(settings, pairing)
            router = Router(
                agent=app.agent,
                channels=channels,
                inbound=inbound,
                settings=loaded.config.daemon,
                access=access,
                pairing=pairing,
                model_label=loaded.config.provider.label,
                approvals=approvals,
                linking=Linking(app.people, pairing, app.memory),
                media=app.media,
                storage=storage,
                voice=app.voice,
                models=ChatModels(loaded.config, app.client, state, approvers),
                footer=_usage_footer(loaded.config, app),
            )
            timers = await scheduling(app, loaded, router, channels, approvers)
            assert timers.outbox is not None
            triggers = await trigger_service(app, loaded, router, channels, timers.outbox)
            add_notify(app, channels, access, inbound, timers.outbox, state)
            daemon = cls(
                app=app,
                router=router,
                channels=channels,
                inbound=inbound,
                pairing=pairing,
                grace_s=loaded.config.daemon.shutdown_grace_s,
                approvals=approvals,
                scheduling=timers,
                storage=storage,
                triggers=triggers,
            )
            try:
                yield daemon
            finally:
                await daemon.stop()

    async def start(self) -> None:
        """Run every channel under supervision and answer what was left pending."""
        if self._replay is not None:
            return
        self._tasks = [
            asyncio.create_task(supervise(channel, self.router), name=f"channel {name}")
            for name, channel in self.channels.items()
        ]
        self._replay = asyncio.create_task(self.router.replay(), name="replay")
        if self.scheduling is not None:
            await self.scheduling.start()
        if self.triggers is not None:
            await self.triggers.start()
        await self.web.start()
        parts = ", ".join(self.channels) or "no chat channels"
        log.info("PinClaw %s running with %s", pinclaw_version(), parts)

    async def stop(self) -> None:
        """Finish or interrupt running turns, then close the rest side by side; idempotent.

        The turns get ``shutdown_grace_s`` while the scheduler stops beside them; the
        channels stay up meanwhile, to deliver the replies and take approval taps. Then
        the approval records, the channels, the HTTP endpoint and the MCP servers close
        within ``CLOSE_S``: the whole stop takes at most the grace period plus 2 s.
        """
        if self._stopped:
            return
        self._stopped = True
        loop = asyncio.get_running_loop()
        started = loop.time()
        if self._replay is not None:  # started
            log.info("stopping: turns in progress get up to %.0f s to finish", self._grace_s)
            self._replay.cancel()  # messages not queued yet are answered after the next start
        turns: list[Coroutine[Any, Any, object]] = [self.router.shutdown(self._grace_s)]
        if self.scheduling is not None:
            turns.append(self.scheduling.stop(self._grace_s))
        if self.triggers is not None:  # bounded: a source that hangs must not hold the stop
            stopping = self.triggers.stop(self._grace_s)
            turns.append(within(self._grace_s + CANCEL_WAIT_S, stopping, "the trigger sources"))
        await asyncio.gather(*turns)
        close_by = min(loop.time(), started + self._grace_s) + CLOSE_S
        if self.approvals is not None:
            # Let decided requests finish turning into records before the channels go.
            seconds = close_by - CHANNELS_S - loop.time()
            await within(seconds, self.approvals.drain(), "approval records")
        await asyncio.gather(self._close_channels(close_by), self._close_services(close_by))

    async def _close_channels(self, close_by: float) -> None:
        tasks: list[asyncio.Task[Any]] = [*self._tasks]
        if self._replay is not None:
            tasks.append(self._replay)
        left = await cancel_within(tasks, close_by - asyncio.get_running_loop().time())
        if left:
            log.warning("stopping: %s did not close in time; left behind", ", ".join(left))

    async def _close_services(self, close_by: float) -> None:
        """The HTTP endpoint and the MCP servers (their processes), side by side."""
        parts = [self.web.stop()]
        if self.storage is not None:
            parts.append(self.storage.stop())  # the probe of a full data folder
        if self.app.mcp is not None:
            parts.append(self.app.mcp.stop())  # idempotent: the core's own close skips it
        seconds = close_by - asyncio.get_running_loop().time()
        await within(seconds, asyncio.gather(*parts), "the web endpoint and MCP servers")


def _load_adapter(name: str, loaded: LoadedConfig) -> Any:
    try:
        return adapter_class(name)
    except ImportError as exc:
        raise ConfigError(
            f"{loaded.path}: channels.{name}: this installation cannot load the {name} "
            f"adapter ({exc}); reinstall PinClaw with `pip install .`"
        ) from None


async def run_daemon(loaded: LoadedConfig) -> int:
    """Run until SIGTERM or SIGINT; return the exit code.

    Under systemd (``Type=notify``) it reports READY=1 once every channel is
    connected (or after ``systemd.READY_TIMEOUT_S``), pings the watchdog if the
    unit has one, and reports STOPPING=1 when it begins to stop.
    """
    async with Daemon.open(loaded) as daemon:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await daemon.start()
        statuses = [channel.status for channel in daemon.channels.values()]

        def status() -> str:
            return systemd.status_text(statuses, _job_count(daemon))

        ready = asyncio.create_task(systemd.ready_when_connected(statuses, status), name="ready")
        helpers: list[asyncio.Task[Any]] = [ready]
        if interval := systemd.watchdog_interval():
            helpers.append(asyncio.create_task(systemd.watchdog(interval, status), name="watchdog"))
        try:
            await stop.wait()
        finally:
            systemd.notify("STOPPING=1\nSTATUS=stopping")
            ready.cancel()
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(signum)
            try:
                await daemon.stop()  # the watchdog keeps pinging while turns finish
            finally:
                for task in helpers:
                    task.cancel()
                await asyncio.gather(*helpers, return_exceptions=True)
    log.info("PinClaw stopped")
    return 0


def announce_shell(loaded: LoadedConfig) -> None:
    """The log's first line: where shell commands run, loudly when without a sandbox."""
    if "shell" in loaded.config.tools.disabled:
        log.info("the shell tool is disabled: no commands run")
        return
    from bot.security.kit import build_security
    from tools.shell import announce_sandbox

    announce_sandbox(build_security(loaded))


def _job_count(daemon: Daemon) -> int | None:
    if daemon.scheduling is None or daemon.scheduling.service is None:
        return None
    # CronService registers each stored job under its numeric id (retries as "ID:retry").
    return sum(1 for job in daemon.scheduling.scheduler.get_jobs() if str(job.id).isdigit())


def _usage_footer(config: Config, app: App) -> UsageFooter | None:
    """The usage footer when ``[agent] usage_footer`` is on (its code loaded only then)."""
    if not config.agent.usage_footer:
        return None
    from bot.daemon.usage_footer import usage_footer

    return usage_footer(config, app.usage)
