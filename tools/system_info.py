"""The ``system_info`` tool: what the machine PinClaw runs on is, and how it is doing.

Board model (device tree, where there is one), CPU temperature, load, memory,
disk and uptime, read from ``/proc``, ``/sys`` and the device tree: on a
Raspberry Pi and on any other Linux machine, with whatever is missing left out.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
from pathlib import Path

from bot.config import LoadedConfig
from bot.core.tool_api import Tool, ToolContext, tool
from bot.security.kit import SecurityKit

_MODEL_FILES = ("proc/device-tree/model", "sys/firmware/devicetree/base/model")


def read_system(root: Path, data_dir: Path) -> str:
    """The report, reading the kernel's files under ``root`` ("/" outside tests)."""
    lines = [f"Board: {_board(root)}"]
    temperature = _cpu_temperature(root)
    if temperature is not None:
        lines.append(f"CPU temperature: {temperature:.1f} °C")
    cores = os.cpu_count() or 1
    try:
        one, five, fifteen = os.getloadavg()
        lines.append(f"Load: {one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min, {cores} cores)")
    except OSError:
        pass
    memory = _meminfo(root)
    if memory:
        total, available = memory
        used = total - available
        lines.append(
            f"Memory: {used / 2**20:.0f} MiB used of {total / 2**20:.0f} MiB "
            f"({available / 2**20:.0f} MiB available)"
        )
    for label, path in (("Disk (data)", data_dir), ("Disk (/)", root)):
        try:
            usage = shutil.disk_usage(path)
        except OSError:
            continue
        lines.append(
            f"{label}: {usage.used / 2**30:.1f} GiB used of {usage.total / 2**30:.1f} GiB "
            f"({usage.free / 2**30:.1f} GiB free)"
        )
    uptime = _uptime(root)
    if uptime is not None:
        days, rest = divmod(int(uptime), 86400)
        lines.append(f"Uptime: {days} d {rest // 3600} h {rest % 3600 // 60} min")
    return "\n".join(lines)


def _board(root: Path) -> str:
    for name in _MODEL_FILES:
        try:
            model = (root / name).read_bytes().rstrip(b"\0").decode(errors="replace").strip()
        except OSError:
            continue
        if model:
            return model
    return f"{platform.system()} {platform.machine()} (no device tree model)"


def _cpu_temperature(root: Path) -> float | None:
    zones = sorted((root / "sys/class/thermal").glob("thermal_zone*"))
    for zone in zones:
        try:
            kind = (zone / "type").read_text().strip()
            value = int((zone / "temp").read_text().strip())
        except (OSError, ValueError):
            continue
        if "cpu" in kind or "soc" in kind or "x86_pkg" in kind or zone == zones[0]:
            return value / 1000
    return None


def _meminfo(root: Path) -> tuple[int, int] | None:
    try:
        text = (root / "proc/meminfo").read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[name] = int(parts[0]) * 1024
    if "MemTotal" not in values:
        return None
    return values["MemTotal"], values.get("MemAvailable", values.get("MemFree", 0))


def _uptime(root: Path) -> float | None:
    try:
        return float((root / "proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def build(loaded: LoadedConfig, security: SecurityKit, root: Path = Path("/")) -> list[Tool]:
    """``system_info`` needs no configuration."""
    data_dir = loaded.data_dir

    @tool()
    async def system_info(ctx: ToolContext) -> str:
        """Report the machine PinClaw runs on: board model, CPU temperature, load, memory,
        disk space and uptime."""
        return await asyncio.to_thread(read_system, root, data_dir)

    return [system_info]
