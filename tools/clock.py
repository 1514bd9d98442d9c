"""The ``clock`` tool: the current date and time in a timezone."""

from __future__ import annotations

from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from bot.config import LoadedConfig
from bot.core.errors import ToolError
from bot.core.tool_api import Tool, ToolContext, tool
from bot.security.kit import SecurityKit


@tool()
async def clock(
    ctx: ToolContext,
    timezone: Annotated[
        str | None,
        Field(description="IANA timezone such as 'Europe/Lisbon'; omit for the user's own"),
    ] = None,
) -> str:
    """Tell the current date, time and weekday. Use it whenever an answer depends on now."""
    zone = ctx.timezone
    if timezone:
        try:
            zone = ZoneInfo(timezone.strip())
        except (ZoneInfoNotFoundError, ValueError):
            raise ToolError(
                f"unknown timezone {timezone!r}; use an IANA name such as 'America/New_York'"
            ) from None
    now = ctx.now().astimezone(zone)
    offset = now.strftime("%z")
    iso = now.isoformat(timespec="seconds")
    return (
        f"{now:%A %d %B %Y, %H:%M:%S} {now.tzname()} "
        f"(UTC{offset[:3]}:{offset[3:]}, timezone {zone.key}; ISO {iso})"
    )


def build(config: LoadedConfig, security: SecurityKit) -> list[Tool]:
    """The clock tool needs no configuration."""
    return [clock]
