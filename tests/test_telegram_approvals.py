"""Approvals on Telegram end to end: the real daemon, approval service, PTB and fake Telegram.

The fake LLM asks for ``shell`` with ``mkdir build``, which the supervised policy
puts to a person. Ada (the first of ``allowed_users``) is the approver; Ben is
another member of the group. Each test drives the taps, typed commands,
timeouts and restarts a person would, and checks what the chat shows (the
request, its buttons, the record it becomes), what each tapper was told, what
the model was told, and whether the folder exists in the workspace.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.daemon.main import Daemon
from tests.daemon_harness import running_daemon
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_telegram import FakeTelegram, SentMessage
from tests.telegram_taps import button, request_in, said, tap

OWNER = 7001
GROUP = -1001234567
ADA = FakeTelegram.user(OWNER, "Ada", "ada")
BEN = FakeTelegram.user(7003, "Ben", "ben")
ACTION_ID = re.compile(r"^ap:([A-Za-z0-9_-]{16}):(once|person|always|deny)$")
MKDIR = CallTools([("shell", {"command": "mkdir build"})])


@asynccontextmanager
async def approving_daemon(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    security: dict[str, Any] | None = None,
    **extra: Any,
) -> AsyncIterator[Daemon]:
    """The daemon on the fake Telegram, Ada its approver, once the channel is connected."""
    table = {
        "token": telegram.token,
        "api_base_url": telegram.url,
        "allowed_users": [OWNER],
        "allowed_groups": [GROUP],
        "poll_timeout_s": 1,
        **extra,
    }
    async with running_daemon(tmp_path, llm, {"telegram": table}, security=security) as daemon:
        assert await daemon.channels["telegram"].status.wait_connected(30)
        yield daemon


def workspace(tmp_path: Path) -> Path:
    """The agent's workspace in a daemon started by ``running_daemon``."""
    return tmp_path / "state" / "workspace"


def approval_id(request: SentMessage) -> str:
    """The request's id, as its buttons carry it."""
    match = ACTION_ID.match(button(request, "once"))
    assert match is not None
    return match.group(1)


async def closed(telegram: FakeTelegram, chat: int, request: SentMessage) -> SentMessage:
    """The request once the core has edited it into a record (waited for)."""

    def record() -> SentMessage | None:
        now = next(m for m in telegram.sent(chat) if m.message_id == request.message_id)
        return now if now.edits and not now.buttons else None

    return await telegram.await_until(record)


async def test_only_the_approver_allows_and_the_request_becomes_a_record(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(MKDIR, Say("Done."))
    async with approving_daemon(tmp_path, llm, telegram):
        telegram.user_sends(GROUP, ADA, "@pinclaw_bot make a build folder")
        request = await request_in(telegram, GROUP)
        assert "Approval needed" in request.text and "mkdir build" in request.text
        assert request.reply_markup is not None
        assert len(request.reply_markup["inline_keyboard"]) == 4  # four buttons: one per row
        matches = [ACTION_ID.match(b["callback_data"]) for b in request.buttons]
        assert [m.group(2) if m else None for m in matches] == ["once", "person", "always", "deny"]

        refused = await tap(telegram, GROUP, BEN, button(request, "once"), request.message_id)
        assert refused == {**refused, "text": "Only the owner can decide on this request."}
        assert refused["show_alert"] is True  # only Ben sees it
        unchanged = telegram.sent(GROUP)[0]
        assert (unchanged.edits, unchanged.buttons) == (0, request.buttons)
        assert len(llm.requests) == 1 and not (workspace(tmp_path) / "build").exists()

        allowed = await tap(telegram, GROUP, ADA, button(request, "once"), request.message_id)
        assert allowed["text"] == "Allowed once."
        record = await closed(telegram, GROUP, request)
        await said(telegram, GROUP, "Done.")
    assert "✅ Allowed once by Ada at " in record.text and "mkdir build" in record.text
    assert "/approve" not in record.text and record.parse_mode == "HTML"
    assert (workspace(tmp_path) / "build").is_dir()


async def test_deny_leaves_the_workspace_alone_and_tells_the_model(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(MKDIR, Say("Done."))
    async with approving_daemon(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "make a build folder")
        request = await request_in(telegram, OWNER)
        denied = await tap(telegram, OWNER, ADA, button(request, "deny"), request.message_id)
        assert denied["text"] == "Denied."
        record = await closed(telegram, OWNER, request)
        await said(telegram, OWNER, "Done.")
    assert "❌ Denied by Ada at " in record.text
    assert not (workspace(tmp_path) / "build").exists()
    assert "not run: Ada denied the shell call" in llm.tool_results()[-1]


async def test_an_unanswered_request_expires_into_a_record_and_is_not_run(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(MKDIR, Say("Done."))
    async with approving_daemon(tmp_path, llm, telegram, security={"approval_timeout_s": 1}):
        telegram.user_sends(OWNER, ADA, "make a build folder")
        request = await request_in(telegram, OWNER)
        record = await closed(telegram, OWNER, request)
        await said(telegram, OWNER, "Done.")
        late = await tap(telegram, OWNER, ADA, button(request, "once"), request.message_id)
    assert "⌛ Expired at " in record.text
    assert late["text"] == "Already decided: expired."
    assert "nobody approved the shell call in time" in llm.tool_results()[-1]
    assert not (workspace(tmp_path) / "build").exists()


async def test_always_makes_a_rule_for_that_command_only(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    other = CallTools([("shell", {"command": "mkdir other"})])
    llm.queue(MKDIR, Say("Done."), MKDIR, Say("Again."), other, Say("Third."))
    async with approving_daemon(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "make a build folder")
        first = await request_in(telegram, OWNER)
        always = await tap(telegram, OWNER, ADA, button(first, "always"), first.message_id)
        assert always["text"].startswith("Always allowed")
        record = await closed(telegram, OWNER, first)
        await said(telegram, OWNER, "Done.")
        telegram.user_sends(OWNER, ADA, "make it again")
        await said(telegram, OWNER, "Again.")
        assert [m.buttons for m in telegram.sent(OWNER)][1:] == [[], []]  # nobody was asked
        telegram.user_sends(OWNER, ADA, "make another folder")
        second = await telegram.await_until(
            lambda: next((m for m in telegram.sent(OWNER)[3:] if m.buttons), None)
        )
        assert "mkdir other" in second.text
        await tap(telegram, OWNER, ADA, button(second, "deny"), second.message_id)
        await said(telegram, OWNER, "Third.")
    assert "♾️" not in record.text and "Always allowed by Ada at " in record.text
    _, again, third = llm.tool_results()
    assert "File exists" in again  # run again, without a prompt
    assert "denied" in third and not (workspace(tmp_path) / "other").exists()


async def test_a_forged_button_is_refused_privately_and_logged(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    llm.queue(MKDIR, Say("Done."))
    async with approving_daemon(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "make a build folder")
        request = await request_in(telegram, OWNER)
        forged = await tap(telegram, OWNER, ADA, "ap:nonexistent:once", request.message_id)
        assert forged == {**forged, "text": "This approval request does not exist."}
        assert forged["show_alert"] is True
        still = telegram.sent(OWNER)[0]
        assert (still.edits, still.buttons) == (0, request.buttons)
        assert not (workspace(tmp_path) / "build").exists()
        await tap(telegram, OWNER, ADA, button(request, "deny"), request.message_id)
        await said(telegram, OWNER, "Done.")
    assert "rejected a decision on unknown or misrouted approval 'nonexistent'" in caplog.text


async def test_a_typed_approve_in_the_group_decides_like_the_button(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(MKDIR, Say("Done."))
    async with approving_daemon(tmp_path, llm, telegram):
        telegram.user_sends(GROUP, ADA, "@pinclaw_bot make a build folder")
        request = await request_in(telegram, GROUP)
        telegram.user_sends(GROUP, ADA, f"/approve {approval_id(request)} once")
        record = await closed(telegram, GROUP, request)
        await said(telegram, GROUP, "Done.")
        await said(telegram, GROUP, "Allowed once.")  # the answer to the command
    assert "✅ Allowed once by Ada at " in record.text
    assert (workspace(tmp_path) / "build").is_dir()


async def test_approvals_in_dm_take_a_group_request_to_the_approvers_private_chat(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(MKDIR, Say("Done."))
    async with approving_daemon(tmp_path, llm, telegram, approvals_in_dm=True):
        telegram.user_sends(GROUP, ADA, "@pinclaw_bot make a build folder")
        request = await request_in(telegram, OWNER)
        assert "mkdir build" in request.text and str(GROUP) in request.text
        await tap(telegram, OWNER, ADA, button(request, "once"), request.message_id)
        record = await closed(telegram, OWNER, request)
        await said(telegram, GROUP, "Done.")
    assert "✅ Allowed once by Ada at " in record.text
    assert [m.text for m in telegram.sent(GROUP)] == ["Done."]  # the group saw no arguments
    assert (workspace(tmp_path) / "build").is_dir()


async def test_a_request_left_open_by_a_stop_expires_and_its_turn_is_not_run_again(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram
) -> None:
    llm.queue(MKDIR, Say("Done."))
    async with approving_daemon(tmp_path, llm, telegram):
        telegram.user_sends(OWNER, ADA, "make a build folder")
        request = await request_in(telegram, OWNER)
    assert len(llm.requests) == 1
    async with approving_daemon(tmp_path, llm, telegram) as daemon:
        record = await closed(telegram, OWNER, request)
        late = await tap(telegram, OWNER, ADA, button(request, "once"), request.message_id)
        telegram.user_sends(OWNER, ADA, "ping")
        await said(telegram, OWNER, "Done.")  # the queued answer goes to the next message
        await daemon.router.drain()
    assert "PinClaw restarted before a decision" in record.text
    assert late["text"] == "Already decided: expired."
    assert [m.buttons != [] for m in telegram.sent(OWNER)] == [False, False]  # no new request
    assert len(llm.requests) == 2 and llm.requests[-1].view.last_text == "ping"
    assert not (workspace(tmp_path) / "build").exists()
