"""Long polling for the Telegram channel, with the offset moved only past stored updates.

Telegram forgets an update once a getUpdates call asks for an ``offset`` beyond
it. So the offset advances past an update only after ``inbox.put`` has stored
it: a crash or a stop in between means Telegram sends it again, and the core
recognises the second delivery. The offset survives restarts of ``run`` (kept
by the ``Poller``), so a restarted poll confirms what the last one stored.

Every poll runs under a watchdog: a poll that neither answers nor fails within
its timeout plus a margin has stalled (the peers' "connected but deaf" bot);
the channel reports it and raises, and the supervisor starts it again with a
fresh HTTP client. Network errors are retried a few times with backoff before
giving up the same way. The first poll of a run asks for an answer at once, so
the channel reports itself connected only once a poll has really come back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from telegram import Bot, Update
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from bot.core.channel import ChannelStatus
from bot.core.errors import PinclawError
from channels.telegram.client import retry_after_s
from channels.telegram.events import ALLOWED_UPDATES

log = logging.getLogger(__name__)

NETWORK_RETRIES = 3
FIRST_RETRY_DELAY_S = 0.5


class PollStalled(PinclawError):
    """A long poll got no answer and no error in time: the connection is presumed dead."""


def stall_after_s(poll_timeout_s: float) -> float:
    """How long a poll may stay unanswered: its own timeout plus a margin for the network."""
    return poll_timeout_s + max(5.0, min(10.0, poll_timeout_s / 3))


class Poller:
    """Fetches updates and hands each to ``accept``; remembers the offset between runs."""

    def __init__(self, timeout_s: int, accept: Callable[[Update], Awaitable[None]]) -> None:
        self._timeout_s = timeout_s
        self._accept = accept
        self.offset: int | None = None
        self._confirmed: int | None = None  # the offset Telegram was last told

    async def run(self, bot: Bot, status: ChannelStatus, detail: str) -> None:
        """Poll until cancelled; raise when polling stalls or keeps failing."""
        failures = 0
        timeout = 0  # the first poll answers at once: it proves the connection
        while True:
            try:
                updates = await self._poll(bot, timeout)
            except RetryAfter as exc:
                await asyncio.sleep(retry_after_s(exc))
                continue
            except (PollStalled, TimedOut) as exc:
                reason = str(exc) if isinstance(exc, PollStalled) else "a long poll timed out"
                status.disconnected(reason)
                raise PollStalled(reason) from exc
            except BadRequest:
                raise
            except NetworkError as exc:
                failures += 1
                status.disconnected(f"polling failed: {exc}")
                if failures > NETWORK_RETRIES:
                    raise
                delay = FIRST_RETRY_DELAY_S * 2 ** (failures - 1)
                log.warning("telegram: a poll failed (%s); polling again in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                continue
            failures = 0
            if status.state != "connected":
                status.connected(detail)
            timeout = self._timeout_s
            for update in updates:
                await self._accept(update)  # raises when the core is stopping: no advance
                self.offset = max(self.offset or 0, update.update_id + 1)

    async def confirm(self, bot: Bot) -> None:
        """Tell Telegram about updates stored since the last poll (on a clean stop)."""
        if self.offset is None or self.offset == self._confirmed:
            return
        try:
            await self._poll(bot, 0, limit=1)
        except (TelegramError, PollStalled) as exc:
            log.info("telegram: could not confirm the last updates (%s); they come again", exc)

    async def _poll(self, bot: Bot, wait_s: int, limit: int = 100) -> tuple[Update, ...]:
        watchdog = asyncio.timeout(stall_after_s(wait_s))
        offset = self.offset
        try:
            async with watchdog:
                updates = await bot.get_updates(
                    offset=offset, limit=limit, timeout=wait_s, allowed_updates=ALLOWED_UPDATES
                )
        except TimeoutError as exc:
            if not watchdog.expired():
                raise
            raise PollStalled(
                f"a long poll got no answer in {stall_after_s(wait_s):.0f} s"
            ) from exc
        self._confirmed = offset
        return updates
