"""Stopping within a bound: waits that give up, and tasks cancelled within a time limit.

``pinclaw run`` stops in two phases. First the turns in progress get
``[daemon] shutdown_grace_s`` to finish while the scheduler stops beside them;
then everything else (approval records, the channels, the HTTP endpoint, the MCP
servers) closes side by side within ``CLOSE_S``. Every wait here gives up at
its limit with one log line instead of holding the stop: a platform that does
not answer must not keep the daemon alive (systemd would kill it, uncleanly).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable

from bot.core.delivery import SEND_GRACE_S, finish_or_cut

log = logging.getLogger(__name__)

# After the turns: the most the rest of the stop may take (the bound is
# grace + 2 s from the signal to the exit; the process needs the remainder to exit).
CLOSE_S = 1.5
CHANNELS_S = 0.5  # of which the channels get at least this (approval records get the rest)
# How long a cancelled task gets for its own clean-up before it is left behind.
CANCEL_WAIT_S = 1.0
STOP = "stopped by the user"  # why /stop cancels a turn (``bot.daemon.sessions``)
# Of that, a turn cut by the stop gives a reply already being sent ``SEND_GRACE_S`` (with
# ``CUT_WAIT_S`` to cut one still going; ``bot.core.delivery``), or takes at most this
# long to take back the draft it showed.
WITHDRAW_S = 0.3


async def within(seconds: float, work: Awaitable[object], what: str) -> bool:
    """Await ``work`` for at most ``seconds``; False (and a log line) when it took longer."""
    try:
        async with asyncio.timeout(max(seconds, 0.0)):
            await work
    except TimeoutError:
        log.warning("stopping: %s took longer than %.1f s; not waiting for it", what, seconds)
        return False
    return True


async def cancel_within(tasks: Iterable[asyncio.Task[object]], seconds: float) -> list[str]:
    """Cancel ``tasks`` and wait up to ``seconds`` for them to end; tasks still running
    are cancelled once more (which interrupts their clean-up). Their names are returned."""
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    if not pending:
        return []
    _, late = await asyncio.wait(pending, timeout=max(seconds, 0.0))
    for task in late:
        task.cancel()  # a clean-up that hangs on the network is given up
    if late:
        await asyncio.wait(late, timeout=0.1)
    return sorted(task.get_name() for task in late)


async def sent_unless_cut(sending: asyncio.Future[bool]) -> bool:
    """Whether ``sending`` (the router's ``_finish``) delivered the reply. When the stop
    cuts the turn meanwhile, a reply already under way gets ``SEND_GRACE_S`` to go out and be
    recorded, so it is not sent again after the next start; one still going then (its
    chat is down) is cut, and its messages are answered after the start. ``/stop`` cuts
    it at once."""
    try:
        return await asyncio.shield(sending)
    except asyncio.CancelledError as exc:
        stopped = bool(exc.args) and exc.args[0] == STOP
        await finish_or_cut(sending, 0.0 if stopped else SEND_GRACE_S)
        raise


def recorded(sending: asyncio.Future[bool] | None) -> bool:
    """Whether a delivery ended and recorded how it went (the messages are settled)."""
    if sending is None or not sending.done() or sending.cancelled():
        return False
    return sending.exception() is None
