"""Delivering replies to Telegram: split, paced, retried, and never dropped over markup.

A reply is cut into pieces that fit one message (``format.py``); the first
piece answers the person's message, the last carries the buttons. Each piece is
sent as HTML; if Telegram refuses the markup ("can't parse entities"), that
piece is sent again as its markdown source in plain text, so no text is lost.
Sends are paced as Telegram asks (about one message a second per chat, 20 a
minute in a group, 30 a second overall); flood control (429) waits the
``retry_after`` Telegram gives, and network errors are retried with backoff.
Errors that cannot improve (bot blocked, chat not found) end in ``DeliveryError``.

``replace`` edits a message the bot sent (an approval request becoming its
record) and drops its keyboard, with the same HTML-or-plain rule; a message
that can no longer be edited (deleted, too old) gets the new text as a new
message instead.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest

from bot.core.channel import DeliveryError
from bot.core.delivery import send_with_retries
from bot.core.messages import Button, OutboundMessage
from bot.core.pacing import Pacer, Unpaced
from channels.telegram.client import classify, is_markup_error
from channels.telegram.format import Piece, split_reply

log = logging.getLogger(__name__)

MAX_CALLBACK_DATA = 64
BUTTONS_PER_ROW = 3
# Telegram's reasons for refusing to edit a message that is gone or too old to change.
UNEDITABLE = ("message to edit not found", "message can't be edited", "message_id_invalid")


class Sender:
    """Sends replies through a ``Bot``, paced per chat and overall."""

    def __init__(self, *, paced: bool = True) -> None:
        self._pacer = Pacer(per_chat_s=1.0, global_per_s=30.0) if paced else Unpaced()
        # Groups: 20 a minute, strictly (no burst): Telegram is least forgiving there.
        self._group_pacer = (
            Pacer(per_chat_s=3.0, global_per_s=1000.0, burst=1) if paced else Unpaced()
        )

    async def send(self, bot: Bot, message: OutboundMessage) -> list[Message]:
        """Deliver every piece of ``message`` in order (returned), or raise ``DeliveryError``."""
        pieces = split_reply(message.text)
        if not pieces:
            log.warning("telegram: not sending an empty reply to chat %s", message.chat_id)
            return []
        markup = keyboard(message.buttons)
        chat = chat_ref(message.chat_id)
        common = _in_thread(message.thread_id)
        reply_to = _replied_message_id(message)
        sent: list[Message] = []
        for index, piece in enumerate(pieces):
            options = dict(common)
            if index == 0 and reply_to is not None:
                options["reply_parameters"] = ReplyParameters(
                    reply_to, allow_sending_without_reply=True
                )
            if index == len(pieces) - 1 and markup is not None:
                options["reply_markup"] = markup
            what = "the reply" if len(pieces) == 1 else f"part {index + 1} of the reply"
            async with self._slot(message.chat_id):
                sent.append(
                    await self._send_piece(
                        bot, chat, piece, options, f"{what} to {message.chat_id}"
                    )
                )
        return sent

    async def edit(self, bot: Bot, chat_id: str, message_id: int, text: str) -> bool:
        """Show ``text`` (markdown that fits one message) in message ``message_id``, without
        buttons; False when that message can no longer be edited."""
        pieces = split_reply(text)
        if not pieces:
            return True
        what = f"the draft {message_id} in {chat_id}"
        async with self._slot(chat_id):
            return await self._edit_piece(bot, chat_ref(chat_id), message_id, pieces[0], what)

    async def send_into(
        self, bot: Bot, message: OutboundMessage, message_id: int, *, showing: str = ""
    ) -> bool:
        """Deliver ``message`` with its first piece edited into message ``message_id`` (its
        draft) and the rest sent after it; False, with nothing sent, when that message
        cannot take it (gone, too old, refused). ``showing`` is the markdown the draft
        shows now: a first piece that renders the same is not edited again."""
        pieces = split_reply(message.text)
        if not pieces or message.buttons:
            return False
        chat = chat_ref(message.chat_id)
        what = f"the reply to {message.chat_id}"
        shown = split_reply(showing)
        if not (shown and shown[0].html == pieces[0].html):
            try:
                async with self._slot(message.chat_id):
                    if not await self._edit_piece(bot, chat, message_id, pieces[0], what):
                        return False
            except DeliveryError as exc:
                log.warning("telegram: could not edit the draft of %s: %s", what, exc)
                return False
        for number, piece in enumerate(pieces[1:], 2):
            async with self._slot(message.chat_id):
                options = _in_thread(message.thread_id)
                await self._send_piece(bot, chat, piece, options, f"part {number} of {what}")
        return True

    async def replace(
        self, bot: Bot, chat_id: str, message_id: int, text: str, thread_id: str | None
    ) -> None:
        """Edit a message's text to ``text`` and remove its buttons, or send ``text`` anew.

        "Not modified" counts as done. A message that cannot be edited any more
        (deleted, too old) gets ``text`` as a new message in the same chat and
        thread; other refusals raise ``DeliveryError``.
        """
        pieces = split_reply(text)
        what = f"the new text of message {message_id} in {chat_id}"
        if not pieces:
            log.warning("telegram: not replacing message %s with empty text", message_id)
            return
        async with self._slot(chat_id):
            edited = await self._edit_piece(bot, chat_ref(chat_id), message_id, pieces[0], what)
        rest = pieces[1:]
        if not edited:
            log.warning(
                "telegram: message %s in chat %s can no longer be edited; its new text is sent "
                "as a new message",
                message_id,
                chat_id,
            )
            rest = pieces
        for index, piece in enumerate(rest):
            async with self._slot(chat_id):
                await self._send_piece(
                    bot,
                    chat_ref(chat_id),
                    piece,
                    _in_thread(thread_id),
                    f"part {index + 1} of {what}",
                )

    async def _edit_piece(
        self, bot: Bot, chat: int | str, message_id: int, piece: Piece, what: str
    ) -> bool:
        """Edit one message to ``piece`` without a keyboard; False when it cannot be edited."""
        plain = False

        async def attempt() -> bool:
            nonlocal plain
            try:
                if plain:
                    await bot.edit_message_text(piece.source, chat, message_id)
                else:
                    await bot.edit_message_text(
                        piece.html, chat, message_id, parse_mode=ParseMode.HTML
                    )
            except BadRequest as exc:
                reason = exc.message.lower()
                if not plain and is_markup_error(exc):
                    log.warning("telegram refused the markup of %s (%s); editing plain", what, exc)
                    plain = True
                    return await attempt()
                if "not modified" in reason:
                    return True  # already so, e.g. a retry after an answer that got lost
                if any(gone in reason for gone in UNEDITABLE):
                    return False
                raise
            return True

        return await send_with_retries(attempt, classify, what=what)

    async def _send_piece(
        self, bot: Bot, chat: int | str, piece: Piece, options: dict[str, Any], what: str
    ) -> Message:
        plain = False

        async def attempt() -> Message:
            nonlocal plain
            if not plain:
                try:
                    return await bot.send_message(
                        chat, piece.html, parse_mode=ParseMode.HTML, **options
                    )
                except BadRequest as exc:
                    if not is_markup_error(exc):
                        raise
                    log.warning("telegram refused the markup of %s (%s); sending plain", what, exc)
                    plain = True
            return await bot.send_message(chat, piece.source, **options)

        return await send_with_retries(attempt, classify, what=what)

    def paced(self, chat_id: str) -> AbstractAsyncContextManager[None]:
        """A send slot in ``chat_id``, shared with replies: for other sends (files)."""
        return self._slot(chat_id)

    @asynccontextmanager
    async def _slot(self, chat_id: str) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if chat_id.startswith("-"):  # groups, supergroups and channels
                await stack.enter_async_context(self._group_pacer.slot(chat_id))
            await stack.enter_async_context(self._pacer.slot(chat_id))
            yield


def keyboard(buttons: tuple[Button, ...]) -> InlineKeyboardMarkup | None:
    """Buttons as an inline keyboard: one row of up to three, else one button per row."""
    if not buttons:
        return None
    for button in buttons:
        if not 1 <= len(button.action_id.encode()) <= MAX_CALLBACK_DATA:
            raise DeliveryError(
                f"the button {button.label!r} cannot be sent: Telegram allows 1 to "
                f"{MAX_CALLBACK_DATA} bytes of button data, its action id has "
                f"{len(button.action_id.encode())}"
            )
    row = [InlineKeyboardButton(b.label, callback_data=b.action_id) for b in buttons]
    rows = [row] if len(row) <= BUTTONS_PER_ROW else [[b] for b in row]
    return InlineKeyboardMarkup(rows)


def _in_thread(thread_id: str | None) -> dict[str, Any]:
    """The send options that put a message into a forum topic (none outside one)."""
    if thread_id and thread_id.isdigit():
        return {"message_thread_id": int(thread_id)}
    return {}


def chat_ref(chat_id: str) -> int | str:
    """A chat id as Telegram takes it: a number, or an ``@channelname``."""
    try:
        return int(chat_id)
    except ValueError:
        return chat_id


def _replied_message_id(message: OutboundMessage) -> int | None:
    """The Telegram message id in ``reply_to`` (``"<chat_id>:<message_id>"``), if in this chat."""
    if not message.reply_to:
        return None
    chat, _, number = message.reply_to.rpartition(":")
    if chat != message.chat_id or not number.isdigit():
        return None
    return int(number)
