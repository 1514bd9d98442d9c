"""What a firing does: make its message (``say``: the text filled in; ``ask``: a turn of
the agent) and deliver it to the trigger's target through the outbox.

A ``say`` needs no model. An ``ask`` turn enters through the router like a
scheduled job's, as the person who made the trigger (the owner for a config
trigger), with origin ``trigger:NAME``: its tool calls meet the same policy and
approvals, and the audit log names the trigger. An event carrying text from
outside (a webhook body, a serial line, a Home Assistant state) makes the turn
start as having read untrusted content. A chat target whose channel is down is
not given up: ``Undelivered`` tells the service to try again later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bot.core.channel import Channel, ChannelStatus, ChatTarget
from bot.core.errors import UserError
from bot.core.messages import InboundMessage, SessionKey
from bot.cron.jobs import parse_target
from bot.cron.outbox import Outbox
from bot.cron.runs import NO_REPLY, TurnRunner
from bot.triggers.spec import Event, Trigger, fill

if TYPE_CHECKING:
    from bot.cron.store import Target


class Undelivered(Exception):
    """The target's chat could not take the message now; try again later."""

    def __init__(self, reason: str, channel: str = "") -> None:
        super().__init__(reason)
        self.channel = channel


@dataclass(frozen=True, slots=True)
class Delivered:
    """Where a message went ("" for nowhere)."""

    where: str


class Actions:
    """Makes and delivers the message of one firing."""

    def __init__(
        self,
        *,
        outbox: Outbox,
        router: TurnRunner | None,
        channels: Mapping[str, Channel],
        zone: ZoneInfo,
    ) -> None:
        self._outbox = outbox
        self._router = router
        self._channels = channels
        self._zone = zone

    def channel_status(self, channel: str) -> ChannelStatus | None:
        """The connection state of ``channel`` (None if it is not enabled)."""
        found = self._channels.get(channel)
        return None if found is None else found.status

    def values(self, trigger: Trigger, event: Event) -> dict[str, object]:
        """The placeholders of ``event`` plus ``{trigger}``, ``{time}`` and ``{summary}``."""
        stamp = datetime.fromtimestamp(event.at, self._zone).strftime("%H:%M")
        return {**event.fields, "trigger": trigger.name, "time": stamp, "summary": event.summary}

    def say_text(self, trigger: Trigger, event: Event) -> str:
        """A ``say`` trigger's message for ``event``."""
        text = fill(trigger.say, self.values(trigger, event), untrusted=event.untrusted)
        return text.strip() or event.summary

    async def ask(self, trigger: Trigger, event: Event) -> str:
        """Run an ``ask`` trigger's turn; its reply (``NO_REPLY`` means nothing to send).
        ``UserError`` when the turn failed."""
        if self._router is None:
            raise UserError("agent turns are not available here")
        target = parse_target(trigger.to)
        chat = await self._outbox.resolve(target)
        message = self._message(trigger, event, chat)
        result = await self._router.run_scheduled(
            message,
            history=SessionKey("trigger", trigger.name),
            origin=f"trigger:{trigger.name}",
            context=_context(trigger, target),
        )
        if result.status != "done":
            raise UserError(result.text or f"the turn ended with {result.status}")
        return result.text.strip() or NO_REPLY

    async def deliver(self, trigger: Trigger, text: str) -> Delivered:
        """Send ``text`` where the trigger points. ``Undelivered`` when its chat cannot take
        it now; ``UserError`` when it never could (a channel that is not enabled)."""
        target = parse_target(trigger.to)
        source = f"trigger:{trigger.name}"
        note = f"[Trigger '{trigger.name}' sent this message]"
        if target.kind not in ("chat", "owner"):
            return Delivered(await self._outbox.deliver(target, None, text, source=source,
                                                        note=note))  # fmt: skip
        chat = await self._outbox.resolve(target)
        if chat is None:  # the owner without a private chat: their inbox
            return Delivered(await self._outbox.deliver(target, None, text, source=source,
                                                        note=note))  # fmt: skip
        status = self._channels[chat.channel].status
        if status.state != "connected":
            raise Undelivered(f"{chat.channel} is not connected ({status.detail})", chat.channel)
        try:
            await self._outbox.send(chat, text, note)
        except UserError as exc:
            raise Undelivered(str(exc), chat.channel) from None
        return Delivered(f"{chat.channel}:{chat.chat_id}")

    def _message(self, trigger: Trigger, event: Event, chat: ChatTarget | None) -> InboundMessage:
        text = f"[Trigger '{trigger.name}' fired: {event.summary}]\n{trigger.ask}"
        if event.fields:
            shown = "\n".join(f"{k}: {v}" for k, v in event.fields.items())
            if event.untrusted:
                shown = f'<untrusted source="trigger:{trigger.name}">\n{shown}\n</untrusted>'
            text += f"\n\nThe event:\n{shown}"
        quotes = f"an event from {trigger.on}" if event.untrusted else ""
        if chat is None:
            return InboundMessage(
                "trigger", trigger.name, trigger.creator_id, text, trigger.creator_name,
                quotes=quotes,
            )  # fmt: skip
        return InboundMessage(
            chat.channel, chat.chat_id, trigger.creator_id, text, trigger.creator_name,
            thread_id=chat.thread_id, is_direct=not chat.chat_id.startswith("-"), quotes=quotes,
        )  # fmt: skip


def _context(trigger: Trigger, target: Target) -> str:
    where = {
        "none": "Your reply is only recorded in the trigger's history, not sent.",
        "owner": "Your reply will be sent to the owner.",
        "terminal": "Your reply will be kept for the owner to read in the terminal.",
        "log": "Your reply will be written to PinClaw's log.",
        "file": f"Your reply will be added to the file {target.path} in the workspace.",
    }.get(target.kind, "Your reply will be sent to the chat the trigger delivers to.")
    return (
        f"This turn was started by the trigger '{trigger.name}' ({trigger.on}) that "
        f"{trigger.creator_name or trigger.creator_id} set up; nobody is typing right now. "
        f"{where} Write the message itself. Reply exactly {NO_REPLY} if there is nothing "
        "worth sending. Turns started by a trigger cannot create or change triggers or jobs."
    )
