"""The Telegram channel end to end: the real daemon and PTB against the fake Telegram.

Every test runs ``pinclaw``'s own ``Daemon`` (in-process, or ``pinclaw run`` as a
subprocess) with the fake LLM as its model and the fake Telegram server as the
Bot API, so polling, webhooks, rendering, splitting, pacing and retries all go
over real sockets through the real client library.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import sqlite3
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.core.channel import Channel, DeliveryError
from bot.core.chat_commands import CHAT_COMMANDS
from bot.core.messages import Attachment, Button, InboundMessage, OutboundMessage
from bot.daemon.main import Daemon
from channels.telegram.channel import TYPING_AFTER_S, TelegramChannel
from channels.telegram.webhook import SECRET_HEADER
from tests.channel_tables import telegram_table
from tests.daemon_harness import PINCLAW, DaemonProcess, running_daemon, telegram_run_config
from tests.fake_llm import FakeLLM, Say, Stall
from tests.fake_telegram import Call, FakeTelegram, make_chat, parse_html, utf16_len

OWNER = 7001
GROUP = -1001234567
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
STRANGER = FakeTelegram.user(7002, "Eve", "eve")
ADA_MESSAGE: dict[str, Any] = {"message_id": 1, "from": ADA, "chat": make_chat(OWNER), "date": 0}


def _is_a_channel(channel: TelegramChannel) -> Channel:
    return channel  # mypy checks that the adapter satisfies the port


def channel_table(telegram: FakeTelegram, **extra: Any) -> dict[str, Any]:
    """A ``[channels.telegram]`` table pointing at the fake, with Ada as the owner."""
    return telegram_table(telegram, **extra)


@asynccontextmanager
async def daemon_with(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    daemon_settings: dict[str, Any] | None = None,
    **extra: Any,
) -> AsyncIterator[Daemon]:
    """The real daemon with the Telegram channel (``extra`` keys), once it is connected."""
    channels = {"telegram": channel_table(telegram, **extra)}
    async with running_daemon(tmp_path, llm, channels, **(daemon_settings or {})) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def sent_in(telegram: FakeTelegram, chat: int, count: int) -> Any:
    """A condition for ``await_until``: the bot's messages in ``chat`` once there are ``count``."""
    return lambda: messages if len(messages := telegram.sent(chat)) >= count else None


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stored_rows(path: Path, update: dict[str, Any]) -> int:
    """How many inbound rows the daemon's database holds for ``update``'s message."""
    message = update["message"]
    key = f"{message['chat']['id']}:{message['message_id']}"
    with contextlib.closing(sqlite3.connect(path)) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM inbound WHERE message_key = ?", (key,)
        ).fetchone()
    return int(count)


async def stored_message(daemon: Daemon, update: dict[str, Any]) -> InboundMessage:
    """The inbound message the daemon stored for ``update``."""
    message = update["message"]
    key = f"{message['chat']['id']}:{message['message_id']}"
    async with daemon.app.db.conn.execute(
        "SELECT payload FROM inbound WHERE message_key = ?", (key,)
    ) as cursor:
        row = await cursor.fetchone()
    assert row is not None, f"message {key} was not stored"
    return InboundMessage.from_json(str(row[0]))


def handed_out(update: dict[str, Any]) -> Any:
    """A predicate on getUpdates calls: the answer carried ``update``."""

    def check(call: Call) -> bool:
        result = call.result or []
        return any(u["update_id"] == update["update_id"] for u in result)

    return check


# -- direct messages -----------------------------------------------------------------------


async def test_a_direct_message_gets_typing_and_a_reply(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # A model slower than TYPING_AFTER_S: "typing…" shows while it writes.
    llm.queue(Stall(TYPING_AFTER_S + 0.5, Say("Hello **Ada** & <friends>")))
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        assert daemon.channels["telegram"].status.detail == "as @pinclaw_bot"
        update = telegram.user_sends(OWNER, ADA, "hi there")
        action = await telegram.await_call("sendChatAction")
        call = await telegram.await_call("sendMessage")
    assert (action.params["chat_id"], action.params["action"]) == (OWNER, "typing")
    assert action.at <= call.at
    (sent,) = telegram.sent(OWNER)
    assert (sent.text, sent.parse_mode) == ("Hello Ada & <friends>", "HTML")
    assert sent.entities == [{"type": "bold", "offset": 6, "length": 3}]
    assert sent.reply_to == update["message"]["message_id"]
    assert llm.requests[-1].view.last_text == "hi there"
    assert "/bot<token>/getMe" in caplog.text
    ours = [r for r in caplog.records if r.name != "aiohttp.access"]  # the fake's own log
    assert not [r for r in ours if telegram.token in r.getMessage()]


async def test_a_quick_reply_comes_without_typing_first(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(OWNER, ADA, "hi there")
        await telegram.await_call("sendMessage")
        await daemon.router.drain()
    assert telegram.chat_actions(OWNER) == []  # answered well within TYPING_AFTER_S


async def test_an_update_is_confirmed_to_telegram_only_once_it_is_stored(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        path = daemon.app.db.path
        await telegram.await_until(lambda: telegram.parked_polls or None)
        # Another writer holds the database, so the daemon's INSERT has to wait.
        lock = sqlite3.connect(path, isolation_level=None)
        try:
            lock.execute("BEGIN IMMEDIATE")
            update = telegram.user_sends(OWNER, ADA, "remember this")
            await telegram.await_call("getUpdates", handed_out(update))
            with pytest.raises(TimeoutError):  # fetched, not storable: Telegram must keep it
                await telegram.await_confirmed(update, timeout=1.0)
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        await telegram.await_confirmed(update)
        assert stored_rows(path, update) == 1
        await telegram.await_until(sent_in(telegram, OWNER, 1))


@pytest.mark.parametrize("mode", ["polling", "webhook"])
async def test_an_update_refused_while_stopping_is_answered_after_the_restart(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, mode: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    settings: dict[str, Any] = {"mode": mode, "webhook_url": url, "webhook_port": port}
    llm.queue(Stall(2.0, Say("first answer")))
    grace = {"shutdown_grace_s": 10.0}  # the running turn may finish while stopping
    async with daemon_with(tmp_path, llm, telegram, grace, **settings) as daemon:
        telegram.user_sends(OWNER, ADA, "first")
        await asyncio.to_thread(llm.wait_requests, 1)  # a turn is running: the model stalls
        stopping = asyncio.create_task(daemon.stop())
        await asyncio.sleep(0)  # the router refuses new messages from here on
        second = telegram.user_sends(OWNER, ADA, "second")
        if mode == "polling":
            await telegram.await_call("getUpdates", handed_out(second))
        else:
            await telegram.await_until(
                lambda: [d for d in telegram.webhook_deliveries() if d.status == 500] or None
            )
        await stopping
        assert [m.text for m in telegram.sent(OWNER)] == ["first answer"]
        assert [u["update_id"] for u in telegram.pending_updates()] == [second["update_id"]]
    async with daemon_with(tmp_path, llm, telegram, **settings):
        await telegram.await_until(sent_in(telegram, OWNER, 2))
    assert [m.text for m in telegram.sent(OWNER)] == ["first answer", "You said: second"]
    assert telegram.pending_updates() == []


async def test_a_long_reply_arrives_whole_in_pieces_within_the_limit(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    prose = [f"Point m{n:03d}: a < b && c > d, said **Ada** & co." for n in range(120)]
    code = [f"x{n:03d} = a < b && c  # m{n + 120:03d} <tag> & more" for n in range(180)]
    text = "\n\n".join(prose[:60]) + "\n\n```python\n" + "\n".join(code) + "\n```\n\n"
    text += "\n".join(f"- {line}" for line in prose[60:])
    assert len(text) > 12_000
    llm.queue(Say(text))
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        update = telegram.user_sends(OWNER, ADA, "tell me everything")
        await telegram.await_until(sent_in(telegram, OWNER, 1))
        await daemon.router.drain()  # the whole reply is out
    pieces = telegram.sent(OWNER)
    visible = [p.text for p in pieces]
    assert len(pieces) == 4  # measured as Telegram counts: by the text shown...
    assert max(utf16_len(p.raw_text) for p in pieces) > 4096  # ...not by the escaped HTML
    for piece in pieces:
        assert piece.parse_mode == "HTML"
        assert utf16_len(piece.text) <= 4096
        assert piece.raw_text.count("<pre>") == piece.raw_text.count("</pre>")
        assert parse_html(piece.raw_text).text == piece.text
    joined = "\n".join(visible)
    for n in range(300):
        assert joined.count(f"m{n:03d}") == 1, f"marker m{n:03d} lost or doubled"
    assert joined.index("m000") < joined.index("m150") < joined.index("m299")
    assert "a < b && c > d" in joined and "<tag>" in joined
    code_pieces = [p for p in pieces if "x000" in p.text or "x179" in p.text]
    assert all(any(e["type"] == "pre" for e in p.entities) for p in code_pieces)
    assert [p.reply_to for p in pieces][:2] == [update["message"]["message_id"], None]


async def test_refused_markup_is_resent_as_plain_text_for_that_piece_only(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    first = "Hello **Ada**, compare `x<y`."
    second = "\n\n".join(f"Line {n} with *style*." for n in range(250))
    llm.queue(Say(f"{first}\n\n{second}"), Say("```\n```"))
    telegram.fail(
        "sendMessage", 400, 'Bad Request: can\'t parse entities: unsupported start tag "y"'
    )
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        update = telegram.user_sends(OWNER, ADA, "format something")
        await telegram.await_until(sent_in(telegram, OWNER, 2))
        await daemon.router.drain()
        # An HTML edge case Telegram refuses by itself: an empty code block is empty text.
        telegram.user_sends(OWNER, ADA, "an empty block please")
        await telegram.await_until(sent_in(telegram, OWNER, 3))
    refused, *_ = telegram.calls("sendMessage")
    assert refused.params["parse_mode"] == "HTML" and not refused.ok
    plain, *html, empty_block = telegram.sent(OWNER)
    assert plain.parse_mode is None and plain.text.startswith(f"{first}\n\nLine 0 with *style*.")
    assert plain.reply_to == update["message"]["message_id"]  # still the reply
    assert html and all(piece.parse_mode == "HTML" for piece in html)
    shown = "\n\n".join([plain.text, *(p.text.replace(" style.", " *style*.") for p in html)])
    assert shown == f"{first}\n\n{second}"  # every line, once, in order
    assert (empty_block.parse_mode, empty_block.text) == (None, "```\n```")


async def test_a_stranger_gets_a_pairing_code_and_after_approval_an_answer(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    stranger = STRANGER["id"]
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(stranger, STRANGER, "hello?")
        (offer,) = await telegram.await_until(sent_in(telegram, stranger, 1))
        match = re.search(r"pairing code is ([A-Z0-9]{8})", offer.text)
        assert match is not None and llm.requests == []
        assert await daemon.pairing.approve(match.group(1)) is not None
        telegram.user_sends(stranger, STRANGER, "now?")
        _, answer = await telegram.await_until(sent_in(telegram, stranger, 2))
    assert answer.text == "You said: now?"
    assert {"type": "bold", "offset": offer.text.index(match.group(1)), "length": 8} in (
        offer.entities
    )


async def test_in_a_group_only_messages_addressed_to_the_bot_are_answered(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        telegram.user_sends(GROUP, ADA, "just chatting among people")
        telegram.user_sends(GROUP, ADA, "/new@some_other_bot")
        mention = telegram.user_sends(GROUP, ADA, "@pinclaw_bot what is up?")
        (first,) = await telegram.await_until(sent_in(telegram, GROUP, 1))
        assert first.reply_to == mention["message"]["message_id"]
        assert llm.requests[-1].view.last_text.endswith("what is up?")
        assert "@pinclaw_bot" not in llm.requests[-1].view.last_text
        reply = telegram.user_sends(GROUP, ADA, "and then?", reply_to=first)
        _, second = await telegram.await_until(sent_in(telegram, GROUP, 2))
        assert second.reply_to == reply["message"]["message_id"]
        await daemon.router.drain()
    assert len(telegram.sent(GROUP)) == 2 and len(llm.requests) == 2
    one, two = telegram.calls("sendMessage")
    # At most 20 messages a minute in a group: the sends are 3 s apart. Arrivals may be
    # a little closer: the first request also opened the connection (no "typing…"
    # before a quick reply warms it up), the second reused it.
    assert two.at - one.at >= 2.9


async def test_with_pacing_off_replies_go_out_at_once_even_in_a_group(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    words = [f"word{n:04d}" for n in range(1500)]  # four messages' worth in one reply
    llm.queue(Say(" ".join(words)), Say("second"))
    async with daemon_with(tmp_path, llm, telegram, pacing=False) as daemon:
        telegram.user_sends(GROUP, ADA, "@pinclaw_bot say a lot")
        telegram.user_sends(GROUP, ADA, "@pinclaw_bot and then?")
        await telegram.await_until(sent_in(telegram, GROUP, 5))
        await daemon.router.drain()
    sends = telegram.calls("sendMessage")
    assert [s.text for s in telegram.sent(GROUP)][-1] == "second"
    assert " ".join(s.text for s in telegram.sent(GROUP)[:-1]).split() == words
    # Paced, five messages in a group take at least 4 x 3 s; unpaced, one quick turn each.
    assert len(sends) == 5 and sends[-1].at - sends[0].at < 3.0


async def test_a_forum_topic_is_its_own_conversation_and_gets_replies_in_the_topic(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(Stall(TYPING_AFTER_S + 0.5))  # slow enough for "typing…" in the topic
    async with daemon_with(tmp_path, llm, telegram):
        telegram.user_sends(GROUP, ADA, "@pinclaw_bot hello from the topic", thread_id=5)
        (sent,) = await telegram.await_until(sent_in(telegram, GROUP, 1))
    assert sent.thread_id == 5
    assert [a.thread_id for a in telegram.chat_actions(GROUP)][:1] == [5]


async def test_flood_control_is_waited_out_and_the_reply_sent_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "true")  # retry_after as a timedelta (PTB's future)
    telegram.fail("sendMessage", 429, retry_after=1)
    async with daemon_with(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "hello")
        (sent,) = await telegram.await_until(sent_in(telegram, OWNER, 1))
    limited, delivered = telegram.calls("sendMessage")
    assert limited.answer is not None and limited.answer["error_code"] == 429
    assert delivered.at - limited.at >= 1.0
    assert sent.text == "Hello! How can I help?"


async def test_dropped_polls_are_retried_without_a_restart(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        await telegram.await_until(lambda: telegram.parked_polls or None)
        assert telegram.drop_polls() == 1
        telegram.user_sends(OWNER, ADA, "still there?")
        await telegram.await_until(sent_in(telegram, OWNER, 1))
        assert daemon.channels["telegram"].status.restarts == 0
    assert any(call.dropped for call in telegram.calls("getUpdates"))


async def test_a_stalled_poll_is_detected_and_the_channel_restarts(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        status = daemon.channels["telegram"].status
        await telegram.await_until(lambda: telegram.parked_polls or None)
        telegram.stall_polls(True)
        await telegram.await_call("getMe")  # the first start's
        await telegram.await_call("getMe", timeout=60)  # a restart, after the stall
        assert status.restarts == 1 and status.state == "reconnecting"
        assert "PollStalled: a long poll got no answer" in status.detail
        telegram.stall_polls(False)
        assert await status.wait_connected(30)
        telegram.user_sends(OWNER, ADA, "/status")
        (sent,) = await telegram.await_until(sent_in(telegram, OWNER, 1))
    assert "telegram: connected (as @pinclaw_bot)" in sent.text
    assert len(telegram.calls("getMe")) >= 2  # started again from scratch


async def test_a_redelivered_update_is_answered_once(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram):
        update = telegram.user_sends(OWNER, ADA, "once")
        await telegram.await_until(sent_in(telegram, OWNER, 1))
        telegram.redeliver(update)
        await telegram.await_until(
            lambda: (
                len([c for c in telegram.calls("getUpdates") if handed_out(update)(c)]) >= 2 or None
            )
        )
        telegram.user_sends(OWNER, ADA, "twice")
        await telegram.await_until(sent_in(telegram, OWNER, 2))
    assert [m.text for m in telegram.sent(OWNER)] == ["You said: once", "You said: twice"]
    assert len(llm.requests) == 2


async def test_commands_are_registered_once_and_not_on_the_next_start(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram):
        pass
    assert telegram.commands() == [
        {"command": c.name, "description": c.description} for c in CHAT_COMMANDS
    ]
    async with daemon_with(tmp_path, llm, telegram):
        pass
    assert telegram.set_commands_count == 1
    assert len(telegram.calls("getMyCommands")) == 2


async def test_webhook_mode_answers_posted_updates_and_refuses_a_wrong_secret(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/telegram/hook"
    settings: dict[str, Any] = {"mode": "webhook", "webhook_url": url, "webhook_port": port}
    async with daemon_with(tmp_path, llm, telegram, **settings) as daemon:
        assert daemon.channels["telegram"].status.detail == "as @pinclaw_bot (webhook)"
        secret = telegram.webhook_secret
        assert telegram.webhook_url == url and secret is not None and len(secret) >= 32
        forged = {"update_id": 1, "message": {**ADA_MESSAGE, "text": "forged"}}
        async with httpx.AsyncClient() as client:
            wrong = await client.post(url, json=forged, headers={SECRET_HEADER: "guess"})
            missing = await client.post(url, json=forged)
        assert (wrong.status_code, missing.status_code) == (403, 403)
        telegram.user_sends(OWNER, ADA, "pushed to me")
        (sent,) = await telegram.await_until(sent_in(telegram, OWNER, 1))
        assert sent.text == "You said: pushed to me"
    assert [d.status for d in telegram.webhook_deliveries()] == [200]
    assert telegram.calls("getUpdates") == [] and len(llm.requests) == 1
    async with daemon_with(tmp_path, llm, telegram, **settings):
        assert telegram.webhook_secret == secret  # generated once, kept in the state


async def test_attachments_are_described_and_fetched(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        channel = daemon.channels["telegram"]
        update = telegram.user_sends(
            OWNER,
            ADA,
            "read this",
            document=b"%PDF-1.7 hi",
            file_name="r.pdf",
            mime_type="application/pdf",
        )
        photo = telegram.user_sends(OWNER, ADA, "", photo=b"\xff\xd8jpeg")
        await telegram.await_until(sent_in(telegram, OWNER, 2))
        document_message = await stored_message(daemon, update)
        (document,) = document_message.attachments
        assert (document.name, document.mime_type, document.size) == (
            "r.pdf",
            "application/pdf",
            11,
        )
        assert document_message.text == "read this"
        assert await channel.fetch(document) == b"%PDF-1.7 hi"
        (picture,) = (await stored_message(daemon, photo)).attachments
        assert (picture.name, picture.mime_type) == ("photo.jpg", "image/jpeg")
        assert await channel.fetch(picture) == b"\xff\xd8jpeg"
        huge = telegram.add_file(b"", file_size=20 * 1024 * 1024 + 1)
        with pytest.raises(DeliveryError, match="too big"):
            await channel.fetch(Attachment("huge.bin", "application/octet-stream", 0, huge.file_id))
        calls = len(telegram.calls())
        with pytest.raises(DeliveryError, match="up to 20 MB"):
            await channel.fetch(Attachment("big.iso", "application/octet-stream", 21 << 20, "x"))
        assert len(telegram.calls()) == calls  # refused without asking Telegram


async def test_a_network_that_comes_up_late_and_a_wrong_token_are_survived(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    telegram.unreachable(True)  # a Pi that booted before its network
    channels = {"telegram": channel_table(telegram)}
    async with running_daemon(tmp_path, llm, channels) as daemon:
        status = daemon.channels["telegram"].status
        await telegram.await_until(lambda: len(telegram.calls("getMe")) >= 1 or None)
        assert not await status.wait_connected(0.5)
        telegram.unreachable(False)
        assert await status.wait_connected(30) and status.restarts >= 1
        telegram.user_sends(OWNER, ADA, "finally")
        await telegram.await_until(sent_in(telegram, OWNER, 1))
    wrong = {"telegram": channel_table(telegram, token="999:WRONG")}
    async with running_daemon(tmp_path / "wrong", llm, wrong) as daemon:
        status = daemon.channels["telegram"].status
        refused = await telegram.await_until(
            lambda: [c for c in telegram.calls("getMe") if c.answer and not c.ok][1:] or None
        )  # refused twice: it was started again after the first refusal
        assert refused[0].answer == {"ok": False, "error_code": 401, "description": "Unauthorized"}
        assert status.state == "reconnecting" and status.detail.startswith("InvalidToken")
        assert "999:WRONG" not in status.detail


async def test_buttons_and_permanent_errors_of_direct_sends(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    buttons = (Button("Approve", "approve:1"), Button("Deny", "deny:1"))
    async with daemon_with(tmp_path, llm, telegram) as daemon:
        channel = daemon.channels["telegram"]
        long = "\n\n".join(f"Paragraph {n}." for n in range(400))
        await channel.send(OutboundMessage("telegram", str(OWNER), long, buttons=buttons))
        *rest, last = telegram.sent(OWNER)
        assert rest and all(m.buttons == [] for m in rest)
        assert last.buttons == [
            {"text": "Approve", "callback_data": "approve:1"},
            {"text": "Deny", "callback_data": "deny:1"},
        ]
        sent_before = len(telegram.calls("sendMessage"))
        too_long = (Button("Go", "x" * 65),)
        with pytest.raises(DeliveryError, match="64 bytes"):
            await channel.send(OutboundMessage("telegram", str(OWNER), "hi", buttons=too_long))
        telegram.fail("sendMessage", 403, "Forbidden: bot was blocked by the user")
        with pytest.raises(DeliveryError, match="blocked by the user"):
            await channel.send(OutboundMessage("telegram", str(OWNER), "hi"))
        telegram.fail("sendMessage", 400, "Bad Request: chat not found")
        with pytest.raises(DeliveryError, match=r"(?i)chat not found"):
            await channel.send(OutboundMessage("telegram", "424242", "hi"))
        assert len(telegram.calls("sendMessage")) == sent_before + 2  # no retries


# -- pinclaw run ------------------------------------------------------------------------------


def test_pinclaw_run_answers_exactly_once_across_a_kill(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    home, config = tmp_path / "home", telegram_run_config(llm, telegram, OWNER)
    llm.queue(Stall(2.0, Say("never delivered")), Say("Here is your answer."))
    first = DaemonProcess(home, config).start()
    try:
        first.wait_log("telegram connected as @pinclaw_bot")
        update = telegram.user_sends(OWNER, ADA, "what is the answer?")
        llm.wait_requests(1, timeout=30)  # the turn is running, the model stalls
        telegram.wait_confirmed(update)  # Telegram has forgotten it: only our store has it
    finally:
        first.kill()
    assert telegram.sent(OWNER) == []
    second = DaemonProcess(home, config).start()
    try:
        second.wait_log("telegram connected as @pinclaw_bot")
        telegram.wait_until(sent_in(telegram, OWNER, 1), timeout=30)
        telegram.user_sends(OWNER, ADA, "ping")
        telegram.wait_until(sent_in(telegram, OWNER, 2), timeout=30)
        assert [m.text for m in telegram.sent(OWNER)] == ["Here is your answer.", "You said: ping"]
        assert telegram.sent(OWNER)[0].reply_to == update["message"]["message_id"]

        stranger = STRANGER["id"]
        telegram.user_sends(stranger, STRANGER, "let me in")
        (offer,) = telegram.wait_until(sent_in(telegram, stranger, 1), timeout=30)
        match = re.search(r"pairing code is ([A-Z0-9]{8})", offer.text)
        assert match is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("PINCLAW_")}
        approve = subprocess.run(
            [str(PINCLAW), "pairing", "approve", match.group(1)],
            env={**env, "HOME": str(home)},
            capture_output=True,
            text=True,
            check=False,
        )
        assert approve.returncode == 0, approve.stderr
        telegram.user_sends(stranger, STRANGER, "hello")
        telegram.wait_until(sent_in(telegram, stranger, 2), timeout=30)
    finally:
        code = second.terminate()
    assert code == 0, second.log()
    assert "PinClaw stopped" in second.log()
