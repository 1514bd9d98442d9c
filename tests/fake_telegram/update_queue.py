"""Telegram's queue of pending updates, with getUpdates' offset semantics.

An update stays queued until it is confirmed: ``getUpdates`` with an ``offset``
higher than its ``update_id`` forgets it (Telegram keeps unconfirmed updates and
hands them out again). ``confirmed_offset`` is the highest offset seen, so a test
can tell whether a client confirmed an update. A *redelivered* update is handed
out once more even if its id is below the offset (duplicate-delivery tests).
Not thread-safe by itself: the server calls it under its lock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from tests.fake_telegram.updates import UPDATE_TYPES_BY_DEFAULT_EXCLUDED, update_kind
from tests.fake_telegram.wire import Json


@dataclass(slots=True)
class _Entry:
    update: Json
    forced: bool = False  # redelivered: ignores the offset until handed out once
    handed: bool = False


class UpdateQueue:
    """Pending updates in arrival order."""

    def __init__(self, first_update_id: int = 10_000) -> None:
        self._ids = itertools.count(first_update_id)
        self._entries: list[_Entry] = []
        self.confirmed_offset = 0
        self.allowed_updates: list[str] = []

    def add(self, body: Json) -> Json:
        """Queue a new update (``body`` without ``update_id``) and return it."""
        update = {"update_id": next(self._ids), **body}
        self._entries.append(_Entry(update))
        return update

    def redeliver(self, update: Json) -> None:
        """Queue an update again, as is, for one more delivery."""
        self._entries.append(_Entry(update, forced=True))

    def confirm(self, offset: int) -> None:
        """Forget every update below ``offset`` (a negative offset keeps the last -offset)."""
        if offset < 0:
            keep = self._entries[offset:]
            if keep:
                self.confirm(keep[0].update["update_id"])
            return
        self.confirmed_offset = max(self.confirmed_offset, offset)
        self._entries = [
            e
            for e in self._entries
            if e.update["update_id"] >= offset or (e.forced and not e.handed)
        ]

    def take(self, limit: int) -> list[Json]:
        """Up to ``limit`` queued updates of the allowed types, oldest first (not removed)."""
        picked = [e for e in self._entries if self._allowed(e.update)][:limit]
        for entry in picked:
            entry.handed = True
        return [e.update for e in picked]

    def set_allowed(self, allowed: Iterable[str] | None) -> None:
        """Remember ``allowed_updates`` (None keeps the previous setting, as Telegram does)."""
        if allowed is not None:
            self.allowed_updates = list(allowed)

    def pending(self) -> list[Json]:
        """Every update not confirmed yet."""
        return [e.update for e in self._entries]

    def has_ready(self) -> bool:
        """Whether ``take`` would return something."""
        return any(self._allowed(e.update) for e in self._entries)

    def next_ready(self) -> Json | None:
        """The oldest update ``take`` would return (for webhook delivery)."""
        return next((e.update for e in self._entries if self._allowed(e.update)), None)

    def acknowledge(self, update: Json) -> None:
        """Forget one delivered update (a webhook answered 2xx)."""
        for index, entry in enumerate(self._entries):
            if entry.update is update:
                del self._entries[index]
                return

    def clear(self) -> None:
        """Drop every pending update (``drop_pending_updates``)."""
        self._entries.clear()

    def _allowed(self, update: Json) -> bool:
        kind = update_kind(update)
        if self.allowed_updates:
            return kind in self.allowed_updates
        return kind not in UPDATE_TYPES_BY_DEFAULT_EXCLUDED
