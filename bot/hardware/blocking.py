"""Blocking device calls, run off the event loop, one at a time per device, with a deadline.

A stuck device must never freeze the chats: each call runs in a worker thread
and the caller gets an answer within the deadline. A thread cannot be killed,
so a call that overran keeps its device marked busy until it does return;
calls meanwhile are told the device is busy instead of piling up behind it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from bot.core.errors import ToolError

log = logging.getLogger(__name__)

T = TypeVar("T")


class DeviceGate:
    """Serialises calls to one device (a GPIO chip, a serial port, an I2C bus)."""

    def __init__(self, name: str, timeout_s: float) -> None:
        self.name = name
        self._timeout_s = timeout_s
        self._lock = asyncio.Lock()
        self._stuck: asyncio.Future[Any] | None = None

    async def run(self, func: Callable[..., T], *args: object) -> T:
        """``func(*args)`` in a thread; ``ToolError`` if busy or too slow."""
        if self._stuck is not None and not self._stuck.done():
            raise ToolError(
                f"{self.name} is still busy with an earlier call that did not finish; "
                "try again later or check the wiring"
            )
        try:
            async with asyncio.timeout(self._timeout_s):
                await self._lock.acquire()
        except TimeoutError:
            raise ToolError(f"{self.name} is busy; try again in a moment") from None
        work = asyncio.ensure_future(asyncio.to_thread(func, *args))
        try:
            return await asyncio.wait_for(asyncio.shield(work), self._timeout_s)
        except TimeoutError:
            log.warning("%s did not answer within %.0f s", self.name, self._timeout_s)
            self._stuck = work
            raise ToolError(
                f"{self.name} did not answer within {self._timeout_s:g} s (hardware.call_timeout_s)"
            ) from None
        finally:
            if work.done():
                self._lock.release()
            else:
                work.add_done_callback(lambda _: self._lock.release())
