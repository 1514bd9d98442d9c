"""Reading Telegram updates (``normalise``) and PTB's errors (``classify``), without a network.

Updates are built as the fake Telegram server builds them and parsed by PTB's own
``Update.de_json``, so offsets, entities and media fields are Telegram's shapes.
"""

from __future__ import annotations

import datetime as dt
import warnings
from typing import Any

import pytest
from telegram import Update
from telegram.error import BadRequest, Forbidden, NetworkError, RetryAfter, TimedOut
from telegram.warnings import PTBDeprecationWarning

from bot.core.delivery import Retry
from bot.core.messages import Attachment, InboundMessage
from channels.telegram.client import classify, is_markup_error, retry_after_s
from channels.telegram.events import BotIdentity, normalise
from tests.fake_telegram import FakeTelegram, make_chat, text_entities

GROUP = -1001234567
ADA = FakeTelegram.user(7001, "Ada", "ada")
TEAM = make_chat(GROUP, "supergroup", title="Team")
FORUM = make_chat(GROUP, "supergroup", title="Team", is_forum=True)
BOT = {"id": 123456, "is_bot": True, "first_name": "PinClaw"}
BOT_ME = BotIdentity(123456, "pinclaw_bot")
PHOTO = [{"file_id": "p", "file_unique_id": "pu", "width": 9, "height": 9}]
BOT_PHOTO = {"message_id": 8, "from": BOT, "chat": TEAM, "date": 0, "photo": PHOTO}


def group_message(text: str, **fields: Any) -> dict[str, Any]:
    """A group message from Ada, with the entities Telegram would add."""
    message = {"message_id": 10, "from": ADA, "chat": TEAM, "date": 0, "text": text}
    entities = fields.pop("entities", None)
    found = text_entities(text) if entities is None else entities
    if found:
        message["entities"] = found
    return {**message, **fields}


def private_message(**fields: Any) -> dict[str, Any]:
    """A direct message from Ada (media fields given by the caller)."""
    return {"message_id": 1, "from": ADA, "chat": make_chat(7001), "date": 0, **fields}


def normalised(message: dict[str, Any]) -> InboundMessage | None:
    """A message JSON (as the fake builds it) through PTB's parser and ``normalise``."""
    me = BotIdentity(123456, "pinclaw_bot", frozenset({"new", "status"}))
    return normalise(Update.de_json({"update_id": 1, "message": message}, None), me)


def test_mentions_are_found_by_utf16_offsets_and_taken_out() -> None:
    text = "😀 hey @PinClaw_Bot, look 🎉 @other"
    inbound = normalised(group_message(text))
    assert inbound is not None
    assert (inbound.mentioned, inbound.is_direct, inbound.text) == (
        True,
        False,
        "😀 hey , look 🎉 @other",
    )
    assert (inbound.chat_title, inbound.sender_name, inbound.message_id) == (
        "Team",
        "Ada",
        f"{GROUP}:10",
    )


def test_commands_addressing_and_text_mentions() -> None:
    ours = normalised(group_message("/new@pinclaw_bot please"))
    assert ours is not None and (ours.text, ours.mentioned) == ("/new please", True)
    bare = normalised(group_message("/status"))
    assert bare is not None and bare.mentioned
    assert normalised(group_message("/new@other_bot")) is None
    unknown = normalised(group_message("/weather"))
    assert unknown is not None and not unknown.mentioned
    entity = {"type": "text_mention", "offset": 3, "length": 7, "user": BOT}
    by_name = normalised(group_message("hi PinClaw, hello", entities=[entity]))
    assert by_name is not None and (by_name.text, by_name.mentioned) == ("hi , hello", True)


def test_topics_replies_and_what_is_ignored() -> None:
    created = {
        "message_id": 5,
        "chat": FORUM,
        "date": 0,
        "forum_topic_created": {"name": "t", "icon_color": 1},
    }
    in_topic = group_message(
        "@pinclaw_bot hi",
        chat=FORUM,
        message_thread_id=5,
        is_topic_message=True,
        reply_to_message=created,
    )
    inbound = normalised(in_topic)
    assert inbound is not None
    assert (inbound.thread_id, inbound.reply_to_id, inbound.reply_to_bot) == ("5", None, False)
    bots = {
        "message_id": 9,
        "from": BOT,
        "chat": FORUM,
        "date": 0,
        "text": "earlier",
    }
    answer = normalised(group_message("thanks", chat=FORUM, reply_to_message=bots))
    assert answer is not None and (answer.reply_to_bot, answer.reply_to_id) == (True, f"{GROUP}:9")
    assert normalised(group_message("", new_chat_title="renamed")) is None
    post = {"message_id": 3, "chat": make_chat(-100777, "channel"), "date": 0, "text": "x"}
    assert normalise(Update.de_json({"update_id": 2, "channel_post": post}, None), BOT_ME) is None


def test_an_edited_message_is_an_edit_of_the_original_with_an_id_per_edit() -> None:
    def edit(text: str, at: int) -> InboundMessage | None:
        message = group_message(text, edit_date=at)
        return normalise(Update.de_json({"update_id": 3, "edited_message": message}, None), BOT_ME)

    first, again, other = (
        edit("@pinclaw_bot fixed", 100),
        edit("@pinclaw_bot fixed", 100),
        edit("@pinclaw_bot fixed twice", 100),
    )
    assert first is not None and again is not None and other is not None
    assert (first.edit_of, first.text, first.sent_at) == (f"{GROUP}:10", "fixed", 100.0)
    assert first.message_id == again.message_id  # a redelivery: stored once
    assert first.message_id is not None and first.message_id.startswith(f"{GROUP}:10:edit:100:")
    assert other.message_id != first.message_id  # two edits within one second differ
    assert first.mentioned  # access rules apply as to any message: addressed by its mention


def test_a_reply_carries_the_quoted_part_or_the_whole_text_cut_at_2000() -> None:
    bens = {"message_id": 9, "from": FakeTelegram.user(7003, "Ben"), "chat": TEAM, "date": 0}
    whole = normalised(group_message("hm", reply_to_message={**bens, "text": "a long story"}))
    assert whole is not None
    assert (whole.quoted_text, whole.quoted_from) == ("a long story", "Ben")
    assert whole.quotes == "a message quoted from Ben"
    part = normalised(
        group_message(
            "hm",
            reply_to_message={**bens, "text": "a long story"},
            quote={"text": "long", "position": 2},
        )
    )
    assert part is not None and part.quoted_text == "long"
    caption = normalised(group_message("hm", reply_to_message={**BOT_PHOTO, "caption": "y" * 2500}))
    assert caption is not None and caption.quoted_from == "PinClaw" and caption.quotes == ""
    assert caption.quoted_text == "y" * 2000 + " … (cut)"
    plain = normalised(group_message("no reply"))
    assert plain is not None and (plain.quoted_text, plain.quoted_from) == ("", "")


def test_errors_are_classified_and_retry_after_read_without_warnings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.warns(PTBDeprecationWarning):  # PTB warns as it builds one, in its int mode
        flood, short = RetryAfter(3), RetryAfter(dt.timedelta(seconds=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reading it must not warn, in either mode
        assert classify(flood) == Retry(3.1) and retry_after_s(short) == 2.0
        monkeypatch.setenv("PTB_TIMEDELTA", "true")
        assert isinstance(short.retry_after, dt.timedelta) and retry_after_s(short) == 2.0
    assert classify(TimedOut()) == Retry() and classify(NetworkError("reset")) == Retry()
    for permanent in (BadRequest("Chat not found"), Forbidden("bot was blocked by the user")):
        assert classify(permanent) is None
    assert is_markup_error(BadRequest("Can't parse entities: unsupported start tag"))
    assert is_markup_error(BadRequest("Message text is empty"))
    assert not is_markup_error(BadRequest("Chat not found"))


def test_the_largest_photo_and_other_media_become_attachments() -> None:
    sizes = [
        {"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 900},
        {
            "file_id": "big",
            "file_unique_id": "b",
            "width": 1280,
            "height": 960,
            "file_size": 90_000,
        },
    ]
    voice = {"file_id": "v", "file_unique_id": "v", "duration": 3, "file_size": 1200}
    inbound = normalised(private_message(photo=sizes, caption="look"))
    assert inbound is not None and inbound.text == "look" and inbound.is_direct
    assert inbound.attachments == (Attachment("photo.jpg", "image/jpeg", 90_000, "big"),)
    spoken = normalised(private_message(voice=voice))
    assert spoken is not None and spoken.attachments == (
        Attachment("voice.ogg", "audio/ogg", 1200, "v"),
    )
