"""Answers by voice, end to end: the real daemon, the fake model, the fake speech server,
and the fake Telegram, Discord and Slack receiving the recording over real sockets.

A voice note is transcribed (the fake transcription server), answered as text, and
then the answer is spoken: the fake speech server gets the reply as plain words,
and its bytes reach Telegram unchanged through ``sendVoice`` (Discord and Slack: an
audio file). ``reply_with_voice`` decides when; a failing speech server or a
refused upload is tried once more, then the person keeps the text alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.channel_tables import discord_table, slack_table
from tests.chat_harness import replies
from tests.daemon_harness import running_daemon
from tests.fake_discord import FakeDiscord
from tests.fake_discord.payloads import message as discord_message
from tests.fake_discord.payloads import snowflake
from tests.fake_llm import FakeLLM, Say
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_speech import FakeSpeech
from tests.fake_telegram import Call, FakeTelegram, SentMessage
from tests.fake_transcription import FakeTranscription
from tests.media_samples import FileHost, ogg_opus
from tests.test_media_in import ADA, OWNER, telegram_daemon, voice_note

Json = dict[str, Any]
HEARD = "> 🎤 is the porch light on"


@pytest.fixture
def speech() -> Iterator[FakeSpeech]:
    """The fake text-to-speech server (answers with an Ogg Opus recording)."""
    with FakeSpeech.running(ogg_opus(3.2)) as server:
        yield server


@pytest.fixture
def transcription() -> Iterator[FakeTranscription]:
    """The fake speech-to-text server: every recording says "is the porch light on"."""
    with FakeTranscription.running() as server:
        yield server


def tables(
    speech: FakeSpeech, transcription: FakeTranscription | None = None, **settings: Any
) -> Json:
    """``[speech]`` on the fake (with ``settings``), and ``[transcription]`` if given."""
    found: Json = {"speech": {"base_url": speech.base_url, **settings}}
    if transcription is not None:
        found["transcription"] = {"base_url": transcription.base_url}
    return found


def voices(telegram: FakeTelegram) -> list[SentMessage]:
    """The voice messages the bot sent Ada."""
    return [m for m in telegram.sent(OWNER) if m.kind == "voice"]


def upload_of(call: Call) -> bytes:
    """The bytes a sendVoice call carried."""
    (upload,) = call.files.values()
    return upload.data


# -- Telegram ------------------------------------------------------------------------------


async def test_a_voice_note_gets_the_text_and_then_a_voice_message_with_the_endpoints_bytes(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, speech: FakeSpeech, transcription: Any
) -> None:
    llm.queue(Say("**Yes**, the [porch light](https://home.example/porch) is on."))
    setup = tables(speech, transcription, api_key="sk-tts", voice="nova", model="tts-1")
    async with telegram_daemon(tmp_path, llm, telegram, **setup):
        voice_note(telegram, ogg_opus(4))
        sent = await telegram.await_call("sendVoice")
        text, spoken = await replies(telegram, 2)
    assert text.kind == "text"
    assert text.text == f"{HEARD}\n\nYes, the porch light is on."
    assert spoken.kind == "voice" and spoken.text == ""
    assert upload_of(sent) == speech.audio
    assert sent.files["voice"].filename == "reply.ogg"
    assert sent.params["duration"] == 4  # 3.2 s, rounded up, read from the Ogg pages
    assert text.reply_to is not None and spoken.reply_to == text.reply_to  # the voice note
    (request,) = speech.requests
    assert request.body == {
        "model": "tts-1",
        "voice": "nova",
        "input": "Yes, the porch light is on.",
        "response_format": "opus",
    }
    assert request.authorization == "Bearer sk-tts"


async def test_always_speaks_a_typed_message_too_but_not_its_usage_footer(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, speech: FakeSpeech
) -> None:
    llm.queue(Say("It is 21 degrees."))
    setup = tables(speech, reply_with_voice="always")
    setup["agent"] = {"stream": False, "usage_footer": True}
    async with telegram_daemon(tmp_path, llm, telegram, **setup):
        telegram.user_sends(OWNER, ADA, "how warm is it?")
        sent = await telegram.await_call("sendVoice")
    text, voice = telegram.sent(OWNER)
    assert voice.kind == "voice" and upload_of(sent) == speech.audio
    assert text.text.startswith("It is 21 degrees.\n\n— ") and "tokens in" in text.text
    assert speech.inputs() == ["It is 21 degrees."]


@pytest.mark.parametrize(
    ("settings", "spoken", "reply"),
    [
        ({"reply_with_voice": "never"}, True, "Yes, it is on."),
        ({"reply_with_voice": "when_spoken_to"}, False, "Yes, it is on."),
        (None, True, "Yes, it is on."),  # no [speech] at all
        ({"reply_with_voice": "always"}, False, "```\nlights --porch on\n```"),  # nothing to say
        ({"reply_with_voice": "always", "max_chars": 100}, False, "Yes. " * 21),  # too long
    ],
    ids=["never", "typed-when-spoken-to", "speech-off", "only-code", "over-max-chars"],
)
async def test_no_voice_when_it_is_not_wanted_or_there_is_nothing_to_say(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    speech: FakeSpeech,
    transcription: FakeTranscription,
    settings: Json | None,
    spoken: bool,
    reply: str,
) -> None:
    llm.queue(Say(reply))
    setup = tables(speech, transcription, **(settings or {}))
    if settings is None:
        del setup["speech"]
    async with telegram_daemon(tmp_path, llm, telegram, **setup):
        if spoken:
            voice_note(telegram, ogg_opus(2))
        else:
            telegram.user_sends(OWNER, ADA, "is the porch light on?")
        await replies(telegram, 1)
    # Stopping lets the turn finish: a voice, had one been due, would have been sent by now.
    assert [m.kind for m in telegram.sent(OWNER)] == ["text"]
    assert telegram.calls("sendVoice") == []
    assert speech.requests == []


async def test_a_speech_server_failing_once_is_asked_again_and_the_voice_comes(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, speech: FakeSpeech, transcription: Any
) -> None:
    speech.fail(1, 503)
    llm.queue(Say("Yes, it is on."))
    async with telegram_daemon(tmp_path, llm, telegram, **tables(speech, transcription)):
        voice_note(telegram, ogg_opus(2))
        sent = await telegram.await_call("sendVoice")
    assert upload_of(sent) == speech.audio
    assert speech.inputs() == ["Yes, it is on."] * 2


async def test_a_speech_server_failing_twice_leaves_the_text_and_one_warning(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    speech: FakeSpeech,
    transcription: FakeTranscription,
    caplog: pytest.LogCaptureFixture,
) -> None:
    speech.fail(2, 500)
    llm.queue(Say("Yes, it is on."), Say("Still on."))
    with caplog.at_level(logging.INFO):
        async with telegram_daemon(tmp_path, llm, telegram, **tables(speech, transcription)):
            voice_note(telegram, ogg_opus(2))
            await replies(telegram, 1)
            telegram.user_sends(OWNER, ADA, "and now?")  # answered once the first turn ended
            first, second = await replies(telegram, 2)
    assert (first.text, second.text) == (f"{HEARD}\n\nYes, it is on.", "Still on.")
    assert telegram.calls("sendVoice") == []
    assert len(speech.requests) == 2
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in warnings] == ["bot.daemon.voice"]
    line = warnings[0].getMessage()
    assert "sent as text only" in line and "HTTP 500" in line and "twice" in line
    assert "Traceback" not in first.text + second.text


async def test_a_refused_voice_upload_is_sent_once_more(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, speech: FakeSpeech, transcription: Any
) -> None:
    telegram.fail("sendVoice", 400, "Bad Request: failed to get the file", times=1)
    llm.queue(Say("Yes, it is on."))
    async with telegram_daemon(tmp_path, llm, telegram, **tables(speech, transcription)):
        voice_note(telegram, ogg_opus(2))
        await telegram.await_until(lambda: voices(telegram) or None)
    first, second = telegram.calls("sendVoice")
    assert not first.ok and second.ok
    assert upload_of(second) == speech.audio
    assert len(speech.requests) == 1  # the recording is made once


async def test_someone_who_refuses_voice_messages_gets_the_recording_as_a_file(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, speech: FakeSpeech, transcription: Any
) -> None:
    telegram.fail("sendVoice", 400, "Bad Request: VOICE_MESSAGES_FORBIDDEN", times=5)
    llm.queue(Say("Yes, it is on."))
    async with telegram_daemon(tmp_path, llm, telegram, **tables(speech, transcription)):
        voice_note(telegram, ogg_opus(2))
        sent = await telegram.await_call("sendDocument")
    assert [m.kind for m in telegram.sent(OWNER)] == ["text", "document"]
    assert upload_of(sent) == speech.audio
    assert len(telegram.calls("sendVoice")) == 1


# -- Discord and Slack ----------------------------------------------------------------------


async def test_a_discord_voice_message_gets_the_text_and_an_audio_file(
    tmp_path: Path, llm: FakeLLM, speech: FakeSpeech, transcription: FakeTranscription
) -> None:
    recording = ogg_opus(3)
    llm.queue(Say("Yes, *it is* on."))
    with FakeDiscord.running(heartbeat_interval=1.0) as fake, FileHost.running() as cdn:
        channels = {"discord": discord_table(fake)}
        setup = tables(speech, transcription)
        async with running_daemon(tmp_path, llm, channels, tables=setup) as daemon:
            assert await daemon.channels["discord"].status.wait_connected(10)
            dm = fake.dm_channel(fake.owner)["id"]
            message = discord_message(dm, fake.owner, "")
            url = cdn.add("voice-message.ogg", recording, "audio/ogg")
            message["flags"] = 1 << 13  # IS_VOICE_MESSAGE
            message["attachments"] = [
                {
                    "id": snowflake(),
                    "filename": "voice-message.ogg",
                    "size": len(recording),
                    "url": url,
                    "proxy_url": url,
                    "content_type": "audio/ogg",
                    "duration_secs": 3.0,
                }
            ]
            fake.world.store_message(message)
            fake.dispatch("MESSAGE_CREATE", message)
            await fake.await_until(lambda: len(fake.sent(dm)) >= 2)
            text, audio = fake.sent(dm)
    assert text["content"].endswith("Yes, *it is* on.") and not text["attachments"]
    (attachment,) = audio["attachments"]
    assert attachment["filename"] == "reply.ogg"
    assert fake.uploaded(attachment) == speech.audio
    assert speech.inputs() == ["Yes, it is on."]


async def test_a_slack_audio_file_gets_the_text_and_an_audio_file_in_the_conversation(
    tmp_path: Path, llm: FakeLLM, speech: FakeSpeech, transcription: FakeTranscription
) -> None:
    llm.queue(Say("Yes, it is on."))
    with FakeSlack.running() as slack:
        channels = {"slack": slack_table(slack)}
        setup = tables(speech, transcription)
        async with running_daemon(tmp_path, llm, channels, tables=setup) as daemon:
            assert await daemon.channels["slack"].status.wait_connected(10)
            slack.user_sends(ALICE_DM, ALICE, "", files=[("memo.ogg", ogg_opus(2), "audio/ogg")])
            await slack.await_until(lambda: len(slack.sent(ALICE_DM)) >= 2, what="text and voice")
            text, shared = slack.sent(ALICE_DM)
    assert text["text"].endswith("Yes, it is on.") and not text.get("files")
    (audio,) = shared["files"]
    assert audio["name"] == "reply.ogg"
    assert slack.workspace.files[audio["id"]].content == speech.audio
    assert speech.inputs() == ["Yes, it is on."]
