"""Messages between chat channels and the core, as frozen records.

Every channel adapter turns what its platform delivers into an ``InboundMessage``
and renders an ``OutboundMessage`` the way its platform can. A conversation's
identity is its ``SessionKey``: channel, chat, and thread where there is one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SessionKey:
    """Which conversation: a chat on a channel, and a thread or topic inside it."""

    channel: str
    chat_id: str
    thread_id: str | None = None

    def __str__(self) -> str:
        base = f"{self.channel}:{self.chat_id}"
        return f"{base}:{self.thread_id}" if self.thread_id else base


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A message a person sent to PinClaw."""

    channel: str
    chat_id: str
    sender_id: str
    text: str
    sender_name: str = ""
    thread_id: str | None = None
    message_id: str | None = None
    is_direct: bool = True

    @property
    def session(self) -> SessionKey:
        """The conversation this message belongs to."""
        return SessionKey(self.channel, self.chat_id, self.thread_id)


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """A message PinClaw sends to a chat."""

    channel: str
    chat_id: str
    text: str
    thread_id: str | None = None
    reply_to: str | None = None

    @classmethod
    def reply(cls, to: InboundMessage, text: str) -> OutboundMessage:
        """A reply to ``to`` in the same chat and thread."""
        return cls(to.channel, to.chat_id, text, to.thread_id, to.message_id)
