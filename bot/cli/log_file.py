"""The daemon's log file: rotated by size, readable by its owner only (see ``bot.cli.logs``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class LogFile:
    """Where the log is written and how it rotates: at ``max_bytes``, keeping ``backups``."""

    path: Path
    max_bytes: int
    backups: int


class PrivateRotatingFileHandler(RotatingFileHandler):
    """Rotates by size; every file it creates is readable by its owner only (0600)."""

    pinclaw_log_file = True  # how ``setup_logging`` knows the handlers it may close

    def _open(self) -> Any:
        return open(  # the handler owns the stream and closes it
            self.baseFilename,
            self.mode,
            encoding=self.encoding,
            errors=self.errors,
            opener=_private,
        )


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)
