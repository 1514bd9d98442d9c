"""``/link CODE``: an account proves it belongs to a person with the owner's one-time code.

The owner makes the code with ``pinclaw people link [PERSON]`` and sends it from
the account to link, in a private chat. The message never reaches the model,
the history or memory (the code is a secret until it is used). A valid code
links the account (and admits it, as pairing would: the owner vouched for it);
when the account was a person of its own, the two become one and its memories
follow. A code sent in a group chat is cancelled, since others could read it.
Wrong codes are answered at most five times an hour per account, then ignored,
so nobody can try codes at chat speed. Each ``/link`` takes one of the five
before its code is looked up (``TryLimiter``), so a burst of messages handled
in parallel gets no more checks; a valid code gives its try back.
"""

from __future__ import annotations

import logging
from collections import deque

from bot.core.messages import InboundMessage
from bot.memory.service import MemoryService
from bot.security.tries import TryLimiter
from bot.store.pairing import PairingStore
from bot.store.people import LINK_TTL_S, PeopleStore, identity_of

log = logging.getLogger(__name__)

MAX_FAILURES = 5
FAILURE_WINDOW_S = 3600.0


class Linking:
    """Carries out ``/link`` messages; the router sends back what ``handle`` returns."""

    def __init__(
        self,
        people: PeopleStore,
        pairing: PairingStore,
        memory: MemoryService | None = None,
    ) -> None:
        self._people = people
        self._pairing = pairing
        self._memory = memory
        self._tries = TryLimiter(MAX_FAILURES, FAILURE_WINDOW_S)
        self._seen: deque[tuple[str, str]] = deque(maxlen=256)

    def first_delivery(self, message: InboundMessage) -> bool:
        """False for a platform's second delivery of a ``/link`` already handled."""
        if message.message_id is None:
            return True
        key = (message.channel, message.message_id)
        if key in self._seen:
            return False
        self._seen.append(key)
        return True

    async def handle(self, message: InboundMessage, code: str, *, known: bool) -> str | None:
        """The reply to ``/link CODE`` from ``message``'s sender (None: say nothing).

        ``known`` says whether the sender may talk to PinClaw anyway; a stranger
        who has used up their tries gets no answer at all.
        """
        identity = identity_of(message.channel, message.sender_id)
        if not message.is_direct:
            cancelled = bool(code) and await self._people.void_link(code)
            if cancelled:
                log.warning(
                    "link code sent in group %s by %s: cancelled", message.chat_id, identity
                )
            if not known:
                return None
            return (
                "Send /link with your code in a private chat with me."
                + (" I cancelled that code, because others here could read it; make a new one "
                   "with `pinclaw people link`." if cancelled else "")
            )  # fmt: skip
        if self._tries.wait_s(identity) > 0:
            log.warning("ignored /link from %s: too many wrong codes in the last hour", identity)
            return None
        if not code:
            return "Send /link followed by the code `pinclaw people link` showed the owner."
        taken = self._tries.reserve(identity)  # before the lookup awaits: bursts cannot outrun it
        assert taken is not None  # nothing awaited since wait_s
        outcome = await self._people.redeem(
            code, message.channel, message.sender_id, message.sender_name
        )
        person = outcome.person
        if outcome.kind == "invalid" or person is None:
            log.info("wrong or expired link code from %s", identity)
            minutes = int(LINK_TTL_S // 60)
            return (
                "That link code is not valid (or it expired: codes last "
                f"{minutes} minutes). Ask the owner for a new one (`pinclaw people link`)."
            )
        self._tries.refund(identity, taken)  # a valid code is no wrong guess
        if outcome.kind == "owner_account":
            return (
                "This account is the owner's, so it cannot be linked to someone else. "
                "Unlink it first with `pinclaw people unlink " + identity + "`."
            )
        if outcome.kind == "already":
            return f"This account is already linked to {person.name}."
        await self._pairing.admit(message.channel, message.sender_id, message.sender_name)
        if outcome.merged is not None and self._memory is not None:
            await self._memory.rescoped()
        log.info(
            "linked %s to person #%d %s%s",
            identity,
            person.id,
            person.name,
            f" (merged person #{outcome.merged})" if outcome.merged is not None else "",
        )
        whom = "you, the owner" if person.is_owner else person.name
        return (
            f"Linked: this {message.channel.capitalize()} account now belongs to {whom}. "
            "What you tell me here is remembered for you wherever you talk to me."
        )
