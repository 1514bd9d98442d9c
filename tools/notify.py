"""The ``notify`` tool: a message to someone other than the person speaking.

``to`` names a person PinClaw knows (by name, or ``#ID``) or a chat target in
cron's forms (``owner``, ``terminal:owner``, ``CHANNEL:CHAT_ID``). A person is
reached in the private chat of one of their accounts that PinClaw may write
to: an account listed in ``allowed_users`` or admitted by pairing or a link
code, on an enabled channel with private chats. Of those, the one the person
wrote from last (the inbound store keeps every message) is chosen, else the one
linked last. Someone with no such account cannot be messaged; nor can a chat
that is neither such a private chat nor a listed group.

The recipient reads who asked ("From Sam, via PinClaw:"), and the message goes
through the outbox, which waits for the channel to connect and keeps a copy in
the recipient's chat history, so their next answer has its context. Medium
risk: ``supervised`` asks, and an "always" rule covers one recipient as written
(a name in any case, a ``#ID``, a chat target): the key cannot be the resolved
account, since a rule is looked up from the arguments alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Protocol

from pydantic import BaseModel, Field

from bot.core.channel import ApprovalSurface, Channel, ChatTarget, StateStore
from bot.core.errors import ToolError, UserError
from bot.core.tool_api import Assessment, Tool, ToolContext, tool
from bot.cron.jobs import parse_target
from bot.cron.outbox import Outbox
from bot.cron.store import Target
from bot.store.inbound import InboundStore
from bot.store.people import OWNER_NAME, Identity, PeopleStore, Person

MAX_TEXT_CHARS = 4000
SENT = "notify_sent"  # key-value namespace: what each stored message's turn sent
CONNECT_WAIT_S = 60.0  # the outbox's wait for a channel that is (re)connecting

_TO_HELP = (
    "Who gets it: a person's name as PinClaw knows them (e.g. 'Ada'), or '#ID'; or a chat "
    "target: 'owner' (the owner's private chat), 'terminal:owner' (the owner's inbox), "
    "'CHANNEL:CHAT_ID' (e.g. 'telegram:123456', a private chat or a listed group)"
)


class Admission(Protocol):
    """Who PinClaw may write to (``bot.daemon.access.AccessControl`` is one)."""

    async def admits(self, channel: str, user_id: str) -> bool: ...

    def lists_group(self, channel: str, chat_id: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class Recipient:
    """Whom a ``to`` names (``label`` for people) and where the message goes."""

    label: str
    target: Target
    chat: ChatTarget | None


class Recipients:
    """Finds the person or chat a ``to`` names, and the chat that reaches them."""

    def __init__(
        self,
        *,
        people: PeopleStore,
        channels: Mapping[str, Channel],
        admission: Admission,
        inbound: InboundStore,
        outbox: Outbox,
    ) -> None:
        self._people = people
        self._channels = channels
        self._admission = admission
        self._inbound = inbound
        self._outbox = outbox

    async def find(self, to: str) -> Recipient:
        """The recipient ``to`` names; ``ToolError`` saying why there is none."""
        to = " ".join(to.split())
        if to.casefold() in (OWNER_NAME, "terminal:owner"):
            target = parse_target(to.casefold())
            return Recipient("the owner", target, await self._outbox.resolve(target))
        if ":" in to:
            return await self._chat(to)
        found = await self._people.find(to)
        if found is None:
            raise ToolError(f"nobody is known as {to!r}. {await self.who()}")
        if isinstance(found, list):
            named = "; ".join(f"#{p.id} {p.name} ({_accounts(p)})" for p in found)
            raise ToolError(
                f"{len(found)} people are called {to!r}: {named}. Give the number of the "
                f"one you mean as 'to', e.g. '#{found[0].id}'"
            )
        accounts = await self._reachable(found)
        if not accounts:
            raise ToolError(
                f"{found.name} cannot be messaged: they have no chat account PinClaw may "
                f"write to (one paired with, linked or allowed in the config). {await self.who()}"
            )
        pairs = [(account.channel, account.user_id) for account in accounts]
        last = await self._inbound.last_from(pairs)
        chosen = next(
            (a for a in accounts if (a.channel, a.user_id) == last),
            max(accounts, key=lambda account: account.linked_at),
        )
        chat = self._direct(chosen)
        assert chat is not None  # _reachable kept only accounts with a private chat
        target = Target("chat", chat.channel, chat.chat_id, chat.thread_id)
        return Recipient(found.name, target, chat)

    async def who(self) -> str:
        """Who can be messaged, for the model."""
        names = [p.name for p in await self._people.all() if await self._reachable(p)]
        known = ", ".join(names) if names else "nobody yet"
        return (
            f"People who can be messaged: {known}. A chat target works too: 'owner', or "
            "'CHANNEL:CHAT_ID' of a private chat or a listed group."
        )

    async def _chat(self, to: str) -> Recipient:
        """A chat target in cron's form; only a private chat with someone admitted or a
        listed group."""
        try:
            target = parse_target(to)
        except UserError as exc:
            raise ToolError(f"{exc}. {_TO_HELP}") from None
        if target.kind != "chat":
            raise ToolError(f"{to!r} is no person or chat; {_TO_HELP}")
        channel = self._channels.get(target.channel)
        if channel is None:
            raise ToolError(f"the channel {target.channel!r} is not enabled in the config")
        if self._admission.lists_group(target.channel, target.chat_id):
            return Recipient(str(target), target, ChatTarget(target.channel, target.chat_id,
                                                              target.thread_id))  # fmt: skip
        private = (
            channel.direct_target(target.chat_id) if isinstance(channel, ApprovalSurface) else None
        )
        if private is None or not await self._admission.admits(target.channel, target.chat_id):
            raise ToolError(
                f"{to!r} cannot be messaged: it is neither a listed group nor the private chat "
                f"of someone PinClaw may write to (paired, linked or allowed). {await self.who()}"
            )
        return Recipient(str(target), Target("chat", private.channel, private.chat_id), private)

    async def _reachable(self, person: Person) -> list[Identity]:
        """The person's accounts with a private chat PinClaw may write to."""
        return [
            account
            for account in person.identities
            if self._direct(account) is not None
            and await self._admission.admits(account.channel, account.user_id)
        ]

    def _direct(self, account: Identity) -> ChatTarget | None:
        channel = self._channels.get(account.channel)
        if not isinstance(channel, ApprovalSurface) or not account.user_id:
            return None
        return channel.direct_target(account.user_id)


def notify_tool(
    recipients: Recipients, outbox: Outbox, people: PeopleStore, sent: StateStore | None = None
) -> Tool:
    """``notify``, delivering through the daemon's outbox; ``sent`` remembers what each
    stored message's turn sent, so a turn answered again after a restart sends nothing twice."""

    def assess(ctx: ToolContext, to: str, text: str) -> Assessment:
        if not to.strip():
            raise ToolError(f"'to' is empty. {_TO_HELP}")
        if not text.strip():
            raise ToolError("'text' is empty; write the message to send")
        shown = " ".join(to.split())
        return Assessment("medium", f"sends this message to {shown}, saying who asked")

    async def resolve(ctx: ToolContext, to: str) -> Recipient:
        recipient = await recipients.find(to)
        chat, here = recipient.chat, ctx.session
        if chat is not None and (chat.channel, chat.chat_id) == (here.channel, here.chat_id):
            raise ToolError(f"{to!r} is this very chat; answer here instead of using notify")
        return recipient

    async def check(ctx: ToolContext, values: BaseModel) -> None:
        """Refuse a recipient who cannot be messaged before anyone is asked."""
        await resolve(ctx, str(getattr(values, "to", "")))

    @tool(
        effect="write",
        assess=assess,
        check=check,
        approval_key=_rule_key,
        timeout_s=CONNECT_WAIT_S + 30,
    )
    async def notify(
        ctx: ToolContext,
        to: Annotated[str, Field(description=_TO_HELP)],
        text: Annotated[
            str,
            Field(
                max_length=MAX_TEXT_CHARS,
                description="The message, as the recipient should read it (markdown); they "
                "see who asked for it above it",
            ),
        ],
    ) -> str:
        """Send a message to another person (or a chat), e.g. "tell Ada dinner is ready".

        Not for answering the person you are talking to: just reply to them.
        """
        recipient = await resolve(ctx, to)  # again: who can be reached may have changed
        chat = recipient.chat
        sender = await _sender(ctx, people)
        message = f"From {sender}, via PinClaw:\n\n{text.strip()}"
        note = f"[PinClaw passed on this message from {sender}]"
        once = _once_key(ctx, to, text)
        if once and sent is not None and await sent.get(SENT, once) is not None:
            return f"Already sent to {recipient.label} for this message; not sent twice."
        try:
            where = await outbox.deliver(
                recipient.target, chat, message, source=f"notify from {sender}", note=note
            )
        except UserError as exc:
            raise ToolError(f"the message to {recipient.label} was not delivered: {exc}") from None
        if once and sent is not None:
            await sent.set(SENT, once, recipient.label)
        return f"Sent to {recipient.label} ({where})."

    return notify


def _once_key(ctx: ToolContext, to: str, text: str) -> str:
    """What identifies one message sent for one stored chat message ("" outside a chat
    turn): the same recipient and text again in its turn, or in that turn answered again
    after a restart, is not sent twice."""
    if ctx.inbound_id is None:
        return ""
    digest = hashlib.sha256(f"{' '.join(to.split()).casefold()}\n{text.strip()}".encode())
    return f"{ctx.inbound_id}:{digest.hexdigest()[:24]}"


def _rule_key(values: BaseModel) -> str:
    """What an "always" rule covers: one recipient, as written (a name in any case)."""
    to = " ".join(str(getattr(values, "to", "")).split())
    if to.casefold() in (OWNER_NAME, "terminal:owner"):
        return to.casefold()
    if ":" in to:
        return f"chat:{to}"
    return f"person:{to.casefold()}"


async def _sender(ctx: ToolContext, people: PeopleStore) -> str:
    """Who asked, as the recipient reads it: "Sam", "a scheduled job set up by Sam"."""
    asker = ctx.sender_name.strip()
    if ctx.origin.startswith(("cron", "trigger")):
        kind = "a scheduled job" if ctx.origin.startswith("cron") else "an automatic trigger"
        return f"{kind} set up by {asker}" if asker and asker != OWNER_NAME else kind
    if ctx.origin == "heartbeat":
        return "the heartbeat check"
    person = await people.speaker(ctx.session.channel, ctx.sender_id, asker, ctx.origin)
    if person is not None and person.name != OWNER_NAME and ":" not in person.name:
        return person.name
    if asker:
        return asker
    return "the owner" if person is not None and person.is_owner else "someone"


def _accounts(person: Person) -> str:
    return ", ".join(i.identity for i in person.identities) or "no accounts"
