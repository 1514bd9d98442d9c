"""The GPIO tools: read, switch, dim and pulse the devices named in ``[hardware.gpio]``.

They are offered only when devices are configured (or ``allow_raw_pins`` is on),
and only those that fit: no ``gpio_pwm`` without a PWM device, no switching
without an output. Reading and listing are low risk; switching, dimming and
pulsing are medium risk with ``effect="actuate"``, so supervised mode asks a
person first, and an "Always allow" answer covers that one device. A call for a
device that does not exist or cannot do it is refused before anyone is asked.

One ``GpioBank`` serves all the tools and ``GpioTool.bank`` exposes it (the
tests reach the simulated pins through it). Tools have no shutdown hook: the
bank closes its devices when the process exits, or earlier by ``bank.close()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from bot.config import LoadedConfig
from bot.core.errors import ToolError
from bot.core.tool_api import Assessment, Tool, ToolContext, ToolFunction
from bot.security.kit import SecurityKit

if TYPE_CHECKING:  # the driver is loaded only when devices are configured
    from bot.hardware.gpio import GpioBank, Kind, Use

Device = Annotated[
    str, Field(description="the device's name from this tool's description, e.g. porch_light")
]
On = Annotated[bool, Field(description="true to switch it on, false to switch it off")]
DutyPercent = Annotated[
    float,
    Field(
        ge=0,
        le=100,
        description="percent of the time the pin is on: 0 = off, 50 = half, 100 = fully on",
    ),
]
FrequencyHz = Annotated[
    float | None,
    Field(gt=0, le=100_000, description="PWM frequency in Hz; omit to keep the current one"),
]
Seconds = Annotated[float, Field(gt=0, description="how long to keep it on, in seconds")]


class GpioTool(Tool):
    """A GPIO tool, with the bank of devices it drives."""

    def __init__(self, func: ToolFunction, bank: GpioBank, **options: Any) -> None:
        super().__init__(func, **options)
        self.bank = bank


def build(loaded: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """The GPIO tools that fit ``[hardware.gpio]``; none when nothing is configured."""
    config = loaded.config.hardware
    if not config.gpio and not config.allow_raw_pins:
        return []
    from bot.hardware.gpio import GpioBank

    bank = GpioBank(config)
    kinds: set[str] = {spec.kind for spec in config.gpio.values()}
    if config.allow_raw_pins:
        kinds |= {"output", "input", "pwm"}
    timeout = 2 * config.call_timeout_s + 5  # waiting for the gate, then the call itself

    def devices(*wanted: Kind) -> str:
        named = [
            f"{name} ({spec.kind}, pin {spec.pin})"
            for name, spec in config.gpio.items()
            if spec.kind in wanted
        ]
        if config.allow_raw_pins:
            named.append("or any BCM pin number such as GPIO17")
        return "Devices: " + ", ".join(named) + "."

    def gpio_tool(description: str, **options: Any) -> Callable[[ToolFunction], GpioTool]:
        return lambda func: GpioTool(
            func, bank, description=description, **{"timeout_s": timeout, **options}
        )

    def changing(device: str, use: Use, what: str) -> Assessment:
        try:
            label = bank.target(device, use).label
        except ToolError as exc:  # refused outright: nobody is asked about a bad call
            return Assessment("medium", str(exc), forbidden=True)
        return Assessment("medium", what.format(label))

    @gpio_tool(
        "Read the current state of a GPIO device: an input such as a door sensor or a "
        "button, or an output PinClaw switches. " + devices("output", "input", "pwm")
    )
    async def gpio_read(ctx: ToolContext, device: Device) -> str:
        reading = await bank.read(device)
        return f"{reading.target.label} is {reading.state()}."

    @gpio_tool("List the GPIO devices PinClaw may use, with their kind, pin and current state.")
    async def gpio_list(ctx: ToolContext) -> str:
        try:
            readings = await bank.readings()
        except ToolError as exc:
            lines = [f"{name}: {spec.kind} on pin {spec.pin}" for name, spec in config.gpio.items()]
            lines.append(f"(their states could not be read: {exc})")
        else:
            lines = [
                f"{r.target.name}: {r.target.spec.kind} on pin {r.target.spec.pin}, {r.state()}"
                for r in readings
            ]
        if config.allow_raw_pins:
            lines.append("Raw pins are allowed too: any BCM pin number, such as GPIO17.")
        return "\n".join(lines)

    def assess_write(ctx: ToolContext, device: str, on: bool) -> Assessment:
        return changing(device, "switch", "switches {} " + ("on" if on else "off"))

    @gpio_tool(
        "Switch a GPIO output on or off (a relay, a light, a buzzer). On means active, "
        "whatever the wiring. " + devices("output", "pwm"),
        risk="medium",
        effect="actuate",
        assess=assess_write,
        approval_fields=("device",),
    )
    async def gpio_write(ctx: ToolContext, device: Device, on: On) -> str:
        reading = await bank.write(device, on)
        return f"{reading.target.label} is now {reading.state()}."

    def assess_pwm(
        ctx: ToolContext, device: str, duty_percent: float, frequency_hz: float | None
    ) -> Assessment:
        return changing(device, "pwm", f"sets {{}} to {duty_percent:g}% duty")

    @gpio_tool(
        "Set how much of the time a PWM output is on: the brightness of an LED, the speed "
        "of a fan. " + devices("pwm"),
        risk="medium",
        effect="actuate",
        assess=assess_pwm,
        approval_fields=("device",),
    )
    async def gpio_pwm(
        ctx: ToolContext,
        device: Device,
        duty_percent: DutyPercent,
        frequency_hz: FrequencyHz = None,
    ) -> str:
        reading = await bank.pwm(device, duty_percent / 100, frequency_hz)
        return f"{reading.target.label} is now {reading.state()}."

    def assess_pulse(ctx: ToolContext, device: str, seconds: float) -> Assessment:
        return changing(device, "switch", f"switches {{}} on for {seconds:g} s")

    @gpio_tool(
        "Switch a GPIO output on for some seconds, then off again (a door opener, a "
        f"chime); it returns once the pulse is over. At most {config.max_pulse_s:g} s. "
        + devices("output", "pwm"),
        risk="medium",
        effect="actuate",
        assess=assess_pulse,
        approval_fields=("device",),
        timeout_s=timeout + config.max_pulse_s,
    )
    async def gpio_pulse(ctx: ToolContext, device: Device, seconds: Seconds) -> str:
        reading = await bank.pulse(device, seconds)
        return f"{reading.target.label} was on for {seconds:g} s and is now {reading.state()}."

    offered: list[Tool] = [gpio_list, gpio_read]
    if kinds & {"output", "pwm"}:
        offered += [gpio_write, gpio_pulse]
    if "pwm" in kinds:
        offered.append(gpio_pwm)
    return offered
