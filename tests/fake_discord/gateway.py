"""The fake gateway: a websocket speaking Discord's gateway protocol (v10, JSON).

HELLO, heartbeat ACKs, IDENTIFY → READY + one GUILD_CREATE per guild, RESUME with
replay of missed events, RECONNECT / INVALID_SESSION injection, abrupt drops.
Each session keeps its event log (``sessions.py``) so a RESUME can replay whatever
the client missed.
"""

from __future__ import annotations

import asyncio
import copy
import json
import secrets
import time
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from tests.fake_discord import payloads
from tests.fake_discord.payloads import JSON
from tests.fake_discord.sessions import Connection, Session, visible_to
from tests.fake_discord.state import Call, World

OP_NAMES = {
    0: "DISPATCH",
    1: "HEARTBEAT",
    2: "IDENTIFY",
    3: "PRESENCE_UPDATE",
    4: "VOICE_STATE_UPDATE",
    6: "RESUME",
    8: "REQUEST_GUILD_MEMBERS",
}
PRIVILEGED_INTENTS = payloads.INTENT_GUILD_MEMBERS | (1 << 8) | payloads.INTENT_MESSAGE_CONTENT


class Gateway:
    """Serves gateway websockets and delivers dispatch events to live sessions."""

    def __init__(self, world: World, ws_root: Callable[[], str], heartbeat_ms: int) -> None:
        self.world = world
        self.ws_root = ws_root
        self.heartbeat_ms = heartbeat_ms
        self.privileged_intents_enabled = True
        self.sessions: dict[str, Session] = {}
        self.connections: set[Connection] = set()
        self.identifies = 0
        self.resumes = 0
        self._held: asyncio.Event | None = None

    # -- serving ------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """One gateway websocket, from handshake to close."""
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        conn = Connection(ws, request)
        self.world.record(
            Call("GET", request.path, None, time.monotonic(), query=conn.query, status=101)
        )
        self.connections.add(conn)
        try:
            if self._held is not None:
                await self._held.wait()
            await conn.send({"op": 10, "s": None, "t": None, "d": self._hello()})
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                try:
                    frame = json.loads(msg.data)
                except ValueError:
                    await ws.close(code=4002, message=b"Error while decoding payload.")
                    break
                await self._on_frame(conn, frame)
        finally:
            self.connections.discard(conn)
            session = conn.session
            if session is not None and session.connection is conn:
                session.connection = None
            if ws.close_code is not None:
                self._record("CLOSE", {"code": ws.close_code})
            if session is not None and ws.close_code in (1000, 1001):
                session.alive = False  # Discord ends a session closed with 1000/1001
            self.world.notify()
        return ws

    def _hello(self) -> JSON:
        return {"heartbeat_interval": self.heartbeat_ms, "_trace": ["fake-discord"]}

    def _record(self, name: str, data: Any) -> None:
        self.world.record(Call("GATEWAY", name, data, time.monotonic()))

    async def _on_frame(self, conn: Connection, frame: JSON) -> None:
        op = frame.get("op")
        raw = frame.get("d")
        data: JSON = raw if isinstance(raw, dict) else {}
        self._record(OP_NAMES.get(op, f"OP{op}") if isinstance(op, int) else "OP?", raw)
        if op == 1:
            await conn.send({"op": 11, "s": None, "t": None, "d": None})
        elif op == 2:
            await self._identify(conn, data)
        elif op == 6:
            await self._resume(conn, data)
        elif conn.session is None:
            await conn.ws.close(code=4003, message=b"Not authenticated.")
        elif op == 8:
            await self._member_chunk(conn.session, data)
        elif op not in OP_NAMES:
            await conn.ws.close(code=4001, message=b"Unknown opcode.")

    async def _identify(self, conn: Connection, data: JSON) -> None:
        if conn.session is not None:
            await conn.ws.close(code=4005, message=b"Already authenticated.")
            return
        if data.get("token") != self.world.token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        intents = int(data.get("intents", 0))
        if not self.privileged_intents_enabled and intents & PRIVILEGED_INTENTS:
            await conn.ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        session = Session(secrets.token_hex(16), intents)
        with self.world.lock:
            self.identifies += 1
            self.sessions[session.session_id] = session
            guilds = [copy.deepcopy(g) for g in self.world.guilds.values()]
            ready = self._ready(session, guilds)
        async with conn.lock:
            conn.session = session
            session.connection = conn
            await conn.send(session.append("READY", ready))
            for guild in guilds:
                await conn.send(session.append("GUILD_CREATE", guild))
        self.world.notify()

    def _ready(self, session: Session, guilds: list[JSON]) -> JSON:
        return {
            "v": payloads.API_VERSION,
            "user": {**self.world.bot, "verified": True, "mfa_enabled": False, "email": None},
            "guilds": [{"id": g["id"], "unavailable": True} for g in guilds],
            "session_id": session.session_id,
            "session_type": "normal",
            "resume_gateway_url": f"{self.ws_root()}/gateway/resume",
            "shard": [0, 1],
            "application": {"id": self.world.app_id, "flags": self.world.application["flags"]},
            "private_channels": [],
            "relationships": [],
            "user_settings": {},
            "geo_ordered_rtc_regions": [],
            "_trace": ["fake-discord"],
        }

    async def _resume(self, conn: Connection, data: JSON) -> None:
        session = self.sessions.get(str(data.get("session_id")))
        if data.get("token") != self.world.token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        if session is None or not session.alive:
            await conn.send({"op": 9, "s": None, "t": None, "d": False})
            return
        seen = int(data.get("seq") or 0)
        async with conn.lock:
            with self.world.lock:
                self.resumes += 1
                missed = [f for f in session.log if f["s"] > seen and f["t"] != "RESUMED"]
                old = session.connection
                conn.session = session
                session.connection = conn
            if old is not None:
                old.cut()
            for frame in missed:
                await conn.send(frame)
            await conn.send(session.append("RESUMED", {"_trace": ["fake-discord"]}))
        self.world.notify()

    async def _member_chunk(self, session: Session, data: JSON) -> None:
        guild = self.world.guilds.get(str(data.get("guild_id")))
        members = list(guild["members"]) if guild else []
        chunk = {
            "guild_id": str(data.get("guild_id")),
            "members": members,
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [],
        }
        if data.get("nonce") is not None:
            chunk["nonce"] = data["nonce"]
        await self._deliver(session, "GUILD_MEMBERS_CHUNK", chunk)

    # -- injection ----------------------------------------------------------

    def live_sessions(self) -> list[Session]:
        """Sessions that can still receive events (connected or resumable)."""
        with self.world.lock:
            return [s for s in self.sessions.values() if s.alive]

    def connected(self) -> bool:
        """Whether some session has a live connection."""
        with self.world.lock:
            return any(s.connection is not None for s in self.live_sessions())

    async def dispatch(self, event: str, data: JSON) -> int:
        """Log ``event`` on every live session and send it where connected.

        Raises ``RuntimeError`` when no client has a session: an injected event would
        otherwise vanish and the test would only see a timeout.
        """
        if not self.live_sessions():
            raise RuntimeError(f"no gateway session to receive {event}: is a client connected?")
        return await self.publish(event, data)

    async def publish(self, event: str, data: JSON) -> int:
        """Like ``dispatch`` but silent when nobody listens (echoes of REST actions)."""
        sessions = self.live_sessions()
        for session in sessions:
            await self._deliver(session, event, data)
        return len(sessions)

    async def _deliver(self, session: Session, event: str, data: JSON) -> None:
        visible = visible_to(session, event, data, self.world.bot["id"])
        if visible is None:
            return
        frame = session.append(event, visible)
        conn = session.connection
        if conn is None:
            return  # kept in the log for a RESUME
        async with conn.lock:
            if session.connection is conn:
                await conn.send(frame)

    async def replay_last(self, count: int) -> None:
        """Deliver the last ``count`` dispatched events again, under new sequence numbers."""
        for session in self.live_sessions():
            frames = [f for f in session.log if f["t"] not in ("READY", "RESUMED")][-count:]
            for frame in frames:
                await self._deliver(session, frame["t"], frame["d"])

    async def drop(self, *, hold: bool = False) -> None:
        """Cut every connection abruptly; with ``hold``, park new ones until ``release``."""
        if hold and self._held is None:
            self._held = asyncio.Event()
        with self.world.lock:
            conns = list(self.connections)
            for conn in conns:
                if conn.session is not None and conn.session.connection is conn:
                    conn.session.connection = None
        for conn in conns:
            conn.cut()
        self.world.notify()

    def release(self) -> None:
        """Let connections parked by ``drop(hold=True)`` proceed."""
        if self._held is not None:
            self._held.set()
            self._held = None

    async def send_op(self, op: int, data: Any) -> int:
        """Send a control opcode to every connection that has a session."""
        sent = 0
        for conn in list(self.connections):
            if conn.session is not None:
                async with conn.lock:
                    sent += await conn.send({"op": op, "s": None, "t": None, "d": data})
        return sent

    async def invalidate(self, *, resumable: bool = False) -> None:
        """Send INVALID_SESSION; unless ``resumable`` the sessions end."""
        if not resumable:
            for session in self.live_sessions():
                session.alive = False
        await self.send_op(9, resumable)

    async def close_all(self) -> None:
        """Release parked connections and cut all sockets (server shutdown)."""
        self.release()
        for conn in list(self.connections):
            conn.cut()
