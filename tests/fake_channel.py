"""An in-process chat channel for core tests: it records what the core sends.

It satisfies the ``Channel`` port without any platform behind it, so router,
session and supervisor tests run the real agent (against the fake LLM) and only
the chat surface is stood in for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from bot.core.channel import ChannelStatus, ChatTarget, DeliveryError, Inbox
from bot.core.messages import Attachment, Button, InboundMessage, OutboundMessage


class FakeChannel:
    """Records sends and typing; ``fail_sends`` makes the next sends fail."""

    def __init__(self, name: str = "test") -> None:
        self.name = name
        self.status = ChannelStatus(name)
        self.sent: list[OutboundMessage] = []
        self.typing_entered = 0
        self.typing_exited = 0
        self.fail_sends = 0
        self.posted: list[tuple[ChatTarget, str, tuple[Button, ...]]] = []
        self.closed: dict[str, str] = {}
        self.refuse_posts_to: set[str] = set()
        # When set: a posted card is visible (in ``posted``) but its id is returned only
        # once the event is set, as a slow platform answers after showing the message.
        self.hold_posts: asyncio.Event | None = None
        self._changed = asyncio.Condition()

    async def run(self, inbox: Inbox) -> None:
        """Stay connected until cancelled."""
        self.status.connected("as @fake")
        await asyncio.Event().wait()

    async def send(self, message: OutboundMessage) -> None:
        """Record ``message`` (or fail, when asked to)."""
        if self.fail_sends:
            self.fail_sends -= 1
            raise DeliveryError("could not send a reply: the fake refused it")
        async with self._changed:
            self.sent.append(message)
            self._changed.notify_all()

    @contextlib.asynccontextmanager
    async def typing(self, message: InboundMessage) -> AsyncIterator[None]:
        """Count typing blocks."""
        self.typing_entered += 1
        try:
            yield
        finally:
            self.typing_exited += 1

    async def fetch(self, attachment: Attachment) -> bytes:
        """No attachments here."""
        return b""

    async def post_approval(
        self, target: ChatTarget, text: str, buttons: tuple[Button, ...]
    ) -> str:
        """Record an approval request; its message id is its position."""
        if target.chat_id in self.refuse_posts_to:
            raise DeliveryError(f"could not post to {target.chat_id}: the fake refused it")
        async with self._changed:
            self.posted.append((target, text, buttons))
            ref = str(len(self.posted))
            self._changed.notify_all()
        if self.hold_posts is not None:
            await self.hold_posts.wait()
        return ref

    async def close_approval(self, target: ChatTarget, message_ref: str, text: str) -> None:
        """Record what a request became."""
        async with self._changed:
            self.closed[message_ref] = text
            self._changed.notify_all()

    def direct_target(self, user_id: str) -> ChatTarget | None:
        """A private chat with ``user_id``."""
        return ChatTarget(self.name, f"dm-{user_id}")

    async def wait_posted(
        self, count: int, within: float = 10.0
    ) -> list[tuple[ChatTarget, str, tuple[Button, ...]]]:
        """Wait until ``count`` approval requests were posted."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.posted) >= count)
        return list(self.posted)

    async def wait_closed(self, ref: str, within: float = 10.0) -> str:
        """Wait until the request with message id ``ref`` was turned into a record."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: ref in self.closed)
        return self.closed[ref]

    async def wait_sent(self, count: int, within: float = 10.0) -> list[OutboundMessage]:
        """Wait until ``count`` messages were sent; return all sent so far."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.sent) >= count)
        return list(self.sent)

    def texts(self) -> list[str]:
        """The text of every message sent, in order."""
        return [m.text for m in self.sent]
