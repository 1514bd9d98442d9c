"""``[channels.slack]`` settings (no slack-bolt import here)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from bot.channel_settings import ChannelSettings, check_url


class SlackSettings(ChannelSettings):
    """A Slack app: tokens, endpoint, and how events arrive (Socket Mode or HTTP)."""

    mode: Literal["socket", "http"] = "socket"
    bot_token: SecretStr
    app_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    api_base_url: str = "https://slack.com/api/"
    http_listen: str = "127.0.0.1"
    http_port: int = Field(default=3000, ge=1, le=65535)
    http_path: str = "/slack/events"
    slash_command: str = "/pinclaw"

    @field_validator("api_base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url(value) + "/"

    @model_validator(mode="after")
    def _mode_needs_its_secret(self) -> SlackSettings:
        if self.mode == "socket" and self.app_token is None:
            raise ValueError("mode = 'socket' needs app_token (an xapp-... token)")
        if self.mode == "http" and self.signing_secret is None:
            raise ValueError("mode = 'http' needs signing_secret")
        return self
