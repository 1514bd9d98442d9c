"""Reading what the bot did: recorded calls, waits, sent messages, interactions, commands.

``Inspection`` is mixed into ``FakeDiscord``; it reads the shared ``World`` under its
lock, so it may be used from any thread. In async tests wait with ``await_call`` and
``await_connected``: they block a worker thread, not the loop the client runs on.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable

from tests.fake_discord.gateway import Gateway
from tests.fake_discord.payloads import JSON
from tests.fake_discord.state import Call, CallPredicate, InteractionRecord, World


class Inspection:
    """Queries and waits over a fake's records."""

    world: World
    gateway: Gateway

    @property
    def identifies(self) -> int:
        """How many IDENTIFYs were accepted."""
        return self.gateway.identifies

    @property
    def resumes(self) -> int:
        """How many RESUMEs were accepted."""
        return self.gateway.resumes

    @property
    def intents(self) -> int | None:
        """The intents of the latest session."""
        sessions = list(self.gateway.sessions.values())
        return sessions[-1].intents if sessions else None

    def calls(self, method: str | None = None, path_regex: str = "") -> list[Call]:
        """Recorded REST calls and gateway frames (``method="GATEWAY"``), oldest first."""
        pattern = re.compile(path_regex)
        with self.world.lock:
            return [
                c
                for c in self.world.calls
                if (method is None or c.method == method) and pattern.search(c.path)
            ]

    def wait_for(
        self,
        method: str,
        path_regex: str,
        predicate: CallPredicate | None = None,
        timeout: float = 10.0,
        *,
        count: int = 1,
    ) -> Call:
        """Block until the ``count``-th matching call is recorded; return it."""
        return self.world.wait_for(method, path_regex, predicate, timeout, count=count)

    async def await_call(
        self,
        method: str,
        path_regex: str,
        predicate: CallPredicate | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109 - a worker thread waits, not the loop
        *,
        count: int = 1,
    ) -> Call:
        """``wait_for`` for async tests: waits in a worker thread, the loop keeps running."""
        return await asyncio.to_thread(
            self.world.wait_for, method, path_regex, predicate, timeout, count=count
        )

    def wait_connected(self, timeout: float = 10.0) -> None:
        """Block until a client has a session with a live connection (READY/RESUMED sent)."""
        self.world.wait_until(self.gateway.connected, timeout, "a gateway session")

    async def await_connected(self, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """``wait_connected`` for async tests."""
        await asyncio.to_thread(self.wait_connected, timeout)

    def sent(self, channel_id: str | None = None) -> list[JSON]:
        """The bot's live messages as last edited, oldest first, ephemeral ones included."""
        world = self.world
        with world.lock:
            return [
                m
                for m in world.messages.values()
                if m["author"]["id"] == world.bot["id"]
                and m["id"] not in world.deleted
                and (channel_id is None or m["channel_id"] == str(channel_id))
            ]

    def message(self, message_id: str) -> JSON:
        """A message as it is now."""
        with self.world.lock:
            return self.world.messages[str(message_id)]

    def uploaded(self, attachment: JSON) -> bytes:
        """The bytes the bot uploaded for an attachment of one of its messages."""
        with self.world.lock:
            return self.world.uploads[str(attachment["id"])]

    def deleted(self, message_id: str) -> bool:
        """Whether the bot deleted this message."""
        with self.world.lock:
            return str(message_id) in self.world.deleted

    def interaction(self, interaction: JSON | str) -> InteractionRecord:
        """What the bot answered to an interaction (payload dict or token)."""
        tok = interaction if isinstance(interaction, str) else str(interaction["token"])
        record = self.world.interaction(tok)
        if record is None:
            raise KeyError(f"unknown interaction token {tok[:20]}...")
        return record

    def commands(self, guild_id: str | None = None) -> list[JSON]:
        """Registered application commands (global, or one guild's)."""
        with self.world.lock:
            return list(self.world.commands.get(guild_id, []))

    def command_syncs(self, guild_id: str | None = None) -> int:
        """How many bulk-overwrite PUTs the bot made for that scope."""
        with self.world.lock:
            return self.world.command_puts.get(guild_id, 0)

    def wait_until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Block until ``condition()`` holds; it is re-checked on every recorded change."""
        self.world.wait_until(condition, timeout, "condition")

    async def await_until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """``wait_until`` for async tests."""
        await asyncio.to_thread(self.world.wait_until, condition, timeout, "condition")
