"""Telegram updates as PinClaw ``InboundMessage``s and ``ButtonPress``es.

``normalise`` keeps what the core needs from a ``message`` update: the text (or a
media caption) with the bot's @mention taken out, who wrote it and where (chat,
forum topic), whether the bot was addressed (an @mention, a command addressed
to it, a reply to one of its messages) and the attachments. ``message_id`` is
``"<chat_id>:<message_id>"``, the same on every delivery of the message, so the
core recognises redeliveries.

An ``edited_message`` becomes an edit: ``edit_of`` is the original's id and its
own id adds the edit's date and a hash of the new text
(``"<chat_id>:<message_id>:edit:<edit_date>:<hash>"``), the same on every
delivery of that edit. A reply carries the text it answers (``quoted_text``:
the part the person quoted, else the whole text or caption, cut at 2,000
characters) and its author (``quoted_from``, "PinClaw" for the bot's own).

``press_of`` turns a ``callback_query`` (a tap on an inline button) into a
``ButtonPress``; the channel routes those before ``normalise``, which only takes
messages and their edits. Everything else (channel posts) is logged at debug
level and left out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from dataclasses import dataclass

from telegram import CallbackQuery, Message, MessageEntity, Update
from telegram.constants import ChatType

from bot.core.channel import ButtonPress
from bot.core.messages import BOT_AUTHOR, Attachment, InboundMessage, quote_excerpt

log = logging.getLogger(__name__)

CHANNEL = "telegram"
# Only these reach the bot; Telegram drops other kinds instead of queueing them.
ALLOWED_UPDATES = ("message", "edited_message", "callback_query")
_SPACES = re.compile(r"[ \t]{2,}")


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is (from getMe), and its command names, to recognise it being addressed."""

    id: int
    username: str
    commands: frozenset[str] = frozenset()


def normalise(update: Update, me: BotIdentity) -> InboundMessage | None:
    """The update as an inbound message, or None when it is not one PinClaw answers."""
    if update.message is not None:
        return message_to_inbound(update.message, me)
    if update.edited_message is not None:
        return edit_to_inbound(update.edited_message, me)
    log.debug("ignored update %d of a kind PinClaw does not answer", update.update_id)
    return None


def message_to_inbound(message: Message, me: BotIdentity) -> InboundMessage | None:
    """A Telegram message as an inbound message, or None (service messages, stickers...)."""
    user = message.from_user
    has_text = message.text is not None
    text = (message.text if has_text else message.caption) or ""
    entities = message.entities if has_text else message.caption_entities
    attachments = _attachments(message)
    chat = message.chat
    if user is None or (not text.strip() and not attachments):
        log.debug("ignored message %d in chat %d: nothing to answer", message.message_id, chat.id)
        return None
    address = _addressing(text, entities, me)
    if address.other_bot:
        log.debug("ignored a command for another bot in chat %d", message.chat.id)
        return None
    reply = message.reply_to_message
    if reply is not None and reply.forum_topic_created is not None:
        reply = None  # in a forum topic every message "replies" to the topic's first message
    thread = message.message_thread_id if message.is_topic_message else None
    quoted_text, quoted_from = _quoted(message, reply, me.id)
    return InboundMessage(
        channel=CHANNEL,
        chat_id=str(chat.id),
        sender_id=str(user.id),
        text=address.text or text,
        sender_name=user.full_name or user.username or "",
        thread_id=None if thread is None else str(thread),
        message_id=f"{chat.id}:{message.message_id}",
        reply_to_id=None if reply is None else f"{chat.id}:{reply.message_id}",
        is_direct=chat.type == ChatType.PRIVATE,
        mentioned=address.mentioned,
        reply_to_bot=reply is not None
        and reply.from_user is not None
        and reply.from_user.id == me.id,
        attachments=attachments,
        chat_title=chat.title or "",
        sent_at=message.date.timestamp(),
        quotes=_quotes(message, reply, user.id, me.id),
        quoted_text=quoted_text,
        quoted_from=quoted_from,
    )


def edit_to_inbound(message: Message, me: BotIdentity) -> InboundMessage | None:
    """An edited message as an edit of the original (see the module docstring), or None."""
    inbound = message_to_inbound(message, me)
    if inbound is None or inbound.message_id is None:
        return None
    edited = message.edit_date or message.date
    digest = hashlib.sha256(inbound.text.encode("utf-8", "replace")).hexdigest()[:8]
    return dataclasses.replace(
        inbound,
        message_id=f"{inbound.message_id}:edit:{int(edited.timestamp())}:{digest}",
        edit_of=inbound.message_id,
        sent_at=edited.timestamp(),  # an edit is as new as its edit, however old the message
    )


def _quoted(message: Message, reply: Message | None, bot: int) -> tuple[str, str]:
    """``quoted_text`` and ``quoted_from`` of a reply: the part the person quoted (a
    ``quote``), else the whole text or caption of the message answered."""
    part = message.quote.text if message.quote is not None else ""
    if reply is not None:
        text = part or reply.text or reply.caption or ""
        author = reply.from_user
        if author is not None:
            who = BOT_AUTHOR if author.id == bot else author.full_name
        else:
            chat = reply.sender_chat  # a channel, or a group's anonymous admin
            who = (chat.title or "someone") if chat is not None else "someone"
    elif message.external_reply is not None:
        text, who = part, "someone in another chat"
    else:
        return "", ""
    if not text.strip():
        return "", ""
    return quote_excerpt(text), who or "someone"


def _quotes(message: Message, reply: Message | None, sender: int, bot: int) -> str:
    """Whose words the message carries besides the sender's: a forward, a quoted reply."""
    origin = message.forward_origin
    if origin is not None:
        who = (
            getattr(origin, "sender_user", None)
            or getattr(origin, "sender_chat", None)
            or getattr(origin, "chat", None)
        )
        name = getattr(origin, "sender_user_name", "") or (
            getattr(who, "full_name", "") or getattr(who, "title", "") or "someone"
            if who is not None
            else "someone"
        )
        return f"a message forwarded from {name}"
    if message.external_reply is not None:
        return "a quoted message from another chat"
    author = reply.from_user if reply is not None else None
    if reply is not None and (author is None or author.id not in (sender, bot)):
        name = author.full_name if author is not None else "someone"
        return f"a message quoted from {name}"
    return ""


def press_of(query: CallbackQuery) -> ButtonPress | None:
    """A tap on one of the bot's buttons as a press, or None without button data or message.

    An inline-mode message or a game button has no message or no data; such a
    tap cannot be one of PinClaw's buttons.
    """
    message = query.message
    if message is None or not query.data:
        return None
    user = query.from_user
    return ButtonPress(
        channel=CHANNEL,
        chat_id=str(message.chat.id),
        user_id=str(user.id),
        user_name=user.full_name or user.username or "",
        action_id=query.data,
        message_ref=str(message.message_id),
    )


@dataclass(frozen=True, slots=True)
class _Address:
    text: str  # the text without the bot's mention
    mentioned: bool
    other_bot: bool  # a command addressed to another bot


def _addressing(text: str, entities: tuple[MessageEntity, ...], me: BotIdentity) -> _Address:
    """Whether the bot is addressed, and the text without its mention (offsets are UTF-16)."""
    encoded = text.encode("utf-16-le")
    handle = f"@{me.username}".lower()
    cuts: list[tuple[int, int]] = []  # UTF-16 (start, end) to remove
    mentioned = other_bot = False
    for entity in entities:
        start, end = entity.offset, entity.offset + entity.length
        piece = encoded[2 * start : 2 * end].decode("utf-16-le")
        if _names_bot(entity, piece, handle, me.id):
            mentioned = True
            cuts.append((start, end))
        elif entity.type == MessageEntity.BOT_COMMAND:
            name, _, target = piece[1:].partition("@")
            if target and target.lower() == me.username.lower():
                mentioned = True
                cuts.append((start + 1 + len(name), end))  # keep "/new", drop "@pinclaw_bot"
            elif target:
                other_bot = other_bot or start == 0
            elif start == 0 and name.lower() in me.commands:
                mentioned = True  # a bare command of ours, e.g. "/status" in a group
    if not cuts:
        return _Address(text, mentioned, other_bot)
    kept: list[bytes] = []
    position = 0
    for start, end in sorted(cuts):
        kept.append(encoded[2 * position : 2 * start])
        position = max(position, end)
    kept.append(encoded[2 * position :])
    cleaned = _SPACES.sub(" ", b"".join(kept).decode("utf-16-le")).strip()
    return _Address(cleaned.lstrip(",:;").strip(), mentioned, other_bot)


def _names_bot(entity: MessageEntity, piece: str, handle: str, bot_id: int) -> bool:
    """An ``@botname`` mention, or a mention of the bot by name (``text_mention``)."""
    if entity.type == MessageEntity.MENTION:
        return piece.lower() == handle
    if entity.type == MessageEntity.TEXT_MENTION:
        return entity.user is not None and entity.user.id == bot_id
    return False


def _attachments(message: Message) -> tuple[Attachment, ...]:
    """Documents, the largest size of a photo, voice notes, audio and video."""
    found: list[Attachment] = []
    if message.document is not None:
        doc = message.document
        name, mime = doc.file_name or "document", doc.mime_type or "application/octet-stream"
        found.append(Attachment(name, mime, doc.file_size or 0, doc.file_id))
    if message.photo:
        photo = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        found.append(Attachment("photo.jpg", "image/jpeg", photo.file_size or 0, photo.file_id))
    if message.voice is not None:
        voice = message.voice
        mime = voice.mime_type or "audio/ogg"
        found.append(Attachment("voice.ogg", mime, voice.file_size or 0, voice.file_id))
    if message.audio is not None:
        audio = message.audio
        name, mime = audio.file_name or "audio", audio.mime_type or "audio/mpeg"
        found.append(Attachment(name, mime, audio.file_size or 0, audio.file_id))
    if message.video is not None:
        video = message.video
        name, mime = video.file_name or "video.mp4", video.mime_type or "video/mp4"
        found.append(Attachment(name, mime, video.file_size or 0, video.file_id))
    return tuple(found)
