"""Point discord.py at a ``FakeDiscord`` by swapping its two process-global URLs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

from tests.fake_discord.server import FakeDiscord


@contextmanager
def redirect_discord(fake: FakeDiscord) -> Iterator[FakeDiscord]:
    """Set ``Route.BASE`` and ``DiscordWebSocket.DEFAULT_GATEWAY`` to ``fake``; restore after.

    These are class attributes shared by every client in the process, so tests using
    this must not run concurrently in one process with tests using another fake.
    """
    old_base, old_gateway = Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    Route.BASE = fake.api_base
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
    try:
        yield fake
    finally:
        Route.BASE = old_base
        DiscordWebSocket.DEFAULT_GATEWAY = old_gateway
