"""Pictures and voice messages, end to end: a platform's fake, the real daemon, the fake model.

A photo sent on Telegram, Discord or Slack is downloaded through the real client
library and reaches the fake model as a picture in its wire format; a voice note
on Telegram is transcribed by the fake transcription server and answered with the
transcript quoted. The notes people get (a model without vision, no transcription
set up, a picture over the size cap) are checked as they arrive in the chat.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.core.conversation import BLIND_NOTE
from bot.daemon.main import Daemon
from bot.media.prepare import BLIND_TOLD, NO_TRANSCRIPTION
from tests.channel_tables import discord_table, slack_table, telegram_table
from tests.chat_harness import replies
from tests.daemon_harness import running_daemon
from tests.fake_discord import FakeDiscord
from tests.fake_discord.payloads import message as discord_message
from tests.fake_discord.payloads import snowflake
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_telegram import FakeTelegram, make_chat
from tests.fake_transcription import FakeTranscription, Refuse
from tests.media_samples import FileHost, decoded, jpeg, ogg_opus, png

OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
Json = dict[str, Any]


@pytest.fixture
def transcription() -> Iterator[FakeTranscription]:
    """The fake speech-to-text server."""
    with FakeTranscription.running() as server:
        yield server


def provider(llm: FakeLLM, kind: str = "openai", model: str = "gpt-4o-mini", **extra: Any) -> Json:
    """A ``[provider]`` table for the fake model, in the given wire format."""
    base = f"{llm.url}/v1" if kind == "openai" else llm.url
    return {"kind": kind, "model": model, "base_url": base, "api_key": "test", **extra}


@asynccontextmanager
async def telegram_daemon(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, **tables: Any
) -> AsyncIterator[Daemon]:
    """The daemon with Telegram (Ada allowed) and a seeing model unless ``provider`` says."""
    channels = {"telegram": telegram_table(telegram)}
    tables.setdefault("provider", provider(llm))
    async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def voice_note(telegram: FakeTelegram, data: bytes, caption: str = "") -> None:
    """Ada records a voice note (Telegram sends it as ``voice``, Ogg Opus)."""
    stored = telegram.add_file(data, mime_type="audio/ogg")
    voice = {
        "file_id": stored.file_id,
        "file_unique_id": stored.file_unique_id,
        "duration": 7,
        "mime_type": "audio/ogg",
        "file_size": len(data),
    }
    with telegram.lock:
        message: Json = {
            "message_id": telegram.messages.next_id(OWNER),
            "from": ADA,
            "chat": make_chat(OWNER),
            "date": int(time.time()),
            "voice": voice,
        }
        if caption:
            message["caption"] = caption
        telegram.messages.remember(message)
    telegram.queue_update({"message": copy.deepcopy(message)})


def last_user_content(llm: FakeLLM) -> Any:
    """The content of the newest user message of the newest OpenAI-wire request."""
    messages = llm.requests[-1].body["messages"]
    return next(m for m in reversed(messages) if m["role"] == "user")["content"]


async def test_a_telegram_photo_reaches_the_model_and_history_keeps_only_its_name(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    photo = jpeg(1280, 960)
    llm.queue(CallTools([("clock", {})]), Say("A porch at night."), Say("Still the porch."))
    async with telegram_daemon(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "what is this?", photo=photo)
        (reply,) = await replies(telegram, 1)
        assert reply.text == "A porch at night."
        telegram.user_sends(OWNER, ADA, "and now?")
        await replies(telegram, 2)
    first_round, after_the_tool, next_turn = llm.requests
    for request in (first_round, after_the_tool):  # the whole turn sees the picture
        users = [m for m in request.body["messages"] if m["role"] == "user"]
        (picture, words) = users[-1]["content"]
        url = picture["image_url"]["url"]
        assert url.startswith("data:image/jpeg;base64,")
        assert decoded(url.removeprefix("data:image/jpeg;base64,")) == photo
        assert words == {"type": "text", "text": "what is this?\n[image: photo.jpg, 1280x960]"}
    earlier = [m["content"] for m in next_turn.body["messages"] if m["role"] == "user"]
    assert earlier == ["what is this?\n[image: photo.jpg, 1280x960]", "and now?"]


async def test_a_discord_photo_reaches_an_anthropic_model_as_an_image_block(
    tmp_path: Path, llm: FakeLLM
) -> None:
    photo = png(640, 480)
    llm.queue(Say("A blue square."))
    with FakeDiscord.running(heartbeat_interval=1.0) as fake, FileHost.running() as cdn:
        channels = {"discord": discord_table(fake)}
        tables = {"provider": provider(llm, "anthropic", "claude-sonnet-4-5")}
        async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
            assert await daemon.channels["discord"].status.wait_connected(10)
            dm = fake.dm_channel(fake.owner)["id"]
            message = discord_message(dm, fake.owner, "what colour?")
            url = cdn.add("shot.png", photo, "image/png")
            message["attachments"] = [
                {
                    "id": snowflake(),
                    "filename": "shot.png",
                    "size": len(photo),
                    "url": url,
                    "proxy_url": url,
                    "content_type": "image/png",
                }
            ]
            fake.world.store_message(message)
            fake.dispatch("MESSAGE_CREATE", message)
            await fake.await_until(lambda: len(fake.sent(dm)) >= 1)
            assert fake.sent(dm)[0]["content"] == "A blue square."
    (request,) = llm.requests
    assert request.wire == "anthropic"
    image, text = request.body["messages"][-1]["content"]
    assert image["type"] == "image"
    assert image["source"]["type"] == "base64" and image["source"]["media_type"] == "image/png"
    assert decoded(image["source"]["data"]) == photo
    assert text == {"type": "text", "text": "what colour?\n[image: shot.png, 640x480]"}
    assert cdn.downloads == ["shot.png"]


async def test_a_slack_photo_reaches_a_gemini_model_as_inline_data(
    tmp_path: Path, llm: FakeLLM
) -> None:
    photo = png(300, 200)
    llm.queue(Say("A small picture."))
    with FakeSlack.running() as slack:
        channels = {"slack": slack_table(slack)}
        tables = {"provider": provider(llm, "gemini", "gemini-2.5-flash")}
        async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
            assert await daemon.channels["slack"].status.wait_connected(10)
            slack.user_sends(ALICE_DM, ALICE, "", files=[("porch.png", photo, "image/png")])
            await slack.await_until(lambda: len(slack.sent(ALICE_DM)) >= 1, what="a reply")
            assert slack.sent(ALICE_DM)[0]["text"] == "A small picture."
    (request,) = llm.requests
    assert request.wire == "gemini"
    inline, text = request.body["contents"][-1]["parts"]
    assert inline["inlineData"]["mimeType"] == "image/png"
    assert decoded(inline["inlineData"]["data"]) == photo
    # Slack's stand-in text "(shared porch.png)" is not the sender's words: only the picture.
    assert text == {"text": "[image: porch.png, 300x200]"}


async def test_a_file_named_like_a_photo_that_is_text_is_not_sent_as_a_picture(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with telegram_daemon(tmp_path, llm, telegram):
        telegram.user_sends(
            OWNER,
            ADA,
            "look",
            document=b"this is not a picture, only words\n",
            file_name="photo.jpg",
            mime_type="image/jpeg",
        )
        await replies(telegram, 1)
    content = last_user_content(llm)
    assert isinstance(content, str)  # no image parts at all
    assert content == (
        "look\n[attached: photo.jpg (image/jpeg, 34 bytes)] "
        "(not shown: its content is not a JPEG, PNG, GIF or WebP picture)"
    )


async def test_a_model_without_vision_gets_a_note_and_the_person_is_told_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Say("I cannot see it, sorry."), Say("Still cannot."))
    blind = provider(llm, model="llama3.1:8b")  # a text-only model, by its name
    async with telegram_daemon(tmp_path, llm, telegram, provider=blind):
        telegram.user_sends(OWNER, ADA, "what is this?", photo=jpeg(800, 600))
        (first,) = await replies(telegram, 1)
        telegram.user_sends(OWNER, ADA, "and this?", photo=jpeg(800, 600))
        second = (await replies(telegram, 2))[1]
    assert first.text == f"{BLIND_TOLD}\n\nI cannot see it, sorry."
    assert second.text == "Still cannot."
    assert last_user_content(llm) == f"and this?\n{BLIND_NOTE} (photo.jpg)"
    assert telegram.calls("getFile") == []  # nothing downloaded that nobody can look at


async def test_a_picture_over_the_cap_is_not_downloaded_and_the_person_is_told(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Say("I could not see the picture."))
    photo = png(200, 200) + bytes(12_000)
    size = f"{len(photo) / 1024:.0f} KB"
    async with telegram_daemon(tmp_path, llm, telegram, media={"max_image_bytes": 8192}):
        telegram.user_sends(OWNER, ADA, "", photo=photo)
        (reply,) = await replies(telegram, 1)
    assert reply.text == (
        f"(photo.jpg is {size}, more than the 8 KB I look at, so I did not see it.)\n\n"
        "I could not see the picture."
    )
    assert last_user_content(llm) == f"[image: photo.jpg, not shown: {size}, over the 8 KB limit]"
    assert telegram.calls("getFile") == []


async def test_a_voice_note_is_transcribed_and_answered_with_the_transcript_quoted(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, transcription: FakeTranscription
) -> None:
    recording = ogg_opus(7.2)
    llm.queue(Say("Yes, it is on."))
    settings = {"base_url": transcription.base_url, "model": "whisper-large-v3", "api_key": "gsk"}
    async with telegram_daemon(tmp_path, llm, telegram, transcription=settings):
        voice_note(telegram, recording)
        (reply,) = await replies(telegram, 1)
    assert reply.text == "> 🎤 is the porch light on\n\nYes, it is on."
    (upload,) = transcription.uploads
    assert (upload.model, upload.file_name, upload.data) == (
        "whisper-large-v3",
        "voice.ogg",
        recording,
    )
    assert upload.authorization == "Bearer gsk"
    assert last_user_content(llm) == "[voice message, 0:07] is the porch light on"


async def test_without_transcription_a_voice_note_gets_the_how_to_and_no_model_call(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with telegram_daemon(tmp_path, llm, telegram):
        voice_note(telegram, ogg_opus(3))
        (reply,) = await replies(telegram, 1)
    assert reply.text == NO_TRANSCRIPTION
    assert llm.requests == []
    assert telegram.calls("getFile") == []


async def test_a_failing_transcription_is_tried_twice_then_explained_without_a_model_call(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    transcription: FakeTranscription,
    caplog: pytest.LogCaptureFixture,
) -> None:
    transcription.queue(Refuse(502, "upstream down"), Refuse(502, "upstream down"))
    settings = {"base_url": transcription.base_url}
    with caplog.at_level(logging.WARNING):
        async with telegram_daemon(tmp_path, llm, telegram, transcription=settings):
            voice_note(telegram, ogg_opus(2))
            (reply,) = await replies(telegram, 1)
    assert reply.text == (
        "Sorry, I couldn't understand your voice message: the transcription service had a "
        "problem, twice. Please try again later, or type your message."
    )
    assert len(transcription.uploads) == 2
    assert llm.requests == []
    assert "could not transcribe voice.ogg" in caplog.text and "HTTP 502" in caplog.text
    assert "upstream down" in caplog.text


async def test_a_slack_audio_file_is_transcribed_under_its_own_name(
    tmp_path: Path, llm: FakeLLM, transcription: FakeTranscription
) -> None:
    recording = b"\x00\x00\x00\x20ftypM4A " + bytes(200)
    llm.queue(Say("It is on."))
    with FakeSlack.running() as slack:
        channels = {"slack": slack_table(slack)}
        tables = {"transcription": {"base_url": transcription.base_url}}
        async with running_daemon(tmp_path, llm, channels, tables=tables) as daemon:
            assert await daemon.channels["slack"].status.wait_connected(10)
            slack.user_sends(ALICE_DM, ALICE, "", files=[("memo.m4a", recording, "audio/mp4")])
            await slack.await_until(lambda: len(slack.sent(ALICE_DM)) >= 1, what="a reply")
            assert slack.sent(ALICE_DM)[0]["text"].startswith("&gt; 🎤 is the porch light on")
    (upload,) = transcription.uploads
    assert (upload.file_name, upload.content_type, upload.data) == (
        "memo.m4a",
        "audio/mp4",
        recording,
    )
    # No length is shown for an M4A, and Slack's "(shared memo.m4a)" is not passed on.
    assert last_user_content(llm) == "[audio file memo.m4a] is the porch light on"
