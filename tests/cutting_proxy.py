"""A TCP proxy on 127.0.0.1 that can cut the chat page's event streams, as a flaky network does.

Every connection is passed through byte for byte to the panel. ``cut()`` aborts
the connections that carry ``GET /chat/events`` (the browser sees the stream
drop mid-turn and reconnects with ``Last-Event-ID``); ``refuse(n)`` answers the
next ``n`` event-stream requests with a 502, as a reverse proxy does while
PinClaw restarts (a browser's ``EventSource`` gives up for good on that).
``requests`` keeps the head of each event-stream request, headers included.
"""

from __future__ import annotations

import asyncio

BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class CuttingProxy:
    """Forwards 127.0.0.1:``port`` (read it after ``start``) to the panel's port."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._streams: list[asyncio.StreamWriter] = []
        self._refusals = 0
        self.requests: list[str] = []
        self.port = 0

    async def start(self) -> CuttingProxy:
        """Listen on a free port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        for writer in self._open:
            writer.transport.abort()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> int:
        """Abort the open event streams; how many there were."""
        streams, self._streams = self._streams, []
        for writer in streams:
            writer.transport.abort()
        return len(streams)

    def refuse(self, count: int) -> None:
        """Answer the next ``count`` event-stream requests with 502 Bad Gateway."""
        self._refusals = count

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
            await asyncio.gather(
                self._requests(reader, up_writer, writer), _pump(up_reader, writer)
            )
        finally:
            self._open.discard(writer)

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        client: asyncio.StreamWriter,
    ) -> None:
        """Pass the browser's bytes on, noting (or refusing) each event-stream request (a
        browser sends a GET's head in one piece, on a new or a reused connection)."""
        try:
            while data := await reader.read(65536):
                if data.startswith(b"GET /chat/events"):
                    self.requests.append(data.decode("latin-1"))
                    if self._refusals > 0:
                        self._refusals -= 1
                        client.write(BAD_GATEWAY)
                        await client.drain()
                        client.close()
                        break
                    self._streams.append(client)
                upstream.write(data)
                await upstream.drain()
        except ConnectionError:
            pass
        finally:
            upstream.close()


async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except ConnectionError:
        pass
    finally:
        sink.close()
