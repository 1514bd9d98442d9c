"""A small key-value table for state that is not worth a table of its own
(e.g. a hash of the chat commands last registered on a platform)."""

from __future__ import annotations

from bot.store.db import Database

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
        rows = await self._db.conn.execute_fetchall(
            "SELECT value FROM kv WHERE namespace = ? AND key = ?", (namespace, key)
        )
        return next((str(row[0]) for row in rows), None)

    async def set(self, namespace: str, key: str, value: str) -> None:
        """Store a value (committed)."""
        async with self._db.write() as conn:
            await conn.execute(
                "INSERT INTO kv VALUES (?, ?, ?) ON CONFLICT (namespace, key) "
                "DO UPDATE SET value = excluded.value",
                (namespace, key, value),
            )
