"""Channel supervision: a channel whose connection dies is started again, forever.

A Raspberry Pi often boots before its network is up, and connections drop.
``supervise`` runs a channel, and whenever ``run`` ends or raises it records
why, waits with exponential backoff (reset after a healthy stretch) and runs it
again; the other channels are unaffected. Only cancellation stops it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from bot.core.channel import Channel, Inbox
from bot.core.error_text import short_text

log = logging.getLogger(__name__)


async def supervise(
    channel: Channel,
    inbox: Inbox,
    *,
    base_delay_s: float = 1.0,
    max_delay_s: float = 60.0,
    healthy_after_s: float = 60.0,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Keep ``channel`` running until cancelled."""
    loop = asyncio.get_running_loop()
    delay = base_delay_s
    while True:
        started = loop.time()
        try:
            await channel.run(inbox)
            reason = "the connection ended"
        except asyncio.CancelledError:
            channel.status.state = "stopped"
            raise
        except Exception as exc:
            # One line (an error page becomes its status); the traceback at debug level.
            text = short_text(str(exc))
            reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
            log.debug("%s stopped", channel.name, exc_info=exc)
        channel.status.disconnected(reason)
        channel.status.restarts += 1
        if loop.time() - started >= healthy_after_s:
            delay = base_delay_s
        wait = delay * random.uniform(0.8, 1.2)
        log.warning("%s stopped (%s); starting it again in %.1f s", channel.name, reason, wait)
        await sleep(wait)
        delay = min(max_delay_s, delay * 2)
