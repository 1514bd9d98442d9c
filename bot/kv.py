"""A small key-value table for state that is not worth a table of its own
(e.g. a hash of the chat commands last registered on a platform)."""

from __future__ import annotations

from bot.db import Database

MIGRATIONS = [
    "CREATE TABLE kv (namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
    "PRIMARY KEY (namespace, key));",
]


class KeyValueStore:
    """Strings by (namespace, key)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the table."""
        await self._db.migrate("kv", MIGRATIONS)

    async def get(self, namespace: str, key: str) -> str | None:
        """The stored value, or None."""
        async with self._db.conn.execute(
            "SELECT value FROM kv WHERE namespace = ? AND key = ?", (namespace, key)
        ) as cursor:
            row = await cursor.fetchone()
        return str(row[0]) if row else None

    async def set(self, namespace: str, key: str, value: str) -> None:
        """Store a value (committed)."""
        async with self._db.write() as conn:
            await conn.execute(
                "INSERT INTO kv VALUES (?, ?, ?) ON CONFLICT (namespace, key) "
                "DO UPDATE SET value = excluded.value",
                (namespace, key, value),
            )
