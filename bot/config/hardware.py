"""``[hardware]`` and ``[home_assistant]``: what is wired up, by name, and nothing else.

Tools accept only the names declared here (raw pin numbers only with
``allow_raw_pins``); serial ports, I2C buses and addresses, and Home Assistant
entities are allowlisted the same way. An empty section means the tools that
need it are not offered at all.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from bot.config.base import Section, check_url, empty_is_none
from bot.core.durations import ScheduleError, parse_duration

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MIN_SAMPLE_S = 60.0


class GpioDevice(Section):
    """One named GPIO device (BCM numbering)."""

    pin: int = Field(ge=0, le=53)
    kind: Literal["output", "input", "pwm"] = "output"
    active_low: bool = False
    pull_up: bool = False
    initial: bool = False
    frequency: float = Field(default=100.0, gt=0, le=100_000)
    bounce_ms: int = Field(
        default=0,
        ge=0,
        le=10_000,
        description=(
            "inputs: debounce in milliseconds (gpiozero's bounce_time): edges closer together "
            "than this after one edge are ignored, so a chattering switch counts once; 0 = none"
        ),
    )


class SerialPort(Section):
    """One allowlisted serial port: a device path, ``socket://host:port`` or ``loop://``."""

    port: str = Field(min_length=1)
    baud: int = Field(default=9600, gt=0)
    line_ending: Literal["\n", "\r\n", "\r"] = "\n"
    timeout_s: float = Field(default=2.0, gt=0, le=60)
    max_bytes: int = Field(default=4096, ge=16, le=1_000_000)


class I2cConfig(Section):
    """Which I2C buses may be scanned, and which addresses read and written."""

    buses: list[int] = Field(default_factory=list)
    addresses: list[int] = Field(default_factory=list)

    @field_validator("addresses")
    @classmethod
    def _seven_bit(cls, value: list[int]) -> list[int]:
        bad = [a for a in value if not 0x03 <= a <= 0x77]
        if bad:
            raise ValueError(f"I2C addresses go from 0x03 to 0x77, got {hex(bad[0])}")
        return value


class Sensor(Section):
    """A named sensor with a built-in driver."""

    driver: Literal["bme280", "sht31"]
    bus: int = Field(default=1, ge=0)
    address: int = Field(ge=0x03, le=0x77)


class HardwareConfig(Section):
    """Everything the hardware tools may touch."""

    pin_factory: Literal["", "mock", "lgpio", "rpigpio", "pigpio", "native"] = ""
    allow_raw_pins: bool = False
    call_timeout_s: float = Field(default=10.0, gt=0, le=300)
    max_pulse_s: float = Field(default=30.0, gt=0, le=600)
    gpio: dict[str, GpioDevice] = Field(default_factory=dict)
    serial: dict[str, SerialPort] = Field(default_factory=dict)
    i2c: I2cConfig = Field(default_factory=I2cConfig)
    sensors: dict[str, Sensor] = Field(default_factory=dict)
    # Readings history: "0" = record only the readings the agent takes.
    sample_every: str = "0"
    keep_readings_days: int = Field(default=30, ge=1, le=3650)

    @field_validator("sample_every")
    @classmethod
    def _check_sample_every(cls, value: str) -> str:
        if value.strip() in ("0", ""):
            return value
        try:
            seconds = parse_duration(value).total_seconds()
        except ScheduleError as exc:
            raise ValueError(str(exc)) from None
        if seconds < MIN_SAMPLE_S:
            raise ValueError(
                f"the shortest interval is 1m (a reading a minute), got {value.strip()!r}"
            )
        return value

    @property
    def sample_every_s(self) -> float:
        """Seconds between scheduled readings of every sensor; 0 = none."""
        text = self.sample_every.strip()
        return 0.0 if text in ("0", "") else parse_duration(text).total_seconds()

    @field_validator("gpio", "serial", "sensors")
    @classmethod
    def _names(cls, value: dict[str, object]) -> dict[str, object]:
        bad = [name for name in value if not _NAME.match(name)]
        if bad:
            raise ValueError(
                f"device name {bad[0]!r}: use lower-case letters, digits and _ (like porch_light)"
            )
        return value

    @model_validator(mode="after")
    def _one_device_per_pin(self) -> HardwareConfig:
        seen: dict[int, str] = {}
        for name, device in self.gpio.items():
            if device.pin in seen:
                raise ValueError(
                    f"gpio.{name}: pin {device.pin} is already used by gpio.{seen[device.pin]}"
                )
            seen[device.pin] = name
        for name, sensor in self.sensors.items():
            if sensor.bus not in self.i2c.buses:
                raise ValueError(
                    f"sensors.{name}: bus {sensor.bus} is not in i2c.buses {self.i2c.buses}"
                )
        return self


class HomeAssistantConfig(Section):
    """Home Assistant over its REST API with a long-lived access token."""

    url: str = ""
    token: SecretStr | None = None
    allow: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=10.0, gt=0, le=120)

    _empty_token_is_none = field_validator("token", mode="before")(empty_is_none)
    _check_url = field_validator("url")(check_url)

    @model_validator(mode="after")
    def _token_with_url(self) -> HomeAssistantConfig:
        if self.url and self.token is None:
            raise ValueError(
                'token: required with url (a long-lived access token, e.g. token = "${HA_TOKEN}")'
            )
        return self
