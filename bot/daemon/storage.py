"""Writes refused for lack of space: the daemon's "data folder full" condition.

When the database answers "database or disk is full" (SQLITE_FULL), or another
file PinClaw writes fails with ENOSPC or EDQUOT, the part that saw it calls
``StorageWatch.failed``. The first failure of an episode records the condition
(``/healthz`` turns 503 with it, ``pinclaw status`` shows it, the metrics count
it) and tells the owner once, through the first owner's chat that can still
send (tried again every minute while none does). While the folder is full, a
probe writes to the database every ``PROBE_EVERY_S``; once that works and some
space is free, the condition clears, whatever waited for it goes on, and a
notice no chat took is put in the owner's inbox. Waiting loses nothing: the
router holds a message until it can be stored (see ``Router.put``).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from bot.approvals.approvers import Approvers, owner_chats
from bot.core import metrics
from bot.core.channel import Channel, DeliveryError
from bot.core.messages import OutboundMessage
from bot.store.db import Database
from bot.store.kv import KeyValueStore
from bot.store.owner_inbox import OwnerInbox

log = logging.getLogger(__name__)

SQLITE_FULL = 13
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
PROBE_EVERY_S = 2.0
NOTICE_RETRY_S = 60.0  # how often a notice no chat took is tried again while the folder is full
HEADROOM_BYTES = 256 * 1024  # free space a probe wants before it calls the folder writable again

INBOX_NOTE = "(No chat could take this notice then; there is space again now.)"

T = TypeVar("T")
Probe = Callable[[], Awaitable[None]]
TellOwner = Callable[[str], Awaitable[bool]]


def full_reason(exc: BaseException | None) -> str | None:
    """Why ``exc`` (or what caused it) is a write refused for lack of space; None if it is not."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, sqlite3.OperationalError) and (
            getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL
            or "database or disk is full" in str(exc)
        ):
            return "database or disk is full"
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
            return os.strerror(exc.errno or 0).lower()
        exc = exc.__cause__ or exc.__context__
    return None


@dataclass(frozen=True, slots=True)
class StorageFull:
    """One episode of a full data folder."""

    folder: str
    reason: str
    since: float

    def sentence(self) -> str:
        """The line ``/healthz`` and ``pinclaw status`` show."""
        return f"data folder full: {self.folder} ({self.reason})"

    def notice(self) -> str:
        """What the owner is told, once per episode."""
        return (
            f"I cannot save anything: my data folder {self.folder} is full ({self.reason}). "
            "New messages wait until they can be stored and are answered then; nothing is "
            "lost. Please free some space on that disk."
        )


class StorageWatch:
    """The condition, its probe and the owner's notice, for one running daemon."""

    def __init__(
        self,
        folder: Path,
        *,
        probe: Probe,
        tell_owner: TellOwner,
        owner_inbox: OwnerInbox,
        probe_every_s: float = PROBE_EVERY_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.folder = folder
        self._probe = probe
        self._tell_owner = tell_owner
        self._inbox = owner_inbox
        self._every_s = probe_every_s
        self._clock = clock
        self.condition: StorageFull | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._told = False  # the owner heard of this episode
        self._notice_due = 0.0
        self._task: asyncio.Task[None] | None = None

    def failed(self, exc: BaseException) -> bool:
        """Record ``exc`` if it is a write refused for lack of space; whether it was."""
        reason = full_reason(exc)
        if reason is None:
            return False
        first = self.condition is None
        metrics.count_storage_refused(first=first)
        if first:
            self._begin(reason)
        return True

    async def persist(self, write: Callable[[], Awaitable[T]], waiting: str = "") -> T:
        """Run ``write``; while it is refused for lack of space, wait for space and run it
        again (``waiting`` is logged each time it has to wait)."""
        while True:
            try:
                return await write()
            except Exception as exc:
                if not self.failed(exc):
                    raise
            if waiting:
                log.warning("%s", waiting)
            await self.writable()

    async def writable(self) -> None:
        """Return once writes work (at once when they do)."""
        await self._writable.wait()

    async def stop(self) -> None:
        """Stop probing (idempotent)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def _begin(self, reason: str) -> None:
        now = self._clock()
        self.condition = StorageFull(str(self.folder), reason, now)
        self._writable.clear()
        self._told, self._notice_due = False, now
        log.error("%s; messages wait until they can be stored", self.condition.sentence())
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="storage probe")

    async def _watch(self) -> None:
        """Tell the owner, probe until writes work, then clear the condition."""
        while (condition := self.condition) is not None:
            if not self._told and self._clock() >= self._notice_due:
                self._notice_due = self._clock() + NOTICE_RETRY_S
                await self._notify(condition)
            await asyncio.sleep(self._every_s)
            if await self._works():
                await self._end(condition)

    async def _notify(self, condition: StorageFull) -> None:
        try:
            self._told = await self._tell_owner(condition.notice())
        except Exception as exc:  # a notice about a failure must not fail in turn
            log.warning("could not tell the owner that the data folder is full: %s", exc)
        if self._told:
            log.info("told the owner that the data folder is full")

    async def _works(self) -> bool:
        try:
            free = await asyncio.to_thread(_free_bytes, self.folder)
            if free < HEADROOM_BYTES:
                return False
            await self._probe()
        except Exception as exc:
            if full_reason(exc) is None:
                log.warning("the storage probe failed: %s", exc)
            return False
        return True

    async def _end(self, condition: StorageFull) -> None:
        self.condition = None
        metrics.storage_writable()
        log.warning(
            "writes to %s work again (full for %.0f s)",
            condition.folder,
            self._clock() - condition.since,
        )
        self._writable.set()
        if not self._told:
            try:
                await self._inbox.add("alert", f"{condition.notice()} {INBOX_NOTE}")
            except Exception as exc:
                log.warning("could not keep the full-disk notice in the owner's inbox: %s", exc)
            else:
                self._told = self.condition is None  # a new episode is told on its own
                log.info("no chat took the full-disk notice; it is in the owner's inbox")


def _free_bytes(folder: Path) -> int:
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


def owner_notifier(channels: Mapping[str, Channel], approvers: Approvers) -> TellOwner:
    """Sends a text to the first owner's private chat that takes it (nothing is stored:
    the disk may be full); True once one did."""

    async def tell(text: str) -> bool:
        for _surface, chat in await owner_chats(channels, approvers):
            message = OutboundMessage(chat.channel, chat.chat_id, text, chat.thread_id)
            try:
                await channels[chat.channel].send(message)
            except DeliveryError as exc:
                log.warning("%s did not take the full-disk notice: %s", chat.channel, exc)
                continue
            return True
        return False

    return tell


async def storage_watch(
    data_dir: Path,
    db: Database,
    state: KeyValueStore,
    channels: Mapping[str, Channel],
    approvers: Approvers,
) -> StorageWatch:
    """The daemon's watch: it probes with a write to the key-value table."""
    inbox = OwnerInbox(db)
    await inbox.setup()

    async def probe() -> None:
        await state.set("pinclaw", "storage probe", str(time.time()))

    return StorageWatch(
        data_dir, probe=probe, tell_owner=owner_notifier(channels, approvers), owner_inbox=inbox
    )
