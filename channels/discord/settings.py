"""``[channels.discord]`` settings (no discord.py import here)."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator

from bot.config.channel import ChannelSettings, check_url


class DiscordSettings(ChannelSettings):
    """A Discord bot: token and endpoints."""

    token: SecretStr = Field(
        description=(
            "The bot's token from the Discord developer portal (switch on its Message "
            'Content intent); keep it out of the file: `token = "${DISCORD_BOT_TOKEN}"`.'
        ),
    )
    api_base_url: str = Field(
        default="https://discord.com/api/v10", description="The Discord REST API's root."
    )
    gateway_url: str = Field(
        default="wss://gateway.discord.gg",
        description="The Discord gateway's WebSocket address, where events arrive.",
    )
    pacing: bool = Field(
        default=True,
        description=(
            "Client-side flood control, per channel and overall. `false` sends at once, for "
            "measuring only: Discord answers floods with 429s."
        ),
    )

    @field_validator("api_base_url", "gateway_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url(value)
