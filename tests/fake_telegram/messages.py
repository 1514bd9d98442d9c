"""Chats and messages in the fake Telegram server, and the methods that touch them.

sendMessage / sendDocument / sendPhoto / sendVoice, editMessageText / editMessageReplyMarkup,
deleteMessage, sendChatAction and answerCallbackQuery validate their input the way
Telegram does and keep what the bot sent per chat. Message ids count up per chat,
shared by the users' and the bot's messages. Not thread-safe: used under the
server lock.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from tests.fake_telegram.files import FileStore, media_json
from tests.fake_telegram.message_checks import (
    CHAT_ACTIONS,
    MAX_CAPTION,
    MAX_TEXT,
    check_text,
    inline_markup,
)
from tests.fake_telegram.records import ChatAction, SentMessage
from tests.fake_telegram.updates import default_chat, quoted
from tests.fake_telegram.wire import ApiError, Json, Upload, bad_request, chat_key, int_param

NOT_MODIFIED = (
    "message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)
QUERY_INVALID = "query is too old and response timeout expired or query ID is invalid"
Key = int | str


class Messages:
    """Chats, every message in them, and the bot's own messages."""

    def __init__(self, bot: Json, files: FileStore) -> None:
        self.bot = bot
        self.files = files
        self.chats: dict[Key, Json] = {}
        self.messages: dict[tuple[Key, int], Json] = {}
        self.sent: dict[Key, list[SentMessage]] = {}
        self.actions: list[ChatAction] = []
        self.queries: dict[str, Json | None] = {}  # callback query id -> its answer
        self._last_id: dict[Key, int] = {}
        self._sent_by_id: dict[tuple[Key, int], SentMessage] = {}

    def chat(self, key: Key) -> Json:
        """A known chat, or the one Telegram would report for an id never seen."""
        if isinstance(key, str):
            known = [c for c in self.chats.values() if c.get("username") == key.lstrip("@")]
            if known:
                return known[0]
        return self.chats.get(key) or default_chat(key)

    def next_id(self, key: Key, wanted: int | None = None) -> int:
        """The next message id in a chat (or ``wanted``, moving the counter past it)."""
        number = wanted if wanted is not None else self._last_id.get(key, 0) + 1
        self._last_id[key] = max(self._last_id.get(key, 0), number)
        return number

    def remember(self, message: Json) -> None:
        """Keep a message (a user's) so replies, edits and button presses can find it."""
        chat = message["chat"]
        self.chats[chat["id"]] = chat
        self.messages[(chat["id"], message["message_id"])] = message

    def current(self, key: Key, message_id: int) -> Json | None:
        """A message as it stands now."""
        return self.messages.get((key, message_id))

    def sent_in(self, key: Key) -> list[SentMessage]:
        """Copies of the bot's messages in a chat, oldest first."""
        return [copy.deepcopy(m) for m in self.sent.get(key, [])]

    def send_message(self, params: Json, uploads: dict[str, Upload]) -> Json:
        """``sendMessage``."""
        raw = params.get("text")
        text, entities = check_text(raw, params, MAX_TEXT, caption=False)
        sent = self._new(params, kind="text", text=text, raw=str(raw or ""), entities=entities)
        return copy.deepcopy(sent.message)

    def send_media(self, kind: str, params: Json, uploads: dict[str, Upload]) -> Json:
        """``sendDocument`` / ``sendPhoto`` / ``sendVoice``: an uploaded file or a known file_id."""
        stored = self._input_file(kind, params, uploads)
        raw = params.get("caption")
        text, entities = check_text(raw, params, MAX_CAPTION, caption=True)
        sent = self._new(
            params, kind=kind, text=text, raw=str(raw or ""), entities=entities, media=stored
        )
        return copy.deepcopy(sent.message)

    def edit_text(self, params: Json, uploads: dict[str, Upload]) -> Json:
        """``editMessageText``: without reply_markup the keyboard goes, as in Telegram."""
        sent = self._editable(params)
        if sent.kind != "text":
            raise bad_request("there is no text in the message to edit")
        raw = params.get("text")
        text, entities = check_text(raw, params, MAX_TEXT, caption=False)
        markup = inline_markup(params.get("reply_markup"))
        if (text, entities, markup) == (sent.text, sent.entities, sent.reply_markup):
            raise bad_request(NOT_MODIFIED)
        sent.text, sent.raw_text, sent.entities = text, str(raw), entities
        sent.parse_mode = params.get("parse_mode") or None
        return self._edited(sent, markup)

    def edit_markup(self, params: Json, uploads: dict[str, Upload]) -> Json:
        """``editMessageReplyMarkup``: without reply_markup the keyboard goes."""
        sent = self._editable(params)
        markup = inline_markup(params.get("reply_markup"))
        if markup == sent.reply_markup:
            raise bad_request(NOT_MODIFIED)
        return self._edited(sent, markup)

    def delete(self, params: Json, uploads: dict[str, Upload]) -> bool:
        """``deleteMessage``."""
        key = self._key(params)
        message_id = int_param(params, "message_id")
        if message_id is None or self.messages.pop((key, message_id), None) is None:
            raise bad_request("message to delete not found")
        sent = self._sent_by_id.get((key, message_id))
        if sent is not None:
            sent.deleted = True
        return True

    def chat_action(self, params: Json, uploads: dict[str, Upload]) -> bool:
        """``sendChatAction``."""
        key = self._key(params)
        action = params.get("action")
        if action not in CHAT_ACTIONS:
            raise bad_request("wrong parameter action in request")
        thread = int_param(params, "message_thread_id")
        self.actions.append(ChatAction(key, str(action), thread, time.monotonic()))
        return True

    def answer_query(self, params: Json, uploads: dict[str, Upload]) -> bool:
        """``answerCallbackQuery``: once per query the fake issued."""
        query_id = str(params.get("callback_query_id") or "")
        if query_id not in self.queries or self.queries[query_id] is not None:
            raise bad_request(QUERY_INVALID)
        self.queries[query_id] = {
            "text": params.get("text"),
            "show_alert": bool(params.get("show_alert", False)),
            "url": params.get("url"),
            "cache_time": params.get("cache_time"),
        }
        return True

    def _key(self, params: Json) -> Key:
        key = chat_key(params)
        return self.chat(key)["id"] if isinstance(key, str) else key

    def _new(
        self,
        params: Json,
        *,
        kind: str,
        text: str,
        raw: str,
        entities: list[Json],
        media: Any = None,
    ) -> SentMessage:
        key = self._key(params)
        chat = self.chat(key)
        markup = inline_markup(params.get("reply_markup"))
        reply_to = self._reply_to(key, params)
        thread = int_param(params, "message_thread_id")
        message: Json = {
            "message_id": self.next_id(key),
            "from": self.bot,
            "chat": chat,
            "date": int(time.time()),
        }
        if thread is not None:
            message["message_thread_id"] = thread
            if chat.get("is_forum"):
                message["is_topic_message"] = True
        if reply_to is not None:
            message["reply_to_message"] = quoted(self.messages[(key, reply_to)])
        if media is not None:
            message.update(media_json(kind, media, int_param(params, "duration") or 0))
        sent = SentMessage(
            chat_id=key,
            message_id=message["message_id"],
            text=text,
            raw_text=raw,
            parse_mode=params.get("parse_mode") or None,
            entities=entities,
            reply_markup=markup,
            thread_id=thread,
            reply_to=reply_to,
            kind=kind,
            file_id=None if media is None else media.file_id,
            message=message,
            params=copy.deepcopy(params),
        )
        _refresh(sent)
        self.sent.setdefault(key, []).append(sent)
        self._sent_by_id[(key, sent.message_id)] = sent
        self.messages[(key, sent.message_id)] = message
        return sent

    def _reply_to(self, key: Key, params: Json) -> int | None:
        reply = params.get("reply_parameters")
        if isinstance(reply, dict):
            wanted, allow = reply.get("message_id"), reply.get("allow_sending_without_reply")
        else:
            wanted = params.get("reply_to_message_id")
            allow = params.get("allow_sending_without_reply")
        if wanted is None:
            return None
        message_id = int(wanted)
        if (key, message_id) in self.messages:
            return message_id
        if allow:
            return None
        raise bad_request("message to be replied not found")

    def _input_file(self, kind: str, params: Json, uploads: dict[str, Upload]) -> Any:
        value = params.get(kind)
        name = (
            value[len("attach://") :]
            if isinstance(value, str) and value.startswith("attach://")
            else kind
        )
        upload = uploads.get(name)
        if upload is not None:
            folder = {"photo": "photos", "voice": "voice"}.get(kind, "documents")
            mime = upload.content_type or None
            return self.files.add(
                upload.data, folder=folder, file_name=upload.filename, mime_type=mime
            )
        if not value:
            raise bad_request(f"there is no {kind} in the request")
        if str(value).startswith(("http://", "https://")):
            raise bad_request("failed to get HTTP URL content")  # the fake has no internet
        try:
            return self.files.get(str(value))
        except ApiError as exc:
            raise bad_request("wrong file identifier/HTTP URL specified") from exc

    def _editable(self, params: Json) -> SentMessage:
        if params.get("inline_message_id"):
            raise bad_request("inline messages are not supported by the fake Telegram server")
        key = self._key(params)
        message_id = int_param(params, "message_id")
        if message_id is None:
            raise bad_request("message identifier is not specified")
        sent = self._sent_by_id.get((key, message_id))
        if sent is None or sent.deleted:
            if (key, message_id) in self.messages:
                raise bad_request("message can't be edited")
            raise bad_request("message to edit not found")
        return sent

    def _edited(self, sent: SentMessage, markup: Json | None) -> Json:
        sent.reply_markup = markup
        sent.edits += 1
        sent.message["edit_date"] = int(time.time())
        _refresh(sent)
        return copy.deepcopy(sent.message)


def _refresh(sent: SentMessage) -> None:
    """Write a SentMessage's text, entities and keyboard into its Message JSON."""
    message = sent.message
    text_key, entities_key = (
        ("text", "entities") if sent.kind == "text" else ("caption", "caption_entities")
    )
    for key in (text_key, entities_key, "reply_markup"):
        message.pop(key, None)
    if sent.text or sent.kind == "text":
        message[text_key] = sent.text
    if sent.entities:
        message[entities_key] = copy.deepcopy(sent.entities)
    if sent.reply_markup is not None:
        message["reply_markup"] = copy.deepcopy(sent.reply_markup)
