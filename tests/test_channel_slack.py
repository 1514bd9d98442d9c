"""The Slack channel end to end: the real daemon, slack-bolt and slack_sdk, the fake Slack.

Every test runs ``pinclaw run``'s ``Daemon`` in-process with the fake LLM as its
model and a ``[channels.slack]`` table pointing at the fake Slack, so events go
over a real websocket (or signed HTTP) and replies over the real Web API client.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import pytest

from bot.core.channel import DeliveryError
from bot.core.messages import Attachment, Button, InboundMessage, OutboundMessage
from bot.daemon.main import Daemon
from channels.slack.channel import SlackChannel
from channels.slack.format import MESSAGE_LIMIT
from tests.channel_tables import slack_table as shared_slack_table
from tests.daemon_harness import running_daemon
from tests.fake_llm import FakeLLM, Say, Stall
from tests.fake_slack import (
    ALICE,
    ALICE_DM,
    BOB,
    BOB_DM,
    GENERAL,
    Envelope,
    FakeSlack,
    post_event,
)
from tests.fake_slack.payloads import event_callback

JSON = dict[str, Any]


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """A fake Slack; unacked events are redelivered after 3 s, as Slack does."""
    with FakeSlack.running() as fake:
        yield fake


def slack_table(slack: FakeSlack, **settings: Any) -> dict[str, Any]:
    """The ``[channels.slack]`` table: fast pings, no pacing delay, Alice allowed."""
    return {"slack": shared_slack_table(slack, **settings)}


@asynccontextmanager
async def slack_daemon(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack, **settings: Any
) -> AsyncIterator[tuple[Daemon, SlackChannel]]:
    """The daemon with its Slack channel, once the channel is connected."""
    async with running_daemon(tmp_path, llm, slack_table(slack, **settings)) as daemon:
        channel = daemon.channels["slack"]
        assert isinstance(channel, SlackChannel)
        assert await channel.status.wait_connected(10)
        yield daemon, channel


async def bot_messages(slack: FakeSlack, channel: str, count: int) -> list[JSON]:
    """Wait until the bot has ``count`` messages in ``channel``; return them."""
    await slack.await_until(lambda: len(slack.sent(channel)) >= count, what=f"{count} replies")
    return slack.sent(channel)


async def eventually(predicate: Callable[[], bool], within: float = 10.0) -> None:
    """Poll state that has nothing to wait on (a channel's status, log records)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.01)


def stored(daemon: Daemon) -> list[InboundMessage]:
    """Every message in the daemon's inbound store, read like another process would."""
    with closing(sqlite3.connect(daemon.app.db.path)) as db:
        rows = db.execute("SELECT payload FROM inbound ORDER BY id").fetchall()
    return [InboundMessage.from_json(row[0]) for row in rows]


# Receiving and answering.


async def test_dm_shows_progress_then_gets_the_reply(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(Say("Hello **Alice** & <friends>"))
    async with slack_daemon(tmp_path, llm, slack):
        sent = slack.user_sends(ALICE_DM, ALICE, "hi there")
        await slack.await_call("reactions.remove")
        (reply,) = slack.sent(ALICE_DM)
    steps = [c for c in slack.calls() if c.method.startswith(("reactions.", "chat."))]
    assert [c.method for c in steps] == ["reactions.add", "chat.postMessage", "reactions.remove"]
    assert {"channel": ALICE_DM, "timestamp": sent.ts, "name": "eyes"}.items() <= steps[
        0
    ].args.items()
    assert reply["text"] == "Hello *Alice* &amp; &lt;friends&gt;"
    assert "thread_ts" not in reply  # a DM stays one conversation
    assert slack.reactions(ALICE_DM, sent.ts) == []
    (request,) = llm.requests
    assert request.view.last_text == "hi there"
    assert "Alice" in request.view.system  # the display name from users.info


async def test_ack_is_sent_only_after_the_message_is_stored(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        row_at_ack: dict[str, bool] = {}
        forward = slack.courier.on_acked

        def check_store(envelope: Envelope, payload: JSON | None) -> None:
            # Runs in the fake's thread at the moment the ack frame arrives.
            event = envelope.payload["event"]
            key = f"{event['channel']}:{event['ts']}"
            with closing(sqlite3.connect(daemon.app.db.path)) as db:
                found = db.execute("SELECT 1 FROM inbound WHERE message_key = ?", (key,))
                row_at_ack[key] = found.fetchone() is not None
            forward(envelope, payload)

        slack.courier.on_acked = check_store
        sent = slack.user_sends(ALICE_DM, ALICE, "remember this")
        await slack.await_ack(sent.envelope.envelope_id)
        await eventually(lambda: bool(row_at_ack))  # the fake records the ack, then calls us
        assert row_at_ack == {f"{ALICE_DM}:{sent.ts}": True}
        await bot_messages(slack, ALICE_DM, 1)


async def test_event_refused_while_stopping_is_resent_to_the_next_daemon(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    slack.ack_timeout = None  # the test plays Slack's retry itself
    caplog.set_level(logging.INFO, logger="channels.slack")
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        await daemon.router.shutdown(0)  # stopping: the socket is still up, the inbox is closed
        sent = slack.user_sends(ALICE_DM, ALICE, "anyone home?")
        await eventually(lambda: "unacknowledged" in caplog.text)
        assert slack.acks() == [] and stored(daemon) == []
    llm.queue(Say("Yes, back now"))
    async with slack_daemon(tmp_path, llm, slack):
        retry = slack.redeliver(sent.envelope)
        await slack.await_ack(retry.envelope_id)
        (reply,) = await bot_messages(slack, ALICE_DM, 1)
    assert reply["text"] == "Yes, back now"


async def test_long_reply_is_split_within_the_limit_with_balanced_fences(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    words = [f"w{i:04d}" for i in range(1600)]
    prose = [" ".join(words[i : i + 80]) for i in range(0, 1600, 80)]
    code = [f"line_{i:03d} = a[{i}] & b < c" for i in range(200)]
    fence = "```python\n" + "\n".join(code) + "\n```"
    text = "\n\n".join([*prose[:10], fence, *prose[10:]])
    assert len(text) > 12_000
    llm.queue(Say(text))
    async with slack_daemon(tmp_path, llm, slack):
        slack.user_sends(ALICE_DM, ALICE, "write a lot")
        await slack.await_call("reactions.remove")
        pieces = [m["text"] for m in slack.sent(ALICE_DM)]
    assert len(pieces) >= 5
    assert all(len(piece) <= MESSAGE_LIMIT for piece in pieces)
    seen_words: list[str] = []
    seen_code: list[str] = []
    for piece in pieces:
        inside = False
        for line in piece.split("\n"):
            if line == "```":
                inside = not inside
            elif line.startswith("line_"):
                assert inside, "a code line outside its fence"
                assert line.endswith("&amp; b &lt; c")
                seen_code.append(line.split(" ", 1)[0])
            else:
                assert not inside or not line, f"prose inside a fence: {line[:30]}"
                seen_words += line.split()
        assert not inside, "a piece ends inside an open fence"
    assert seen_words == words  # nothing lost, nothing doubled, in order
    assert seen_code == [c.split(" ", 1)[0] for c in code]


async def test_stranger_gets_a_pairing_code_and_is_answered_once_approved(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(Say("Welcome, Bob!"))
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        slack.user_sends(BOB_DM, BOB, "hello?")
        (offer,) = await bot_messages(slack, BOB_DM, 1)
        code = re.search(r"\*([A-Z2-9]{8})\*", offer["text"])
        assert code is not None and llm.requests == []
        assert await daemon.pairing.approve(code.group(1)) is not None
        slack.user_sends(BOB_DM, BOB, "and now?")
        replies = await bot_messages(slack, BOB_DM, 2)
    assert replies[1]["text"] == "Welcome, Bob!"


async def test_channel_needs_a_mention_and_is_answered_in_a_thread(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(Say("In the thread"), Say("Still in the thread"))
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        chatter = slack.user_sends(GENERAL, ALICE, "just chatting")
        await slack.await_ack(chatter.envelope.envelope_id)
        asked = slack.user_sends(GENERAL, ALICE, "what's up?", mention_bot=True)
        assert [e.payload["event"]["type"] for e in asked.envelopes] == ["message", "app_mention"]
        for envelope in asked.envelopes:
            await slack.await_ack(envelope.envelope_id)
        await daemon.router.drain()
        # A reply in the bot's thread is addressed to it without a new mention.
        follow_up = slack.user_sends(GENERAL, ALICE, "tell me more", thread_ts=asked.ts)
        await slack.await_ack(follow_up.envelope.envelope_id)
        await daemon.router.drain()
    first, second = slack.sent(GENERAL)  # one answer per post, though two events came
    assert first["thread_ts"] == asked.ts and second["thread_ts"] == asked.ts
    assert [m["text"] for m in (first, second)] == ["In the thread", "Still in the thread"]
    opening, later = llm.requests  # the chatter was never sent to the model
    assert (opening.view.last_text, later.view.last_text) == ("what's up?", "tell me more")
    assert "#general" in opening.view.system
    assert later.view.message_count > opening.view.message_count  # one session per thread


async def test_rate_limit_is_retried_after_retry_after_and_delivered_once(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    slack.fail("chat.postMessage", "ratelimited", status=429, retry_after=1)
    llm.queue(Say("after the pause"))
    async with slack_daemon(tmp_path, llm, slack):
        slack.user_sends(ALICE_DM, ALICE, "quick!")
        (reply,) = await bot_messages(slack, ALICE_DM, 1)
    assert [c.status for c in slack.calls("chat.postMessage")] == [429, 200]
    assert reply["text"] == "after the pause"
    assert "retry 1 in 1.0 s" in caplog.text  # Slack's Retry-After, not a guess


async def test_dropped_socket_reconnects_and_status_follows(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(Say("still here"))
    async with slack_daemon(tmp_path, llm, slack) as (_, channel):
        slack.unreachable()  # keep it down long enough to be seen
        slack.drop()
        await eventually(lambda: channel.status.state == "reconnecting")
        assert "dropped" in channel.status.detail
        slack.unreachable(False)
        assert await channel.status.wait_connected(10)
        assert channel.status.detail == "as @pinclaw"
        await slack.await_connected(2)
        slack.user_sends(ALICE_DM, ALICE, "you there?")
        (reply,) = await bot_messages(slack, ALICE_DM, 1)
        assert channel.status.restarts == 0  # slack_sdk replaced the socket by itself
    assert reply["text"] == "still here"


async def test_socket_down_too_long_restarts_the_channel(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(Say("fresh start"))
    async with slack_daemon(tmp_path, llm, slack, reconnect_limit_s=0.3) as (_, channel):
        slack.unreachable()
        slack.drop()
        await eventually(lambda: channel.status.restarts >= 1)
        slack.unreachable(False)
        await eventually(lambda: channel.status.state == "connected")
        slack.user_sends(ALICE_DM, ALICE, "hello again")
        (reply,) = await bot_messages(slack, ALICE_DM, 1)
    assert reply["text"] == "fresh start"


async def test_redelivered_event_is_answered_once(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(Say("only once"))
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        sent = slack.user_sends(ALICE_DM, ALICE, "ping")
        await bot_messages(slack, ALICE_DM, 1)
        again = slack.redeliver(sent.envelope)
        assert again.payload["event_id"] == sent.envelope.payload["event_id"]
        await slack.await_ack(again.envelope_id)  # a duplicate is acked, not answered
        await daemon.router.drain()
        assert len(slack.sent(ALICE_DM)) == 1 and len(llm.requests) == 1


async def test_unanswered_message_is_answered_once_after_a_restart(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(Stall(30, Say("too late")))
    async with slack_daemon(tmp_path, llm, slack):
        sent = slack.user_sends(ALICE_DM, ALICE, "a slow question")
        await asyncio.to_thread(llm.wait_requests, 1)
    assert slack.sent(ALICE_DM) == []  # stopped mid-turn
    llm.queue(Say("the answer, after the restart"))
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        await bot_messages(slack, ALICE_DM, 1)
        await daemon.router.drain()
    assert [m["text"] for m in slack.sent(ALICE_DM)] == ["the answer, after the restart"]
    assert [a.envelope_id for a in slack.acks()] == [sent.envelope.envelope_id]
    assert slack.reactions(ALICE_DM, sent.ts) == []


async def test_edits_joins_and_unknown_events_are_acked_and_ignored(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    events: list[JSON] = [
        {"type": "message", "subtype": "message_changed", "channel": ALICE_DM, "ts": "1.1",
         "message": {"type": "message", "user": ALICE, "text": "edited", "ts": "1.0"}},
        {"type": "message", "subtype": "channel_join", "channel": GENERAL, "user": BOB,
         "text": "<@U0BOB> has joined the channel", "ts": "1.2"},
        {"type": "reaction_added", "user": ALICE, "reaction": "tada",
         "item": {"type": "message", "channel": ALICE_DM, "ts": "1.0"}},
    ]  # fmt: skip
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        for number, event in enumerate(events):
            body = event_callback(
                event,
                team_id="T0FAKE",
                app_id="A0FAKE",
                bot_user_id="U0BOT",
                event_id=f"EvIGNORED{number}",
                event_time=int(time.time()),
            )
            envelope = Envelope(f"ignored-{number}", "events_api", body)
            slack.deliver(envelope)
            await slack.await_ack(envelope.envelope_id)  # acked, so Slack does not resend it
        await daemon.router.drain()
        assert stored(daemon) == [] and llm.requests == []


# Commands, buttons, files, errors.


async def test_slash_commands_are_answered_only_to_the_person(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    async with slack_daemon(tmp_path, llm, slack):
        run = slack.user_runs_command(ALICE_DM, ALICE, "status")
        ack = await slack.await_ack(run.envelope.envelope_id)
        assert ack.payload is None  # acked at once; the answer follows
        await slack.await_call("response_url")
        slack.user_runs_command(GENERAL, ALICE, "what is this")  # unknown: help
        await slack.await_call("response_url", count=2)
    status, help_text = slack.ephemerals()
    assert (status["via"], status["user"], status["channel"]) == ("response_url", ALICE, ALICE_DM)
    assert "slack: connected (as @pinclaw)" in status["text"]
    assert (help_text["channel"], help_text["user"]) == (GENERAL, ALICE)
    assert "/new - Start a fresh conversation" in help_text["text"]
    assert slack.sent(ALICE_DM) == [] and slack.sent(GENERAL) == [] and llm.requests == []


async def test_buttons_files_and_permanent_errors(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(Say("got it"))
    async with slack_daemon(tmp_path, llm, slack) as (daemon, channel):
        buttons = (Button("Approve", "approve:7"), Button("Deny", "deny:7"))
        await channel.send(OutboundMessage("slack", ALICE_DM, "Run `ls`?", buttons=buttons))
        (asked,) = slack.sent(ALICE_DM)
        section, actions = asked["blocks"]
        assert section["text"] == {"type": "mrkdwn", "text": "Run `ls`?"}
        assert [e["action_id"] for e in actions["elements"]] == ["approve:7", "deny:7"]
        press = slack.user_presses(ALICE, "approve:7")
        await slack.await_ack(press.envelope.envelope_id)

        with pytest.raises(DeliveryError, match="channel_not_found"):
            await channel.send(OutboundMessage("slack", "C0NOPE", "hello?"))
        refused = [c for c in slack.calls("chat.postMessage") if c.args["channel"] == "C0NOPE"]
        assert len(refused) == 1  # permanent: not retried

        slack.user_sends(ALICE_DM, ALICE, "", files=[("notes.txt", b"hello file")])
        await bot_messages(slack, ALICE_DM, 2)
        (message,) = stored(daemon)
        (attachment,) = message.attachments
        assert message.text == "(shared notes.txt)"
        assert (attachment.name, attachment.mime_type, attachment.size) == (
            "notes.txt",
            "text/plain",
            10,
        )
        assert await channel.fetch(attachment) == b"hello file"
        elsewhere = Attachment("x.txt", "text/plain", 1, "https://example.com/x.txt")
        with pytest.raises(DeliveryError, match="not stored in Slack"):
            await channel.fetch(elsewhere)


# HTTP mode and start-up.


async def test_http_mode_answers_signed_events_and_rejects_forged_ones(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    table = slack_table(
        slack, mode="http", app_token=None, signing_secret=slack.signing_secret, http_port=0
    )
    llm.queue(Say("over HTTP"))
    async with running_daemon(tmp_path, llm, table) as daemon:
        channel = daemon.channels["slack"]
        assert isinstance(channel, SlackChannel)
        assert await channel.status.wait_connected(10) and channel.http_url is not None
        slack.use_http(channel.http_url)
        sent = slack.user_sends(ALICE_DM, ALICE, "hello over http")
        assert (await slack.await_ack(sent.envelope.envelope_id)).via == "http"
        (reply,) = await bot_messages(slack, ALICE_DM, 1)
        forged = await post_event(channel.http_url, sent.envelope.payload, "not-the-secret")
        assert forged.status == 401
        run = slack.user_runs_command(ALICE_DM, ALICE, "help")
        await slack.await_ack(run.envelope.envelope_id)
        await slack.await_call("response_url")
    assert reply["text"] == "over HTTP"
    assert len(llm.requests) == 1


async def test_no_network_at_start_is_retried_until_slack_is_reachable(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    slack.unreachable()
    llm.queue(Say("online now"))
    async with running_daemon(tmp_path, llm, slack_table(slack)) as daemon:
        channel = daemon.channels["slack"]
        await slack.await_until(lambda: slack.refused >= 2)  # two attempts, both refused
        assert channel.status.state != "connected" and channel.status.restarts >= 1
        assert "cannot reach Slack" in channel.status.detail
        slack.unreachable(False)
        assert await channel.status.wait_connected(30)
        slack.user_sends(ALICE_DM, ALICE, "hello")
        (reply,) = await bot_messages(slack, ALICE_DM, 1)
    assert reply["text"] == "online now"


async def test_refused_tokens_are_reported_and_retried(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    for key, which in [("app_token", "app token"), ("bot_token", "bot token")]:
        table = slack_table(slack, **{key: "xoxb-wrong" if key == "bot_token" else "xapp-wrong"})
        async with running_daemon(tmp_path, llm, table) as daemon:
            status = daemon.channels["slack"].status
            await eventually(lambda: status.restarts >= 1)  # noqa: B023 (awaited right here)
            assert f"({which}): the token is not valid (invalid_auth)" in status.detail
            assert status.state == "reconnecting"
    assert slack.connection_count == 0
