"""The WebSocket API of the fake Home Assistant (``GET /api/websocket``), as documented at
developers.home-assistant.io/docs/api/websocket.

The server sends ``auth_required``; the client's first message must be
``{"type": "auth", "access_token": TOKEN}``, answered by ``auth_ok`` or by
``auth_invalid`` and a close. Then commands carry an ``id`` that must increase
(else ``id_reuse``): ``ping`` (``pong``), ``subscribe_events`` (a ``result``,
then ``event`` frames with the subscription's id), ``unsubscribe_events`` and
``get_states``; anything else is ``unknown_command``. ``messages()`` gives what
clients sent, so tests can check it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSCloseCode, WSMsgType, web

HA_VERSION = "2024.3.3"
State = dict[str, Any]


@dataclass(eq=False)
class _Connection:
    socket: web.WebSocketResponse
    last_id: int = 0
    subscriptions: dict[int, str] = field(default_factory=dict)  # id -> event type or "*"


def _result(ident: Any, result: Any = None) -> dict[str, Any]:
    return {"id": ident, "type": "result", "success": True, "result": result}


def _error(ident: Any, code: str, message: str) -> dict[str, Any]:
    return {
        "id": ident,
        "type": "result",
        "success": False,
        "error": {"code": code, "message": message},
    }


class WebSocketApi:
    """The connections of the fake; every coroutine runs on the fake server's loop."""

    def __init__(self, token: Callable[[], str], states: Callable[[], list[State]]) -> None:
        self._token = token
        self._states = states
        self._connections: set[_Connection] = set()
        self._lock = threading.Lock()
        self._received: list[dict[str, Any]] = []
        self.refusing = False
        self.accepted = 0  # connections that passed the handshake

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """One WebSocket client, from the handshake until it leaves."""
        if self.refusing:
            return web.Response(status=503, text="503: Service Unavailable")
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        await socket.send_json({"type": "auth_required", "ha_version": HA_VERSION})
        first = await self._next(socket)
        if first is None:
            return socket
        if first.get("type") != "auth" or first.get("access_token") != self._token():
            why = (
                "Invalid access token or password"
                if first.get("type") == "auth"
                else "Auth message incorrectly formatted"
            )
            await socket.send_json({"type": "auth_invalid", "message": why})
            await socket.close()
            return socket
        await socket.send_json({"type": "auth_ok", "ha_version": HA_VERSION})
        connection = _Connection(socket)
        self._connections.add(connection)
        with self._lock:
            self.accepted += 1
        try:
            while (message := await self._next(socket)) is not None:
                await self._command(connection, message)
        finally:
            self._connections.discard(connection)
        return socket

    async def _next(self, socket: web.WebSocketResponse) -> dict[str, Any] | None:
        """The next JSON object from the client; None once it is gone."""
        async for frame in socket:
            if frame.type != WSMsgType.TEXT:
                continue
            try:
                message = json.loads(frame.data)
            except ValueError:
                message = {"raw": frame.data}
            if not isinstance(message, dict):
                message = {"raw": message}
            with self._lock:
                self._received.append(message)
            return message
        return None

    async def _command(self, connection: _Connection, message: dict[str, Any]) -> None:
        ident, kind = message.get("id"), message.get("type")
        send = connection.socket.send_json
        if not isinstance(ident, int) or not isinstance(kind, str):
            await send(_error(ident, "invalid_format", "Message incorrectly formatted."))
            return
        if ident <= connection.last_id:
            await send(_error(ident, "id_reuse", "Identifier values have to increase."))
            return
        connection.last_id = ident
        if kind == "ping":
            await send({"id": ident, "type": "pong"})
        elif kind == "subscribe_events":
            connection.subscriptions[ident] = str(message.get("event_type") or "*")
            await send(_result(ident))
        elif kind == "unsubscribe_events":
            if connection.subscriptions.pop(message.get("subscription", -1), None) is None:
                await send(_error(ident, "not_found", "Subscription not found."))
            else:
                await send(_result(ident))
        elif kind == "get_states":
            await send(_result(ident, self._states()))
        else:
            await send(_error(ident, "unknown_command", "Unknown command."))

    async def state_changed(self, entity_id: str, old: State | None, new: State | None) -> None:
        """Send a ``state_changed`` event to every subscriber."""
        event = {
            "event_type": "state_changed",
            "data": {"entity_id": entity_id, "old_state": old, "new_state": new},
            "origin": "LOCAL",
            "time_fired": datetime.now(UTC).isoformat(),
            "context": {"id": "01HXFAKEEVENT", "parent_id": None, "user_id": None},
        }
        for connection in list(self._connections):
            for ident, wanted in list(connection.subscriptions.items()):
                if wanted in ("*", "state_changed") and not connection.socket.closed:
                    await connection.socket.send_json(
                        {"id": ident, "type": "event", "event": event}
                    )

    async def close_all(self) -> None:
        """Close every WebSocket (Home Assistant restarting, a network cut)."""
        connections = list(self._connections)
        self._connections.clear()
        await asyncio.gather(
            *(c.socket.close(code=WSCloseCode.GOING_AWAY) for c in connections),
            return_exceptions=True,
        )

    def messages(self) -> list[dict[str, Any]]:
        """What clients sent, in order (auth messages included)."""
        with self._lock:
            return copy.deepcopy(self._received)

    def count(self) -> int:
        """How many clients are connected and authenticated now."""
        return len(self._connections)
