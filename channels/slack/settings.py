"""``[channels.slack]`` settings (no slack-bolt import here)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from bot.config.channel import ChannelSettings, check_url


class SlackSettings(ChannelSettings):
    """A Slack app: tokens, endpoint, and how events arrive (Socket Mode or HTTP)."""

    mode: Literal["socket", "http"] = "socket"
    bot_token: SecretStr
    app_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    api_base_url: str = "https://slack.com/api/"
    http_listen: str = "127.0.0.1"
    # 0 picks a free port (useful in tests); the channel logs the one it got.
    http_port: int = Field(default=3000, ge=0, le=65535)
    http_path: str = "/slack/events"
    slash_command: str = "/pinclaw"
    # Socket Mode: seconds between pings; a socket without pongs for 4 pings is replaced.
    ping_interval_s: float = Field(default=10.0, gt=0)
    # Socket Mode: a socket down this long makes the channel start again from scratch.
    reconnect_limit_s: float = Field(default=120.0, gt=0)
    # Minimum gap between two messages in one conversation (Slack allows about 1 per second).
    send_interval_s: float = Field(default=1.0, ge=0)
    # Reaction shown on a message while its answer is being written; "" turns it off.
    progress_reaction: str = "eyes"
    # Client-side flood control (sends paced as the platform asks); false sends at once:
    # for measuring (the platform answers floods with 429s).
    pacing: bool = True

    @field_validator("api_base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return check_url(value) + "/"

    @field_validator("progress_reaction")
    @classmethod
    def _emoji_name(cls, value: str) -> str:
        return value.strip().strip(":")

    @model_validator(mode="after")
    def _mode_needs_its_secret(self) -> SlackSettings:
        if self.mode == "socket" and self.app_token is None:
            raise ValueError("mode = 'socket' needs app_token (an xapp-... token)")
        if self.mode == "http" and self.signing_secret is None:
            raise ValueError("mode = 'http' needs signing_secret")
        return self
