"""Webhook mode of the fake Telegram server: what setWebhook stored, and pushing updates.

While a webhook is set, the server POSTs each queued update as JSON to its URL,
with ``X-Telegram-Bot-Api-Secret-Token`` when a secret was given, one at a time,
oldest first. A 2xx answer confirms the update; anything else is recorded as the
last error and retried after ``retry_delay`` seconds. Unlike Telegram, plain
``http://`` URLs on any port are accepted (tests listen on 127.0.0.1), and a
method call in the webhook's answer body is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp

from tests.fake_telegram.polling import Signal
from tests.fake_telegram.records import Delivery, Journal
from tests.fake_telegram.update_queue import UpdateQueue
from tests.fake_telegram.wire import Described, Json, Upload, bad_request, int_param

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class Webhook:
    """The webhook setting, setWebhook / deleteWebhook / getWebhookInfo, and the pusher."""

    def __init__(self, queue: UpdateQueue, journal: Journal, signal: Signal) -> None:
        self.queue = queue
        self.journal = journal
        self.signal = signal
        self.url = ""
        self.secret_token: str | None = None
        self.max_connections = 40
        self.retry_delay = 0.2
        self.deliveries: list[Delivery] = []
        self.last_error_date: int | None = None
        self.last_error_message: str | None = None

    def set(self, params: Json, uploads: dict[str, Upload]) -> Described:
        """``setWebhook`` (an empty url removes the webhook)."""
        url = str(params.get("url") or "")
        if url and not url.startswith(("http://", "https://")):
            raise bad_request("bad webhook: An HTTPS URL must be provided for webhook")
        if params.get("drop_pending_updates"):
            self.queue.clear()
        self.queue.set_allowed(params.get("allowed_updates"))
        same = url == self.url
        self.url = url
        self.secret_token = params.get("secret_token") or None
        self.max_connections = int_param(params, "max_connections", 40) or 40
        self.signal.fire_threadsafe()
        if not url:
            return Described(True, "Webhook was deleted")
        return Described(True, "Webhook is already set" if same else "Webhook was set")

    def delete(self, params: Json, uploads: dict[str, Upload]) -> Described:
        """``deleteWebhook`` (``drop_pending_updates`` empties the queue)."""
        if params.get("drop_pending_updates"):
            self.queue.clear()
        was_set = bool(self.url)
        self.url = ""
        self.secret_token = None
        self.signal.fire_threadsafe()
        return Described(True, "Webhook was deleted" if was_set else "Webhook is already deleted")

    def info(self, params: Json, uploads: dict[str, Upload]) -> Json:
        """``getWebhookInfo``."""
        body: Json = {
            "url": self.url,
            "has_custom_certificate": False,
            "pending_update_count": len(self.queue.pending()),
        }
        if self.url:
            body["max_connections"] = self.max_connections
            body["ip_address"] = "127.0.0.1"
        if self.queue.allowed_updates:
            body["allowed_updates"] = list(self.queue.allowed_updates)
        if self.last_error_date is not None:
            body["last_error_date"] = self.last_error_date
            body["last_error_message"] = self.last_error_message
        return body

    async def push(self) -> None:
        """POST queued updates to the webhook while one is set, oldest first, until cancelled."""
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                wake = self.signal.current
                with self.journal.lock:
                    url, secret = self.url, self.secret_token
                    update = self.queue.next_ready() if url else None
                if update is None:
                    await wake.wait()
                    continue
                delivery = await post_update(session, url, secret, update)
                with self.journal.lock:
                    self._note(delivery, update)
                if delivery.error is not None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(wake.wait(), self.retry_delay)

    def _note(self, delivery: Delivery, update: Json) -> None:
        self.deliveries.append(delivery)
        if delivery.error is None:
            self.queue.acknowledge(update)
        else:
            self.last_error_date = int(time.time())
            if delivery.status is None:
                self.last_error_message = f"Connection failed: {delivery.error}"
            else:
                self.last_error_message = f"Wrong response from the webhook: {delivery.status}"
        self.journal.notify()


async def post_update(
    session: aiohttp.ClientSession, url: str, secret: str | None, update: Json
) -> Delivery:
    """POST one update to the webhook and report how it went."""
    headers = {SECRET_HEADER: secret} if secret else {}
    try:
        async with session.post(url, json=update, headers=headers) as response:
            await response.read()
            status: int | None = response.status
            error = None if 200 <= response.status < 300 else response.reason
    except (aiohttp.ClientError, TimeoutError) as exc:
        status, error = None, f"{type(exc).__name__}: {exc}"
    return Delivery(update["update_id"], url, status, error, time.monotonic())
