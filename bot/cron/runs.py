"""One run of a job: an agent turn or a shell command, then delivery.

An agent job enters through the router like a chat message (so it waits its
turn behind the chat's own messages, and its tool calls meet the same policy,
approvals and limits), either in the chat's own history or in a history of its
own. A shell job runs through the policy gate again at run time, whatever was
checked when it was created. A reply of exactly ``NO_REPLY`` is not delivered.
A job whose target is not a chat (the log, a file, the owner's inbox, nowhere)
runs in a chat of its own, ``cron:job-ID``.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from zoneinfo import ZoneInfo

from bot.agent.tool_registry import ToolExecutor
from bot.core.conversation import ToolCall
from bot.core.errors import UserError
from bot.core.messages import InboundMessage, SessionKey
from bot.core.tool_api import ToolContext
from bot.cron.jobs import schedule_of
from bot.cron.outbox import Outbox
from bot.cron.schedule import describe
from bot.cron.store import CronJob, RunStatus

if TYPE_CHECKING:
    from bot.agent.loop import TurnResult
    from bot.core.channel import ChatTarget

NO_REPLY = "NO_REPLY"
_SHOWN_CHARS = 3500
_WRAPPER = re.compile(r'^<untrusted source="[^"]*">\n|\n</untrusted>$')


class TurnRunner(Protocol):
    """Where scheduled turns run: in order with the chat's own (the daemon's router)."""

    def busy(self, key: SessionKey) -> bool:
        """Whether a turn of this chat runs or waits."""
        ...

    async def run_scheduled(
        self, message: InboundMessage, *, history: SessionKey | None, origin: str, context: str
    ) -> TurnResult:
        """Run one turn for a job or the heartbeat and return its result."""
        ...


@dataclass(frozen=True, slots=True)
class Prepared:
    """What a run has to deliver, and the chat it goes to (None: not a chat)."""

    chat: ChatTarget | None
    text: str


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run went, for the history: its status, what came out, where that went."""

    status: RunStatus
    summary: str
    delivered_to: str = ""


class JobRunner:
    """Runs a job once and says how it went, for the history."""

    def __init__(
        self,
        *,
        router: TurnRunner,
        tools: ToolExecutor,
        outbox: Outbox,
        workspace: Path,
        zone: ZoneInfo,
    ) -> None:
        self._router = router
        self._tools = tools
        self._outbox = outbox
        self._workspace = workspace
        self._zone = zone

    async def prepare(self, job: CronJob) -> Prepared:
        """Run ``job``'s turn or command; what it has to deliver. ``UserError`` (a plain
        reason) when it failed."""
        chat = await self._outbox.resolve(job.target)
        if chat is not None:
            await self._outbox.ready(chat)
        message = _message(job, chat)
        if job.action == "shell":
            return Prepared(chat, await self._shell(job, message))
        return Prepared(chat, await self._turn(job, message))

    async def deliver(self, job: CronJob, prepared: Prepared) -> RunOutcome:
        """Deliver what ``prepare`` made (not a ``NO_REPLY``); ``UserError`` if it could not."""
        text = prepared.text
        if text.strip() == NO_REPLY:
            return RunOutcome("quiet", "replied NO_REPLY; nothing was sent")
        note = f"[Scheduled job #{job.id} '{job.name}' sent this message]"
        where = await self._outbox.deliver(
            job.target, prepared.chat, text, source=f"cron:{job.name}", note=note
        )
        return RunOutcome("ok", text, where)

    async def _turn(self, job: CronJob, message: InboundMessage) -> str:
        history = None if job.session_mode == "chat" else SessionKey("cron", f"job-{job.id}")
        result = await self._router.run_scheduled(
            message, history=history, origin=f"cron:{job.name}", context=_context(job)
        )
        if result.status != "done":
            raise UserError(result.text or f"the turn ended with {result.status}")
        if not result.text.strip():
            raise UserError("the model sent an empty reply")
        return result.text

    async def _shell(self, job: CronJob, message: InboundMessage) -> str:
        ctx = ToolContext(
            session=message.session,
            workspace=self._workspace,
            timezone=self._zone,
            origin=f"cron:{job.name}",
            sender_id=job.creator_id,
            sender_name=job.creator_name,
            is_direct=message.is_direct,
        )
        call = ToolCall(f"cron-{job.id}-{int(time.time())}", "shell", {"command": job.payload})
        result = await self._tools.execute(call, ctx)
        output = _WRAPPER.sub("", result.output).strip()
        if not result.ok:
            raise UserError(f"{result.error}" + (f": {output[:300]}" if output else ""))
        if output.startswith("exit code ") and not output.startswith("exit code 0 "):
            raise UserError(output[:500])
        if output.endswith(NO_REPLY):
            return NO_REPLY
        if len(output) > _SHOWN_CHARS:
            output = output[: _SHOWN_CHARS - 1] + "…"
        return f"🕒 {job.name}: `{job.payload}`\n```\n{output}\n```"


def _message(job: CronJob, chat: ChatTarget | None) -> InboundMessage:
    """The job as an inbound message in the chat it delivers to (or a chat of its own)."""
    text = f"[Scheduled job #{job.id} '{job.name}', {describe(schedule_of(job))}]\n{job.payload}"
    if chat is None:
        return InboundMessage("cron", f"job-{job.id}", job.creator_id, text, job.creator_name)
    return InboundMessage(
        chat.channel,
        chat.chat_id,
        job.creator_id,
        text,
        job.creator_name,
        thread_id=chat.thread_id,
        is_direct=job.target.is_direct if job.target.kind == "chat" else True,
    )


def _context(job: CronJob) -> str:
    where = {
        "none": "Your reply is only recorded in the job's history, not sent.",
        "owner": "Your reply will be sent to the owner.",
        "terminal": "Your reply will be kept for the owner to read in the terminal.",
        "log": "Your reply will be written to PinClaw's log.",
        "file": f"Your reply will be added to the file {job.target.path} in the workspace.",
    }.get(job.target.kind, "Your reply will be sent to the chat the job belongs to.")
    return (
        f"This turn was started by the scheduled job '{job.name}' that "
        f"{job.creator_name or job.creator_id} set up; nobody is typing right now. {where} "
        f"Write the message itself (for a reminder: the reminder). Reply exactly {NO_REPLY} "
        "if there is nothing worth sending. Scheduled turns cannot create or change jobs."
    )
