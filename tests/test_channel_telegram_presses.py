"""Telegram approvals at the adapter: requests, records and button presses over the real PTB.

``TelegramChannel`` runs against the fake Telegram with a scripted inbox in
place of the core, so these tests pin what the adapter itself promises: one
HTML message per request with its buttons in one row (in the right topic), an
edit into a record without buttons (a new message when the request cannot be
edited), and every tap handed to ``inbox.press`` once, in polling and webhook
mode, and answered whatever the core does: as it says, when it fails, when it
is slow, and when the tap is not one of PinClaw's buttons. The end-to-end
tests with the real daemon and approval service are in ``test_telegram_approvals``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from telegram import Update

from bot.core.channel import (
    ApprovalSurface,
    ButtonPress,
    ChannelStatus,
    ChatTarget,
    DeliveryError,
    PressReply,
    ShuttingDown,
)
from bot.core.messages import Button
from bot.core.tls import shared_ssl_context
from channels.telegram.channel import TelegramChannel
from channels.telegram.client import TelegramClient
from channels.telegram.presses import STILL_WORKING, PressHandler
from channels.telegram.settings import TelegramSettings
from tests.adapter_harness import ScriptedInbox, channel_deps, connected
from tests.fake_telegram import FakeTelegram, SentMessage

OWNER = 7001
GROUP = -1001234567
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
BEN = FakeTelegram.user(7003, "Ben", "ben")
APPROVAL = "ap:AbCdEfGhIjKlMnOp"
BUTTONS = (
    Button("✅ Allow once", f"{APPROVAL}:once"),
    Button("♾️ Always allow", f"{APPROVAL}:always"),
    Button("❌ Deny", f"{APPROVAL}:deny"),
)
REQUEST = "🔐 **Approval needed** for **shell**\n`command=mkdir build`\n🟠 medium risk"
RECORD = "🔐 **Approval needed** for **shell**\n`command=mkdir build`\n\n✅ Allowed once by Ada"


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def running(
    tmp_path: Path, telegram: FakeTelegram, inbox: ScriptedInbox, **extra: Any
) -> AsyncIterator[TelegramChannel]:
    """A connected ``TelegramChannel`` feeding ``inbox``; cancelled on exit."""
    settings = TelegramSettings.model_validate(
        {"token": telegram.token, "api_base_url": telegram.url, "poll_timeout_s": 1, **extra}
    )
    async with channel_deps(tmp_path) as deps:
        channel = TelegramChannel(settings, deps)
        async with connected(channel, inbox):
            yield channel


async def answered(telegram: FakeTelegram, update: dict[str, Any]) -> dict[str, Any]:
    """How the press in ``update`` was answered (waited for)."""
    query_id = update["callback_query"]["id"]
    answer = await telegram.await_until(lambda: telegram.callback_answer(query_id))
    return dict(answer)


async def posted(channel: TelegramChannel, telegram: FakeTelegram, chat: int) -> SentMessage:
    """Post the request in ``chat``; the message as the fake holds it."""
    ref = await channel.post_approval(ChatTarget("telegram", str(chat)), REQUEST, BUTTONS)
    (sent,) = telegram.sent(chat)
    assert ref == str(sent.message_id)
    return sent


# -- posting and closing -----------------------------------------------------------------------


async def test_a_request_is_one_html_message_with_its_buttons_in_one_row_in_its_topic(
    tmp_path: Path, telegram: FakeTelegram, inbox: ScriptedInbox
) -> None:
    async with running(tmp_path, telegram, inbox) as channel:
        assert isinstance(channel, ApprovalSurface)
        target = ChatTarget("telegram", str(GROUP), "5")
        ref = await channel.post_approval(target, REQUEST, BUTTONS)
    (sent,) = telegram.sent(GROUP)
    assert ref == str(sent.message_id)
    assert (sent.parse_mode, sent.thread_id) == ("HTML", 5)
    assert sent.text.startswith("🔐 Approval needed for shell\ncommand=mkdir build")
    assert {"type": "code", "offset": 29, "length": 19} in sent.entities
    assert sent.reply_markup == {
        "inline_keyboard": [[{"text": b.label, "callback_data": b.action_id} for b in BUTTONS]]
    }


async def test_closing_edits_the_request_into_a_record_without_buttons(
    tmp_path: Path, telegram: FakeTelegram, inbox: ScriptedInbox
) -> None:
    async with running(tmp_path, telegram, inbox) as channel:
        sent = await posted(channel, telegram, OWNER)
        target = ChatTarget("telegram", str(OWNER))
        await channel.close_approval(target, str(sent.message_id), RECORD)
        await channel.close_approval(target, str(sent.message_id), RECORD)  # a retry: no change
    (record,) = telegram.sent(OWNER)
    assert (record.message_id, record.edits, record.buttons) == (sent.message_id, 1, [])
    assert record.text.endswith("✅ Allowed once by Ada") and record.parse_mode == "HTML"
    first, second = telegram.calls("editMessageText")
    assert first.ok and "not modified" in (second.answer or {})["description"]
    assert "reply_markup" not in first.params


async def test_a_request_that_cannot_be_edited_is_closed_by_posting_the_record(
    tmp_path: Path, telegram: FakeTelegram, inbox: ScriptedInbox, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(tmp_path, telegram, inbox) as channel:
        sent = await posted(channel, telegram, OWNER)
        async with httpx.AsyncClient() as client:  # someone deletes the request
            deleted = await client.post(
                f"{telegram.base_url}{telegram.token}/deleteMessage",
                json={"chat_id": OWNER, "message_id": sent.message_id},
            )
        assert deleted.json()["ok"]
        target = ChatTarget("telegram", str(GROUP), "5")
        old = await channel.post_approval(target, REQUEST, BUTTONS)
        await channel.close_approval(
            ChatTarget("telegram", str(OWNER)), str(sent.message_id), RECORD
        )
        telegram.fail("editMessageText", 400, "Bad Request: message can't be edited")  # too old
        await channel.close_approval(target, old, RECORD)
    _, record = telegram.sent(OWNER)
    assert record.text.endswith("Allowed once by Ada") and record.deleted is False
    request, group_record = telegram.sent(GROUP)
    assert request.buttons and request.edits == 0  # Telegram would not let it change
    assert (group_record.thread_id, group_record.text) == (5, record.text)
    assert caplog.text.count("can no longer be edited") == 2


async def test_refused_markup_in_a_record_is_edited_in_as_plain_text(
    tmp_path: Path, telegram: FakeTelegram, inbox: ScriptedInbox
) -> None:
    async with running(tmp_path, telegram, inbox) as channel:
        sent = await posted(channel, telegram, OWNER)
        telegram.fail("editMessageText", 400, "Bad Request: can't parse entities: oops")
        await channel.close_approval(
            ChatTarget("telegram", str(OWNER)), str(sent.message_id), RECORD
        )
    (record,) = telegram.sent(OWNER)
    assert (record.parse_mode, record.text, record.buttons) == (None, RECORD, [])


async def test_direct_targets_and_undeliverable_requests(
    tmp_path: Path, telegram: FakeTelegram, inbox: ScriptedInbox
) -> None:
    async with running(tmp_path, telegram, inbox) as channel:
        assert channel.direct_target(str(OWNER)) == ChatTarget("telegram", str(OWNER))
        assert channel.direct_target("@ada") is None
        telegram.fail("sendMessage", 403, "Forbidden: bot can't initiate conversation with a user")
        with pytest.raises(DeliveryError, match="initiate conversation"):
            await channel.post_approval(ChatTarget("telegram", "7999"), REQUEST, BUTTONS)
        with pytest.raises(DeliveryError, match="64 bytes"):
            await channel.post_approval(
                ChatTarget("telegram", str(OWNER)), REQUEST, (Button("Go", "x" * 65),)
            )


# -- presses -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["polling", "webhook"])
async def test_a_press_reaches_the_inbox_once_and_is_answered_as_the_core_says(
    tmp_path: Path, telegram: FakeTelegram, inbox: ScriptedInbox, mode: str
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    settings: dict[str, Any] = {"mode": mode, "webhook_url": url, "webhook_port": port}
    async with running(tmp_path, telegram, inbox, **settings) as channel:
        sent = await posted(channel, telegram, GROUP)
        tap = telegram.user_presses(GROUP, BEN, sent, f"{APPROVAL}:once")
        assert (await answered(telegram, tap))["text"] == "Noted."
        assert (await answered(telegram, tap))["show_alert"] is True  # private: an alert
        inbox.reply = PressReply("Allowed once. " + "x" * 300, private=False)
        second = telegram.user_presses(GROUP, ADA, sent, f"{APPROVAL}:deny")
        answer = await answered(telegram, second)
        telegram.redeliver(tap)  # e.g. not yet confirmed when polling restarted
        telegram.user_sends(OWNER, ADA, "after the presses")
        await inbox.wait(messages=1)
    assert inbox.presses == [
        ButtonPress(
            "telegram", str(GROUP), "7003", "Ben", f"{APPROVAL}:once", str(sent.message_id)
        ),
        ButtonPress(
            "telegram", str(GROUP), "7001", "Ada", f"{APPROVAL}:deny", str(sent.message_id)
        ),
    ]
    assert answer["show_alert"] is False and len(answer["text"]) == 200
    assert answer["text"].startswith("Allowed once. xxx") and answer["text"].endswith("…")
    if mode == "polling":
        assert telegram.calls("getUpdates")[-1].params["allowed_updates"] == [
            "message",
            "edited_message",
            "callback_query",
        ]
    else:
        (hook,) = telegram.calls("setWebhook")
        assert {"edited_message", "callback_query"} <= set(hook.params["allowed_updates"])


async def test_a_press_held_by_the_core_does_not_hold_up_messages(
    tmp_path: Path, telegram: FakeTelegram, inbox: ScriptedInbox
) -> None:
    inbox.hold = asyncio.Event()
    async with running(tmp_path, telegram, inbox) as channel:
        sent = await posted(channel, telegram, OWNER)
        tap = telegram.user_presses(OWNER, ADA, sent, f"{APPROVAL}:once")
        await inbox.wait(presses=1)
        telegram.user_sends(OWNER, ADA, "meanwhile")
        await inbox.wait(messages=1)  # polled and stored while the press waits
        assert telegram.callback_answer(tap["callback_query"]["id"]) is None
        inbox.hold.set()
        assert (await answered(telegram, tap))["text"] == "Noted."


async def test_a_failing_or_stopping_core_and_foreign_taps_are_still_answered(
    tmp_path: Path, telegram: FakeTelegram, inbox: ScriptedInbox, caplog: pytest.LogCaptureFixture
) -> None:
    async with running(tmp_path, telegram, inbox) as channel:
        sent = await posted(channel, telegram, OWNER)
        inbox.reply = RuntimeError("the database is on fire")
        failed = await answered(telegram, telegram.user_presses(OWNER, ADA, sent, "ap:x:once"))
        inbox.reply = ShuttingDown("PinClaw is stopping")
        stopping = await answered(telegram, telegram.user_presses(OWNER, ADA, sent, "ap:y:once"))
        foreign = await answered(telegram, telegram.user_presses(OWNER, ADA, sent, ""))
    assert failed["show_alert"] is True
    assert failed["text"].startswith("Something went wrong on my side (error id ")
    error_id = failed["text"].split("error id ")[1][:8]
    assert f"(error id {error_id})" in caplog.text and "on fire" in caplog.text
    assert "database" not in failed["text"]
    assert "restarting" in stopping["text"]
    assert (foreign["text"], foreign["show_alert"]) == (
        "This button no longer does anything.",
        False,
    )
    assert [p.action_id for p in inbox.presses] == ["ap:x:once", "ap:y:once"]


async def test_a_slow_core_gets_the_tap_answered_in_time_and_still_decides(
    telegram: FakeTelegram, inbox: ScriptedInbox
) -> None:
    inbox.hold = asyncio.Event()
    client = TelegramClient(telegram.token, telegram.url, shared_ssl_context())
    presses = PressHandler(client, ChannelStatus("telegram"), answer_within_s=0.2)
    telegram.user_sends(OWNER, ADA, "a message to put a button under")
    raw = telegram.user_presses(OWNER, ADA, 1, f"{APPROVAL}:once")
    update = Update.de_json(raw, client.bot)
    assert update.callback_query is not None
    presses.take(update.callback_query, inbox)
    answer = await answered(telegram, raw)
    assert (answer["text"], answer["show_alert"]) == (STILL_WORKING, False)
    assert len(inbox.presses) == 1
    inbox.hold.set()
    await presses.drain(5)
    assert len(telegram.calls("answerCallbackQuery")) == 1  # the late reply goes nowhere
