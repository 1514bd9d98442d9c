"""Who may talk to the bot, decided per message; default deny.

In a direct chat, a listed or paired user is answered and a stranger is offered
pairing. In a group, the bot answers only listed or paired users, or anyone in a
listed group, and only when addressed (an @mention, a reply to the bot, or a
configured keyword) unless ``group_mode = "all"`` for listed groups. Every
refusal carries a reason for the log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from bot.config.channel import ChannelSettings
from bot.core.messages import InboundMessage
from bot.store.pairing import PairingStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Decision:
    """``accept`` the message, offer ``pair``ing, or ``drop`` it for ``reason``."""

    action: Literal["accept", "pair", "drop"]
    reason: str = ""


class AccessControl:
    """Applies each channel's settings and the pairing list to inbound messages."""

    def __init__(self, settings: Mapping[str, ChannelSettings], pairing: PairingStore) -> None:
        self._settings = settings
        self._pairing = pairing
        self._keywords = {
            name: _keyword_pattern(s.keywords) for name, s in settings.items() if s.keywords
        }

    async def decide(self, message: InboundMessage) -> Decision:
        """The decision for one message."""
        settings = self._settings.get(message.channel)
        if settings is None:
            return Decision("drop", f"channel {message.channel} has no settings")
        sender = message.sender_id
        known = await self.admits(message.channel, sender)
        if message.is_direct:
            if known:
                return Decision("accept")
            if not settings.pairing:
                return Decision("drop", f"unknown sender {sender} and pairing is off")
            return Decision("pair", f"unknown sender {sender}")
        listed_group = self.lists_group(message.channel, message.chat_id)
        if not (known or listed_group):
            return Decision("drop", f"sender {sender} is not allowed in group {message.chat_id}")
        if listed_group and settings.group_mode == "all":
            return Decision("accept")
        if message.mentioned or message.reply_to_bot or self._keyword(message):
            return Decision("accept")
        return Decision("drop", f"not addressed to the bot in group {message.chat_id}")

    async def admits(self, channel: str, user_id: str) -> bool:
        """Whether ``user_id`` may talk to PinClaw on ``channel``: listed in
        ``allowed_users``, or admitted by pairing or a link code."""
        settings = self._settings.get(channel)
        if settings is None:
            return False
        return user_id in settings.allowed_users or await self._pairing.is_paired(channel, user_id)

    def lists_group(self, channel: str, chat_id: str) -> bool:
        """Whether ``chat_id`` is a group listed in ``allowed_groups`` of ``channel``."""
        settings = self._settings.get(channel)
        return settings is not None and chat_id in settings.allowed_groups

    def _keyword(self, message: InboundMessage) -> bool:
        pattern = self._keywords.get(message.channel)
        return bool(pattern and pattern.search(message.text))


def _keyword_pattern(keywords: list[str]) -> re.Pattern[str]:
    words = "|".join(re.escape(k) for k in keywords if k.strip())
    return re.compile(rf"(?<!\w)(?:{words})(?!\w)", re.IGNORECASE)


async def pairing_offer(pairing: PairingStore, message: InboundMessage, reason: str) -> str:
    """The pairing code for a stranger's first message, as the reply to send ("" when a
    code was sent already or too many wait: the message is dropped, with a log line)."""
    outcome = await pairing.request(
        message.channel, message.sender_id, message.sender_name, message.chat_id
    )
    if outcome.kind != "new" or outcome.request is None:
        why = "a code was already sent" if outcome.kind == "waiting" else "too many codes wait"
        log.info("dropped message on %s: %s; %s", message.channel, reason, why)
        return ""
    code = outcome.request.code
    log.info("%s: %s; sent pairing code %s", message.channel, reason, code)
    return (
        "Hi! I only talk with people my owner knows.\n\n"
        f"Your pairing code is **{code}**. Send it to the owner; they can let you in with "
        f"`pinclaw pairing approve {code}`. The code expires in 1 hour."
    )
