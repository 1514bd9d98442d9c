"""The router: takes messages from the inbox, runs a command or an agent turn, sends the reply.

This is where errors meet people: a ``UserError`` (a provider that is down, a key
that is rejected) becomes its plain sentence, and anything else is logged as a
bug with an id. No traceback ever reaches a chat.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from bot.agent import Agent
from bot.channel import Channel, StreamingChannel
from bot.chat_commands import run_command
from bot.errors import UserError, bug_message, log_bug
from bot.messages import InboundMessage, OutboundMessage

log = logging.getLogger(__name__)


class Router:
    """Handles inbound messages one at a time, in arrival order."""

    def __init__(self, agent: Agent, channels: Mapping[str, Channel]) -> None:
        self._agent = agent
        self._channels = channels
        self._queue: asyncio.Queue[InboundMessage] = asyncio.Queue()

    async def put(self, message: InboundMessage) -> None:
        """The inbox: channels put what people send here."""
        await self._queue.put(message)

    async def run(self) -> None:
        """Handle messages until cancelled."""
        while True:
            message = await self._queue.get()
            try:
                await self.handle(message)
            finally:
                self._queue.task_done()

    async def drain(self) -> None:
        """Wait until every message put so far has been answered."""
        await self._queue.join()

    async def handle(self, message: InboundMessage) -> None:
        """Answer one message on its channel."""
        channel = self._channels[message.channel]
        try:
            text = await run_command(message, self._agent)
            if text is None:
                sink = channel.text_sink(message) if isinstance(channel, StreamingChannel) else None
                result = await self._agent.run_turn(
                    message, channel_context=describe_chat(message), on_text=sink
                )
                text = result.text or "(the model sent an empty reply)"
        except UserError as exc:
            log.warning("turn for %s failed: %s", message.session, exc)
            text = f"Sorry, I could not answer: {exc}"
        except Exception as exc:
            text = bug_message(log_bug(log, f"handling a message in {message.session}", exc))
        await channel.send(OutboundMessage.reply(message, text))


def describe_chat(message: InboundMessage) -> str:
    """One sentence telling the model where it is talking and with whom."""
    who = message.sender_name or message.sender_id
    if message.channel == "terminal":
        return f"You are talking with {who}, your owner, in a terminal on the machine you run on."
    kind = "a direct chat" if message.is_direct else "a group chat"
    return f"You are talking with {who} in {kind} on {message.channel.capitalize()}."
