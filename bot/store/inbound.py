"""The inbound store: every accepted message is written here before it is acknowledged.

A message is stored with its platform id, so a second delivery of the same
message (a Discord RESUME replay, a Slack retry, a webhook retry) is recognised
and answered once. Its status moves from ``pending`` to ``answered`` (or
``failed``, ``stopped``, ``skipped``); what is still ``pending`` when the daemon
starts was interrupted and is answered then, unless it is too old.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Literal

from bot.core.messages import InboundMessage
from bot.store.db import Database

InboundStatus = Literal["pending", "answered", "failed", "stopped", "skipped"]

MIGRATIONS = [
    """
    CREATE TABLE inbound (
        id INTEGER PRIMARY KEY,
        channel TEXT NOT NULL,
        message_key TEXT NOT NULL,
        session_key TEXT NOT NULL,
        payload TEXT NOT NULL,
        received_at REAL NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',
        handled_at REAL,
        note TEXT,
        UNIQUE (channel, message_key)
    );
    CREATE INDEX inbound_pending ON inbound (status, id);
    """,
]


@dataclass(frozen=True, slots=True)
class StoredInbound:
    """A stored message and its row id."""

    id: int
    message: InboundMessage


class InboundStore:
    """Durable record of accepted inbound messages."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the table."""
        await self._db.migrate("inbound", MIGRATIONS)

    async def record(self, message: InboundMessage) -> int | None:
        """Store ``message`` (committed); return its row id, or None if it was stored before."""
        key = message.message_id or f"local-{time.time_ns()}"
        row = (message.channel, key, str(message.session), message.to_json(), message.received_at)

        def insert(conn: sqlite3.Connection) -> int | None:
            cursor = conn.execute(
                "INSERT INTO inbound (channel, message_key, session_key, payload, received_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel, message_key) DO NOTHING",
                row,
            )
            return cursor.lastrowid if cursor.rowcount == 1 else None

        return await self._db.transaction(insert)

    async def mark(self, row_id: int, status: InboundStatus, note: str = "") -> None:
        """Record how a message was handled."""
        values = (status, time.time(), note or None, row_id)

        def update(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE inbound SET status = ?, handled_at = ?, note = ? WHERE id = ?", values
            )

        await self._db.transaction(update)

    async def pending(self) -> list[StoredInbound]:
        """Messages accepted but not yet handled, oldest first."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT id, payload FROM inbound WHERE status = 'pending' ORDER BY id"
        )
        return [StoredInbound(int(r[0]), InboundMessage.from_json(str(r[1]))) for r in rows]

    async def status_of(self, row_id: int) -> str | None:
        """The status of one stored message (None if there is no such row)."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT status FROM inbound WHERE id = ?", (row_id,)
        )
        return next((str(row[0]) for row in rows), None)
