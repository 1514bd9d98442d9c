"""The readings history and ``sensor_chart``: a PNG of a sensor's recent values, for the chat.

``open_sensor_history`` is called by the composition root once the tools are
built: it opens the history (``bot/hardware/history.py``) on the database,
hands it every reading ``sensor_read``'s bank takes, and adds ``sensor_chart``.
The chart is drawn by ``bot/hardware/chart.py`` (matplotlib, the optional
``charts`` extra) into ``charts/`` in the workspace; the model then sends it
with ``send_file``. Without matplotlib the tool still answers with the numbers
and says how to add charts.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo

from pydantic import Field

from bot.agent.tool_registry import ToolRegistry
from bot.config import LoadedConfig
from bot.core.errors import ToolError
from bot.core.tool_api import Tool, ToolContext, tool
from bot.hardware.chart import HEIGHT_PX, WIDTH_PX, ChartsMissing, render_png
from bot.hardware.history import DAY_S, SensorHistory
from bot.hardware.sensors import UNITS
from bot.store.db import Database
from bot.store.readings import Point, ReadingStore
from tools.i2c import SensorTool

CHARTS_DIR = "charts"
# First use on a small Pi: importing matplotlib and building its font cache.
RENDER_TIMEOUT_S = 120.0
_OWN_CHART = re.compile(r"^[a-z][a-z0-9_]*-[a-z]+-\d{8}-\d{4}\.png$")


async def open_sensor_history(
    db: Database, loaded: LoadedConfig, tools: ToolRegistry
) -> SensorHistory | None:
    """The readings history of ``sensor_read``'s sensors, recording, with ``sensor_chart``
    added to ``tools``; None when there is no ``sensor_read`` (no sensors, or disabled)."""
    reader = tools.get("sensor_read")
    if not isinstance(reader, SensorTool):
        return None
    store = ReadingStore(db)
    await store.setup()
    history = SensorHistory(
        store, reader.sensors, keep_days=loaded.config.hardware.keep_readings_days
    )
    await history.prune()
    reader.sensors.record_to(history)
    if "sensor_chart" not in loaded.config.tools.disabled:
        tools.add(chart_tool(history, cache_dir=loaded.data_dir / "cache" / "matplotlib"))
    return history


def chart_tool(history: SensorHistory, *, cache_dir: Path | None = None) -> Tool:
    """``sensor_chart`` over ``history``; ``cache_dir`` holds matplotlib's font cache."""
    sensors = history.sensors
    measured = [q for q in UNITS if any(q in sensors.quantities(n) for n in sensors.names)]
    roster = "; ".join(f"{name}: {', '.join(sensors.quantities(name))}" for name in sensors.names)
    drawing = asyncio.Lock()  # one chart at a time: each holds a figure in memory

    async def sensor_chart(
        ctx: ToolContext, sensor: str, quantity: str = "temperature", hours: float = 24
    ) -> str:
        if quantity not in sensors.quantities(sensor):
            measures = " and ".join(sensors.quantities(sensor))
            raise ToolError(f"{sensor} does not measure {quantity}; it measures {measures}")
        now = ctx.now().astimezone(ctx.timezone)
        since = now - timedelta(hours=hours)
        points = await history.series(sensor, quantity, since.timestamp())
        span = _span(hours)
        if not points:
            return await _no_readings(history, sensor, quantity, span, ctx.timezone)
        summary = summarize(points, sensor, quantity, span, ctx.timezone)
        relative = f"{CHARTS_DIR}/{sensor}-{quantity}-{now:%Y%m%d-%H%M}.png"
        target = _chart_path(ctx.workspace, relative)
        title = f"{sensor} {quantity}, last {span}"
        try:
            async with drawing:
                await asyncio.to_thread(
                    render_png,
                    points,
                    target,
                    title=title,
                    window=(since, now),
                    zone=ctx.timezone,
                    config_dir=cache_dir,
                )
        except ChartsMissing as exc:
            return f"No chart was drawn: {exc}.\n{summary}"
        _drop_old_charts(target.parent, history.keep_days)
        return (
            f"Chart saved as {relative} (a PNG image, {WIDTH_PX}x{HEIGHT_PX} pixels).\n"
            f"{summary}\n"
            f"To show it to the user, call send_file with path {relative}."
        )

    sensor_chart.__annotations__["sensor"] = Annotated[
        Literal[sensors.names], Field(description="which sensor: " + roster)
    ]
    sensor_chart.__annotations__["quantity"] = Annotated[
        Literal[tuple(measured)], Field(description="what to chart")
    ]
    sensor_chart.__annotations__["hours"] = Annotated[
        float,
        Field(
            gt=0,
            le=history.keep_days * 24,
            description=f"how far back, in hours (readings are kept {history.keep_days} days)",
        ),
    ]
    description = (
        "Draw a line chart (PNG) of a sensor's recent readings and save it in the "
        "workspace; the result gives its path and the lowest, highest and latest values. "
        "Readings are recorded whenever sensor_read is used (and on a schedule if the owner "
        "set one). To show the chart to the user, send the file with send_file. "
        f"Sensors: {roster}."
    )
    return tool(description=description, timeout_s=RENDER_TIMEOUT_S)(sensor_chart)


def summarize(
    points: Sequence[Point], sensor: str, quantity: str, span: str, zone: ZoneInfo
) -> str:
    """``greenhouse temperature, last 24 h: 48 readings from … to …; lowest …``."""
    unit = points[-1].unit
    low = min(points, key=lambda p: p.value)
    high = max(points, key=lambda p: p.value)
    last = points[-1]

    def value(point: Point) -> str:
        return f"{point.value:.1f} {unit} at {_local(point.at, zone)}"

    count = f"{len(points)} reading{'s' if len(points) != 1 else ''}"
    return (
        f"{sensor} {quantity}, last {span}: {count} from {_local(points[0].at, zone)} "
        f"to {_local(last.at, zone)}; lowest {value(low)}, highest {value(high)}, "
        f"latest {value(last)}."
    )


async def _no_readings(
    history: SensorHistory, sensor: str, quantity: str, span: str, zone: ZoneInfo
) -> str:
    latest = await history.latest(sensor, quantity)
    if latest is None:
        return (
            f"There are no recorded {quantity} readings of {sensor} yet, so there is no chart. "
            "Readings are recorded each time sensor_read is used; read the sensor first, "
            "or chart again later."
        )
    return (
        f"There are no {quantity} readings of {sensor} from the last {span}, so there is no "
        f"chart. The latest is from {_local(latest.at, zone)}; ask for a longer period."
    )


def _chart_path(workspace: Path, relative: str) -> Path:
    """``relative`` inside the workspace, refusing a ``charts`` link that leads elsewhere."""
    root = workspace.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise ToolError(
            f"the {CHARTS_DIR} folder in the workspace leads outside it; "
            "remove or rename it and try again"
        )
    return target


def _drop_old_charts(folder: Path, keep_days: int) -> None:
    """Delete charts this tool drew that are older than the readings they showed."""
    cutoff = time.time() - keep_days * DAY_S
    for path in folder.glob("*.png"):
        try:
            if _OWN_CHART.match(path.name) and path.stat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            continue


def _span(hours: float) -> str:
    if hours >= 48 and hours % 24 == 0:
        return f"{hours / 24:g} days"
    return f"{hours:g} h"


def _local(at: float, zone: ZoneInfo) -> str:
    return datetime.fromtimestamp(at, zone).strftime("%Y-%m-%d %H:%M")
