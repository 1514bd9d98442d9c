"""PinClaw's version: one source, the installed package's metadata (pyproject's ``version``).

Read on first use, not on import: ``importlib.metadata`` costs a few milliseconds
that a cold ``pinclaw agent -m`` does not need to pay.
"""

from __future__ import annotations

import functools

UNKNOWN = "0+unknown"
"""What a source tree run without installing reports (no package metadata to read)."""


@functools.cache
def pinclaw_version() -> str:
    """The installed PinClaw's version, e.g. ``0.2.0``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pinclaw")
    except PackageNotFoundError:
        return UNKNOWN
