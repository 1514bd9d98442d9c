"""The owner's inbox: messages for the owner that no chat received.

Scheduled jobs that deliver to ``terminal:owner`` land here, and so does
anything meant for the owner's private chat when there is no such chat (a
daemon without chat channels, an owner who never wrote to the bot) or when
sending to it failed for good. ``pinclaw inbox`` shows the unread ones and marks
them read; ``pinclaw chat`` says at its start how many wait.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from bot.store.db import Database

MIGRATIONS = [
    """
    CREATE TABLE owner_inbox (
        id INTEGER PRIMARY KEY,
        created_at REAL NOT NULL,
        source TEXT NOT NULL,
        text TEXT NOT NULL,
        read_at REAL
    );
    CREATE INDEX owner_inbox_unread ON owner_inbox (read_at, id);
    """,
]
READ_KEPT = 1000  # read messages kept; unread ones are never dropped


@dataclass(frozen=True, slots=True)
class InboxMessage:
    """One message in the owner's inbox."""

    id: int
    created_at: float
    source: str
    text: str
    read_at: float | None = None


class OwnerInbox:
    """Adds, lists and marks the owner's undelivered and terminal messages."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the table."""
        await self._db.migrate("owner_inbox", MIGRATIONS)

    async def add(self, source: str, text: str) -> int:
        """Keep ``text`` from ``source`` ("cron:water plants", "heartbeat", "alert"); its id."""
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "INSERT INTO owner_inbox (created_at, source, text) VALUES (?, ?, ?)",
                (time.time(), source, text),
            )
            await conn.execute(
                "DELETE FROM owner_inbox WHERE read_at IS NOT NULL AND id NOT IN "
                "(SELECT id FROM owner_inbox WHERE read_at IS NOT NULL ORDER BY id DESC LIMIT ?)",
                (READ_KEPT,),
            )
        return int(cursor.lastrowid or 0)

    async def unread(self) -> list[InboxMessage]:
        """Every unread message, oldest first."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT id, created_at, source, text, read_at FROM owner_inbox "
            "WHERE read_at IS NULL ORDER BY id"
        )
        return [InboxMessage(*row) for row in rows]

    async def latest(self, limit: int) -> list[InboxMessage]:
        """The newest ``limit`` messages, read or not, oldest first."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT id, created_at, source, text, read_at FROM owner_inbox "
            "ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [InboxMessage(*row) for row in reversed(list(rows))]

    async def count_unread(self) -> int:
        """How many messages wait to be read."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT COUNT(*) FROM owner_inbox WHERE read_at IS NULL"
        )
        return int(next(iter(rows))[0])

    async def mark_read(self, ids: Sequence[int]) -> int:
        """Mark these messages read (those still unread); how many changed."""
        if not ids:
            return 0
        marks = ", ".join("?" * len(ids))
        async with self._db.write() as conn:
            cursor = await conn.execute(
                f"UPDATE owner_inbox SET read_at = ? WHERE read_at IS NULL AND id IN ({marks})",
                (time.time(), *ids),
            )
        return cursor.rowcount

    async def clear(self) -> int:
        """Remove every message, read or not; how many went."""
        async with self._db.write() as conn:
            cursor = await conn.execute("DELETE FROM owner_inbox")
        return cursor.rowcount
