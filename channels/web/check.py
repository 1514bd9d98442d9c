"""``pinclaw doctor``'s web chat check: there is no platform and no credential to check."""

from __future__ import annotations

from ssl import SSLContext

from bot.core.channel_check import CredentialCheck
from channels.web.settings import WebChatSettings


async def check_credentials(settings: WebChatSettings, tls: SSLContext) -> CredentialCheck:
    """Nothing to ask anyone: the web chat is a page of the panel, behind its login."""
    return CredentialCheck(True, "the Chat page of the web panel (log in with `pinclaw web token`)")
