"""What the fake Telegram server remembers, and waiting on it from threads and event loops.

``Journal`` owns the server's one lock. Every state change (a call answered, an
update confirmed, a webhook delivery) happens under it and ends with ``notify``,
which wakes blocking waiters (``threading.Condition``) and asyncio waiters on any
loop (``call_soon_threadsafe``), so neither kind needs to sleep and poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tests.fake_telegram.wire import Json, Upload

T = TypeVar("T")


@dataclass(slots=True)
class Call:
    """One request: the method, its decoded parameters and uploads, and the answer."""

    method: str
    params: Json
    files: dict[str, Upload]
    at: float  # time.monotonic() on arrival
    http_method: str = "POST"
    answer: Json | None = None  # None while a long poll is parked, or if the connection dropped
    dropped: bool = False  # the fake closed the connection without answering

    @property
    def ok(self) -> bool:
        """Whether the call was answered ``"ok": true``."""
        return bool(self.answer and self.answer.get("ok"))

    @property
    def result(self) -> Any:
        """The ``result`` of the answer (None if there is none yet or it failed)."""
        return self.answer.get("result") if self.answer else None


@dataclass(slots=True)
class SentMessage:
    """A message the bot sent, as it stands now (edits applied)."""

    chat_id: int | str
    message_id: int
    text: str  # visible text (caption for media), after HTML parsing
    raw_text: str  # the text parameter as sent
    parse_mode: str | None
    entities: list[Json]
    reply_markup: Json | None
    thread_id: int | None
    reply_to: int | None  # message_id replied to
    kind: str = "text"  # "text", "document", "photo" or "voice"
    file_id: str | None = None
    deleted: bool = False
    edits: int = 0
    message: Json = field(default_factory=dict)  # the Message JSON as Telegram holds it
    params: Json = field(default_factory=dict)  # the send call's parameters (link previews...)

    @property
    def buttons(self) -> list[Json]:
        """The inline keyboard's buttons, row by row flattened."""
        rows = (self.reply_markup or {}).get("inline_keyboard", [])
        return [button for row in rows for button in row]


@dataclass(frozen=True, slots=True)
class ChatAction:
    """A sendChatAction call (typing...)."""

    chat_id: int | str
    action: str
    thread_id: int | None
    at: float


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A file the server can hand out by getFile and serve for download."""

    file_id: str
    file_unique_id: str
    file_path: str
    data: bytes
    file_size: int
    file_name: str | None = None
    mime_type: str | None = None

    def describe(self) -> Json:
        """The Bot API object for a document (Document fields)."""
        body: Json = {
            "file_id": self.file_id,
            "file_unique_id": self.file_unique_id,
            "file_size": self.file_size,
        }
        if self.file_name:
            body["file_name"] = self.file_name
        if self.mime_type:
            body["mime_type"] = self.mime_type
        return body


@dataclass(frozen=True, slots=True)
class Delivery:
    """One webhook POST: which update, and the HTTP status (None if it failed to connect)."""

    update_id: int
    url: str
    status: int | None
    error: str | None
    at: float


class Journal:
    """The call log and the server's lock, with blocking and async waits on any state."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self.calls: list[Call] = []
        self._handed: set[int] = set()  # ids of calls already returned by a wait
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()

    def record(self, call: Call) -> None:
        """Add a call to the log."""
        with self.lock:
            self.calls.append(call)
            self.notify()

    def notify(self) -> None:
        """Wake every waiter to re-check its condition (call with the lock held)."""
        self._changed.notify_all()
        for loop, event in list(self._waiters):
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # that loop is closed; its waiter is gone
                self._waiters.discard((loop, event))

    def take(self, method: str, predicate: Callable[[Call], bool] | None) -> Call | None:
        """The oldest matching call not handed out yet, marked as handed out."""
        for call in self.calls:
            if call.method != method or id(call) in self._handed:
                continue
            if predicate is None or predicate(call):
                self._handed.add(id(call))
                return call
        return None

    def wait_until(self, check: Callable[[], T | None], timeout: float, what: str) -> T:
        """Block until ``check()`` (run under the lock) returns something other than None."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while (found := check()) is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"fake Telegram: timed out waiting for {what}")
                self._changed.wait(remaining)
            return found

    async def await_until(
        self,
        check: Callable[[], T | None],
        timeout: float,  # noqa: ASYNC109 - mirrors wait_until; the deadline is the loop's
        what: str,
    ) -> T:
        """``wait_until`` without blocking the running event loop."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        event = asyncio.Event()
        waiter = (loop, event)
        with self.lock:
            self._waiters.add(waiter)
        try:
            while True:
                event.clear()
                with self.lock:
                    found = check()
                if found is not None:
                    return found
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError(f"fake Telegram: timed out waiting for {what}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), remaining)
        finally:
            with self.lock:
                self._waiters.discard(waiter)
