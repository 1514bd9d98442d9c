"""Edits of messages people sent: a fixed typo before the turn, a correction after it.

Each platform tells PinClaw when a person edits a message (Telegram
``edited_message``, Discord ``MESSAGE_UPDATE``, Slack ``message_changed``). The
adapter makes it an ``InboundMessage`` whose ``edit_of`` names the original and
whose own ``message_id`` is unique per edit, so a redelivered edit is stored and
handled once. After the access decision, ``Edits.take`` decides what it does:

- the original was never stored (sent before PinClaw ran, or not addressed to
  it): the edit is ignored, with a log line;
- the original or the new text is a chat command: ignored (commands run once);
- the text and files are the same as the latest version: ignored;
- the edit was stored before (an older edit delivered again): ignored, so it
  cannot put back a text that a later edit replaced;
- the original's turn has not started (held as a possible split paste, or
  waiting behind another turn of its chat): its text is replaced, in memory and
  in the inbound store (a crash replays the new text), and the edit is stored as
  handled ("merged into its original"): one answer, to the new text. An earlier
  correction still waiting is updated the same way;
- otherwise (the turn runs or has ended, however long ago): the edit is a turn
  of its own, queued after whatever runs in the chat and answered as a reply to
  the edited message. The model reads it as a correction (``correction``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from bot.core.chat_commands import parse_command
from bot.core.messages import InboundMessage, quote_excerpt
from bot.daemon.quoting import with_quote
from bot.daemon.sessions import Job, SessionRunner
from bot.daemon.storage import StorageWatch
from bot.store.inbound import InboundStore, StoredRow

log = logging.getLogger(__name__)

MERGED = "merged into its original"
T = TypeVar("T")


class Holding(Protocol):
    """What holds messages before their turn is queued (the split-paste gatherer)."""

    def replace(self, original_id: str, edited: InboundMessage) -> bool:
        """Give a held message the edited text; False when it is not held."""
        ...


def correction(before: str, now: str) -> str:
    """What the model reads for an edit made after its message was answered."""
    if not before.strip():
        return f"[The person edited their earlier message.]\n(edited) {now}"
    return (
        f"[The person edited their earlier message. Before: «{quote_excerpt(before)}»]\n"
        f"(edited) {now}"
    )


def with_edit(message: InboundMessage, edit: InboundMessage) -> InboundMessage:
    """``message`` (the original, or a correction waiting for its turn) as ``edit`` left it:
    an edit carries the whole new message, its files included."""
    return dataclasses.replace(message, text=edit.text, attachments=edit.attachments)


class Edits:
    """Decides what each edit does, and shows the model a correction as one."""

    def __init__(
        self, inbound: InboundStore, runner: SessionRunner, storage: StorageWatch | None = None
    ) -> None:
        self._inbound = inbound
        self._runner = runner
        self._storage = storage

    async def take(self, edit: InboundMessage, holding: Holding | None = None) -> Job | None:
        """Handle an accepted edit; the job to dispatch when it is answered as a correction."""
        assert edit.edit_of is not None
        where = f"{edit.edit_of} on {edit.channel}"
        original = await self._inbound.find(edit.channel, edit.edit_of)
        if original is None:
            log.info("ignored an edit of message %s: PinClaw never answered it", where)
            return None
        if parse_command(original.message.text) or parse_command(edit.text):
            log.info("ignored an edit of message %s: commands are not run again", where)
            return None
        versions = [original, *await self._inbound.edits_of(original)]
        if _same(versions[-1].message, edit):
            log.info("ignored an edit of message %s: nothing changed", where)
            return None
        # An older edit delivered again must not undo a later one waiting for its turn.
        if edit.message_id and await self._inbound.find(edit.channel, edit.message_id):
            log.info("ignored a second delivery of edit %s on %s", edit.message_id, edit.channel)
            return None
        row_id = self._replace_waiting(original, edit, holding)
        if row_id is not None:
            stored = next((v.message for v in versions if v.id == row_id), original.message)
            await self._write(lambda: self._inbound.replace(row_id, with_edit(stored, edit)))
            await self._write(lambda: self._inbound.record(edit, "answered", MERGED))
            log.info("message %s was edited before its turn: the new text is answered", where)
            return None
        row = await self._write(lambda: self._inbound.record(edit))
        if row is None:
            log.info("ignored a second delivery of edit %s on %s", edit.message_id, edit.channel)
            return None
        log.info("message %s was edited after its turn: answering the correction", where)
        # Answered as a reply to the edited message (the edit's own id is the store's key).
        return Job(row, dataclasses.replace(edit, message_id=edit.edit_of))

    async def for_model(self, job: Job) -> Job:
        """The job with its message as the model reads it: a correction shows the text
        before the edit, and a reply the message it answers (``bot.daemon.quoting``)."""
        message = job.message
        if message.edit_of is not None:
            before = ""
            original = await self._inbound.find(message.channel, message.edit_of)
            if original is not None:
                earlier = await self._inbound.edits_of(original, before=job.row_id)
                before = (earlier[-1] if earlier else original).message.text
            message = dataclasses.replace(message, text=correction(before, message.text))
        message = with_quote(message)
        return job if message is job.message else dataclasses.replace(job, message=message)

    def _replace_waiting(
        self, original: StoredRow, edit: InboundMessage, holding: Holding | None
    ) -> int | None:
        """Edit the message in memory if its turn has not started; the row it came from."""
        key = original.message.message_id or ""
        # Only a message not yet answered may be held (a correction never replaces it).
        pending = holding if original.status == "pending" else None
        if pending is not None and pending.replace(key, with_edit(original.message, edit)):
            return original.id
        job = self._runner.replace_waiting(
            original.message.session, key, lambda waiting: with_edit(waiting, edit)
        )
        return None if job is None else job.row_id

    async def _write(self, write: Callable[[], Awaitable[T]]) -> T:
        """A store write; while the data folder is full, wait for space (as ``put`` does)."""
        if self._storage is None:
            return await write()
        return await self._storage.persist(write, "an edit waits for space to be stored")


def _same(latest: InboundMessage, edit: InboundMessage) -> bool:
    """Whether an edit changes nothing the model reads (Discord's link previews, a redelivery)."""
    files = [(a.name, a.size) for a in latest.attachments]
    return latest.text == edit.text and files == [(a.name, a.size) for a in edit.attachments]
