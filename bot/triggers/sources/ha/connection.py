"""The WebSocket connection to Home Assistant: the handshake, the subscription, reconnects.

The protocol is the documented one (developers.home-assistant.io, WebSocket
API): the server sends ``auth_required``, the client ``{"type": "auth",
"access_token": TOKEN}``, the server ``auth_ok`` (or ``auth_invalid`` and a
close). Then commands with increasing ids: ``subscribe_events`` for
``state_changed``, whose ``event`` frames carry the subscription's id, and
``get_states``, answered by a ``result`` with every state. The subscription is
sent first, so no change falls between the states read and the events.

A dropped connection is made again after 1 s, 2 s, 4 s ... up to a minute, back
to 1 s once a connection has worked (its states arrived); a refused token is
logged once and tried again every 5 minutes. Heartbeat pings find a connection
that died without a close.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import aiohttp
from yarl import URL

from bot.core.durations import format_duration
from bot.core.errors import log_bug
from bot.core.messages import clean_text
from bot.core.tls import shared_ssl_context
from bot.triggers.sources import cancel_all

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 60.0
AUTH_RETRY_S = 300.0
HEARTBEAT_S = 30.0
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # get_states of a large home is several MB

Link = Literal["off", "connecting", "connected", "reconnecting", "refused"]
OnChange = Callable[[dict[str, Any]], Awaitable[None]]
"""Called with the ``data`` of each ``state_changed`` event."""
OnStates = Callable[[list[Any]], Awaitable[None]]
"""Called with the states of each ``get_states`` answer (one per connection)."""


class _Refused(Exception):
    """Home Assistant answered ``auth_invalid``."""


class _Broken(Exception):
    """Home Assistant answered something the protocol does not allow here."""


def websocket_url(url: str) -> str:
    """The WebSocket API address for a Home Assistant URL (``http://h:8123`` ->
    ``ws://h:8123/api/websocket``)."""
    base = URL(url.strip())
    scheme = "wss" if base.scheme == "https" else "ws"
    path = base.path.rstrip("/") + "/api/websocket"
    return str(base.with_scheme(scheme).with_path(path).with_query(None).with_fragment(None))


class HaConnection:
    """One WebSocket to Home Assistant, kept open (made again) until ``stop``."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        on_change: OnChange,
        on_states: OnStates,
        timeout_s: float = 10.0,
        first_s: float = BACKOFF_FIRST_S,
        max_s: float = BACKOFF_MAX_S,
        auth_retry_s: float = AUTH_RETRY_S,
    ) -> None:
        self.url = websocket_url(url)
        self._token = token
        self._on_change, self._on_states = on_change, on_states
        self._timeout_s = timeout_s
        self._first_s, self._max_s, self.auth_retry_s = first_s, max_s, auth_retry_s
        self.link: Link = "off"
        self.reason = ""
        self.since = time.time()
        self._healthy = False
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        """Connect in the background (nothing if already running)."""
        if self._task is None or self._task.done():
            self._set("connecting", "")
            self._task = asyncio.create_task(self._run(), name="home assistant events")

    async def stop(self) -> None:
        """Close the connection; idempotent."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_all([task])
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._set("off", "")

    def describe(self) -> str:
        """The connection in a few words, for status and doctor."""
        since = time.strftime("%H:%M:%S", time.localtime(self.since))
        if self.link == "connected":
            return f"connected to {self.url}"
        if self.link == "reconnecting":
            return f"reconnecting to {self.url} ({self.reason}; down since {since})"
        if self.link == "refused":
            return (
                f"auth refused: Home Assistant at {self.url} refused the access token "
                f"({self.reason}) at {since}; trying again every "
                f"{format_duration(self.auth_retry_s)}"
            )
        return f"connecting to {self.url}" if self.link == "connecting" else "not connected"

    def _set(self, link: Link, reason: str) -> None:
        if (link, reason) != (self.link, self.reason):
            self.since = time.time()
        self.link, self.reason = link, reason

    async def _run(self) -> None:
        delay = self._first_s
        while True:
            self._healthy = False
            try:
                await self._connection()
                reason = "Home Assistant closed the connection"
            except _Refused as exc:
                if self.link != "refused":
                    log.warning(
                        "Home Assistant at %s refused the access token (%s): check "
                        "[home_assistant] token; trying again every %s",
                        self.url, exc, format_duration(self.auth_retry_s),
                    )  # fmt: skip
                self._set("refused", str(exc))
                await asyncio.sleep(self.auth_retry_s)
                continue
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError, _Broken) as exc:
                reason = self._why(exc)
            except Exception as exc:
                error_id = log_bug(log, "the Home Assistant connection failed", exc)
                reason = f"something went wrong (error id {error_id})"
            if self._healthy:
                delay = self._first_s
            if self.link != "reconnecting" or reason != self.reason:
                wait = format_duration(delay)
                log.warning("Home Assistant: %s; connecting again in %s", reason, wait)
            self._set("reconnecting", reason)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._max_s)

    def _why(self, exc: BaseException) -> str:
        if isinstance(exc, _Broken):
            return str(exc)
        if isinstance(exc, TimeoutError):
            return f"no answer within {format_duration(self._timeout_s)}"
        if isinstance(exc, aiohttp.WSServerHandshakeError):
            return f"the server answered HTTP {exc.status} instead of opening a WebSocket"
        if isinstance(exc, aiohttp.ClientConnectorError):
            return f"cannot connect to {exc.host}:{exc.port}"
        if isinstance(exc, ValueError):
            return "Home Assistant sent a message that is not JSON"
        first = (str(exc).strip().splitlines() or [""])[0]
        return clean_text(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)[:150]

    async def _connection(self) -> None:
        """One connection, from the handshake until it closes."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        secure = self.url.startswith("wss:")
        async with asyncio.timeout(self._timeout_s):
            socket = await self._session.ws_connect(
                self.url,
                heartbeat=HEARTBEAT_S,
                max_msg_size=MAX_MESSAGE_BYTES,
                ssl=shared_ssl_context() if secure else True,
                timeout=aiohttp.ClientWSTimeout(ws_close=2.0),
            )
        try:
            async with asyncio.timeout(self._timeout_s):
                await self._authenticate(socket)
            ids = itertools.count(1)
            subscription, asked = next(ids), next(ids)
            await socket.send_json(
                {"id": subscription, "type": "subscribe_events", "event_type": "state_changed"}
            )
            await socket.send_json({"id": asked, "type": "get_states"})
            async for frame in socket:
                if frame.type == aiohttp.WSMsgType.ERROR:
                    raise _Broken(self._why(socket.exception() or _Broken("a WebSocket error")))
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                data = json.loads(frame.data)
                for message in data if isinstance(data, list) else [data]:
                    if isinstance(message, dict):
                        await self._message(message, subscription, asked)
        finally:
            await socket.close()

    async def _authenticate(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        first = await _receive(socket)
        if first.get("type") != "auth_required":
            raise _Broken(f"Home Assistant began with {first.get('type')!r}, not auth_required")
        await socket.send_json({"type": "auth", "access_token": self._token})
        answer = await _receive(socket)
        if answer.get("type") == "auth_invalid":
            raise _Refused(clean_text(str(answer.get("message") or "no reason given"))[:150])
        if answer.get("type") != "auth_ok":
            raise _Broken(f"Home Assistant answered {answer.get('type')!r} to auth")

    async def _message(self, message: dict[str, Any], subscription: int, asked: int) -> None:
        kind, ident = message.get("type"), message.get("id")
        if kind == "event" and ident == subscription:
            event = message.get("event") or {}
            if event.get("event_type") == "state_changed":
                await self._on_change(event.get("data") or {})
        elif kind == "result" and ident in (subscription, asked) and not message.get("success"):
            error = message.get("error") or {}
            what = "subscribing to state changes" if ident == subscription else "get_states"
            raise _Broken(f"Home Assistant refused {what} ({clean_text(str(error))[:150]})")
        elif kind == "result" and ident == asked:
            result = message.get("result")
            await self._on_states(result if isinstance(result, list) else [])
            self._healthy = True
            if self.link != "connected":
                log.info("Home Assistant: connected to %s", self.url)
            self._set("connected", "")


async def _receive(socket: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    frame = await socket.receive()
    if frame.type != aiohttp.WSMsgType.TEXT:
        raise _Broken("Home Assistant closed the connection during the handshake")
    message = json.loads(frame.data)
    if not isinstance(message, dict):
        raise _Broken("Home Assistant sent a handshake message that is not an object")
    return message
