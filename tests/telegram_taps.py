"""Tapping approval buttons on the fake Telegram, as a person would."""

from __future__ import annotations

from typing import Any

from tests.fake_telegram import FakeTelegram, SentMessage


async def request_in(telegram: FakeTelegram, chat: int) -> SentMessage:
    """The approval request the bot posted in ``chat`` (waited for)."""
    return await telegram.await_until(
        lambda: next((m for m in telegram.sent(chat) if m.buttons), None)
    )


def button(request: SentMessage, choice: str) -> str:
    """The callback data of the request's button for ``choice``."""
    return next(
        str(b["callback_data"]) for b in request.buttons if b["callback_data"].endswith(choice)
    )


async def tap(telegram: FakeTelegram, chat: int, user: dict[str, Any], data: str, on: int) -> Any:
    """A tap on message ``on``; how the tapper was answered (waited for)."""
    query = telegram.user_presses(chat, user, on, data)["callback_query"]["id"]
    return await telegram.await_until(lambda: telegram.callback_answer(query))


async def said(telegram: FakeTelegram, chat: int, text: str) -> None:
    """Wait until the bot has said ``text`` in ``chat``."""
    await telegram.await_until(lambda: any(m.text == text for m in telegram.sent(chat)) or None)
