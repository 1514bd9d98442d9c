"""``[channels.slack]`` settings (no slack-bolt import here)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from bot.config.channel import ChannelSettings, check_url


class SlackSettings(ChannelSettings):
    """A Slack app: tokens, endpoint, and how events arrive (Socket Mode or HTTP)."""

    mode: Literal["socket", "http"] = Field(
        default="socket",
        description=(
            "How events arrive: `socket` (Socket Mode, no public address needed; needs "
            "`app_token`) or `http` (Slack posts them to `http_path` on "
            "`http_listen`:`http_port`; needs `signing_secret`)."
        ),
    )
    bot_token: SecretStr = Field(
        description=(
            "The bot token (`xoxb-...`); keep it out of the file: "
            '`bot_token = "${SLACK_BOT_TOKEN}"`.'
        ),
    )
    app_token: SecretStr | None = Field(
        default=None,
        description='The app-level token (`xapp-...`); required with `mode = "socket"`.',
    )
    signing_secret: SecretStr | None = Field(
        default=None,
        description=(
            "The app's signing secret, which proves that events come from Slack; required "
            'with `mode = "http"`.'
        ),
    )
    api_base_url: str = Field(
        default="https://slack.com/api/",
        description="The Slack Web API's root (another one for GovSlack, say).",
    )
    http_listen: str = Field(
        default="127.0.0.1",
        description="HTTP mode: the local address events are received on.",
    )
    http_port: int = Field(
        default=3000,
        ge=0,
        le=65535,
        description="HTTP mode: the local port; 0 picks a free one (the log says which).",
    )
    http_path: str = Field(
        default="/slack/events",
        description="HTTP mode: the path Slack posts events to, as set in the Slack app.",
    )
    slash_command: str = Field(
        default="/pinclaw",
        description=(
            "The slash command as set up in the Slack app; the chat commands are its words "
            "(`/pinclaw new`, `/pinclaw approve ID once`)."
        ),
    )
    ping_interval_s: float = Field(
        default=10.0,
        gt=0,
        description=(
            "Socket Mode: seconds between pings; a socket without pongs for 4 pings is replaced."
        ),
    )
    reconnect_limit_s: float = Field(
        default=120.0,
        gt=0,
        description=(
            "Socket Mode: seconds a socket may stay down before the channel starts again "
            "from scratch."
        ),
    )
    send_interval_s: float = Field(
        default=1.0,
        ge=0,
        description=(
            "The shortest gap, in seconds, between two messages in one conversation (Slack "
            "allows about one a second)."
        ),
    )
    progress_reaction: str = Field(
        default="eyes",
        description=(
            "The emoji reaction, by name, put on a message while its answer is written "
            '(colons are dropped). `""` turns it off.'
        ),
    )
    pacing: bool = Field(
        default=True,
        description=(
            "Client-side flood control: `send_interval_s` per conversation and about 20 "
            "messages a second overall. `false` sends at once, for measuring only: Slack "
            "answers floods with 429s."
        ),
    )

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
