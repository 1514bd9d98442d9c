"""The ``[channels.NAME]`` tables tests give the daemon: each on its fake, one person allowed.

Ada (Telegram user 7001), Alice (the fake Slack's member) and the fake Discord's
owner are the people the tests talk as; ``extra`` keys are added to (or replace)
the table's settings.
"""

from __future__ import annotations

from typing import Any

from tests.fake_discord import FakeDiscord
from tests.fake_slack import ALICE, FakeSlack
from tests.fake_telegram import FakeTelegram

TELEGRAM_OWNER = 7001


def telegram_table(telegram: FakeTelegram, **extra: Any) -> dict[str, Any]:
    """``[channels.telegram]`` on the fake Bot API: Ada allowed, short polls."""
    return {
        "token": telegram.token,
        "api_base_url": telegram.url,
        "allowed_users": [TELEGRAM_OWNER],
        "poll_timeout_s": 1,
        **extra,
    }


def slack_table(slack: FakeSlack, **extra: Any) -> dict[str, Any]:
    """``[channels.slack]`` in Socket Mode on the fake: Alice allowed, fast pings, no pacing."""
    return {
        "bot_token": slack.bot_token,
        "app_token": slack.app_token,
        "api_base_url": slack.api_url,
        "allowed_users": [ALICE],
        "ping_interval_s": 0.1,
        "send_interval_s": 0,
        **extra,
    }


def discord_table(discord: FakeDiscord, **extra: Any) -> dict[str, Any]:
    """``[channels.discord]`` on the fake gateway and REST API: its owner allowed."""
    return {
        "token": discord.token,
        "api_base_url": discord.api_base,
        "gateway_url": discord.gateway_url,
        "allowed_users": [discord.owner["id"]],
        **extra,
    }
