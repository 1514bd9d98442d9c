"""Event sources: each kind (webhook, gpio, sensor, ha, serial) is a small module with a
``build(deps, emit)`` function returning a ``Source``. A module is imported only when a
trigger of its kind exists, so a daemon without GPIO triggers never loads gpiozero.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bot.triggers.spec import Event, Outcome, Trigger

if TYPE_CHECKING:
    import httpx

    from bot.agent.tool_registry import ToolRegistry
    from bot.config import LoadedConfig
    from bot.hardware.history import SensorHistory
    from bot.store.db import Database

Emit = Callable[[str, Event], Awaitable[Outcome]]
"""How a source hands an event for the trigger of that name to the service."""


@dataclass(frozen=True, slots=True)
class SourceState:
    """One line of a source's state for status, doctor and the panel."""

    what: str  # "ha:cover.garage_door", "webhook doorbell", "gpio:door_sensor"
    ok: bool
    detail: str  # "connected to ws://…", "POST /hooks/doorbell", "pin 17 claimed"


class Source(Protocol):
    """A kind of event source, watching what the current triggers of its kind name."""

    kind: str

    async def start(self) -> None:
        """Begin watching (connect, open devices); must not raise for an unreachable source."""
        ...

    async def stop(self) -> None:
        """Stop watching and release what it holds; idempotent."""
        ...

    async def watch(self, triggers: Sequence[Trigger]) -> None:
        """The enabled triggers of this kind, now (at start and after every change)."""
        ...

    def states(self) -> list[SourceState]:
        """What each watched thing is doing."""
        ...


class AppParts(Protocol):
    """The parts of the daemon's core (``bot.daemon.app.App``) that sources may use."""

    @property
    def loaded(self) -> LoadedConfig: ...

    @property
    def db(self) -> Database: ...

    @property
    def tools(self) -> ToolRegistry: ...

    @property
    def readings(self) -> SensorHistory | None: ...

    @property
    def client(self) -> httpx.AsyncClient | None: ...


@dataclass(frozen=True, slots=True)
class SourceDeps:
    """What sources may use of the daemon."""

    app: AppParts


async def cancel_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended, cancelling again a task that went on.

    Python 3.11's ``asyncio.wait_for`` returns its result instead of raising when a
    cancel meets a call that has just finished (as a device call off the loop does),
    so one cancel may be swallowed and the task carry on to its next sleep.
    """
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.5)


def build_source(kind: str, deps: SourceDeps, emit: Emit) -> Source:
    """The source of ``kind``, its module imported now."""
    module = importlib.import_module(f"bot.triggers.sources.{kind}")
    source: Source = module.build(deps, emit)
    return source
