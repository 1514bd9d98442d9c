"""The daemon's log file: rotated by size, readable by its owner only (see ``bot.cli.logs``)."""

from __future__ import annotations

import errno
import logging
import os
import sys
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
    _full = False  # the disk refused the last line: told once on stderr, not per line
    _refused = False  # the line being written now was refused for lack of space

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record``; a full disk drops lines with one notice (none per line)."""
        self._refused = False
        super().emit(record)
        if self._full and not self._refused:
            self._full = False
            sys.stderr.write(f"pinclaw: the log file {self.baseFilename} is written again\n")

    def handleError(self, record: logging.LogRecord) -> None:
        """A full disk is said once on stderr (the journal, under systemd); lines are dropped
        until there is space. Any other failure is reported as logging does."""
        error = sys.exc_info()[1]
        if not (isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)):
            super().handleError(record)
            return
        self._refused = True
        if not self._full:
            self._full = True
            sys.stderr.write(
                f"pinclaw: the log file {self.baseFilename} cannot be written (no space left "
                "on its disk); log lines are dropped until there is space\n"
            )

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
