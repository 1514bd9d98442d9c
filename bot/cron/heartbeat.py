"""The heartbeat: every ``heartbeat.interval`` the agent works through HEARTBEAT.md.

It is built to stay quiet. With no tasks in the file no model call is made; a
reply that begins or ends with ``HEARTBEAT_OK`` is not sent; outside the active
hours a tick is skipped, not queued; and a tick that finds its chat busy with a
person's turn skips rather than interrupts. The heartbeat keeps a history of
its own; what it does send is also written into the chat it was sent to. Its
findings go to the owner (their private chat, else their inbox) unless
``heartbeat.target`` names another place.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, time
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from bot.config.schedule import HeartbeatConfig
from bot.core.channel import ChatTarget
from bot.core.errors import UserError
from bot.core.messages import InboundMessage, SessionKey
from bot.cron.jobs import parse_target
from bot.cron.outbox import Outbox
from bot.cron.store import Target

if TYPE_CHECKING:
    from bot.cron.runs import TurnRunner

log = logging.getLogger(__name__)

OK = "HEARTBEAT_OK"
HISTORY = SessionKey("heartbeat", "main")
TEMPLATE = """\
# Heartbeat

<!--
PinClaw reads this file every heartbeat (heartbeat.interval, 30 minutes by
default) and works through the tasks below. Write one task per line, e.g.

- Check the greenhouse temperature; tell me if it is below 5 °C.
- Look at todo.md and remind me of anything due today.

With no tasks here the heartbeat does nothing and costs nothing. When all is
well the agent answers HEARTBEAT_OK and you hear nothing.
-->
"""
_COMMENTS = re.compile(r"<!--.*?-->", re.DOTALL)


def tasks_in(text: str) -> str:
    """The file's tasks (comments, headings and blank lines removed); "" if none."""
    lines = []
    for line in _COMMENTS.sub("", text).splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and stripped not in ("-", "*", "- [ ]"):
            lines.append(line.rstrip())
    return "\n".join(lines)


def is_quiet(reply: str) -> bool:
    """Whether a heartbeat reply means "nothing to report"."""
    text = reply.strip().strip("*_`. ").strip()
    return not text or text.startswith(OK) or text.endswith(OK) or text == "NO_REPLY"


def in_active_hours(spec: str, now: datetime) -> bool:
    """Whether ``now`` (in the heartbeat's zone) falls in "HH:MM-HH:MM" (may wrap midnight)."""
    if not spec:
        return True
    start_text, end_text = spec.replace(" ", "").split("-")
    start, end = _clock(start_text), _clock(end_text)
    current = now.time().replace(second=0, microsecond=0, tzinfo=None)
    if start <= end:
        return start <= current < end
    return current >= start or current < end


def _clock(text: str) -> time:
    hours, minutes = (int(part) for part in text.split(":"))
    return time(23, 59, 59) if hours == 24 else time(hours, minutes)


class Heartbeat:
    """One tick of the heartbeat, and the file it reads."""

    def __init__(
        self,
        *,
        settings: HeartbeatConfig,
        router: TurnRunner,
        outbox: Outbox,
        workspace: Path,
        zone: ZoneInfo,
    ) -> None:
        self._settings = settings
        self._router = router
        self._outbox = outbox
        self._file = workspace / settings.file
        self._zone = ZoneInfo(settings.timezone) if settings.timezone else zone
        self._target = parse_target(settings.target) if settings.target else Target("owner")

    def ensure_file(self) -> None:
        """Create HEARTBEAT.md with the template if it is missing."""
        if not self._file.exists():
            self._file.write_text(TEMPLATE, encoding="utf-8")

    async def tick(self) -> str:
        """Run one heartbeat; return what happened (for the log and tests)."""
        if not in_active_hours(self._settings.active_hours, datetime.now(self._zone)):
            return _said("skipped: outside the active hours")
        try:
            tasks = tasks_in(self._file.read_text(encoding="utf-8"))
        except OSError as exc:
            return _said(f"skipped: cannot read {self._file.name}: {exc.strerror}")
        if not tasks:
            return _said(f"skipped: no tasks in {self._file.name}")
        try:
            chat = await self._outbox.resolve(self._target)
        except UserError as exc:
            return _said(f"skipped: {exc}")
        if self._target.kind == "none":
            return _said("skipped: the target is none")
        where = chat or ChatTarget(HISTORY.channel, HISTORY.chat_id)  # no chat: one of its own
        message = InboundMessage(
            where.channel, where.chat_id, "heartbeat", _prompt(tasks), "heartbeat",
            thread_id=where.thread_id,
        )  # fmt: skip
        if self._router.busy(message.session):
            return _said("skipped: the chat is busy with a turn")
        result = await self._router.run_scheduled(
            message, history=HISTORY, origin="heartbeat", context=_CONTEXT
        )
        if result.status != "done":
            return _said(f"failed: {result.text}")
        if is_quiet(result.text):
            return _said("all well (HEARTBEAT_OK); nothing sent")
        try:
            sent_to = await self._outbox.deliver(
                self._target, chat, result.text.strip(), source="heartbeat",
                note="[Heartbeat check]",
            )  # fmt: skip
        except UserError as exc:
            return _said(f"failed: {exc}")
        return _said(f"sent a message to {sent_to}")


_CONTEXT = (
    "This is a heartbeat: a periodic check nobody typed. Work through the tasks. If "
    f"nothing needs the user's attention, reply exactly {OK}. Otherwise write only what "
    "they need to know; it will be sent to them."
)


def _prompt(tasks: str) -> str:
    return f"[Heartbeat] The tasks in HEARTBEAT.md:\n{tasks}"


def _said(outcome: str) -> str:
    log.info("heartbeat %s", outcome)
    return outcome
