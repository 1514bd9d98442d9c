"""Waiting for the bot's answers in a fake Telegram chat, for the end-to-end chat tests."""

from __future__ import annotations

from typing import Any

from tests.channel_tables import TELEGRAM_OWNER
from tests.fake_telegram import FakeTelegram, SentMessage


async def replies(
    telegram: FakeTelegram, count: int, chat: int = TELEGRAM_OWNER
) -> list[SentMessage]:
    """The bot's messages in ``chat`` once there are ``count`` of them."""
    return await telegram.await_until(
        lambda: sent if len(sent := telegram.sent(chat)) >= count else None
    )


async def ask(telegram: FakeTelegram, chat: int, who: dict[str, Any], text: str) -> str:
    """Send ``text`` as ``who`` in ``chat``; the text of the bot's next message there."""
    before = len(telegram.sent(chat))
    telegram.user_sends(chat, who, text)
    sent = await replies(telegram, before + 1, chat)
    return sent[before].text
