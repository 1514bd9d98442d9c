"""A fake Telegram Bot API server for tests: see ``server.py`` (HTTP) and ``state.py`` (API)."""

from tests.fake_telegram.html_check import HtmlParseError, ParsedText, parse_html, utf16_len
from tests.fake_telegram.records import (
    Call,
    ChatAction,
    Delivery,
    SentMessage,
    StoredFile,
)
from tests.fake_telegram.server import DEFAULT_TOKEN, FakeTelegram
from tests.fake_telegram.updates import make_chat, make_user, text_entities
from tests.fake_telegram.wire import Upload

__all__ = [
    "DEFAULT_TOKEN",
    "Call",
    "ChatAction",
    "Delivery",
    "FakeTelegram",
    "HtmlParseError",
    "ParsedText",
    "SentMessage",
    "StoredFile",
    "Upload",
    "make_chat",
    "make_user",
    "parse_html",
    "text_entities",
    "utf16_len",
]
