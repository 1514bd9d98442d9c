"""``[browser]``: the browser tools (``browser_open``, ``browser_screenshot``).

They drive the system's Chromium through Playwright (the ``pinclaw[browser]``
extra) and are offered only when both are found. One browser process at most,
started on first use and closed after ``idle_s`` without a call; every page it
loads goes through PinClaw's network policy (``[security] allowed_hosts``).
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from bot.config.base import Section

_PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


class BrowserProfile(Section):
    """``[browser.profiles.NAME]``: a browser profile that keeps its cookies between calls.

    Pages of its ``hosts`` are opened with the profile's stored cookies and site
    storage (a login to a dashboard survives); every other page gets a fresh,
    empty browser context.
    """

    hosts: list[str] = Field(
        min_length=1,
        description=(
            "Host names whose pages use this profile, exactly as in their address, like "
            '`["grafana.lan"]`. A host may be in one profile only.'
        ),
    )

    @field_validator("hosts")
    @classmethod
    def _lower_case(cls, value: list[str]) -> list[str]:
        hosts = [host.strip().lower().rstrip(".") for host in value]
        for host in hosts:
            if not host or "/" in host or " " in host:
                raise ValueError(f"{host!r} is not a host name; write it like grafana.lan")
        return hosts


class BrowserConfig(Section):
    """The browser tools (``browser_open``, ``browser_screenshot``): whether they are offered,
    which Chromium they drive, and its limits."""

    enabled: bool = Field(
        default=True,
        description=(
            "Offer the browser tools when Playwright (`pinclaw[browser]`) and a Chromium are "
            "installed; `false` turns them off."
        ),
    )
    executable: str = Field(
        default="",
        description=(
            "The Chromium program to run. Empty: `chromium` or `chromium-browser` on the PATH."
        ),
    )
    idle_s: float = Field(
        default=300.0,
        gt=0,
        description=(
            "Seconds after the last call before the browser is closed; the next call starts "
            "it again."
        ),
    )
    page_timeout_s: float = Field(
        default=20.0, gt=0, le=300, description="Seconds a page may take to load."
    )
    max_memory_mib: int = Field(
        default=768,
        ge=128,
        description=(
            "The most memory Chromium's processes may take together, in MiB (proportional "
            "set size); a page that needs more is stopped and the browser closed. A small "
            "page takes about 320 MiB."
        ),
    )
    width: int = Field(
        default=1280,
        ge=200,
        le=4000,
        description="The browser window's width in pixels (what a screenshot shows).",
    )
    height: int = Field(
        default=800,
        ge=200,
        le=4000,
        description="The browser window's height in pixels (what a screenshot shows).",
    )
    profiles: dict[str, BrowserProfile] = Field(
        default_factory=dict,
        description=(
            "One table per profile, like `[browser.profiles.grafana]`; names are lower-case "
            "letters, digits, `_` and `-`. A profile's cookies and storage are kept in "
            "`DATA_DIR/browser/NAME.json`. None: every page gets a fresh, empty context."
        ),
    )

    @field_validator("profiles")
    @classmethod
    def _check_profiles(cls, value: dict[str, BrowserProfile]) -> dict[str, BrowserProfile]:
        owner: dict[str, str] = {}
        for name, profile in value.items():
            if not _PROFILE_NAME.fullmatch(name):
                raise ValueError(
                    f"{name!r}: name a profile with lower-case letters, digits, _ and - "
                    "(like grafana)"
                )
            for host in profile.hosts:
                if host in owner:
                    raise ValueError(f"{host} is in two profiles: {owner[host]} and {name}")
                owner[host] = name
        return value

    def profile_for(self, host: str) -> str | None:
        """The name of the profile whose hosts include ``host``, if any."""
        host = host.lower().rstrip(".")
        return next((n for n, p in self.profiles.items() if host in p.hosts), None)
