"""The ``ha:ENTITY`` triggers: which state changes fire them, and the events they get.

A trigger fires when its entity's state changes (attribute-only updates do not
count) to ``when`` (to anything when empty); with ``for``, once the new state
has lasted that long, and a change before then cancels it. ``unavailable`` and
``unknown`` say that Home Assistant lost the device, not what the device is:
closed, unavailable, closed is no change, and only a trigger whose ``when``
names one of them fires on them.

The first ``get_states`` of a run only learns the states. After a reconnect,
a watched entity whose state differs from the last one known fires once, its
event marked as caught up (a ``for`` counts from the state's ``last_changed``).
Each event's idempotency key is the entity and its ``last_changed``, so one
change never fires a trigger twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from bot.config.hardware import HomeAssistantConfig
from bot.core.durations import format_duration
from bot.core.errors import log_bug
from bot.core.messages import clean_json, clean_text
from bot.triggers.sources import Emit, SourceState, cancel_all
from bot.triggers.sources.ha.connection import HaConnection
from bot.triggers.spec import Event, Trigger

log = logging.getLogger(__name__)

NOT_STATES = frozenset({"unavailable", "unknown"})
State = dict[str, Any]


class HaSource:
    """The entities the ``ha:`` triggers watch, over one connection to Home Assistant."""

    kind = "ha"

    def __init__(self, emit: Emit, config: HomeAssistantConfig, **timing: float) -> None:
        self._emit = emit
        self.connection: HaConnection | None = None
        if config.url:
            self.connection = HaConnection(
                config.url,
                config.token.get_secret_value() if config.token else "",
                on_change=self._changed,
                on_states=self._states_now,
                timeout_s=config.timeout_s,
                **timing,
            )
        self._triggers: dict[str, Trigger] = {}
        self._timers: dict[str, tuple[Trigger, asyncio.Task[None]]] = {}
        self._raw: dict[str, str] = {}  # every entity's last state, as sent
        self._real: dict[str, str] = {}  # its last state that was not unavailable/unknown
        self._seeded = False  # the first get_states only seeds; later ones catch up
        self._started = False

    async def start(self) -> None:
        """Connect (in the background) if some trigger watches an entity."""
        self._started = True
        if self.connection is not None and self._triggers:
            self.connection.start()

    async def stop(self) -> None:
        """Close the connection and forget the states; idempotent."""
        self._started = False
        await self._halt()

    async def watch(self, triggers: Sequence[Trigger]) -> None:
        """Watch these triggers' entities, on the same connection."""
        self._triggers = {t.name: t for t in triggers}
        for name, (trigger, task) in list(self._timers.items()):
            if self._triggers.get(name) != trigger:
                task.cancel()
                del self._timers[name]
        if not self._triggers:
            await self._halt()  # nothing to watch: no connection streaming every change
        elif self._started and self.connection is not None:
            self.connection.start()

    def states(self) -> list[SourceState]:
        """One line per watched entity: the connection, and the entity's state."""
        return [
            SourceState(f"ha:{entity}", *self._state_of(entity))
            for entity in sorted({t.subject for t in self._triggers.values()})
        ]

    def _state_of(self, entity: str) -> tuple[bool, str]:
        if self.connection is None:
            return False, "Home Assistant is not configured ([home_assistant] url)"
        link = self.connection.describe()
        if self.connection.link != "connected":
            return False, link
        now = self._raw.get(entity)
        if now is None:
            return False, f"{link}, but Home Assistant has no entity {entity}"
        return True, f"{link}; now {clean_text(now)[:60]}"

    async def _halt(self) -> None:
        tasks = [task for _, task in self._timers.values()]
        self._timers.clear()
        await cancel_all(tasks)
        if self.connection is not None:
            await self.connection.stop()
        self._raw, self._real, self._seeded = {}, {}, False

    # -- what the connection reports -------------------------------------------------

    async def _changed(self, data: dict[str, Any]) -> None:
        entity, old, new = data.get("entity_id"), data.get("old_state"), data.get("new_state")
        if not isinstance(entity, str):
            return
        if not isinstance(new, dict):  # the entity was removed
            self._raw.pop(entity, None)
            self._real.pop(entity, None)
            return
        old_raw = str(old.get("state", "")) if isinstance(old, dict) else None
        if old_raw == str(new.get("state", "")):
            return  # only attributes changed
        await self._evaluate(entity, old_raw, new, caught_up=False)

    async def _states_now(self, states: list[Any]) -> None:
        """A ``get_states`` answer: learn the states, or fire for what changed meanwhile."""
        fresh = {
            s["entity_id"]: s for s in states if isinstance(s, dict) and "entity_id" in s
        }  # fmt: skip
        catching_up, self._seeded = self._seeded, True
        for entity in set(self._raw) - set(fresh):
            self._raw.pop(entity, None)
            self._real.pop(entity, None)
        for entity, state in fresh.items():
            old_raw, new_raw = self._raw.get(entity), str(state.get("state", ""))
            if catching_up and old_raw is not None and old_raw != new_raw:
                await self._evaluate(entity, old_raw, state, caught_up=True)
            else:
                self._remember(entity, new_raw)

    def _remember(self, entity: str, raw: str) -> None:
        self._raw[entity] = raw
        if raw not in NOT_STATES:
            self._real[entity] = raw

    async def _evaluate(
        self, entity: str, old_raw: str | None, new: State, *, caught_up: bool
    ) -> None:
        new_raw = str(new.get("state", ""))
        old_real = self._real.get(entity)
        self._remember(entity, new_raw)
        for trigger in [t for t in self._triggers.values() if t.subject == entity]:
            before = changed_from(trigger.when, old_raw, old_real, new_raw)
            if before is None:
                continue
            if (timer := self._timers.pop(trigger.name, None)) is not None:
                timer[1].cancel()  # the state it waited on has changed
            if trigger.when and new_raw.casefold() != trigger.when.strip().casefold():
                continue
            event = state_event(entity, before, new, caught_up)
            if not trigger.for_s:
                await self._fire(trigger, event)
                continue
            wait = max(0.0, trigger.for_s - (_age(new) if caught_up else 0.0))
            task = asyncio.create_task(
                self._after(trigger, wait, event), name=f"ha trigger {trigger.name} for"
            )
            self._timers[trigger.name] = (trigger, task)

    async def _after(self, trigger: Trigger, wait: float, event: Event) -> None:
        """Fire once the state has lasted ``for`` (a change meanwhile cancels this)."""
        await asyncio.sleep(wait)
        if self._timers.get(trigger.name, (None, None))[1] is asyncio.current_task():
            del self._timers[trigger.name]  # firing now: a change can no longer cancel it
        state = event.fields.get("state", "")
        lasted = f"{event.summary}, and it has been {state} for {format_duration(trigger.for_s)}"
        await self._fire(trigger, Event(lasted, event.fields, untrusted=True, key=event.key))

    async def _fire(self, trigger: Trigger, event: Event) -> None:
        try:
            await self._emit(trigger.name, event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log_bug(log, f"the Home Assistant event for trigger {trigger.name} was lost", exc)


def changed_from(when: str, old_raw: str | None, old_real: str | None, new_raw: str) -> str | None:
    """The state an entity changed from, for a trigger with this ``when``; None for no change."""
    if when.strip().casefold() in NOT_STATES:
        return None if new_raw == old_raw else (old_raw or "")
    if new_raw in NOT_STATES:
        return None
    before = old_real if old_real is not None else old_raw
    return None if before == new_raw else (before or "")


def state_event(entity: str, before: str, new: State, caught_up: bool) -> Event:
    """The event for a change of ``entity`` from ``before`` to the state object ``new``."""
    state = str(new.get("state", ""))
    attributes = new.get("attributes")
    attributes = attributes if isinstance(attributes, dict) else {}
    summary = f"{entity} changed from {before[:80] or 'nothing'} to {state[:80]}"
    if caught_up:
        summary += " (caught up after reconnecting to Home Assistant)"
    changed_at = str(new.get("last_changed") or "")
    fields = {
        "entity": entity,
        "state": state,
        "old_state": before,
        "name": str(attributes.get("friendly_name") or entity),
        "attributes": attributes,
        "caught_up": caught_up,
        "last_changed": changed_at,
    }
    key = f"{entity}@{changed_at}"[:200] if changed_at else ""
    return Event(clean_text(summary), clean_json(fields), untrusted=True, key=key)


def _age(state: State) -> float:
    """Seconds since the state's ``last_changed`` (0 when it cannot be read)."""
    try:
        changed = datetime.fromisoformat(str(state.get("last_changed", "")))
    except ValueError:
        return 0.0
    if changed.tzinfo is None:
        return 0.0
    return max(0.0, time.time() - changed.timestamp())
