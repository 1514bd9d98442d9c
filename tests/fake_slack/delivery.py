"""Hands envelopes to the app, over the socket or over signed HTTP, and retries like Slack.

Without a Request URL, envelopes go over the newest open websocket, or wait in a
queue until a client connects. With one (``FakeSlack.use_http``), each envelope is a
signed POST and a 200 answer is its ack. Events API envelopes not acked within
``ack_timeout`` are delivered again, up to ``max_retries`` times, each retry a new
envelope with ``retry_attempt`` + 1 and a ``retry_reason`` (``timeout`` on the socket;
``http_timeout`` / ``http_error`` / ``connection_failed`` over HTTP) and the same
``event_id``, so apps must dedupe by ``event_id``. Interactive payloads and slash
commands are never retried: Slack shows the user an error instead.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import threading
import uuid
from collections.abc import Callable, Coroutine

import aiohttp

from tests.fake_slack.http_events import encode, post_event
from tests.fake_slack.records import JSON, Ack, Delivery, Envelope
from tests.fake_slack.socket_mode import SocketEndpoint


class Courier:
    """Delivery, ack bookkeeping and redelivery; its coroutines run on the fake's loop."""

    def __init__(
        self,
        lock: threading.Condition,
        endpoint: SocketEndpoint,
        *,
        ack_timeout: float | None,
        max_retries: int,
        on_acked: Callable[[Envelope, JSON | None], None],
    ) -> None:
        self.lock = lock
        self.endpoint = endpoint
        self.ack_timeout = ack_timeout
        self.max_retries = max_retries
        self.on_acked = on_acked
        self.http_target: tuple[str, str] | None = None
        self.envelopes: dict[str, Envelope] = {}
        self.acks: list[Ack] = []
        self.deliveries: list[Delivery] = []
        self.pending: collections.deque[Envelope] = collections.deque()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[object]] = set()

    @staticmethod
    def new_id() -> str:
        """A fresh envelope id."""
        return str(uuid.uuid4())

    def acked(self, envelope_id: str) -> bool:
        """True once the app acknowledged ``envelope_id``."""
        with self.lock:
            return any(a.envelope_id == envelope_id for a in self.acks)

    async def deliver(self, envelope: Envelope) -> None:
        """Send ``envelope`` by the configured route (returns before any HTTP answer)."""
        with self.lock:
            self.envelopes[envelope.envelope_id] = envelope
            target = self.http_target
        if target is not None:
            self.spawn(self._post(envelope, *target))
        else:
            await self._send(envelope)

    async def redeliver(self, envelope: Envelope, reason: str = "timeout") -> Envelope:
        """Deliver ``envelope`` again as Slack's next retry; returns the new envelope."""
        retry = dataclasses.replace(
            envelope,
            envelope_id=self.new_id(),
            retry_attempt=envelope.retry_attempt + 1,
            retry_reason=reason,
        )
        await self.deliver(retry)
        return retry

    def on_ack(self, envelope_id: str, payload: JSON | None, via: str = "socket") -> None:
        """Record an ack (socket frame or HTTP 200) and stop its redelivery timer."""
        timer = self._timers.pop(envelope_id, None)
        if timer is not None:
            timer.cancel()
        with self.lock:
            self.acks.append(Ack(envelope_id, payload, via))
            envelope = self.envelopes.get(envelope_id)
            self.lock.notify_all()
        if envelope is not None:
            self.on_acked(envelope, payload)

    def on_ready(self) -> None:
        """A client said hello: send what waited for a connection."""
        with self.lock:
            waiting = list(self.pending)
            self.pending.clear()
        for envelope in waiting:
            self.spawn(self._send(envelope))

    async def stop(self) -> None:
        """Cancel timers and in-flight deliveries."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _send(self, envelope: Envelope) -> None:
        sent = await self.endpoint.send(envelope.frame())
        with self.lock:
            if not sent:
                self.pending.append(envelope)
            self.deliveries.append(Delivery(envelope.envelope_id, "socket" if sent else "queued"))
            self.lock.notify_all()
        if sent and self.ack_timeout is not None:
            loop = asyncio.get_running_loop()
            self._timers[envelope.envelope_id] = loop.call_later(
                self.ack_timeout, self._expired, envelope
            )

    def _expired(self, envelope: Envelope) -> None:
        self._timers.pop(envelope.envelope_id, None)
        if not self.acked(envelope.envelope_id) and self._retriable(envelope):
            self.spawn(self.redeliver(envelope, "timeout"))

    async def _post(self, envelope: Envelope, url: str, secret: str) -> None:
        body, content_type = encode(envelope.type, envelope.payload)
        status: int | None = None
        try:
            async with asyncio.timeout(self.ack_timeout or 10.0):
                answer = await post_event(
                    url,
                    body,
                    secret,
                    retry_num=envelope.retry_attempt or None,
                    retry_reason=envelope.retry_reason or None,
                    content_type=content_type,
                )
        except TimeoutError:
            error = "http_timeout"
        except aiohttp.ClientError:
            error = "connection_failed"
        else:
            status = answer.status
            error = "" if status == 200 else "http_error"
        with self.lock:
            self.deliveries.append(Delivery(envelope.envelope_id, "http", status, error))
            self.lock.notify_all()
        if not error:
            self.on_ack(envelope.envelope_id, _answer_payload(answer.text), via="http")
        elif self._retriable(envelope):
            await self.redeliver(envelope, error)

    def _retriable(self, envelope: Envelope) -> bool:
        return envelope.type == "events_api" and envelope.retry_attempt < self.max_retries

    def spawn(self, coro: Coroutine[object, object, object]) -> None:
        """Run ``coro`` as a tracked task on the running loop (cancelled by ``stop``)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _answer_payload(text: str) -> JSON | None:
    """An HTTP answer body as an ack payload (JSON object, or text as ``{"text": ...}``)."""
    if not text.strip():
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"text": text}
    return parsed if isinstance(parsed, dict) else {"text": text}
