"""A reply shown while the model writes it: one message, posted, edited, then finished.

A streaming chat channel returns a ``Draft`` from ``text_sink``. The agent loop hands
it pieces of reply text (``draft(piece)``) and, while tools run, one short progress
line (``draft.status(line)``); the router hands it the final reply (``finish``). What
the platform does (post a message, edit it, delete it) is the channel's
``DraftSurface``; everything about timing and fallbacks is here, the same for every
platform.

Timing. Nothing is posted until something has been on show for ``grace_s``: a quick
reply arrives as one ordinary message, with no edits and no notification for half a
sentence. After that an edit goes out only when what it shows changed, and never sooner
than ``interval_s`` after the previous call to the platform *returned*, so calls are
at least that far apart wherever they are counted; the final edit keeps the same
distance. The channel's own pacing (flood limits, groups) applies on top.

Rounds. Text written before a tool call is not part of the reply (the reply is the
last round's text, as without streaming), so a progress line replaces it in the
draft, and the next round's text replaces the progress line.

Finishing. The final reply goes through the channel's usual rendering and splitting:
its first piece replaces the draft, the rest follow as new messages, so it reads
exactly as a reply that was never streamed. A first piece that renders as the draft
already shows it is not edited again (Telegram would refuse the edit as "not
modified"; the others would make a call that changes nothing). A draft that cannot
be edited (deleted, too old, refused) gets the reply sent as new messages, and the
draft is deleted, so the chat never shows half an answer above the whole one. A
failure while drafting only stops the drafting: it never costs the reply.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from bot.core.channel import DeliveryError
from bot.core.errors import log_bug
from bot.core.messages import OutboundMessage

log = logging.getLogger(__name__)

# Telegram asks for about one message a second per chat; Discord and Slack allow more.
INTERVAL_S = 1.0
GRACE_S = 1.0
STATUS_MARK = "⏳ "
STOPPED = "⏹ _Stopped._"  # what a draft ends with when its turn is stopped (``abandon``)

Send = Callable[[OutboundMessage], Awaitable[None]]


class DraftSurface(Protocol):
    """The platform side of a draft in one chat, answering one message."""

    def fit(self, text: str) -> str:
        """What the draft shows for ``text`` (markdown): cut to one message, marked when
        more follows, in the form ``post`` and ``edit`` take. Equal results mean an edit
        would change nothing."""
        ...

    async def post(self, shown: str) -> str:
        """Post ``shown`` (from ``fit``) as a reply; return the message's id."""
        ...

    async def edit(self, ref: str, shown: str) -> bool:
        """Show ``shown`` (from ``fit``) in message ``ref``; False when that message can no
        longer be edited. Other failures raise ``DeliveryError``."""
        ...

    async def finish(self, ref: str, message: OutboundMessage, shown: str) -> bool:
        """Deliver ``message`` as a reply is delivered, its first piece edited into ``ref``
        unless it renders as ``shown`` (from ``fit``: what ``ref`` shows now); False, with
        nothing sent, when ``ref`` cannot take it."""
        ...

    async def delete(self, ref: str) -> None:
        """Delete message ``ref``."""
        ...


class Draft:
    """A reply's draft: a ``TextSink`` for streamed text, with ``status`` and ``finish``."""

    def __init__(
        self,
        surface: DraftSurface,
        send: Send,
        *,
        interval_s: float = INTERVAL_S,
        grace_s: float = GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._surface = surface
        self._send = send
        self._interval_s = interval_s
        self._grace_s = grace_s
        self._clock = clock
        self._text = ""  # this round's reply text so far
        self._status = ""  # the progress line while tools run
        self._shown = ""  # what the draft message shows (as the surface fitted it)
        self._ref: str | None = None
        self._since: float | None = None  # when there was first something to show
        self._ready_at = 0.0  # the earliest time for the next call to the platform
        self._broken = False  # a call failed: no more drafting, the reply goes out anew
        self._closing = False
        self._busy = False  # a call to the platform is in flight
        self._changed = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None  # until grace_s: no task yet
        self._task: asyncio.Task[None] | None = None

    def __call__(self, piece: str) -> None:
        """Take a piece of reply text (a new round's text replaces the progress line)."""
        if self._status:
            self._status, self._text = "", ""
        self._text += piece
        self._wake()

    def status(self, line: str) -> None:
        """Show ``line`` instead of the text so far, while tools run."""
        self._status = line
        self._wake()

    async def finish(self, message: OutboundMessage) -> None:
        """Deliver the final reply, into the draft if one is shown; ``DeliveryError`` if it
        cannot be delivered at all."""
        await self._stop()
        ref = self._ref
        if ref is None:
            await self._send(message)
            return
        if not self._broken:
            delay = self._ready_at - self._clock()
            if delay > 0 and not self._shows(message):  # no edit to space out: no wait
                await asyncio.sleep(delay)
            if await self._surface.finish(ref, message, self._shown):
                return
            log.warning("the draft of a reply could not be edited; the reply is sent anew")
        await self._send(message)
        try:
            await self._surface.delete(ref)
        except Exception as exc:  # the reply is out; a stale draft is only untidy
            log.info("could not delete the draft of a reply: %s", exc)

    async def abandon(self, note: str) -> None:
        """The turn was stopped: the draft, if one is shown, keeps the reply text written
        so far (not a progress line, which is no longer true) and ends with ``note``."""
        self.close()
        task, ref = self._task, self._ref
        if task is not None:
            await asyncio.wait({task})
        if ref is None or self._broken:
            return
        text = "" if self._status else self._text.rstrip()
        try:
            shown = self._surface.fit(f"{text}\n\n{note}" if text else note)
            if shown != self._shown:
                await self._surface.edit(ref, shown)
        except Exception as exc:  # a stale draft is untidy, not a reason to fail the stop
            log.info("could not mark the draft of a stopped reply: %s", exc)

    async def withdraw(self) -> None:
        """The turn was cut by a stop and is answered again after the start: the draft, if
        one is shown, is deleted, so the chat never shows half an answer above the whole
        one (as when ``finish`` sends a reply anew). Never raises."""
        self.close()
        task, ref = self._task, self._ref
        if task is not None:
            await asyncio.wait({task})
        if ref is None:
            return
        try:
            await self._surface.delete(ref)
        except Exception as exc:  # the answer after the start still comes; this is untidy
            log.info("could not delete the draft of an interrupted reply: %s", exc)

    def _shows(self, message: OutboundMessage) -> bool:
        """Whether the draft already shows ``message`` whole (its first piece would need no
        edit and no piece follows)."""
        try:
            return self._surface.fit(message.text) == self._shown == message.text.strip()
        except Exception:  # the surface decides again in finish; waiting is the safe side
            return False

    def close(self) -> None:
        """Stop drafting (the turn was stopped or failed before ``finish``); idempotent."""
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()

    def _view(self) -> str:
        if self._status:
            return f"{STATUS_MARK}{self._status}"
        return self._text if self._text.strip() else ""

    def _wake(self) -> None:
        if self._closing or self._broken or not self._view():
            return
        if self._since is None:
            self._since = self._clock()
        self._changed.set()
        if self._timer is None:  # nothing is shown before grace_s: a quick reply needs no task
            self._timer = asyncio.get_running_loop().call_later(self._grace_s, self._start)

    def _start(self) -> None:
        if not (self._closing or self._broken):
            self._task = asyncio.get_running_loop().create_task(self._run(), name="reply draft")

    async def _stop(self) -> None:
        """End drafting; a call in flight is let finish, so its message is known."""
        self._closing = True
        if self._timer is not None:
            self._timer.cancel()
        task = self._task
        if task is None:
            return
        if self._busy:
            self._changed.set()
        else:
            task.cancel()
        await asyncio.wait({task})

    async def _run(self) -> None:
        while not (self._closing or self._broken):
            await self._changed.wait()
            since = self._since if self._since is not None else 0.0
            first = since + self._grace_s if self._ref is None else 0.0
            delay = max(self._ready_at, first) - self._clock()
            if delay > 0:
                await asyncio.sleep(delay)
            self._changed.clear()
            if not self._closing:
                self._busy = True
                try:
                    await self._show(self._view())
                finally:
                    self._busy = False

    async def _show(self, view: str) -> None:
        """Post or edit the draft to show ``view``, if that changes what it shows."""
        try:
            shown = self._surface.fit(view) if view else ""
            if not shown or shown == self._shown:
                return
        except Exception as exc:
            self._give_up(exc)
            return
        try:
            if self._ref is None:
                self._ref = await self._surface.post(shown)
            elif not await self._surface.edit(self._ref, shown):
                log.info("the draft of a reply can no longer be edited; the reply is sent anew")
                self._broken = True
                return
            self._shown = shown
        except Exception as exc:
            self._give_up(exc)
        finally:  # the next call waits from the end of this one
            self._ready_at = self._clock() + self._interval_s

    def _give_up(self, exc: Exception) -> None:
        """Stop drafting after a failure; the reply itself is still delivered at the end."""
        self._broken = True
        if isinstance(exc, DeliveryError):
            log.warning("stopped showing a reply as it is written: %s", exc)
        else:
            log_bug(log, "showing a reply as it is written failed", exc)
