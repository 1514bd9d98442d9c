"""Logging set-up: the level, where the lines go, their format, and libraries' chatter.

Every command logs to stderr: ``pinclaw agent`` and ``pinclaw chat`` only errors
unless ``--log-level`` says otherwise. ``pinclaw run`` follows ``[general] log_level``
and ``[daemon]``: with ``log_file`` set the whole log goes to that file, rotated by
size, and stderr (the journal under systemd) keeps the warnings and errors;
``log_format = "json"`` writes one JSON object per line instead of text.
"""

from __future__ import annotations

import json
import logging
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bot.cli.log_noise import OneLine
from bot.core.errors import ConfigError

if TYPE_CHECKING:
    from bot.cli.log_file import LogFile
    from bot.config import LoadedConfig

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}

# Libraries that report routine work at INFO: APScheduler's "Added job" and "Running
# job", discord.py's gateway sessions, every HTTP request and access. Their warnings
# still show (one line each, ``bot.cli.log_noise``); the rest only at debug.
CHATTY = (
    "apscheduler",
    "discord",
    "telegram",
    "httpx",
    "httpcore",
    "slack_bolt",
    "slack_sdk",
    "aiohttp.access",
)

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TEXT_DATES = "%Y-%m-%d %H:%M:%S"


def setup_logging(level: str, *, json_lines: bool = False, log_file: LogFile | None = None) -> None:
    """Send records at ``level`` and above to stderr, or to ``log_file`` (stderr then
    keeps warnings and up); ``OSError`` when the file cannot be opened."""
    threshold = LEVELS.get(level, logging.INFO)
    formatter = JsonLines() if json_lines else logging.Formatter(TEXT_FORMAT, TEXT_DATES)
    handlers: list[logging.Handler] = []
    if log_file is not None:
        handlers.append(open_log_file(log_file))  # first: it raises before anything changes
    stderr = StderrHandler(sys.stderr)
    handlers.append(stderr)
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.setLevel(threshold)
        if threshold > logging.DEBUG:  # a library's traceback or error page: one line
            handler.addFilter(OneLine())
    if log_file is not None:
        stderr.setLevel(max(threshold, logging.WARNING))
    root = logging.getLogger()
    for old in root.handlers:
        if getattr(old, "pinclaw_log_file", False):  # ours; any other is not ours to close
            old.close()
    root.handlers[:] = handlers
    root.setLevel(threshold)
    for name in CHATTY:
        logging.getLogger(name).setLevel(
            logging.NOTSET if threshold <= logging.DEBUG else max(threshold, logging.WARNING)
        )


class StderrHandler(logging.StreamHandler[TextIO]):
    """A stream handler for stderr whose reader may go away (``2>&1 | head``, a closed
    pipe): a line that cannot be written is dropped, not reported with a traceback."""

    def handleError(self, record: logging.LogRecord) -> None:
        """Drop the record if its reader is gone; report any other failure as logging does."""
        error = sys.exc_info()[1]
        if isinstance(error, BrokenPipeError) or getattr(self.stream, "closed", False):
            return
        super().handleError(record)


def setup_daemon_logging(loaded: LoadedConfig, level: str | None = None) -> Path | None:
    """``pinclaw run``'s logging from the config (``level`` overrides ``[general]``); the
    log file in use, if any. ``ConfigError`` naming ``daemon.log_file`` if it cannot be written."""
    from bot.cli.log_file import LogFile

    daemon = loaded.config.daemon
    path = loaded.data_dir / Path(daemon.log_file).expanduser() if daemon.log_file else None
    target = LogFile(path, daemon.log_max_bytes, daemon.log_backups) if path else None
    try:
        setup_logging(
            level or loaded.config.general.log_level,
            json_lines=daemon.log_format == "json",
            log_file=target,
        )
    except OSError as exc:
        raise ConfigError(
            f"daemon.log_file: cannot write the log to {path}: {exc.strerror or exc}"
        ) from None
    if path is not None:
        print(f"pinclaw: logging to {path}; warnings and errors show here too", file=sys.stderr)
    return path


def open_log_file(target: LogFile) -> logging.Handler:
    """A rotating handler on ``target``, its folder created (0700) if missing."""
    from bot.cli.log_file import PrivateRotatingFileHandler  # only the daemon writes a file

    target.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return PrivateRotatingFileHandler(
        target.path, maxBytes=target.max_bytes, backupCount=target.backups, encoding="utf-8"
    )


# What every LogRecord has; anything else on a record came through ``extra=``.
_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonLines(logging.Formatter):
    """One JSON object per record: time (ISO 8601, UTC), level, logger, message,
    the exception when there is one, and the record's simple ``extra`` values."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key in _RECORD_FIELDS or key in line or key.startswith("_"):
                continue
            if isinstance(value, float) and not math.isfinite(value):
                line[key] = str(value)
            elif value is None or isinstance(value, str | int | float | bool):
                line[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)
