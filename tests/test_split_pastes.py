"""Split pastes, end to end: the parts of a long paste are answered as one turn.

Telegram clients send a paste longer than 4,096 characters as several messages
(Discord ones at 2,000). Through the real client libraries and the real daemon,
the parts reach the fake model as one user message, the paste restored with a
line break between parts, and get one answer; a short message is never held; two
people's parts stay apart; and a daemon killed between the second and the third
part answers all three together, once, after its restart.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from pathlib import Path

import pytest

from bot.core.messages import InboundMessage
from bot.daemon.merging import Gatherer
from bot.daemon.sessions import Job, SessionRunner
from tests.channel_tables import discord_table, telegram_table
from tests.chat_harness import replies
from tests.daemon_harness import DaemonProcess, running_daemon, telegram_run_config
from tests.fake_discord import FakeDiscord
from tests.fake_llm import FakeLLM, Say, Stall
from tests.fake_telegram import FakeTelegram

OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
BO = FakeTelegram.user(7002, "Bo", "bo")
GROUP = -100500
WINDOW_MS = 600  # the test sends each paste's parts at once, well within this


def paste(*sizes: int) -> list[str]:
    """A paste as a client splits it: parts of these lengths, cut at line breaks (which
    the platform drops), each starting and ending with a word."""
    counter = itertools.count()
    parts = []
    for size in sizes:
        text = ""
        while len(text) < size:
            n = next(counter)
            text += f"word{n}" + ("\n" if n % 9 == 8 else " ")
        parts.append(text[: size - 1] + ".")
    return parts


def user_texts(llm: FakeLLM) -> list[str]:
    """The newest user message's text of every request to the fake model."""
    texts = []
    for request in llm.requests:
        messages = request.body["messages"]
        content = next(m for m in reversed(messages) if m["role"] == "user")["content"]
        texts.append(content if isinstance(content, str) else content[-1]["text"])
    return texts


class Heard(logging.Handler):
    """Sets ``event`` when the gatherer logs a line containing ``needle`` (a held part
    leaves no other trace)."""

    def __init__(self, needle: str) -> None:
        super().__init__(logging.INFO)
        self.needle = needle
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        """Note a matching line (the daemon logs on the test's own loop)."""
        if self.needle in record.getMessage():
            self.event.set()


async def test_three_telegram_parts_make_one_turn_and_a_short_message_is_not_held(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    parts = paste(4096, 4096, 1808)
    assert [len(p) for p in parts] == [4096, 4096, 1808]
    llm.queue(Say("Got your paste."), Say("You are welcome."))
    channels = {"telegram": telegram_table(telegram)}
    caplog.set_level(logging.INFO, logger="bot.daemon.merging")
    async with running_daemon(tmp_path, llm, channels, merge_window_ms=WINDOW_MS) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        sent = [telegram.user_sends(OWNER, ADA, part) for part in parts]
        (answer,) = await replies(telegram, 1, OWNER)
        assert answer.text == "Got your paste."
        await daemon.router.drain()
        assert len(llm.requests) == 1 and len(telegram.sent(OWNER)) == 1

        telegram.user_sends(OWNER, ADA, "thanks!")
        await replies(telegram, 2, OWNER)
        await daemon.router.drain()
    first, second = user_texts(llm)
    assert first == "\n".join(parts)  # the paste, whole, as one user message
    assert second == "thanks!"  # its own turn: nothing merged into it
    assert answer.reply_to == sent[-1]["message"]["message_id"]  # answers the last part
    held = [r for r in caplog.records if r.getMessage().startswith("holding")]
    assert len(held) == 2  # the two full parts; the third ended the paste, "thanks!" never waited


async def test_two_peoples_parts_in_one_group_stay_apart(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    ada_parts, bo_parts = paste(4000, 700), paste(3900, 20)
    llm.queue(Say("For Ada."), Say("For Bo."))
    table = telegram_table(
        telegram,
        allowed_users=[OWNER, 7002],
        allowed_groups=[GROUP],
        group_mode="all",
        pacing=False,  # no pause between two replies in a group
    )
    async with running_daemon(
        tmp_path, llm, {"telegram": table}, merge_window_ms=WINDOW_MS
    ) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        telegram.user_sends(GROUP, ADA, ada_parts[0])
        telegram.user_sends(GROUP, BO, bo_parts[0])
        telegram.user_sends(GROUP, ADA, ada_parts[1])
        telegram.user_sends(GROUP, BO, bo_parts[1])
        await replies(telegram, 2, GROUP)
        await daemon.router.drain()
    texts = user_texts(llm)
    assert len(texts) == 2
    # Each person's paste whole (a group's text may start with the sender's name).
    assert texts[0].endswith("\n".join(ada_parts))
    assert texts[1].endswith("\n".join(bo_parts))
    assert [m.text for m in telegram.sent(GROUP)] == ["For Ada.", "For Bo."]


async def test_discord_parts_of_2000_make_one_turn(tmp_path: Path, llm: FakeLLM) -> None:
    parts = paste(2000, 1990, 150)
    llm.queue(Say("One answer."))
    with FakeDiscord.running(heartbeat_interval=1.0) as fake:
        channels = {"discord": discord_table(fake)}
        async with running_daemon(tmp_path, llm, channels, merge_window_ms=WINDOW_MS) as daemon:
            assert await daemon.channels["discord"].status.wait_connected(10)
            dm = fake.dm_channel(fake.owner)["id"]
            for part in parts:
                fake.user_sends(dm, fake.owner, part)
            await fake.await_until(lambda: len(fake.sent(dm)) >= 1)
            await daemon.router.drain()
            assert [m["content"] for m in fake.sent(dm)] == ["One answer."]
    assert user_texts(llm) == ["\n".join(parts)]


def test_a_paste_cut_by_a_kill_is_answered_once_whole_after_the_restart(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    parts = paste(4096, 4096, 1808)
    home, config = tmp_path / "home", telegram_run_config(llm, telegram, OWNER)
    llm.queue(Say("Got all three parts."))
    first = DaemonProcess(home, config).start()
    try:
        first.wait_log("telegram connected as @pinclaw_bot")
        telegram.user_sends(OWNER, ADA, parts[0])
        telegram.user_sends(OWNER, ADA, parts[1])
        first.wait_log("(2 held)")  # both stored, waiting for a next part
    finally:
        first.kill()
    telegram.user_sends(OWNER, ADA, parts[2])  # sent while PinClaw is down
    second = DaemonProcess(home, config).start()
    try:
        telegram.wait_until(lambda: telegram.sent(OWNER) or None, timeout=30)
        telegram.user_sends(OWNER, ADA, "ping")
        telegram.wait_until(lambda: len(telegram.sent(OWNER)) >= 2 or None, timeout=30)
    finally:
        code = second.terminate()
    assert code == 0, second.log()
    assert [m.text for m in telegram.sent(OWNER)] == ["Got all three parts.", "You said: ping"]
    assert user_texts(llm) == ["\n".join(parts), "ping"]
    assert "answering 3 messages in" in second.log()


async def test_messages_sent_together_while_a_turn_runs_are_answered_together(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Stall(1.0, Say("First answer.")), Say("Second answer."))
    channels = {"telegram": telegram_table(telegram)}
    async with running_daemon(tmp_path, llm, channels, merge_window_ms=WINDOW_MS) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        telegram.user_sends(OWNER, ADA, "what time is it?")
        await asyncio.to_thread(llm.wait_requests, 1)  # that turn runs (the model is slow)
        telegram.user_sends(OWNER, ADA, "and the date")
        telegram.user_sends(OWNER, ADA, "in Lisbon")
        await replies(telegram, 2, OWNER)
        await daemon.router.drain()
    assert user_texts(llm) == ["what time is it?", "and the date\n\nin Lisbon"]
    assert [m.text for m in telegram.sent(OWNER)] == ["First answer.", "Second answer."]


async def test_a_clean_stop_keeps_a_held_part_for_the_next_start(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    parts = paste(4096, 300)
    llm.queue(Say("Both parts."))
    channels = {"telegram": telegram_table(telegram)}
    caplog.set_level(logging.INFO, logger="bot.daemon.merging")
    heard = Heard("(1 held)")
    logging.getLogger("bot.daemon.merging").addHandler(heard)
    # A long window: the stop must not wait for it, nor answer the part alone.
    async with running_daemon(tmp_path, llm, channels, merge_window_ms=20_000) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        telegram.user_sends(OWNER, ADA, parts[0])
        try:
            await asyncio.wait_for(heard.event.wait(), 10)
        finally:
            logging.getLogger("bot.daemon.merging").removeHandler(heard)
    assert llm.requests == [] and telegram.sent(OWNER) == []
    async with running_daemon(tmp_path, llm, channels, merge_window_ms=20_000) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        telegram.user_sends(OWNER, ADA, parts[1])
        await replies(telegram, 1, OWNER)
        await daemon.router.drain()
    assert user_texts(llm) == ["\n".join(parts)]
    assert [m.text for m in telegram.sent(OWNER)] == ["Both parts."]


async def test_an_edit_replaces_a_held_part_and_keeps_its_id() -> None:
    turns: list[list[tuple[str | None, str]]] = []

    async def answer(jobs: list[Job]) -> None:
        turns.append([(job.message.message_id, job.message.text) for job in jobs])

    runner = SessionRunner(answer)
    gather = Gatherer(runner, window_ms=100, limits={"telegram": 100})
    held = InboundMessage("telegram", "7", "7", "x" * 60, message_id="7:5")
    gather.add(Job(1, held))
    edit = InboundMessage("telegram", "7", "7", "y" * 70, message_id="7:5:edit", edit_of="7:5")
    assert not gather.replace("7:4", edit)  # not held: the edits code answers it otherwise
    assert gather.replace("7:5", edit)
    await gather.settled()
    await runner.idle()
    assert turns == [[("7:5", "y" * 70)]]
    assert not gather.replace("7:5", edit)  # its turn is queued: no longer held
