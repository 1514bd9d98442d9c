"""Reading Telegram updates: the raw JSON is cleaned first, then PTB parses each update alone.

Telegram's JSON can hold what no UTF-8 can: a lone surrogate (``"\\ud83d"``, half
of an emoji) or a control character such as NUL. ``clean_json`` replaces them
with U+FFFD in every string of an update before python-telegram-bot reads it, so
the text, captions, names, chat titles and quoted messages are all clean, and
entity offsets (UTF-16 units) still line up, one unit for one.

``fetch_updates`` asks for getUpdates through ``do_api_request`` and parses each
update on its own: ``Bot.get_updates`` parses the whole batch at once, and one
update PTB cannot read would fail the batch, again at every poll, with its JSON
gone. An update that cannot be read becomes an ``Unreadable`` carrying what could
be found of its chat, so the channel can store it as failed and answer it.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from telegram import Bot, Update
from telegram.warnings import PTBUserWarning

from bot.core.messages import InboundMessage, clean_json, unreadable_reason
from channels.telegram.client import POLL_READ_MARGIN_S

log = logging.getLogger(__name__)

CHANNEL = "telegram"
_OWN_METHOD_WARNING = r"Please use 'Bot\.getUpdates'"


@dataclass(frozen=True, slots=True)
class Unreadable:
    """An update that could not be read, and what could be found of where it came from."""

    update_id: int
    reason: str
    chat_id: str = ""
    sender_id: str = ""
    message_id: str | None = None
    thread_id: str | None = None
    is_direct: bool = False

    def as_inbound(self) -> InboundMessage:
        """A placeholder message to store as failed (its text is empty: it was not read)."""
        return InboundMessage(
            channel=CHANNEL,
            chat_id=self.chat_id,
            sender_id=self.sender_id,
            text="",
            thread_id=self.thread_id,
            message_id=self.message_id or f"update:{self.update_id}",
            is_direct=self.is_direct,
        )


Read = Update | Unreadable  # an update as read: parsed, or what is known of it


def read_update(data: Mapping[str, Any], bot: Bot) -> Read:
    """One update's JSON, cleaned and parsed; an ``Unreadable`` when PTB cannot parse it."""
    clean: dict[str, Any] = clean_json(dict(data))
    try:
        return Update.de_json(clean, bot)
    except Exception as exc:
        return unreadable(clean, exc)


async def fetch_updates(
    bot: Bot, *, offset: int | None, limit: int, wait_s: int, allowed: Sequence[str]
) -> tuple[Read, ...]:
    """getUpdates, each update read on its own (as ``Bot.get_updates`` asks, timeouts too)."""
    # do_api_request warns that getUpdates has a method of its own, which parses the batch
    # at once: what must not happen here. Added each time (a no-op once it is there), so
    # a caller that resets the warning filters cannot bring the warning back.
    warnings.filterwarnings("ignore", _OWN_METHOD_WARNING, PTBUserWarning)
    result = await bot.do_api_request(
        "getUpdates",
        api_kwargs={
            "offset": offset,
            "limit": limit,
            "timeout": wait_s,
            "allowed_updates": list(allowed),
        },
        read_timeout=POLL_READ_MARGIN_S + wait_s,
    )
    updates = result if isinstance(result, list) else []
    return tuple(read_update(item, bot) for item in updates if isinstance(item, dict))


def unreadable(data: Mapping[str, Any], exc: BaseException) -> Unreadable:
    """What is known of an update that could not be read: its id, chat, sender, message."""
    reason = unreadable_reason(exc)
    update_id = _int(data.get("update_id"))
    message = data.get("message") or data.get("edited_message")  # the kinds answered
    if not isinstance(message, dict):
        return Unreadable(update_id, reason)
    chat, sender = _object(message.get("chat")), _object(message.get("from"))
    chat_id, number = chat.get("id"), message.get("message_id")
    if "message" not in data and isinstance(number, int):  # an edit: not the original's id
        number = f"{number}:edit:{_int(message.get('edit_date'))}:unreadable"
    thread = message.get("message_thread_id") if message.get("is_topic_message") else None
    known = isinstance(chat_id, int)
    return Unreadable(
        update_id,
        reason,
        chat_id=str(chat_id) if known else "",
        sender_id=str(sender["id"]) if isinstance(sender.get("id"), int) else "",
        message_id=f"{chat_id}:{number}" if known and isinstance(number, int | str) else None,
        thread_id=str(thread) if isinstance(thread, int) else None,
        is_direct=chat.get("type") == "private",
    )


def unreadable_update(update: Update, exc: BaseException) -> Unreadable:
    """``unreadable`` for an update PTB parsed but PinClaw could not read."""
    try:
        data = update.to_dict()
    except Exception:  # what is left to find is only the id
        data = {"update_id": update.update_id}
    return unreadable(data, exc)


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
