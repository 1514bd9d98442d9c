"""A base for fake servers: an aiohttp app on 127.0.0.1 with its own thread and event loop.

Running the fake on its own loop lets synchronous tests, async tests and
subprocesses (the real ``pinclaw`` command) talk to it alike. Subclasses build
the ``web.Application`` in ``make_app``; ``call`` runs a coroutine on the
server's loop from any thread (to push an update, close a socket...).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, Self, TypeVar

from aiohttp import web

T = TypeVar("T")


class ThreadedServer:
    """Start with ``with Server.running() as server:`` or ``start()`` / ``stop()``."""

    name = "fake-server"

    def __init__(self) -> None:
        self.port = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None

    @property
    def url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:43121``."""
        return f"http://127.0.0.1:{self.port}"

    def make_app(self) -> web.Application:
        """Build the aiohttp application (runs on the server's loop)."""
        raise NotImplementedError

    async def on_stop(self) -> None:
        """Release anything that would hold the shutdown (parked long polls, sockets)."""

    @classmethod
    @contextmanager
    def running(cls, *args: Any, port: int = 0, **kwargs: Any) -> Iterator[Self]:
        """A started server for the duration of a ``with`` block."""
        server = cls(*args, **kwargs)
        server.start(port)
        try:
            yield server
        finally:
            server.stop()

    def start(self, port: int = 0) -> None:
        """Serve on 127.0.0.1 (port 0 picks a free port); returns once listening."""
        ready = threading.Event()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._main(port, ready)), name=self.name, daemon=True
        )
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.name} did not start")

    def stop(self) -> None:
        """Stop serving and join the thread."""
        if self.loop and self._stop:
            self.loop.call_soon_threadsafe(self._stop.set)
        if self._thread:
            self._thread.join(10)
        self._thread = None

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        """Run ``coro`` on the server's loop from another thread and return its result."""
        assert self.loop is not None, "the server is not running"
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _main(self, port: int, ready: threading.Event) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        # Handlers still running at shutdown (a stalled reply) are cancelled, not awaited.
        runner = web.AppRunner(self.make_app(), handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        self.port = runner.addresses[0][1]
        ready.set()
        await self._stop.wait()
        await self.on_stop()
        await runner.cleanup()
