"""Slash commands on Discord: registration when the list changed, and each invocation's life.

The chat commands are registered as global application commands (they work in
every guild and in DMs). Registering is a bulk overwrite that counts against a
daily limit, so it happens only when the command list differs from the last
one registered: a hash of the exact payload, per application, is kept in the
state store.

An invocation must be acknowledged within 3 seconds. It is deferred at once
("PinClaw is thinking…", only visible to the invoker for /status and /help)
while it goes into the inbox as the message ``/name`` (``/name ARGUMENT`` for a command
with an optional text option, such as ``/model``); the core's reply to it
completes the interaction (the first follow-up replaces the thinking message).
If no reply comes (the core dropped it: a stranger in a guild, a pairing code
already sent), the thinking message is replaced with a plain sentence.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import discord
from discord import app_commands

from bot.core.channel import DeliveryError, ShuttingDown, StateStore
from bot.core.chat_commands import CommandInfo
from bot.core.delivery import Classifier, send_with_retries
from bot.core.messages import InboundMessage
from channels.discord.events import from_command, interaction_message_id

log = logging.getLogger(__name__)

STATE_NAMESPACE = "discord"
PRIVATE_COMMANDS = frozenset({"status", "help"})
NO_REPLY_S = 15.0
NO_REPLY_TEXT = "No answer came for this command: you may not have access to this bot here."
STOPPING_TEXT = "PinClaw is restarting; please try the command again in a minute."

Put = Callable[[InboundMessage], Awaitable[bool]]
Interaction = discord.Interaction[discord.Client]


@dataclass(slots=True)
class PendingCommand:
    """An invocation waiting for the core's reply."""

    interaction: Interaction
    ephemeral: bool
    deferred: asyncio.Task[None]
    timer: asyncio.TimerHandle | None = field(default=None)


class SlashCommands:
    """The command tree of one ``discord.Client`` and the invocations it has in flight."""

    def __init__(
        self,
        client: discord.Client,
        commands: Sequence[CommandInfo],
        state: StateStore,
        put: Put,
    ) -> None:
        self._client = client
        self._state = state
        self._put = put
        self._pending: dict[str, PendingCommand] = {}
        self.tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(client)
        for info in commands:
            self.tree.add_command(self._command(info))

    def _command(self, info: CommandInfo) -> app_commands.Command[Any, ..., None]:
        callback: Callable[..., Awaitable[None]]
        if info.argument:

            @app_commands.rename(argument=info.argument)
            @app_commands.describe(argument=(info.argument_help or info.argument)[:100])
            async def with_argument(interaction: Interaction, argument: str | None = None) -> None:
                await self.invoked(interaction, info.name, argument or "")

            callback = with_argument
        else:

            async def invoked(interaction: Interaction) -> None:
                await self.invoked(interaction, info.name)

            callback = invoked
        return app_commands.Command(
            name=info.name,
            description=info.description[:100],
            callback=callback,
            allowed_contexts=app_commands.AppCommandContext(
                guild=True, dm_channel=True, private_channel=False
            ),
            allowed_installs=app_commands.AppInstallationType(guild=True, user=False),
        )

    def payload_hash(self) -> str:
        """A hash of what registering would send, for this application."""
        payload = [command.to_dict(self.tree) for command in self.tree.get_commands()]
        blob = json.dumps(
            {"application": self._client.application_id, "commands": payload}, sort_keys=True
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    async def registered(self) -> bool:
        """Whether exactly these commands were registered for this application before."""
        return await self._state.get(STATE_NAMESPACE, self._state_key()) == self.payload_hash()

    async def register(self, classify: Classifier) -> bool:
        """Register the commands (a bulk overwrite) and remember them; True if it worked."""
        wanted = self.payload_hash()
        try:
            await send_with_retries(self.tree.sync, classify, what="the slash commands")
        except DeliveryError as exc:
            log.warning("%s; they will be registered at the next connection", exc)
            return False
        await self._state.set(STATE_NAMESPACE, self._state_key(), wanted)
        log.info("registered the discord slash commands: %s", _names(self.tree))
        return True

    def _state_key(self) -> str:
        return f"commands:{self._client.application_id}"

    async def invoked(self, interaction: Interaction, name: str, argument: str = "") -> None:
        """Acknowledge an invocation and pass it to the core as the message ``/name``
        (followed by ``argument``, if one was given)."""
        key = interaction_message_id(interaction.id)
        if key in self._pending:
            return  # the same invocation delivered twice (a gateway replay)
        ephemeral = name in PRIVATE_COMMANDS
        deferred = asyncio.create_task(_defer(interaction, ephemeral), name="discord defer")
        pending = PendingCommand(interaction, ephemeral, deferred)
        self._pending[key] = pending
        try:
            accepted = await self._put(from_command(interaction, name, argument))
        except ShuttingDown:
            self._finish_alone(key, STOPPING_TEXT)
            return
        if not accepted:
            self._pending.pop(key, None)
            return
        if key in self._pending:
            loop = asyncio.get_running_loop()
            pending.timer = loop.call_later(NO_REPLY_S, self._finish_alone, key, NO_REPLY_TEXT)

    def take(self, message_id: str | None) -> PendingCommand | None:
        """The invocation a reply answers (it is no longer pending), or None."""
        pending = self._pending.pop(message_id, None) if message_id else None
        if pending is not None and pending.timer is not None:
            pending.timer.cancel()
        return pending

    def close(self) -> None:
        """Forget what is in flight (the client is closing; its tokens go with it)."""
        for pending in self._pending.values():
            if pending.timer is not None:
                pending.timer.cancel()
            pending.deferred.cancel()
        self._pending.clear()

    def _finish_alone(self, key: str, text: str) -> None:
        pending = self.take(key)
        if pending is not None:
            task = asyncio.create_task(_edit_original(pending, text), name="discord no reply")
            task.add_done_callback(_log_failure)


async def reply(
    pending: PendingCommand,
    pieces: Sequence[str],
    view: discord.ui.View | None,
    classify: Classifier,
) -> None:
    """Complete an invocation with the reply ``pieces`` (the view goes on the last one)."""
    await pending.deferred
    followup = pending.interaction.followup
    for index, piece in enumerate(pieces):
        last = index == len(pieces) - 1

        async def attempt(piece: str = piece, last: bool = last) -> None:
            if last and view is not None:
                await followup.send(piece, ephemeral=pending.ephemeral, view=view, wait=True)
            else:
                await followup.send(piece, ephemeral=pending.ephemeral, wait=True)

        what = "a reply" if len(pieces) == 1 else f"part {index + 1} of {len(pieces)} of a reply"
        await send_with_retries(attempt, classify, what=what)


async def _defer(interaction: Interaction, ephemeral: bool) -> None:
    try:
        await interaction.response.defer(ephemeral=ephemeral, thinking=True)
    except discord.HTTPException as exc:
        # Too late (10062) or answered already (40060): the reply may still work or fail alone.
        log.warning("could not acknowledge discord command %s: %s", interaction.id, exc)


async def _edit_original(pending: PendingCommand, text: str) -> None:
    await pending.deferred
    with contextlib.suppress(discord.HTTPException):
        await pending.interaction.edit_original_response(content=text)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not close a discord command: %s", task.exception())


def _names(tree: app_commands.CommandTree[discord.Client]) -> str:
    return ", ".join(f"/{command.name}" for command in tree.get_commands())
