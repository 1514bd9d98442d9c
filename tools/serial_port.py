"""The serial tools: ``serial_list`` shows the ports, ``serial_send`` talks to one.

Only the ports named in ``[hardware.serial]`` can be used, by their names;
without any, neither tool is offered. ``serial_send`` writes one line and
returns the device's one-line reply; it asks for approval in supervised mode,
and "always allow" is narrowed to the port. The device code lives in
``bot.hardware.serial_io``; pyserial is loaded on the first call, not here.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from bot.config import LoadedConfig
from bot.core.errors import ToolError
from bot.core.tool_api import Tool, ToolContext, ToolResult, tool
from bot.security.kit import SecurityKit

if TYPE_CHECKING:  # the device code is loaded only when ports are configured
    from bot.hardware.serial_io import PortInfo, SerialLink

MAX_LINE = 1000
"""The longest line ``serial_send`` accepts, in characters."""

PortName = Annotated[str, Field(description="the port's configured name, as serial_list shows")]
Line = Annotated[
    str,
    Field(
        max_length=MAX_LINE,
        description="one line of text for the device, without a line ending (PinClaw adds it)",
    ),
]


def build(loaded: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """``serial_list`` and ``serial_send`` for the configured ports; none without ports."""
    hardware = loaded.config.hardware
    if not hardware.serial:
        return []
    from bot.hardware import serial_io

    links = serial_io.make_links(hardware)
    names = ", ".join(links)
    # Room for one call waiting its turn at the gate and then running to the gate's deadline.
    deadline = max(
        serial_io.gate_timeout(p, hardware.call_timeout_s) for p in hardware.serial.values()
    )
    timeout_s = max(loaded.config.tools.timeout_s, 2 * deadline + 5)

    @tool(
        description=(
            f"List the serial ports: the configured ones ({names}) and whether each is plugged "
            "in, and every serial port this machine has, with USB vendor and product ids."
        )
    )
    async def serial_list(ctx: ToolContext) -> str:
        system = await asyncio.to_thread(serial_io.list_ports)
        return "\n".join([*_configured(links, system), *_system(links, system)])

    @tool(
        risk="medium",
        effect="actuate",
        untrusted_output=True,
        timeout_s=timeout_s,
        approval_fields=("port",),
        taints=lambda ctx, values: f"the serial port {getattr(values, 'port', '')}".strip(),
        description=(
            f"Send one line of text to a serial device (ports: {names}) and return the "
            "line it answers. Use the device's own commands; the reply ends at its line ending."
        ),
    )
    async def serial_send(ctx: ToolContext, port: PortName, line: Line) -> ToolResult:
        link = links.get(port.strip())
        if link is None:
            raise ToolError(f"there is no serial port named {port!r}; the ports are: {names}")
        if "\n" in line or "\r" in line:
            raise ToolError(
                "send one line at a time, without line breaks: "
                "PinClaw adds the port's line ending itself"
            )
        reply = await link.send(line)
        if reply.complete:
            return ToolResult.success(reply.text or "[the device answered an empty line]")
        return ToolResult.failure(reply.note, output=reply.text)

    return [serial_list, serial_send]


def _configured(links: dict[str, SerialLink], system: list[PortInfo]) -> list[str]:
    from bot.hardware import serial_io

    by_device = {info.device: info for info in system}
    lines = ["Configured ports:"]
    for name, link in links.items():
        config = link.config
        present = serial_io.is_present(config.port)
        if config.port.startswith("loop://"):
            state = "loopback for tests: answers with what it is sent"
        elif present is None:
            state = "network port, reached when used"
        elif present:
            info = by_device.get(_real(config.port))
            state = "plugged in" + (f", {_identity(info)}" if info else "")
        else:
            state = "NOT PRESENT: unplugged, or the path is wrong"
        ending = repr(config.line_ending).strip("'")
        lines.append(
            f"- {name}: {config.port} ({state}); {config.baud} baud, lines end with {ending}"
        )
    return lines


def _system(links: dict[str, SerialLink], system: list[PortInfo]) -> list[str]:
    if not system:
        return ["Serial ports on this machine: none found"]
    used = {_real(link.config.port): name for name, link in links.items()}
    lines = ["Serial ports on this machine:"]
    for info in system:
        mine = f" [configured as {used[info.device]}]" if info.device in used else ""
        lines.append(f"- {info.device}: {_identity(info)}{mine}")
    return lines


def _identity(info: PortInfo) -> str:
    parts = [info.description or "no description"]
    if info.usb_id:
        parts.append(f"USB {info.usb_id}")
    if info.manufacturer:
        parts.append(f"made by {info.manufacturer}")
    if info.serial_number:
        parts.append(f"serial number {info.serial_number}")
    return ", ".join(parts)


def _real(port: str) -> str:
    """A device path with its links resolved (``/dev/serial/by-id/...`` to ``/dev/ttyACM0``)."""
    from bot.hardware import serial_io

    return os.path.realpath(port) if serial_io.is_device_path(port) else port
