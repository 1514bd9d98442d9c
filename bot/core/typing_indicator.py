"""Keep a platform's "typing…" indicator alive while a reply is being written."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def keep_typing(
    send: Callable[[], Awaitable[object]], every_s: float, after_s: float = 0.0
) -> AsyncIterator[None]:
    """Call ``send`` after ``after_s`` seconds and then every ``every_s`` seconds, until
    the block exits.

    With ``after_s``, a reply written sooner shows no "typing…" at all: it needs
    none, and no request to the platform competes with the reply itself (until
    then there is only a timer, no task).
    Typing is a courtesy: a failure is logged at debug level and never stops a reply.
    """

    async def refresh() -> None:
        while True:
            try:
                await send()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.debug("typing indicator failed: %s", exc)
            await asyncio.sleep(every_s)

    tasks: list[asyncio.Task[None]] = []

    def start() -> None:
        tasks.append(asyncio.create_task(refresh(), name="typing"))

    timer = asyncio.get_running_loop().call_later(after_s, start) if after_s > 0 else None
    if timer is None:
        start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
