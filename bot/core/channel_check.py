"""What a chat channel's credential check reports, for ``pinclaw doctor``.

Each platform package has a ``check`` module whose ``check_credentials(settings,
tls)`` asks the platform who the bot is (Telegram ``getMe``, Slack ``auth.test``,
Discord ``/users/@me``) without starting the channel. It is loaded by name
through ``bot.core.channel_registry``, so a disabled channel's library is never
imported, and it returns a ``CredentialCheck`` instead of raising.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class CredentialCheck:
    """The platform's verdict: who the bot is (``ok``), or what is wrong and how to fix it."""

    ok: bool
    detail: str
    fix: str = ""


CheckCredentials = Callable[[Any, ssl.SSLContext], Awaitable[CredentialCheck]]
"""``check_credentials(settings, tls)``: settings are the channel's own settings model."""
