"""Sensor thresholds: ``on = "sensor:NAME.QUANTITY"`` with ``when = "below 5"`` or ``"above 30"``.

The source sees every reading the ``SensorBank`` takes (the agent's
``sensor_read``, the scheduled sampling) as one of its sinks, and reads each
watched sensor itself every ``every`` (the shortest of its triggers'; 0 means
``[hardware] sample_every``, else a minute), one task per sensor.

Hysteresis: a trigger is armed; a value beyond the threshold (below: < t,
above: > t) that stays beyond it across readings for ``for`` fires once and
disarms it; it is armed again only when a value comes back past the threshold
by ``hysteresis`` (below: >= t + h, above: <= t - h). A value hovering around
the threshold therefore fires once. A value that stops being beyond the
threshold restarts the ``for`` clock. A failed reading changes nothing; it is
logged once per run of failures.

After a restart a trigger starts disarmed if its last event was recorded (with
the same condition) and no stored reading since came back past the hysteresis:
a greenhouse that stays cold is not announced again after every restart, while
one that was warm when the daemon stopped and is cold when it starts is.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.core.durations import format_duration
from bot.core.errors import PinclawError, log_bug
from bot.hardware.sensors import UNITS, Reading, SensorBank
from bot.triggers.sources import Emit, SourceDeps, SourceState, cancel_all
from bot.triggers.spec import Event, Trigger
from bot.triggers.store import TriggerStore

if TYPE_CHECKING:
    from bot.hardware.history import SensorHistory

log = logging.getLogger(__name__)

DEFAULT_EVERY_S = 60.0
MIN_EVERY_S = 0.1  # a floor, so a typo cannot make a busy loop of the bus


@dataclass(slots=True)
class Watch:
    """One trigger's threshold and where it stands."""

    trigger: Trigger
    armed: bool = True
    since: float | None = None  # when the value went beyond the threshold (for ``for``)
    value: float | None = None

    @property
    def sensor(self) -> str:
        return self.trigger.subject.partition(".")[0]

    @property
    def quantity(self) -> str:
        return self.trigger.subject.partition(".")[2]

    @property
    def condition(self) -> str:
        """``below 5``: the trigger's ``when`` as people read it."""
        word, threshold = self.trigger.threshold()
        return f"{word} {threshold:g}"

    def beyond(self, value: float) -> bool:
        """Whether ``value`` meets the condition."""
        word, threshold = self.trigger.threshold()
        return value < threshold if word == "below" else value > threshold

    def back(self, value: float) -> bool:
        """Whether ``value`` is past the threshold by the hysteresis (arms again)."""
        word, threshold = self.trigger.threshold()
        if word == "below":
            return value >= threshold + self.trigger.hysteresis
        return value <= threshold - self.trigger.hysteresis

    def step(self, value: float, now: float) -> bool:
        """Take one reading; True when the trigger fires on it."""
        self.value = value
        if not self.armed:
            if self.back(value):
                self.armed = True
            return False
        if not self.beyond(value):
            self.since = None
            return False
        if self.since is None:
            self.since = now
        if now - self.since < self.trigger.for_s:
            return False
        self.armed, self.since = False, None
        return True

    def detail(self, now: float) -> str:
        """Where the trigger stands, in one line."""
        name, unit = self.trigger.name, UNITS.get(self.quantity, "")
        if self.value is None:
            return f"{name}: no reading yet"
        shown = f"{name}: {self.value:.1f} {unit}"
        held = f" for {format_duration(self.trigger.for_s)}" if self.trigger.for_s else ""
        if not self.armed:
            word, threshold = self.trigger.threshold()
            h = self.trigger.hysteresis
            again = f"{threshold + h:g} {unit} or more"
            if word == "above":
                again = f"{threshold - h:g} {unit} or less"
            return f"{shown}, fired ({self.condition}); armed again at {again}"
        if self.since is not None:
            return f"{shown}, {self.condition} for {format_duration(now - self.since)}{held}"
        return f"{shown}, armed (fires {self.condition}{held})"


class SensorSource:
    """The sensor triggers, fed by every reading the bank takes."""

    kind = "sensor"

    def __init__(
        self,
        bank: SensorBank,
        emit: Emit,
        *,
        store: TriggerStore | None,
        history: SensorHistory | None,
        default_every_s: float,
    ) -> None:
        self._bank = bank
        self._emit = emit
        self._store = store
        self._history = history
        self._default_every_s = default_every_s
        self._watches: dict[str, Watch] = {}
        self._failing: dict[str, str] = {}  # sensor -> why its last reading failed
        self._tasks: dict[str, tuple[float, asyncio.Task[None]]] = {}
        self._running = False

    async def start(self) -> None:
        """Take the bank's readings and start reading the watched sensors."""
        if self._running:
            return
        self._running = True
        self._bank.record_to(self)
        self._schedule()

    async def stop(self) -> None:
        """Stop reading; readings taken by others are ignored from now on."""
        self._running = False
        tasks = [task for _, task in self._tasks.values()]
        self._tasks = {}
        await cancel_all(tasks)

    async def watch(self, triggers: Sequence[Trigger]) -> None:
        """Keep the state of unchanged triggers; restore new ones from what is stored."""
        watches: dict[str, Watch] = {}
        for trigger in triggers:
            known = self._watches.get(trigger.name)
            if known is not None and known.trigger == trigger:
                watches[trigger.name] = known
            else:
                watches[trigger.name] = await self._restored(Watch(trigger))
        self._watches = watches
        if self._running:
            self._schedule()

    def states(self) -> list[SourceState]:
        """One line per trigger: the last value and whether it is armed, or the failure."""
        now = time.time()
        found = []
        for watch in sorted(self._watches.values(), key=lambda w: w.trigger.name):
            failure = self._failing.get(watch.sensor)
            if failure is not None:
                detail = f"{watch.trigger.name}: the last reading failed: {failure}"
                found.append(SourceState(watch.trigger.on, False, detail))
            else:
                found.append(SourceState(watch.trigger.on, True, watch.detail(now)))
        return found

    async def record(self, reading: Reading) -> None:
        """A reading from the bank (anyone's): judge the triggers on that sensor."""
        if not self._running:
            return
        if self._failing.pop(reading.name, None) is not None:
            log.info("sensor %s reads again", reading.name)
        values = {m.quantity: m.value for m in reading.measurements()}
        now = time.time()
        for watch in list(self._watches.values()):
            value = values.get(watch.quantity)
            if watch.sensor != reading.name or value is None:
                continue
            if watch.step(value, now):
                await self._fire(watch, value)

    async def _fire(self, watch: Watch, value: float) -> None:
        unit = UNITS.get(watch.quantity, "")
        shown = f"{value:.1f}"
        _, threshold = watch.trigger.threshold()
        fields = {
            "sensor": watch.sensor,
            "quantity": watch.quantity,
            "value": shown,
            "unit": unit,
            "threshold": f"{threshold:g}",
            "condition": watch.condition,
        }
        summary = f"{watch.sensor} {watch.quantity} {shown} {unit}, {watch.condition}"
        try:
            await self._emit(watch.trigger.name, Event(summary, fields))
        except Exception as exc:
            log_bug(log, f"the sensor trigger {watch.trigger.name} could not fire", exc)

    async def _restored(self, watch: Watch) -> Watch:
        """Disarmed if its last event had this condition and nothing came back since."""
        if self._store is None:
            return watch
        try:
            firings = await self._store.history(watch.trigger.name, limit=50)
            last = next((f for f in firings if f.kind == "event"), None)
            if last is None or last.event.fields.get("condition") != watch.condition:
                return watch
            watch.armed = False
            if self._history is not None:
                since = await self._history.series(watch.sensor, watch.quantity, last.at)
                watch.armed = any(watch.back(point.value) for point in since)
        except Exception as exc:
            log_bug(log, f"the state of trigger {watch.trigger.name} could not be restored", exc)
        return watch

    def _schedule(self) -> None:
        """One reading task per watched sensor, at the shortest ``every`` of its triggers."""
        wanted: dict[str, float] = {}
        for watch in self._watches.values():
            every = max(MIN_EVERY_S, watch.trigger.every_s or self._default_every_s)
            wanted[watch.sensor] = min(every, wanted.get(watch.sensor, every))
        for sensor, (every, task) in list(self._tasks.items()):
            if wanted.get(sensor) != every:
                task.cancel()
                del self._tasks[sensor]
        for sensor, every in wanted.items():
            if sensor not in self._tasks:
                task = asyncio.create_task(self._sample(sensor, every), name=f"sensor {sensor}")
                self._tasks[sensor] = (every, task)

    async def _sample(self, sensor: str, every_s: float) -> None:
        while True:
            try:
                await self._bank.read_sensor(sensor)  # the reading comes back through record()
            except PinclawError as exc:
                self._failed(sensor, str(exc))
            except Exception as exc:
                if sensor not in self._failing:
                    log_bug(log, f"reading {sensor} for its triggers failed", exc)
                self._failing[sensor] = "an unexpected error (see the log)"
            await asyncio.sleep(every_s)

    def _failed(self, sensor: str, why: str) -> None:
        if sensor not in self._failing:
            log.warning(
                "reading %s for its triggers failed: %s (not logged again until it reads)",
                sensor,
                why,
            )
        self._failing[sensor] = why


def build(deps: SourceDeps, emit: Emit) -> SensorSource:
    """The sensor source on the bank of ``sensor_read`` (its history's), or a bank of its own."""
    app = deps.app
    hardware = app.loaded.config.hardware
    history = app.readings
    if history is not None:
        bank = history.sensors
    else:  # sensor_read is disabled: nobody else reads the sensors
        from bot.hardware.i2c import I2cBank

        bank = SensorBank(hardware, I2cBank(hardware))
    return SensorSource(
        bank,
        emit,
        store=TriggerStore(app.db),
        history=history,
        default_every_s=hardware.sample_every_s or DEFAULT_EVERY_S,
    )
