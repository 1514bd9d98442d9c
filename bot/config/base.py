"""The base of every configuration table."""

from __future__ import annotations

import re
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


def check_url(value: str | None) -> str | None:
    """Validate an http(s) URL ("" and None pass: not set); drop a trailing slash."""
    if not value:
        return value
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


def empty_is_none(value: object) -> object:
    """A secret written as "" means not set (``mode="before"`` validators)."""
    return None if value == "" else value
