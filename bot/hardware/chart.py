"""A series of sensor values drawn as a PNG line chart, with matplotlib (an optional extra).

matplotlib is imported inside ``render_png`` and nowhere else, so PinClaw
without charts never loads it (it takes seconds to import on a small Pi). The
figure is built with matplotlib's object API on the Agg canvas, not pyplot:
no GUI backend is chosen and nothing global is shared between threads.
``render_png`` is blocking: run it in a worker thread.
"""

from __future__ import annotations

import io
import itertools
import os
import statistics
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.core.errors import ToolError
from bot.store.readings import Point

WIDTH_PX, HEIGHT_PX, DPI = 1000, 500, 100
MISSING = (
    "charts need matplotlib, an optional extra: in PinClaw's folder, in its virtual "
    "environment, run pip install '.[charts]', then restart PinClaw"
)
# A pause this much longer than the usual spacing (and at least MIN_GAP_S) breaks
# the line, so hours without readings are not drawn as a straight slope.
GAP_FACTOR, MIN_GAP_S = 5.0, 900.0
MARKERS_UP_TO = 80
# The least height of the value axis, so that sensor noise is not drawn as a storm.
MIN_SPAN = {"°C": 2.0, "%RH": 5.0, "hPa": 4.0}


class ChartsMissing(ToolError):
    """matplotlib is not installed."""


def render_png(
    points: Sequence[Point],
    path: Path,
    *,
    title: str,
    window: tuple[datetime, datetime],
    zone: ZoneInfo,
    config_dir: Path | None = None,
) -> None:
    """Draw ``points`` (oldest first) over ``window`` and write the PNG to ``path``.

    ``config_dir`` is where matplotlib keeps its font cache when nothing else is
    set (the service's home is read-only). Raises ``ChartsMissing`` without matplotlib.
    """
    png = png_bytes(points, title=title, window=window, zone=zone, config_dir=config_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Written whole, then renamed: a half-written chart is never sent.
    partial = path.with_name(f".{path.name}.part")
    partial.write_bytes(png)
    partial.replace(path)


def png_bytes(
    points: Sequence[Point],
    *,
    title: str,
    window: tuple[datetime, datetime],
    zone: ZoneInfo,
    config_dir: Path | None = None,
) -> bytes:
    """Draw ``points`` (oldest first, at least one) over ``window``; the PNG's bytes.

    As ``render_png``, without a file: the web panel serves these bytes directly.
    """
    if config_dir is not None and "MPLCONFIGDIR" not in os.environ:
        config_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.environ["MPLCONFIGDIR"] = str(config_dir)
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
        from matplotlib.figure import Figure
    except ImportError:
        raise ChartsMissing(MISSING) from None
    times, values = _with_gaps(points, zone)
    # matplotlib.dates has no type information: its calls are marked for mypy.
    xs = [float(x) for x in date2num(times)]  # type: ignore[no-untyped-call]
    start, end = (float(date2num(moment)) for moment in window)  # type: ignore[no-untyped-call]
    figure = Figure(figsize=(WIDTH_PX / DPI, HEIGHT_PX / DPI), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    marker = "o" if len(points) <= MARKERS_UP_TO else ""
    axes.plot(xs, values, marker=marker, markersize=4, linewidth=1.6, color="tab:blue")
    locator = AutoDateLocator(tz=zone)  # type: ignore[no-untyped-call]
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=zone))  # type: ignore[no-untyped-call]
    axes.set_xlim(start, end)
    axes.set_title(title)
    unit = points[-1].unit
    axes.set_ylabel(unit)
    low, high = min(p.value for p in points), max(p.value for p in points)
    pad = max((high - low) * 0.15, (MIN_SPAN.get(unit, 1.0) - (high - low)) / 2)
    axes.set_ylim(low - pad, high + pad)
    axes.ticklabel_format(axis="y", style="plain", useOffset=False)
    axes.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _with_gaps(points: Sequence[Point], zone: ZoneInfo) -> tuple[list[datetime], list[float]]:
    """Times and values, with a NaN wherever readings paused for much longer than usual."""
    spacings = [b.at - a.at for a, b in itertools.pairwise(points)]
    limit = max(GAP_FACTOR * statistics.median(spacings), MIN_GAP_S) if spacings else 0.0
    times: list[datetime] = []
    values: list[float] = []
    for index, point in enumerate(points):
        if index and point.at - points[index - 1].at > limit:
            middle = (point.at + points[index - 1].at) / 2
            times.append(datetime.fromtimestamp(middle, zone))
            values.append(float("nan"))
        times.append(datetime.fromtimestamp(point.at, zone))
        values.append(point.value)
    return times, values
