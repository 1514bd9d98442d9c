"""``[channels.telegram]`` settings (no python-telegram-bot import here)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from bot.config.channel import ChannelSettings, check_url


class TelegramSettings(ChannelSettings):
    """A Telegram bot: token, API endpoint, and how updates arrive."""

    token: SecretStr
    api_base_url: str = "https://api.telegram.org"
    mode: Literal["polling", "webhook"] = "polling"
    poll_timeout_s: int = Field(default=30, ge=1, le=50)
    webhook_url: str | None = None
    webhook_listen: str = "127.0.0.1"
    webhook_port: int = Field(default=8443, ge=1, le=65535)
    webhook_secret: SecretStr | None = None
    # Client-side flood control (sends paced as the platform asks); false sends at once:
    # for a local Bot API server or measuring (the platform answers floods with 429s).
    pacing: bool = True

    @field_validator("api_base_url", "webhook_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)

    @model_validator(mode="after")
    def _webhook_needs_url(self) -> TelegramSettings:
        if self.mode == "webhook" and not self.webhook_url:
            raise ValueError("mode = 'webhook' needs webhook_url (the public HTTPS address)")
        return self
