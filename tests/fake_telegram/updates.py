"""Builders for the Bot API objects users produce: users, chats, messages, button presses.

Entities are computed the way Telegram computes them for a user's text:
``@username`` mentions and ``/command`` (or ``/command@bot``) bot commands, with
offsets in UTF-16 code units.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from tests.fake_telegram.html_check import utf16_len
from tests.fake_telegram.records import SentMessage
from tests.fake_telegram.wire import Json

# Telegram's patterns: a mention is 2-32 of [A-Za-z0-9_] after an "@" that does not
# follow a word character; a command is 1-64 of them after a "/" at a word start.
_MENTION = re.compile(r"(?<!\w)@[A-Za-z0-9_]{2,32}(?!\w)")
_COMMAND = re.compile(r"(?<![\w/<>])/[A-Za-z0-9_]{1,64}(?:@[A-Za-z0-9_]{3,32})?(?![\w/<>])")
UPDATE_TYPES_BY_DEFAULT_EXCLUDED = frozenset(
    {"chat_member", "message_reaction", "message_reaction_count"}
)


def make_user(
    user_id: int,
    first_name: str = "Ada",
    username: str | None = None,
    *,
    last_name: str | None = None,
    language_code: str | None = "en",
    is_bot: bool = False,
) -> Json:
    """A Bot API ``User``."""
    user: Json = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
    if last_name:
        user["last_name"] = last_name
    if username:
        user["username"] = username
    if language_code:
        user["language_code"] = language_code
    return user


def make_chat(
    chat_id: int | str,
    chat_type: str = "private",
    *,
    title: str | None = None,
    user: Json | None = None,
    is_forum: bool = False,
) -> Json:
    """A Bot API ``Chat``; a private chat takes its names from ``user``."""
    chat: Json = {"id": chat_id, "type": chat_type}
    if chat_type == "private":
        person = user or {"first_name": f"User {chat_id}"}
        for key in ("first_name", "last_name", "username"):
            if person.get(key):
                chat[key] = person[key]
        return chat
    chat["title"] = title or f"Group {chat_id}"
    if is_forum:
        chat["is_forum"] = True
    return chat


def default_chat(chat_id: int | str) -> Json:
    """The chat the bot writes to when no user message introduced it."""
    if isinstance(chat_id, str):
        return {"id": chat_id, "type": "channel", "title": chat_id.lstrip("@"), "username": chat_id}
    if chat_id > 0:
        return make_chat(chat_id)
    kind = "supergroup" if str(chat_id).startswith("-100") else "group"
    return make_chat(chat_id, kind)


def text_entities(text: str) -> list[Json]:
    """The mention and bot_command entities Telegram adds to a user's text."""
    entities = [_entity(text, match, "mention") for match in _MENTION.finditer(text)] + [
        _entity(text, match, "bot_command") for match in _COMMAND.finditer(text)
    ]
    return sorted(entities, key=lambda e: e["offset"])


def _entity(text: str, match: re.Match[str], kind: str) -> Json:
    start = utf16_len(text[: match.start()])
    return {"type": kind, "offset": start, "length": utf16_len(match.group())}


def quoted(message: Mapping[str, Any] | SentMessage) -> Json:
    """A message as it appears in ``reply_to_message`` (one level deep, like Telegram)."""
    body = dict(message.message if isinstance(message, SentMessage) else message)
    body.pop("reply_to_message", None)
    return body


def user_message(
    *,
    message_id: int,
    chat: Json,
    user: Json,
    text: str,
    entities: list[Json] | None,
    reply_to: Mapping[str, Any] | SentMessage | None,
    thread_id: int | None,
    media: Json | None,
) -> Json:
    """A ``Message`` from a user; with media, the text becomes the caption."""
    message: Json = {
        "message_id": message_id,
        "from": user,
        "chat": chat,
        "date": int(time.time()),
    }
    found = text_entities(text) if entities is None else entities
    if media:
        message.update(media)
        if text:
            message["caption"] = text
            if found:
                message["caption_entities"] = found
    else:
        message["text"] = text
        if found:
            message["entities"] = found
    if thread_id is not None:
        message["message_thread_id"] = thread_id
        if chat.get("is_forum"):
            message["is_topic_message"] = True
    if reply_to is not None:
        message["reply_to_message"] = quoted(reply_to)
    return message


def edited(message: Mapping[str, Any], text: str) -> Json:
    """``message`` as its author edited it: the new text (or caption), entities, edit_date."""
    body = dict(message)
    captioned = "caption" in body
    key, entities_key = ("caption", "caption_entities") if captioned else ("text", "entities")
    body[key] = text
    body.pop(entities_key, None)
    if found := text_entities(text):
        body[entities_key] = found
    body["edit_date"] = int(time.time())
    return body


def update_kind(update: Mapping[str, Any]) -> str:
    """The update's type: the one key besides ``update_id``."""
    return next((key for key in update if key != "update_id"), "unknown")
