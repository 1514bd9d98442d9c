"""One line per library record: client libraries' tracebacks and error pages kept out of the log.

A platform outage makes the client libraries log loudly: python-telegram-bot logs
an error page it cannot read as JSON with a traceback and the whole HTML body,
discord.py logs every failed gateway reconnect with a traceback. Above debug
level, ``OneLine`` turns each record of those libraries into one short line: the
message, then the exception's type and one-line reason (an HTML page becomes its
status line, ``bot.core.error_text``). At debug level everything is kept whole.
"""

from __future__ import annotations

import logging

from bot.core.error_text import short_text

# The loggers of the libraries that talk to chat platforms and model providers.
LIBRARIES = frozenset(
    {"telegram", "discord", "slack_sdk", "slack_bolt", "httpx", "httpcore", "aiohttp"}
)
# The loggers PinClaw hands to slack_sdk and slack-bolt (channels/slack): what is logged
# there is the libraries' (slack_sdk's "Failed to retrieve WSS URL: ..." has two lines).
HANDED = frozenset({"channels.slack.bolt", "channels.slack.client", "channels.slack.socket"})


class OneLine(logging.Filter):
    """Shortens records of ``LIBRARIES`` (and ``HANDED``) to one line without a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite a library's record in place; every record passes."""
        if record.name.partition(".")[0] not in LIBRARIES and record.name not in HANDED:
            return True
        message = short_text(record.getMessage())
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            reason = short_text(str(error))
            kind = type(error).__name__
            message = f"{message} ({kind}: {reason})" if reason else f"{message} ({kind})"
        record.msg, record.args = message, None
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True
