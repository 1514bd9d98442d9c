"""The Telegram channel: python-telegram-bot's ``Bot`` over our own polling loop or a webhook.

``run`` checks the token (getMe), registers the chat commands when Telegram's
list differs, then receives updates by long polling (``polling.py``) or by
webhook (``webhook.py``), reads and normalises them (``reading.py``,
``events.py``) and puts them into the inbox before Telegram is told they
arrived. ``send`` renders Telegram HTML, splits, paces and retries
(``send.py``); ``text_sink`` shows a reply as it is written, in a message
edited about once a second (``draft.py``); ``typing`` keeps "typing…" visible
once a reply takes longer than ``TYPING_AFTER_S``; ``fetch`` downloads
attachments up to Telegram's 20 MB.
As an ``ApprovalSurface`` it posts approval requests with inline buttons and
edits them into their record; taps on those buttons (callback queries) go to
``inbox.press`` through ``presses.py``, never through the inbound store.
When polling stalls or the connection keeps failing, ``run`` raises and the
supervisor starts it again with fresh HTTP clients.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from typing import Any

from telegram import Bot, BotCommand, Update
from telegram.constants import ChatAction
from telegram.error import TelegramError

from bot.approvals.fit import CardLimit
from bot.core.channel import (
    ChannelDeps,
    ChannelStatus,
    ChatTarget,
    DeliveryError,
    Inbox,
    ReplySink,
    ShuttingDown,
)
from bot.core.delivery import send_with_retries
from bot.core.draft import Draft
from bot.core.messages import (
    Attachment,
    Button,
    InboundMessage,
    OutboundFile,
    OutboundMessage,
)
from bot.core.typing_indicator import keep_typing
from channels.telegram.client import TelegramClient, classify
from channels.telegram.draft import TelegramDraft
from channels.telegram.events import BotIdentity, normalise
from channels.telegram.format import MAX_TEXT, measure
from channels.telegram.polling import Poller
from channels.telegram.presses import PressHandler
from channels.telegram.reading import Read, read_update, unreadable_update
from channels.telegram.send import Sender, chat_ref
from channels.telegram.settings import TelegramSettings
from channels.telegram.upload import send_file as upload
from channels.telegram.upload import send_voice

log = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024  # the most the Bot API lets a bot download
TYPING_EVERY_S = 4.0  # Telegram shows "typing…" for about 5 s
# A reply sent within this long needs no "typing…" first (as a draft waits GRACE_S).
TYPING_AFTER_S = 1.0
# Commands the core understands that are not in Telegram's command menu; a bare one
# (without @botname) in a group still addresses the bot.
TYPED_ONLY_COMMANDS = frozenset({"start", "approve", "link"})
PRESS_DRAIN_S = 1.0  # how long a stopping channel lets button presses in flight finish


class TelegramChannel:
    """A Telegram bot as a PinClaw chat channel."""

    name = "telegram"
    # A request is one message (its id is how it is edited into its record), never cut.
    approval_limit = CardLimit(MAX_TEXT, measure)
    paste_limit = 4096  # clients split a longer paste into messages of up to this many

    def __init__(self, settings: TelegramSettings, deps: ChannelDeps) -> None:
        self._settings = settings
        self._deps = deps
        self.status = ChannelStatus(self.name)
        self._client = TelegramClient(
            settings.token.get_secret_value(), settings.api_base_url, deps.ssl
        )
        self._sender = Sender(paced=settings.pacing)
        self._poller = Poller(settings.poll_timeout_s, self._accept_update)
        self._presses = PressHandler(self._client, self.status)
        self._me: BotIdentity | None = None
        self._inbox: Inbox | None = None
        self._commands_checked = False
        self._stream = settings.streams(deps.stream)

    async def run(self, inbox: Inbox) -> None:
        """Receive updates until cancelled; raise when the connection is lost."""
        self._inbox = inbox
        try:
            async with self._client.api() as bot:
                me = await bot.get_me()
                username = me.username or str(me.id)  # every bot has a username
                commands = frozenset({c.name for c in self._deps.commands} | TYPED_ONLY_COMMANDS)
                self._me = BotIdentity(me.id, username, commands)
                detail = f"as @{username}"
                await self._register_commands(bot)
                if self._settings.mode == "webhook":
                    await self._serve_webhook(bot, detail)
                else:
                    await self._poll(bot, detail)
        except asyncio.CancelledError:
            await self._presses.drain(PRESS_DRAIN_S)  # stopping: answer the taps in flight
            raise

    async def send(self, message: OutboundMessage) -> None:
        """Deliver ``message`` (split, paced, retried); raise ``DeliveryError`` if it cannot."""
        async with self._client.api() as bot:
            await self._sender.send(bot, message)

    async def post_approval(
        self, target: ChatTarget, text: str, buttons: tuple[Button, ...]
    ) -> str:
        """Post an approval request with its buttons; return its message id."""
        if measure(text) > MAX_TEXT:  # the core checks first (bot.approvals.fit)
            raise DeliveryError("could not post the approval request: it does not fit a message")
        message = OutboundMessage(
            self.name, target.chat_id, text, thread_id=target.thread_id, buttons=buttons
        )
        async with self._client.api() as bot:
            sent = await self._sender.send(bot, message)
        if not sent:
            raise DeliveryError("could not post the approval request: its text is empty")
        return str(sent[-1].message_id)  # the last piece carries the buttons

    async def close_approval(self, target: ChatTarget, message_ref: str, text: str) -> None:
        """Edit the request into ``text`` without buttons (a new message if it cannot be)."""
        async with self._client.api() as bot:
            if message_ref.isdigit():
                await self._sender.replace(
                    bot, target.chat_id, int(message_ref), text, target.thread_id
                )
                return
            log.warning("telegram: %r is no message id; sending the record anew", message_ref)
            message = OutboundMessage(self.name, target.chat_id, text, thread_id=target.thread_id)
            await self._sender.send(bot, message)

    def direct_target(self, user_id: str) -> ChatTarget | None:
        """The private chat with a user: its id is the user's (the user must have started it)."""
        return ChatTarget(self.name, user_id) if user_id.isdigit() else None

    async def send_file(self, file: OutboundFile) -> None:
        """Upload a document or a picture (Telegram takes up to 50 MB from bots)."""
        async with self._client.api() as bot:
            await upload(bot, self._sender, file)

    async def send_voice(self, file: OutboundFile) -> None:
        """Send a spoken reply as a voice message (sendVoice, the recording unchanged)."""
        async with self._client.api() as bot:
            await send_voice(bot, self._sender, file)

    def text_sink(self, message: InboundMessage) -> ReplySink | None:
        """A draft of the reply, edited as the model writes it (None when ``stream`` is off)."""
        if not self._stream:
            return None
        return Draft(TelegramDraft(self._client, self._sender, message), self.send)

    def typing(self, message: InboundMessage) -> AbstractAsyncContextManager[None]:
        """Show "typing…" in the message's chat (and topic) from ``TYPING_AFTER_S`` on,
        until the block exits."""
        return keep_typing(
            lambda: self._typing_once(message), every_s=TYPING_EVERY_S, after_s=TYPING_AFTER_S
        )

    async def fetch(self, attachment: Attachment) -> bytes:
        """Download an attachment (Telegram lets bots download up to 20 MB)."""
        self._check_size(attachment, attachment.size)
        what = f"the download request for {attachment.name}"
        async with self._client.api() as bot:
            file = await send_with_retries(
                lambda: bot.get_file(attachment.ref), classify, what=what
            )
            self._check_size(attachment, file.file_size or 0)
            data = await send_with_retries(file.download_as_bytearray, classify, what=what)
        self._check_size(attachment, len(data))
        return bytes(data)

    async def _poll(self, bot: Bot, detail: str) -> None:
        await bot.delete_webhook(drop_pending_updates=False)  # polling and a webhook exclude
        async with self._client.polling():
            try:
                await self._poller.run(bot, self.status, detail)
            except ShuttingDown:
                # The update was not stored, so it stays unconfirmed; those before it are
                # confirmed now, while the turns finish, and then no more are taken.
                log.info("telegram: PinClaw is stopping; no more updates are taken")
                await self._poller.confirm(bot)
                await asyncio.Event().wait()
            finally:
                if self.status.state == "connected":
                    await self._poller.confirm(bot)  # at once when nothing is left to confirm

    async def _serve_webhook(self, bot: Bot, detail: str) -> None:
        from channels.telegram.webhook import serve_webhook, webhook_secret

        secret = await webhook_secret(self._settings, self._deps.state)

        async def accept(body: dict[str, Any]) -> None:
            await self._accept_update(read_update(body, bot))

        def ready() -> None:
            self.status.connected(f"{detail} (webhook)")

        await serve_webhook(bot, self._settings, secret, accept, ready)

    async def _accept_update(self, update: Read) -> None:
        """Put a message into the inbox (raises if it cannot be stored); hand a press over.

        An update that cannot be read is stored as failed and answered, never skipped:
        one odd update must neither block every later one nor go unanswered.
        """
        assert self._me is not None and self._inbox is not None
        if isinstance(update, Update) and update.callback_query is not None:
            self._presses.take(update.callback_query, self._inbox)  # in the background
            return
        if isinstance(update, Update):
            try:
                message = normalise(update, self._me)
            except Exception as exc:
                update = unreadable_update(update, exc)
                log.debug("telegram: reading update %d failed", update.update_id, exc_info=exc)
            else:
                if message is not None:
                    await self._inbox.put(message)
                return
        log.warning(
            "telegram: could not read update %d (%s); stored as failed",
            update.update_id,
            update.reason,
        )
        await self._inbox.unreadable(update.as_inbound(), update.reason)

    async def _register_commands(self, bot: Bot) -> None:
        """Set the command list only when Telegram's differs (re-setting invites flood limits)."""
        if self._commands_checked:
            return
        wanted = [BotCommand(c.name, c.description) for c in self._deps.commands]
        try:
            current = await bot.get_my_commands()
            if [(c.command, c.description) for c in current] != [
                (c.command, c.description) for c in wanted
            ]:
                await bot.set_my_commands(wanted)
                log.info("telegram: registered %d chat commands", len(wanted))
            self._commands_checked = True
        except TelegramError as exc:  # typed commands work anyway; try again next start
            log.warning("telegram: could not register the chat commands: %s", exc)

    async def _typing_once(self, message: InboundMessage) -> None:
        thread = message.thread_id
        async with self._client.api() as bot:
            await bot.send_chat_action(
                chat_ref(message.chat_id),
                ChatAction.TYPING,
                message_thread_id=int(thread) if thread and thread.isdigit() else None,
            )

    @staticmethod
    def _check_size(attachment: Attachment, size: int) -> None:
        if size > MAX_DOWNLOAD_BYTES:
            raise DeliveryError(
                f"{attachment.name} is {size / 1024 / 1024:.1f} MB; Telegram lets bots "
                "download files of up to 20 MB"
            )
