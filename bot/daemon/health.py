"""What the daemon reports about itself: ``/healthz`` and the fuller ``/status``.

``health`` is cheap (no query but a ``SELECT 1``) and says whether each channel,
the scheduler, the database and the data folder are fine (a folder too full to
write to makes the daemon unhealthy until writes work again). A channel counts as unhealthy only
once it has been down for longer than ``[web] health_grace_s``: a reconnect
after a network blip is normal and must not page anyone. ``status`` adds what
``pinclaw status`` prints: the next jobs, pending approvals, memory count,
messages waiting for an answer, unread messages in the owner's inbox,
today's tokens and each trigger with the state of its source. Both return plain
JSON-able dicts.

A trigger's source being down (Home Assistant restarting, a serial adapter
unplugged) does not make ``/healthz`` fail: it is outside the daemon, the source
reconnects by itself, and a restart, which is what a failing health check
leads to, would not bring it back sooner. ``/status``, ``pinclaw status`` and the
``pinclaw_trigger_source_up`` metric show it instead.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bot.core.channel import Channel, ChannelStatus
from bot.core.version import pinclaw_version
from bot.store.owner_inbox import OwnerInbox

if TYPE_CHECKING:
    from bot.daemon.app import App
    from bot.daemon.cron import Scheduling
    from bot.daemon.storage import StorageWatch
    from bot.security.shell.state import ShellState
    from bot.store.inbound import InboundStore
    from bot.triggers.overview import TriggerState
    from bot.triggers.service import TriggerService
    from bot.triggers.sources import SourceState

DB_TIMEOUT_S = 5.0
NEXT_JOBS = 3


def channel_health(
    status: ChannelStatus, *, started: float, grace_s: float, now: float
) -> dict[str, Any]:
    """One channel's state; ``healthy`` is False once it is down past the grace time."""
    down_since = status.since or started
    healthy = status.state == "connected" or now - down_since <= grace_s
    return {
        "state": status.state,
        "since": status.since or None,
        "detail": status.detail,
        "last_inbound_at": status.last_inbound_at,
        "restarts": status.restarts,
        "healthy": healthy,
    }


class Reporter:
    """Builds the health and status reports of one running daemon."""

    def __init__(
        self,
        *,
        app: App,
        channels: Mapping[str, Channel],
        inbound: InboundStore,
        scheduling: Scheduling | None,
        grace_s: float,
        clock: Callable[[], float] = time.time,
        storage: StorageWatch | None = None,
        triggers: TriggerService | None = None,
    ) -> None:
        self._triggers = triggers
        self._storage = storage
        self._app = app
        self.channels = channels
        self._inbound = inbound
        self._scheduling = scheduling
        self._grace_s = grace_s
        self._clean = app.security.redactor.text
        self._clock = clock
        self.started = clock()

    async def health(self) -> dict[str, Any]:
        """The ``/healthz`` body; ``ok`` is False when any part is unhealthy."""
        now = self._clock()
        channels = {
            name: channel_health(
                channel.status, started=self.started, grace_s=self._grace_s, now=now
            )
            for name, channel in self.channels.items()
        }
        for report in channels.values():
            report["detail"] = self._clean(report["detail"])
        scheduling = self._scheduling
        running = scheduling is not None and scheduling.scheduler.running
        scheduler = {"running": running}
        database = await self._database()
        storage = self._storage_report()
        ok = (
            all(c["healthy"] for c in channels.values())
            and (scheduling is None or running)
            and database["ok"]
            and storage["ok"]
        )
        return {
            "ok": ok,
            "version": pinclaw_version(),
            "pid": os.getpid(),
            "started_at": self.started,
            "uptime_s": round(now - self.started, 1),
            "channels": channels,
            "scheduler": scheduler,
            "database": database,
            "storage": storage,
        }

    async def status(self) -> dict[str, Any]:
        """The ``/status`` body: health plus jobs, approvals, memory, inbox and tokens."""
        report = await self.health()
        app = self._app
        report["model"] = app.loaded.config.provider.label
        report["timezone"] = app.loaded.timezone().key
        report["scheduler"]["next"] = await self._next_jobs()
        report["approvals_pending"] = await self._count(
            "SELECT COUNT(*) FROM approvals WHERE status = 'pending'"
        )
        report["inbox_depth"] = await self.inbox_depth()
        report["owner_inbox_unread"] = await self.owner_unread()
        report["memories"] = await app.memory.store.count() if app.memory is not None else None
        report["tokens_today"] = await app.usage.tokens_today() if app.usage is not None else None
        report["mcp"] = (
            {s.name: s.as_dict() for s in app.mcp.statuses()} if app.mcp is not None else {}
        )
        report["shell"] = (await self.shell()).as_dict()
        report["triggers"] = [state.as_dict() for state in self.trigger_states()]
        return report

    def trigger_states(self) -> list[TriggerState]:
        """Each trigger with the state of its source (none without the trigger service)."""
        from bot.triggers.overview import trigger_states

        service = self._triggers
        if service is None:
            return []
        found = trigger_states(service.triggers, service.states())
        return [replace(state, detail=self._clean(state.detail)) for state in found]

    def trigger_sources(self) -> list[SourceState]:
        """What every trigger source watches and whether it works, for ``/metrics``."""
        return self._triggers.states() if self._triggers is not None else []

    async def shell(self) -> ShellState:
        """Where shell commands run (looked for once, in a thread: it starts processes)."""
        from tools.shell import shell_state

        app = self._app
        return await asyncio.to_thread(shell_state, app.loaded, app.security)

    async def inbox_depth(self) -> int:
        """Messages stored but not answered yet."""
        return len(await self._inbound.pending())

    async def owner_unread(self) -> int:
        """Messages for the owner that no chat received and nobody has read (``pinclaw inbox``)."""
        try:
            return await OwnerInbox(self._app.db).count_unread()
        except sqlite3.OperationalError:  # no table yet: nothing was ever put there
            return 0

    def _storage_report(self) -> dict[str, Any]:
        """Whether writes to the data folder work; while it is full, why and since when."""
        full = self._storage.condition if self._storage is not None else None
        if full is None:
            return {"ok": True, "detail": "", "since": None}
        return {"ok": False, "detail": self._clean(full.sentence()), "since": full.since}

    async def _database(self) -> dict[str, Any]:
        try:
            async with asyncio.timeout(DB_TIMEOUT_S):
                await self._app.db.conn.execute_fetchall("SELECT 1")
        except Exception as exc:  # any failure here is the answer, not a crash
            return {"ok": False, "detail": self._clean(f"{type(exc).__name__}: {exc}")}
        return {"ok": True, "detail": ""}

    async def _next_jobs(self) -> list[dict[str, Any]]:
        scheduling = self._scheduling
        if scheduling is None or not scheduling.scheduler.running:
            return []
        names: dict[str, str] = {}
        if scheduling.service is not None:
            names = {str(job.id): job.name for job in await scheduling.service.store.jobs()}
        upcoming = sorted(
            (job.next_run_time.timestamp(), str(job.id))
            for job in scheduling.scheduler.get_jobs()
            if job.next_run_time is not None
        )
        return [
            {"name": names.get(job_id.split(":")[0], job_id), "next_run": at}
            for at, job_id in upcoming[:NEXT_JOBS]
        ]

    async def _count(self, sql: str) -> int:
        try:
            rows = await self._app.db.conn.execute_fetchall(sql)
        except Exception:  # a table a configuration never created counts as empty
            return 0
        return next((int(row[0]) for row in rows), 0)
