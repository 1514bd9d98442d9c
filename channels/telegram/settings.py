"""``[channels.telegram]`` settings (no python-telegram-bot import here)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from bot.config.channel import ChannelSettings, check_url


class TelegramSettings(ChannelSettings):
    """A Telegram bot: token, API endpoint, and how updates arrive."""

    token: SecretStr = Field(
        description=(
            "The bot's token from @BotFather; keep it out of the file: "
            '`token = "${TELEGRAM_BOT_TOKEN}"`.'
        ),
    )
    api_base_url: str = Field(
        default="https://api.telegram.org",
        description="The Bot API's address; point it at a local Bot API server if you run one.",
    )
    mode: Literal["polling", "webhook"] = Field(
        default="polling",
        description=(
            "How updates arrive: `polling` asks Telegram for them (works behind NAT, no "
            "public address needed); `webhook` has Telegram post them to `webhook_url`."
        ),
    )
    poll_timeout_s: int = Field(
        default=30,
        ge=1,
        le=50,
        description=(
            "Polling: seconds Telegram holds each long poll open. A poll left unanswered for "
            "this long plus 5 to 10 s counts as stalled and is started again."
        ),
    )
    webhook_url: str | None = Field(
        default=None,
        description=(
            "Webhook mode (required there): the public HTTPS address Telegram posts updates "
            "to, like `https://bot.example.org/telegram`, usually a reverse proxy that "
            "reaches `webhook_listen`:`webhook_port`."
        ),
    )
    webhook_listen: str = Field(
        default="127.0.0.1",
        description="Webhook mode: the local address the webhook server listens on.",
    )
    webhook_port: int = Field(
        default=8443,
        ge=1,
        le=65535,
        description="Webhook mode: the local port the webhook server listens on.",
    )
    webhook_secret: SecretStr | None = Field(
        default=None,
        description=(
            "Webhook mode: the secret Telegram sends with every update, checked on each. Not "
            "set: PinClaw makes one and keeps it in its database, so it stays the same across "
            "restarts. Wrong secrets are not rate limited: if you set one, make it long and "
            "random (`openssl rand -hex 32`)."
        ),
    )
    pacing: bool = Field(
        default=True,
        description=(
            "Client-side flood control: replies paced as Telegram asks (a burst of three, "
            "then one a second per chat; 20 a minute in a group). `false` sends at once, only "
            "for a local Bot API server or for measuring: Telegram answers floods with 429s."
        ),
    )

    @field_validator("api_base_url", "webhook_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)

    @model_validator(mode="after")
    def _webhook_needs_url(self) -> TelegramSettings:
        if self.mode == "webhook" and not self.webhook_url:
            raise ValueError("mode = 'webhook' needs webhook_url (the public HTTPS address)")
        return self
