"""Long polling for the Telegram channel, with the offset moved only past stored updates.

Telegram forgets an update once a getUpdates call asks for an ``offset`` beyond
it. So the offset advances past an update only after ``inbox.put`` has stored
it: a crash or a stop in between means Telegram sends it again, and the core
recognises the second delivery. The offset survives restarts of ``run`` (kept
by the ``Poller``), so a restarted poll confirms what the last one stored. A
stopping channel confirms only what no poll has carried yet, and waits
``CONFIRM_S`` at most: an update left unconfirmed comes again and is recognised.

Every poll runs under a watchdog: a poll that neither answers nor fails within
its timeout plus a margin has stalled (the peers' "connected but deaf" bot);
the channel reports it and raises, and the supervisor starts it again with a
fresh HTTP client. Network errors (an error page from a proxy too) are retried
a few times with backoff, one log line each, before giving up the same way. The
first poll of a run asks for an answer at once, so the channel reports itself
connected only once a poll has really come back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from telegram import Bot
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from bot.core.channel import ChannelStatus
from bot.core.error_text import short_reason
from bot.core.errors import PinclawError
from channels.telegram.client import retry_after_s
from channels.telegram.events import ALLOWED_UPDATES
from channels.telegram.reading import Read, fetch_updates

log = logging.getLogger(__name__)

NETWORK_RETRIES = 3
FIRST_RETRY_DELAY_S = 0.5
CONFIRM_S = 1.0  # a stopping channel waits this long at most to confirm the last updates


class PollStalled(PinclawError):
    """A long poll got no answer and no error in time: the connection is presumed dead."""


def stall_after_s(poll_timeout_s: float) -> float:
    """How long a poll may stay unanswered: its own timeout plus a margin for the network."""
    return poll_timeout_s + max(5.0, min(10.0, poll_timeout_s / 3))


class Poller:
    """Fetches updates and hands each to ``accept``; remembers the offset between runs."""

    def __init__(self, timeout_s: int, accept: Callable[[Read], Awaitable[None]]) -> None:
        self._timeout_s = timeout_s
        self._accept = accept
        self.offset: int | None = None
        self._confirmed: int | None = None  # the offset Telegram was last told
        self._asked: int | None = None  # the offset the poll in flight carries

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
                if failures > NETWORK_RETRIES:
                    raise  # the supervisor logs it, marks the channel down and starts it again
                delay = FIRST_RETRY_DELAY_S * 2 ** (failures - 1)
                # One line per failure; what PTB had to say in full is at debug level.
                log.warning(
                    "telegram: getUpdates failed: %s; retrying in %.1f s", short_reason(exc), delay
                )
                log.debug("telegram: getUpdates failed", exc_info=exc)
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
        """Tell Telegram about updates stored since the last poll was sent (when polling
        stops), waiting ``CONFIRM_S`` at most.

        Usually there is nothing to do: the long poll in flight carried the offset, and
        Telegram counts an update confirmed once a request asks past it. An update left
        unconfirmed comes again after the next start and is recognised as a second
        delivery by the inbound store, so it is still answered exactly once.
        """
        if self.offset is None or self.offset in (self._confirmed, self._asked):
            return
        try:
            async with asyncio.timeout(CONFIRM_S):
                await self._poll(bot, 0, limit=1)
        except (TelegramError, PollStalled, TimeoutError) as exc:
            why = short_reason(exc) if str(exc) else f"no answer in {CONFIRM_S:.0f} s"
            log.info("telegram: could not confirm the last updates (%s); they come again", why)

    async def _poll(self, bot: Bot, wait_s: int, limit: int = 100) -> tuple[Read, ...]:
        watchdog = asyncio.timeout(stall_after_s(wait_s))
        offset = self._asked = self.offset
        try:
            async with watchdog:
                updates = await fetch_updates(
                    bot, offset=offset, limit=limit, wait_s=wait_s, allowed=ALLOWED_UPDATES
                )
        except TimeoutError as exc:
            if not watchdog.expired():
                raise
            raise PollStalled(
                f"a long poll got no answer in {stall_after_s(wait_s):.0f} s"
            ) from exc
        self._confirmed = offset
        return updates
