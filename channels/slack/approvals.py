"""Approval requests in Slack: posted with buttons, later edited into a record.

``SlackApprovals`` is what ``SlackChannel`` does for the ``ApprovalSurface``
port. A request is one message, never cut: its text rendered as mrkdwn in
section blocks of at most 3,000 characters each (Slack's limit for one), at
most 12,000 characters in all (Slack refuses a message whose blocks hold much
more than 13,000, with ``msg_blocks_too_long``), then an actions block with the
buttons (each button's ``action_id`` is the core's full ``ap:<id>:<choice>``
string, unique within the message as Block Kit requires). ``APPROVAL_LIMIT``
tells the core how much fits, and the core asks only about calls that do
(``bot.approvals.fit``). The message's ``text``, which notifications show, is
its first section. It is paced and retried like any reply; its ``ts`` is the
message reference. Closing it ``chat.update``s the message to the record text
with no actions block, so nobody can press again; when the message is gone
(deleted, or the edit refused) the record is posted as a new message instead,
and that is logged.

Private chats: Slack accepts a user id (``U...``) as the target of
``chat.postMessage`` and posts in the app's DM with that person, but
``chat.update`` needs the DM's own id (``D...``). ``DirectChats`` keeps the DM of
each person: seen in their messages (memory only), learned from posting to
them (also stored, so a request can be closed after a restart), or asked of
``conversations.open`` as a last resort (which needs the ``im:write`` scope).
"""

from __future__ import annotations

import collections
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from slack_sdk.web.async_client import AsyncWebClient

from bot.approvals.fit import CardLimit
from bot.core.channel import ChatTarget, DeliveryError, StateStore
from bot.core.delivery import send_with_retries
from bot.core.messages import Button
from bot.core.pacing import Pacer
from channels.slack.client import SlackWeb
from channels.slack.format import button_blocks, split_for_slack
from channels.slack.send import SlackRefused, call, classify

log = logging.getLogger(__name__)

JSON = dict[str, Any]
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
MAX_TEXT = 12_000  # the most text a request's sections hold together


def sections(text: str) -> list[str]:
    """A request's text as the mrkdwn of its section blocks (at least one)."""
    return split_for_slack(text) or ["(empty message)"]


def card_size(text: str) -> int:
    """The characters a request's sections hold, as rendered for Slack."""
    return sum(len(part) for part in sections(text))


APPROVAL_LIMIT = CardLimit(MAX_TEXT, card_size)


def messages(parts: list[str]) -> list[list[str]]:
    """Sections grouped into messages of at most ``MAX_TEXT`` characters each."""
    grouped: list[list[str]] = [[]]
    for part in parts:
        if grouped[-1] and sum(map(len, grouped[-1])) + len(part) > MAX_TEXT:
            grouped.append([])
        grouped[-1].append(part)
    return grouped


def card_blocks(parts: Sequence[str], buttons: Sequence[Button]) -> list[JSON]:
    """Block Kit for one request: a section per part, then its buttons (if any)."""
    head = [{"type": "section", "text": {"type": "mrkdwn", "text": p}} for p in parts[:-1]]
    return head + button_blocks(parts[-1], buttons)


def is_user_id(chat_id: str) -> bool:
    """True for a Slack member id (``U...`` or ``W...``), as opposed to a conversation id."""
    return bool(_USER_ID.match(chat_id))


class DirectChats:
    """Each person's DM with the app (``U...`` to ``D...``)."""

    NAMESPACE = "slack.dms"

    def __init__(
        self, state: StateStore, client: Callable[[], AsyncWebClient], size: int = 5000
    ) -> None:
        self._state = state
        self._client = client
        self._size = size
        self._known: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._stored: dict[str, str] = {}  # what this run wrote to the state store

    def known(self, user_id: str) -> str | None:
        """The DM with ``user_id`` if it has been seen in this run."""
        return self._known.get(user_id)

    def saw(self, user_id: str, dm: str) -> None:
        """Note the DM a person wrote in (memory only: anyone may write to the app)."""
        self._keep(user_id, dm)

    async def learn(self, user_id: str, dm: str) -> None:
        """Note the DM the app posted in for this person, across restarts."""
        self._keep(user_id, dm)
        if self._stored.get(user_id) != dm:
            await self._state.set(self.NAMESPACE, user_id, dm)
            self._stored[user_id] = dm  # only approvers are posted to: a handful

    async def resolve(self, chat_id: str) -> str:
        """The conversation id for ``chat_id``: a user's DM, or ``chat_id`` itself."""
        if not is_user_id(chat_id):
            return chat_id
        dm = self._known.get(chat_id) or await self._state.get(self.NAMESPACE, chat_id)
        if dm is None:
            dm = await self._open(chat_id)
        if dm is None:
            return chat_id
        self._keep(chat_id, dm)
        return dm

    async def _open(self, user_id: str) -> str | None:
        try:
            opened = await call(
                "conversations.open", self._client().conversations_open(users=user_id)
            )
        except (SlackRefused, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.info("could not find the Slack DM with %s: %s", user_id, exc)
            return None
        channel = opened.get("channel") or {}
        dm = str(channel.get("id") or "") if isinstance(channel, dict) else ""
        return dm or None

    def _keep(self, user_id: str, dm: str) -> None:
        self._known[user_id] = dm
        self._known.move_to_end(user_id)
        while len(self._known) > self._size:
            self._known.popitem(last=False)


class SlackApprovals:
    """Posts approval requests and closes them; the channel's ``ApprovalSurface`` half."""

    def __init__(self, web: SlackWeb, pacer: Pacer, dms: DirectChats) -> None:
        self._web = web
        self._pacer = pacer
        self._dms = dms

    def direct_target(self, user_id: str) -> ChatTarget | None:
        """The app's DM with ``user_id`` (its ``D...`` id when known, else the user id,
        which ``chat.postMessage`` accepts); None for what is not a Slack member id."""
        if not is_user_id(user_id):
            return None
        return ChatTarget("slack", self._dms.known(user_id) or user_id)

    async def post(self, target: ChatTarget, text: str, buttons: Sequence[Button]) -> str:
        """Post the request (text, then buttons under it) as one message; return its ``ts``."""
        parts = sections(text)
        if sum(map(len, parts)) > MAX_TEXT:  # the core checks first; a request is never cut
            raise DeliveryError(
                f"an approval request of {sum(map(len, parts))} characters does not fit one "
                f"Slack message ({MAX_TEXT}); it is not cut"
            )
        what = f"an approval request to {target.chat_id}"
        posted = await self._post(target, parts[0], card_blocks(parts, buttons), what)
        channel, ts = str(posted.get("channel") or ""), str(posted.get("ts") or "")
        if not ts:
            raise DeliveryError(
                f"Slack did not say where the approval request to {target.chat_id} went"
            )
        if is_user_id(target.chat_id) and channel and channel != target.chat_id:
            await self._dms.learn(target.chat_id, channel)
        return ts

    async def close(self, target: ChatTarget, message_ref: str, text: str) -> None:
        """Edit the request into ``text`` without buttons; post ``text`` if it is gone.

        A record too long for one message (the core keeps records within
        ``APPROVAL_LIMIT``) goes on in further messages rather than being cut.
        """
        grouped = messages(sections(text))
        channel = await self._dms.resolve(target.chat_id)
        try:
            await send_with_retries(
                self._update_attempt(channel, message_ref, grouped[0]),
                classify,
                what=f"the approval request {message_ref} in {channel}",
            )
            rest = grouped[1:]
        except DeliveryError as exc:
            log.warning("%s; posting its outcome as a new message instead", exc)
            rest = grouped
        for number, message in enumerate(rest, 1):
            what = f"part {number} of {len(rest)} of the outcome of approval {message_ref}"
            await self._post(target, message[0], card_blocks(message, ()), what)

    async def _post(
        self, target: ChatTarget, text: str, blocks: list[JSON] | None, what: str
    ) -> JSON:
        async def attempt() -> JSON:
            async with self._pacer.slot(target.chat_id):
                response = await call(
                    "chat.postMessage",
                    self._web.client().chat_postMessage(
                        channel=target.chat_id,
                        text=text,
                        thread_ts=target.thread_id,
                        blocks=blocks,
                    ),
                )
            data = response.data
            return data if isinstance(data, dict) else {}

        return await send_with_retries(attempt, classify, what=what)

    def _update_attempt(
        self, channel: str, ts: str, parts: list[str]
    ) -> Callable[[], Awaitable[None]]:
        async def attempt() -> None:
            async with self._pacer.slot(channel):
                await call(
                    "chat.update",
                    self._web.client().chat_update(
                        channel=channel, ts=ts, text=parts[0], blocks=card_blocks(parts, ())
                    ),
                )

        return attempt
