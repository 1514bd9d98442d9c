"""A fake Discord (REST + gateway websocket) for the real discord.py: see ``server.py``."""

from tests.fake_discord.payloads import JSON
from tests.fake_discord.redirect import redirect_discord
from tests.fake_discord.server import DEFAULT_TOKEN, FakeDiscord
from tests.fake_discord.state import Call, Fault, InteractionRecord

__all__ = [
    "DEFAULT_TOKEN",
    "JSON",
    "Call",
    "FakeDiscord",
    "Fault",
    "InteractionRecord",
    "redirect_discord",
]
