"""Named sensors from ``[hardware.sensors]``: read one and get values with units.

Each reading is one call behind the bus's gate (the whole trigger, wait and
read sequence), so two readings on one bus never interleave. The drivers with
the datasheet maths live in ``bme280.py`` and ``sht31.py``. With
``pin_factory = "mock"`` the readings are simulated (and say so), so PinClaw
can be tried on any machine. A bank may be given ``ReadingSink``s (the
readings history, the sensor triggers): every reading it takes is handed to each.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.config.hardware import HardwareConfig, Sensor
from bot.core.errors import ToolError, log_bug
from bot.hardware import bme280, sht31
from bot.hardware.i2c import I2cBank, hex_address
from bot.store.readings import Measurement

if TYPE_CHECKING:
    from smbus2 import SMBus

log = logging.getLogger(__name__)

SIMULATED_C, SIMULATED_RH, SIMULATED_HPA = 21.5, 48.0, 1013.2

UNITS = {"temperature": "°C", "humidity": "%RH", "pressure": "hPa"}
"""Every quantity a built-in driver measures, with its unit."""
QUANTITIES = {
    "bme280": ("temperature", "humidity", "pressure"),
    "sht31": ("temperature", "humidity"),
}
"""What each driver measures."""


@dataclass(frozen=True, slots=True)
class Reading:
    """One sensor reading: temperature in °C, relative humidity in %, pressure in hPa."""

    name: str
    driver: str
    bus: int
    address: int
    temperature_c: float
    humidity_pct: float
    pressure_hpa: float | None = None
    simulated: bool = False

    def text(self) -> str:
        """Like ``greenhouse (BME280 at 0x76, bus 1): 21.4 °C, 45.2 %RH, 1008.3 hPa``."""
        values = [f"{self.temperature_c:.1f} °C", f"{self.humidity_pct:.1f} %RH"]
        if self.pressure_hpa is not None:
            values.append(f"{self.pressure_hpa:.1f} hPa")
        where = f"{self.driver.upper()} at {hex_address(self.address)}, bus {self.bus}"
        if self.simulated:
            where += ", simulated"
        return f"{self.name} ({where}): {', '.join(values)}"

    def measurements(self) -> list[Measurement]:
        """The reading as one value per quantity, with units."""
        values = [
            Measurement("temperature", self.temperature_c, UNITS["temperature"]),
            Measurement("humidity", self.humidity_pct, UNITS["humidity"]),
        ]
        if self.pressure_hpa is not None:
            values.append(Measurement("pressure", self.pressure_hpa, UNITS["pressure"]))
        return values


class ReadingSink(Protocol):
    """Where a bank hands every reading it takes (the readings history, sensor triggers)."""

    async def record(self, reading: Reading) -> None: ...


class SensorBank:
    """The configured sensors, read through the shared ``I2cBank`` (and its gates)."""

    def __init__(self, config: HardwareConfig, i2c: I2cBank) -> None:
        self._sensors = dict(config.sensors)
        self._i2c = i2c
        # pin_factory = "mock" simulates the whole board, sensors included.
        self._simulated = config.pin_factory == "mock"
        self._sinks: list[ReadingSink] = []

    def record_to(self, sink: ReadingSink) -> None:
        """Hand every reading taken from now on to ``sink`` too (once, however often asked)."""
        if sink not in self._sinks:
            self._sinks.append(sink)

    @property
    def names(self) -> tuple[str, ...]:
        """The configured sensor names."""
        return tuple(self._sensors)

    def describe(self, name: str) -> str:
        """``BME280 at 0x76, bus 1`` for a configured sensor."""
        sensor = self._sensor(name)
        return f"{sensor.driver.upper()} at {hex_address(sensor.address)}, bus {sensor.bus}"

    def quantities(self, name: str) -> tuple[str, ...]:
        """What the sensor called ``name`` measures: ``temperature``, ``humidity``…"""
        return QUANTITIES[self._sensor(name).driver]

    async def read_sensor(self, name: str) -> Reading:
        """Measure the sensor called ``name`` now (and hand the reading to each sink)."""
        reading = await self._measure(name)
        for sink in list(self._sinks):
            try:
                await sink.record(reading)
            except Exception as exc:  # one sink's bug must not cost the reading or the others
                log_bug(log, f"a reading of {name} could not be handed on", exc)
        return reading

    async def _measure(self, name: str) -> Reading:
        sensor = self._sensor(name)
        address = sensor.address
        if self._simulated:
            pressure = SIMULATED_HPA if sensor.driver == "bme280" else None
            return Reading(
                name, sensor.driver, sensor.bus, address, SIMULATED_C, SIMULATED_RH, pressure, True
            )

        def work(smbus: SMBus) -> tuple[float, float, float | None]:
            if sensor.driver == "bme280":
                values = bme280.measure(smbus, address)
                return values.temperature_c, values.humidity_pct, values.pressure_hpa
            sample = sht31.measure(smbus, address)
            return sample.temperature_c, sample.humidity_pct, None

        temperature, humidity, pressure = await self._i2c.transact(sensor.bus, address, work)
        return Reading(
            name=name,
            driver=sensor.driver,
            bus=sensor.bus,
            address=address,
            temperature_c=temperature,
            humidity_pct=humidity,
            pressure_hpa=pressure,
        )

    def _sensor(self, name: str) -> Sensor:
        sensor = self._sensors.get(name)
        if sensor is None:
            known = ", ".join(self._sensors) or "none"
            raise ToolError(f"there is no sensor called {name!r}; sensors: {known}")
        return sensor
