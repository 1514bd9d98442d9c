"""Streamed replies that waste no call, and a progress line that tells the truth.

The real daemon streams (``[agent] stream = true``) over the real client libraries to
the fake Telegram, Discord and Slack, which record every message and edit. Two things
are checked on each platform:

- A slow reply whose draft catches up with the model (a piece that adds only blank
  lines, then the last piece shown by the draft before the turn ends) makes no edit
  that repeats what the message already shows, the final one included. The fake
  Telegram refuses such an edit with 400 "message is not modified", as Telegram does.
- A call that waits for approval shows "waiting for your approval" (never "running")
  while its card waits; denied, it never shows as running; approved, "running" shows
  only after the tap.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, closing
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from bot.agent.progress import ProgressLine
from bot.core.conversation import ToolCall
from bot.core.draft import STATUS_MARK
from bot.daemon.main import Daemon
from bot.security.redact import Redactor
from channels.discord.send import pieces as discord_pieces
from channels.slack.format import split_for_slack
from channels.telegram.format import split_reply
from tests.channel_tables import discord_table, slack_table, telegram_table
from tests.daemon_harness import running_daemon
from tests.fake_discord import FakeDiscord
from tests.fake_llm import CallTools, FakeLLM, Hold, Say, Stall
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_telegram import FakeTelegram, SentMessage
from tests.shown_calls import Shown, discord_shown, no_repeats, slack_shown, telegram_shown
from tests.telegram_taps import button, tap
from tests.test_channel_slack import eventually

JSON = dict[str, Any]
OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")

# Four pieces of one size, 1.2 s apart: the draft is posted with the first; the second
# adds only blank lines (the draft would look the same: no edit); the third is shown
# as it comes; the fourth adds blank lines again and ends the reply, so the draft
# already shows the final rendering (no final edit).
FIRST = "Here is **the plan**, in `short`:"
SIZE = len(FIRST)
THEN = "- check the values & <limits>".ljust(SIZE, ".")
REPLY = FIRST + "\n" + " " * (SIZE - 2) + "\n" + THEN + "\n" * SIZE
CATCHING_UP = Say(REPLY, pieces=4, pause_s=1.2)

WAITING = "waiting for your approval"
# Denied first, then approved; the answer waits, so the last line is shown before it.
ASK_TWICE = (
    CallTools([("shell", {"command": "mkdir first"})]),
    CallTools([("shell", {"command": "mkdir second"})]),
    Stall(1.5, Say("Made the second folder, not the first.")),
)


def draft(calls: Sequence[Shown]) -> list[Shown]:
    """The calls to the reply's draft: the message first posted with a progress line."""
    ref = next(c.ref for c in calls if c.text.startswith(STATUS_MARK))
    return [c for c in calls if c.ref == ref]


def told_the_truth(calls: Sequence[Shown], waits: Sequence[tuple[float, float]]) -> None:
    """While each card waited (posted, tapped) the draft said "waiting" (or "working…"
    after a denial); "running" was never shown for the denied call ("mkdir first") and
    shown for the approved one ("mkdir second") only after its tap."""
    for posted, tapped in waits:
        during = [c.text for c in draft(calls) if posted <= c.at < tapped]
        assert during, "the draft said nothing while the card waited"
        assert all(WAITING in t or t == f"{STATUS_MARK}working…" for t in during), during
    running = [c for c in calls if "running" in c.text.lower()]
    assert running, "the approved call was never shown running"
    assert all("mkdir second" in c.text and c.at >= waits[-1][1] for c in running), running
    assert not any("mkdir first" in c.text and "running" in c.text for c in calls)
    assert "Made the second folder, not the first." in draft(calls)[-1].text


async def shown_waiting(shown: Callable[[], list[Shown]], folder: str) -> float:
    """Wait until the draft shows the waiting line for ``folder``'s call; the time then."""
    await eventually(
        lambda: any(c.text.startswith(STATUS_MARK + WAITING) and folder in c.text for c in shown())
    )
    return time.monotonic()


async def answered(daemon: Daemon) -> None:
    """Wait until every stored message has been answered (the reply is out, the turn over)."""

    def done() -> bool:
        with closing(sqlite3.connect(daemon.app.db.path)) as db:
            statuses = [row[0] for row in db.execute("SELECT status FROM inbound")]
        return bool(statuses) and "pending" not in statuses

    await eventually(done, 30)


def agent_streams() -> dict[str, Any]:
    """``[agent] stream = true`` (the harness turns streaming off)."""
    return {"agent": {"stream": True}}


# Telegram.


@asynccontextmanager
async def telegram_daemon(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> AsyncIterator[Daemon]:
    """The daemon on the fake Telegram, streaming, Ada allowed and the approver."""
    channels = {"telegram": telegram_table(telegram)}
    async with running_daemon(tmp_path, llm, channels, tables=agent_streams()) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


async def test_telegram_never_edits_a_draft_into_what_it_shows(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    final = split_reply(REPLY)[0].html
    llm.queue(CATCHING_UP)
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "what is the plan?")
        await eventually(lambda: any(m.raw_text == final for m in telegram.sent(OWNER)), 30)
        await answered(daemon)
    (reply,) = telegram.sent(OWNER)
    edits = telegram.calls("editMessageText")
    assert all(call.ok for call in edits), [call.result for call in edits if not call.ok]
    calls = telegram_shown(telegram)
    no_repeats(calls)
    assert reply.raw_text == final and calls[-1].text == final  # as if never streamed
    assert [c.text for c in calls].count(final) == 1
    assert len(calls) >= 2  # posted, then edited: the draft did show the reply growing


async def test_telegram_progress_waits_with_the_card_and_runs_after_the_tap(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(*ASK_TWICE)
    waits = []
    async with telegram_daemon(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "make two folders")
        for folder, choice in (("mkdir first", "deny"), ("mkdir second", "once")):
            card = await telegram_card(telegram, folder)
            posted = next(c.at for c in telegram_shown(telegram) if c.ref == str(card.message_id))
            tapped = await shown_waiting(partial(telegram_shown, telegram), folder)
            await tap(telegram, OWNER, ADA, button(card, choice), card.message_id)
            waits.append((posted, tapped))
        await answered(daemon)
    assert not (tmp_path / "state" / "workspace" / "first").exists()
    assert (tmp_path / "state" / "workspace" / "second").is_dir()
    calls = telegram_shown(telegram)
    told_the_truth(calls, waits)
    no_repeats(calls)
    assert all(call.ok for call in telegram.calls("editMessageText"))


async def telegram_card(telegram: FakeTelegram, folder: str) -> SentMessage:
    """The approval card for ``folder``'s call, still with its buttons (waited for)."""
    return await telegram.await_until(
        lambda: next((m for m in telegram.sent(OWNER) if m.buttons and folder in m.text), None)
    )


# Discord.


@pytest.fixture
def discord_fake() -> Iterator[FakeDiscord]:
    """A fake Discord with a quick heartbeat."""
    with FakeDiscord.running(heartbeat_interval=1.0) as server:
        yield server


@asynccontextmanager
async def discord_daemon(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> AsyncIterator[tuple[Daemon, str]]:
    """The daemon on the fake Discord, streaming, and the owner's DM channel's id."""
    table = discord_table(fake)
    channels = {"discord": table}
    async with running_daemon(tmp_path, llm, channels, tables=agent_streams()) as daemon:
        assert await daemon.channels["discord"].status.wait_connected(10)
        yield daemon, fake.dm_channel(fake.owner)["id"]


async def test_discord_never_edits_a_draft_into_what_it_shows(
    tmp_path: Path, llm: FakeLLM, discord_fake: FakeDiscord
) -> None:
    fake = discord_fake
    final = discord_pieces(REPLY)[0]
    llm.queue(CATCHING_UP)
    async with discord_daemon(tmp_path, llm, fake) as (daemon, dm):
        fake.user_sends(dm, fake.owner, "what is the plan?")
        await eventually(lambda: [m["content"] for m in fake.sent(dm)] == [final], 30)
        await answered(daemon)
    calls = discord_shown(fake, dm)
    no_repeats(calls)
    assert calls[-1].text == final and [c.text for c in calls].count(final) == 1
    assert len(calls) >= 2


async def test_discord_progress_waits_with_the_card_and_runs_after_the_tap(
    tmp_path: Path, llm: FakeLLM, discord_fake: FakeDiscord
) -> None:
    fake = discord_fake
    llm.queue(*ASK_TWICE)
    waits = []
    async with discord_daemon(tmp_path, llm, fake) as (daemon, dm):
        fake.user_sends(dm, fake.owner, "make two folders")
        for folder, choice in (("mkdir first", "deny"), ("mkdir second", "once")):
            card = await discord_card(fake, dm, folder)
            posted = next(c.at for c in discord_shown(fake, dm) if c.ref == card["id"])
            tapped = await shown_waiting(partial(discord_shown, fake, dm), folder)
            buttons = card["components"][0]["components"]
            custom_id = next(b["custom_id"] for b in buttons if b["custom_id"].endswith(choice))
            fake.user_presses(custom_id, card, fake.owner)
            waits.append((posted, tapped))
        await answered(daemon)
    assert not (tmp_path / "state" / "workspace" / "first").exists()
    assert (tmp_path / "state" / "workspace" / "second").is_dir()
    calls = discord_shown(fake, dm)
    told_the_truth(calls, waits)
    no_repeats(calls)


async def discord_card(fake: FakeDiscord, channel: str, folder: str) -> JSON:
    """The approval card for ``folder``'s call, still with its buttons (waited for)."""

    def card() -> JSON | None:
        sent = fake.sent(channel)
        return next((m for m in sent if m["components"] and folder in m["content"]), None)

    await eventually(lambda: card() is not None)
    found = card()
    assert found is not None
    return found


# Slack.


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """A fake Slack."""
    with FakeSlack.running() as fake:
        yield fake


@asynccontextmanager
async def slack_daemon(tmp_path: Path, llm: FakeLLM, slack: FakeSlack) -> AsyncIterator[Daemon]:
    """The daemon on the fake Slack (no extra pacing), streaming, Alice allowed."""
    channels = {"slack": slack_table(slack)}
    async with running_daemon(tmp_path, llm, channels, tables=agent_streams()) as daemon:
        assert await daemon.channels["slack"].status.wait_connected(10)
        yield daemon


async def test_slack_never_updates_a_draft_into_what_it_shows(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    final = split_for_slack(REPLY)[0]
    llm.queue(CATCHING_UP)
    async with slack_daemon(tmp_path, llm, slack) as daemon:
        slack.user_sends(ALICE_DM, ALICE, "what is the plan?")
        await slack.await_call("reactions.remove", within=30)  # the answer is complete
        await answered(daemon)
    (reply,) = slack.sent(ALICE_DM)
    calls = slack_shown(slack)
    no_repeats(calls)
    assert reply["text"] == final == calls[-1].text
    assert [c.text for c in calls].count(final) == 1 and len(calls) >= 2


async def test_slack_progress_waits_with_the_card_and_runs_after_the_tap(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(*ASK_TWICE)
    waits = []
    async with slack_daemon(tmp_path, llm, slack) as daemon:
        slack.user_sends(ALICE_DM, ALICE, "make two folders")
        for folder, choice in (("mkdir first", "deny"), ("mkdir second", "once")):
            card = await slack_card(slack, folder)
            posted = next(c.at for c in slack_shown(slack) if c.ref == card["ts"])
            tapped = await shown_waiting(partial(slack_shown, slack), folder)
            action = next(a for a in actions(card) if a.endswith(f":{choice}"))
            slack.user_presses(ALICE, action, channel=ALICE_DM, message_ts=card["ts"])
            waits.append((posted, tapped))
        await answered(daemon)
    assert not (tmp_path / "state" / "workspace" / "first").exists()
    assert (tmp_path / "state" / "workspace" / "second").is_dir()
    calls = slack_shown(slack)
    told_the_truth(calls, waits)
    no_repeats(calls)


def actions(message: JSON) -> list[str]:
    """The action ids of a message's buttons."""
    blocks = message.get("blocks") or []
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


async def slack_card(slack: FakeSlack, folder: str) -> JSON:
    """The approval card for ``folder``'s call, still with its buttons (waited for)."""

    def card() -> JSON | None:
        return next((m for m in slack.sent(ALICE_DM) if actions(m) and folder in m["text"]), None)

    await eventually(lambda: card() is not None)
    found = card()
    assert found is not None
    return found


# The line on its own.


def test_the_line_follows_each_call_and_never_runs_ahead_of_the_gate() -> None:
    lines: list[str] = []
    line = ProgressLine(lines.append, Redactor(["sk-live-0123456789abcdef"]).text)
    shell = ToolCall("1", "shell", {"command": "mkdir x sk-live-0123456789abcdef"})
    clock = ToolCall("2", "clock", {})
    line.begin([shell, clock])
    line(shell, "waiting")
    line(clock, "running")
    line(clock, "done")
    line(shell, "done")  # denied: it never ran
    line(ToolCall("3", "clock", {}), "running")  # not a call of this round
    line.settle()
    waiting = "waiting for your approval: shell `mkdir x [redacted]`"
    assert lines == [waiting, "checking the time…", waiting, "checking the time…"]

    line.begin([shell])  # the next round: a call the policy blocks outright
    line(shell, "done")
    line.settle()
    assert lines[4:] == ["working…"]

    in_a_group: list[str] = []
    group = ProgressLine(in_a_group.append, None)  # no redactor: no arguments
    group.begin([shell, clock])
    group(shell, "waiting")
    group(clock, "waiting")
    group(shell, "running")
    assert in_a_group == [
        "waiting for your approval: shell",
        "waiting for your approval: shell (and 1 more)",
        "running shell…",  # only the call that runs, not the one still waiting
    ]


async def test_a_stopped_turn_leaves_no_progress_line_claiming_to_run(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """/stop while a tool's progress line is shown: the draft says it was stopped."""
    gate = threading.Event()
    llm.queue(CallTools([("clock", {})]), Hold(gate, Say("never sent")))
    table = telegram_table(telegram, stream=True)
    try:
        async with running_daemon(tmp_path, llm, {"telegram": table}) as daemon:
            assert await daemon.channels["telegram"].status.wait_connected(30)
            telegram.user_sends(OWNER, ADA, "what time is it?")
            draft = await telegram.await_until(
                lambda: next(
                    (m for m in telegram.sent(OWNER) if m.text.startswith(STATUS_MARK)), None
                ),
                timeout=30,
            )
            telegram.user_sends(OWNER, ADA, "/stop")
            await telegram.await_until(
                lambda: any(m.text == "Stopped." for m in telegram.sent(OWNER)), timeout=30
            )
            stopped = await telegram.await_until(
                lambda: next(
                    (
                        m
                        for m in telegram.sent(OWNER)
                        if m.message_id == draft.message_id and "Stopped" in m.text
                    ),
                    None,
                ),
                timeout=30,
            )
    finally:
        gate.set()
    assert stopped.text == "⏹ Stopped."
    assert not any(STATUS_MARK in m.text for m in telegram.sent(OWNER))
    assert not any("never sent" in m.text for m in telegram.sent(OWNER))
