"""No inbound message is lost to a bad character, end to end through the real daemon.

A lone UTF-16 surrogate (half an emoji) and a NUL come over the fake Telegram's
and the fake Discord's wire as JSON escapes, the way the platforms send them; the
real channel reads them, the daemon answers, and the model (the fake LLM records
every request) reads U+FFFD in their place. The size check runs for such a
message too. An update PTB cannot parse at all is stored as failed and answered
with one sentence, and the updates after it are answered as usual.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.daemon.router import UNREADABLE
from channels.discord.events import CHANNEL as DISCORD
from tests.daemon_harness import running_daemon
from tests.fake_discord import FakeDiscord
from tests.fake_llm import FakeLLM, Say
from tests.fake_telegram import FakeTelegram, make_chat
from tests.test_channel_discord import discord_table
from tests.test_channel_telegram import ADA, GROUP, OWNER, STRANGER, daemon_with, sent_in


def inbound_rows(database: Path) -> list[tuple[str, str, str | None]]:
    """(message key, status, note) of every stored inbound message, oldest first."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        rows = db.execute("SELECT message_key, status, note FROM inbound ORDER BY id").fetchall()
    return [(str(key), str(status), note) for key, status, note in rows]


async def test_a_telegram_text_with_a_lone_surrogate_is_answered_with_u_fffd_in_place(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Say("Got it."))
    async with daemon_with(tmp_path, llm, telegram):
        # No entities: the fake would count them with a UTF-16 codec, which refuses surrogates.
        telegram.user_sends(OWNER, ADA, "half an emoji \ud83d and a NUL \x00 here", entities=[])
        (reply,) = await telegram.await_until(sent_in(telegram, OWNER, 1))
    assert reply.text == "Got it."
    assert llm.requests[-1].view.last_text == "half an emoji \ufffd and a NUL \ufffd here"


async def test_a_mention_after_a_lone_surrogate_is_cut_where_telegram_counted_it(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Say("Here."))
    text = "\ud83d @pinclaw_bot what now?"  # the surrogate is one UTF-16 unit, then a space
    mention = {"type": "mention", "offset": 2, "length": 12}
    async with daemon_with(tmp_path, llm, telegram):
        telegram.user_sends(GROUP, ADA, text, chat_title="Caf\udce9", entities=[mention])
        await telegram.await_until(sent_in(telegram, GROUP, 1))
    said = llm.requests[-1].view.last_text
    assert said.endswith("\ufffd what now?") and "pinclaw_bot" not in said


async def test_the_size_check_runs_for_a_message_with_a_lone_surrogate(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram, {"max_message_bytes": 1024}):
        telegram.user_sends(OWNER, ADA, "\ud83d" + "é" * 600, entities=[])
        (note,) = await telegram.await_until(sent_in(telegram, OWNER, 1))
    assert note.text == (
        "That message is too long for me: 1.2 KiB, and I read at most 1.0 KiB at once. "
        "Please send a shorter one, or split it up."
    )
    assert llm.requests == []


async def test_an_update_that_cannot_be_read_is_stored_as_failed_and_answered(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    llm.queue(Say("And this one is fine."))
    broken = {
        "message_id": 41,
        "from": ADA,
        "chat": make_chat(OWNER, user=ADA),
        "date": "yesterday",  # PTB cannot parse this
        "text": "lost?",
    }
    with caplog.at_level(logging.WARNING):
        async with daemon_with(tmp_path, llm, telegram):
            update = telegram.queue_update({"message": broken})
            telegram.user_sends(OWNER, ADA, "and now?")
            sent = await telegram.await_until(sent_in(telegram, OWNER, 2))
            await telegram.await_confirmed(update)
    assert [m.text for m in sent] == [UNREADABLE, "And this one is fine."]
    first = telegram.calls("sendMessage")[0].params
    assert first["reply_parameters"]["message_id"] == 41  # a reply to the unread message
    [(key, status, note), (_, answered, _)] = inbound_rows(tmp_path / "state" / "pinclaw.db")
    assert (key, status, answered) == (f"{OWNER}:41", "failed", "answered")
    assert note is not None and note.startswith("could not be read: TypeError")
    [line] = [r.getMessage() for r in caplog.records if "could not read update" in r.getMessage()]
    assert line.startswith(f"telegram: could not read update {update['update_id']} (TypeError")
    assert "\n" not in line and line.endswith("stored as failed")


async def test_an_unreadable_update_from_a_stranger_is_stored_but_not_answered(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    broken = {"message_id": 5, "from": STRANGER, "chat": make_chat(7002), "date": "?"}
    async with daemon_with(tmp_path, llm, telegram, pairing=False) as daemon:
        update = telegram.queue_update({"message": broken})
        await telegram.await_confirmed(update)
        await daemon.router.drain()
    assert telegram.sent(7002) == []
    assert [row[:2] for row in inbound_rows(tmp_path / "state" / "pinclaw.db")] == [
        ("7002:5", "failed")
    ]


@pytest.fixture
def discord() -> Iterator[FakeDiscord]:
    with FakeDiscord.running(heartbeat_interval=1.0) as server:
        yield server


async def test_a_discord_message_with_a_lone_surrogate_is_answered_with_u_fffd_in_place(
    tmp_path: Path, llm: FakeLLM, discord: FakeDiscord
) -> None:
    llm.queue(Say("Seen."))
    async with running_daemon(tmp_path, llm, discord_table(discord)) as daemon:
        assert await daemon.channels[DISCORD].status.wait_connected(10)
        dm = discord.dm_channel(discord.owner)["id"]
        discord.user_sends(dm, discord.owner, "half \ud83d an emoji\x07")
        await discord.await_until(lambda: len(discord.sent(dm)) >= 1)
    assert discord.sent(dm)[0]["content"] == "Seen."
    assert llm.requests[-1].view.last_text == "half \ufffd an emoji\ufffd"
