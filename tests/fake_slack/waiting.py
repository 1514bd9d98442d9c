"""Waiting for what the app does, blocking (``wait_*``) or from async code (``await_*``).

Every record the fake keeps is appended under one ``threading.Condition`` that is
notified on each change, so waits re-check their condition exactly when something
happened: no polling, no sleeps. The ``await_*`` variants run the same wait in a
worker thread (``asyncio.to_thread``), so an app on the test's own event loop keeps
running meanwhile; ``within`` is their timeout in seconds.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from tests.fake_slack.delivery import Courier
from tests.fake_slack.records import Ack, ApiCall
from tests.fake_slack.socket_mode import SocketEndpoint
from tests.fake_slack.web_api import WebApi


class Waiting:
    """The wait methods of ``FakeSlack`` (a mixin over its lock and records)."""

    lock: threading.Condition
    web: WebApi
    courier: Courier
    socket: SocketEndpoint

    def wait_until(
        self, condition: Callable[[], bool], timeout: float = 10.0, what: str = ""
    ) -> None:
        """Block until ``condition()`` holds (re-checked whenever the fake records something)."""
        with self.lock:
            if not self.lock.wait_for(condition, timeout):
                raise TimeoutError(f"timed out after {timeout}s waiting for {what or condition}")

    def wait_for(
        self,
        method: str,
        predicate: Callable[[ApiCall], bool] | None = None,
        timeout: float = 10.0,
        count: int = 1,
    ) -> ApiCall:
        """Block until the ``count``-th call of ``method`` matching ``predicate``; return it."""

        def matching() -> list[ApiCall]:
            calls = self.web.calls
            return [c for c in calls if c.method == method and (not predicate or predicate(c))]

        try:
            self.wait_until(lambda: len(matching()) >= count, timeout)
        except TimeoutError:
            with self.lock:
                seen = [c.method for c in self.web.calls]
            raise TimeoutError(f"no call #{count} of {method} matched; calls: {seen}") from None
        with self.lock:
            return matching()[count - 1]

    def wait_ack(self, envelope_id: str, timeout: float = 10.0) -> Ack:
        """Block until the app acked ``envelope_id``; return the ack."""

        def found() -> Ack | None:
            return next((a for a in self.courier.acks if a.envelope_id == envelope_id), None)

        self.wait_until(lambda: found() is not None, timeout, f"an ack of {envelope_id}")
        with self.lock:
            ack = found()
        assert ack is not None
        return ack

    def wait_connected(self, count: int = 1, timeout: float = 10.0) -> None:
        """Block until ``count`` websocket connections were greeted, one of them still open."""

        def ready() -> bool:
            greeted = sum(1 for c in self.socket.connections if c.greeted)
            return greeted >= count and any(c.live for c in self.socket.connections)

        self.wait_until(ready, timeout, f"websocket connection #{count}")

    async def await_call(
        self,
        method: str,
        predicate: Callable[[ApiCall], bool] | None = None,
        *,
        within: float = 10.0,
        count: int = 1,
    ) -> ApiCall:
        """``wait_for`` without blocking the running event loop."""
        return await asyncio.to_thread(self.wait_for, method, predicate, within, count)

    async def await_ack(self, envelope_id: str, *, within: float = 10.0) -> Ack:
        """``wait_ack`` without blocking the running event loop."""
        return await asyncio.to_thread(self.wait_ack, envelope_id, within)

    async def await_connected(self, count: int = 1, *, within: float = 10.0) -> None:
        """``wait_connected`` without blocking the running event loop."""
        await asyncio.to_thread(self.wait_connected, count, within)

    async def await_until(
        self, condition: Callable[[], bool], *, within: float = 10.0, what: str = ""
    ) -> None:
        """``wait_until`` without blocking the running event loop."""
        await asyncio.to_thread(self.wait_until, condition, within, what)
