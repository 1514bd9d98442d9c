"""A reply's draft on Telegram: one message, posted as a reply and edited with ``editMessageText``.

Each draft is rendered like any reply (Telegram HTML, plain text if Telegram refuses
the markup), cut to one message with a "…" line when more follows; the finished
reply goes through ``Sender.send_into``, the same rendering and splitting as a reply
that was never streamed, and leaves the draft alone when its first piece renders as
the draft already shows it: Telegram answers such an edit with 400 "message is not
modified". A draft is trimmed as Telegram shows a message, so two drafts that differ
only in trailing blank lines count as one and cost no edit. Every call waits its
turn in the chat's pacing (about one message a second, 20 a minute in groups), so
drafts never invite flood control.
"""

from __future__ import annotations

from telegram.error import TelegramError

from bot.core.channel import DeliveryError
from bot.core.messages import InboundMessage, OutboundMessage
from channels.telegram.client import TelegramClient
from channels.telegram.format import MAX_TEXT, split_reply
from channels.telegram.send import Sender, chat_ref

MORE = "\n…"


def one_message(text: str) -> str:
    """``text`` (markdown) cut to what one message shows, ending in "…" when more follows,
    trimmed as the message shows it ("" when nothing shows)."""
    pieces = split_reply(text, MAX_TEXT - len(MORE))
    if len(pieces) <= 1:
        return pieces[0].source if pieces else ""
    return pieces[0].source + MORE


class TelegramDraft:
    """The ``DraftSurface`` of a reply to one message."""

    def __init__(self, client: TelegramClient, sender: Sender, message: InboundMessage) -> None:
        self._client = client
        self._sender = sender
        self._message = message

    def fit(self, text: str) -> str:
        """The markdown of what one message shows of ``text``."""
        return one_message(text)

    async def post(self, shown: str) -> str:
        """Send the first draft as a reply to the person's message; its message id."""
        async with self._client.api() as bot:
            sent = await self._sender.send(bot, OutboundMessage.reply(self._message, shown))
        if not sent:
            raise DeliveryError("the draft of a reply was empty")
        return str(sent[0].message_id)

    async def edit(self, ref: str, shown: str) -> bool:
        """Show ``shown`` in the draft; False when Telegram no longer lets it be edited."""
        async with self._client.api() as bot:
            return await self._sender.edit(bot, self._message.chat_id, int(ref), shown)

    async def finish(self, ref: str, message: OutboundMessage, shown: str) -> bool:
        """The reply's first piece into the draft (unless it already shows so), the rest
        after it."""
        async with self._client.api() as bot:
            return await self._sender.send_into(bot, message, int(ref), showing=shown)

    async def delete(self, ref: str) -> None:
        """Delete the draft."""
        async with self._client.api() as bot:
            try:
                await bot.delete_message(chat_ref(self._message.chat_id), int(ref))
            except TelegramError as exc:
                raise DeliveryError(f"could not delete the draft: {exc.message}") from exc
