"""Pairing: how a stranger becomes a known user, with the owner's say-so.

An unknown person who writes to the bot directly gets one reply with a short
code; the owner admits them with ``pinclaw pairing approve CODE``. Codes are 8
characters from an alphabet without look-alikes (no 0/O, 1/I/L), expire after an
hour, and at most three wait per channel. Everything is in SQLite, so approving
works from the command line while the daemon runs.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from bot.store.db import Database

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL_S = 3600.0
MAX_PENDING_PER_CHANNEL = 3

MIGRATIONS = [
    """
    CREATE TABLE pairing_requests (
        code TEXT PRIMARY KEY,
        channel TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    );
    CREATE TABLE paired_users (
        channel TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT NOT NULL,
        approved_at REAL NOT NULL,
        PRIMARY KEY (channel, user_id)
    );
    """,
]


@dataclass(frozen=True, slots=True)
class PairingRequest:
    """A code waiting for the owner's approval."""

    code: str
    channel: str
    user_id: str
    user_name: str
    chat_id: str
    expires_at: float


@dataclass(frozen=True, slots=True)
class PairedUser:
    """Someone the owner admitted."""

    channel: str
    user_id: str
    user_name: str
    approved_at: float


@dataclass(frozen=True, slots=True)
class PairingOutcome:
    """What to do about a stranger: ``new`` (reply with the code), ``waiting`` (a code was
    already sent; stay quiet), or ``full`` (too many pending; stay quiet)."""

    kind: Literal["new", "waiting", "full"]
    request: PairingRequest | None = None


def new_code() -> str:
    """A random pairing code."""
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(text: str) -> str:
    """A typed code in canonical form (case, spaces and dashes forgiven)."""
    return "".join(ch for ch in text.upper() if ch.isalnum())


class PairingStore:
    """Pending codes and admitted users."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the tables."""
        await self._db.migrate("pairing", MIGRATIONS)

    async def is_paired(self, channel: str, user_id: str) -> bool:
        """Whether the owner admitted this user on this channel."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT 1 FROM paired_users WHERE channel = ? AND user_id = ?", (channel, user_id)
        )
        return bool(rows)

    async def request(
        self, channel: str, user_id: str, user_name: str, chat_id: str, now: float | None = None
    ) -> PairingOutcome:
        """A stranger wrote: issue a code, or report one waiting, or that the list is full.

        One write transaction, so two quick messages from one stranger cannot both
        find "no code yet".
        """
        now = time.time() if now is None else now
        async with self._db.write() as conn:
            await conn.execute("DELETE FROM pairing_requests WHERE expires_at <= ?", (now,))
            waiting = await conn.execute_fetchall(
                "SELECT code, channel, user_id, user_name, chat_id, expires_at "
                "FROM pairing_requests WHERE channel = ? AND user_id = ?",
                (channel, user_id),
            )
            for row in waiting:
                return PairingOutcome("waiting", _request(row))
            counted = await conn.execute_fetchall(
                "SELECT COUNT(*) FROM pairing_requests WHERE channel = ?", (channel,)
            )
            if any(int(row[0]) >= MAX_PENDING_PER_CHANNEL for row in counted):
                return PairingOutcome("full")
            code = new_code()
            request = PairingRequest(code, channel, user_id, user_name, chat_id, now + CODE_TTL_S)
            await conn.execute(
                "INSERT INTO pairing_requests VALUES (?, ?, ?, ?, ?, ?, ?)",
                (code, channel, user_id, user_name, chat_id, now, request.expires_at),
            )
        return PairingOutcome("new", request)

    async def approve(self, code: str, now: float | None = None) -> PairedUser | None:
        """Admit the person behind ``code``; None if the code is unknown or expired."""
        now = time.time() if now is None else now
        async with self._db.write() as conn:
            found = await conn.execute_fetchall(
                "SELECT code, channel, user_id, user_name, chat_id, expires_at "
                "FROM pairing_requests WHERE code = ? AND expires_at > ?",
                (normalize_code(code), now),
            )
            if not found:
                return None
            request = _request(next(iter(found)))
            user = PairedUser(request.channel, request.user_id, request.user_name, now)
            await conn.execute(
                "INSERT INTO paired_users VALUES (?, ?, ?, ?) ON CONFLICT (channel, user_id) "
                "DO UPDATE SET user_name = excluded.user_name, approved_at = excluded.approved_at",
                (user.channel, user.user_id, user.user_name, now),
            )
            await conn.execute("DELETE FROM pairing_requests WHERE code = ?", (request.code,))
        return user

    async def admit(
        self, channel: str, user_id: str, user_name: str, now: float | None = None
    ) -> PairedUser:
        """Admit someone without a pairing code (they sent the owner's link code)."""
        user = PairedUser(channel, user_id, user_name, time.time() if now is None else now)
        async with self._db.write() as conn:
            await conn.execute(
                "INSERT INTO paired_users VALUES (?, ?, ?, ?) ON CONFLICT (channel, user_id) "
                "DO NOTHING",
                (user.channel, user.user_id, user.user_name, user.approved_at),
            )
        return user

    async def revoke(self, channel: str, user_id: str) -> bool:
        """Remove an admitted user; True if there was one."""
        async with self._db.write() as conn:
            cursor = await conn.execute(
                "DELETE FROM paired_users WHERE channel = ? AND user_id = ?", (channel, user_id)
            )
        return cursor.rowcount > 0

    async def pending(self, now: float | None = None) -> list[PairingRequest]:
        """Codes still waiting, oldest first."""
        now = time.time() if now is None else now
        rows = await self._db.conn.execute_fetchall(
            "SELECT code, channel, user_id, user_name, chat_id, expires_at FROM pairing_requests "
            "WHERE expires_at > ? ORDER BY created_at",
            (now,),
        )
        return [_request(row) for row in rows]

    async def paired(self) -> list[PairedUser]:
        """Everyone admitted, in the order they were admitted."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT channel, user_id, user_name, approved_at FROM paired_users ORDER BY approved_at"
        )
        return [PairedUser(str(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in rows]


def _request(row: Sequence[object]) -> PairingRequest:
    code, channel, user_id, user_name, chat_id, expires_at = row
    return PairingRequest(
        str(code), str(channel), str(user_id), str(user_name), str(chat_id), float(str(expires_at))
    )
