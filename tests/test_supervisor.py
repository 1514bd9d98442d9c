"""Supervision: a channel that fails is restarted with backoff, forever, until cancelled."""

from __future__ import annotations

import asyncio

import pytest

from bot.core.channel import ChannelStatus, Inbox
from bot.core.messages import InboundMessage
from bot.daemon.supervisor import supervise


class FlakyChannel:
    """Fails to connect ``failures`` times, then stays connected."""

    name = "flaky"

    def __init__(self, failures: int) -> None:
        self.status = ChannelStatus(self.name)
        self.failures = failures
        self.runs = 0
        self.connected = asyncio.Event()

    async def run(self, inbox: Inbox) -> None:
        self.runs += 1
        if self.failures:
            self.failures -= 1
            raise OSError("Network is unreachable")
        self.status.connected("")
        self.connected.set()
        await asyncio.Event().wait()


class NullInbox:
    async def put(self, message: InboundMessage) -> bool:
        return True


async def test_restarts_with_growing_backoff_until_connected() -> None:
    channel = FlakyChannel(failures=4)
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    task = asyncio.create_task(supervise(channel, NullInbox(), sleep=sleep))  # type: ignore[arg-type]
    await asyncio.wait_for(channel.connected.wait(), 5)
    assert channel.runs == 5
    assert channel.status.restarts == 4
    assert channel.status.state == "connected"
    assert len(delays) == 4
    assert all(0.8 * 2**i <= d <= 1.2 * 2**i for i, d in enumerate(delays))  # 1, 2, 4, 8 s ± 20%
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    state: str = channel.status.state  # the supervisor changed it while we waited
    assert state == "stopped"


async def test_the_reason_is_kept_for_status() -> None:
    channel = FlakyChannel(failures=1)
    reasons: list[str] = []

    async def sleep(seconds: float) -> None:
        reasons.append(channel.status.detail)

    task = asyncio.create_task(supervise(channel, NullInbox(), sleep=sleep))  # type: ignore[arg-type]
    await asyncio.wait_for(channel.connected.wait(), 5)
    assert reasons == ["OSError: Network is unreachable"]
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
