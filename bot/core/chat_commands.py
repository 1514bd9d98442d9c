"""Chat commands every channel understands: /new, /stop, /status, /help (and the typed
/approve and /link).

Adapters register ``CHAT_COMMANDS`` natively where the platform has commands
(Telegram's command list, Discord application commands, a Slack slash command)
and turn them into messages whose text starts with the command.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """A command's name (without the slash) and the one line people see."""

    name: str
    description: str


CHAT_COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo("new", "Start a fresh conversation"),
    CommandInfo("stop", "Stop the answer in progress"),
    CommandInfo("status", "Show whether PinClaw is connected and busy"),
    CommandInfo("help", "List the commands"),
)
_NAMES = {c.name for c in CHAT_COMMANDS} | {"start", "approve", "link"}

HELP = (
    "Commands:\n"
    + "\n".join(f"/{c.name} - {c.description}" for c in CHAT_COMMANDS)
    + "\n/approve ID once|person|always|deny - decide on an approval request by typing"
    + "\n/link CODE - link this account to you (the code comes from `pinclaw people link`)"
)


def parse_command(text: str) -> tuple[str, str] | None:
    """``(name, arguments)`` if ``text`` is one of the chat commands, else None.

    ``/new@pinclaw_bot`` (Telegram's form in groups) counts; ``/start`` means help.
    """
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    head, _, rest = stripped.partition(" ")
    name = head[1:].split("@", 1)[0].lower()
    if name not in _NAMES:
        return None
    return ("help" if name == "start" else name), rest.strip()
