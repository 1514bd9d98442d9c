"""The router with the real agent (fake LLM over sockets) and an in-process channel.

Covers access and pairing, duplicate deliveries, commands, per-session order
and cross-session concurrency, /stop, collect mode, delivery failures, replay
after a restart and shutdown with an interrupted turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.config import LoadedConfig, parse_config
from bot.core.channel import ShuttingDown
from bot.core.messages import Attachment, InboundMessage
from bot.daemon.access import AccessControl
from bot.daemon.app import App, open_app
from bot.daemon.router import Router
from bot.store.inbound import InboundStore
from bot.store.pairing import PairingStore
from tests.fake_channel import FakeChannel
from tests.fake_llm import Fail, FakeLLM, Say, Stall

RouterFactory = Callable[..., Router]


def loaded_config(llm: FakeLLM, tmp_path: Path, **daemon: Any) -> LoadedConfig:
    raw = {
        "provider": {
            "kind": "openai",
            "model": "m",
            "base_url": f"{llm.url}/v1",
            "max_retries": 0,
        },
        "daemon": {"shutdown_grace_s": 0.2, "merge_window_ms": 0, **daemon},  # no merging
        "channels": {
            "telegram": {
                "token": "t",
                "allowed_users": ["ana"],
                "allowed_groups": ["family"],
                "keywords": ["claw"],
            }
        },
    }
    return LoadedConfig(parse_config(raw, {}), tmp_path / "config.toml", tmp_path / "state")


@pytest.fixture
async def core(llm: FakeLLM, tmp_path: Path) -> AsyncIterator[tuple[App, LoadedConfig]]:
    loaded = loaded_config(llm, tmp_path)
    async with open_app(loaded) as app:
        yield app, loaded


@pytest.fixture
async def make_router(
    core: tuple[App, LoadedConfig],
) -> AsyncIterator[Callable[..., Any]]:
    app, loaded = core
    made: list[Router] = []

    async def make(
        channel: FakeChannel, **daemon: Any
    ) -> tuple[Router, InboundStore, PairingStore]:
        inbound, pairing = InboundStore(app.db), PairingStore(app.db)
        await inbound.setup()
        await pairing.setup()
        settings = loaded.config.daemon.model_copy(update=daemon)
        channel_settings = {channel.name: loaded.config.channels["telegram"]}
        router = Router(
            agent=app.agent,
            channels={channel.name: channel},
            inbound=inbound,
            settings=settings,
            access=AccessControl(channel_settings, pairing),  # type: ignore[arg-type]
            pairing=pairing,
            model_label="openai:m",
        )
        made.append(router)
        return router, inbound, pairing

    yield make
    for router in made:
        await router.shutdown(0)


_ids = iter(range(1, 10_000))


def dm(text: str, sender: str = "ana", **extra: Any) -> InboundMessage:
    fields: dict[str, Any] = {
        "channel": "test",
        "chat_id": f"dm-{sender}",
        "sender_id": sender,
        "sender_name": sender.capitalize(),
        "text": text,
        "message_id": str(next(_ids)),
    }
    fields.update(extra)
    return InboundMessage(**fields)


def group(text: str, sender: str = "bob", chat: str = "family", **extra: Any) -> InboundMessage:
    return dm(text, sender, chat_id=chat, is_direct=False, **extra)


async def test_an_allowed_message_is_answered_with_typing(make_router: Any, llm: FakeLLM) -> None:
    channel = FakeChannel()
    router, inbound, _ = await make_router(channel)
    llm.queue(Say("Hello Ana"))
    message = dm("hi")
    assert await router.put(message) is True
    await channel.wait_sent(1)
    await router.drain()
    assert channel.texts() == ["Hello Ana"]
    assert channel.sent[0].reply_to == message.message_id
    assert (channel.typing_entered, channel.typing_exited) == (1, 1)
    assert await inbound.pending() == []


async def test_a_second_delivery_of_the_same_message_is_answered_once(
    make_router: Any, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    channel = FakeChannel()
    router, _, _ = await make_router(channel)
    message = dm("hello")
    assert await router.put(message) is True
    with caplog.at_level(logging.INFO):
        assert await router.put(message) is False
    await router.drain()
    assert len(channel.sent) == 1
    assert len(llm.requests) == 1
    assert "ignored a second delivery" in caplog.text


async def test_a_stranger_gets_one_pairing_code_and_is_admitted_after_approval(
    make_router: Any, llm: FakeLLM
) -> None:
    channel = FakeChannel()
    router, _, pairing = await make_router(channel)
    await router.put(dm("hello?", sender="eve"))
    await router.put(dm("anyone?", sender="eve"))
    await router.drain()
    assert len(channel.sent) == 1
    text = channel.sent[0].text
    code = text.split("**")[1]
    assert len(code) == 8
    assert f"pinclaw pairing approve {code}" in text
    assert llm.requests == []
    assert await pairing.approve(code) is not None
    await router.put(dm("now?", sender="eve"))
    await router.drain()
    assert channel.texts()[-1] == "You said: now?"


async def test_groups_need_an_address_unless_listed(
    make_router: Any, caplog: pytest.LogCaptureFixture
) -> None:
    channel = FakeChannel()
    router, _, _ = await make_router(channel)
    with caplog.at_level(logging.INFO):
        await router.put(group("just chatting"))
        await router.put(group("hi", sender="mallory", chat="strangers", mentioned=True))
    await router.put(group("hey bot", mentioned=True))
    await router.put(group("is the claw awake?"))
    await router.put(group("answering you", reply_to_bot=True))
    await router.drain()
    assert channel.texts() == [
        "You said: hey bot",
        "You said: is the claw awake?",
        "You said: answering you",
    ]
    assert "not addressed to the bot in group family" in caplog.text
    assert "sender mallory is not allowed in group strangers" in caplog.text


async def test_commands(make_router: Any, llm: FakeLLM) -> None:
    channel = FakeChannel()
    router, _, _ = await make_router(channel)
    await router.put(dm("remember me"))
    await router.drain()
    for command in ("/help", "/status", "/new", "/stop"):
        await router.put(dm(command))
        await router.drain()
    await router.put(dm("who am I?"))
    await router.drain()
    help_text, status, new, stop = channel.texts()[1:5]
    assert "/stop - Stop the answer in progress" in help_text
    assert "Model: openai:m" in status
    assert "- test: starting; last message 0s ago" in status
    assert new == "Started a fresh conversation."
    assert stop == "Nothing to stop."
    assert llm.requests[-1].view.message_count == 1  # the fresh session forgot "remember me"


async def test_one_session_in_order_and_sessions_concurrently(
    make_router: Any, llm: FakeLLM
) -> None:
    channel = FakeChannel()
    router, _, _ = await make_router(channel)
    # The other chat's answer comes well before the first one's: it was not kept waiting.
    llm.queue(Stall(1.0, Say("first")), Stall(0.1, Say("other chat")), Say("second"))
    await router.put(dm("one"))
    await router.put(dm("two"))
    await router.put(dm("elsewhere", chat_id="another-chat"))
    await asyncio.to_thread(llm.wait_requests, 2)
    assert [r.view.last_text for r in llm.requests] == ["one", "elsewhere"]
    await router.drain()
    assert channel.texts() == ["other chat", "first", "second"]
    assert [r.view.last_text for r in llm.requests][2] == "two"


async def test_stop_cancels_the_running_turn_and_drops_the_queue(
    make_router: Any, llm: FakeLLM
) -> None:
    channel = FakeChannel()
    router, inbound, _ = await make_router(channel)
    llm.queue(Stall(30, Say("never")))
    await router.put(dm("long job"))
    await router.put(dm("queued behind it"))
    await asyncio.to_thread(llm.wait_requests, 1)
    await router.put(dm("/stop"))
    await router.drain()
    assert channel.texts() == ["Stopped."]
    assert await inbound.pending() == []
    async with inbound._db.conn.execute("SELECT status FROM inbound ORDER BY id") as cursor:
        assert [r[0] for r in await cursor.fetchall()] == ["stopped", "stopped", "answered"]


async def test_collect_mode_answers_waiting_messages_together(
    make_router: Any, llm: FakeLLM
) -> None:
    channel = FakeChannel()
    router, _, _ = await make_router(channel, busy_mode="collect")
    llm.queue(Stall(0.3, Say("first")))
    await router.put(dm("one"))
    await asyncio.to_thread(llm.wait_requests, 1)
    await router.put(dm("two"))
    await router.put(dm("three"))
    await router.drain()
    assert channel.texts() == ["first", "You said: two\n\nthree"]


async def test_provider_failure_and_delivery_failure(
    make_router: Any, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    channel = FakeChannel()
    router, inbound, _ = await make_router(channel)
    llm.queue(Fail(500, "GPU on fire"))
    await router.put(dm("hi"))
    await router.drain()
    assert channel.texts() == [
        "Sorry, I could not answer: openai:m failed with a server error (HTTP 500): GPU on fire"
    ]
    channel.fail_sends = 1
    with caplog.at_level(logging.ERROR):
        await router.put(dm("again"))
        await router.drain()
    assert "was not delivered: could not send a reply: the fake refused it" in caplog.text
    async with inbound._db.conn.execute("SELECT status FROM inbound ORDER BY id") as cursor:
        assert [r[0] for r in await cursor.fetchall()] == ["answered", "failed"]


async def test_replay_answers_pending_messages_and_skips_old_ones(
    make_router: Any, caplog: pytest.LogCaptureFixture
) -> None:
    channel = FakeChannel()
    router, inbound, _ = await make_router(channel)
    await inbound.record(dm("left over"))
    await inbound.record(dm("ancient", received_at=time.time() - 7200))
    channel.status.connected("")
    with caplog.at_level(logging.WARNING):
        await router.replay()
    await router.drain()
    assert channel.texts() == ["You said: left over"]
    assert "it is 7200 s old" in caplog.text
    assert await inbound.pending() == []


async def test_shutdown_interrupts_a_turn_that_is_answered_once_after_restart(
    make_router: Any, llm: FakeLLM, core: tuple[App, LoadedConfig]
) -> None:
    channel = FakeChannel()
    router, inbound, _ = await make_router(channel)
    llm.queue(Stall(30, Say("too late")))
    await router.put(dm("slow question"))
    await asyncio.to_thread(llm.wait_requests, 1)
    await router.shutdown(0.1)
    with pytest.raises(ShuttingDown):
        await router.put(dm("after the stop"))
    assert channel.sent == []
    assert len(await inbound.pending()) == 1

    restarted, _, _ = await make_router(channel)
    channel.status.connected("")
    llm.queue(Say("answer after restart"))
    await restarted.replay()
    await restarted.drain()
    assert channel.texts() == ["answer after restart"]
    messages = llm.requests[-1].body["messages"]
    assert [m["content"] for m in messages if m["role"] == "user"] == ["slow question"]
    app, _ = core
    async with app.db.conn.execute("SELECT status FROM turns ORDER BY id") as cursor:
        assert [r[0] for r in await cursor.fetchall()] == ["interrupted", "done"]


async def test_the_model_hears_about_attachments(make_router: Any, llm: FakeLLM) -> None:
    channel = FakeChannel()
    router, _, _ = await make_router(channel)
    photo = Attachment("porch.jpg", "image/jpeg", 204_800, "file-1")
    await router.put(dm("is the light on?", attachments=(photo,)))
    await router.drain()
    assert llm.requests[0].view.last_text == (
        "is the light on?\n[attached: porch.jpg (image/jpeg, 200 KB)]"
    )


async def test_a_message_delivered_long_after_it_was_sent_is_not_answered(
    make_router: Any, llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    channel = FakeChannel()
    router, _, _ = await make_router(channel)
    with caplog.at_level(logging.WARNING):
        await router.put(dm("from yesterday", sent_at=time.time() - 86_400))
    await router.put(dm("from just now", sent_at=time.time() - 5))
    await router.drain()
    assert channel.texts() == ["You said: from just now"]
    assert "it was sent 86400 s ago (max_message_age_s)" in caplog.text


async def test_a_lone_surrogate_is_replaced_and_the_message_answered(
    make_router: Any, llm: FakeLLM
) -> None:
    channel = FakeChannel()
    router, inbound, _ = await make_router(channel)
    llm.queue(Say("Got it"))
    assert await router.put(dm("half an emoji: \ud83d and more", sender_name="An\udc00a"))
    await channel.wait_sent(1)
    await router.drain()
    assert channel.texts() == ["Got it"]
    [request] = llm.requests
    said = request.body["messages"][-1]["content"]
    assert "half an emoji: \ufffd and more" in said
    assert await inbound.pending() == []


async def test_a_message_over_the_size_limit_gets_a_note_and_never_reaches_the_model(
    make_router: Any, llm: FakeLLM
) -> None:
    channel = FakeChannel()
    router, inbound, _ = await make_router(channel, max_message_bytes=1024)
    assert await router.put(dm("é" * 600))  # 1,200 bytes of UTF-8
    await channel.wait_sent(1)
    await router.drain()
    assert channel.texts() == [
        "That message is too long for me: 1.2 KiB, and I read at most 1.0 KiB at once. "
        "Please send a shorter one, or split it up."
    ]
    assert llm.requests == []
    assert await inbound.pending() == []
    llm.queue(Say("Short is fine"))
    assert await router.put(dm("é" * 500))
    await channel.wait_sent(2)
    assert channel.texts()[1] == "Short is fine"
