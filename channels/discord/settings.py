"""``[channels.discord]`` settings (no discord.py import here)."""

from __future__ import annotations

from pydantic import SecretStr, field_validator

from bot.config.channel import ChannelSettings, check_url


class DiscordSettings(ChannelSettings):
    """A Discord bot: token and endpoints."""

    token: SecretStr
    api_base_url: str = "https://discord.com/api/v10"
    gateway_url: str = "wss://gateway.discord.gg"
    # Client-side flood control (sends paced as the platform asks); false sends at once:
    # for measuring (the platform answers floods with 429s).
    pacing: bool = True

    @field_validator("api_base_url", "gateway_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url(value)
