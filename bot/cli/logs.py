"""Logging set-up: one format, to stderr, at a level chosen per command."""

from __future__ import annotations

import logging
import sys

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def setup_logging(level: str) -> None:
    """Send log records at ``level`` and above to stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LEVELS.get(level, logging.INFO))
    # httpx logs every request at INFO; that is noise next to PinClaw's own lines.
    logging.getLogger("httpx").setLevel(max(root.level, logging.WARNING))
