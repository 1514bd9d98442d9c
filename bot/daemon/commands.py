"""The answers to chat commands: /new, /stop, /status, /model, /approve, /link, /help.

The router recognises a command (``bot.core.chat_commands.parse_command``) and runs
it at once, outside the chat's queue of turns, so /stop reaches a busy chat; this
module says what each command does and what the person reads back.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from bot.agent.loop import Agent
from bot.approvals.service import ApprovalService
from bot.approvals.texts import parse_choice
from bot.core.channel import Channel
from bot.core.chat_commands import UNKNOWN, help_text
from bot.core.messages import InboundMessage
from bot.daemon.models import ChatModels
from bot.daemon.sessions import SessionRunner
from bot.daemon.status import describe_status

LINK_HELP = (
    "Linking is for chat accounts: run `pinclaw people link`, then send "
    "/link CODE from the account to link, in a private chat with me."
)


class ChatCommands:
    """Runs one chat command for a message and returns the text to answer with."""

    def __init__(
        self,
        *,
        agent: Agent,
        runner: SessionRunner,
        channels: Mapping[str, Channel],
        model_label: str,
        approvals: ApprovalService | None,
        models: ChatModels | None,
    ) -> None:
        self._agent = agent
        self._runner = runner
        self._channels = channels
        self._model_label = model_label
        self._approvals = approvals
        self._models = models
        self._started = time.time()

    async def answer(self, message: InboundMessage, name: str, args: str) -> str:
        """What command ``name`` (with ``args``) does for ``message``'s chat, as a reply."""
        if name == "new":
            await self._agent.new_session(message)
            return "Started a fresh conversation."
        if name == "stop":
            stopped = await self._runner.stop(message.session)
            return "Stopped." if stopped else "Nothing to stop."
        if name == "approve":
            return await self._approve(message, args)
        if name == "link":
            return LINK_HELP
        if name == "model" and self._models is not None:
            return await self._models.command(message, args)
        if name == "status":
            return await self._status(message)
        if name == UNKNOWN:
            return f"That is not one of my commands.\n\n{self.help(message.channel)}"
        return self.help(message.channel)

    def help(self, channel: str) -> str:
        """The command list, with the commands only ``channel`` understands (``own_commands``)."""
        return help_text(getattr(self._channels[channel], "own_commands", ()))

    async def _status(self, message: InboundMessage) -> str:
        model = self._model_label
        if self._models is not None:
            model = await self._models.describe(message.session)
        return describe_status(
            started=self._started,
            model=model,
            channels=[c.status for c in self._channels.values()],
            running=self._runner.is_running(message.session),
            waiting=self._runner.waiting(message.session),
        )

    async def _approve(self, message: InboundMessage, args: str) -> str:
        words = args.split()
        choice = parse_choice(words[1]) if len(words) > 1 else "once"
        if not words or choice is None or self._approvals is None:
            return "Usage: /approve ID once|always|deny (the ID is in the request)"
        reply = await self._approvals.decide(
            words[0],
            choice,
            user_id=message.sender_id,
            user_name=message.sender_name or message.sender_id,
            channel=message.channel,
        )
        return reply.text
