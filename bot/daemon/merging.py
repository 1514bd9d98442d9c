"""Split pastes: messages of one person that are answered together, as one turn.

Telegram clients split a paste longer than 4,096 characters into several messages,
Discord clients at 2,000. A message that fills at least half of its platform's limit
(``paste_limit`` on the channel) may go on in a next part, so the ``Gatherer`` holds
it for ``[daemon] merge_window_ms`` before its turn is queued. The same person's next
message in that chat joins it (as text, even when it starts with ``/``: the router
asks ``continues``) and the window starts again; a part that fills less
than half the limit ends the paste at once, and so does a quiet window. The parts go
to the session runner together; the turn reads their texts joined by a line break,
as the paste was. A message that follows the same person's earlier one within the
window while that one still waits for its turn joins that turn. Other messages are
queued at once: nothing short is ever held.

Every part is in the inbound store (pending) before it gets here, so a held part
survives a crash: ``replay`` passes the pending parts through the gatherer again,
and a part that arrives right after the start joins them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bot.core.messages import InboundMessage, SessionKey
from bot.daemon.sessions import Job, SessionRunner

log = logging.getLogger(__name__)

# One person in one chat: their messages are gathered apart from everyone else's.
Key = tuple[SessionKey, str]

# Past this many entries, ``_recent`` forgets the ones older than the window.
_RECENT_KEPT = 256


@dataclass(slots=True)
class _Held:
    """One person's messages waiting for the window to pass."""

    first_at: float
    last_at: float
    jobs: list[Job] = field(default_factory=list)
    replaying: bool = False  # waits for ``replay`` to put back the stored parts first
    replayed: int = 0  # how many of ``jobs`` (at the front) came from the store
    timer: asyncio.TimerHandle | None = None


def key_of(message: InboundMessage) -> Key:
    """Whose messages ``message`` is gathered with: its sender's, in its chat."""
    return message.session, message.sender_id


class Gatherer:
    """Holds messages that may be parts of a split paste, then queues them as one turn."""

    def __init__(self, runner: SessionRunner, *, window_ms: int, limits: Mapping[str, int]) -> None:
        self._runner = runner
        self._window = max(window_ms, 0) / 1000
        self._limits = dict(limits)
        self._held: dict[Key, _Held] = {}
        self._recent: dict[Key, tuple[int, float]] = {}  # last queued job's row, when it came
        self._settled = asyncio.Event()
        self._settled.set()
        self._closed = False

    def may_continue(self, message: InboundMessage) -> bool:
        """Whether ``message`` fills at least half of its platform's length limit, so a
        next part may follow (clients split near the limit, at a line or word break)."""
        limit = self._limits.get(message.channel, 0)
        return bool(self._window and limit and len(message.text) >= limit // 2)

    def add(self, job: Job) -> None:
        """Queue ``job``'s turn now, or hold it while more parts of a paste may come."""
        if self._closed:
            return  # stopping: it stays pending and is answered after the next start
        if not self._window:
            self._runner.submit(job)
            return
        key, now = key_of(job.message), time.monotonic()
        held = self._held.get(key)
        if held is None:
            if not self.may_continue(job.message):
                self._queue(key, [job], now, now)
                return
            held = self._held[key] = _Held(now, now)
            self._settled.clear()
        if job.replayed and held.replaying:
            held.jobs.insert(held.replayed, job)  # stored parts go before newer ones
            held.replayed += 1
        else:
            held.jobs.append(job)
            held.last_at = now
        message = job.message
        if held.replaying:
            if not job.replayed:
                log.info(
                    "holding message %s in %s until the ones from before the restart are queued",
                    message.message_id,
                    message.session,
                )
            return
        if self.may_continue(message):
            log.info(
                "holding message %s in %s: it may be part of a split paste (%d held)",
                message.message_id,
                message.session,
                len(held.jobs),
            )
        self._wait(key, held)  # queues at once when this part ends the paste

    def replace(self, original_id: str, edited: InboundMessage) -> bool:
        """Put the text of ``edited`` into the held message ``original_id`` (keeping the
        original's id); True if that message was still held."""
        for key, held in self._held.items():
            for i, job in enumerate(held.jobs):
                message = job.message
                if message.message_id != original_id or message.channel != edited.channel:
                    continue
                changed = dataclasses.replace(
                    message,
                    text=edited.text,
                    attachments=edited.attachments or message.attachments,
                )
                held.jobs[i] = dataclasses.replace(job, message=changed)
                if not held.replaying:
                    self._wait(key, held)  # the edit may have ended (or lengthened) the paste
                return True
        return False

    def continues(self, message: InboundMessage) -> bool:
        """Whether ``message`` comes while its sender's paste is held: it is then the paste's
        next part, even when it starts with ``/`` (a client cut the paste before such a line)."""
        held = self._held.get(key_of(message))
        return held is not None and not held.replaying and bool(held.jobs)

    def expect(self, messages: Iterable[InboundMessage]) -> None:
        """Before ``replay`` puts back stored messages: hold what their senders send
        meanwhile, so it is answered after them (and with them, when it fits)."""
        if not self._window or self._closed:
            return
        now = time.monotonic()
        for message in messages:
            key = key_of(message)
            if key not in self._held:
                self._held[key] = _Held(now, now, replaying=True)
                self._settled.clear()

    def replayed(self, channel: str | None = None) -> None:
        """``replay`` has put back the stored messages of ``channel`` (None: of every
        channel): their windows start now."""
        now = time.monotonic()
        for key, held in list(self._held.items()):
            if not held.replaying or channel not in (None, key[0].channel):
                continue
            held.replaying = False
            held.first_at = held.last_at = now
            if held.jobs:
                self._wait(key, held)
            else:
                del self._held[key]
        self._check_settled()

    def holding(self) -> bool:
        """Whether any message is held."""
        return bool(self._held)

    async def settled(self) -> None:
        """Wait until no message is held."""
        await self._settled.wait()

    def close(self) -> None:
        """Stop holding: held messages stay pending in the store, for the next start."""
        self._closed = True
        for held in self._held.values():
            if held.timer is not None:
                held.timer.cancel()
        self._held.clear()
        self._settled.set()

    def _wait(self, key: Key, held: _Held) -> None:
        """(Re)start the window after the newest part, or queue now if it ends the paste."""
        if held.timer is not None:
            held.timer.cancel()
            held.timer = None
        if self.may_continue(held.jobs[-1].message):
            loop = asyncio.get_running_loop()
            held.timer = loop.call_later(self._window, self._release, key)
        else:
            self._release(key)

    def _release(self, key: Key) -> None:
        held = self._held.pop(key, None)
        if held is not None:
            if held.timer is not None:
                held.timer.cancel()
            if held.jobs:
                self._queue(key, held.jobs, held.first_at, held.last_at)
        self._check_settled()

    def _queue(self, key: Key, jobs: Sequence[Job], first_at: float, last_at: float) -> None:
        """Submit ``jobs`` as one turn, joining the sender's turn still waiting in the
        runner when the first of them came within the window after it."""
        if self._closed:
            return  # stopping: they stay pending and are answered after the next start
        if len(jobs) > 1:
            log.info("answering %d messages in %s as one turn", len(jobs), key[0])
        waiting = self._runner.last_waiting(key[0])
        recent = self._recent.get(key)
        joins = (
            waiting is not None
            and waiting.scheduled is None
            and recent is not None
            and recent[0] == waiting.row_id
            and first_at - recent[1] <= self._window
        )
        previous: InboundMessage | None = None
        for job in jobs:
            message = job.message
            if previous is not None:
                pasted = self.may_continue(previous) and not message.attachments
                self._runner.submit(dataclasses.replace(job, joins="paste" if pasted else "turn"))
            else:
                self._runner.submit(dataclasses.replace(job, joins="turn") if joins else job)
            previous = message
        self._remember(key, jobs[-1].row_id, last_at)

    def _remember(self, key: Key, row_id: int, at: float) -> None:
        if len(self._recent) >= _RECENT_KEPT:
            self._recent = {
                k: seen for k, seen in self._recent.items() if at - seen[1] <= self._window
            }
        self._recent[key] = (row_id, at)

    def _check_settled(self) -> None:
        if not self._held:
            self._settled.set()


def pasted(jobs: Sequence[Job]) -> list[InboundMessage]:
    """The messages a turn answers, with the parts of a split paste joined back into one
    message (texts joined by a line break: clients cut at one, or at a space)."""
    messages: list[InboundMessage] = []
    for job in jobs:
        message = job.message
        if job.joins == "paste" and messages:
            first = messages[-1]
            message = dataclasses.replace(
                first,
                text=f"{first.text}\n{message.text}",
                attachments=(*first.attachments, *message.attachments),
            )
            messages[-1] = message
        else:
            messages.append(message)
    return messages
