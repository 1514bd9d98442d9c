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
I2C_MAX_TRANSFER = 32
"""The longest SMBus block transfer the kernel accepts in one call."""


class GpioDevice(Section):
    """A GPIO device the tools may use, by its name: an output (a relay, a LED), an input
    (a button, a door contact) or a PWM output (a fan, a dimmable light)."""

    pin: int = Field(
        ge=0,
        le=53,
        description=(
            "The pin's BCM (GPIO) number, as in `GPIO17`, not its position on the header. "
            "A pin belongs to one device only."
        ),
    )
    kind: Literal["output", "input", "pwm"] = Field(
        default="output",
        description=(
            "`output` is switched on and off (`gpio_write`, `gpio_pulse`); `input` is read "
            "and can fire `gpio:` triggers; `pwm` is an output with a duty cycle "
            "(`gpio_pwm`: a fan's speed, a light's brightness)."
        ),
    )
    active_low: bool = Field(
        default=False,
        description=(
            "On means the pin is low instead of high, as with many relay boards. Inputs: "
            "when not written, it follows `pull_up` (a switch to ground reads on when "
            "closed); with `pull_up = false`, `true` means no internal resistor (the circuit "
            "holds the line high itself)."
        ),
    )
    pull_up: bool = Field(
        default=False,
        description=(
            "Inputs: use the internal pull-up resistor (a switch to ground), and read low as "
            "on unless `active_low = false` is written (a normally-closed switch). `false`: "
            "the internal pull-down, and high is on."
        ),
    )
    initial: bool = Field(
        default=False,
        description=(
            "Outputs and PWM: the state the device is set to when PinClaw first uses it "
            "(`true` is on)."
        ),
    )
    frequency: float = Field(
        default=100.0,
        gt=0,
        le=100_000,
        description="PWM devices: the PWM frequency in hertz; `gpio_pwm` may change it.",
    )
    bounce_ms: int = Field(
        default=0,
        ge=0,
        le=10_000,
        description=(
            "Inputs: debounce time in milliseconds (gpiozero's `bounce_time`): edges closer "
            "than this after an edge are ignored, so a chattering switch counts once. "
            "0: no debouncing."
        ),
    )


class SerialPort(Section):
    """A serial port the tools and ``serial:`` triggers may use, by its name: a device path,
    ``socket://host:port`` or ``loop://``."""

    port: str = Field(
        min_length=1,
        description=(
            "Where the port is: a device path such as `/dev/ttyUSB0`, `socket://HOST:PORT` "
            "for a serial-over-TCP server, or `loop://`, which reads back what is written "
            "(for trying things out)."
        ),
    )
    baud: int = Field(
        default=9600, gt=0, description="The line speed in baud; it must match the device's."
    )
    line_ending: Literal["\n", "\r\n", "\r"] = Field(
        default="\n",
        description=(
            'What ends a line: `"\\n"`, `"\\r\\n"` or `"\\r"`. `serial_send` adds it to the '
            "line it writes and reads the reply up to it; a `serial:` trigger splits what "
            "arrives at it."
        ),
    )
    timeout_s: float = Field(
        default=2.0,
        gt=0,
        le=60,
        description=(
            "Seconds `serial_send` waits for the device to take the line, and for its reply."
        ),
    )
    max_bytes: int = Field(
        default=4096,
        ge=16,
        le=1_000_000,
        description=(
            "The longest reply `serial_send` reads, in bytes; a longer one is cut there and "
            "the model is told so."
        ),
    )


class I2cConfig(Section):
    """Which I2C buses may be used, and which device addresses read and written directly."""

    buses: list[int] = Field(
        default_factory=list,
        description=(
            "I2C bus numbers PinClaw may use, like `[1]` (the header's SDA/SCL pins on a "
            "Raspberry Pi): `i2c_scan` lists what answers on them, and every sensor must be "
            "on one of them. Empty: no bus may be used, so no I2C tools and no sensors."
        ),
    )
    addresses: list[int] = Field(
        default_factory=list,
        description=(
            "Device addresses (7-bit, `0x03` to `0x77`) that `i2c_read` and `i2c_write` may "
            "use on those buses, like `[0x48]`. Empty: no raw reads or writes at all; the "
            "configured sensors still work through their drivers."
        ),
    )

    @field_validator("addresses")
    @classmethod
    def _seven_bit(cls, value: list[int]) -> list[int]:
        bad = [a for a in value if not 0x03 <= a <= 0x77]
        if bad:
            raise ValueError(f"I2C addresses go from 0x03 to 0x77, got {hex(bad[0])}")
        return value


class Sensor(Section):
    """A sensor that ``sensor_read`` reads by its name, with a built-in driver."""

    driver: Literal["bme280", "sht31"] = Field(
        description=(
            "The chip: `bme280` measures temperature, humidity and pressure; `sht31` "
            "temperature and humidity."
        ),
    )
    bus: int = Field(
        default=1,
        ge=0,
        description="The I2C bus it is on; it must be listed in `[hardware.i2c] buses`.",
    )
    address: int = Field(
        ge=0x03,
        le=0x77,
        description=(
            "Its I2C address, like `0x76` or `0x77` for a BME280, `0x44` or `0x45` for an "
            "SHT31. It need not be in `[hardware.i2c] addresses`."
        ),
    )


class HardwareConfig(Section):
    """The GPIO devices, serial ports, I2C buses and sensors the hardware tools may touch, by
    name, and nothing else; with none declared, those tools are not offered."""

    pin_factory: Literal["", "mock", "lgpio", "rpigpio", "pigpio", "native"] = Field(
        default="",
        description=(
            "gpiozero's pin library. Empty: gpiozero's default (lgpio on a Raspberry Pi); "
            "`mock` simulates the board on any machine (pins, and the readings and I2C scans "
            "of the configured sensors, each marked as simulated); `lgpio`, `rpigpio`, "
            "`pigpio` or `native` pick one."
        ),
    )
    allow_raw_pins: bool = Field(
        default=False,
        description=(
            "Let the GPIO tools also take bare BCM pin numbers (`GPIO17`). Off: only the "
            "devices named in `[hardware.gpio]` can be touched."
        ),
    )
    call_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description=(
            "Seconds one device call (GPIO, I2C, serial) may take before it gives up, so a "
            "stuck device gives a clear result instead of freezing the chats."
        ),
    )
    max_pulse_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="The longest `gpio_pulse` in seconds (a press of a garage door button).",
    )
    gpio: dict[str, GpioDevice] = Field(
        default_factory=dict,
        description=(
            "One table per device, like `[hardware.gpio.porch_light]` with `pin = 17`; names "
            "are lower-case letters, digits and `_`. None (and `allow_raw_pins` off): no GPIO "
            "tools."
        ),
    )
    serial: dict[str, SerialPort] = Field(
        default_factory=dict,
        description=(
            "One table per port, like `[hardware.serial.arduino]` with "
            '`port = "/dev/ttyUSB0"`; names are lower-case letters, digits and `_`. None: no '
            "serial tools."
        ),
    )
    i2c: I2cConfig = Field(
        default_factory=I2cConfig,
        description=(
            "`pinclaw hardware` scans each of these buses and shows whether the configured "
            "sensors answer."
        ),
    )
    sensors: dict[str, Sensor] = Field(
        default_factory=dict,
        description=(
            "One table per sensor, like `[hardware.sensors.greenhouse]` with "
            '`driver = "bme280"`, `bus = 1` and `address = 0x76`; names are lower-case '
            "letters, digits and `_`."
        ),
    )
    sample_every: str = Field(
        default="0",
        description=(
            "How often `pinclaw run` also reads every sensor for the readings history "
            "(`sensor_chart`), as a duration like `10m` (1m at the shortest), and how often "
            "`sensor:` triggers read theirs by default. `0`: no scheduled readings; what the "
            "agent and triggers read is still recorded."
        ),
    )
    keep_readings_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description="Days sensor readings are kept in the database; older ones are deleted.",
    )

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
    """Home Assistant, reached over its REST API with a long-lived access token, and the
    entities the agent may control there."""

    url: str = Field(
        default="",
        description=(
            "Home Assistant's address, like `http://homeassistant.local:8123`. Empty: no "
            "Home Assistant tools and no `ha:` triggers."
        ),
    )
    token: SecretStr | None = Field(
        default=None,
        description=(
            "A long-lived access token (made on your profile page in Home Assistant), "
            'required with `url`; write it as `"${HA_TOKEN}"` to keep it out of the file.'
        ),
    )
    allow: list[str] = Field(
        default_factory=list,
        description=(
            "The entities the agent may control (`ha_call_service`): entity ids like "
            '`["switch.garage_door"]`, or whole domains like `"light"`. Empty means it may '
            "control nothing, only read states; once the list has entries, reading and "
            "`ha:` triggers are limited to those entities too."
        ),
    )
    timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=120,
        description=(
            "Seconds to wait for each answer from Home Assistant (a REST request, or a reply "
            "on the WebSocket that `ha:` triggers use)."
        ),
    )

    _empty_token_is_none = field_validator("token", mode="before")(empty_is_none)
    _check_url = field_validator("url")(check_url)

    @model_validator(mode="after")
    def _token_with_url(self) -> HomeAssistantConfig:
        if self.url and self.token is None:
            raise ValueError(
                'token: required with url (a long-lived access token, e.g. token = "${HA_TOKEN}")'
            )
        return self
