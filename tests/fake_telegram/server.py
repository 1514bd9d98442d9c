"""A fake Telegram Bot API server on 127.0.0.1 for tests, driven by the real client libraries.

Routes: ``{url}/bot<TOKEN>/<method>`` (GET or POST; method names are case-insensitive,
as in Telegram) and ``{url}/file/bot<TOKEN>/<file_path>`` for downloads (recorded as
the pseudo-method ``downloadFile``). With python-telegram-bot::

    Application.builder().token(fake.token)
        .base_url(fake.base_url).base_file_url(fake.base_file_url).build()

Long polls (getUpdates) park on the server's loop until an update is queued or
their ``timeout`` runs out; a newer getUpdates ends a parked one with 409 like
Telegram. Network faults: ``drop_polls`` closes parked polls' connections,
``stall_polls`` holds polls without answering, ``unreachable`` closes every
connection unanswered. Stopping the server answers parked polls at once.
The test-facing API (users' messages, button presses, waits, what was sent)
lives in ``state.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from aiohttp import web

from tests.fake_telegram.polling import LongPolls
from tests.fake_telegram.records import Call
from tests.fake_telegram.state import TelegramState
from tests.fake_telegram.wire import (
    ApiError,
    Json,
    Upload,
    bad_request,
    int_param,
    ok_body,
    read_params,
)
from tests.threaded_server import ThreadedServer

DEFAULT_TOKEN = "123456:TEST"
WEBHOOK_ACTIVE = (
    "Conflict: can't use getUpdates method while webhook is active; "
    "use deleteWebhook to delete the webhook first"
)
Handler = Callable[[Json, dict[str, Upload]], Any]
_API_PATH = re.compile(r"/bot([^/]*)/([^/]+)")
_FILE_PATH = re.compile(r"/file/bot([^/]*)/(.+)")


class FakeTelegram(ThreadedServer, TelegramState):
    """The fake server: ``with FakeTelegram.running() as telegram:`` or ``start()``/``stop()``."""

    name = "fake-telegram"

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        bot_id: int = 123456,
        username: str = "pinclaw_bot",
        first_name: str = "PinClaw",
        webhook_retry_delay: float = 0.2,
    ) -> None:
        ThreadedServer.__init__(self)
        TelegramState.__init__(self, token, bot_id, username, first_name)
        self.webhook.retry_delay = webhook_retry_delay
        self.polls = LongPolls(self.lock, self.signal)
        self._unreachable = False
        self._pusher: asyncio.Task[None] | None = None
        handlers: dict[str, Handler] = {
            "getUpdates": self._not_called,  # parked on the loop instead: see _get_updates
            "getMe": self.settings.get_me,
            "setMyCommands": self.settings.set_commands,
            "getMyCommands": self.settings.get_commands,
            "deleteMyCommands": self.settings.delete_commands,
            "sendMessage": self.messages.send_message,
            "sendDocument": partial(self.messages.send_media, "document"),
            "sendPhoto": partial(self.messages.send_media, "photo"),
            "sendVoice": partial(self.messages.send_media, "voice"),
            "editMessageText": self.messages.edit_text,
            "editMessageReplyMarkup": self.messages.edit_markup,
            "deleteMessage": self.messages.delete,
            "sendChatAction": self.messages.chat_action,
            "answerCallbackQuery": self.messages.answer_query,
            "getFile": self.files.get_file,
            "setWebhook": self.webhook.set,
            "deleteWebhook": self.webhook.delete,
            "getWebhookInfo": self.webhook.info,
        }
        self._handlers = {name.lower(): (name, fn) for name, fn in handlers.items()}

    @property
    def base_url(self) -> str:
        """The Bot API root a client appends ``<TOKEN>/<method>`` to."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        """The file root a client appends ``<TOKEN>/<file_path>`` to."""
        return f"{self.url}/file/bot"

    @property
    def parked_polls(self) -> int:
        """How many getUpdates requests are waiting for an update right now."""
        with self.lock:
            return len(self.polls.parked)

    # -- network faults ------------------------------------------------------------------

    def drop_polls(self) -> int:
        """Close every parked getUpdates connection unanswered; returns how many."""
        return self.call(self._drop_polls())

    def stall_polls(self, on: bool) -> None:
        """While on, getUpdates requests are held and never answered (until off or stop)."""
        with self.lock:
            self.polls.stalled = on
        self.kick()

    def unreachable(self, on: bool) -> None:
        """While on, every request's connection is closed without an answer."""
        with self.lock:
            self._unreachable = on

    async def _drop_polls(self) -> int:
        return self.polls.drop_all()

    # -- HTTP ----------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        """One catch-all route; the path says API call or file download."""
        self.signal.arm()
        self.polls.stopping = False
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_startup.append(self._start_pusher)
        return app

    async def on_stop(self) -> None:
        """Answer parked polls now and stop pushing to the webhook."""
        with self.lock:
            self.polls.stopping = True
        self.signal.fire()
        if self._pusher is not None:
            self._pusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pusher
            self._pusher = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if api := _API_PATH.fullmatch(request.path):
            return await self._api(request, api.group(1), api.group(2))
        if download := _FILE_PATH.fullmatch(request.path):
            return await self._download(request, download.group(1), download.group(2))
        return web.json_response(ApiError(404, "Not Found").body(), status=404)

    async def _api(self, request: web.Request, token: str, method: str) -> web.StreamResponse:
        known = self._handlers.get(method.lower())
        name = known[0] if known else method
        unreadable: ApiError | None = None
        try:
            params, uploads = await read_params(request)
        except ApiError as exc:
            params, uploads, unreadable = {}, {}, exc
        call = Call(name, params, uploads, time.monotonic(), request.method)
        if self._unreachable:
            return self._hang_up(request, call)
        try:
            if token != self.token:
                raise ApiError(401, "Unauthorized")
            if known is None:
                raise ApiError(404, "Not Found: method not found")
            if unreadable is not None:
                raise unreadable
            if fault := self.take_fault(name):
                raise fault
            if name == "getUpdates":
                return await self._get_updates(request, call)
            with self.lock:
                answer = ok_body(known[1](params, uploads))
                self._finish(call, answer)
            return web.json_response(answer)
        except ApiError as exc:
            with self.lock:
                self._finish(call, exc.body())
            if exc.page is not None:
                return web.Response(text=exc.page, status=exc.code, content_type="text/html")
            return web.json_response(exc.body(), status=exc.code)

    def _finish(self, call: Call, answer: Json) -> None:
        """Record an answered call (with the lock held, together with its state change)."""
        call.answer = answer
        self.journal.record(call)

    def _hang_up(self, request: web.Request, call: Call) -> web.StreamResponse:
        call.dropped = True
        self.journal.record(call)
        if request.transport is not None:
            request.transport.close()
        return web.Response()  # never reaches the client: its connection is gone

    async def _download(self, request: web.Request, token: str, path: str) -> web.StreamResponse:
        call = Call("downloadFile", {"file_path": path}, {}, time.monotonic(), request.method)
        if self._unreachable:
            return self._hang_up(request, call)
        try:
            if token != self.token:
                raise ApiError(401, "Unauthorized")
            if fault := self.take_fault("downloadFile"):
                raise fault
            with self.lock:
                stored = self.files.by_path(path)
                if stored is None:
                    raise ApiError(404, "Not Found")
                self._finish(call, {"ok": True, "result": {"file_size": len(stored.data)}})
        except ApiError as exc:
            with self.lock:
                self._finish(call, exc.body())
            return web.json_response(exc.body(), status=exc.code)
        content_type = stored.mime_type or "application/octet-stream"
        return web.Response(body=stored.data, content_type=content_type)

    # -- getUpdates ----------------------------------------------------------------------

    async def _get_updates(self, request: web.Request, call: Call) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        params = call.params
        with self.lock:
            if self.webhook.url:
                raise ApiError(409, WEBHOOK_ACTIVE)
            offset = int_param(params, "offset")
            limit = min(max(int_param(params, "limit", 100) or 100, 1), 100)
            timeout = _seconds(params.get("timeout"))
            allowed = params.get("allowed_updates")
            if allowed is not None and not isinstance(allowed, list):
                raise bad_request("can't parse allowed_updates JSON array")
            if offset:
                self.queue.confirm(offset)
            self.queue.set_allowed(allowed)
            poll = self.polls.park(request.transport, loop.time() + timeout)
            self.journal.record(call)
        self.signal.fire()  # superseded polls answer now
        outcome = await self.polls.hold(poll, lambda: self.queue.take(limit))
        with self.lock:
            if outcome is None:
                call.dropped = True
                self.journal.notify()
                return web.Response()  # never sent: the connection is closed already
            answer = outcome.body() if isinstance(outcome, ApiError) else ok_body(outcome)
            call.answer = answer
            self.journal.notify()
        status = outcome.code if isinstance(outcome, ApiError) else 200
        return web.json_response(answer, status=status)

    def _not_called(self, params: Json, uploads: dict[str, Upload]) -> Any:
        raise AssertionError("getUpdates is answered by _get_updates")

    async def _start_pusher(self, app: web.Application) -> None:
        self._pusher = asyncio.create_task(self.webhook.push(), name="fake-telegram:webhook")


def _seconds(value: Any) -> float:
    """getUpdates' ``timeout``: seconds as a number (0 means answer at once)."""
    if value is None or value == "":
        return 0.0
    try:
        return max(float(value), 0.0)
    except (TypeError, ValueError) as exc:
        raise bad_request("wrong parameter timeout in request") from exc
