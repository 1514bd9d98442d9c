"""Files out to Telegram: a document (sendDocument) or a picture (sendPhoto), with a caption,
and spoken replies as voice messages (sendVoice).

Telegram lets a bot upload files of up to 50 MB and pictures of up to 10 MB; a
picture that is larger, or that Telegram cannot process as a photo, goes as a
document instead. The caption is rendered like a reply (Telegram HTML) and sent
as its markdown source in plain text if Telegram refuses the markup; a caption
longer than a caption may be follows the file as an ordinary message. Uploads
share the chat's pacing with replies; flood control and network errors are
retried, a file Telegram calls too large is not.

A voice message is the recording as the speech endpoint made it (Ogg Opus),
answering the person's message in its topic; someone whose privacy settings
refuse voice messages gets the recording as a file instead.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from telegram import Bot, InputFile, Message, ReplyParameters
from telegram.constants import ParseMode
from telegram.error import BadRequest, NetworkError

from bot.core.channel import DeliveryError
from bot.core.delivery import Retry, send_with_retries
from bot.core.messages import OutboundFile, OutboundMessage
from bot.media.audio import duration_s
from channels.telegram.client import classify, is_markup_error
from channels.telegram.format import Piece, split_reply
from channels.telegram.send import Sender, chat_ref

log = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 50 * 1024 * 1024  # what the Bot API takes from a bot
MAX_PHOTO_BYTES = 10 * 1024 * 1024
MAX_CAPTION = 1024
# Telegram's reasons for refusing an image as a photo that a document upload avoids.
NOT_A_PHOTO = ("photo_invalid", "image_process_failed", "photo_ext_invalid", "photo_save")
NO_VOICE = "voice_messages_forbidden"  # the person's privacy settings refuse voice messages


async def send_file(bot: Bot, sender: Sender, file: OutboundFile) -> Message:
    """Upload ``file`` to its chat (and topic); ``DeliveryError`` says why if Telegram won't."""
    size = len(file.data)
    if size > MAX_UPLOAD_BYTES:
        raise DeliveryError(
            f"{file.name} is {size / 1024 / 1024:.1f} MB; Telegram takes files of up to "
            f"{MAX_UPLOAD_BYTES >> 20} MB from bots"
        )
    pieces = split_reply(file.caption, MAX_CAPTION) if file.caption.strip() else []
    caption = pieces[0] if len(pieces) == 1 else None
    upload = _Upload(bot, file, caption, photo=file.as_photo and size <= MAX_PHOTO_BYTES)
    async with sender.paced(file.chat_id):
        sent = await send_with_retries(
            upload.attempt, _classify, what=f"the file {file.name} to {file.chat_id}"
        )
    if len(pieces) > 1:  # too long to go under the file: it follows as a message
        await sender.send(
            bot, OutboundMessage(file.channel, file.chat_id, file.caption, file.thread_id)
        )
    return sent


async def send_voice(bot: Bot, sender: Sender, file: OutboundFile) -> Message:
    """Send a recording as a voice message answering ``file.reply_to``; ``DeliveryError``
    says why if Telegram won't (flood control and the network are retried)."""
    if len(file.data) > MAX_UPLOAD_BYTES:
        raise DeliveryError(
            f"the recording is {len(file.data) / 1024 / 1024:.1f} MB; Telegram takes files "
            f"of up to {MAX_UPLOAD_BYTES >> 20} MB from bots"
        )
    options: dict[str, Any] = {}
    if file.thread_id and file.thread_id.isdigit():
        options["message_thread_id"] = int(file.thread_id)
    chat, _, number = (file.reply_to or "").rpartition(":")
    if chat == file.chat_id and number.isdigit():
        options["reply_parameters"] = ReplyParameters(int(number), allow_sending_without_reply=True)
    seconds = duration_s(file.data)
    voice = True

    async def attempt() -> Message:
        nonlocal voice
        data = InputFile(file.data, filename=file.name)  # a fresh one for every attempt
        if voice:
            try:
                length = math.ceil(seconds) if seconds is not None else None
                return await bot.send_voice(chat_ref(file.chat_id), data, length, **options)
            except BadRequest as exc:
                if NO_VOICE not in exc.message.lower():
                    raise
                log.info("telegram: chat %s takes no voice messages; a file", file.chat_id)
                voice = False
                data = InputFile(file.data, filename=file.name)
        return await bot.send_document(chat_ref(file.chat_id), data, **options)

    async with sender.paced(file.chat_id):
        return await send_with_retries(
            attempt, _classify, what=f"the voice reply to {file.chat_id}"
        )


class _Upload:
    """One file's send, remembering across retries what Telegram refused (markup, photo)."""

    def __init__(self, bot: Bot, file: OutboundFile, caption: Piece | None, photo: bool) -> None:
        self._bot = bot
        self._file = file
        self._caption = caption
        self._photo = photo
        self._plain = False

    async def attempt(self) -> Message:
        try:
            return await self._send()
        except BadRequest as exc:
            if self._caption is not None and not self._plain and is_markup_error(exc):
                log.warning("telegram refused the caption of %s (%s); plain", self._file.name, exc)
                self._plain = True
                return await self.attempt()
            if self._photo and any(r in exc.message.lower() for r in NOT_A_PHOTO):
                log.info("telegram took %s not as a photo (%s); a document", self._file.name, exc)
                self._photo = False
                return await self.attempt()
            raise

    async def _send(self) -> Message:
        file, bot = self._file, self._bot
        options: dict[str, Any] = {}
        if file.thread_id and file.thread_id.isdigit():
            options["message_thread_id"] = int(file.thread_id)
        if self._caption is not None:
            options["caption"] = self._caption.source if self._plain else self._caption.html
            if not self._plain:
                options["parse_mode"] = ParseMode.HTML
        data = InputFile(file.data, filename=file.name)  # a fresh one for every attempt
        if self._photo:
            return await bot.send_photo(chat_ref(file.chat_id), data, **options)
        return await bot.send_document(chat_ref(file.chat_id), data, **options)


def _classify(exc: BaseException) -> Retry | None:
    """As for replies, except that a file too large (HTTP 413) is final."""
    reason = exc.message.lower() if isinstance(exc, NetworkError) else ""
    if "413" in reason or "too large" in reason or "too big" in reason:
        return None
    return classify(exc)
