"""The ``Channel`` port: a chat surface that feeds the inbox and delivers replies.

A channel's ``run`` connects and serves until it is cancelled; when the
connection dies it raises, and the supervisor starts it again with backoff.
Before a channel acknowledges a message to its platform it awaits
``inbox.put``, which stores the message durably (and says whether it is a
duplicate), so nothing acknowledged can be lost.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from bot.core.chat_commands import CommandInfo
from bot.core.errors import PinclawError
from bot.core.messages import (
    Attachment,
    Button,
    InboundMessage,
    OutboundFile,
    OutboundMessage,
)
from bot.core.metrics import count_reconnect

log = logging.getLogger(__name__)

ConnectionState = Literal["starting", "connected", "reconnecting", "stopped"]


@dataclass(frozen=True, slots=True)
class ChatTarget:
    """Where to post: a chat on a channel, and a thread or topic inside it."""

    channel: str
    chat_id: str
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class ButtonPress:
    """Someone tapped a button under one of PinClaw's messages.

    ``message_ref`` is the platform's id of the message the button is on (as
    returned by ``ApprovalSurface.post_approval``); ``action_id`` the button's.
    """

    channel: str
    chat_id: str
    user_id: str
    user_name: str
    action_id: str
    message_ref: str = ""


@dataclass(frozen=True, slots=True)
class PressReply:
    """What to tell the person who tapped: privately (an alert, an ephemeral message)
    unless ``private`` is false."""

    text: str
    private: bool = True


class Inbox(Protocol):
    """Where channels put what people send; the core takes messages from here."""

    async def put(self, message: InboundMessage) -> bool:
        """Store ``message`` durably and queue it; False when it was seen before.

        Raises ``ShuttingDown`` while the daemon stops (do not acknowledge then).
        """
        ...

    async def unreadable(self, message: InboundMessage, reason: str) -> None:
        """Store a message that could not be read as failed, and tell its chat so.

        ``message`` holds what is known of it (chat, sender, id; no text); it is
        answered, with one sentence, only when its chat and sender are known and the
        sender would be answered. Raises ``ShuttingDown`` while the daemon stops.
        """
        ...

    async def press(self, press: ButtonPress) -> PressReply:
        """Handle a button tap; answer the tapper with the reply (quickly: platforms wait)."""
        ...


@runtime_checkable
class ApprovalSurface(Protocol):
    """A channel that can show approval requests with buttons and edit them afterwards.

    A surface may also have an ``approve_command`` attribute: how a person types a
    decision there (default ``/approve``; Slack's is ``/pinclaw approve``); and an
    ``approval_limit`` (``bot.approvals.fit.CardLimit``): how long a request it can
    show whole (none: any length). A request is never cut to fit.
    """

    async def post_approval(
        self, target: ChatTarget, text: str, buttons: tuple[Button, ...]
    ) -> str:
        """Post ``text`` (markdown) with ``buttons``; return the platform's message id."""
        ...

    async def close_approval(self, target: ChatTarget, message_ref: str, text: str) -> None:
        """Replace the request's text with ``text`` and remove its buttons."""
        ...

    def direct_target(self, user_id: str) -> ChatTarget | None:
        """The private chat with ``user_id`` on this platform, if the bot can post there."""
        ...


class ShuttingDown(PinclawError):
    """Raised by ``Inbox.put`` while the daemon stops: the message was not taken, so
    the adapter must not acknowledge it and the platform delivers it again later."""


class DeliveryError(PinclawError):
    """A message could not be delivered, even after retries; the text says why."""


class StateStore(Protocol):
    """Small durable state an adapter keeps between runs (``bot.store.kv`` is one)."""

    async def get(self, namespace: str, key: str) -> str | None:
        """The value, or None."""
        ...

    async def set(self, namespace: str, key: str, value: str) -> None:
        """Store the value."""
        ...


@dataclass(frozen=True, slots=True)
class ChannelDeps:
    """What the core gives every adapter: state, the shared TLS context, the commands,
    and whether replies stream by default (``[agent] stream``)."""

    state: StateStore
    ssl: ssl.SSLContext
    data_dir: Path
    commands: tuple[CommandInfo, ...]
    stream: bool = True


@dataclass(slots=True)
class ChannelStatus:
    """A channel's connection state and the time of its last inbound event."""

    name: str
    state: ConnectionState = "starting"
    since: float = 0.0
    detail: str = ""
    last_inbound_at: float | None = None
    restarts: int = 0
    _up: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def connected(self, detail: str) -> None:
        """Record a (re)connection; logs one line per change."""
        if self.state != "connected":
            log.info("%s connected%s", self.name, f" {detail}" if detail else "")
        self.state, self.since, self.detail = "connected", time.time(), detail
        self._up.set()

    def disconnected(self, reason: str) -> None:
        """Record a lost connection and why; ``since`` stays the time it was lost (each
        failed attempt to reconnect updates only the reason, so an outage keeps its age)."""
        if self.state == "connected":
            log.warning("%s disconnected: %s", self.name, reason)
            count_reconnect(self.name)
        if self.state != "reconnecting":
            self.since = time.time()
        self.state, self.detail = "reconnecting", reason
        self._up.clear()

    async def wait_connected(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the channel to be connected; True if it is."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._up.wait()
        except TimeoutError:
            return False
        return True

    def heard(self) -> None:
        """Record that an inbound event arrived now."""
        self.last_inbound_at = time.time()


class Channel(Protocol):
    """A chat surface: Telegram, Discord, Slack, or the terminal."""

    @property
    def name(self) -> str: ...

    @property
    def status(self) -> ChannelStatus: ...

    async def run(self, inbox: Inbox) -> None:
        """Connect and serve until cancelled; raise when the connection is lost."""
        ...

    async def send(self, message: OutboundMessage) -> None:
        """Deliver ``message`` (split, paced, retried); raise ``DeliveryError`` if it cannot."""
        ...

    def typing(self, message: InboundMessage) -> AbstractAsyncContextManager[None]:
        """Show that a reply to ``message`` is being written, until the block exits."""
        ...

    async def fetch(self, attachment: Attachment) -> bytes:
        """Download an attachment of an inbound message."""
        ...


@runtime_checkable
class FileChannel(Protocol):
    """A channel that can deliver files (documents and pictures) to a chat."""

    async def send_file(self, file: OutboundFile) -> None:
        """Deliver ``file`` (paced, retried); ``DeliveryError`` saying why if it cannot,
        e.g. larger than the platform takes."""
        ...


@runtime_checkable
class VoiceChannel(Protocol):
    """A channel that can deliver a spoken reply (a voice message, or an audio file)."""

    async def send_voice(self, file: OutboundFile) -> None:
        """Deliver the recording ``file`` (Ogg Opus) as a reply to ``file.reply_to`` where
        the platform can; ``DeliveryError`` saying why if it cannot."""
        ...


class ReplySink(Protocol):
    """Where one streamed reply goes: its text as the model writes it (a ``TextSink``),
    a progress line while tools run, and at the end the whole reply (``bot.core.draft``)."""

    def __call__(self, piece: str) -> None:
        """Show a piece of reply text (text after a progress line starts afresh)."""
        ...

    def status(self, line: str) -> None:
        """Show what the agent is doing now, until more text comes."""
        ...

    async def finish(self, message: OutboundMessage) -> None:
        """Deliver the whole reply in place of what was shown; ``DeliveryError`` if it cannot."""
        ...

    def close(self) -> None:
        """Stop showing (the turn ended without ``finish``); idempotent."""
        ...

    async def abandon(self, note: str) -> None:
        """The turn was stopped: what is shown says so with ``note`` (a progress line is
        replaced, reply text so far is kept above it); nothing new is posted. Never raises."""
        ...

    async def withdraw(self) -> None:
        """The turn was cut by PinClaw stopping and is answered again after the next start:
        what is shown goes away, so that answer is the only one. Never raises."""
        ...


@runtime_checkable
class StreamingChannel(Protocol):
    """A channel that can show reply text while the model is still writing it."""

    def text_sink(self, message: InboundMessage) -> ReplySink | None:
        """Where to stream the reply to ``message``, or None to send it whole at the end
        (streaming switched off, or a reply the platform cannot edit)."""
        ...
