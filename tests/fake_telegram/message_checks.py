"""Telegram's checks on what a bot sends: text after parse_mode, and inline keyboards.

The error texts are Telegram's (without the ``Bad Request: `` prefix, which
``bad_request`` adds). Only ``parse_mode=HTML`` is understood; Markdown and
MarkdownV2 are refused by this fake so that a client relying on them shows up.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.fake_telegram.html_check import HtmlParseError, parse_html, utf16_len
from tests.fake_telegram.wire import Json, bad_request

MAX_TEXT = 4096
MAX_CAPTION = 1024
MAX_CALLBACK_DATA = 64
CHAT_ACTIONS = frozenset(
    {
        "typing", "upload_photo", "record_video", "upload_video", "record_voice",
        "upload_voice", "upload_document", "choose_sticker", "find_location",
        "record_video_note", "upload_video_note",
    }
)  # fmt: skip
BUTTON_ACTIONS = frozenset(
    {
        "url", "callback_data", "web_app", "login_url", "switch_inline_query",
        "switch_inline_query_current_chat", "switch_inline_query_chosen_chat",
        "copy_text", "callback_game", "pay",
    }
)  # fmt: skip


def check_text(raw: Any, params: Json, limit: int, *, caption: bool) -> tuple[str, list[Json]]:
    """Visible text and entities after ``parse_mode``, checked like Telegram checks them."""
    text = "" if raw is None else str(raw)
    mode = str(params.get("parse_mode") or "")
    entities_key = "caption_entities" if caption else "entities"
    entities: list[Json] = list(params.get(entities_key) or [])
    if mode.lower() == "html":
        try:
            parsed = parse_html(text)
        except HtmlParseError as exc:
            raise bad_request(f"can't parse entities: {exc}") from exc
        text, entities = parsed.text, parsed.entities
    elif mode.lower() in ("markdown", "markdownv2"):
        raise bad_request(f"unsupported parse_mode {mode}: the fake Telegram server only has HTML")
    elif mode:
        raise bad_request("unsupported parse_mode")
    if not caption and not text.strip():
        raise bad_request("message text is empty")
    if utf16_len(text) > limit:
        raise bad_request("message caption is too long" if caption else "message is too long")
    return text, entities


def inline_markup(value: Any) -> Json | None:
    """The inline keyboard to keep on the message (other keyboards are accepted, not shown)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request("can't parse reply keyboard markup JSON object")
    rows = value.get("inline_keyboard")
    if rows is None:
        return None
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad_request('field "inline_keyboard" must be an Array of Arrays')
    for button in (b for row in rows for b in row):
        if not isinstance(button, dict) or "text" not in button:
            raise bad_request("can't parse inline keyboard button: Can't find field \"text\"")
        if not BUTTON_ACTIONS & button.keys():
            raise bad_request(
                "can't parse inline keyboard button: "
                "Text buttons are unallowed in the inline keyboard"
            )
        data = button.get("callback_data")
        if data is not None and not 1 <= len(str(data).encode()) <= MAX_CALLBACK_DATA:
            raise bad_request("BUTTON_DATA_INVALID")
    return copy.deepcopy(value)
