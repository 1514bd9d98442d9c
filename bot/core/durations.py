"""Durations as people write them: "20m", "1h30m", "2 hours 30 minutes", "90s".

No scheduler library is imported here: the config reads durations too.
"""

from __future__ import annotations

import re
from datetime import timedelta

from bot.core.errors import UserError

_UNIT_SECONDS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "wk": 604800, "wks": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


class ScheduleError(UserError):
    """A schedule that cannot be used; ``str(exc)`` is one plain sentence naming the bad part."""


def parse_duration(text: str) -> timedelta:
    """Read "90s", "20m", "1h30m", "2 hours 30 minutes", "1w"; ``ScheduleError`` otherwise."""
    cleaned = " ".join(re.sub(r"\band\b|,", " ", text.lower()).split())
    if not cleaned:
        raise ScheduleError("the duration is empty; write it like 20m, 1h30m or 2 hours")
    if cleaned.startswith("-"):
        raise ScheduleError(f"the duration '{text.strip()}' must be longer than zero")
    if _NUMBER.fullmatch(cleaned):
        raise ScheduleError(
            f"the duration '{cleaned}' has no unit; "
            f"write {cleaned}m for minutes or {cleaned}s for seconds"
        )
    parts = _DURATION_PART.findall(cleaned)
    if not parts or _DURATION_PART.sub("", cleaned).strip():
        raise ScheduleError(
            f"the duration '{text.strip()}' is not understood; write it like 20m, 1h30m or 2 hours"
        )
    seconds = 0.0
    for number, unit in parts:
        if unit not in _UNIT_SECONDS:
            raise ScheduleError(
                f"the duration '{text.strip()}' uses '{unit}', which is not a unit of time; "
                "use s, m, h, d or w"
            )
        seconds += float(number) * _UNIT_SECONDS[unit]
    if seconds <= 0:
        raise ScheduleError(f"the duration '{text.strip()}' must be longer than zero")
    return timedelta(seconds=seconds)


def format_duration(seconds: float) -> str:
    """Seconds as a short duration: 5400 -> "1h30m", 90 -> "1m30s", 86400 -> "1d"."""
    left = round(seconds)
    if left <= 0:
        return "0s"
    out = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, left = divmod(left, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)
