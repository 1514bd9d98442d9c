"""The Socket Mode websocket: ``apps.connections.open`` tickets, hello, frames, acks, drops.

A client connects to the URL ``apps.connections.open`` returned (``/socket?ticket=...``;
unknown tickets get HTTP 401). The fake sends ``hello`` first, then envelopes; every
text frame the client sends that names an ``envelope_id`` is an ack. ``disconnect``
asks the client to reconnect (it calls ``apps.connections.open`` again and closes the
old socket); ``drop`` closes the TCP connection without a websocket close frame, as a
network failure would.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

from tests.fake_slack.records import JSON


@dataclass
class Connection:
    """One accepted websocket."""

    number: int
    ws: web.WebSocketResponse
    request: web.Request
    greeted: bool = False  # hello sent
    dropped: bool = False  # transport closed by ``drop``

    @property
    def open(self) -> bool:
        """True until either side closed it or it was dropped."""
        return not (self.ws.closed or self.dropped)

    @property
    def live(self) -> bool:
        """Open and greeted: envelopes may go here."""
        return self.greeted and self.open


class SocketEndpoint:
    """Serves the websocket route; the ``Courier`` sends envelopes through it."""

    def __init__(
        self,
        lock: threading.Condition,
        *,
        app_id: str,
        on_ack: Callable[[str, JSON | None], None],
        on_ready: Callable[[], None],
    ) -> None:
        self.lock = lock
        self.app_id = app_id
        self.on_ack = on_ack
        self.on_ready = on_ready
        self.tickets: set[str] = set()
        self.connections: list[Connection] = []
        self.frames_received: list[JSON] = []
        self._numbers = itertools.count(1)

    def issue_url(self, root: str) -> str:
        """A fresh ``ws://`` URL with a ticket (the caller holds the lock)."""
        ticket = uuid.uuid4().hex
        self.tickets.add(ticket)
        host = root.removeprefix("http://")
        return f"ws://{host}/socket?ticket={ticket}&app_id={self.app_id}"

    def current(self) -> Connection | None:
        """The newest connection that said hello and is still open."""
        with self.lock:
            live = [c for c in self.connections if c.live]
        return live[-1] if live else None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The websocket route."""
        with self.lock:
            known = request.query.get("ticket") in self.tickets
        if not known:
            return web.json_response({"ok": False, "error": "invalid_auth"}, status=401)
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        with self.lock:
            connection = Connection(next(self._numbers), ws, request)
            self.connections.append(connection)
            live = sum(1 for c in self.connections if c.open)
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": live,
                "debug_info": {
                    "host": f"applink-fake-{connection.number}",
                    "build_number": 1,
                    "approximate_connection_time": 18060,
                },
                "connection_info": {"app_id": self.app_id},
            }
        )
        with self.lock:
            connection.greeted = True
            self.lock.notify_all()
        self.on_ready()
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                self._received(message.data)
        with self.lock:
            self.lock.notify_all()
        return ws

    async def send(self, frame: JSON) -> bool:
        """Send ``frame`` on the current connection; False when none is open."""
        connection = self.current()
        if connection is None:
            return False
        try:
            await connection.ws.send_json(frame)
        except (ConnectionError, RuntimeError):
            return False
        return True

    async def disconnect(self, reason: str) -> None:
        """Send ``{"type": "disconnect"}`` on every open connection."""
        for connection in self._open():
            await connection.ws.send_json(
                {
                    "type": "disconnect",
                    "reason": reason,
                    "debug_info": {"host": f"applink-fake-{connection.number}"},
                }
            )

    async def drop(self) -> None:
        """Close every open connection's TCP transport without a close frame."""
        for connection in self._open():
            transport = connection.request.transport
            if transport is not None:
                transport.close()
            with self.lock:
                connection.dropped = True
                self.lock.notify_all()
        await asyncio.sleep(0)

    async def close_all(self) -> None:
        """Close every connection politely (server shutdown)."""
        for connection in self._open():
            await connection.ws.close(code=1001, message=b"server stopping")

    def _open(self) -> list[Connection]:
        with self.lock:
            return [c for c in self.connections if c.open]

    def _received(self, data: str) -> None:
        try:
            frame: Any = json.loads(data)
        except ValueError:
            frame = {"unparsed": data}
        if not isinstance(frame, dict):
            frame = {"unparsed": data}
        with self.lock:
            self.frames_received.append(frame)
        if "envelope_id" in frame:
            payload = frame.get("payload")
            self.on_ack(str(frame["envelope_id"]), payload if isinstance(payload, dict) else None)
