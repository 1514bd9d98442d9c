"""Home Assistant state changes as trigger events (``on = "ha:ENTITY_ID"``), over Home
Assistant's WebSocket API.

``connection.py`` keeps one WebSocket open (the documented handshake,
``subscribe_events`` for ``state_changed``, ``get_states``, reconnects with
backoff); ``source.py`` decides which changes fire which trigger, catches up
after a reconnect, and waits out ``for``. Imported only when some trigger
watches a Home Assistant entity, so aiohttp's WebSocket client is loaded then.
"""

from __future__ import annotations

from bot.triggers.sources import Emit, SourceDeps
from bot.triggers.sources.ha.connection import HaConnection, websocket_url
from bot.triggers.sources.ha.source import HaSource

__all__ = ["HaConnection", "HaSource", "build", "websocket_url"]


def build(deps: SourceDeps, emit: Emit) -> HaSource:
    """The Home Assistant source, on ``[home_assistant] url`` and ``token``."""
    return HaSource(emit, deps.app.loaded.config.home_assistant)
