"""Chat commands every channel understands: /new, /stop, /status, /model, /help (and the
typed /approve and /link). A channel may understand more of its own (the terminal's /quit),
which its ``own_commands`` lists for /help.

Adapters register ``CHAT_COMMANDS`` natively where the platform has commands
(Telegram's command list, Discord application commands, a Slack slash command)
and turn them into messages whose text starts with the command (and its argument,
for a command that takes one: ``/model gpt-4o``). Any other
``/word`` is answered with the list of commands, never sent to the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandInfo:
    """A command's name (without the slash) and the one line people see; ``argument``
    names the optional text a command takes (a Discord option), with its ``argument_help``."""

    name: str
    description: str
    argument: str = ""
    argument_help: str = ""


CHAT_COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo("new", "Start a fresh conversation"),
    CommandInfo("stop", "Stop the answer in progress"),
    CommandInfo("status", "Show whether PinClaw is connected and busy"),
    CommandInfo(
        "model",
        "List the models, or switch this chat's model",
        argument="name",
        argument_help="A model from the list, or default",
    ),
    CommandInfo("help", "List the commands"),
)
_NAMES = {c.name for c in CHAT_COMMANDS} | {"start", "approve", "link"}
_COMMAND = re.compile(r"/([A-Za-z][A-Za-z0-9_]{0,31})(?:@[A-Za-z0-9_]+)?")
UNKNOWN = "?"
"""The name ``parse_command`` gives a command it does not know (no command is named so)."""


def help_text(own: tuple[CommandInfo, ...] = ()) -> str:
    """The answer to /help: every channel's commands, then ``own``, those only the
    channel asked understands (the terminal's /quit)."""
    return (
        "Commands:\n"
        + "\n".join(f"/{_usage(c)} - {c.description}" for c in CHAT_COMMANDS)
        + "\n/approve ID once|person|always|deny - decide on an approval request by typing"
        + "\n/link CODE - link this account to you (the code comes from `pinclaw people link`)"
        + "".join(f"\n/{c.name} - {c.description}" for c in own)
    )


def _usage(command: CommandInfo) -> str:
    """How a command is typed: ``model [NAME]``."""
    return f"{command.name} [{command.argument.upper()}]" if command.argument else command.name


def parse_command(text: str) -> tuple[str, str] | None:
    """``(name, arguments)`` if ``text`` starts with a command, else None.

    A command is a slash and a word (a letter, then letters, digits or ``_``), alone
    or before a space: ``/new``, ``/new@pinclaw_bot`` (Telegram's form in groups),
    ``/foo bar``. ``/start`` means help; a word that is none of the chat commands
    comes back as ``UNKNOWN``, to be answered with the help instead of going to the
    model. ``/ 5 apples`` or ``/etc/hosts is gone`` are not commands.
    """
    words = text.strip().split(None, 1)
    match = _COMMAND.fullmatch(words[0]) if words else None
    if match is None:
        return None
    name = match.group(1).lower()
    if name == "start":
        name = "help"
    elif name not in _NAMES:
        name = UNKNOWN
    return name, words[1].strip() if len(words) > 1 else ""
