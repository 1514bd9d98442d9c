"""Edits and replies to earlier messages, end to end: a platform's fake, the real daemon, the
fake model.

On Telegram, Discord and Slack alike: an edit that arrives while its message still
waits for its turn (the chat is busy with a turn the fake model holds) replaces the
text, so the model sees only the new one and one answer goes out; an edit after the
answer gets exactly one more answer, and the model reads it as a correction with
the text before and after; a redelivered edit is answered once; an edit of a
message PinClaw never saw gets no answer and a log line. A reply carries the
message it answers: PinClaw's own words plainly, someone else's inside the
untrusted marker, which makes an acting tool call ask first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from bot.core.messages import InboundMessage
from bot.daemon.main import Daemon
from bot.daemon.quoting import with_quoted_sources
from bot.media.prepare import TurnInput
from tests.channel_tables import TELEGRAM_OWNER, discord_table, slack_table, telegram_table
from tests.chat_harness import replies
from tests.daemon_harness import running_daemon
from tests.fake_discord import FakeDiscord
from tests.fake_llm import CallTools, FakeLLM, Hold, Say
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_telegram import FakeTelegram, make_chat
from tests.telegram_taps import button, request_in, tap

T = TypeVar("T")
OWNER = TELEGRAM_OWNER
GROUP = -1001234567
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
BEN = FakeTelegram.user(7003, "Ben", "ben")
EDITS = "bot.daemon.edits"


async def eventually(check: Callable[[], Awaitable[T | None]], what: str) -> T:
    """``check()`` once it gives something (it is asked again every 20 ms, up to 10 s)."""
    deadline = time.monotonic() + 10
    while (found := await check()) is None:
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
    return found


def logged(
    caplog: pytest.LogCaptureFixture, text: str, times: int = 1
) -> Callable[[], Awaitable[bool | None]]:
    """A check for ``eventually``: ``text`` is in ``times`` log lines of the edits module."""

    async def check() -> bool | None:
        lines = [r for r in caplog.records if r.name == EDITS and text in r.getMessage()]
        return len(lines) >= times or None

    return check


def stored(
    daemon: Daemon, channel: str, key: str, text: str | None = None
) -> Callable[[], Awaitable[bool | None]]:
    """A check for ``eventually``: the inbound store holds message ``key`` (saying ``text``)."""

    async def check() -> bool | None:
        row = await daemon.inbound.find(channel, key)
        return (row is not None and text in (None, row.message.text)) or None

    return check


async def requests(llm: FakeLLM, count: int) -> None:
    """Wait until the fake model got ``count`` requests."""
    await asyncio.to_thread(llm.wait_requests, count)


def user_texts(llm: FakeLLM, index: int = -1) -> list[str]:
    """The user messages of one OpenAI-wire request, as text."""
    messages = llm.requests[index].body["messages"]
    return [_text(m["content"]) for m in messages if m["role"] == "user"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def everything_sent(llm: FakeLLM) -> str:
    """All requests the model got, as one string (to look for words it must not see)."""
    return json.dumps([r.body for r in llm.requests], ensure_ascii=False)


def correction(before: str, now: str) -> str:
    """What the model reads for an edit after the answer (the documented form)."""
    return f"[The person edited their earlier message. Before: «{before}»]\n(edited) {now}"


# -- Telegram ------------------------------------------------------------------------------


@asynccontextmanager
async def telegram_daemon(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    *,
    security: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    **extra: Any,
) -> AsyncIterator[Daemon]:
    """The daemon on the fake Telegram (Ada allowed), once it is connected; ``extra`` goes
    to the channel's table, ``settings`` to ``[daemon]``."""
    channels = {"telegram": telegram_table(telegram, **extra)}
    async with running_daemon(
        tmp_path, llm, channels, security=security, **(settings or {})
    ) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


async def test_telegram_an_edit_before_the_turn_replaces_the_text(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=EDITS)
    gate = threading.Event()
    llm.queue(Hold(gate, Say("One moment.")), Say("4."))
    try:
        async with telegram_daemon(tmp_path, llm, telegram) as daemon:
            telegram.user_sends(OWNER, ADA, "first, a question")
            await requests(llm, 1)  # its turn runs (held): the next message waits
            waiting = telegram.user_sends(OWNER, ADA, "whta is 2+2")["message"]
            telegram.user_edits(OWNER, waiting, "what is 2+2?")
            key = f"{OWNER}:{waiting['message_id']}"
            took = stored(daemon, "telegram", key, "what is 2+2?")
            await eventually(took, "the waiting message to take the edit")
            gate.set()
            await replies(telegram, 2)
            await daemon.router.drain()
    finally:
        gate.set()
    assert [m.text for m in telegram.sent(OWNER)] == ["One moment.", "4."]
    assert len(llm.requests) == 2
    assert user_texts(llm)[-1] == "what is 2+2?"
    assert "whta" not in everything_sent(llm)
    assert telegram.sent(OWNER)[1].reply_to == waiting["message_id"]


async def test_telegram_an_edit_after_the_answer_is_answered_once_as_a_correction(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=EDITS)
    llm.queue(Say("4."), Say("5, then."))
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        asked = telegram.user_sends(OWNER, ADA, "what is 2+2?")["message"]
        await replies(telegram, 1)
        update = telegram.user_edits(OWNER, asked, "what is 2+3?")
        await replies(telegram, 2)
        await daemon.router.drain()
        telegram.redeliver(update)  # the same edit again: stored and answered once
        await eventually(logged(caplog, "nothing changed"), "the redelivered edit")
        never_seen = {"message_id": 999, "from": ADA, "chat": make_chat(OWNER), "date": 1}
        telegram.user_edits(OWNER, {**never_seen, "text": "old words"}, "new words")
        await eventually(logged(caplog, "PinClaw never answered it"), "the unknown edit")
        await daemon.router.drain()
    assert [m.text for m in telegram.sent(OWNER)] == ["4.", "5, then."]
    assert len(llm.requests) == 2
    assert user_texts(llm)[-1] == correction("what is 2+2?", "what is 2+3?")
    assert telegram.sent(OWNER)[1].reply_to == asked["message_id"]  # answers the edited one
    assert any(f"message {OWNER}:999 on telegram" in r.getMessage() for r in caplog.records)


async def test_telegram_an_edit_of_a_long_message_held_as_a_possible_paste_replaces_it(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    long = " ".join(["word"] * 600)  # 3,000 characters: the next part of a paste may follow
    llm.queue(Say("Read it."))
    async with telegram_daemon(
        tmp_path, llm, telegram, settings={"merge_window_ms": 1000}
    ) as daemon:
        sent = telegram.user_sends(OWNER, ADA, long)["message"]
        telegram.user_edits(OWNER, sent, f"{long} and the end")
        await replies(telegram, 1)
        await daemon.router.drain()
    assert len(llm.requests) == 1
    assert user_texts(llm)[-1] == f"{long} and the end"
    assert [m.text for m in telegram.sent(OWNER)] == ["Read it."]


async def test_telegram_edits_never_run_a_command(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=EDITS)
    llm.queue(Say("Hello."))
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        status = telegram.user_sends(OWNER, ADA, "/status")["message"]
        await replies(telegram, 1)
        telegram.user_edits(OWNER, status, "/new")  # an edit of a command
        await eventually(logged(caplog, "commands are not run again"), "the first edit")
        hello = telegram.user_sends(OWNER, ADA, "hello")["message"]
        await replies(telegram, 2)
        telegram.user_edits(OWNER, hello, "/link 123456")  # an edit into a command
        await eventually(logged(caplog, "commands are not run again", 2), "the second edit")
        await daemon.router.drain()
    assert len(telegram.sent(OWNER)) == 2 and len(llm.requests) == 1


# -- Discord ------------------------------------------------------------------------------


@asynccontextmanager
async def discord_daemon(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[tuple[Daemon, FakeDiscord]]:
    """The daemon on the fake Discord, its owner allowed."""
    with FakeDiscord.running(heartbeat_interval=1.0) as fake:
        channels = {"discord": discord_table(fake)}
        async with running_daemon(tmp_path, llm, channels) as daemon:
            assert await daemon.channels["discord"].status.wait_connected(10)
            yield daemon, fake


async def discord_replies(fake: FakeDiscord, dm: str, count: int) -> list[Any]:
    """The bot's messages in ``dm`` once there are ``count`` of them."""
    await fake.await_until(lambda: len(fake.sent(dm)) >= count)
    return list(fake.sent(dm))


async def test_discord_edits_before_and_after_the_turn(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=EDITS)
    gate = threading.Event()
    llm.queue(Hold(gate, Say("One moment.")), Say("4."), Say("5, then."))
    try:
        async with discord_daemon(tmp_path, llm) as (daemon, fake):
            dm = fake.dm_channel(fake.owner)["id"]
            fake.user_sends(dm, fake.owner, "first, a question")
            await requests(llm, 1)
            waiting = fake.user_sends(dm, fake.owner, "whta is 2+2")
            fake.user_edits(waiting, "what is 2+2?")
            took = stored(daemon, "discord", waiting["id"], "what is 2+2?")
            await eventually(took, "the waiting message to take the edit")
            gate.set()
            await discord_replies(fake, dm, 2)
            await daemon.router.drain()
            assert user_texts(llm)[-1] == "what is 2+2?"
            assert "whta" not in everything_sent(llm)
            # After the answer: a correction, answered once even when delivered twice.
            edited = fake.user_edits(waiting, "what is 2+3?")
            sent = await discord_replies(fake, dm, 3)
            await daemon.router.drain()
            fake.dispatch("MESSAGE_UPDATE", edited)
            await eventually(logged(caplog, "nothing changed"), "the redelivered edit")
            stranger = {**waiting, "id": "1234567890123", "content": "never seen"}
            fake.user_edits(stranger, "changed")
            await eventually(logged(caplog, "PinClaw never answered it"), "the unknown edit")
            await daemon.router.drain()
            assert len(fake.sent(dm)) == 3
    finally:
        gate.set()
    assert [m["content"] for m in sent] == ["One moment.", "4.", "5, then."]
    assert len(llm.requests) == 3
    assert user_texts(llm)[-1] == correction("what is 2+2?", "what is 2+3?")
    assert sent[2]["message_reference"]["message_id"] == waiting["id"]


async def test_discord_a_reply_carries_the_message_it_answers(tmp_path: Path, llm: FakeLLM) -> None:
    llm.queue(Say("The meeting is at 10."), Say("At 10 in the morning."))
    async with discord_daemon(tmp_path, llm) as (daemon, fake):
        dm = fake.dm_channel(fake.owner)["id"]
        fake.user_sends(dm, fake.owner, "when is the meeting?")
        (answer,) = await discord_replies(fake, dm, 1)
        fake.user_sends(dm, fake.owner, "morning or evening?", reply_to=answer)
        await discord_replies(fake, dm, 2)
        await daemon.router.drain()
    assert user_texts(llm)[-1] == (
        "[replying to PinClaw's earlier message: «The meeting is at 10.»]\nmorning or evening?"
    )


# -- Slack ----------------------------------------------------------------------------------


@asynccontextmanager
async def slack_daemon(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[tuple[Daemon, FakeSlack]]:
    """The daemon on the fake Slack (Socket Mode), Alice allowed."""
    with FakeSlack.running() as slack:
        async with running_daemon(tmp_path, llm, {"slack": slack_table(slack)}) as daemon:
            assert await daemon.channels["slack"].status.wait_connected(10)
            yield daemon, slack


async def slack_replies(slack: FakeSlack, count: int) -> list[Any]:
    """The bot's messages in Alice's DM once there are ``count`` of them."""
    await slack.await_until(lambda: len(slack.sent(ALICE_DM)) >= count, what="replies")
    return list(slack.sent(ALICE_DM))


async def test_slack_edits_before_and_after_the_turn(
    tmp_path: Path, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=EDITS)
    gate = threading.Event()
    llm.queue(Hold(gate, Say("One moment.")), Say("4."), Say("5, then."))
    try:
        async with slack_daemon(tmp_path, llm) as (daemon, slack):
            slack.user_sends(ALICE_DM, ALICE, "first, a question")
            await requests(llm, 1)
            ts = slack.user_sends(ALICE_DM, ALICE, "whta is 2+2").event["ts"]
            key = f"{ALICE_DM}:{ts}"
            await eventually(stored(daemon, "slack", key), "the waiting message")
            slack.user_edits(ALICE_DM, ts, "what is 2+2?")
            took = stored(daemon, "slack", key, "what is 2+2?")
            await eventually(took, "the waiting message to take the edit")
            gate.set()
            await slack_replies(slack, 2)
            await daemon.router.drain()
            assert user_texts(llm)[-1] == "what is 2+2?"
            assert "whta" not in everything_sent(llm)
            # After the answer: a correction, answered once even when delivered twice.
            edit = slack.user_edits(ALICE_DM, ts, "what is 2+3?")
            sent = await slack_replies(slack, 3)
            await daemon.router.drain()
            slack.redeliver(edit.envelope)
            await eventually(logged(caplog, "nothing changed"), "the redelivered edit")
            unseen = slack.user_sends(ALICE_DM, ALICE, "never delivered", deliver=False)
            slack.user_edits(ALICE_DM, unseen.event["ts"], "changed")
            await eventually(logged(caplog, "PinClaw never answered it"), "the unknown edit")
            await daemon.router.drain()
            assert len(slack.sent(ALICE_DM)) == 3
    finally:
        gate.set()
    assert [m["text"] for m in sent] == ["One moment.", "4.", "5, then."]
    assert len(llm.requests) == 3
    assert user_texts(llm)[-1] == correction("what is 2+2?", "what is 2+3?")


# -- Replies on Telegram ---------------------------------------------------------------------


async def test_telegram_a_reply_to_the_bot_quotes_its_words_as_pinclaws(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Say("The meeting is at 10."), Say("In the morning."))
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "when is the meeting?")
        (answer,) = await replies(telegram, 1)
        telegram.user_sends(OWNER, ADA, "morning or evening?", reply_to=answer)
        await replies(telegram, 2)
        await daemon.router.drain()
    assert user_texts(llm)[-1] == (
        "[replying to PinClaw's earlier message: «The meeting is at 10.»]\nmorning or evening?"
    )


async def test_telegram_a_reply_to_someone_else_in_a_group_is_untrusted_and_acting_asks(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    write = CallTools([("file_write", {"path": "out.txt", "content": "x"})])
    llm.queue(write, Say("I did not write it."))
    security = {"auto_approve": ["file_write"]}  # unasked, but for the quoted message
    group: dict[str, Any] = {"allowed_groups": [GROUP], "pacing": False}  # quick: no pacing
    async with telegram_daemon(tmp_path, llm, telegram, security=security, **group) as daemon:
        bens = telegram.user_sends(GROUP, BEN, "write x into out.txt")["message"]
        telegram.user_sends(GROUP, ADA, "@pinclaw_bot do what Ben says", reply_to=bens)
        request = await request_in(telegram, GROUP)
        assert "untrusted content" in request.text and "a message quoted from Ben" in request.text
        denied = await tap(telegram, GROUP, ADA, button(request, "deny"), request.message_id)
        assert denied["text"] == "Denied."
        await daemon.router.drain()
    assert user_texts(llm, 0)[-1] == (
        "[replying to a message from Ben, quoted below]\n"
        '<untrusted source="quoted message" from="a message quoted from Ben">\n'
        "write x into out.txt\n"
        "</untrusted>\n"
        "do what Ben says"
    )
    assert not (tmp_path / "state" / "workspace" / "out.txt").exists()


def test_every_message_of_a_turn_adds_whose_words_it_carries_to_the_untrusted_sources() -> None:
    quoting = InboundMessage("t", "c", "ada", "hm", quotes="a message quoted from Ben")
    plain = InboundMessage("t", "c", "ada", "and this")
    read = TurnInput("hm\n\nand this", untrusted=("list.txt",))
    given = with_quoted_sources(read, [quoting, plain])
    assert given.untrusted == ("list.txt", "a message quoted from Ben")
    alone = TurnInput("and this")
    assert with_quoted_sources(alone, [plain]) is alone
