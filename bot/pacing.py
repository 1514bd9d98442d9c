"""Send pacing: a minimum gap between messages to one chat, and a global rate.

Bursts (a long reply split in pieces, a cron job posting to many chats) are
spread out before the platform's flood control has to say no. Adapters wrap
each send in ``async with pacer.slot(chat_id):``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager


class Pacer:
    """At most one send per ``per_chat_s`` in a chat and ``global_per_s`` sends per second."""

    def __init__(
        self,
        *,
        per_chat_s: float,
        global_per_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._per_chat_s = per_chat_s
        self._global_gap_s = 1.0 / global_per_s
        self._clock = clock
        self._sleep = sleep
        self._next_chat: dict[str, float] = {}
        self._next_global = 0.0
        self._locks: dict[str, asyncio.Lock] = {}

    @asynccontextmanager
    async def slot(self, chat_id: str) -> AsyncIterator[None]:
        """Wait for this chat's and the global turn, then send inside the block."""
        lock = self._locks.setdefault(chat_id, asyncio.Lock())
        async with lock:
            now = self._clock()
            start = max(now, self._next_chat.get(chat_id, 0.0), self._next_global)
            self._next_global = start + self._global_gap_s
            if start > now:
                await self._sleep(start - now)
            try:
                yield
            finally:
                self._next_chat[chat_id] = self._clock() + self._per_chat_s
                if len(self._next_chat) > 10_000:
                    self._forget_old()

    def _forget_old(self) -> None:
        now = self._clock()
        for chat in [c for c, t in self._next_chat.items() if t < now]:
            self._next_chat.pop(chat, None)
            lock = self._locks.get(chat)
            if lock is not None and not lock.locked():
                self._locks.pop(chat, None)
