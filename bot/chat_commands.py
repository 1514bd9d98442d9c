"""Chat commands every channel understands, such as ``/new`` and ``/help``."""

from __future__ import annotations

from bot.agent import Agent
from bot.messages import InboundMessage

HELP = """Commands:
/new  start a fresh conversation (I forget this chat's history)
/help show this list"""


async def run_command(message: InboundMessage, agent: Agent) -> str | None:
    """Run ``message`` as a command and return the reply, or None if it is not a command."""
    text = message.text.strip()
    if not text.startswith("/"):
        return None
    name = text.split(maxsplit=1)[0][1:].split("@", 1)[0].lower()
    if name == "new":
        await agent.new_session(message)
        return "Started a fresh conversation."
    if name in ("help", "start"):
        return HELP
    return None
