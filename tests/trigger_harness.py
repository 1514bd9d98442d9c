"""What the trigger tests share: the owner's Telegram chat on the fake server, what the bot
said there, and waiting for a condition without blocking the loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from tests.fake_telegram import FakeTelegram

OWNER = 7001


def telegram_channel(telegram: FakeTelegram) -> dict[str, Any]:
    """A ``[channels.telegram]`` table on the fake server, the owner allowed."""
    return {
        "token": telegram.token,
        "api_base_url": telegram.url,
        "allowed_users": [OWNER],
        "poll_timeout_s": 1,
    }


def texts(telegram: FakeTelegram) -> list[str]:
    """What the bot has said in the owner's chat, in order."""
    return [m.text for m in telegram.sent(OWNER)]


async def arrives(telegram: FakeTelegram, text: str) -> None:
    """Wait until the bot has said ``text`` in the owner's chat."""
    await telegram.await_until(lambda: text in texts(telegram) or None)


async def until(check: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    """Wait until ``check()`` gives something true, and return it."""
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)
    return found
