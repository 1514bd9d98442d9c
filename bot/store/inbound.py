"""The inbound store: every accepted message is written here before it is acknowledged.

A message is stored with its platform id, so a second delivery of the same
message (a Discord RESUME replay, a Slack retry, a webhook retry) is recognised
and answered once. Its status moves from ``pending`` to ``answered`` (or
``failed``, ``stopped``, ``skipped``); what is still ``pending`` when the daemon
starts was interrupted and is answered then, unless it is too old.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Sequence
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


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A stored message, its row id and its status."""

    id: int
    message: InboundMessage
    status: str


class InboundStore:
    """Durable record of accepted inbound messages."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the table."""
        await self._db.migrate("inbound", MIGRATIONS)

    async def record(
        self, message: InboundMessage, status: InboundStatus = "pending", note: str = ""
    ) -> int | None:
        """Store ``message`` (committed); return its row id, or None if it was stored before.

        A message handled as it arrives (an edit merged into its original) is stored
        with its outcome at once: never pending, so never answered after a restart.
        """
        key = message.message_id or f"local-{time.time_ns()}"
        row = (message.channel, key, str(message.session), message.to_json(), message.received_at)
        handled = None if status == "pending" else time.time()

        def insert(conn: sqlite3.Connection) -> int | None:
            cursor = conn.execute(
                "INSERT INTO inbound (channel, message_key, session_key, payload, received_at, "
                "status, handled_at, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (channel, message_key) DO NOTHING",
                (*row, status, handled, note or None),
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

    async def find(self, channel: str, message_key: str) -> StoredRow | None:
        """The stored message with this platform id on ``channel``, with its status."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT id, payload, status FROM inbound WHERE channel = ? AND message_key = ?",
            (channel, message_key),
        )
        return next(
            (StoredRow(int(r[0]), InboundMessage.from_json(str(r[1])), str(r[2])) for r in rows),
            None,
        )

    async def replace(self, row_id: int, message: InboundMessage) -> None:
        """Store ``message`` as the new payload of a row (a waiting message was edited), so
        a restart answers what the person wrote last."""
        values = (message.to_json(), row_id)

        def update(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE inbound SET payload = ? WHERE id = ?", values)

        await self._db.transaction(update)

    async def edits_of(self, original: StoredRow, before: int | None = None) -> list[StoredRow]:
        """The stored edits of ``original`` (rows after it, in its chat), oldest first; only
        those stored before row ``before`` when it is given."""
        key = original.message.message_id or ""
        # The payload is ``to_json``'s: the field is written exactly like this. The text
        # test only narrows the scan; each payload is read to be sure.
        needle = f'"edit_of": {json.dumps(key, ensure_ascii=False)}'
        last = before if before is not None else 2**62
        rows = await self._db.conn.execute_fetchall(
            "SELECT id, payload, status FROM inbound WHERE id > ? AND id < ? AND channel = ? "
            "AND session_key = ? AND instr(payload, ?) > 0 ORDER BY id",
            (original.id, last, original.message.channel, str(original.message.session), needle),
        )
        found = [StoredRow(int(r[0]), InboundMessage.from_json(str(r[1])), str(r[2])) for r in rows]
        return [row for row in found if row.message.edit_of == key]

    async def last_from(self, accounts: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
        """Which of ``accounts`` (channel, sender id) sent the latest stored message; None
        if none of them ever wrote. Read from the newest row back, so it stops early."""
        if not accounts:
            return None
        match = " OR ".join(
            ["(channel = ? AND json_extract(payload, '$.sender_id') = ?)"] * len(accounts)
        )
        rows = await self._db.conn.execute_fetchall(
            f"SELECT channel, json_extract(payload, '$.sender_id') FROM inbound WHERE {match} "
            "ORDER BY id DESC LIMIT 1",
            [value for account in accounts for value in account],
        )
        return next(((str(row[0]), str(row[1])) for row in rows), None)


def sort_pending(
    pending: Sequence[StoredInbound], channels: Collection[str], max_age_s: float
) -> tuple[dict[str, list[StoredInbound]], list[tuple[StoredInbound, str]]]:
    """Messages left pending by a stop or crash: those to answer, by channel, and those
    skipped, with why (a channel no longer enabled, older than ``max_age_s``; 0: no limit)."""
    answer: dict[str, list[StoredInbound]] = {}
    skipped: list[tuple[StoredInbound, str]] = []
    for stored in pending:
        message = stored.message
        age = message.age()
        if message.channel not in channels:
            skipped.append((stored, "its channel is not enabled"))
        elif max_age_s and age > max_age_s:
            skipped.append((stored, f"it is {age:.0f} s old"))
        else:
            answer.setdefault(message.channel, []).append(stored)
    return answer, skipped
