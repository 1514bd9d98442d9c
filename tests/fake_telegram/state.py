"""What the fake Telegram server knows, and the test-facing side of it.

``TelegramState`` holds the bot, chats, messages, files, commands, the update queue
and the call log, all under one lock, and offers tests the user's side (a user
sends a message or presses a button), injected API errors, and waits. It has no
HTTP: ``FakeTelegram`` (``server.py``) serves it. Every method is safe to call
from any thread, including from an async test's own event loop (none of them
block except ``wait_*``; use the ``await_*`` twins there).

A call is recorded once it is answered, together with its effect (``sent()``
already shows the message when ``wait_for("sendMessage")`` returns); getUpdates
is recorded when it parks, and its ``answer`` is filled in when it returns.
``wait_for`` / ``await_call`` hand each call out once, oldest first, so
successive waits for the same method return successive calls.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tests.fake_telegram.bot_settings import BotSettings, scope_key
from tests.fake_telegram.files import FileStore, media_json
from tests.fake_telegram.messages import Messages
from tests.fake_telegram.polling import Signal
from tests.fake_telegram.records import Call, ChatAction, Delivery, Journal, SentMessage, StoredFile
from tests.fake_telegram.update_queue import UpdateQueue
from tests.fake_telegram.updates import edited, make_chat, make_user, user_message
from tests.fake_telegram.webhook import Webhook
from tests.fake_telegram.wire import ApiError, Json, error_for

T = TypeVar("T")
MessageRef = SentMessage | Mapping[str, Any] | int


@dataclass(slots=True)
class _Fault:
    method: str
    error: ApiError
    times: int


class TelegramState:
    """The fake's state and the API tests use; ``FakeTelegram`` adds the HTTP side."""

    def __init__(self, token: str, bot_id: int, username: str, first_name: str) -> None:
        self.token = token
        self.journal = Journal()
        self.lock = self.journal.lock
        self.settings = BotSettings(bot_id, username, first_name)
        self.files = FileStore()
        self.messages = Messages(self.settings.me, self.files)
        self.queue = UpdateQueue()
        self.signal = Signal()  # armed by the server on its loop
        self.webhook = Webhook(self.queue, self.journal, self.signal)
        self._faults: list[_Fault] = []
        self._query_ids = itertools.count(4_000_000_000_000_001)

    def kick(self) -> None:
        """Wake parked long polls and the webhook pusher to look at the queue again."""
        self.signal.fire_threadsafe()

    # -- the user's side ---------------------------------------------------------------

    @staticmethod
    def user(user_id: int, first_name: str = "Ada", username: str | None = None) -> Json:
        """A Telegram user to send messages as."""
        return make_user(user_id, first_name, username)

    def user_sends(
        self,
        chat_id: int,
        user: Json,
        text: str = "",
        *,
        chat_type: str | None = None,
        chat_title: str | None = None,
        reply_to: MessageRef | None = None,
        entities: list[Json] | None = None,
        thread_id: int | None = None,
        document: bytes | None = None,
        photo: bytes | None = None,
        file_name: str | None = None,
        mime_type: str | None = None,
        message_id: int | None = None,
    ) -> Json:
        """Queue a user's message (private chat for positive ids, supergroup otherwise)."""
        kind = chat_type or ("private" if chat_id > 0 else "supergroup")
        forum = thread_id is not None and kind == "supergroup"
        chat = make_chat(chat_id, kind, title=chat_title, user=user, is_forum=forum)
        with self.lock:
            media = None
            if document is not None:
                stored = self.files.add(document, file_name=file_name, mime_type=mime_type)
                media = media_json("document", stored)
            elif photo is not None:
                stored = self.files.add(photo, folder="photos", mime_type="image/jpeg")
                media = media_json("photo", stored)
            quoted = None if reply_to is None else self._resolve(chat_id, reply_to)
            message = user_message(
                message_id=self.messages.next_id(chat_id, message_id),
                chat=chat,
                user=dict(user),
                text=text,
                entities=entities,
                reply_to=quoted,
                thread_id=thread_id,
                media=media,
            )
            self.messages.remember(message)
            return self.queue_update({"message": copy.deepcopy(message)})

    def user_edits(self, chat_id: int, message: MessageRef, text: str) -> Json:
        """Queue an ``edited_message``: the user's ``message`` now says ``text``."""
        with self.lock:
            changed = edited(self._resolve(chat_id, message), text)
            self.messages.remember(changed)
            return self.queue_update({"edited_message": copy.deepcopy(changed)})

    def user_presses(self, chat_id: int, user: Json, message: MessageRef, data: str) -> Json:
        """Queue a press on an inline button of ``message`` (as it stands now)."""
        with self.lock:
            query_id = str(next(self._query_ids))
            self.messages.queries[query_id] = None
            query = {
                "id": query_id,
                "from": dict(user),
                "message": self._resolve(chat_id, message),
                "chat_instance": f"-{abs(chat_id)}0042",
                "data": data,
            }
            return self.queue_update({"callback_query": query})

    def queue_update(self, body: Json) -> Json:
        """Queue any update (``body`` without ``update_id``, e.g. ``{"edited_message": ...}``)."""
        with self.lock:
            update = self.queue.add(copy.deepcopy(body))
            self.journal.notify()
        self.kick()
        return copy.deepcopy(update)

    def redeliver(self, update: Json) -> None:
        """Queue an update again with the same id, even if it was confirmed already."""
        with self.lock:
            self.queue.redeliver(copy.deepcopy(update))
            self.journal.notify()
        self.kick()

    def add_file(
        self,
        data: bytes,
        *,
        file_name: str | None = None,
        mime_type: str | None = None,
        file_size: int | None = None,
    ) -> StoredFile:
        """Register bytes that getFile and the download route will serve."""
        with self.lock:
            return self.files.add(
                data, file_name=file_name, mime_type=mime_type, file_size=file_size
            )

    def _resolve(self, chat_id: int, ref: MessageRef) -> Json:
        """The current JSON of a message given as SentMessage, dict or message_id."""
        fallback: Json | None
        if isinstance(ref, SentMessage):
            message_id, fallback = ref.message_id, ref.message
        elif isinstance(ref, int):
            message_id, fallback = ref, None
        else:
            message_id, fallback = int(ref["message_id"]), dict(ref)
        current = self.messages.current(chat_id, message_id) or fallback
        if current is None:
            raise ValueError(f"fake Telegram: no message {ref} in chat {chat_id}")
        return copy.deepcopy(current)

    # -- faults --------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        error_code: int,
        description: str | None = None,
        *,
        retry_after: int | None = None,
        times: int = 1,
        page: str | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with this error (429: RetryAfter);
        with ``page``, that HTML page is the answer's body instead of Telegram's JSON."""
        error = error_for(error_code, description, retry_after)
        error.page = page
        with self.lock:
            self._faults.append(_Fault(method.lower(), error, times))

    def clear_faults(self) -> None:
        """Forget the injected errors not used up yet."""
        with self.lock:
            self._faults.clear()

    def take_fault(self, method: str) -> ApiError | None:
        """The injected error for this call, if one is due (the server asks)."""
        with self.lock:
            for fault in self._faults:
                if fault.method == method.lower() and fault.times > 0:
                    fault.times -= 1
                    return fault.error
        return None

    # -- what happened -------------------------------------------------------------------

    def calls(self, method: str | None = None) -> list[Call]:
        """Every recorded call (of one method), oldest first."""
        with self.lock:
            return [c for c in self.journal.calls if method is None or c.method == method]

    def sent(self, chat_id: int | str) -> list[SentMessage]:
        """The bot's messages in a chat, oldest first, with edits applied."""
        with self.lock:
            return self.messages.sent_in(chat_id)

    def message(self, chat_id: int | str, message_id: int) -> Json | None:
        """A message's current JSON (the bot's or a user's), None once deleted."""
        with self.lock:
            return copy.deepcopy(self.messages.current(chat_id, message_id))

    def chat_actions(self, chat_id: int | str | None = None) -> list[ChatAction]:
        """sendChatAction calls (in one chat), oldest first."""
        with self.lock:
            return [a for a in self.messages.actions if chat_id is None or a.chat_id == chat_id]

    def callback_answer(self, query_id: str) -> Json | None:
        """How answerCallbackQuery answered a button press (text, show_alert, url)."""
        with self.lock:
            return copy.deepcopy(self.messages.queries.get(query_id))

    def commands(self, scope: Json | None = None, language_code: str = "") -> list[Json] | None:
        """The command list stored for a scope and language (None if never set)."""
        with self.lock:
            return copy.deepcopy(self.settings.commands.get(scope_key(scope, language_code)))

    @property
    def set_commands_count(self) -> int:
        """How many times setMyCommands succeeded."""
        with self.lock:
            return self.settings.set_count

    @property
    def confirmed_offset(self) -> int:
        """The highest getUpdates offset seen: every update below it is confirmed."""
        with self.lock:
            return self.queue.confirmed_offset

    def pending_updates(self) -> list[Json]:
        """Updates queued and not confirmed yet."""
        with self.lock:
            return copy.deepcopy(self.queue.pending())

    @property
    def webhook_url(self) -> str:
        """The webhook URL set by setWebhook ("" when none)."""
        with self.lock:
            return self.webhook.url

    @property
    def webhook_secret(self) -> str | None:
        """The secret_token given to setWebhook."""
        with self.lock:
            return self.webhook.secret_token

    def webhook_deliveries(self) -> list[Delivery]:
        """Every POST of an update to the webhook, oldest first."""
        with self.lock:
            return list(self.webhook.deliveries)

    # -- waiting -------------------------------------------------------------------------

    def wait_for(
        self, method: str, predicate: Callable[[Call], bool] | None = None, timeout: float = 10.0
    ) -> Call:
        """Block until a matching call arrives; each call is handed out once, oldest first."""
        return self.journal.wait_until(
            lambda: self.journal.take(method, predicate), timeout, f"a {method} call"
        )

    async def await_call(
        self,
        method: str,
        predicate: Callable[[Call], bool] | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109 - the same signature as wait_for
    ) -> Call:
        """``wait_for`` for async tests: waits without blocking the event loop."""
        return await self.journal.await_until(
            lambda: self.journal.take(method, predicate), timeout, f"a {method} call"
        )

    def wait_until(self, check: Callable[[], T | None], timeout: float = 10.0) -> T:
        """Block until ``check()`` returns something other than None (re-run on each change)."""
        return self.journal.wait_until(check, timeout, "the condition")

    async def await_until(
        self,
        check: Callable[[], T | None],
        timeout: float = 10.0,  # noqa: ASYNC109 - the same signature as wait_until
    ) -> T:
        """``wait_until`` for async tests."""
        return await self.journal.await_until(check, timeout, "the condition")

    def wait_confirmed(self, update: Json, timeout: float = 10.0) -> int:
        """Block until the client confirmed ``update``; returns the confirmed offset."""
        return self.wait_until(self._confirmed(update), timeout)

    async def await_confirmed(
        self,
        update: Json,
        timeout: float = 10.0,  # noqa: ASYNC109 - the same signature as wait_confirmed
    ) -> int:
        """``wait_confirmed`` for async tests."""
        return await self.await_until(self._confirmed(update), timeout)

    def _confirmed(self, update: Json) -> Callable[[], int | None]:
        wanted = int(update["update_id"])
        return lambda: self.queue.confirmed_offset if self.queue.confirmed_offset > wanted else None
