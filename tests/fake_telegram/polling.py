"""Parked getUpdates requests in the fake Telegram server.

A long poll waits on the server's loop until an update is ready, its ``timeout``
runs out, a newer getUpdates supersedes it (409, as Telegram answers), a test
drops its connection, or the server stops (answered ``[]`` at once so shutdown
never waits a poll timeout). While polls are stalled they are held unanswered.
Threads wake the loop through ``Signal.fire_threadsafe``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tests.fake_telegram.wire import ApiError, Json

OTHER_POLL = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)


class Signal:
    """A re-armable wake-up: waiters take ``current``; ``fire`` sets it and arms a new one."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def arm(self) -> None:
        """Bind to the running loop (the server calls this on its loop at start)."""
        self.loop = asyncio.get_running_loop()
        self._event = asyncio.Event()

    @property
    def current(self) -> asyncio.Event:
        """The event the next ``fire`` sets."""
        assert self._event is not None, "the signal is not armed"
        return self._event

    def fire(self) -> None:
        """Wake every waiter (on the loop's thread)."""
        if self._event is not None:
            self._event.set()
            self._event = asyncio.Event()

    def fire_threadsafe(self) -> None:
        """Wake every waiter, from any thread."""
        loop = self.loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to wake
                loop.call_soon_threadsafe(self.fire)


@dataclass(eq=False, slots=True)
class Poll:
    """One parked getUpdates request."""

    transport: asyncio.BaseTransport | None
    deadline: float  # loop time
    dropped: bool = False
    superseded: bool = False


class LongPolls:
    """The parked polls and the switches that hold or release them."""

    def __init__(self, lock: threading.RLock, signal: Signal) -> None:
        self.lock = lock
        self.signal = signal
        self.parked: set[Poll] = set()
        self.stalled = False
        self.stopping = False

    def park(self, transport: asyncio.BaseTransport | None, deadline: float) -> Poll:
        """Register a new poll; older ones are superseded (call with the lock held)."""
        for other in self.parked:
            other.superseded = True
        poll = Poll(transport, deadline)
        self.parked.add(poll)
        return poll

    def drop_all(self) -> int:
        """Close every parked poll's connection unanswered (on the loop)."""
        with self.lock:
            polls = list(self.parked)
            for poll in polls:
                poll.dropped = True
                if poll.transport is not None:
                    poll.transport.close()
        self.signal.fire()
        return len(polls)

    async def hold(
        self, poll: Poll, take: Callable[[], list[Json]]
    ) -> list[Json] | ApiError | None:
        """Wait for the poll's answer: updates, ``[]``, a 409, or None when dropped."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                wake = self.signal.current
                with self.lock:
                    if poll.dropped:
                        return None
                    if self.stopping:
                        return []
                    if poll.superseded:
                        return ApiError(409, OTHER_POLL)
                    stalled = self.stalled
                    updates = [] if stalled else take()
                if updates:
                    return updates
                remaining = None if stalled else poll.deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    return []
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), remaining)
        finally:
            with self.lock:
                self.parked.discard(poll)
