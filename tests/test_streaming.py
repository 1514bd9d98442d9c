"""Replies shown as they are written, over the fake Telegram, Discord and Slack servers.

The fake model streams slowly (``Say(..., pieces, pause_s)``), the real daemon runs
the real client libraries against the fakes, and the tests read what each platform
was asked to do: the draft posted once, its edits (at least two before the final
text, never more than the throttle allows, counted against the intervals between
the calls the fake recorded), and the final text, which must be exactly what a reply
that was never streamed renders to. Also: a draft that cannot be edited falls back to
an ordinary reply, ``stream = false`` sends one message, a progress line shows while
a tool runs and is gone from the final text, and an unknown ``/command`` is answered
with the help without asking the model.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import os
import tty
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TextIO

import pytest

from bot.agent.progress import describe_call, describe_calls
from bot.config import parse_config
from bot.config.channel import ChannelSettings
from bot.config.general import AgentConfig
from bot.core.chat_commands import UNKNOWN, parse_command
from bot.core.conversation import ToolCall
from bot.core.draft import INTERVAL_S, STATUS_MARK
from bot.core.messages import InboundMessage, OutboundMessage
from bot.daemon.main import Daemon
from bot.security.redact import Redactor
from channels.slack.format import to_mrkdwn
from channels.telegram.format import split_reply, to_html
from channels.terminal import CLEAR_LINE, DIM, SPINNER_FRAMES, TerminalChannel
from tests.channel_tables import slack_table, telegram_table
from tests.daemon_harness import running_daemon
from tests.fake_discord import FakeDiscord
from tests.fake_llm import CallTools, FakeLLM, Say, Stall
from tests.fake_slack import ALICE, ALICE_DM, FakeSlack
from tests.fake_telegram import Call, FakeTelegram, SentMessage

OWNER = 7001
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
# Markdown with everything a half-written draft can break: bold, code, a fence, escapes.
TEXT = (
    "Here is **the plan** for `sensor_read`:\n\n"
    "- check the values & <limits>\n"
    "- compare them\n\n"
    "```python\nprint('hello')\nprint(1 < 2)\n```\n\n"
    "That is _all_, see [the docs](https://example.org/docs)."
)
SLOW = Say(TEXT, pieces=12, pause_s=0.4)  # about five seconds of writing
TOLERANCE_S = 0.05  # float noise between the draft's clock and the fake's


def within_throttle(times: Sequence[float]) -> None:
    """Calls to one draft message are at least ``INTERVAL_S`` apart: count them against
    the intervals that fit between the first and the last."""
    span = times[-1] - times[0]
    assert len(times) - 1 <= (span + TOLERANCE_S) / INTERVAL_S, (len(times), span)


# Telegram.


@asynccontextmanager
async def telegram_daemon(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, **extra: Any
) -> AsyncIterator[Daemon]:
    """The daemon with the Telegram channel, Ada allowed, once it is connected."""
    table = telegram_table(telegram, **{"stream": True, **extra})
    async with running_daemon(tmp_path, llm, {"telegram": table}) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


async def telegram_reply(telegram: FakeTelegram, html: str) -> SentMessage:
    """The bot's message in Ada's chat once it reads ``html`` (waited for)."""
    return await telegram.await_until(
        lambda: next((m for m in telegram.sent(OWNER) if m.raw_text == html), None), timeout=30
    )


def draft_calls(telegram: FakeTelegram, draft: SentMessage) -> list[Call]:
    """The sendMessage that posted ``draft`` and every edit of it, in order."""
    posted = [c for c in telegram.calls("sendMessage") if c.result and _id(c) == draft.message_id]
    edits = [
        c
        for c in telegram.calls("editMessageText")
        if int(c.params["message_id"]) == draft.message_id
    ]
    return posted + edits


def _id(call: Call) -> int:
    return int(call.result["message_id"])


async def test_telegram_shows_the_reply_growing_and_ends_with_the_unstreamed_rendering(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(SLOW)
    async with telegram_daemon(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "what is the plan?")
        final = await telegram_reply(telegram, to_html(TEXT))
    assert llm.requests[0].view.stream
    (only,) = telegram.sent(OWNER)  # one message: the draft became the reply
    assert only.message_id == final.message_id and final.reply_to == 1
    assert final.parse_mode == "HTML" and final.raw_text == to_html(TEXT)
    calls = draft_calls(telegram, final)
    assert calls[0].method == "sendMessage" and all(call.ok for call in calls)
    # Every draft was valid HTML: no refusal, no fallback to plain text.
    assert all(call.params.get("parse_mode") == "HTML" for call in calls)
    drafts = [call.params["text"] for call in calls[:-1]]
    assert len(drafts) >= 3  # the first draft and at least two edits before the final text
    assert all(a != b for a, b in itertools.pairwise(drafts))  # edits only on change
    assert drafts[-1] != final.raw_text
    within_throttle([call.at for call in calls])


async def test_telegram_long_reply_keeps_one_growing_draft_then_splits_as_unstreamed(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    paragraph = "A line of the long answer, with **bold** and `code` & more. " * 12
    long_text = "\n\n".join(f"{n}. {paragraph}" for n in range(12))
    unstreamed = [piece.html for piece in split_reply(long_text)]
    assert len(unstreamed) == 3
    llm.queue(Say(long_text, pieces=8, pause_s=0.5))
    async with telegram_daemon(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "tell me everything")
        await telegram_reply(telegram, unstreamed[-1])
    first, *rest = telegram.sent(OWNER)
    assert [m.raw_text for m in (first, *rest)] == unstreamed  # as a reply never streamed
    assert first.reply_to == 1 and all(m.reply_to is None and m.edits == 0 for m in rest)
    calls = draft_calls(telegram, first)
    assert all(call.ok for call in calls)
    assert any(call.params["text"].endswith("\n…") for call in calls)  # a draft cut to fit
    within_throttle([call.at for call in calls])


async def test_telegram_draft_that_cannot_be_edited_falls_back_to_an_ordinary_reply(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(SLOW)
    async with telegram_daemon(tmp_path, llm, telegram):
        telegram.fail("editMessageText", 400, "Bad Request: message to edit not found", times=99)
        telegram.user_sends(OWNER, ADA, "what is the plan?")
        reply = await telegram_reply(telegram, to_html(TEXT))
        await telegram.await_call("deleteMessage")
    (draft_post, reply_post) = [c for c in telegram.calls("sendMessage") if c.ok]
    assert _id(reply_post) == reply.message_id != _id(draft_post)
    assert len(telegram.calls("editMessageText")) == 1  # the first refusal ended the drafting
    [left] = [m for m in telegram.sent(OWNER) if not m.deleted]
    assert left.message_id == reply.message_id  # the half answer is gone


async def test_telegram_with_stream_off_sends_one_message(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(SLOW)
    async with telegram_daemon(tmp_path, llm, telegram, stream=False):
        telegram.user_sends(OWNER, ADA, "what is the plan?")
        reply = await telegram_reply(telegram, to_html(TEXT))
    assert not llm.requests[0].view.stream
    assert [c.params["text"] for c in telegram.calls("sendMessage")] == [reply.raw_text]
    assert telegram.calls("editMessageText") == [] and reply.edits == 0


async def test_telegram_shows_progress_while_a_tool_runs_and_not_in_the_answer(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(
        CallTools([("clock", {})], text="Let me look at the clock first.", pieces=5, pause_s=0.4),
        Stall(2.5, Say("It is **noon**.", pieces=2)),
    )
    async with telegram_daemon(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "what time is it?")
        final = await telegram_reply(telegram, to_html("It is **noon**."))
    shown = [call.params["text"] for call in draft_calls(telegram, final)]
    assert any(text.startswith("Let me look") for text in shown)  # round one, as it came
    assert f"{STATUS_MARK}checking the time…" in shown  # replaced by the progress line
    assert final.text == "It is noon." and "clock" not in final.text
    assert len(telegram.sent(OWNER)) == 1


async def test_unknown_command_gets_the_help_and_never_reaches_the_model(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with telegram_daemon(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "/weather tomorrow")
        help_text = await telegram.await_until(
            lambda: next((m.text for m in telegram.sent(OWNER) if "/help" in m.text), None)
        )
        assert help_text.startswith("That is not one of my commands.")
        assert "/new - Start a fresh conversation" in help_text
        assert llm.requests == []
        telegram.user_sends(OWNER, ADA, "/ 5 apples")  # not a command: the model answers
        await telegram_reply(telegram, to_html("You said: / 5 apples"))
    assert [r.view.last_text for r in llm.requests] == ["/ 5 apples"]


# Discord.


@pytest.fixture
def discord_fake() -> Iterator[FakeDiscord]:
    """A fake Discord with a quick heartbeat."""
    with FakeDiscord.running(heartbeat_interval=1.0) as server:
        yield server


async def test_discord_edits_the_draft_and_ends_with_the_whole_text(
    tmp_path: Path, llm: FakeLLM, discord_fake: FakeDiscord
) -> None:
    fake = discord_fake
    table = {
        "token": fake.token,
        "api_base_url": fake.api_base,
        "gateway_url": fake.gateway_url,
        "allowed_users": [fake.owner["id"]],
        "stream": True,  # the harness turns streaming off unless a test wants it
    }
    llm.queue(SLOW)
    async with running_daemon(tmp_path, llm, {"discord": table}) as daemon:
        assert await daemon.channels["discord"].status.wait_connected(10)
        dm = fake.dm_channel(fake.owner)["id"]
        asked = fake.user_sends(dm, fake.owner, "what is the plan?")
        await fake.await_until(lambda: [m["content"] for m in fake.sent(dm)] == [TEXT], 30)
    [post] = [c for c in fake.calls("POST", rf"^/channels/{dm}/messages$") if c.status == 200]
    (reply,) = fake.sent(dm)
    assert reply["message_reference"]["message_id"] == asked["id"]
    edits = fake.calls("PATCH", rf"^/channels/{dm}/messages/{reply['id']}$")
    assert all(edit.status == 200 for edit in edits)
    drafts = [post.json["content"]] + [edit.json["content"] for edit in edits[:-1]]
    assert len(drafts) >= 3 and edits[-1].json["content"] == TEXT  # ends as posted unstreamed
    assert all(a != b for a, b in itertools.pairwise(drafts))
    within_throttle([post.time] + [edit.time for edit in edits])


# Slack.


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """A fake Slack."""
    with FakeSlack.running() as fake:
        yield fake


@asynccontextmanager
async def slack_daemon(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack, **extra: Any
) -> AsyncIterator[Daemon]:
    """The daemon with the Slack channel (no extra pacing), Alice allowed, connected."""
    table = slack_table(slack, **{"stream": True, **extra})
    async with running_daemon(tmp_path, llm, {"slack": table}) as daemon:
        assert await daemon.channels["slack"].status.wait_connected(10)
        yield daemon


async def test_slack_updates_the_draft_and_ends_with_the_unstreamed_rendering(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(SLOW)
    async with slack_daemon(tmp_path, llm, slack):
        slack.user_sends(ALICE_DM, ALICE, "what is the plan?")
        await slack.await_call("reactions.remove", within=30)  # the answer is complete
    (reply,) = slack.sent(ALICE_DM)
    assert reply["text"] == to_mrkdwn(TEXT)
    [post] = slack.calls("chat.postMessage")
    updates = slack.calls("chat.update")
    assert all(call.ok and call.args["ts"] == reply["ts"] for call in updates)
    drafts = [post.args["text"]] + [call.args["text"] for call in updates[:-1]]
    assert len(drafts) >= 3 and updates[-1].args["text"] == to_mrkdwn(TEXT)
    assert all(a != b for a, b in itertools.pairwise(drafts))
    within_throttle([post.at] + [call.at for call in updates])


async def test_slack_draft_refused_falls_back_and_stream_off_sends_once(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(SLOW, SLOW)
    async with slack_daemon(tmp_path, llm, slack):
        slack.fail("chat.update", "cant_update_message", times=99)
        slack.user_sends(ALICE_DM, ALICE, "what is the plan?")
        await slack.await_call("chat.delete", within=30)
    (reply,) = slack.sent(ALICE_DM)
    assert reply["text"] == to_mrkdwn(TEXT)
    assert len(slack.calls("chat.postMessage")) == 2 and len(slack.calls("chat.update")) == 1

    (tmp_path / "off").mkdir()
    async with slack_daemon(tmp_path / "off", llm, slack, stream=False):
        slack.user_sends(ALICE_DM, ALICE, "and again?")
        await slack.await_until(lambda: len(slack.sent(ALICE_DM)) == 2, within=30)
    assert [c.args["text"] for c in slack.calls("chat.postMessage")][-1] == to_mrkdwn(TEXT)
    assert len(slack.calls("chat.postMessage")) == 3 and len(slack.calls("chat.update")) == 1


# The pieces on their own.


def test_the_progress_line_names_the_tool_and_shows_arguments_only_redacted() -> None:
    redactor = Redactor(["sk-live-0123456789abcdef"])
    shell = ToolCall("1", "shell", {"command": "ls -la   /srv\n&& echo `id`"})
    assert describe_call(shell, redactor.text) == "running shell: `ls -la /srv && echo 'id'`…"
    assert describe_call(shell, None) == "running shell…"  # group chats: no arguments
    leaky = ToolCall("2", "shell", {"command": "curl -H 'key: sk-live-0123456789abcdef' x"})
    assert "sk-live" not in describe_call(leaky, redactor.text)
    fetch = ToolCall("3", "web_fetch", {"url": "https://api.example.org/v1?key=secret"})
    assert describe_call(fetch, redactor.text) == "reading a web page from: `api.example.org`…"
    long = ToolCall("4", "file_read", {"path": "notes/" + "x" * 80})
    assert len(describe_call(long, redactor.text)) < 70
    odd = ToolCall("5", "made_up<b>tool", {"a": 1})
    assert describe_calls([odd, shell], redactor.text) == "using made_upbtool… (and 1 more)"
    assert describe_call(ToolCall("6", "sensor_read", {"sensor": "bme280"}), None) == (
        "reading sensor…"
    )


def test_a_channel_streams_as_agent_stream_says_unless_its_own_stream_is_set() -> None:
    channels = {
        "telegram": {"token": "1:x", "stream": True},
        "discord": {"token": "x"},
        "slack": {"bot_token": "x", "app_token": "y", "stream": False},
    }
    raw = {"provider": {"kind": "ollama", "model": "m"}, "agent": {"stream": False}}
    config = parse_config({**raw, "channels": channels}, {})
    assert config.agent.stream is False and AgentConfig().stream is True
    settings = config.enabled_channels()
    decided = {
        name: s.streams(config.agent.stream)
        for name, s in settings.items()
        if isinstance(s, ChannelSettings)
    }
    assert decided == {"telegram": True, "discord": False, "slack": False}


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/help", ("help", "")),
        ("/start", ("help", "")),
        ("/new@pinclaw_bot please", ("new", "please")),
        ("/foo", (UNKNOWN, "")),
        ("/Weather tomorrow\nplease", (UNKNOWN, "tomorrow\nplease")),
        ("/foo@pinclaw_bot", (UNKNOWN, "")),
        ("/ 5 apples", None),
        ("/etc/hosts is gone", None),
        ("/5", None),
        ("/tmp.txt", None),
        ("hello /new", None),
        ("", None),
    ],
)
def test_what_counts_as_a_command(text: str, parsed: tuple[str, str] | None) -> None:
    assert parse_command(text) == parsed


@contextmanager
def pty_terminal() -> Iterator[tuple[int, TextIO, TextIO]]:
    """A pseudo-terminal: its output end to read, and the keyboard and screen files."""
    main, side = os.openpty()
    tty.setraw(side)  # no newline translation: the test reads what was written
    try:
        with open(side, "w", encoding="utf-8", closefd=False) as out, open(side) as keys:
            yield main, out, keys
    finally:
        os.close(main)


async def test_the_terminal_spins_until_text_and_shows_progress_dim_on_a_tty_only() -> None:
    screen = bytearray()
    with pty_terminal() as (main, out, keys):
        channel = TerminalChannel(stdin=keys, stdout=out)
        message = InboundMessage("terminal", "chat", "owner", "hi")
        reply = channel.text_sink(message)
        assert reply is not None
        async with channel.typing(message):
            await _read_until(main, screen, SPINNER_FRAMES[1].encode())
            reply.status("running shell: `ls`…")
            reply("Hel")
            reply("lo")
        await reply.finish(OutboundMessage.reply(message, "Hello"))
        await _read_until(main, screen, b"Hello\n")
    shown = screen.decode()
    spun, _, rest = shown.partition(CLEAR_LINE)
    assert "thinking…" in spun  # the spinner turned, then its line was cleared
    assert f"{DIM}running shell: ls…" in rest and rest.endswith("pinclaw> Hello\n")

    pipe = io.StringIO()
    piped = TerminalChannel(stdin=io.StringIO(), stdout=pipe)
    quiet = piped.text_sink(message)
    assert quiet is not None
    async with piped.typing(message):
        await asyncio.sleep(0.3)  # long enough for a spinner to have drawn, had there been one
        quiet.status("running shell: `ls`…")
        quiet("Hello")
    await quiet.finish(OutboundMessage.reply(message, "Hello"))
    assert pipe.getvalue() == "Hello\n"


async def _read_until(fd: int, screen: bytearray, wanted: bytes) -> None:
    """Read a pty's output into ``screen`` until ``wanted`` shows up (10 s at most)."""
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(10):
        while wanted not in screen:
            screen += await loop.run_in_executor(None, os.read, fd, 4096)
