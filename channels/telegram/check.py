"""``pinclaw doctor``'s Telegram check: ``getMe`` with the token, through the channel's API root."""

from __future__ import annotations

from ssl import SSLContext

from telegram.error import InvalidToken, NetworkError, TelegramError

from bot.core.channel_check import CredentialCheck
from channels.telegram.client import TelegramClient
from channels.telegram.settings import TelegramSettings

TOKEN_FIX = (
    "check channels.telegram.token; @BotFather shows your bot's token (/mybots, then API Token)"
)


async def check_credentials(settings: TelegramSettings, tls: SSLContext) -> CredentialCheck:
    """Ask Telegram which bot the token belongs to, as the channel would at start."""
    token = settings.token.get_secret_value()
    where = settings.api_base_url
    try:
        client = TelegramClient(token, where, tls)
        async with client.api() as bot:
            me = await bot.get_me()
    except InvalidToken as exc:  # 401 for a revoked token, 404 for a malformed one
        fix = TOKEN_FIX
        if "not found" in exc.message.lower():
            fix += f"; if the token is right, {where} is not Telegram's Bot API (api_base_url)"
        return CredentialCheck(False, f"Telegram rejected the bot token ({exc.message})", fix)
    except NetworkError as exc:  # TimedOut included
        reason = exc.message.replace(token, "<token>")
        return CredentialCheck(
            False,
            f"cannot reach Telegram at {where} ({reason})",
            "check the network connection, and channels.telegram.api_base_url if it is set",
        )
    except TelegramError as exc:
        reason = exc.message.replace(token, "<token>")
        return CredentialCheck(False, f"Telegram refused getMe ({reason})", TOKEN_FIX)
    return CredentialCheck(True, f"signed in as @{me.username or me.id}")
