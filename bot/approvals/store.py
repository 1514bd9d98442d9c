"""Approval requests and "always allow" rules, stored so they outlive a restart."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bot.store.db import Database

Status = Literal["pending", "once", "always", "denied", "expired"]

MIGRATIONS = [
    """
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        thread_id TEXT,
        asked_channel TEXT NOT NULL,
        asked_chat_id TEXT NOT NULL,
        asked_thread_id TEXT,
        message_ref TEXT,
        sender_id TEXT NOT NULL,
        origin TEXT NOT NULL,
        tool TEXT NOT NULL,
        summary TEXT NOT NULL,
        rule_key TEXT NOT NULL,
        risk TEXT NOT NULL,
        reason TEXT NOT NULL,
        text TEXT NOT NULL,
        inbound_id INTEGER,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending',
        decided_by TEXT,
        decided_at REAL
    );
    CREATE INDEX approvals_pending ON approvals (status);
    CREATE TABLE approval_rules (
        id INTEGER PRIMARY KEY,
        tool TEXT NOT NULL,
        rule_key TEXT NOT NULL,
        summary TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at REAL NOT NULL,
        UNIQUE (tool, rule_key)
    );
    """,
    # A rule is for everyone (person_id 0, as every rule before) or for one person.
    """
    CREATE TABLE approval_rules_new (
        id INTEGER PRIMARY KEY,
        tool TEXT NOT NULL,
        rule_key TEXT NOT NULL,
        summary TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at REAL NOT NULL,
        person_id INTEGER NOT NULL DEFAULT 0,
        UNIQUE (tool, rule_key, person_id)
    );
    INSERT INTO approval_rules_new (id, tool, rule_key, summary, created_by, created_at)
        SELECT id, tool, rule_key, summary, created_by, created_at FROM approval_rules;
    DROP TABLE approval_rules;
    ALTER TABLE approval_rules_new RENAME TO approval_rules;
    ALTER TABLE approvals ADD COLUMN person_id INTEGER NOT NULL DEFAULT 0;
    """,
]
EVERYONE = 0
"""The ``person_id`` of a rule that allows a call whoever asks."""

_COLUMNS = (
    "id, channel, chat_id, thread_id, asked_channel, asked_chat_id, asked_thread_id, "
    "message_ref, sender_id, origin, tool, summary, rule_key, risk, reason, text, "
    "inbound_id, created_at, expires_at, status, decided_by, decided_at, person_id"
)
_RULE_COLUMNS = "id, tool, rule_key, summary, created_by, created_at, person_id"


@dataclass(frozen=True, slots=True)
class StoredApproval:
    """One request: where it came from, where it was asked, and what became of it."""

    id: str
    channel: str
    chat_id: str
    thread_id: str | None
    asked_channel: str
    asked_chat_id: str
    asked_thread_id: str | None
    message_ref: str | None
    sender_id: str
    origin: str
    tool: str
    summary: str
    rule_key: str
    risk: str
    reason: str
    text: str
    inbound_id: int | None
    created_at: float
    expires_at: float
    status: Status
    decided_by: str | None
    decided_at: float | None
    person_id: int = EVERYONE


@dataclass(frozen=True, slots=True)
class Rule:
    """An "always allow" rule: one tool, one narrow argument pattern, for one person
    (``person_id``) or for everyone (``EVERYONE``)."""

    id: int
    tool: str
    rule_key: str
    summary: str
    created_by: str
    created_at: float
    person_id: int = EVERYONE


def new_approval_id() -> str:
    """An unguessable id (96 random bits, 16 URL-safe characters)."""
    return secrets.token_urlsafe(12)


def rule_key(fields: dict[str, object]) -> str:
    """The canonical text of a rule's argument pattern."""
    return json.dumps(fields, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class ApprovalStore:
    """Reads and writes approval requests and rules."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the tables."""
        await self._db.migrate("approvals", MIGRATIONS)

    async def add(self, approval: StoredApproval) -> None:
        """Store a new request."""
        async with self._db.write() as conn:
            marks = ", ".join("?" * 23)
            await conn.execute(
                f"INSERT INTO approvals ({_COLUMNS}) VALUES ({marks})", _row(approval)
            )

    async def get(self, approval_id: str) -> StoredApproval | None:
        """One request by id."""
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", (approval_id,)
        )
        return next((_approval(row) for row in rows), None)

    async def set_message(self, approval_id: str, message_ref: str) -> None:
        """Remember which message shows the request (to edit it later)."""
        async with self._db.write() as conn:
            await conn.execute(
                "UPDATE approvals SET message_ref = ? WHERE id = ?", (message_ref, approval_id)
            )

    async def decide(self, approval_id: str, status: Status, by: str, now: float) -> bool:
        """Settle a pending request; False if it was no longer pending (decided already)."""
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "UPDATE approvals SET status = ?, decided_by = ?, decided_at = ? "
                "WHERE id = ? AND status = 'pending'",
                (status, by, now, approval_id),
            )
        return cursor.rowcount == 1

    async def pending(self) -> list[StoredApproval]:
        """Requests still waiting (after a restart: the ones the daemon left behind)."""
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_COLUMNS} FROM approvals WHERE status = 'pending' ORDER BY created_at"
        )
        return [_approval(row) for row in rows]

    async def recent(self, statuses: Sequence[Status], limit: int = 10) -> list[StoredApproval]:
        """The latest requests settled as one of ``statuses``, newest first."""
        marks = ", ".join("?" * len(statuses))
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_COLUMNS} FROM approvals WHERE status IN ({marks}) "
            "ORDER BY COALESCE(decided_at, created_at) DESC LIMIT ?",
            (*statuses, limit),
        )
        return [_approval(row) for row in rows]

    async def add_rule(
        self, tool: str, key: str, summary: str, by: str, person_id: int = EVERYONE
    ) -> int:
        """Record an "always allow" rule (or return the existing identical one)."""
        async with self._db.write() as conn:
            await conn.execute(
                "INSERT INTO approval_rules "
                "(tool, rule_key, summary, created_by, created_at, person_id) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tool, rule_key, person_id) DO NOTHING",
                (tool, key, summary, by, time.time(), person_id),
            )
            rows = await conn.execute_fetchall(
                "SELECT id FROM approval_rules WHERE tool = ? AND rule_key = ? AND person_id = ?",
                (tool, key, person_id),
            )
        return next(int(row[0]) for row in rows)

    async def matching_rule(self, tool: str, key: str, person_id: int = EVERYONE) -> Rule | None:
        """The rule that allows exactly this call for ``person_id``, if any (everyone's first)."""
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_RULE_COLUMNS} FROM approval_rules "
            "WHERE tool = ? AND rule_key = ? AND person_id IN (0, ?) ORDER BY person_id",
            (tool, key, person_id),
        )
        return next((_rule(row) for row in rows), None)

    async def rules(self) -> list[Rule]:
        """Every rule, oldest first."""
        rows = await self._db.conn.execute_fetchall(
            f"SELECT {_RULE_COLUMNS} FROM approval_rules ORDER BY id"
        )
        return [_rule(row) for row in rows]

    async def revoke_rule(self, rule_id: int) -> bool:
        """Remove a rule; True if there was one."""
        async with self._db.write() as conn:
            cursor = await conn.execute("DELETE FROM approval_rules WHERE id = ?", (rule_id,))
        return cursor.rowcount > 0


def _row(a: StoredApproval) -> tuple[object, ...]:
    return (
        a.id, a.channel, a.chat_id, a.thread_id, a.asked_channel, a.asked_chat_id,
        a.asked_thread_id, a.message_ref, a.sender_id, a.origin, a.tool, a.summary,
        a.rule_key, a.risk, a.reason, a.text, a.inbound_id, a.created_at, a.expires_at,
        a.status, a.decided_by, a.decided_at, a.person_id,
    )  # fmt: skip


def _approval(row: Sequence[object]) -> StoredApproval:
    return StoredApproval(*row)  # type: ignore[arg-type]


def _rule(row: Sequence[object]) -> Rule:
    rule_id, tool, key, summary, by, at, person_id = row
    return Rule(
        int(str(rule_id)), str(tool), str(key), str(summary), str(by), float(str(at)),
        int(str(person_id)),
    )  # fmt: skip
