"""Per-session conversation history and per-turn usage, stored in SQLite.

A session is one conversation in one chat (channel + chat + thread). ``/new``
starts a fresh session for the same chat; the old one stays on disk. The newest
session of a key is the chat's current conversation.

Pictures a message carried to the model are not stored: its text names each
one (``[image: photo.jpg, 1280x960]``), and that is what later turns read.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.conversation import ChatMessage, ToolCall, Usage
from bot.core.messages import SessionKey, without_surrogates
from bot.store.db import Database

MIGRATIONS = [
    """
    CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        channel TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        thread_id TEXT,
        created_at REAL NOT NULL
    );
    CREATE INDEX sessions_by_key ON sessions (key, id);
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        turn_id INTEGER,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tool_calls TEXT,
        tool_call_id TEXT,
        tool_name TEXT,
        is_error INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_by_session ON messages (session_id, id);
    CREATE TABLE turns (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        started_at REAL NOT NULL,
        ended_at REAL,
        status TEXT NOT NULL DEFAULT 'running',
        provider TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        rounds INTEGER NOT NULL DEFAULT 0,
        tool_calls INTEGER NOT NULL DEFAULT 0
    );
    """,
    """
    ALTER TABLE turns ADD COLUMN inbound_id INTEGER;
    CREATE INDEX turns_by_inbound ON turns (inbound_id);
    """,
    """
    ALTER TABLE turns ADD COLUMN sender TEXT;
    CREATE INDEX turns_by_sender ON turns (sender, started_at);
    """,
]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One stored session, as ``pinclaw sessions`` lists it."""

    id: int
    key: str
    channel: str
    chat_id: str
    thread_id: str | None
    created_at: float
    messages: int
    last_message_at: float | None
    current: bool  # the newest session of its key: the one the chat continues

    @property
    def last_activity(self) -> float:
        """When the last message was stored, or when the session started if it has none."""
        return self.created_at if self.last_message_at is None else self.last_message_at


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message of a session with the time it was stored."""

    message: ChatMessage
    created_at: float


_SESSION_INFO = (
    "SELECT s.id, s.key, s.channel, s.chat_id, s.thread_id, s.created_at, "
    "COUNT(m.id), MAX(m.created_at), "
    "s.id = (SELECT MAX(c.id) FROM sessions c WHERE c.key = s.key) "
    "FROM sessions s LEFT JOIN messages m ON m.session_id = s.id "
)


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What a finished turn cost and how it ended."""

    status: str
    usage: Usage
    provider: str
    rounds: int
    tool_calls: int


class HistoryStore:
    """Reads and writes sessions, messages and turns."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the tables."""
        await self._db.migrate("history", MIGRATIONS)

    async def session_for(self, key: SessionKey) -> int:
        """The current session id of a chat, creating the first one if needed."""

        return await self._db.transaction(lambda conn: _current_or_new(conn, key))

    async def open_session(
        self, key: SessionKey, limit: int = 400
    ) -> tuple[int, list[ChatMessage]]:
        """``session_for`` and ``load`` of a chat together, in one trip to the database."""

        def current(conn: sqlite3.Connection) -> tuple[int, list[Any]]:
            session_id = _current_or_new(conn, key)
            return session_id, conn.execute(_LOAD, (session_id, limit)).fetchall()

        session_id, rows = await self._db.transaction(current)
        return session_id, [_from_row(row) for row in rows]

    async def new_session(self, key: SessionKey) -> int:
        """Start a fresh session for a chat and return its id."""
        return await self._db.transaction(lambda conn: _insert_session(conn, key))

    async def load(self, session_id: int, limit: int = 400) -> list[ChatMessage]:
        """The last ``limit`` messages of a session, oldest first."""
        rows = await self._db.conn.execute_fetchall(_LOAD, (session_id, limit))
        return [_from_row(row) for row in rows]

    async def append(
        self, session_id: int, messages: Sequence[ChatMessage], turn_id: int | None = None
    ) -> None:
        """Store messages durably (committed before this returns)."""
        await self._db.transaction(
            lambda conn: _insert_messages(conn, session_id, turn_id, messages)
        )

    async def begin_turn(
        self,
        session_id: int,
        inbound_id: int | None,
        messages: Sequence[ChatMessage],
        sender: str = "",
    ) -> int:
        """Record that a turn started, with the messages that opened it; return its id.

        ``inbound_id`` ties the turn to the stored inbound message it answers.
        """

        def begin(conn: sqlite3.Connection) -> int:
            cursor = conn.execute(
                "INSERT INTO turns (session_id, started_at, inbound_id, sender) "
                "VALUES (?, ?, ?, ?)",
                (session_id, time.time(), inbound_id, sender),
            )
            turn_id = cursor.lastrowid
            assert turn_id is not None
            _insert_messages(conn, session_id, turn_id, messages)
            return turn_id

        return await self._db.transaction(begin)

    async def end_turn(
        self,
        session_id: int,
        turn_id: int,
        record: TurnRecord,
        messages: Sequence[ChatMessage] = (),
    ) -> None:
        """Store the turn's last messages and how it ended, in one transaction."""

        def end(conn: sqlite3.Connection) -> None:
            _insert_messages(conn, session_id, turn_id, messages)
            conn.execute(
                "UPDATE turns SET ended_at = ?, status = ?, provider = ?, input_tokens = ?, "
                "output_tokens = ?, rounds = ?, tool_calls = ? WHERE id = ?",
                (
                    time.time(),
                    record.status,
                    record.provider,
                    record.usage.input_tokens,
                    record.usage.output_tokens,
                    record.rounds,
                    record.tool_calls,
                    turn_id,
                ),
            )

        await self._db.transaction(end)

    async def tokens_since(self, sender: str, since: float) -> int:
        """Model tokens (in and out) used by ``sender``'s turns since ``since``."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM turns "
            "WHERE sender = ? AND started_at >= ?",
            (sender, since),
        )
        return next((int(row[0]) for row in rows), 0)

    async def discard_unfinished(self, inbound_id: int) -> int:
        """Forget what earlier, unfinished attempts at answering ``inbound_id`` left in history.

        A turn cut short by a crash or a shutdown is answered again after the
        restart; its partial messages would otherwise appear twice. Returns how
        many attempts were discarded (they stay in ``turns`` as ``interrupted``).
        """
        async with self._db.write() as conn:
            rows = await conn.execute_fetchall(
                "SELECT id FROM turns WHERE inbound_id = ? "
                "AND status IN ('running', 'interrupted')",
                (inbound_id,),
            )
            ids = [int(row[0]) for row in rows]
            if ids:
                marks = ",".join("?" * len(ids))
                await conn.execute(f"DELETE FROM messages WHERE turn_id IN ({marks})", ids)
                await conn.execute(
                    f"UPDATE turns SET status = 'interrupted' WHERE id IN ({marks})", ids
                )
        return len(ids)

    async def list_sessions(
        self, channel: str | None = None, limit: int | None = None
    ) -> list[SessionInfo]:
        """Sessions (of one channel, or all), the most recently active first."""
        rows = await self._db.conn.execute_fetchall(
            _SESSION_INFO + "WHERE (? IS NULL OR s.channel = ?) GROUP BY s.id "
            "ORDER BY COALESCE(MAX(m.created_at), s.created_at) DESC, s.id DESC LIMIT ?",
            (channel, channel, -1 if limit is None else limit),
        )
        return [_info(row) for row in rows]

    async def count_sessions(self, channel: str | None = None, key: str | None = None) -> int:
        """How many sessions there are (of one channel or key, or all)."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT COUNT(*) FROM sessions WHERE (? IS NULL OR channel = ?) "
            "AND (? IS NULL OR key = ?)",
            (channel, channel, key, key),
        )
        return next((int(row[0]) for row in rows), 0)

    async def session_info(self, session_id: int) -> SessionInfo | None:
        """The session with this id, if there is one."""
        rows = await self._db.conn.execute_fetchall(
            _SESSION_INFO + "WHERE s.id = ? GROUP BY s.id", (session_id,)
        )
        return next((_info(row) for row in rows), None)

    async def current_session(self, key: SessionKey | str) -> SessionInfo | None:
        """The current (newest) session of a key, without creating one."""
        rows = await self._db.conn.execute_fetchall(
            _SESSION_INFO + "WHERE s.key = ? GROUP BY s.id ORDER BY s.id DESC LIMIT 1",
            (str(key),),
        )
        return next((_info(row) for row in rows), None)

    async def transcript(self, session_id: int, limit: int | None = None) -> list[StoredMessage]:
        """The last ``limit`` messages of a session (all without one) with their times,
        oldest first."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT role, content, tool_calls, tool_call_id, tool_name, is_error, created_at "
            "FROM (SELECT * FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT ?) "
            "ORDER BY id",
            (session_id, -1 if limit is None else limit),
        )
        return [StoredMessage(_from_row(row[:6]), float(row[6])) for row in rows]

    async def clear(
        self, key: SessionKey | str | None = None, *, session_id: int | None = None
    ) -> int:
        """Delete the messages of every session of ``key``, or of one session; the count.

        The ``sessions`` and ``turns`` rows stay: the turns' token usage counts
        towards each person's daily budget, which clearing must not reset.
        """
        if (key is None) == (session_id is None):
            raise ValueError("clear takes a key or a session id, not both or neither")
        async with self._db.write() as conn:
            if session_id is not None:
                cursor = await conn.execute(
                    "DELETE FROM messages WHERE session_id = ?", (session_id,)
                )
            else:
                cursor = await conn.execute(
                    "DELETE FROM messages WHERE session_id IN "
                    "(SELECT id FROM sessions WHERE key = ?)",
                    (str(key),),
                )
            return max(cursor.rowcount, 0)


def _info(row: sqlite3.Row) -> SessionInfo:
    sid, key, channel, chat_id, thread_id, created, count, last, current = row
    return SessionInfo(
        id=int(sid),
        key=str(key),
        channel=str(channel),
        chat_id=str(chat_id),
        thread_id=None if thread_id is None else str(thread_id),
        created_at=float(created),
        messages=int(count),
        last_message_at=None if last is None else float(last),
        current=bool(current),
    )


_LOAD = (
    "SELECT role, content, tool_calls, tool_call_id, tool_name, is_error FROM ("
    " SELECT * FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT ?"
    ") ORDER BY id"
)


def _current_or_new(conn: sqlite3.Connection, key: SessionKey) -> int:
    """The id of the newest session of ``key``, made if there is none (inside a write)."""
    row = conn.execute(
        "SELECT id FROM sessions WHERE key = ? ORDER BY id DESC LIMIT 1", (str(key),)
    ).fetchone()
    return int(row[0]) if row is not None else _insert_session(conn, key)


def _insert_session(conn: sqlite3.Connection, key: SessionKey) -> int:
    """A new session row for ``key`` (inside a transaction); its id."""
    cursor = conn.execute(
        "INSERT INTO sessions (key, channel, chat_id, thread_id, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (str(key), key.channel, key.chat_id, key.thread_id, time.time()),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def _insert_messages(
    conn: sqlite3.Connection,
    session_id: int,
    turn_id: int | None,
    messages: Sequence[ChatMessage],
) -> None:
    if messages:
        now = time.time()
        conn.executemany(
            "INSERT INTO messages (session_id, turn_id, role, content, tool_calls, "
            "tool_call_id, tool_name, is_error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(session_id, turn_id, *_to_row(m), now) for m in messages],
        )


def _to_row(message: ChatMessage) -> tuple[object, ...]:
    calls = (
        json.dumps(
            [
                {"id": c.id, "name": c.name, "arguments": dict(c.arguments), "error": c.error}
                for c in message.tool_calls
            ],
            ensure_ascii=False,
        )
        if message.tool_calls
        else None
    )
    return (  # a lone surrogate (half an emoji from a model or a file) cannot be stored
        message.role,
        without_surrogates(message.content),
        without_surrogates(calls) if calls is not None else None,
        message.tool_call_id,
        message.tool_name,
        int(message.is_error),
    )


def _from_row(row: Sequence[object]) -> ChatMessage:
    role, content, calls, call_id, tool_name, is_error = row
    tool_calls = (
        tuple(
            ToolCall(c["id"], c["name"], c.get("arguments") or {}, c.get("error"))
            for c in json.loads(str(calls))
        )
        if calls
        else ()
    )
    return ChatMessage(
        role=role,  # type: ignore[arg-type]
        content=str(content),
        tool_calls=tool_calls,
        tool_call_id=str(call_id) if call_id is not None else None,
        tool_name=str(tool_name) if tool_name is not None else None,
        is_error=bool(is_error),
    )
