"""Button presses on Discord: acknowledged at once, approval taps passed to the core.

Discord fails an interaction that is not acknowledged within 3 seconds, and the
core may take longer (it writes the decision down and edits the request), so
every press is first answered with a "deferred update" (nothing visible
changes). An approval tap (``custom_id`` starting ``ap:``) then goes to
``inbox.press``, and its reply reaches the tapper as a follow-up: ephemeral
unless the core says otherwise. The request message itself is edited by the
core through ``close_approval``, never from here, so it is edited once.

Presses are recognised by ``custom_id`` alone, so buttons posted before a
restart still work. A RESUME may replay an interaction; its id is remembered
for a while, so the core hears each tap once. Whatever goes wrong, the tapper
gets a sentence, never "This interaction failed". Presses still being handled
when the client closes get a moment to finish (``drain``), so their answers
are not cut off by the closing connection; what is still running then is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import Any

import discord

from bot.core.channel import DeliveryError, Inbox, PressReply, ShuttingDown
from bot.core.delivery import send_with_retries
from bot.core.drain import drain
from bot.core.errors import bug_message, log_bug
from channels.discord.events import press_from
from channels.discord.send import classify, pieces

log = logging.getLogger(__name__)

APPROVAL_PREFIX = "ap:"
REMEMBERED = 512  # interaction ids kept to recognise a replayed one
STOPPING_TEXT = "PinClaw is restarting; please tap the button again in a minute."

Interaction = discord.Interaction[discord.Client]


class Presses:
    """Answers component interactions and hands approval taps to the inbox."""

    def __init__(self) -> None:
        self._seen: OrderedDict[int, None] = OrderedDict()
        self._running: set[asyncio.Task[object]] = set()

    async def handle(self, interaction: Interaction, inbox: Inbox | None) -> None:
        """Acknowledge a press, pass an approval tap to the core, answer the tapper."""
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        try:
            await self._handle(interaction, inbox)
        finally:
            self._running.discard(task)

    async def drain(self, timeout_s: float) -> None:
        """Give presses being handled up to ``timeout_s`` to finish, then cancel the rest."""
        await drain(self._running, timeout_s)  # no press outlives the channel

    async def _handle(self, interaction: Interaction, inbox: Inbox | None) -> None:
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = str(data.get("custom_id") or "")
        who = interaction.user.id
        if self._replayed(interaction.id):
            log.info("ignored a second delivery of discord interaction %s", interaction.id)
            return
        acknowledged = await _acknowledge(interaction)
        if not custom_id.startswith(APPROVAL_PREFIX) or inbox is None:
            log.info("discord button %r pressed by %s", custom_id, who)
            return
        log.info("discord approval button %r pressed by %s", custom_id, who)
        reply = await _ask(inbox, interaction, custom_id)
        if acknowledged:
            await _answer(interaction, reply)

    def _replayed(self, interaction_id: int) -> bool:
        if interaction_id in self._seen:
            return True
        self._seen[interaction_id] = None
        if len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
        return False


async def _acknowledge(interaction: Interaction) -> bool:
    try:
        await interaction.response.defer()
    except discord.HTTPException as exc:
        # Too late (10062) or answered already (40060): the tap still counts.
        log.warning("could not acknowledge discord interaction %s: %s", interaction.id, exc)
        return False
    return True


async def _ask(inbox: Inbox, interaction: Interaction, custom_id: str) -> PressReply:
    try:
        return await inbox.press(press_from(interaction, custom_id))
    except ShuttingDown:
        return PressReply(STOPPING_TEXT)
    except Exception as exc:
        error_id = log_bug(log, f"could not handle discord button {custom_id!r}", exc)
        return PressReply(bug_message(error_id))


async def _answer(interaction: Interaction, reply: PressReply) -> None:
    if not reply.text.strip():
        return  # the core has nothing to say to the tapper
    followup = interaction.followup
    for piece in pieces(reply.text):

        async def attempt(piece: str = piece) -> None:
            await followup.send(piece, ephemeral=reply.private, wait=True)

        try:
            await send_with_retries(attempt, classify, what="the answer to a button press")
        except DeliveryError as exc:
            log.warning("%s (interaction %s)", exc, interaction.id)
            return
