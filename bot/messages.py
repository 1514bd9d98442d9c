"""Messages between chat channels and the core, as frozen records.

Every channel adapter turns what its platform delivers into an ``InboundMessage``
and renders an ``OutboundMessage`` the way its platform can. A conversation's
identity is its ``SessionKey``: channel, chat, and thread where there is one.
Inbound messages are stored as JSON (``to_json`` / ``from_json``) before they
are processed, so they survive a crash.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any


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
class Attachment:
    """A file sent with a message; ``ref`` is what the channel needs to fetch it."""

    name: str
    mime_type: str
    size: int
    ref: str


@dataclass(frozen=True, slots=True)
class InboundMessage:
    """A message a person sent to PinClaw.

    ``is_direct`` is a one-to-one chat; ``mentioned`` an @mention of the bot;
    ``reply_to_bot`` a reply to one of the bot's messages. ``message_id`` is the
    platform's id, which also identifies duplicate deliveries. ``sent_at`` is when
    the platform says the person sent it; ``received_at`` when PinClaw got it.
    """

    channel: str
    chat_id: str
    sender_id: str
    text: str
    sender_name: str = ""
    thread_id: str | None = None
    message_id: str | None = None
    reply_to_id: str | None = None
    is_direct: bool = True
    mentioned: bool = False
    reply_to_bot: bool = False
    attachments: tuple[Attachment, ...] = ()
    chat_title: str = ""
    sent_at: float | None = None
    received_at: float = field(default_factory=time.time)

    def age(self, now: float | None = None) -> float:
        """Seconds since the person sent it (or since PinClaw received it)."""
        now = time.time() if now is None else now
        return now - (self.sent_at if self.sent_at is not None else self.received_at)

    @property
    def session(self) -> SessionKey:
        """The conversation this message belongs to."""
        return SessionKey(self.channel, self.chat_id, self.thread_id)

    def to_json(self) -> str:
        """The message as JSON, for the inbound store."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> InboundMessage:
        """Rebuild a message stored with ``to_json``."""
        data: dict[str, Any] = json.loads(text)
        data["attachments"] = tuple(Attachment(**a) for a in data.get("attachments", ()))
        return cls(**data)


@dataclass(frozen=True, slots=True)
class Button:
    """A button under a message; ``action_id`` comes back when it is pressed."""

    label: str
    action_id: str


@dataclass(frozen=True, slots=True)
class OutboundMessage:
    """A message PinClaw sends to a chat; ``text`` is in PinClaw's markdown subset."""

    channel: str
    chat_id: str
    text: str
    thread_id: str | None = None
    reply_to: str | None = None
    buttons: tuple[Button, ...] = ()

    @classmethod
    def reply(cls, to: InboundMessage, text: str) -> OutboundMessage:
        """A reply to ``to`` in the same chat and thread."""
        return cls(to.channel, to.chat_id, text, to.thread_id, to.message_id)
