"""Send pacing: a burst allowance and a sustained rate, per chat and overall.

Bursts (a long reply split in pieces, a cron job posting to many chats) are
spread out before the platform's flood control has to say no, while a reply
after a quiet moment goes out at once. Each limit is a token bucket, kept as
the generic cell-rate algorithm: a send may start ``(burst - 1) * interval``
ahead of the bucket's schedule, and each send moves the schedule on by one
interval. Reservations are made before waiting, so concurrent chats never
over-commit the global rate. Adapters wrap each send in
``async with pacer.slot(chat_id):``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager


class _Bucket:
    """One rate limit: ``burst`` sends at once, then one per ``interval_s``."""

    __slots__ = ("_interval", "_slack", "scheduled")

    def __init__(self, interval_s: float, burst: float) -> None:
        self._interval = interval_s
        self._slack = max(0.0, burst - 1) * interval_s
        self.scheduled = float("-inf")  # when the bucket would be exactly full again

    def reserve(self, earliest: float) -> float:
        """Book one send at ``earliest`` or later; return when it may start."""
        start = max(earliest, self.scheduled - self._slack)
        self.scheduled = max(self.scheduled, start) + self._interval
        return start


class Pacer:
    """Per chat: ``burst`` sends at once, then one per ``per_chat_s`` (0: no limit);
    overall: ``global_burst`` at once (default one second's worth), then ``global_per_s``."""

    def __init__(
        self,
        *,
        per_chat_s: float,
        global_per_s: float,
        burst: int = 3,
        global_burst: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._per_chat_s = per_chat_s
        self._burst = burst
        self._global = _Bucket(1.0 / global_per_s, global_burst or global_per_s)
        self._clock = clock
        self._sleep = sleep
        self._chats: dict[str, _Bucket] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    @asynccontextmanager
    async def slot(self, chat_id: str) -> AsyncIterator[None]:
        """Wait for this chat's and the global turn, then send inside the block."""
        lock = self._locks.setdefault(chat_id, asyncio.Lock())
        async with lock:
            now = self._clock()
            start = now
            if self._per_chat_s > 0:
                chat = self._chats.setdefault(chat_id, _Bucket(self._per_chat_s, self._burst))
                start = chat.reserve(now)
            start = self._global.reserve(start)
            if start > now:
                await self._sleep(start - now)
            yield
        if len(self._chats) > 10_000:
            self._forget_idle(self._clock())

    def _forget_idle(self, now: float) -> None:
        for chat_id in [c for c, bucket in self._chats.items() if bucket.scheduled < now]:
            self._chats.pop(chat_id, None)
            lock = self._locks.get(chat_id)
            if lock is not None and not lock.locked():
                self._locks.pop(chat_id, None)


class Unpaced(Pacer):
    """No client-side pacing (a channel's ``pacing = false``): every slot opens at once.

    For a local Bot API server, or to measure what the daemon itself can do; the
    platform's own flood control still answers with 429s, which delivery retries.
    """

    def __init__(self) -> None:
        super().__init__(per_chat_s=0.0, global_per_s=1.0)

    @asynccontextmanager
    async def slot(self, chat_id: str) -> AsyncIterator[None]:
        """Send now."""
        yield
