"""Event sources: each kind (webhook, gpio, sensor, ha, serial) is a small module with a
``build(deps, emit)`` function returning a ``Source``. A module is imported only when a
trigger of its kind exists, so a daemon without GPIO triggers never loads gpiozero.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.triggers.spec import Event, Outcome, Trigger

if TYPE_CHECKING:
    from bot.daemon.app import App

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


@dataclass(frozen=True, slots=True)
class SourceDeps:
    """What sources may use of the daemon."""

    app: App


def build_source(kind: str, deps: SourceDeps, emit: Emit) -> Source:
    """The source of ``kind``, its module imported now."""
    module = importlib.import_module(f"bot.triggers.sources.{kind}")
    source: Source = module.build(deps, emit)
    return source
