"""The base of every configuration table."""

from __future__ import annotations

import re
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict
from pydantic.fields import FieldInfo


class Section(BaseModel):
    """Base of every config table: unknown keys and wrong types are errors.

    A table's validator is built when it is first used (``defer_build``): a config
    file names a few tables, and the others keep their defaults (``default_section``).
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


def default_section(table: type[Section]) -> Section:
    """``table()``, the table with every default, made without building its validator
    (defaults are valid as they are); its own tables are made the same way."""
    values = {
        name: made_default(field)
        for name, field in table.model_fields.items()
        if field.default_factory is not None
    }
    return table.model_construct(_fields_set=set(), **values)


def made_default(field: FieldInfo) -> Any:
    """What ``field``'s default factory makes: a table by ``default_section``; ``list``
    and ``dict`` called directly (pydantic would first parse their signatures' text)."""
    factory = field.default_factory
    if isinstance(factory, type) and issubclass(factory, Section):
        return default_section(factory)
    if factory is list or factory is dict:
        return factory()
    return field.get_default(call_default_factory=True)


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


_HOURS = re.compile(r"^([01]?\d|2[0-4]):([0-5]\d)-([01]?\d|2[0-4]):([0-5]\d)$")


def is_hours(text: str) -> bool:
    """Whether ``text`` is a range of hours like "08:00-22:00" (spaces allowed)."""
    return bool(_HOURS.match(text.replace(" ", "")))


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
