"""Sensor readings over time: one row per measured quantity, for charts of recent history.

A BME280 reading is three rows (temperature, humidity, pressure) sharing one
time. Rows are looked up by sensor, quantity and time (the index matches), and
rows older than the retention are deleted by time (its own index).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.store.db import Database

MIGRATIONS = [
    """
    CREATE TABLE sensor_readings (
        id INTEGER PRIMARY KEY,
        sensor TEXT NOT NULL,
        quantity TEXT NOT NULL,
        value REAL NOT NULL,
        unit TEXT NOT NULL,
        at REAL NOT NULL
    );
    CREATE INDEX sensor_readings_by_series ON sensor_readings (sensor, quantity, at);
    CREATE INDEX sensor_readings_by_time ON sensor_readings (at);
    """,
]


@dataclass(frozen=True, slots=True)
class Measurement:
    """One quantity of a reading: ``temperature``, 21.4, ``°C``."""

    quantity: str
    value: float
    unit: str


@dataclass(frozen=True, slots=True)
class Point:
    """One stored value of a series, ``at`` in seconds since the epoch."""

    at: float
    value: float
    unit: str


class ReadingStore:
    """Stores measurements by sensor and time, and reads one series back."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def setup(self) -> None:
        """Create or upgrade the table."""
        await self._db.migrate("sensor_readings", MIGRATIONS)

    async def add(self, sensor: str, measurements: Sequence[Measurement], at: float) -> None:
        """Store the measurements of one reading taken at ``at`` (committed)."""
        async with self._db.write() as conn:
            await conn.executemany(
                "INSERT INTO sensor_readings (sensor, quantity, value, unit, at) "
                "VALUES (?, ?, ?, ?, ?)",
                [(sensor, m.quantity, m.value, m.unit, at) for m in measurements],
            )

    async def series(self, sensor: str, quantity: str, since: float) -> list[Point]:
        """The values of one quantity of one sensor from ``since`` on, oldest first."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT at, value, unit FROM sensor_readings "
            "WHERE sensor = ? AND quantity = ? AND at >= ? ORDER BY at",
            (sensor, quantity, since),
        )
        return [Point(float(row[0]), float(row[1]), str(row[2])) for row in rows]

    async def latest(self, sensor: str, quantity: str) -> Point | None:
        """The newest stored value of one quantity of one sensor, if any."""
        rows = await self._db.conn.execute_fetchall(
            "SELECT at, value, unit FROM sensor_readings "
            "WHERE sensor = ? AND quantity = ? ORDER BY at DESC LIMIT 1",
            (sensor, quantity),
        )
        return next((Point(float(r[0]), float(r[1]), str(r[2])) for r in rows), None)

    async def prune(self, before: float) -> int:
        """Delete every row older than ``before``; how many were deleted."""
        async with self._db.write() as conn:
            cursor = await conn.execute("DELETE FROM sensor_readings WHERE at < ?", (before,))
            return cursor.rowcount
