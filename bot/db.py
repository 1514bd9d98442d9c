"""The one SQLite file that holds PinClaw's state, opened through aiosqlite in WAL mode.

Each component (history, and later pairing, cron, memory) owns its tables and
brings its own ordered list of migrations; ``migrate`` applies the ones a
database has not seen yet, so components stay independent modules.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite


class Database:
    """Owns the connection: ``open`` and ``close`` are idempotent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()

    @property
    def conn(self) -> aiosqlite.Connection:
        """The open connection."""
        if self._conn is None:
            raise RuntimeError("the database is not open")
        return self._conn

    async def open(self) -> None:
        """Open (creating the file and its folder if needed) and set the pragmas."""
        if self._conn is not None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Conversations are private: create the file for its owner only (SQLite
        # gives its -wal and -shm files the same mode).
        os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        conn = await aiosqlite.connect(self.path)
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=5000")
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_versions "
            "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        await conn.commit()
        self._conn = conn

    async def close(self) -> None:
        """Close the connection if it is open."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.close()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction: committed at the end, rolled back on any error.

        Every component shares the one connection, and coroutines interleave at
        each await; writers therefore take turns here, so one component's
        failure can never roll back, or hold open, another's half-done write.
        """
        async with self._write_lock:
            conn = self.conn
            try:
                yield conn
            except BaseException:
                await asyncio.shield(conn.rollback())
                raise
            await conn.commit()

    async def migrate(self, component: str, steps: Sequence[str]) -> None:
        """Apply the migrations of ``component`` that this database has not run yet."""
        async with self._write_lock:
            await self._migrate(component, steps)

    async def _migrate(self, component: str, steps: Sequence[str]) -> None:
        conn = self.conn
        rows = await conn.execute_fetchall(
            "SELECT version FROM schema_versions WHERE component = ?", (component,)
        )
        current = next((int(row[0]) for row in rows), 0)
        for version, script in enumerate(steps[current:], start=current + 1):
            try:
                await conn.executescript(f"BEGIN;\n{script}")
                await conn.execute(
                    "INSERT INTO schema_versions (component, version) VALUES (?, ?) "
                    "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                    (component, version),
                )
                await conn.commit()
            except BaseException:
                await conn.rollback()
                raise
