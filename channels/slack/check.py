"""``pinclaw doctor``'s Slack check: ``auth.test`` with the bot token and, in Socket Mode,
``apps.connections.open`` with the app token (it only hands out a socket URL; nothing connects).

The signing secret of HTTP mode cannot be checked from here: only Slack's own
requests show whether it matches.
"""

from __future__ import annotations

from ssl import SSLContext
from urllib.parse import urlsplit

import aiohttp

from bot.core.channel_check import CredentialCheck
from channels.slack.client import SlackWeb
from channels.slack.send import SlackRefused, call
from channels.slack.settings import SlackSettings

BOT_TOKEN_FIX = (
    "check channels.slack.bot_token: the xoxb-... token under OAuth & Permissions "
    "in the app's settings at api.slack.com/apps (reinstall the app if it was revoked)"
)
APP_TOKEN_FIX = (
    "check channels.slack.app_token: an xapp-... token with the connections:write scope, "
    "under Basic Information, App-Level Tokens; Socket Mode must be on for the app"
)


async def check_credentials(settings: SlackSettings, tls: SSLContext) -> CredentialCheck:
    """Ask Slack who the bot token belongs to, and whether the app token may open a socket."""
    bot_token = settings.bot_token.get_secret_value()
    try:
        auth = await call(
            "auth.test (bot token)",
            SlackWeb(bot_token, settings.api_base_url, tls).client().auth_test(),
        )
    except SlackRefused as exc:
        return CredentialCheck(False, f"Slack refused the bot token: {exc}", BOT_TOKEN_FIX)
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return _unreachable(settings, exc)
    who = f"bot token works for @{auth.get('user', '?')} in {auth.get('team', '?')}"
    if settings.mode != "socket" or settings.app_token is None:
        return CredentialCheck(
            True, f"{who} (HTTP mode: Slack's requests prove the signing secret)"
        )
    app_token = settings.app_token.get_secret_value()
    client = SlackWeb(app_token, settings.api_base_url, tls).client()
    try:
        await call(
            "apps.connections.open (app token)", client.apps_connections_open(app_token=app_token)
        )
    except SlackRefused as exc:
        return CredentialCheck(
            False, f"{who}, but Slack refused the app token: {exc}", APP_TOKEN_FIX
        )
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return _unreachable(settings, exc)
    return CredentialCheck(True, f"{who}; the app token may open the Socket Mode connection")


def _unreachable(settings: SlackSettings, exc: BaseException) -> CredentialCheck:
    where = urlsplit(settings.api_base_url).netloc
    return CredentialCheck(
        False,
        f"cannot reach Slack at {where} ({str(exc) or type(exc).__name__})",
        "check the network connection, and channels.slack.api_base_url if it is set",
    )
