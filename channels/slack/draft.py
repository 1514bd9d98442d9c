"""A reply's draft on Slack: one message, posted where the reply goes, edited by ``chat.update``.

A draft is rendered as mrkdwn like any reply (everything escaped, markup only where
it is complete), cut to one message with a "…" line when more follows. The finished
reply is split as any reply: its first piece is edited into the draft (unless the
draft already shows exactly that: no ``chat.update`` that changes nothing), the rest
are posted after it, in the same thread. Calls wait their turn in the conversation's
pacing (``send_interval_s``), like replies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bot.core.channel import DeliveryError
from bot.core.delivery import send_with_retries
from bot.core.messages import InboundMessage, OutboundMessage
from bot.core.pacing import Pacer
from channels.slack.client import SlackWeb
from channels.slack.format import MESSAGE_LIMIT, split_for_slack
from channels.slack.send import SlackRefused, call, classify

MORE = "\n…"
# Slack's answers to an edit of a message that is gone or may not be changed any more.
UNEDITABLE = frozenset({"message_not_found", "cant_update_message", "edit_window_closed"})

Remember = Callable[[OutboundMessage], Awaitable[None]]


def one_message(text: str) -> str:
    """``text`` rendered as mrkdwn and cut to one message, ending in "…" when more follows."""
    pieces = split_for_slack(text, MESSAGE_LIMIT - len(MORE)) or ["…"]
    return pieces[0] + MORE if len(pieces) > 1 else pieces[0]


class SlackDraft:
    """The ``DraftSurface`` of a reply to one message; ``remember`` notes the thread it
    ends in, as a reply does."""

    def __init__(
        self, web: SlackWeb, pacer: Pacer, message: InboundMessage, remember: Remember
    ) -> None:
        self._web = web
        self._pacer = pacer
        self._message = message
        self._remember = remember

    def fit(self, text: str) -> str:
        """The mrkdwn of what one message shows of ``text``."""
        return one_message(text)

    async def post(self, shown: str) -> str:
        """Post the first draft where the reply goes; its ``ts``."""
        answer = await self._post(shown, "the draft of a reply")
        return str(answer["ts"])

    async def edit(self, ref: str, shown: str) -> bool:
        """Show ``shown`` in the draft; False when Slack no longer lets it be edited."""
        return await self._update(ref, shown)

    async def finish(self, ref: str, message: OutboundMessage, shown: str) -> bool:
        """The reply's first piece into the draft (unless it shows ``shown`` already), the
        rest posted after it."""
        pieces = split_for_slack(message.text) or ["(empty message)"]
        if message.buttons:
            return False
        if pieces[0] != shown:
            try:
                if not await self._update(ref, pieces[0]):
                    return False
            except DeliveryError:
                return False
        for number, piece in enumerate(pieces[1:], 2):
            await self._post(piece, f"part {number} of {len(pieces)} of a reply")
        await self._remember(message)
        return True

    async def delete(self, ref: str) -> None:
        """Delete the draft."""
        channel = self._message.chat_id
        await call("chat.delete", self._web.client().chat_delete(channel=channel, ts=ref))

    async def _post(self, text: str, what: str) -> Any:
        async def attempt() -> Any:
            async with self._pacer.slot(self._message.chat_id):
                return await call(
                    "chat.postMessage",
                    self._web.client().chat_postMessage(
                        channel=self._message.chat_id, text=text, thread_ts=self._message.thread_id
                    ),
                )

        return await send_with_retries(attempt, classify, what=what)

    async def _update(self, ref: str, text: str) -> bool:
        async def attempt() -> bool:
            async with self._pacer.slot(self._message.chat_id):
                try:
                    await call(
                        "chat.update",
                        self._web.client().chat_update(
                            channel=self._message.chat_id, ts=ref, text=text
                        ),
                    )
                except SlackRefused as exc:
                    if exc.error in UNEDITABLE:
                        return False
                    raise
            return True

        return await send_with_retries(attempt, classify, what="the draft of a reply")
