"""What every benchmark here shares: true percentiles, the machine line, the final line.

Percentiles are nearest-rank: the p-th percentile of n samples is the
``ceil(p * n / 100)``-th smallest, one of the samples, computed in integers so
that 0.9 * 200 is 180 and not 180.00000000000003. A percentile needs enough
samples to mean anything: p99 from fewer than 100 is not given (``nan`` in the
final line, a note in the table), nor p90 from fewer than 10.

Each benchmark ends with one line of ``key=value`` pairs (keys stable, values
plain numbers, ``nan`` for a figure it could not give), so a script can read the
figures without parsing the table.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from importlib import metadata
from pathlib import Path

NAN = float("nan")

# The libraries whose versions decide the channel figures.
CHANNEL_PACKAGES = (
    "python-telegram-bot",
    "discord.py",
    "slack-bolt",
    "httpx",
    "pydantic",
    "aiosqlite",
)


def percentile(values: list[float], pct: int) -> float:
    """The nearest-rank ``pct``-th percentile (``pct`` in 1..100), or nan when there are
    fewer samples than it needs (100 for p99, 10 for p90, 2 for p50)."""
    if not 0 < pct <= 100:
        raise ValueError(f"percentile {pct} is not in 1..100")
    if len(values) < min_samples(pct):
        return NAN
    rank = -(-pct * len(values) // 100)  # ceil(pct * n / 100), in integers
    return sorted(values)[rank - 1]


def min_samples(pct: int) -> int:
    """The fewest samples that let a ``pct``-th percentile differ from the maximum."""
    return 1 if pct == 100 else math.ceil(100 / (100 - pct))


def median(values: list[float]) -> float:
    """The median, nan for no values."""
    return statistics.median(values) if values else NAN


def shown(value: float, unit: str, digits: int = 1, pct: int | None = None, n: int = 0) -> str:
    """A figure for a table cell; a missing percentile says why."""
    if math.isnan(value):
        if pct is not None:
            return f"n/a (p{pct} needs {min_samples(pct)} samples, {n} taken)"
        return "n/a"
    return f"{value:.{digits}f}{unit}"


def cpu_model() -> str:
    """The CPU model from /proc/cpuinfo (or what ``platform`` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "Hardware"):
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cores() -> int:
    """CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def versions(packages: tuple[str, ...]) -> str:
    """``name version`` for each installed package, comma separated."""
    found = []
    for name in packages:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def machine_line(packages: tuple[str, ...] = ()) -> str:
    """One line naming the machine, the versions and the date, for a figures table."""
    parts = [
        time.strftime("%Y-%m-%d"),
        f"{cpu_model()}, {cores()} cores",
        f"Python {platform.python_version()}",
    ]
    if packages:
        parts.append(versions(packages))
    return "Measured " + "; ".join(parts)


def final_line(figures: dict[str, float | int]) -> str:
    """``key=value`` pairs: integers as they are, other numbers to 3 decimals, nan as nan."""
    pairs = []
    for key, value in figures.items():
        if isinstance(value, int):
            pairs.append(f"{key}={value}")
        elif math.isnan(value):
            pairs.append(f"{key}=nan")
        else:
            pairs.append(f"{key}={value:.3f}")
    return " ".join(pairs)


def rss_mib(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of a process, in MiB, from /proc/PID/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024
