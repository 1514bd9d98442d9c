"""The Discord channel end to end: the real daemon, the real discord.py, the fake Discord.

Every test configures ``[channels.discord]`` with the fake's URLs, exactly as a
user would point PinClaw at another server, so the production path is what runs:
``DiscordChannel`` aims discord.py at the configured endpoints, the daemon's
supervisor runs it, and replies come from the fake LLM through the router.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.core.channel import DeliveryError
from bot.core.delivery import split_markdown
from bot.core.messages import Button, InboundMessage, OutboundMessage
from bot.daemon.main import Daemon
from channels.discord.events import CHANNEL
from channels.discord.send import MAX_ATTACHMENT_BYTES
from tests.daemon_harness import running_daemon
from tests.fake_discord import JSON, FakeDiscord
from tests.fake_discord.payloads import FLAG_EPHEMERAL, FLAG_LOADING, snowflake
from tests.fake_discord.payloads import message as fake_message
from tests.fake_llm import FakeLLM, Say, Stall


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    """A fake Discord with a quick heartbeat."""
    with FakeDiscord.running(heartbeat_interval=1.0) as server:
        yield server


def discord_table(fake: FakeDiscord, **extra: Any) -> dict[str, Any]:
    """``[channels.discord]`` pointing at the fake; the fake's owner is allowed."""
    return {
        "discord": {
            "token": fake.token,
            "api_base_url": fake.api_base,
            "gateway_url": fake.gateway_url,
            "allowed_users": [fake.owner["id"]],
            **extra,
        }
    }


@asynccontextmanager
async def daemon_on(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord, **extra: Any
) -> AsyncIterator[Daemon]:
    """The daemon with only the Discord channel, started and connected."""
    async with running_daemon(tmp_path, llm, discord_table(fake, **extra)) as daemon:
        assert await daemon.channels[CHANNEL].status.wait_connected(10)
        yield daemon


async def sent_in(fake: FakeDiscord, channel_id: str, count: int) -> list[JSON]:
    """Wait until the bot has ``count`` messages in the channel; return them all."""
    await fake.await_until(lambda: len(fake.sent(channel_id)) >= count)
    return fake.sent(channel_id)


def posts(fake: FakeDiscord, channel_id: str) -> list[JSON]:
    """Successful message POSTs to a channel, as sent."""
    calls = fake.calls("POST", rf"^/channels/{channel_id}/messages$")
    return [c.json for c in calls if c.status == 200]


async def test_dm_is_answered_as_a_reply_after_typing(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    llm.queue(Say("Hello from **PinClaw**"))
    async with daemon_on(tmp_path, llm, fake) as daemon:
        dm = fake.dm_channel(fake.owner)["id"]
        asked = fake.user_sends(dm, fake.owner, "hi there")
        [answer] = await sent_in(fake, dm, 1)
        assert answer["content"] == "Hello from **PinClaw**"
        assert answer["message_reference"]["message_id"] == asked["id"]
        post = await fake.await_call("POST", rf"^/channels/{dm}/messages$")
        typing = fake.calls("POST", rf"^/channels/{dm}/typing$")
        assert typing and typing[0].time <= post.time
        assert post.json["allowed_mentions"] == {"parse": [], "replied_user": True}
        assert llm.requests[-1].view.last_text == "hi there"
        status = daemon.channels[CHANNEL].status
        assert status.state == "connected" and status.detail == f"as {fake.bot['username']}"


def _fence_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("```")]


def _content_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip() and not line.startswith("```")]


async def test_long_reply_arrives_in_pieces_with_balanced_fences(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    prose = "\n\n".join(f"Paragraph {n}: " + "words and more words " * 12 for n in range(14))
    code = "\n".join(f"    value_{n} = compute({n}) * 2  # line {n}" for n in range(80))
    text = f"{prose}\n\n```python\n{code}\n```\n\nThat is all, 🎉 done."
    assert len(text) > 7000
    llm.queue(Say(text))
    async with daemon_on(tmp_path, llm, fake):
        dm = fake.dm_channel(fake.owner)["id"]
        asked = fake.user_sends(dm, fake.owner, "write a lot")
        expected = len(split_markdown(text, 2000))
        answer = await sent_in(fake, dm, expected)
    contents = [m["content"] for m in answer]
    assert len(contents) >= 4 and all(len(c) <= 2000 for c in contents)
    assert all(len(_fence_lines(c)) % 2 == 0 for c in contents)
    joined = [line for c in contents for line in _content_lines(c)]
    assert joined == _content_lines(text), "every line arrives once, in order"
    first, *rest = posts(fake, dm)
    assert str(first["message_reference"]["message_id"]) == asked["id"]
    assert all("message_reference" not in p for p in rest)


async def test_stranger_gets_a_pairing_code_then_answers_once_approved(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    stranger = fake.add_user("mallory")
    async with daemon_on(tmp_path, llm, fake) as daemon:
        dm = fake.dm_channel(stranger)["id"]
        fake.user_sends(dm, stranger, "let me in")
        [offer] = await sent_in(fake, dm, 1)
        match = re.search(r"\*\*([A-Z0-9]{8})\*\*", offer["content"])
        assert match is not None and not llm.requests
        assert await daemon.pairing.approve(match.group(1)) is not None
        fake.user_sends(dm, stranger, "hello again")
        answer = (await sent_in(fake, dm, 2))[1]
    assert answer["content"] == "You said: hello again"
    assert [r.view.last_text for r in llm.requests] == ["hello again"]


async def test_guild_messages_are_answered_only_when_addressed(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    channel, owner = fake.channel["id"], fake.owner
    async with daemon_on(tmp_path, llm, fake):
        fake.user_sends(channel, owner, "just chatting with friends")
        asked = fake.user_sends(channel, owner, "what's up?", mentions_bot=True)
        [first] = await sent_in(fake, channel, 1)
        assert first["content"] == "You said: what's up?"
        assert str(first["message_reference"]["message_id"]) == asked["id"]
        fake.user_sends(channel, owner, "and more?", reply_to=first)
        second = (await sent_in(fake, channel, 2))[1]
    # A reply carries the message it answers (the autopilot echoes what the model read).
    quoted = "[replying to PinClaw's earlier message: «You said: what's up?»]\nand more?"
    assert second["content"] == f"You said: {quoted}"
    assert [r.view.last_text for r in llm.requests] == ["what's up?", quoted]
    system = llm.requests[0].view.system
    assert "#general in PinClaw Test Guild" in system


async def test_rate_limited_reply_is_retried_after_retry_after_and_delivered_once(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    async with daemon_on(tmp_path, llm, fake):
        fake.fail("POST", r"^/channels/\d+/messages$", 429, retry_after=0.3)
        dm = fake.dm_channel(fake.owner)["id"]
        fake.user_sends(dm, fake.owner, "ping")
        await sent_in(fake, dm, 1)
        second = await fake.await_call("POST", rf"^/channels/{dm}/messages$", count=2)
    first = fake.calls("POST", rf"^/channels/{dm}/messages$")[0]
    assert (first.status, second.status) == (429, 200)
    assert second.time - first.time >= 0.3
    assert [m["content"] for m in fake.sent(dm)] == ["You said: ping"]


async def test_message_missed_during_a_drop_is_replayed_on_resume_and_answered_once(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    async with daemon_on(tmp_path, llm, fake) as daemon:
        dm = fake.dm_channel(fake.owner)["id"]
        fake.user_sends(dm, fake.owner, "before")
        await sent_in(fake, dm, 1)
        fake.drop(hold=True)
        fake.user_sends(dm, fake.owner, "while you were away")
        fake.release()
        await fake.await_call("GATEWAY", "^RESUMED?$")
        await sent_in(fake, dm, 2)
        fake.user_sends(dm, fake.owner, "after")
        contents = [m["content"] for m in await sent_in(fake, dm, 3)]
        assert daemon.channels[CHANNEL].status.state == "connected"
    assert contents == ["You said: before", "You said: while you were away", "You said: after"]
    assert (fake.identifies, fake.resumes) == (1, 1)
    assert len(llm.requests) == 3


async def test_duplicate_dispatch_is_answered_once(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bot.daemon.router")
    async with daemon_on(tmp_path, llm, fake):
        dm = fake.dm_channel(fake.owner)["id"]
        once = fake.user_sends(dm, fake.owner, "only once")
        await sent_in(fake, dm, 1)
        fake.resend(once)
        fake.user_sends(dm, fake.owner, "next")
        contents = [m["content"] for m in await sent_in(fake, dm, 2)]
    # The copy was dispatched before "next", into the same ordered inbox: had it been
    # taken, its answer would have come before this one.
    assert contents == ["You said: only once", "You said: next"]
    assert len(llm.requests) == 2
    assert f"ignored a second delivery of message {once['id']}" in caplog.text


async def until(predicate: Callable[[], bool]) -> None:
    """Wait for in-process state that has no event of its own (polled every 20 ms)."""
    async with asyncio.timeout(20):
        while not predicate():  # noqa: ASYNC110 - a supervisor restart has no event to await
            await asyncio.sleep(0.02)


async def test_unreachable_network_at_start_is_retried_until_it_connects(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    fake.unreachable(True)
    async with running_daemon(tmp_path, llm, discord_table(fake)) as daemon:
        status = daemon.channels[CHANNEL].status
        await until(lambda: status.restarts >= 2)
        assert status.state == "reconnecting" and fake.refused >= 2
        fake.unreachable(False)
        assert await status.wait_connected(20)
        dm = fake.dm_channel(fake.owner)["id"]
        fake.user_sends(dm, fake.owner, "are you there?")
        [answer] = await sent_in(fake, dm, 1)
    assert answer["content"] == "You said: are you there?"


async def test_gateway_lost_before_the_first_session_restarts_the_client(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    # Login works, then the first gateway connection dies before HELLO: discord.py's
    # connect() crashes on it instead of retrying, so the channel must start over.
    fake.drop(hold=True)
    async with running_daemon(tmp_path, llm, discord_table(fake)) as daemon:
        await fake.await_call("GET", "^/gateway$")
        fake.drop()
        fake.release()
        status = daemon.channels[CHANNEL].status
        assert await status.wait_connected(20)
        assert status.restarts >= 1 and fake.identifies == 1
        dm = fake.dm_channel(fake.owner)["id"]
        fake.user_sends(dm, fake.owner, "hello after all")
        [answer] = await sent_in(fake, dm, 1)
    assert answer["content"] == "You said: hello after all"
    assert len(fake.calls("GET", "^/users/@me$")) >= 2, "logged in again with a fresh client"


async def command_answer(fake: FakeDiscord, invocation: JSON) -> JSON:
    """The response message of a slash command once it is no longer "thinking"."""

    def answered() -> bool:
        record = fake.world.interactions[invocation["token"]]
        if record.original_id is None:
            return False
        return not fake.world.messages[record.original_id]["flags"] & FLAG_LOADING

    await fake.await_until(answered)
    return fake.message(str(fake.interaction(invocation).original_id))


async def test_slash_commands_are_answered_and_registered_only_once(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    async with daemon_on(tmp_path, llm, fake):
        await fake.await_call("PUT", r"^/applications/\d+/commands$")
        assert [c["name"] for c in fake.commands()] == ["new", "stop", "status", "model", "help"]
        dm = fake.dm_channel(fake.owner)["id"]
        status = fake.user_runs_command("status", channel_id=dm, user=fake.owner)
        answer = await command_answer(fake, status)
        [callback] = fake.interaction(status).callbacks
        assert callback["type"] == 5 and callback["data"]["flags"] == FLAG_EPHEMERAL
        assert answer["flags"] & FLAG_EPHEMERAL
        assert "- discord: connected (as PinClaw)" in answer["content"]
    async with daemon_on(tmp_path, llm, fake):
        new = fake.user_runs_command("new", channel_id=fake.channel["id"], user=fake.owner)
        answer = await command_answer(fake, new)
        assert answer["content"] == "Started a fresh conversation."
        assert not answer["flags"] & FLAG_EPHEMERAL
    assert fake.command_syncs() == 1, "the second start found the same commands registered"
    assert not llm.requests


async def test_stranger_running_a_command_in_a_dm_gets_the_pairing_code(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    stranger = fake.add_user("mallory")
    async with daemon_on(tmp_path, llm, fake):
        await fake.await_call("PUT", r"^/applications/\d+/commands$")
        dm = fake.dm_channel(stranger)["id"]
        invocation = fake.user_runs_command("help", channel_id=dm, user=stranger)
        answer = await command_answer(fake, invocation)
    assert re.search(r"pairing code is \*\*[A-Z0-9]{8}\*\*", answer["content"])


async def test_message_unanswered_at_a_restart_is_answered_once_after_it(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    llm.queue(Stall(30))
    dm = fake.dm_channel(fake.owner)["id"]
    async with daemon_on(tmp_path, llm, fake):
        asked = fake.user_sends(dm, fake.owner, "remember this")
        await asyncio.to_thread(llm.wait_requests, 1)
    assert not fake.sent(dm), "the stalled turn was interrupted by the stop"
    async with daemon_on(tmp_path, llm, fake):
        await sent_in(fake, dm, 1)
        fake.user_sends(dm, fake.owner, "and this")
        contents = [m["content"] for m in await sent_in(fake, dm, 2)]
    assert contents == ["You said: remember this", "You said: and this"]
    assert str(posts(fake, dm)[0]["message_reference"]["message_id"]) == asked["id"]
    assert fake.identifies == 2


async def test_thread_is_its_own_session_under_its_channel(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    parent = fake.channel["id"]
    carol = fake.add_user("carol")
    async with daemon_on(tmp_path, llm, fake, allowed_groups=[parent]):
        thread = fake.add_thread("ideas")
        fake.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        fake.user_sends(thread["id"], carol, "an idea", mentions_bot=True)
        [in_thread] = await sent_in(fake, thread["id"], 1)
        fake.user_sends(parent, carol, "and here?", mentions_bot=True)
        [in_channel] = await sent_in(fake, parent, 1)
    assert (in_thread["content"], in_channel["content"]) == (
        "You said: an idea",
        "You said: and here?",
    )
    in_thread_request, in_channel_request = llm.requests
    assert "thread 'ideas' of #general in PinClaw Test Guild" in in_thread_request.view.system
    # Separate sessions: the channel's turn does not carry the thread's exchange.
    assert in_channel_request.view.message_count == in_thread_request.view.message_count


async def test_attachments_are_listed_and_fetched_within_the_size_cap(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    dm = fake.dm_channel(fake.owner)["id"]
    message = fake_message(dm, fake.owner, "see the file")
    message["attachments"] = [
        {
            "id": snowflake(),
            "filename": "gateway.json",
            "size": 64,
            "url": f"{fake.api_base}/gateway",
            "proxy_url": f"{fake.api_base}/gateway",
            "content_type": "application/json",
        }
    ]
    async with daemon_on(tmp_path, llm, fake) as daemon:
        fake.world.store_message(message)
        fake.dispatch("MESSAGE_CREATE", message)
        await sent_in(fake, dm, 1)
        stored = await stored_inbound(daemon, message["id"])
        [attachment] = stored.attachments
        assert (attachment.name, attachment.mime_type, attachment.size) == (
            "gateway.json",
            "application/json",
            64,
        )
        channel = daemon.channels[CHANNEL]
        assert json.loads(await channel.fetch(attachment))["url"] == f"{fake.ws_url}/gateway"
        huge = dataclasses.replace(attachment, size=MAX_ATTACHMENT_BYTES + 1)
        with pytest.raises(DeliveryError, match="too large"):
            await channel.fetch(huge)


async def stored_inbound(daemon: Daemon, message_id: str) -> InboundMessage:
    """The message as the core stored it."""
    async with daemon.app.db.conn.execute(
        "SELECT payload FROM inbound WHERE message_key = ?", (message_id,)
    ) as cursor:
        row = await cursor.fetchone()
    assert row is not None
    return InboundMessage.from_json(str(row[0]))


async def test_buttons_go_under_the_last_piece_and_presses_are_acknowledged(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    dm = fake.dm_channel(fake.owner)["id"]
    text = ("approve this? " * 100 + "\n\n") * 2
    buttons = (Button("Approve", "approve:42"), Button("Deny", "deny:42"))
    async with daemon_on(tmp_path, llm, fake) as daemon:
        await daemon.channels[CHANNEL].send(OutboundMessage(CHANNEL, dm, text, buttons=buttons))
        first, last = fake.sent(dm)
        assert not first["components"]
        row = last["components"][0]["components"]
        assert [(b["label"], b["custom_id"]) for b in row] == [
            ("Approve", "approve:42"),
            ("Deny", "deny:42"),
        ]
        press = fake.user_presses("approve:42", last, fake.owner)
        acknowledged = await fake.await_call("POST", rf"^/interactions/{press['id']}/")
        assert (acknowledged.status, acknowledged.json["type"]) == (200, 6)
    async with daemon_on(tmp_path, llm, fake):
        press = fake.user_presses("deny:42", last, fake.owner)
        acknowledged = await fake.await_call("POST", rf"^/interactions/{press['id']}/")
        assert acknowledged.status == 200, "a button sent before a restart still answers"


async def test_refusals_are_permanent_and_server_errors_are_retried(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    dm = fake.dm_channel(fake.owner)["id"]
    async with daemon_on(tmp_path, llm, fake) as daemon:
        channel = daemon.channels[CHANNEL]
        refusal = {"code": 50007, "message": "Cannot send messages to this user"}
        fake.fail("POST", rf"^/channels/{dm}/messages$", 403, body=refusal)
        with pytest.raises(DeliveryError, match="Cannot send messages to this user"):
            await channel.send(OutboundMessage(CHANNEL, dm, "hello?"))
        assert len(fake.calls("POST", rf"^/channels/{dm}/messages$")) == 1, "not retried"
        fake.fail("POST", rf"^/channels/{dm}/messages$", 503)
        await channel.send(OutboundMessage(CHANNEL, dm, "hello again"))
        statuses = [c.status for c in fake.calls("POST", rf"^/channels/{dm}/messages$")]
    assert statuses == [403, 503, 200]
    assert [m["content"] for m in fake.sent(dm)] == ["hello again"]
    nonces = [c.json["nonce"] for c in fake.calls("POST", rf"^/channels/{dm}/messages$")[1:]]
    assert nonces[0] == nonces[1], "a retried piece keeps its nonce, so Discord drops a copy"
