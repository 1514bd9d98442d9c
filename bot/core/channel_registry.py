"""Which chat channels exist, by name: the only place the core learns of platforms.

Settings models, adapters and credential checks (``pinclaw doctor``) are
loaded by name, so a channel that is not enabled never has its library imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from bot.core.by_name import load as _load

if TYPE_CHECKING:
    from bot.core.channel_check import CheckCredentials

CHANNELS: dict[str, tuple[str, str]] = {
    "telegram": (
        "channels.telegram.settings:TelegramSettings",
        "channels.telegram.channel:TelegramChannel",
    ),
    "discord": (
        "channels.discord.settings:DiscordSettings",
        "channels.discord.channel:DiscordChannel",
    ),
    "slack": ("channels.slack.settings:SlackSettings", "channels.slack.channel:SlackChannel"),
    "web": ("channels.web.settings:WebChatSettings", "channels.web.channel:WebChannel"),
}


def settings_model(name: str) -> type[BaseModel]:
    """The settings model of channel ``name`` (KeyError if there is no such channel)."""
    model: type[BaseModel] = _load(CHANNELS[name][0])
    return model


def adapter_class(name: str) -> Any:
    """The adapter class of channel ``name``; importing it loads the platform's library."""
    return _load(CHANNELS[name][1])


def credential_check(name: str) -> CheckCredentials:
    """The credential check of channel ``name`` (``channels.NAME.check``); loads its library."""
    if name not in CHANNELS:
        raise KeyError(name)
    check: CheckCredentials = _load(f"channels.{name}.check:check_credentials")
    return check
