"""Guesses at a secret, limited per client in a sliding window and counted before the check.

The panel's login token and ``/link`` codes are checked against the database,
so a check awaits. A limit that counts a wrong guess only after its check can be
outrun: sixty parallel requests all find the count still low while the first
check waits. So a try is taken synchronously, before any await (``reserve``),
and given back (``refund``) only when the check shows it was no wrong guess.
The window lives in memory, so a restart starts it afresh.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

MAX_CLIENTS = 10_000


class TryLimiter:
    """At most ``tries`` tries per client in any ``window_s`` seconds."""

    def __init__(
        self,
        tries: int,
        window_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        self._tries = tries
        self._window_s = window_s
        self._clock = clock
        self._max_clients = max_clients
        self._taken: dict[str, deque[float]] = {}

    def reserve(self, client: str) -> float | None:
        """Take one of ``client``'s tries now; its time (to ``refund`` it), or None when
        none is left (``wait_s`` says how long). Call it before the check awaits."""
        if self.wait_s(client) > 0:
            return None
        now = self._clock()
        if client not in self._taken and len(self._taken) >= self._max_clients:
            self._make_room(now)
        self._taken.setdefault(client, deque()).append(now)
        return now

    def refund(self, client: str, taken: float) -> None:
        """Give back the try taken at ``taken``: the check showed it was no wrong guess."""
        tries = self._taken.get(client)
        if tries is not None and taken in tries:
            tries.remove(taken)
            if not tries:
                del self._taken[client]

    def wait_s(self, client: str) -> float:
        """Seconds until ``client`` has a try again (0: now)."""
        tries = self._taken.get(client)
        if tries is None:
            return 0.0
        now = self._clock()
        while tries and now - tries[0] >= self._window_s:
            tries.popleft()
        if not tries:
            del self._taken[client]
            return 0.0
        return self._window_s - (now - tries[0]) if len(tries) >= self._tries else 0.0

    def _make_room(self, now: float) -> None:
        # Clients by the thousand: forget those whose tries all expired, else the oldest.
        self._taken = {
            client: tries for client, tries in self._taken.items()
            if tries and now - tries[-1] < self._window_s
        }  # fmt: skip
        while len(self._taken) >= self._max_clients:
            self._taken.pop(next(iter(self._taken)))
