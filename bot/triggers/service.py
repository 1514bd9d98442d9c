"""The trigger service: takes events from the sources, decides whether each fires, records
it, and delivers what fired, durably.

``fire`` is where every event arrives. It is judged (active and quiet hours,
cooldown, rate limit, a repeated idempotency key) and recorded in SQLite before
anything is sent; a firing is then delivered by one worker through the outbox
(``bot.triggers.delivery``), which keeps it until the chat takes it, also across a
restart. Events held back
by the cooldown or the rate limit are counted, and when the hold ends one
summary says how many there were ("fired 37 times in 10m").

The set of triggers is the config's plus the stored ones; a poll notices the
stored ones changed by ``pinclaw triggers`` in another process, and test
firings it queued.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.core import metrics
from bot.core.durations import format_duration
from bot.core.errors import UserError, log_bug
from bot.cron.heartbeat import in_active_hours
from bot.triggers.actions import Actions
from bot.triggers.delivery import Delivery
from bot.triggers.sources import Source, SourceDeps, SourceState, build_source, cancel_all
from bot.triggers.spec import Event, Outcome, Trigger
from bot.triggers.store import Firing, TriggerStore

log = logging.getLogger(__name__)

POLL_S = 2.0
HELD = ("cooldown", "limited")


@dataclass(slots=True)
class _Burst:
    """Events of one trigger held back since its last message."""

    held: int = 0
    first_at: float = 0.0
    reasons: set[str] = field(default_factory=set)
    task: asyncio.Task[None] | None = None


class TriggerService:
    """Every trigger, its sources, and the delivery of its firings."""

    def __init__(
        self,
        *,
        store: TriggerStore,
        configured: Iterable[Trigger],
        actions: Actions,
        deps: SourceDeps | None,
        zone: ZoneInfo,
        poll_s: float = POLL_S,
    ) -> None:
        self.store = store
        self._configured = {t.name: t for t in configured}
        self._stored: dict[str, Trigger] = {}
        self._delivery = Delivery(store, actions, lambda: self.triggers, self._spawn)
        self._deps = deps
        self._zone = zone
        self._poll_s = poll_s
        self.sources: dict[str, Source] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._bursts: dict[str, _Burst] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._version = -1
        self._started = False

    # -- the triggers ---------------------------------------------------------------

    @property
    def triggers(self) -> dict[str, Trigger]:
        """Every trigger by name: the config's, then the stored ones."""
        return {**self._stored, **self._configured}

    def configured(self, name: str) -> bool:
        """Whether ``name`` is a trigger of the config file (it cannot be removed here)."""
        return name in self._configured

    async def reload(self) -> None:
        """Read the stored triggers again and bring the sources in line."""
        self._version = await self.store.version()
        self._stored = {t.name: t for t in await self.store.triggers()}
        await self._sync_sources()
        self._delivery.wake()  # a test firing may have been queued

    async def _sync_sources(self) -> None:
        by_kind: dict[str, list[Trigger]] = {}
        for trigger in self.triggers.values():
            if trigger.enabled:
                by_kind.setdefault(trigger.kind, []).append(trigger)
        if self._deps is None:
            return
        for kind in sorted(set(by_kind) | set(self.sources)):
            source = self.sources.get(kind)
            try:
                if source is None:
                    source = build_source(kind, self._deps, self.fire)
                    self.sources[kind] = source
                    await source.watch(by_kind.get(kind, []))
                    await source.start()
                else:
                    await source.watch(by_kind.get(kind, []))
            except Exception as exc:
                log_bug(log, f"the {kind} event source could not start", exc)

    def states(self) -> list[SourceState]:
        """What every source is doing, for status, doctor and the panel."""
        found: list[SourceState] = []
        for source in self.sources.values():
            try:
                found.extend(source.states())
            except Exception as exc:
                found.append(SourceState(source.kind, False, f"state unknown ({exc})"))
        return found

    # -- life -----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the sources, the delivery worker and the poll."""
        if self._started:
            return
        self._started = True
        await self.store.prune()
        await self.reload()
        self._spawn(self._delivery.run(), "trigger delivery")
        self._spawn(self._watch(), "trigger poll")
        names = ", ".join(sorted(self.triggers)) or "none yet"
        log.info("triggers: %s", names)

    async def stop(self, grace_s: float = 0.0) -> None:
        """Stop the sources and the worker; turns in progress get ``grace_s`` to finish.
        What is not delivered stays pending, and a cut turn runs again after the start."""
        if not self._started:
            return
        self._started = False
        for source in list(self.sources.values()):
            try:
                await source.stop()
            except Exception as exc:
                log_bug(log, f"the {source.kind} event source did not stop cleanly", exc)
        turns = [t for t in self._tasks if t.get_name().endswith(" turn")]
        for task in self._tasks:
            if task not in turns:
                task.cancel()
        if turns and grace_s > 0:
            await asyncio.wait(turns, timeout=grace_s)
        await cancel_all(list(self._tasks))

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._poll_s)
            try:
                if await self.store.version() != self._version:
                    await self.reload()
            except Exception as exc:
                log_bug(log, "checking for changed triggers failed", exc)

    # -- events ---------------------------------------------------------------------

    async def fire(self, name: str, event: Event) -> Outcome:
        """Judge and record one event for the trigger ``name``; what became of it."""
        trigger = self.triggers.get(name)
        if trigger is None:
            return "unknown"
        if not trigger.enabled:
            return "disabled"
        async with self._locks.setdefault(name, asyncio.Lock()):
            if event.key and await self.store.seen(name, event.key):
                metrics.count_trigger(name, "duplicate")
                return "duplicate"
            outcome = await self._judge(trigger, event)
            firing = await self.store.record(name, event, outcome)
            if firing is None:
                outcome = "duplicate"
            metrics.count_trigger(name, outcome)
            if outcome == "fired":
                assert firing is not None
                self._delivery.wake(firing)  # sent without reading it back
                log.info("trigger %s fired: %s", name, event.summary)
            elif outcome in HELD:
                self._hold(trigger, event, outcome)
            else:
                log.info("trigger %s: %s not fired (%s)", name, event.summary, outcome)
        return outcome

    async def test(self, name: str, event: Event) -> Firing | None:
        """Fire ``name`` once with ``event`` whatever its limits say (``triggers test``)."""
        if name not in self.triggers:
            return None
        firing = await self.store.record(name, event, "fired", kind="test")
        self._delivery.wake()
        return firing

    async def _judge(self, trigger: Trigger, event: Event) -> Outcome:
        local = datetime.fromtimestamp(event.at, self._zone)
        if trigger.active_hours and not in_active_hours(trigger.active_hours, local):
            return "inactive"
        if trigger.quiet_hours and in_active_hours(trigger.quiet_hours, local):
            return "quiet"
        if trigger.cooldown_s:
            last = await self.store.last_sent(trigger.name)
            if last is not None and event.at - last < trigger.cooldown_s:
                return "cooldown"
        count, window = trigger.rate
        if count and len(await self.store.fired_since(trigger.name, event.at - window)) >= count:
            return "limited"
        return "fired"

    def _hold(self, trigger: Trigger, event: Event, outcome: str) -> None:
        """Count an event held back; one summary goes out when the hold ends."""
        burst = self._bursts.setdefault(trigger.name, _Burst(first_at=event.at))
        burst.held += 1
        burst.reasons.add(outcome)
        if burst.task is None:
            burst.task = asyncio.create_task(
                self._summarise(trigger.name), name=f"trigger {trigger.name} summary"
            )
            self._tasks.add(burst.task)
            burst.task.add_done_callback(self._tasks.discard)

    async def _summarise(self, name: str) -> None:
        """Wait until the trigger may send again, then record one summary of what was held."""
        while True:
            trigger = self.triggers.get(name)
            if trigger is None:
                self._bursts.pop(name, None)
                return
            free_at = await self._free_at(trigger)
            if free_at <= time.time():
                break
            await asyncio.sleep(free_at - time.time())
        burst = self._bursts.pop(name)
        # The messages that started the hold count too: "fired 30 times", not 28.
        count, window = trigger.rate
        lookback = max(trigger.cooldown_s, window if count else 0.0)
        sent = await self.store.fired_since(name, burst.first_at - lookback)
        since = min([burst.first_at, *sent])
        total = burst.held + len(sent)
        why = " and ".join(
            f"cooldown {format_duration(trigger.cooldown_s)}" if r == "cooldown"
            else f"rate_limit {trigger.rate_limit}"
            for r in sorted(burst.reasons)
        )  # fmt: skip
        text = (
            f"🔁 {name} fired {total} times in {format_duration(max(1.0, time.time() - since))}; "
            f"{burst.held} of them {'was' if burst.held == 1 else 'were'} not sent ({why})."
        )
        await self.store.record(name, Event(text), "fired", kind="summary", text=text)
        self._delivery.wake()

    async def _free_at(self, trigger: Trigger) -> float:
        """When the trigger's next event would fire again, as far as its limits go."""
        free = 0.0
        if trigger.cooldown_s and (last := await self.store.last_sent(trigger.name)):
            free = last + trigger.cooldown_s
        count, window = trigger.rate
        if count:
            times = await self.store.fired_since(trigger.name, time.time() - window)
            if len(times) >= count:
                free = max(free, times[-count] + window)
        return free


def configured_triggers(tables: Iterable[object]) -> list[Trigger]:
    """The config's ``[[triggers]]`` as triggers."""
    from bot.config.triggers import TriggerConfig
    from bot.triggers.spec import from_config

    return [from_config(t) for t in tables if isinstance(t, TriggerConfig)]


def by_name(triggers: Mapping[str, Trigger], name: str) -> Trigger:
    """The trigger called ``name``; ``UserError`` naming the known ones."""
    trigger = triggers.get(name)
    if trigger is None:
        known = ", ".join(sorted(triggers)) or "none"
        raise UserError(f"there is no trigger called {name!r}; triggers: {known}")
    return trigger
