"""What the chat page shows and how it changes: the entries, and the events that change them.

An ``Entry`` is one bubble: a message the owner sent, a reply (``draft`` while it is
written, ``bot`` once delivered), an approval request with its buttons (and the
record it becomes), a short ``notice``. Every change to an entry publishes an
event with the entry's whole new state, so a page that missed a change only needs
the next one; ``typing`` events say when a reply is being written.

Events are numbered; ``wait`` returns those after a number, and says ``stale``
when they are no longer kept (or the number is from before a restart, told by the
feed's ``epoch``): the page then reloads, which shows everything afresh. Nothing
here is stored: what the model remembers is in the history, and the page reads
older messages from there (``channels.web.transcript``).
"""

from __future__ import annotations

import asyncio
import html
import itertools
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from bot.core.messages import Button
from channels.web.format import to_html

EntryKind = Literal["user", "bot", "draft", "approval", "notice"]
KEPT_EVENTS = 200  # a page that falls further behind reloads


@dataclass(frozen=True, slots=True)
class Entry:
    """One bubble of the chat page; ``text`` is markdown (a person's text is shown as typed)."""

    ref: str
    kind: EntryKind
    text: str
    at: float
    buttons: tuple[Button, ...] = ()
    progress: bool = False  # a draft showing what the agent does, not reply text

    @property
    def html(self) -> str:
        """The entry's text as escaped HTML."""
        if self.kind == "user":
            return html.escape(self.text, quote=True)
        return to_html(self.text)

    def as_data(self) -> dict[str, Any]:
        """The entry as the event stream sends it."""
        return {
            "ref": self.ref,
            "kind": self.kind,
            "html": self.html,
            "text": self.text,
            "at": self.at,
            "progress": self.progress,
            "buttons": [{"label": b.label, "action": b.action_id} for b in self.buttons],
        }


@dataclass(frozen=True, slots=True)
class FeedEvent:
    """One change: ``entry`` (added or changed), ``remove`` or ``typing``."""

    id: int
    name: Literal["entry", "remove", "typing"]
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Batch:
    """What ``wait`` found: events, or ``stale`` (reload the page), or ``closed``."""

    events: tuple[FeedEvent, ...] = ()
    stale: bool = False
    closed: bool = False


class Feed:
    """The web chat's entries and change events, in memory, for every open page."""

    def __init__(self, keep_entries: int, clock: Callable[[], float] = time.time) -> None:
        self.epoch = secrets.token_hex(4)  # tells this run's event numbers from an earlier one's
        self._keep_entries = keep_entries
        self._clock = clock
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._events: deque[FeedEvent] = deque(maxlen=KEPT_EVENTS)
        self._ids = itertools.count(1)
        self._last = 0
        self._refs = itertools.count(1)
        self._bell = asyncio.Event()  # set, and replaced, at every change
        self._closed = False
        self._began = clock()  # the feed holds everything shown since, until it is trimmed
        self._trimmed = False

    @property
    def last_id(self) -> int:
        """The number of the latest event (0 before the first)."""
        return self._last

    def entries(self) -> list[Entry]:
        """The entries, oldest first."""
        return list(self._entries.values())

    def bring_down(self, ref: str) -> None:
        """Move entry ``ref`` to the end if only PinClaw's own entries (an approval request,
        a notice) came after it; after a message of the owner's it stays where it is."""
        refs = list(self._entries)
        if ref not in self._entries or refs[-1] == ref:
            return
        later = refs[refs.index(ref) + 1 :]
        if any(self._entries[other].kind == "user" for other in later):
            return
        self._entries.move_to_end(ref)
        self._publish("remove", {"ref": ref})  # the page appends it anew, at the end
        self._publish("entry", self._entries[ref].as_data())

    def since(self) -> float | None:
        """Since when the feed holds all the chat showed (None without entries): what came
        before is read from the history. Until entries are trimmed that is when the feed
        began, so a reply to a message from before a restart (written to the history just
        before it is shown) is not shown twice."""
        first = next(iter(self._entries.values()), None)
        if first is None:
            return None
        return first.at if self._trimmed else min(self._began, first.at)

    def add(
        self,
        kind: EntryKind,
        text: str,
        buttons: tuple[Button, ...] = (),
        *,
        progress: bool = False,
    ) -> Entry:
        """Add an entry at the end; returns it."""
        ref = f"w{next(self._refs)}"
        entry = Entry(ref, kind, text, self._clock(), buttons, progress)
        self._entries[entry.ref] = entry
        self._trim()
        self._publish("entry", entry.as_data())
        return entry

    def change(self, ref: str, **changes: Any) -> Entry | None:
        """Change an entry in place (its kind, text, buttons); None if it is gone."""
        entry = self._entries.get(ref)
        if entry is None:
            return None
        entry = replace(entry, **changes)
        self._entries[ref] = entry
        self._publish("entry", entry.as_data())
        return entry

    def remove(self, ref: str) -> None:
        """Take an entry off the page."""
        if self._entries.pop(ref, None) is not None:
            self._publish("remove", {"ref": ref})

    def typing(self, on: bool) -> None:
        """Say whether a reply is being written."""
        self._publish("typing", {"on": on})

    async def wait(self, after: int, epoch: str, timeout_s: float) -> Batch:
        """The events after number ``after`` (of feed ``epoch``), waiting up to ``timeout_s``
        for one; an empty batch when none came."""
        if epoch != self.epoch or after > self._last:
            return Batch(stale=True)
        try:
            async with asyncio.timeout(timeout_s):
                while not self._closed and self._last <= after:
                    await self._bell.wait()
        except TimeoutError:
            return Batch()
        if self._closed:
            return Batch(closed=True)
        oldest = self._events[0].id if self._events else self._last + 1
        if after + 1 < oldest:
            return Batch(stale=True)
        return Batch(tuple(event for event in self._events if event.id > after))

    def close(self) -> None:
        """End every wait (the channel stops); idempotent."""
        self._closed = True
        self._ring()

    def reopen(self) -> None:
        """Take waits again (the channel runs again)."""
        self._closed = False

    def _publish(self, name: Literal["entry", "remove", "typing"], data: dict[str, Any]) -> None:
        self._last = next(self._ids)
        self._events.append(FeedEvent(self._last, name, data))
        self._ring()

    def _ring(self) -> None:
        bell, self._bell = self._bell, asyncio.Event()
        bell.set()

    def _trim(self) -> None:
        """Keep at most ``keep_entries``, starting with a message the owner sent, so the
        history shows everything before it and nothing twice (``since``)."""
        if len(self._entries) <= self._keep_entries:
            return
        self._trimmed = True
        while len(self._entries) > self._keep_entries:
            self._entries.popitem(last=False)
        if any(entry.kind == "user" for entry in self._entries.values()):
            while next(iter(self._entries.values())).kind != "user":
                self._entries.popitem(last=False)
