"""The I2C tools: scan a bus, read and write device registers, read a named sensor.

Only what ``[hardware.i2c]`` and ``[hardware.sensors]`` allow is offered: no
buses and no sensors means no tools, raw reads and writes need allowlisted
addresses, and ``sensor_read`` needs a configured sensor. Addresses, registers
and bytes may be integers or hex strings such as ``"0x76"``, as people write them.
``sensor_read`` is a ``SensorTool``: the composition root finds its bank there
to record the readings history (``tools/sensor_chart.py``).
"""

from __future__ import annotations

import json
import re
import warnings
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from bot.config import LoadedConfig
from bot.config.hardware import I2C_MAX_TRANSFER
from bot.core.tool_api import Tool, ToolContext, ToolFunction, tool
from bot.security.kit import SecurityKit

if TYPE_CHECKING:  # the drivers are loaded only when a bus or a sensor is configured
    from bot.hardware.i2c import I2cBank
    from bot.hardware.sensors import SensorBank


def _integer(value: object) -> object:
    """``"0x76"`` → 118; anything else is left for pydantic to check and explain."""
    if isinstance(value, str):
        try:
            return int(value.strip().lower(), 0)
        except ValueError:
            return value
    return value


def _byte_list(value: object) -> object:
    """``"0x25 0x01"``, ``"37, 1"`` or a JSON list string → a list; lists pass through."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except ValueError:
                text = text.strip("[]")
        return [token for token in re.split(r"[\s,]+", text) if token]
    return value


# Field constraints go before the validator so the schema keeps minimum/maximum.
Bus = Annotated[int, Field(ge=0, description="I2C bus number"), BeforeValidator(_integer)]
Address = Annotated[
    int,
    Field(ge=0x03, le=0x77, description="7-bit device address: an integer or hex like '0x76'"),
    BeforeValidator(_integer),
]
Register = Annotated[
    int,
    Field(ge=0x00, le=0xFF, description="register address 0x00-0xff (integer or hex string)"),
    BeforeValidator(_integer),
]
Byte = Annotated[int, Field(ge=0x00, le=0xFF), BeforeValidator(_integer)]
Length = Annotated[int, Field(ge=1, le=I2C_MAX_TRANSFER, description="how many bytes to read")]
Data = Annotated[
    list[Byte],
    Field(
        min_length=1,
        max_length=I2C_MAX_TRANSFER,
        description="bytes to write from the register on, each 0-255 (integers or hex strings)",
    ),
    BeforeValidator(_byte_list),
]


class SensorTool(Tool):
    """``sensor_read``, with the bank of sensors it reads."""

    def __init__(self, func: ToolFunction, sensors: SensorBank, **options: Any) -> None:
        super().__init__(func, **options)
        self.sensors = sensors


def _hex(data: bytes) -> str:
    return " ".join(f"0x{b:02x}" for b in data)


def make_tools(bank: I2cBank, sensors: SensorBank, call_timeout_s: float) -> list[Tool]:
    """The tools for ``bank`` and ``sensors``: only those that have something to act on."""
    timeout_s = 2 * call_timeout_s + 5  # the gate may wait its deadline for the bus, then the call
    offered: list[Tool] = []
    if bank.buses:
        offered.append(_scan_tool(bank, timeout_s))
    if bank.buses and bank.addresses:
        with warnings.catch_warnings():
            # "register" is the word people use; on the argument model it only shadows
            # ABCMeta.register, which nothing calls on these models.
            warnings.filterwarnings("ignore", 'Field name "register"', UserWarning)
            offered += _raw_tools(bank, timeout_s)
    if sensors.names:
        offered.append(_sensor_tool(sensors, timeout_s))
    return offered


def _scan_tool(bank: I2cBank, timeout_s: float) -> Tool:
    from bot.hardware.i2c import hex_address

    buses = ", ".join(str(b) for b in bank.buses)

    async def i2c_scan(ctx: ToolContext, bus: Bus) -> str:
        found = await bank.scan(bus)
        if not found:
            return f"bus {bus}: no device answered; check the wiring, power and pull-ups"
        listed = ", ".join(hex_address(a) for a in found)
        return f"bus {bus}: {len(found)} device(s) answered: {listed}"

    description = f"List the addresses that answer on an I2C bus, like i2cdetect. Buses: {buses}."
    return tool(description=description, timeout_s=timeout_s)(i2c_scan)


def _raw_tools(bank: I2cBank, timeout_s: float) -> list[Tool]:
    from bot.hardware.i2c import hex_address

    allowed = (
        f" Buses: {', '.join(str(b) for b in bank.buses)}; addresses: "
        f"{', '.join(hex_address(a) for a in bank.addresses)}. Addresses, registers and "
        "bytes may be integers or hex strings like '0x76'."
    )

    async def i2c_read(
        ctx: ToolContext, bus: Bus, address: Address, register: Register, length: Length = 1
    ) -> str:
        data = await bank.read(bus, address, register, length)
        return (
            f"bus {bus}, device {hex_address(address)}, register 0x{register:02x}, "
            f"{len(data)} byte(s): {_hex(data)}"
        )

    async def i2c_write(
        ctx: ToolContext, bus: Bus, address: Address, register: Register, data: Data
    ) -> str:
        payload = bytes(data)
        await bank.write(bus, address, register, payload)
        return (
            f"wrote {len(payload)} byte(s) to register 0x{register:02x} of "
            f"{hex_address(address)} on bus {bus}: {_hex(payload)}"
        )

    return [
        tool(
            description="Read bytes from a register of an I2C device." + allowed,
            timeout_s=timeout_s,
        )(i2c_read),
        tool(
            description=(
                "Write bytes to a register of an I2C device; this changes the device's "
                "settings or outputs." + allowed
            ),
            risk="medium",
            effect="actuate",
            approval_fields=("bus", "address"),
            timeout_s=timeout_s,
        )(i2c_write),
    ]


def _sensor_tool(sensors: SensorBank, timeout_s: float) -> Tool:
    roster = "; ".join(f"{name}: {sensors.describe(name)}" for name in sensors.names)

    async def sensor_read(ctx: ToolContext, sensor: str) -> str:
        reading = await sensors.read_sensor(sensor)
        return reading.text()

    sensor_read.__annotations__["sensor"] = Annotated[
        Literal[sensors.names], Field(description="which sensor: " + roster)
    ]
    description = (
        "Read temperature, relative humidity and (BME280 only) air pressure from a named "
        f"sensor. Sensors: {roster}."
    )
    return SensorTool(sensor_read, sensors, description=description, timeout_s=timeout_s)


def build(loaded: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """The I2C tools for ``[hardware]``; none when no bus and no sensor is configured."""
    hardware = loaded.config.hardware
    if not hardware.i2c.buses and not hardware.sensors:
        return []
    from bot.hardware.i2c import I2cBank
    from bot.hardware.sensors import SensorBank

    bank = I2cBank(hardware)
    return make_tools(bank, SensorBank(hardware, bank), hardware.call_timeout_s)
