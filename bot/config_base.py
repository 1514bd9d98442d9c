"""The base of every configuration table."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """Base of every config table: unknown keys and wrong types are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def check_zone(value: str | None) -> str | None:
    """Validate an IANA timezone name (None passes: it means the host's zone)."""
    if value is None:
        return None
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"expected an IANA timezone name like 'Europe/Lisbon', got {value!r}"
        ) from None
    return value
