"""Letting the tasks a part started finish when it closes, and none outlive it.

A channel's button presses (and the like) run in tasks of their own. When the
channel closes they get a moment to finish; what is still running then is
cancelled and awaited. The stop may cut that moment short by cancelling the
closing task itself: the tasks are cancelled then too, so nothing is left
running after the part that owned it.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def drain(tasks: set[asyncio.Task[Any]], timeout_s: float) -> list[asyncio.Task[Any]]:
    """Let ``tasks`` (a live set) finish for up to ``timeout_s``, then cancel the rest and
    wait for them to end; returns the ones cut."""
    if not tasks:
        return []
    try:
        await asyncio.wait(set(tasks), timeout=timeout_s)
    finally:  # also when the stop cuts the wait short
        late = [task for task in list(tasks) if not task.done()]
        for task in late:
            task.cancel()
    await asyncio.gather(*late, return_exceptions=True)
    return late
