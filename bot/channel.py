"""The ``Channel`` port: a chat surface that feeds the inbox and delivers replies."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from bot.conversation import TextSink
from bot.messages import InboundMessage, OutboundMessage


class Inbox(Protocol):
    """Where channels put what people send; the core takes messages from here."""

    async def put(self, message: InboundMessage) -> None: ...


class Channel(Protocol):
    """A chat surface: Telegram, Discord, Slack, or the terminal."""

    @property
    def name(self) -> str: ...

    async def start(self, inbox: Inbox) -> None:
        """Connect and begin putting inbound messages into ``inbox``; idempotent."""
        ...

    async def stop(self) -> None:
        """Disconnect; idempotent."""
        ...

    async def send(self, message: OutboundMessage) -> None:
        """Deliver ``message`` to its chat."""
        ...


@runtime_checkable
class StreamingChannel(Protocol):
    """A channel that can show reply text while the model is still writing it."""

    def text_sink(self, message: InboundMessage) -> TextSink | None:
        """A sink for streamed reply text to ``message``'s chat, or None to wait for the end."""
        ...
