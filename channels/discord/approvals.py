"""Approval requests on Discord: one message with its buttons, later edited into a record.

A request is posted like a reply (paced per chat, retried with one nonce so a
lost answer never doubles it) to a guild channel, a thread, or a DM. The core
names a DM by ``direct_target``: ``user:<id>``, resolved to the DM channel on
first use (Discord's "open DM" call returns the existing channel, so this also
works after a restart) and remembered.

A request is always one message of at most 2,000 characters (``APPROVAL_LIMIT``)
and is never cut: the core edits it by the one id it gets back, the buttons sit
under the text they decide on, and a notification shows the text (an embed's
would not). The core asks only about calls whose request and record fit
(``bot.approvals.fit``); a longer call is refused and the model told to split it.

Closing edits the message's text over REST and removes its buttons; if the
message is gone (deleted by someone), the record is posted as a new message.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence

import discord

from bot.approvals.fit import CardLimit
from bot.core.channel import ChatTarget, DeliveryError
from bot.core.delivery import send_with_retries
from bot.core.messages import Button
from bot.core.pacing import Pacer
from channels.discord.events import CHANNEL
from channels.discord.send import (
    MESSAGE_LIMIT,
    ButtonRow,
    channel_id,
    classify,
    pieces,
    post,
    utf16_length,
)

log = logging.getLogger(__name__)

DM_PREFIX = "user:"
UNKNOWN_MESSAGE = 10008
APPROVAL_LIMIT = CardLimit(MESSAGE_LIMIT, utf16_length)
_STYLES = {
    "once": discord.ButtonStyle.success,
    "always": discord.ButtonStyle.secondary,
    "deny": discord.ButtonStyle.danger,
}


def approval_style(button: Button) -> discord.ButtonStyle:
    """Green for "once", red for "deny", grey otherwise (by the action id's last part)."""
    return _STYLES.get(button.action_id.rpartition(":")[2], discord.ButtonStyle.secondary)


def one_message(text: str) -> str:
    """``text``, which must fit one Discord message: it is never cut (``DeliveryError``)."""
    if utf16_length(text) > MESSAGE_LIMIT:
        raise DeliveryError(
            f"an approval message of {utf16_length(text)} characters does not fit one "
            f"Discord message ({MESSAGE_LIMIT}); it is not cut"
        )
    return text


class ApprovalMessages:
    """Posts and closes approval requests through the current client."""

    def __init__(self, client: Callable[[], discord.Client], pacer: Pacer) -> None:
        self._client = client
        self._pacer = pacer
        self._dm_channels: dict[str, int] = {}  # user id -> DM channel id

    def direct_target(self, user_id: str) -> ChatTarget | None:
        """The DM with ``user_id`` (opened when something is first posted there)."""
        return ChatTarget(CHANNEL, f"{DM_PREFIX}{user_id}") if user_id.isdigit() else None

    async def post(self, target: ChatTarget, text: str, buttons: Sequence[Button]) -> str:
        """Post the request with its buttons in one row; return the message id."""
        try:
            view = ButtonRow(buttons, approval_style)
        except ValueError as exc:
            raise DeliveryError(f"could not send an approval request: {exc}") from exc
        where = await self._channel_of(target)
        message = await self._post(where, one_message(text), view, "an approval request")
        return str(message.id)

    async def close(self, target: ChatTarget, message_ref: str, text: str) -> None:
        """Edit the request into ``text`` without buttons, or post ``text`` if it is gone."""
        where = await self._channel_of(target)
        if message_ref.isdigit():
            content = one_message(text)

            async def edit() -> None:
                partial = self._client().get_partial_messageable(where)
                await partial.get_partial_message(int(message_ref)).edit(content=content, view=None)

            try:
                async with self._pacer.slot(str(where)):
                    await send_with_retries(edit, classify, what="the outcome of an approval")
                return
            except DeliveryError as exc:
                cause = exc.__cause__
                if not (isinstance(cause, discord.NotFound) and cause.code == UNKNOWN_MESSAGE):
                    raise
        log.warning(
            "the approval request %r in discord chat %s is gone; posting its outcome instead",
            message_ref,
            where,
        )
        for piece in pieces(text):
            await self._post(where, piece, None, "the outcome of an approval")

    async def _post(
        self, where: int, text: str, view: ButtonRow | None, what: str
    ) -> discord.Message:
        nonce = secrets.randbits(62)  # kept across retries: Discord drops a second copy

        async def attempt() -> discord.Message:
            return await post(self._client(), where, text, reference=None, view=view, nonce=nonce)

        async with self._pacer.slot(str(where)):
            return await send_with_retries(attempt, classify, what=what)

    async def _channel_of(self, target: ChatTarget) -> int:
        where = target.thread_id or target.chat_id
        if not where.startswith(DM_PREFIX):
            return channel_id(where)
        user_id = where.removeprefix(DM_PREFIX)
        known = self._dm_channels.get(user_id)
        if known is not None:
            return known
        if not user_id.isdigit():
            raise DeliveryError(f"could not send to Discord user {user_id!r}: not a user id")

        async def open_dm() -> discord.DMChannel:
            return await self._client().create_dm(discord.Object(int(user_id)))

        dm = await send_with_retries(open_dm, classify, what=f"a DM to Discord user {user_id}")
        self._dm_channels[user_id] = dm.id
        return dm.id
