"""The discord.py client as PinClaw configures it: few intents, small caches, events out.

Only the intents PinClaw reads (guilds, guild and DM messages, message
content); no message cache and no member cache or chunking, so a busy guild
does not grow the daemon on a Raspberry Pi. The client's gateway events are
passed to an owner (the ``DiscordChannel``). ``discord.http.Route.BASE`` and
``DiscordWebSocket.DEFAULT_GATEWAY`` are process-wide class attributes (the only
way to point discord.py elsewhere), so one Discord channel per process is
supported.
"""

from __future__ import annotations

from typing import Protocol

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from channels.discord.send import ALLOWED_MENTIONS
from channels.discord.settings import DiscordSettings


class ClientEvents(Protocol):
    """What the client reports to its owner."""

    def up(self, client: PinClawClient) -> None:
        """A gateway session is live (READY or RESUMED)."""
        ...

    def down(self, client: PinClawClient) -> None:
        """The gateway connection dropped."""
        ...

    async def heard(
        self, client: PinClawClient, message: discord.Message, *, edit: bool = False
    ) -> None:
        """A message arrived (``edit``: a person edited one; ``message`` is the new version)."""
        ...

    async def pressed(self, interaction: discord.Interaction[discord.Client]) -> None:
        """A button was pressed."""
        ...


def intents() -> discord.Intents:
    """Only what PinClaw reads: guilds, guild and DM messages, and their text."""
    wanted = discord.Intents.none()
    wanted.guilds = True
    wanted.guild_messages = True
    wanted.dm_messages = True
    wanted.message_content = True
    return wanted


def point_discord_at(settings: DiscordSettings) -> None:
    """Aim discord.py's process-wide REST root and gateway at the configured URLs."""
    Route.BASE = settings.api_base_url
    gateway = yarl.URL(settings.gateway_url)
    DiscordWebSocket.DEFAULT_GATEWAY = gateway if gateway.path else gateway.with_path("/")
    # Voice is never used; discord.py would warn about its missing libraries.
    discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False


class PinClawClient(discord.Client):
    """A small-footprint client whose events go to ``owner``."""

    def __init__(self, owner: ClientEvents, connector: aiohttp.BaseConnector) -> None:
        super().__init__(
            intents=intents(),
            connector=connector,
            max_messages=None,
            member_cache_flags=discord.MemberCacheFlags.none(),
            chunk_guilds_at_startup=False,
            allowed_mentions=ALLOWED_MENTIONS,
        )
        self._owner = owner

    async def on_connect(self) -> None:
        """A gateway session is up (READY): messages flow from here on."""
        self._owner.up(self)

    async def on_resumed(self) -> None:
        """A dropped connection resumed its session; missed events are replayed."""
        self._owner.up(self)

    async def on_disconnect(self) -> None:
        """The gateway connection dropped; discord.py reconnects by itself."""
        self._owner.down(self)

    async def on_message(self, message: discord.Message) -> None:
        """Hand a message to the owner."""
        await self._owner.heard(self, message)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        """An edited message (raw: there is no message cache for ``on_message_edit``)."""
        await self._owner.heard(self, payload.message, edit=True)

    async def on_interaction(self, interaction: discord.Interaction[discord.Client]) -> None:
        """Button presses arrive here by ``custom_id`` (slash commands go to the tree)."""
        if interaction.type is discord.InteractionType.component:
            await self._owner.pressed(interaction)
