"""Discord messages, slash commands and button presses as PinClaw's inbound records.

Where a conversation lives: a guild channel or a DM is a chat (``chat_id`` = the
channel id). A thread keeps its parent channel as the chat and its own id as
``thread_id``: it is still its own session (the session key includes the
thread), and ``allowed_groups`` listing a channel also covers the threads
opened in it. A thread discord.py has not cached (it cannot tell it is one)
falls back to being a chat of its own.

Text is Discord's own markdown and passes through; the bot's mention
(``<@id>``, ``<@!id>``, or its managed role ``<@&id>``) is removed, and other
people's mentions become ``@name`` so the model reads names, not numbers. What a
person wrote or is called is cleaned last (``cleaned``: a lone surrogate or a
control character becomes U+FFFD); a message that cannot be read at all is
described by ``unreadable``, to be stored as failed and answered.

An edited message (``MESSAGE_UPDATE`` with an ``edited_timestamp``) becomes an
edit of the original (``edit_from_message``: ``edit_of`` is the original's id,
its own id ``"<id>:edit:<edited at, ms>"``). A reply carries the text it answers
when Discord sends that message along (``referenced_message``); it is not
fetched when Discord leaves it out (deleted, or too old to be sent).
"""

from __future__ import annotations

import dataclasses
import re

import discord

from bot.core.channel import ButtonPress
from bot.core.messages import (
    BOT_AUTHOR,
    Attachment,
    InboundMessage,
    clean_text,
    cleaned,
    quote_excerpt,
)

CHANNEL = "discord"
INTERACTION_PREFIX = "interaction:"
# Messages people write; joins, pins, boosts and other system messages are not.
_CHAT_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})
_USER_MENTION = re.compile(r"<@!?(\d+)>( ?)")
_ROLE_MENTION = re.compile(r"<@&(\d+)> ?")
_Location = tuple[str, str | None, str]  # chat_id, thread_id, chat_title


def interaction_message_id(interaction_id: int) -> str:
    """The ``message_id`` that stands for a slash-command invocation."""
    return f"{INTERACTION_PREFIX}{interaction_id}"


def interaction_id_of(message_id: str | None) -> int | None:
    """The interaction id inside a ``message_id`` made by ``interaction_message_id``."""
    if message_id and message_id.startswith(INTERACTION_PREFIX):
        tail = message_id.removeprefix(INTERACTION_PREFIX)
        return int(tail) if tail.isdigit() else None
    return None


def from_message(message: discord.Message, me: discord.ClientUser) -> InboundMessage | None:
    """``message`` as an InboundMessage, or None when it is not for the core at all.

    None for the bot's own messages (discord.py echoes them), other bots and
    webhooks (no bot-to-bot loops), system messages, and messages with neither
    text nor files.
    """
    author = message.author
    if author.id == me.id or author.bot or message.webhook_id is not None:
        return None
    if message.type not in _CHAT_TYPES:
        return None
    mentioned = _mentions_me(message, me)
    text = _readable(message, me)
    attachments = tuple(
        Attachment(
            name=a.filename,
            mime_type=a.content_type or "application/octet-stream",
            size=a.size,
            ref=a.url,
        )
        for a in message.attachments
    )
    if not text and not attachments:
        return None
    chat_id, thread_id, title = _location(message.channel)
    reference = message.reference
    quoted_text, quoted_from = _quoted(message, me)
    inbound = InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        thread_id=thread_id,
        sender_id=str(author.id),
        sender_name=author.display_name,
        text=text,
        message_id=str(message.id),
        reply_to_id=str(reference.message_id) if reference and reference.message_id else None,
        is_direct=_is_direct(message.channel),
        mentioned=mentioned,
        reply_to_bot=_replies_to(message, me),
        attachments=attachments,
        chat_title=title,
        sent_at=message.created_at.timestamp(),
        quotes=_quotes(message, me),
        quoted_text=quoted_text,
        quoted_from=quoted_from,
    )
    return cleaned(inbound)  # lone surrogates, control characters: see clean_text


def edit_from_message(message: discord.Message, me: discord.ClientUser) -> InboundMessage | None:
    """An edited message as an edit of the original; None when its text was not edited
    (Discord also sends updates that only add link previews) or ``from_message`` skips it."""
    edited = message.edited_at
    inbound = from_message(message, me) if edited is not None else None
    if inbound is None or edited is None:
        return None
    return dataclasses.replace(
        inbound,
        message_id=_edit_id(message),
        edit_of=str(message.id),
        sent_at=edited.timestamp(),  # an edit is as new as its edit, however old the message
    )


def _edit_id(message: discord.Message) -> str:
    """The id of one edit of ``message``: the same on each delivery of that edit."""
    edited = message.edited_at or message.created_at
    return f"{message.id}:edit:{int(edited.timestamp() * 1000)}"


def _quoted(message: discord.Message, me: discord.ClientUser) -> tuple[str, str]:
    """The text a reply answers and who wrote it, when Discord sent that message along."""
    reference = message.reference
    if reference is None or reference.type == discord.MessageReferenceType.forward:
        return "", ""
    resolved = reference.resolved
    if not isinstance(resolved, discord.Message):
        return "", ""
    files = ", ".join(a.filename for a in resolved.attachments)
    text = _readable(resolved, me) or (f"[attached: {files}]" if files else "")
    if not text:
        return "", ""
    author = resolved.author
    return quote_excerpt(text), BOT_AUTHOR if author.id == me.id else author.display_name


def unreadable(message: discord.Message) -> InboundMessage:
    """What is known of a message ``from_message`` could not read: where, who, its id."""
    channel = message.channel
    if isinstance(channel, discord.Thread):  # a thread's chat is its parent channel
        chat_id, thread_id = str(channel.parent_id), str(channel.id)
    else:
        chat_id, thread_id = str(channel.id), None
    return InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        thread_id=thread_id,
        sender_id=str(message.author.id),
        text="",
        message_id=str(message.id) if message.edited_at is None else _edit_id(message),
        is_direct=_is_direct(channel),
    )


def _quotes(message: discord.Message, me: discord.ClientUser) -> str:
    """Whose words the message carries besides the sender's: a forward, a reply quoting them."""
    reference = message.reference
    if reference is None:
        return ""
    if reference.type == discord.MessageReferenceType.forward or message.message_snapshots:
        return "a forwarded message"
    resolved = reference.resolved
    if isinstance(resolved, discord.Message):
        if resolved.author.id in (message.author.id, me.id):
            return ""
        return f"a message quoted from {resolved.author.display_name}"
    return "a quoted message"


def from_command(
    interaction: discord.Interaction[discord.Client], name: str, argument: str = ""
) -> InboundMessage:
    """A slash-command invocation as the message ``/name`` or ``/name ARGUMENT`` (addressed
    to the bot)."""
    user = interaction.user
    channel = interaction.channel
    if channel is None:
        chat_id, thread_id, title = str(interaction.channel_id), None, ""
    else:
        chat_id, thread_id, title = _location(channel)
    command = InboundMessage(
        channel=CHANNEL,
        chat_id=chat_id,
        thread_id=thread_id,
        sender_id=str(user.id),
        sender_name=user.display_name,
        text=f"/{name} {argument.strip()}".strip(),
        message_id=interaction_message_id(interaction.id),
        is_direct=interaction.guild_id is None,
        mentioned=True,
        chat_title=title,
    )
    return cleaned(command)


def press_from(interaction: discord.Interaction[discord.Client], custom_id: str) -> ButtonPress:
    """A button press as the core reads it: the chat as messages name it, the tapper."""
    user = interaction.user
    channel = interaction.channel
    chat_id = str(interaction.channel_id) if channel is None else _location(channel)[0]
    message = interaction.message
    return ButtonPress(
        channel=CHANNEL,
        chat_id=chat_id,
        user_id=str(user.id),
        user_name=user.display_name,
        action_id=custom_id,
        message_ref=str(message.id) if message is not None else "",
    )


def _is_direct(channel: object) -> bool:
    if isinstance(channel, discord.DMChannel | discord.GroupChannel):
        return True
    if isinstance(channel, discord.PartialMessageable):
        return channel.guild_id is None
    return False


def _location(channel: object) -> _Location:
    """Where a message was written: its chat, its thread, and a title for the model."""
    if isinstance(channel, discord.Thread):
        parent = channel.parent
        where = f"#{parent.name} in {channel.guild.name}" if parent else channel.guild.name
        return str(channel.parent_id), str(channel.id), f"thread {channel.name!r} of {where}"
    if isinstance(channel, discord.abc.GuildChannel):
        return str(channel.id), None, f"#{channel.name} in {channel.guild.name}"
    chat_id = str(getattr(channel, "id", ""))
    return chat_id, None, ""


def _mentions_me(message: discord.Message, me: discord.ClientUser) -> bool:
    if any(user.id == me.id for user in message.mentions):
        return True
    return any(_is_my_role(role, me) for role in message.role_mentions)


def _is_my_role(role: discord.Role, me: discord.ClientUser) -> bool:
    # Discord sometimes writes an @mention of a bot as one of its managed role.
    return role.tags is not None and role.tags.bot_id == me.id


def _replies_to(message: discord.Message, me: discord.ClientUser) -> bool:
    reference = message.reference
    if reference is None:
        return False
    resolved = reference.resolved
    return isinstance(resolved, discord.Message) and resolved.author.id == me.id


def _readable(message: discord.Message, me: discord.ClientUser) -> str:
    """The text without the bot's mention and with other users' mentions as names."""
    names = {user.id: user.display_name for user in message.mentions}
    my_roles = {role.id for role in message.role_mentions if _is_my_role(role, me)}

    def user(match: re.Match[str]) -> str:
        who = int(match.group(1))
        if who == me.id:
            return ""
        return f"@{names[who]}{match.group(2)}" if who in names else match.group(0)

    def role(match: re.Match[str]) -> str:
        return "" if int(match.group(1)) in my_roles else match.group(0)

    # A removed mention takes one following space with it; indentation is left alone.
    text = _USER_MENTION.sub(user, clean_text(message.content))  # cleaned before it is read
    return _ROLE_MENTION.sub(role, text).strip()
