"""Per-person limits: tool actions per hour (here) and model tokens per day (in the agent).

A runaway loop or an over-eager person cannot run up unbounded actions or
costs: each sender gets ``max_tool_calls_per_hour`` tool calls in any sliding
hour. The window lives in memory, so a restart starts it afresh.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable


class ToolCallLimit:
    """At most ``per_hour`` calls per sender in any 3600 s window (0: unlimited)."""

    def __init__(self, per_hour: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_hour = per_hour
        self._clock = clock
        self._calls: dict[str, collections.deque[float]] = {}

    def take(self, sender: str) -> float | None:
        """Count one call; None if it is within the limit, else seconds until one frees up."""
        if self._per_hour <= 0:
            return None
        now = self._clock()
        calls = self._calls.setdefault(sender, collections.deque())
        while calls and calls[0] <= now - 3600:
            calls.popleft()
        if len(calls) >= self._per_hour:
            return calls[0] + 3600 - now
        calls.append(now)
        return None
