"""The python-telegram-bot ``Bot`` behind the Telegram channel, its HTTP clients and errors.

One plain ``telegram.Bot`` (no ``telegram.ext.Application``: the adapter polls,
paces and retries itself, and the daemon must stay small) with two httpx
clients that share the daemon's TLS context: one for API calls and downloads,
and one of a single connection for long polls, which is thrown away after every
run so a poll that stalled never poisons the next one.

Both clients are opened and closed here, not through ``Bot.initialize`` /
``Bot.shutdown``: the API client stays open while anything uses it (the channel's
``run``, or a reply sent while ``run`` is being restarted) and is closed when the
last user is done, so no socket outlives the channel.

``classify`` maps PTB's exceptions to ``send_with_retries``' decisions, in one place.
An error page instead of Telegram's JSON (a 502 from a proxy, an outage) becomes the
error Telegram would have sent, ``502 Bad Gateway``: PTB would log the whole page with
a traceback and put it into the exception's text (``BotRequest``).
The bot token is part of every API URL, so it is masked in the log records of
PTB and httpx that carry URLs (at debug level, or wherever httpx logs at info).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import ssl
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

from telegram import Bot
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from bot.core.delivery import Retry

API_CONNECTIONS = 8
API_READ_TIMEOUT_S = 20.0
# Added by PTB to a long poll's own timeout; the channel's watchdog fires first.
POLL_READ_MARGIN_S = 15.0
_TOKEN_IN_URL = re.compile(r"(?<=/bot)\d+:[A-Za-z0-9_-]+")


class _MaskToken(logging.Filter):
    """Replaces bot tokens in URLs with ``<token>`` before a record is written."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if _TOKEN_IN_URL.search(message):
            record.msg, record.args = _TOKEN_IN_URL.sub("<token>", message), None
        return True


_MASK = _MaskToken()
for _name in ("telegram.Bot", "httpx"):
    logging.getLogger(_name).addFilter(_MASK)
log = logging.getLogger(__name__)


class BotRequest(HTTPXRequest):
    """PTB's httpx transport, reading an answer that is not JSON without a flood in the log."""

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        """Make the request; an error answer that is not JSON becomes Telegram's error JSON
        with the HTTP status as its description (``502 Bad Gateway``)."""
        code, payload = await super().do_request(*args, **kwargs)
        if code >= 300 and not _is_json(payload):
            log.debug("telegram: HTTP %d with a body that is not JSON: %r", code, payload[:500])
            error = {"ok": False, "error_code": code, "description": status_line(code)}
            payload = json.dumps(error).encode()
        return code, payload

    @staticmethod
    def parse_json_payload(payload: bytes) -> dict[str, Any]:
        """Telegram's JSON; ``TelegramError`` in one line (the body only at debug level)."""
        try:
            data = json.loads(payload.decode("utf-8", "replace"))
        except ValueError:
            data = None
        if not isinstance(data, dict):
            log.debug("telegram: an answer that is not JSON: %r", payload[:500])
            raise TelegramError("Telegram's answer is not JSON")
        return data


def status_line(code: int) -> str:
    """``502 Bad Gateway``: the status and its standard phrase."""
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"HTTP {code}"


def _is_json(payload: bytes) -> bool:
    try:
        json.loads(payload.decode("utf-8", "replace"))
    except ValueError:
        return False
    return True


class TelegramClient:
    """The ``Bot`` and the lifetimes of its two HTTP clients."""

    def __init__(self, token: str, api_base_url: str, tls: ssl.SSLContext) -> None:
        client_options = {"verify": tls}
        self._api = BotRequest(
            connection_pool_size=API_CONNECTIONS,
            read_timeout=API_READ_TIMEOUT_S,
            write_timeout=20.0,
            connect_timeout=10.0,
            pool_timeout=10.0,
            media_write_timeout=60.0,
            httpx_kwargs=client_options,
        )
        self._poll = BotRequest(
            connection_pool_size=1,
            read_timeout=POLL_READ_MARGIN_S,
            write_timeout=10.0,
            connect_timeout=10.0,
            pool_timeout=5.0,
            httpx_kwargs=client_options,
        )
        self.bot = Bot(
            token,
            base_url=f"{api_base_url}/bot",
            base_file_url=f"{api_base_url}/file/bot",
            request=self._api,
            get_updates_request=self._poll,
        )
        self._users = 0

    @asynccontextmanager
    async def api(self) -> AsyncIterator[Bot]:
        """The bot, with its API client open for the duration of the block."""
        if self._users == 0:
            await self._api.initialize()  # reopens a closed client
        self._users += 1
        try:
            yield self.bot
        finally:
            self._users -= 1
            if self._users == 0:
                await self._api.shutdown()

    @asynccontextmanager
    async def polling(self) -> AsyncIterator[Bot]:
        """The bot with a fresh long-poll client, closed when the block ends."""
        await self._poll.initialize()
        try:
            yield self.bot
        finally:
            await self._poll.shutdown()


def retry_after_s(exc: RetryAfter) -> float:
    """Telegram's ``retry_after`` in seconds (an int, or a timedelta with PTB_TIMEDELTA set)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def classify(exc: BaseException) -> Retry | None:
    """Whether a failed call is worth repeating: flood control and the network are."""
    if isinstance(exc, RetryAfter):
        return Retry(retry_after_s(exc) + 0.1)
    if isinstance(exc, BadRequest | Forbidden | InvalidToken | ChatMigrated):
        return None  # chat not found, bot blocked, token revoked: trying again cannot help
    if isinstance(exc, NetworkError):  # includes TimedOut
        return Retry()
    return None


def is_markup_error(exc: BaseException) -> bool:
    """Whether Telegram refused a message's HTML (PTB rewrites the case of its text)."""
    if not isinstance(exc, BadRequest):
        return False
    text = exc.message.lower()
    return "can't parse entities" in text or "text is empty" in text
