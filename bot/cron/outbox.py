"""Messages nobody asked for right now: job output, heartbeat findings, failure alerts.

A target is resolved when the message is sent (the owner's private chat is
looked up then, so pairing later still counts); the message waits for its
channel to connect, and what was sent is written into that chat's history, so
"what did you remind me about?" has an answer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from bot.agent.loop import Agent
from bot.approvals.approvers import Approvers, owner_chats
from bot.core.channel import Channel, ChatTarget, DeliveryError
from bot.core.errors import UserError
from bot.core.messages import OutboundMessage, SessionKey
from bot.cron.store import Target

log = logging.getLogger(__name__)

CONNECT_WAIT_S = 60.0


class Outbox:
    """Resolves delivery targets and sends to them."""

    def __init__(
        self, *, channels: Mapping[str, Channel], approvers: Approvers, agent: Agent
    ) -> None:
        self._channels = channels
        self._approvers = approvers
        self._agent = agent

    async def resolve(self, target: Target) -> ChatTarget | None:
        """The chat for ``target`` (None for "none"); ``UserError`` if it cannot be reached."""
        if target.kind == "none":
            return None
        if target.kind == "owner":
            chats = await owner_chats(self._channels, self._approvers)
            if not chats:
                raise UserError(
                    "there is no owner's private chat to deliver to: set `owner` in a "
                    "channel's config, or message the bot once in private"
                )
            return chats[0][1]
        if target.channel not in self._channels:
            raise UserError(f"the channel {target.channel!r} is not enabled in the config")
        return ChatTarget(target.channel, target.chat_id, target.thread_id)

    async def ready(self, chat: ChatTarget) -> None:
        """Wait (a while) for the chat's channel to connect, as after a start."""
        if not await self._channels[chat.channel].status.wait_connected(CONNECT_WAIT_S):
            log.warning("%s is not connected yet; trying to deliver anyway", chat.channel)

    async def send(self, chat: ChatTarget, text: str, note: str) -> None:
        """Send ``text`` to ``chat`` and record it in the chat's history after ``note``."""
        channel = self._channels[chat.channel]
        await self.ready(chat)
        try:
            await channel.send(OutboundMessage(chat.channel, chat.chat_id, text, chat.thread_id))
        except DeliveryError as exc:
            raise UserError(
                f"the message could not be delivered to {chat.channel}: {exc}"
            ) from None
        key = SessionKey(chat.channel, chat.chat_id, chat.thread_id)
        await self._agent.remember_delivery(key, note, text)

    async def alert_owner(self, text: str) -> bool:
        """Tell the owner privately; False (and a log line) if there is no way to."""
        try:
            chat = await self.resolve(Target("owner"))
            if chat is not None:
                await self.send(chat, text, "[PinClaw sent an alert]")
                return True
        except UserError as exc:
            log.error("could not alert the owner (%s): %s", exc, text)
        return False
