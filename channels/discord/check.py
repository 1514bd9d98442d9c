"""``pinclaw doctor``'s Discord check: ``GET /users/@me`` with the bot token, then the
application's flags for the Message Content intent the channel asks for.

Plain httpx against the configured REST root: discord.py can only be pointed
elsewhere process-wide, and a check has no need of its gateway machinery.
Without the Message Content intent switched on in the Developer Portal the
gateway closes the connection at once (code 4014), so it is worth a line here.
"""

from __future__ import annotations

from ssl import SSLContext
from typing import Any

import httpx

from bot.core.channel_check import CredentialCheck
from channels.discord.settings import DiscordSettings

TIMEOUT_S = 10.0
MESSAGE_CONTENT = (1 << 18) | (1 << 19)  # GATEWAY_MESSAGE_CONTENT and its "limited" form
PORTAL = "discord.com/developers/applications"
TOKEN_FIX = (
    f"check channels.discord.token: {PORTAL}, your application, Bot, Reset Token "
    "(a token shown once; the old one stops working)"
)


async def check_credentials(settings: DiscordSettings, tls: SSLContext) -> CredentialCheck:
    """Ask Discord which bot the token belongs to, and whether it may read message text."""
    headers = {"Authorization": f"Bot {settings.token.get_secret_value()}"}
    root = settings.api_base_url
    try:
        async with httpx.AsyncClient(verify=tls, timeout=TIMEOUT_S, headers=headers) as client:
            me = await client.get(f"{root}/users/@me")
            if me.status_code == 401:
                return CredentialCheck(False, "Discord rejected the bot token (401)", TOKEN_FIX)
            if me.status_code != 200:
                return CredentialCheck(
                    False,
                    f"Discord answered HTTP {me.status_code} to GET {root}/users/@me",
                    "check channels.discord.api_base_url if it is set; else try again later",
                )
            app = await client.get(f"{root}/oauth2/applications/@me")
    except httpx.HTTPError as exc:
        return CredentialCheck(
            False,
            f"cannot reach Discord at {root} ({str(exc) or type(exc).__name__})",
            "check the network connection, and channels.discord.api_base_url if it is set",
        )
    who = f"signed in as {_name(me)}"
    flags = _json(app).get("flags") if app.status_code == 200 else None
    if isinstance(flags, int) and not flags & MESSAGE_CONTENT:
        return CredentialCheck(
            False,
            f"{who}, but the Message Content intent is off: the bot would see no message text",
            f"switch on Message Content Intent at {PORTAL}, your application, Bot, "
            "Privileged Gateway Intents",
        )
    return CredentialCheck(True, who)


def _name(response: httpx.Response) -> str:
    user = _json(response)
    name = str(user.get("username") or user.get("id") or "the bot")
    discriminator = str(user.get("discriminator") or "0")
    return name if discriminator == "0" else f"{name}#{discriminator}"


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
