"""Delivering what fired: one worker makes each firing's message and sends it, durably.

Firings are read from the store in order. A ``say`` is sent at once; an ``ask``
runs its turn in a task of its own (turns may wait for an approval). A chat that
cannot take a message now keeps it pending and tried again with a growing wait,
and at once when its channel reconnects, for up to ``GIVE_UP_S``; the pending
rows are what a restart delivers. A send under way when the stop comes gets a
moment to end and be marked (``bot.core.delivery.finish_or_cut``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from bot.core import metrics
from bot.core.delivery import SEND_GRACE_S, finish_or_cut
from bot.core.errors import UserError, log_bug
from bot.cron.runs import NO_REPLY
from bot.triggers.actions import Actions, Undelivered
from bot.triggers.spec import Trigger
from bot.triggers.store import Firing, TriggerStore

log = logging.getLogger(__name__)

RETRY_FIRST_S = 2.0
RETRY_MAX_S = 60.0
GIVE_UP_S = 86400.0
Spawn = Callable[[Coroutine[Any, Any, None], str], None]


class Delivery:
    """The worker that sends the messages of pending firings."""

    def __init__(
        self,
        store: TriggerStore,
        actions: Actions,
        triggers: Callable[[], Mapping[str, Trigger]],
        spawn: Spawn,
    ) -> None:
        self._store = store
        self._actions = actions
        self._triggers = triggers
        self._spawn = spawn
        self._wake = asyncio.Event()
        self._fresh: deque[Firing] = deque()  # recorded just now, not read back
        self._rescan = True  # the store has firings the worker has not seen
        self._due_at: float | None = None  # the earliest retry the last scan saw
        self._asking: set[int] = set()
        self._waiting_for: set[str] = set()

    def wake(self, fired: Firing | None = None) -> None:
        """Deliver ``fired``, just recorded, now; without it, read the pending firings
        again (a test firing, a summary, a channel back)."""
        if fired is None:
            self._rescan = True
        else:
            self._fresh.append(fired)
        self._wake.set()

    async def run(self) -> None:
        """Deliver what is due, for ever; woken by ``wake`` and by retry times.

        A firing ``fire`` has just recorded is handed over and sent without reading
        it back; the store is read at the start, when told, and when a retry is due.
        Each firing is recorded before it is handed over, so a read of the store
        finds every firing waiting in ``_fresh``: a read empties it.
        """
        while True:
            self._wake.clear()
            try:
                if self._rescan or (self._due_at is not None and self._due_at <= time.time()):
                    self._rescan, self._due_at = False, None
                    self._fresh.clear()
                    firings = await self._store.pending()
                else:
                    firings = list(self._fresh)
                    self._fresh.clear()
                for firing in firings:
                    now = time.time()
                    if firing.id in self._asking:
                        continue
                    if firing.next_at > now:
                        self._retry_at(firing.next_at)
                        continue
                    await self._deliver(firing)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log_bug(log, "delivering trigger messages failed", exc)
                self._rescan = True
                self._due_at = time.time() + RETRY_FIRST_S
            wait = None if self._due_at is None else max(0.0, self._due_at - time.time())
            if self._fresh or self._rescan:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    def _retry_at(self, when: float) -> None:
        self._due_at = when if self._due_at is None else min(self._due_at, when)

    async def _deliver(self, firing: Firing) -> None:
        trigger = self._triggers().get(firing.trigger)
        if trigger is None:
            await self._finish(firing, "failed", error="the trigger was removed")
            return
        if firing.text:
            await self._send(trigger, firing, firing.text)
        elif trigger.action == "say":
            await self._send(trigger, firing, self._actions.say_text(trigger, firing.event))
        else:
            self._asking.add(firing.id)
            self._spawn(self._ask(trigger, firing), f"trigger {trigger.name} turn")

    async def _ask(self, trigger: Trigger, firing: Firing) -> None:
        try:
            await self._store.update(firing.id, status="asking")
            try:
                text = await self._actions.ask(trigger, firing.event)
            except UserError as exc:
                log.warning("trigger %s: its turn failed: %s", trigger.name, exc)
                await self._finish(firing, "failed", error=str(exc))
                return
            await self._store.update(firing.id, status="pending", text=text)
            await self._send(trigger, firing, text)
        except asyncio.CancelledError:
            raise  # stopping: the firing stays "asking" and runs again after the start
        except Exception as exc:
            log_bug(log, f"the turn of trigger {trigger.name} failed", exc)
            await self._finish(firing, "failed", error="the turn failed")
        finally:
            self._asking.discard(firing.id)
            self.wake()

    async def _send(self, trigger: Trigger, firing: Firing, text: str) -> None:
        if text.strip() == NO_REPLY:
            await self._finish(firing, "sent", where="(nothing: NO_REPLY)", text=text)
            return
        # A send under way when the stop comes finishes and is marked (within
        # SEND_GRACE_S), so a message that went out is not sent again after the start.
        sending = asyncio.ensure_future(self._send_and_mark(trigger, firing, text))
        try:
            await asyncio.shield(sending)
        except asyncio.CancelledError:
            await finish_or_cut(sending, SEND_GRACE_S)
            raise

    async def _send_and_mark(self, trigger: Trigger, firing: Firing, text: str) -> None:
        try:
            delivered = await self._actions.deliver(trigger, text)
        except Undelivered as exc:
            await self._later(trigger, firing, text, str(exc), exc.channel)
            return
        except UserError as exc:
            log.warning("trigger %s: could not deliver: %s", trigger.name, exc)
            await self._finish(firing, "failed", error=str(exc), text=text)
            return
        await self._finish(firing, "sent", where=delivered.where, text=text)

    async def _later(
        self, trigger: Trigger, firing: Firing, text: str, reason: str, channel: str
    ) -> None:
        """Keep the firing pending and try again later (sooner if its channel connects)."""
        attempts = firing.attempts + 1
        if time.time() - firing.at > GIVE_UP_S:
            log.warning("trigger %s: gave up delivering after a day: %s", trigger.name, reason)
            await self._finish(firing, "failed", error=reason, text=text)
            return
        delay = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** min(attempts - 1, 10))
        if attempts == 1:
            log.info("trigger %s: %s; the message waits and is sent later", trigger.name, reason)
        await self._store.update(
            firing.id, text=text, attempts=attempts, next_at=time.time() + delay, error=reason
        )
        if channel and channel not in self._waiting_for:
            self._waiting_for.add(channel)
            self._spawn(self._until_connected(channel), f"trigger wait {channel}")
        self._retry_at(time.time() + delay)
        self._wake.set()

    async def _until_connected(self, channel: str) -> None:
        try:
            status = self._actions.channel_status(channel)
            if status is not None and status.state != "connected":
                while not await status.wait_connected(3600):
                    pass
                await self._release()
        finally:
            self._waiting_for.discard(channel)

    async def _release(self) -> None:
        """A channel is back: make every firing that waits due now."""
        for firing in await self._store.pending():
            if firing.next_at > time.time():
                await self._store.update(firing.id, next_at=0.0)
        self.wake()

    async def _finish(
        self, firing: Firing, status: str, *, where: str = "", error: str = "", text: str = ""
    ) -> None:
        values: dict[str, object] = {"status": status, "done_at": time.time()}
        if where:
            values["delivered_to"] = where
        if error:
            values["error"] = error
        if text:
            values["text"] = text
        await self._store.update(firing.id, **values)
        metrics.count_trigger(firing.trigger, status)
