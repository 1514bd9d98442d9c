"""Messages nobody asked for right now: job output, heartbeat findings, failure alerts.

A target is resolved when the message is sent (the owner's private chat is
looked up then, so pairing later still counts). A chat message waits for its
channel to connect, and what was sent is written into that chat's history, so
"what did you remind me about?" has an answer. Targets without a chat write to
the daemon's log, append to a file in the workspace, or keep the message in the
owner's inbox (``pinclaw inbox``). A message for the owner that no chat can take
(no chat channel, no private chat with the owner, or sending failed for good)
goes to that inbox too, rather than being lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import datetime
from zoneinfo import ZoneInfo

from bot.agent.loop import Agent
from bot.approvals.approvers import Approvers, owner_chats
from bot.core.channel import Channel, ChatTarget, DeliveryError
from bot.core.errors import ToolError, UserError
from bot.core.messages import OutboundMessage, SessionKey
from bot.cron.jobs import result_file
from bot.cron.store import Target
from bot.security.files.paths import PathGuard
from bot.store.owner_inbox import OwnerInbox

log = logging.getLogger(__name__)

CONNECT_WAIT_S = 60.0
INBOX = "terminal:owner"


class Outbox:
    """Resolves delivery targets and delivers to them."""

    def __init__(
        self,
        *,
        channels: Mapping[str, Channel],
        approvers: Approvers,
        agent: Agent,
        inbox: OwnerInbox,
        files: PathGuard,
        zone: ZoneInfo,
    ) -> None:
        self._channels = channels
        self._approvers = approvers
        self._agent = agent
        self._inbox = inbox
        self._files = files
        self._zone = zone

    async def resolve(self, target: Target) -> ChatTarget | None:
        """The chat ``target`` delivers to, or None when it is not a chat (none, log, a
        file, the inbox, or the owner without a private chat); ``UserError`` if a chat
        target's channel is not enabled."""
        if target.kind == "owner":
            chats = await owner_chats(self._channels, self._approvers)
            return chats[0][1] if chats else None
        if target.kind != "chat":
            return None
        if target.channel not in self._channels:
            raise UserError(f"the channel {target.channel!r} is not enabled in the config")
        return ChatTarget(target.channel, target.chat_id, target.thread_id)

    async def deliver(
        self, target: Target, chat: ChatTarget | None, text: str, *, source: str, note: str
    ) -> str:
        """Deliver ``text`` from ``source`` ("cron:NAME", "heartbeat") to ``target``, whose
        chat ``resolve`` found; returns where it went, for the run history.

        ``note`` heads the copy kept in a chat's history. ``UserError`` says why it
        could not be delivered (a chat that refused it, a file outside the workspace).
        """
        if target.kind == "none":
            return ""
        if target.kind == "log":
            log.info("%s: %s", source, text)
            return "log"
        if target.kind == "file":
            return await self._append(target, text, source)
        if target.kind == "terminal":
            await self._inbox.add(source, text)
            return INBOX
        if chat is None and target.kind == "owner":
            why = "no chat channel" if not self._channels else "no private chat with the owner"
            return await self._to_inbox(source, text, why)
        if chat is None:
            raise UserError(f"there is no chat for {target}")
        try:
            await self.send(chat, text, note)
        except UserError as exc:
            if target.kind != "owner":
                raise
            log.warning("%s", exc)
            return await self._to_inbox(source, text, f"{chat.channel} did not take it")
        return f"owner ({chat.channel}:{chat.chat_id})" if target.kind == "owner" else str(target)

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
        """Tell the owner: privately, else in their inbox; False (and a log line) if neither."""
        target = Target("owner")
        try:
            chat = await self.resolve(target)
            await self.deliver(target, chat, text, source="alert", note="[PinClaw sent an alert]")
        except Exception as exc:  # an alert about a failure must not fail in turn
            log.error("could not alert the owner (%s): %s", exc, text)
            return False
        return True

    async def _to_inbox(self, source: str, text: str, why: str) -> str:
        await self._inbox.add(source, text)
        log.info("%s: %s, so the message is in the owner's inbox (pinclaw inbox)", source, why)
        return f"{INBOX} ({why})"

    async def _append(self, target: Target, text: str, source: str) -> str:
        path = result_file(target, self._files)
        stamp = datetime.now(self._zone).strftime("%Y-%m-%d %H:%M %Z")
        entry = f"## {stamp} · {source}\n\n{text.strip()}\n\n".encode()
        try:
            await asyncio.to_thread(self._files.append_bytes, path, entry)
        except ToolError as exc:  # the path guard's plain reason (PathRefused is one too)
            raise UserError(f"{target} could not be written: {exc}") from None
        return f"file:{self._files.display(path)}"
