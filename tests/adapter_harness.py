"""For adapter tests that leave the core out: a scripted inbox, and a running channel."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from bot.core.channel import ButtonPress, Channel, ChannelDeps, PressReply
from bot.core.messages import InboundMessage
from bot.core.tls import shared_ssl_context
from bot.store.db import Database
from bot.store.kv import KeyValueStore


class ScriptedInbox:
    """Records messages and presses; answers presses with ``reply`` (or raises it).

    ``hold`` keeps a press waiting until it is set; ``asked`` is set by the first
    press; ``wait`` blocks until enough messages and presses arrived.
    """

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.unread: list[tuple[InboundMessage, str]] = []
        self.presses: list[ButtonPress] = []
        self.reply: PressReply | Exception = PressReply("Noted.")
        self.hold: asyncio.Event | None = None
        self.asked = asyncio.Event()
        self.changed = asyncio.Event()

    async def put(self, message: InboundMessage) -> bool:
        """Take the message."""
        self.messages.append(message)
        self.changed.set()
        return True

    async def unreadable(self, message: InboundMessage, reason: str) -> None:
        """Record a message that could not be read, and why."""
        self.unread.append((message, reason))
        self.changed.set()

    async def press(self, press: ButtonPress) -> PressReply:
        """Record the press, wait while held, then answer (or raise) as scripted."""
        self.presses.append(press)
        self.asked.set()
        self.changed.set()
        if self.hold is not None:
            await self.hold.wait()
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply

    async def wait(self, presses: int = 0, messages: int = 0, unread: int = 0) -> None:
        """Until at least this many presses, messages and unreadable messages arrived."""
        async with asyncio.timeout(10):
            while (
                len(self.presses) < presses
                or len(self.messages) < messages
                or len(self.unread) < unread
            ):
                self.changed.clear()
                await self.changed.wait()


@contextlib.asynccontextmanager
async def channel_deps(tmp_path: Path) -> AsyncIterator[ChannelDeps]:
    """What a channel gets from the daemon, with its state in ``tmp_path``."""
    db = Database(tmp_path / "state.db")
    await db.open()
    try:
        state = KeyValueStore(db)
        await state.setup()
        yield ChannelDeps(state, shared_ssl_context(), tmp_path, ())
    finally:
        await db.close()


@contextlib.asynccontextmanager
async def connected(channel: Channel, inbox: ScriptedInbox) -> AsyncIterator[asyncio.Task[None]]:
    """``channel.run(inbox)`` until the block exits; the block starts once it is connected."""
    task = asyncio.create_task(channel.run(inbox), name=f"{channel.name} under test")
    try:
        assert await channel.status.wait_connected(10)
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
