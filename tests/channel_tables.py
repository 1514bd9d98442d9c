"""The ``[channels.NAME]`` tables tests give the daemon: each on its fake, one person allowed.

Ada (Telegram user 7001) and Alice (the fake Slack's member) are the people the
tests talk as; ``extra`` keys are added to (or replace) the table's settings.
"""

from __future__ import annotations

from typing import Any

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
