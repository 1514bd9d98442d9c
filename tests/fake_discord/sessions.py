"""Gateway sessions and connections, and what a session may see given its intents.

A ``Session`` outlives its websocket: it keeps every dispatched frame with its
sequence number so a RESUME can replay what the client missed. A ``Connection`` is
one websocket. With ``compress=zlib-stream`` every frame is deflated on one ``zlib``
stream per connection and ends with a sync flush (Discord's transport compression);
with ``zstd-stream`` (discord.py asks for it when ``zstandard`` is importable) frames
go out as plain text, which discord.py also accepts.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from dataclasses import dataclass, field

from aiohttp import web

from tests.fake_discord import payloads
from tests.fake_discord.payloads import JSON

MESSAGE_EVENTS = ("MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_DELETE")


@dataclass
class Session:
    """A gateway session: its intents, sequence counter and event log."""

    session_id: str
    intents: int
    log: list[JSON] = field(default_factory=list)
    connection: Connection | None = None
    alive: bool = True

    def append(self, event: str, data: JSON) -> JSON:
        """Give ``event`` the next sequence number and log it."""
        frame = {"op": 0, "t": event, "s": len(self.log) + 1, "d": data}
        self.log.append(frame)
        return frame


class Connection:
    """One websocket: the compression stream and a lock keeping frames in order."""

    def __init__(self, ws: web.WebSocketResponse, request: web.Request) -> None:
        self.ws = ws
        self.transport = request.transport
        self.query = dict(request.query)
        self.path = request.path
        compress = self.query.get("compress")
        self.compressor = zlib.compressobj() if compress == "zlib-stream" else None
        self.lock = asyncio.Lock()
        self.session: Session | None = None

    async def send(self, frame: JSON) -> bool:
        """Send one frame; False if the socket is gone."""
        text = json.dumps(frame, separators=(",", ":"))
        try:
            if self.compressor is None:
                await self.ws.send_str(text)
            else:
                data = self.compressor.compress(text.encode())
                await self.ws.send_bytes(data + self.compressor.flush(zlib.Z_SYNC_FLUSH))
        except (ConnectionError, RuntimeError):
            return False
        return True

    def cut(self) -> None:
        """Close the TCP connection without a websocket close frame."""
        if self.transport is not None:
            self.transport.close()


def visible_to(session: Session, event: str, data: JSON, bot_id: str) -> JSON | None:
    """What this session may see of ``event`` given its intents (None: nothing)."""
    if event not in MESSAGE_EVENTS:
        return data
    in_guild = data.get("guild_id") is not None
    needed = payloads.INTENT_GUILD_MESSAGES if in_guild else payloads.INTENT_DIRECT_MESSAGES
    if not session.intents & needed:
        return None
    if event == "MESSAGE_DELETE" or not in_guild:
        return data
    if session.intents & payloads.INTENT_MESSAGE_CONTENT:
        return data
    author_id = data.get("author", {}).get("id")
    if author_id == bot_id or any(m.get("id") == bot_id for m in data.get("mentions", [])):
        return data
    return {**data, "content": "", "embeds": [], "attachments": [], "components": []}
