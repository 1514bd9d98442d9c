"""Keep a platform's "typing…" indicator alive while a reply is being written."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def keep_typing(send: Callable[[], Awaitable[object]], every_s: float) -> AsyncIterator[None]:
    """Call ``send`` now and every ``every_s`` seconds until the block exits.

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

    task = asyncio.create_task(refresh(), name="typing")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
