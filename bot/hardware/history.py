"""The readings history: what the configured sensors measured, kept in SQLite for a while.

The ``SensorBank`` hands over every reading it takes (for ``sensor_read``, or
for the scheduled sampling of ``[hardware] sample_every``), and each is stored
as one row per quantity with the time it was taken. Rows older than
``keep_readings_days`` are deleted when the history opens and then at most once
a day as readings come in, so no separate job is needed. A reading that cannot
be stored is logged; whoever asked for it still gets it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from bot.core.errors import PinclawError, log_bug
from bot.hardware.sensors import Reading, SensorBank
from bot.store.readings import Point, ReadingStore

log = logging.getLogger(__name__)

DAY_S = 86400.0


class SensorHistory:
    """Records the readings of ``sensors`` into ``store`` and reads series back."""

    def __init__(
        self,
        store: ReadingStore,
        sensors: SensorBank,
        *,
        keep_days: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self.sensors = sensors
        self.keep_days = keep_days
        self._clock = clock
        self._pruned_at: float | None = None

    async def record(self, reading: Reading) -> None:
        """Store ``reading`` as taken now; prune old rows if a day has passed since the last."""
        at = self._clock()
        try:
            await self._store.add(reading.name, reading.measurements(), at)
            if self._pruned_at is None or at - self._pruned_at >= DAY_S:
                await self.prune()
        except Exception as exc:
            log_bug(log, f"a reading of {reading.name} could not be stored", exc)

    async def prune(self) -> int:
        """Delete the readings older than the retention; how many rows went."""
        now = self._clock()
        self._pruned_at = now
        removed = await self._store.prune(now - self.keep_days * DAY_S)
        if removed:
            log.info("deleted %d sensor values older than %d days", removed, self.keep_days)
        return removed

    async def sample(self) -> None:
        """Read every configured sensor once (each reading is recorded); failures are logged."""
        for name in self.sensors.names:
            try:
                await self.sensors.read_sensor(name)
            except PinclawError as exc:
                log.warning("the scheduled reading of %s failed: %s", name, exc)
            except Exception as exc:
                log_bug(log, f"the scheduled reading of {name} failed", exc)

    async def series(self, sensor: str, quantity: str, since: float) -> list[Point]:
        """The stored values of one quantity of ``sensor`` from ``since`` on, oldest first."""
        return await self._store.series(sensor, quantity, since)

    async def latest(self, sensor: str, quantity: str) -> Point | None:
        """The newest stored value of one quantity of ``sensor``, however old."""
        return await self._store.latest(sensor, quantity)
