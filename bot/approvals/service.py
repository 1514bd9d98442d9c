"""The approval service: the gate's approver for every channel.

``request_approval`` first looks for an "always allow" rule for exactly this
call; otherwise it stores a request with an unguessable id, posts it where the
approver will see it (the chat, or the approver's private chat when the config
says so), and waits until someone decides or it expires (a denial); a request
that chat cannot show whole is neither posted nor run (``fit``). ``decide``
(a button tap, or a typed ``/approve``) checks that the person may decide, that
the request exists, belongs to that message and is still open; it answers
anyone else privately and changes nothing. Each outcome edits the request into
a record. After a restart, requests left open are marked expired, their
messages say so, and the turns that waited for them are not silently run again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from bot.approvals.approvers import Approvers, owner_chats
from bot.approvals.fit import TooLong, card_limit, fitting
from bot.approvals.store import EVERYONE, ApprovalStore, StoredApproval, new_approval_id
from bot.approvals.texts import (
    Choice,
    buttons,
    decision_line,
    parse_action,
    record_text,
    request_text,
)
from bot.core.channel import (
    ApprovalSurface,
    ButtonPress,
    Channel,
    ChatTarget,
    DeliveryError,
    PressReply,
)
from bot.core.messages import OutboundMessage
from bot.security.approval import ApprovalOutcome, ApprovalRequest
from bot.store.inbound import InboundStore
from bot.store.people import PeopleStore, identity_of

log = logging.getLogger(__name__)

_STATUS = {"once": "once", "person": "always", "always": "always", "deny": "denied"}
_SAID = {"once": "Allowed once.", "always": "Always allowed", "denied": "Denied."}
_SETTLED = {
    "once": "allowed once",
    "always": "always allowed",
    "denied": "denied",
    "expired": "expired",
}


class ApprovalService:
    """Posts approval requests, waits for decisions, and keeps the record straight."""

    def __init__(
        self,
        store: ApprovalStore,
        *,
        channels: Mapping[str, Channel],
        approvers: Approvers,
        timeout_s: float,
        zone: ZoneInfo,
        inbound: InboundStore | None = None,
        people: PeopleStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._people = people
        self._store = store
        self._channels = channels
        self._approvers = approvers
        self._timeout_s = timeout_s
        self._zone = zone
        self._inbound = inbound
        self._clock = clock
        self._waiting: dict[str, asyncio.Future[ApprovalOutcome]] = {}
        # Requests whose card is being posted: a decision in that instant (the card is
        # visible before its message id is stored) closes the card once the id is known.
        self._posting: dict[str, asyncio.Event] = {}
        # Decisions taken in that instant, before the call's waiter exists: it takes them.
        self._early: dict[str, ApprovalOutcome] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def store(self) -> ApprovalStore:
        """The requests and rules (the web panel lists and revokes them)."""
        return self._store

    async def request_approval(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Ask the approver about one call and wait for the answer (or the expiry)."""
        person_id, person = await self._asker(request)
        rule = None
        if not request.after_untrusted:  # after untrusted content a person decides, not a rule
            rule = await self._store.matching_rule(request.tool, request.rule_key, person_id)
        if rule is not None:
            log.info("%s allowed by rule #%d (%s)", request.tool, rule.id, rule.summary)
            return ApprovalOutcome("approved", by=f"rule #{rule.id}")
        place = await self._place(request)
        if place is None:
            return ApprovalOutcome("unavailable")
        surface, target, where = place
        if request.on_asked is not None:  # only now: a rule's answer never shows as waiting
            request.on_asked()
        record = await self._post(request, surface, target, where, (person_id, person))
        if isinstance(record, TooLong):
            return ApprovalOutcome("too_long", size=record.size, room=record.room)
        if record is None:
            if where:
                await self._private_refused(request)
            return ApprovalOutcome("unavailable")
        approval_id, expires = record.id, record.expires_at
        waiter: asyncio.Future[ApprovalOutcome] = asyncio.get_running_loop().create_future()
        self._waiting[approval_id] = waiter
        if (early := self._early.pop(approval_id, None)) is not None:
            waiter.set_result(early)  # decided while its card was being posted
        try:
            async with asyncio.timeout(max(0.0, expires - self._clock())):
                return await waiter
        except TimeoutError:
            if await self._store.decide(approval_id, "expired", "nobody answered", self._clock()):
                line = decision_line("expired", "nobody answered", _dt(self._clock()), self._zone)
                self._spawn(self._close(record, line))
            return ApprovalOutcome("expired")
        finally:
            self._waiting.pop(approval_id, None)

    async def _asker(self, request: ApprovalRequest) -> tuple[int, str]:
        """The person whose turn asks (id and name), or (``EVERYONE``, "") if nobody's."""
        if self._people is None:
            return EVERYONE, ""
        session = request.session
        person = await self._people.speaker(
            session.channel, request.sender_id, request.sender_name, request.origin
        )
        return (person.id, person.name) if person is not None else (EVERYONE, "")

    async def _post(
        self,
        request: ApprovalRequest,
        surface: ApprovalSurface,
        target: ChatTarget,
        where: str,
        asker: tuple[int, str],
    ) -> StoredApproval | TooLong | None:
        """Store and post one request; None (and the request expired) if it cannot be posted,
        ``TooLong`` (and nothing stored or posted) if the chat cannot show it whole."""
        now = self._clock()
        approval_id = new_approval_id()
        expires = now + self._timeout_s
        command = getattr(surface, "approve_command", "/approve")
        person_id, person = asker
        due = _dt(expires)

        def card(shown: ApprovalRequest) -> str:
            return request_text(approval_id, shown, due, self._zone, where, command, person)

        shown = fitting(request, card, card_limit(surface))
        if isinstance(shown, TooLong):
            log.info(
                "not asking about a %s call in %s: its arguments (%d) do not fit (room for %d)",
                request.tool, target.channel, shown.size, shown.room,
            )  # fmt: skip
            return shown
        text = card(shown)
        record = StoredApproval(
            approval_id, request.session.channel, request.session.chat_id,
            request.session.thread_id, target.channel, target.chat_id, target.thread_id,
            None, request.sender_id, request.origin, request.tool, request.summary,
            request.rule_key, request.risk, request.reason, text, request.inbound_id,
            now, expires, "pending", None, None, person_id,
        )  # fmt: skip
        # Known as being posted from before it is stored: a decision in that instant is
        # for a call that still waits (``_settle``).
        posted = self._posting[approval_id] = asyncio.Event()
        ref = None
        try:
            await self._store.add(record)
            choices = buttons(approval_id, request.risk, person)
            ref = await surface.post_approval(target, text, choices)
        except DeliveryError as exc:
            log.error("could not post approval request %s to %s: %s", approval_id, target, exc)
            await self._store.decide(approval_id, "expired", "could not be delivered", now)
            return None
        else:
            await self._store.set_message(approval_id, ref)
        finally:
            posted.set()
            self._posting.pop(approval_id, None)
            if ref is None:  # not posted: no call will wait for a decision taken meanwhile
                self._early.pop(approval_id, None)
        return replace(record, message_ref=ref)

    async def _private_refused(self, request: ApprovalRequest) -> None:
        """Say in the chat, without the call's details, why nobody was asked."""
        session = request.session
        channel = self._channels.get(session.channel)
        if channel is None:
            return
        names = await self._approvers.describe(session.channel)
        text = (
            f"🔐 {request.tool} needs approval, but I could not reach {names} in a private "
            "chat. Open a private chat with me once (send any message), then ask again."
        )
        try:
            await channel.send(
                OutboundMessage(session.channel, session.chat_id, text, thread_id=session.thread_id)
            )
        except DeliveryError as exc:
            log.warning("could not say that approvals cannot reach %s: %s", names, exc)

    async def press(self, press: ButtonPress) -> PressReply:
        """A tap on a request's button."""
        parsed = parse_action(press.action_id)
        if parsed is None:
            return PressReply("This button is no longer active.")
        approval_id, choice = parsed
        return await self.decide(
            approval_id,
            choice,
            user_id=press.user_id,
            user_name=press.user_name,
            channel=press.channel,
            message_ref=press.message_ref,
        )

    async def decide(
        self,
        approval_id: str,
        choice: Choice,
        *,
        user_id: str,
        user_name: str,
        channel: str,
        message_ref: str = "",
    ) -> PressReply:
        """Settle a request for ``user_id``, or tell them privately why not."""
        record = await self._store.get(approval_id)
        # The message id is known once posting returns; a tap in that instant is fine.
        wrong_message = bool(
            record and message_ref and record.message_ref and message_ref != record.message_ref
        )
        if record is None or record.asked_channel != channel or wrong_message:
            log.warning(
                "rejected a decision on unknown or misrouted approval %r by %s on %s",
                approval_id,
                user_id,
                channel,
            )
            return PressReply("This approval request does not exist.")
        # A job's request without a chat of its own was put to the owner of the channel asked.
        judged = record.channel if record.channel in self._channels else record.asked_channel
        if not await self._approvers.may_decide(judged, user_id):
            log.info("%s (%s) may not decide approval %s", user_name, user_id, approval_id)
            names = await self._approvers.describe(judged)
            return PressReply(f"Only {names} can decide on this request.")
        return await self._settle(record, choice, await self._decider(channel, user_id, user_name))

    async def decide_from_panel(self, approval_id: str, choice: Choice, person: str) -> PressReply:
        """Settle a request for the web panel's ``person`` (logged in as the owner, who
        may decide every request): the same record, receipt in the chat and waiting
        tool call as a button tap in the chat."""
        record = await self._store.get(approval_id)
        if record is None:
            return PressReply("This approval request does not exist.")
        return await self._settle(record, choice, f"{person} (web panel)")

    async def _settle(self, record: StoredApproval, choice: Choice, by: str) -> PressReply:
        """Decide ``record`` as ``choice`` by ``by``: store it, wake the call, edit the chat."""
        approval_id = record.id
        if record.status != "pending":
            return PressReply(f"Already decided: {_SETTLED.get(record.status, record.status)}.")
        if approval_id not in self._waiting and approval_id not in self._posting:
            return await self._orphaned(record)
        if choice in ("always", "person") and record.risk == "high":
            return PressReply("A high-risk call can only be allowed once.")
        whom = await self._name_of(record.person_id) if choice == "person" else ""
        if choice == "person" and not whom:
            return PressReply("This request has nobody to remember it for; choose Always or Once.")
        status = _STATUS[choice]
        now = self._clock()
        if not await self._store.decide(approval_id, status, by, now):  # type: ignore[arg-type]
            return PressReply("Already decided.")
        rule = 0
        if status == "always":
            rule = await self._store.add_rule(
                record.tool,
                record.rule_key,
                record.summary,
                by,
                record.person_id if choice == "person" else EVERYONE,
            )
        outcome = ApprovalOutcome("denied" if status == "denied" else "approved", by=by)
        waiter = self._waiting.get(approval_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(outcome)
        elif approval_id in self._posting:  # its card is still being posted: the call waits next
            self._early[approval_id] = outcome
        line = decision_line(status, by, _dt(now), self._zone, rule, whom)
        self._spawn(self._close(record, line))
        said = (
            _SAID[status] + (f" for {whom}" if whom else "") + (f" (rule #{rule})." if rule else "")
        )
        return PressReply(said)

    async def _orphaned(self, record: StoredApproval) -> PressReply:
        """A decision on a request nothing waits for any more: its turn was cut (``/stop``,
        or PinClaw stopping) after it asked. Allowing it would run nothing, so it expires
        now, as it would after a restart, and its turn is not run again."""
        if await self._expire(
            record,
            "its turn was stopped",
            "stopped while waiting for an approval",
            "its turn was stopped before a decision",
        ):
            log.info("approval %s for %s expired: its turn was stopped", record.id, record.tool)
        return PressReply(
            "Nothing waits for this request any more (its turn was stopped), so "
            "nothing ran. Ask again if you still want it."
        )

    async def _name_of(self, person_id: int) -> str:
        """A person's name ("" for nobody, or without the people store)."""
        if self._people is None or person_id == EVERYONE:
            return ""
        person = await self._people.get(person_id)
        return person.name if person is not None else ""

    async def _decider(self, channel: str, user_id: str, user_name: str) -> str:
        """Who decided, by the name of their person where PinClaw knows them."""
        if self._people is not None:
            person = await self._people.of_identity(identity_of(channel, user_id))
            if person is not None and person.name != identity_of(channel, user_id):
                return person.name
        return user_name or user_id

    async def expire_leftovers(self) -> None:
        """Mark requests left open by a stop expired, so their turns are not re-run."""
        for record in await self._store.pending():
            if await self._expire(
                record,
                "restart",
                "PinClaw stopped while waiting for an approval",
                "PinClaw restarted before a decision",
                wait_connected=True,
            ):
                log.info("approval %s for %s expired: PinClaw restarted", record.id, record.tool)

    async def _expire(
        self,
        record: StoredApproval,
        why: str,
        note: str,
        shown: str,
        *,
        wait_connected: bool = False,
    ) -> bool:
        """Mark ``record`` expired for ``why`` (False if it was decided meanwhile), its
        message stopped with ``note``, and its card closed saying ``shown``."""
        if not await self._store.decide(record.id, "expired", why, self._clock()):
            return False
        if self._inbound is not None and record.inbound_id is not None:
            await self._inbound.mark(record.inbound_id, "stopped", note)
        line = decision_line("expired", shown, _dt(self._clock()), self._zone)
        self._spawn(self._close(record, line, wait_connected=wait_connected))
        return True

    async def drain(self) -> None:
        """Wait for pending message edits."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _place(
        self, request: ApprovalRequest
    ) -> tuple[ApprovalSurface, ChatTarget, str] | None:
        """Where to ask: the chat itself, or the approver's private chat."""
        session = request.session
        channel = self._channels.get(session.channel)
        if not isinstance(channel, ApprovalSurface):
            return await self._owner_place()
        target = ChatTarget(session.channel, session.chat_id, session.thread_id)
        if request.is_direct or not self._approvers.in_private(session.channel):
            return channel, target, ""
        for approver in await self._approvers.of(session.channel):
            private = channel.direct_target(approver)
            if private is not None:
                return channel, private, f" in the group chat {session.chat_id}"
        return channel, target, ""

    async def _owner_place(self) -> tuple[ApprovalSurface, ChatTarget, str] | None:
        """For calls without a chat of their own (a job delivering nowhere): the owner's DM."""
        chats = await owner_chats(self._channels, self._approvers)
        return (*chats[0], "") if chats else None

    async def _close(
        self, record: StoredApproval, line: str, *, wait_connected: bool = False
    ) -> None:
        posting = self._posting.get(record.id)
        if not record.message_ref and posting is not None:
            await posting.wait()  # decided while its card was being posted: its id comes
            record = await self._store.get(record.id) or record
        channel = self._channels.get(record.asked_channel)
        if not isinstance(channel, ApprovalSurface) or not record.message_ref:
            return
        if wait_connected and channel is not None:
            await channel.status.wait_connected(60)
        target = ChatTarget(record.asked_channel, record.asked_chat_id, record.asked_thread_id)
        try:
            await channel.close_approval(target, record.message_ref, record_text(record.text, line))
        except DeliveryError as exc:
            log.warning("could not update approval message %s: %s", record.id, exc)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _dt(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)
