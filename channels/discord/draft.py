"""A reply's draft on Discord: one message, posted as a reply and edited (``PATCH``) as it grows.

Discord shows PinClaw's markdown as it is, so a draft is the text so far, cut to one
message with a "…" line when more follows (mentions in it never ping: the client's
``ALLOWED_MENTIONS`` apply to edits too). The finished reply is split as any reply:
its first piece is edited into the draft (unless the draft already shows exactly
that: no ``PATCH`` that changes nothing), the rest are posted after it. Calls wait
their turn in the channel's pacing, like replies.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import discord

from bot.core.channel import DeliveryError
from bot.core.delivery import send_with_retries, split_rendered
from bot.core.messages import InboundMessage, OutboundMessage
from bot.core.pacing import Pacer
from channels.discord.send import (
    MESSAGE_LIMIT,
    channel_id,
    classify,
    pieces,
    post,
    utf16_length,
)

MORE = "\n…"


def one_message(text: str) -> str:
    """``text`` cut to what one message shows, ending in "…" when more follows."""
    parts = split_rendered(text, MESSAGE_LIMIT - len(MORE), measure=utf16_length, size=utf16_length)
    return text if len(parts) <= 1 else parts[0] + MORE


class DiscordDraft:
    """The ``DraftSurface`` of a reply to one message."""

    def __init__(
        self, client: Callable[[], discord.Client], pacer: Pacer, message: InboundMessage
    ) -> None:
        self._client = client
        self._pacer = pacer
        self._message = message
        self._target = channel_id(message.thread_id or message.chat_id)

    def fit(self, text: str) -> str:
        """What one message shows of ``text`` (Discord shows the markdown itself)."""
        return pieces(one_message(text))[0]

    async def post(self, shown: str) -> str:
        """Post the first draft as a reply to the person's message; its message id."""
        reference = None
        replied = self._message.message_id
        if replied and replied.isdigit():
            reference = discord.MessageReference(
                message_id=int(replied), channel_id=self._target, fail_if_not_exists=False
            )
        nonce = secrets.randbits(62)  # kept across retries: a lost answer posts no copy

        async def attempt() -> discord.Message:
            client = self._client()
            return await post(
                client, self._target, shown, reference=reference, view=None, nonce=nonce
            )

        async with self._pacer.slot(str(self._target)):
            sent = await send_with_retries(attempt, classify, what="the draft of a reply")
        return str(sent.id)

    async def edit(self, ref: str, shown: str) -> bool:
        """Show ``shown`` in the draft; False when the message is gone."""
        return await self._edit(ref, shown)

    async def finish(self, ref: str, message: OutboundMessage, shown: str) -> bool:
        """The reply's first piece into the draft (unless it shows ``shown`` already), the
        rest posted after it."""
        parts = pieces(message.text)
        if message.buttons:
            return False
        if parts[0] != shown:
            try:
                if not await self._edit(ref, parts[0]):
                    return False
            except DeliveryError:
                return False
        for number, piece in enumerate(parts[1:], 2):
            nonce = secrets.randbits(62)

            async def attempt(piece: str = piece, nonce: int = nonce) -> None:
                client = self._client()
                await post(client, self._target, piece, reference=None, view=None, nonce=nonce)

            async with self._pacer.slot(str(self._target)):
                what = f"part {number} of {len(parts)} of a reply"
                await send_with_retries(attempt, classify, what=what)
        return True

    async def delete(self, ref: str) -> None:
        """Delete the draft."""
        await self._message_ref(ref).delete()

    async def _edit(self, ref: str, content: str) -> bool:
        async def attempt() -> bool:
            try:
                await self._message_ref(ref).edit(content=content)
            except (discord.NotFound, discord.Forbidden):
                return False
            return True

        async with self._pacer.slot(str(self._target)):
            return await send_with_retries(attempt, classify, what="the draft of a reply")

    def _message_ref(self, ref: str) -> discord.PartialMessage:
        return self._client().get_partial_messageable(self._target).get_partial_message(int(ref))
