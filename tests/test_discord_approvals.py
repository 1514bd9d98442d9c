"""Discord approvals at the adapter: requests, records, DMs and presses over the real discord.py.

``DiscordChannel`` runs against the fake Discord with a scripted inbox in place
of the core, so these tests pin what the adapter itself promises: one message
per request with its buttons in one row, an edit into a record without
buttons, the DM a ``direct_target`` stands for, and every press acknowledged
at once, handed to the inbox once, and answered (ephemerally by default) even
when the core is slow or fails. The end-to-end tests further down run the
real daemon and its approval service instead.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.core.channel import (
    ButtonPress,
    ChatTarget,
    DeliveryError,
    PressReply,
    ShuttingDown,
)
from bot.core.messages import Button
from bot.daemon.main import Daemon
from channels.discord.channel import DiscordChannel
from channels.discord.events import CHANNEL
from channels.discord.settings import DiscordSettings
from tests.adapter_harness import ScriptedInbox, channel_deps, connected
from tests.daemon_harness import running_daemon
from tests.fake_discord import JSON, FakeDiscord
from tests.fake_discord.payloads import FLAG_EPHEMERAL
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.test_channel_discord import discord_table

APPROVAL = "ap:AbCdEfGhIjKlMnOp"
BUTTONS = (
    Button("✅ Allow once", f"{APPROVAL}:once"),
    Button("♾️ Always allow", f"{APPROVAL}:always"),
    Button("❌ Deny", f"{APPROVAL}:deny"),
)


@pytest.fixture
def fake() -> Iterator[FakeDiscord]:
    """A fake Discord with a quick heartbeat."""
    with FakeDiscord.running(heartbeat_interval=1.0) as server:
        yield server


@asynccontextmanager
async def running(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> AsyncIterator[DiscordChannel]:
    """A connected ``DiscordChannel`` feeding ``inbox``; stopped on exit."""
    settings = DiscordSettings.model_validate(
        {"token": fake.token, "api_base_url": fake.api_base, "gateway_url": fake.gateway_url}
    )
    async with channel_deps(tmp_path) as deps:
        channel = DiscordChannel(settings, deps)
        async with connected(channel, inbox):
            yield channel


async def answer_to(fake: FakeDiscord, press: JSON) -> JSON:
    """The follow-up message that answered ``press`` (waited for)."""

    def found() -> JSON | None:
        with fake.world.lock:
            return next(
                (
                    m
                    for m in fake.world.messages.values()
                    if (m.get("interaction_metadata") or {}).get("id") == press["id"]
                ),
                None,
            )

    await fake.await_until(lambda: found() is not None)
    answer = found()
    assert answer is not None
    return answer


async def test_request_is_one_message_with_three_buttons_in_one_row(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    where = ChatTarget(CHANNEL, fake.channel["id"])
    async with running(tmp_path, fake, inbox) as channel:
        ref = await channel.post_approval(where, "🔐 **Approval needed** for `mkdir x`", BUTTONS)
    [message] = fake.sent(fake.channel["id"])
    assert message["id"] == ref
    assert message["content"] == "🔐 **Approval needed** for `mkdir x`"
    [row] = message["components"]
    assert [(b["label"], b["custom_id"], b["style"]) for b in row["components"]] == [
        ("✅ Allow once", f"{APPROVAL}:once", 3),
        ("♾️ Always allow", f"{APPROVAL}:always", 2),
        ("❌ Deny", f"{APPROVAL}:deny", 4),
    ]


async def test_request_in_a_thread_goes_into_the_thread(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    thread = fake.add_thread("ideas")
    where = ChatTarget(CHANNEL, fake.channel["id"], thread["id"])
    async with running(tmp_path, fake, inbox) as channel:
        ref = await channel.post_approval(where, "May I?", BUTTONS)
        assert [m["id"] for m in fake.sent(thread["id"])] == [ref]
        assert not fake.sent(fake.channel["id"])
        await channel.close_approval(where, ref, "Denied by Ana")
    assert fake.message(ref)["content"] == "Denied by Ana"


async def test_closing_edits_the_request_into_a_record_without_buttons(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    where = ChatTarget(CHANNEL, fake.channel["id"])
    async with running(tmp_path, fake, inbox) as channel:
        ref = await channel.post_approval(where, "May I?", BUTTONS)
        await channel.close_approval(where, ref, "May I?\n\n✅ Allowed once by Ana at 14:02")
    edited = fake.message(ref)
    assert edited["content"] == "May I?\n\n✅ Allowed once by Ana at 14:02"
    assert edited["components"] == []
    [edit] = fake.calls("PATCH", rf"^/channels/{fake.channel['id']}/messages/{ref}$")
    assert edit.json["components"] == []
    assert len(fake.sent(fake.channel["id"])) == 1, "edited, not posted again"


async def test_a_deleted_request_is_closed_by_posting_the_record(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox, caplog: pytest.LogCaptureFixture
) -> None:
    where = ChatTarget(CHANNEL, fake.channel["id"])
    async with running(tmp_path, fake, inbox) as channel:
        ref = await channel.post_approval(where, "May I?", BUTTONS)
        with fake.world.lock:
            fake.world.deleted.add(ref)
        await channel.close_approval(where, ref, "❌ Denied by Ana at 14:02")
    [record] = fake.sent(fake.channel["id"])
    assert record["content"] == "❌ Denied by Ana at 14:02" and not record["components"]
    assert f"the approval request '{ref}' in discord chat" in caplog.text


async def test_direct_target_is_the_users_dm_opened_once(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    ana = fake.add_user("ana")
    async with running(tmp_path, fake, inbox) as channel:
        assert channel.direct_target("not-a-user") is None
        target = channel.direct_target(ana["id"])
        assert target is not None and target.channel == CHANNEL
        first = await channel.post_approval(target, "First?", BUTTONS)
        second = await channel.post_approval(target, "Second?", BUTTONS)
        await channel.close_approval(target, first, "closed")
    dm = fake.dm_channel(ana)["id"]
    assert [m["id"] for m in fake.sent(dm)] == [first, second]
    assert fake.message(first)["content"] == "closed"
    assert len(fake.calls("POST", "^/users/@me/channels$")) == 1, "the DM channel is remembered"


async def test_a_dm_request_is_closed_after_a_restart(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    ana = fake.add_user("ana")
    target = ChatTarget(CHANNEL, f"user:{ana['id']}")
    async with running(tmp_path, fake, inbox) as channel:
        ref = await channel.post_approval(target, "May I?", BUTTONS)
    async with running(tmp_path, fake, inbox) as channel:
        await channel.close_approval(target, ref, "⌛ Expired at 14:05")
    assert fake.message(ref)["content"] == "⌛ Expired at 14:05"
    assert fake.message(ref)["components"] == []


async def test_an_overlong_request_is_never_cut_but_refused_unsent(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    text = "🔐 **Approval needed** for **shell**\n" + "\n".join(f"line {n}" for n in range(600))
    async with running(tmp_path, fake, inbox) as channel:
        assert channel.approval_limit.measure(text) > channel.approval_limit.limit
        with pytest.raises(DeliveryError, match="does not fit one Discord message"):
            await channel.post_approval(ChatTarget(CHANNEL, fake.channel["id"]), text, BUTTONS)
        fits = "🔐 **Approval needed** for **shell**\n" + "x" * 1900
        ref = await channel.post_approval(ChatTarget(CHANNEL, fake.channel["id"]), fits, BUTTONS)
    [message] = fake.sent(fake.channel["id"])
    assert (message["id"], message["content"]) == (ref, fits)


async def test_unsendable_request_raises_delivery_error(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    ana = fake.add_user("ana")
    refusal = {"code": 50007, "message": "Cannot send messages to this user"}
    async with running(tmp_path, fake, inbox) as channel:
        target = channel.direct_target(ana["id"])
        assert target is not None
        fake.fail("POST", r"^/channels/\d+/messages$", 403, body=refusal)
        with pytest.raises(DeliveryError, match="Cannot send messages to this user"):
            await channel.post_approval(target, "May I?", BUTTONS)


async def test_press_is_acknowledged_before_the_core_answers_then_answered_privately(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    inbox.hold = asyncio.Event()
    inbox.reply = PressReply("Only Ana can decide on this request.")
    bob = fake.add_user("bob")
    async with running(tmp_path, fake, inbox) as channel:
        ref = await channel.post_approval(ChatTarget(CHANNEL, fake.channel["id"]), "?", BUTTONS)
        press = fake.user_presses(f"{APPROVAL}:once", fake.message(ref), bob)
        async with asyncio.timeout(10):
            await inbox.asked.wait()
        # The core has not answered yet, and Discord already has its acknowledgement.
        [callback] = fake.interaction(press).callbacks
        assert callback["type"] == 6, "a deferred update: the message is left to the core"
        assert not fake.interaction(press).followup_ids
        inbox.hold.set()
        answer = await answer_to(fake, press)
    assert answer["content"] == "Only Ana can decide on this request."
    assert answer["flags"] & FLAG_EPHEMERAL
    assert inbox.presses == [
        ButtonPress(
            channel=CHANNEL,
            chat_id=fake.channel["id"],
            user_id=bob["id"],
            user_name="bob",
            action_id=f"{APPROVAL}:once",
            message_ref=ref,
        )
    ]
    assert fake.message(ref)["components"], "the adapter never edits the request itself"


async def test_public_reply_and_press_in_a_thread_and_a_dm(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    inbox.reply = PressReply("Ana allowed it.", private=False)
    thread = fake.add_thread("ops")
    async with running(tmp_path, fake, inbox) as channel:
        in_thread = ChatTarget(CHANNEL, fake.channel["id"], thread["id"])
        ref = await channel.post_approval(in_thread, "?", BUTTONS)
        press = fake.user_presses(f"{APPROVAL}:deny", fake.message(ref), fake.owner)
        answer = await answer_to(fake, press)
        assert not answer["flags"] & FLAG_EPHEMERAL
        dm_target = channel.direct_target(fake.owner["id"])
        assert dm_target is not None
        dm_ref = await channel.post_approval(dm_target, "?", BUTTONS)
        dm_press = fake.user_presses(f"{APPROVAL}:once", fake.message(dm_ref), fake.owner)
        await answer_to(fake, dm_press)
    in_thread_press, in_dm_press = inbox.presses
    # A thread's press names the thread's channel as the chat, like its messages do.
    assert (in_thread_press.chat_id, in_thread_press.message_ref) == (fake.channel["id"], ref)
    dm = fake.dm_channel(fake.owner)["id"]
    assert (in_dm_press.chat_id, in_dm_press.message_ref) == (dm, dm_ref)


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (RuntimeError("core bug"), "Something went wrong on my side (error id "),
        (ShuttingDown("stopping"), "PinClaw is restarting"),
    ],
)
async def test_a_failing_core_still_answers_the_tapper(
    tmp_path: Path,
    fake: FakeDiscord,
    inbox: ScriptedInbox,
    caplog: pytest.LogCaptureFixture,
    failure: Exception,
    expected: str,
) -> None:
    inbox.reply = failure
    async with running(tmp_path, fake, inbox) as channel:
        ref = await channel.post_approval(ChatTarget(CHANNEL, fake.channel["id"]), "?", BUTTONS)
        press = fake.user_presses(f"{APPROVAL}:once", fake.message(ref), fake.owner)
        answer = await answer_to(fake, press)
    assert answer["content"].startswith(expected)
    assert answer["flags"] & FLAG_EPHEMERAL
    assert "core bug" not in answer["content"]
    if isinstance(failure, RuntimeError):
        assert "could not handle discord button" in caplog.text


async def test_a_replayed_press_reaches_the_core_once(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="channels.discord.presses")
    async with running(tmp_path, fake, inbox) as channel:
        ref = await channel.post_approval(ChatTarget(CHANNEL, fake.channel["id"]), "?", BUTTONS)
        press = fake.user_presses(f"{APPROVAL}:always", fake.message(ref), fake.owner)
        await answer_to(fake, press)
        fake.replay_last()
        await fake.await_until(lambda: "second delivery of discord interaction" in caplog.text)
        later = fake.user_presses(f"{APPROVAL}:deny", fake.message(ref), fake.owner)
        await answer_to(fake, later)
    assert [p.action_id for p in inbox.presses] == [f"{APPROVAL}:always", f"{APPROVAL}:deny"]
    assert len(fake.interaction(press).callbacks) == 1


async def test_other_buttons_are_acknowledged_but_not_sent_to_the_core(
    tmp_path: Path, fake: FakeDiscord, inbox: ScriptedInbox
) -> None:
    where = ChatTarget(CHANNEL, fake.channel["id"])
    async with running(tmp_path, fake, inbox) as channel:
        ref = await channel.post_approval(where, "?", (Button("Other", "menu:1"),))
        press = fake.user_presses("menu:1", fake.message(ref), fake.owner)
        await fake.await_until(lambda: bool(fake.interaction(press).callbacks))
    assert fake.interaction(press).callbacks[0]["type"] == 6
    assert not inbox.presses


# -- end to end: the real daemon and its approval service ---------------------

ACTION_ID = re.compile(r"^ap:[A-Za-z0-9_-]{16}:(once|person|always|deny)$")


@asynccontextmanager
async def approving_daemon(
    tmp_path: Path,
    llm: FakeLLM,
    fake: FakeDiscord,
    security: dict[str, Any] | None = None,
    **extra: Any,
) -> AsyncIterator[Daemon]:
    """The daemon on the fake Discord (the fake's owner is the approver), connected."""
    channels = discord_table(fake, **extra)
    async with running_daemon(tmp_path, llm, channels, security=security) as daemon:
        assert await daemon.channels[CHANNEL].status.wait_connected(10)
        yield daemon


def workspace(tmp_path: Path) -> Path:
    """The agent's workspace in a daemon started by ``running_daemon``."""
    return tmp_path / "state" / "workspace"


async def request_in(fake: FakeDiscord, channel_id: str) -> JSON:
    """The approval request the bot posted in ``channel_id`` (waited for)."""

    def found() -> JSON | None:
        return next((m for m in fake.sent(channel_id) if m["components"]), None)

    await fake.await_until(lambda: found() is not None)
    request = found()
    assert request is not None
    return request


def button(request: JSON, choice: str) -> str:
    """The ``custom_id`` of the request's button for ``choice``."""
    ids = [str(b["custom_id"]) for b in request["components"][0]["components"]]
    return next(i for i in ids if i.endswith(f":{choice}"))


async def closed(fake: FakeDiscord, request: JSON) -> JSON:
    """The request once the core has edited it into a record (waited for)."""
    await fake.await_until(lambda: not fake.message(request["id"])["components"])
    return fake.message(request["id"])


async def said(fake: FakeDiscord, channel_id: str, text: str) -> None:
    """Wait until the bot has said ``text`` in ``channel_id``."""
    await fake.await_until(lambda: any(m["content"] == text for m in fake.sent(channel_id)))


async def test_only_the_approver_allows_and_the_request_becomes_a_record(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("Done."))
    bob = fake.add_user("bob")
    channel = fake.channel["id"]
    async with approving_daemon(tmp_path, llm, fake):
        fake.user_sends(channel, fake.owner, "make a build folder", mentions_bot=True)
        request = await request_in(fake, channel)
        assert "Approval needed" in request["content"] and "mkdir build" in request["content"]
        [row] = request["components"]
        ids = [b["custom_id"] for b in row["components"]]
        assert len(ids) == 4 and all(ACTION_ID.match(i) for i in ids)
        assert [i.rpartition(":")[2] for i in ids] == ["once", "person", "always", "deny"]

        refused = fake.user_presses(button(request, "once"), request, bob)
        answer = await answer_to(fake, refused)
        assert answer["content"] == "Only the owner can decide on this request."
        assert answer["flags"] & FLAG_EPHEMERAL
        unchanged = fake.message(request["id"])
        assert unchanged["components"] == [row] and unchanged["edited_timestamp"] is None
        assert len(llm.requests) == 1 and not (workspace(tmp_path) / "build").exists()

        allowed = fake.user_presses(button(request, "once"), unchanged, fake.owner)
        answer = await answer_to(fake, allowed)
        assert answer["content"] == "Allowed once." and answer["flags"] & FLAG_EPHEMERAL
        record = await closed(fake, request)
        await said(fake, channel, "Done.")
    assert "✅ Allowed once by owner at " in record["content"]
    assert "mkdir build" in record["content"] and "/approve" not in record["content"]
    assert (workspace(tmp_path) / "build").is_dir()


async def test_deny_leaves_the_workspace_alone_and_tells_the_model(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("Done."))
    channel = fake.channel["id"]
    async with approving_daemon(tmp_path, llm, fake):
        fake.user_sends(channel, fake.owner, "make a build folder", mentions_bot=True)
        request = await request_in(fake, channel)
        denied = fake.user_presses(button(request, "deny"), request, fake.owner)
        assert (await answer_to(fake, denied))["content"] == "Denied."
        record = await closed(fake, request)
        await said(fake, channel, "Done.")
    assert "❌ Denied by owner at " in record["content"]
    assert not (workspace(tmp_path) / "build").exists()
    result = next(m["content"] for m in llm.requests[-1].body["messages"] if m["role"] == "tool")
    assert "not run: owner denied the shell call" in result


async def test_a_forged_button_is_refused_privately_and_logged(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="channels.discord.presses")
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("Done."))
    channel = fake.channel["id"]
    async with approving_daemon(tmp_path, llm, fake):
        fake.user_sends(channel, fake.owner, "make a build folder", mentions_bot=True)
        request = await request_in(fake, channel)
        forged = fake.user_presses("ap:nonexistent:once", request, fake.owner)
        answer = await answer_to(fake, forged)
        assert answer["content"] == "This approval request does not exist."
        assert answer["flags"] & FLAG_EPHEMERAL
        assert fake.message(request["id"])["components"], "the real request is still open"
        assert not (workspace(tmp_path) / "build").exists()
        fake.user_presses(button(request, "deny"), request, fake.owner)
        await said(fake, channel, "Done.")
    assert "rejected a decision on unknown or misrouted approval 'nonexistent'" in caplog.text
    assert "discord approval button 'ap:nonexistent:once' pressed by" in caplog.text


async def test_approvals_in_dm_take_a_group_request_to_the_approvers_dm(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("Done."))
    channel = fake.channel["id"]
    async with approving_daemon(tmp_path, llm, fake, approvals_in_dm=True):
        fake.user_sends(channel, fake.owner, "make a build folder", mentions_bot=True)
        dm = fake.dm_channel(fake.owner)["id"]
        request = await request_in(fake, dm)
        assert "mkdir build" in request["content"]
        assert not any(m["components"] for m in fake.sent(channel)), "nothing in the group"
        fake.user_presses(button(request, "once"), request, fake.owner)
        record = await closed(fake, request)
        await said(fake, channel, "Done.")
    assert "✅ Allowed once by owner at " in record["content"]
    assert (workspace(tmp_path) / "build").is_dir()
    assert all("mkdir" not in m["content"] for m in fake.sent(channel))


async def test_an_unanswered_request_expires_into_a_record_and_is_not_run(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("Done."))
    channel = fake.channel["id"]
    async with approving_daemon(tmp_path, llm, fake, security={"approval_timeout_s": 1}):
        fake.user_sends(channel, fake.owner, "make a build folder", mentions_bot=True)
        request = await request_in(fake, channel)
        record = await closed(fake, request)
        await said(fake, channel, "Done.")
        late = fake.user_presses(button(request, "once"), request, fake.owner)
        answer = await answer_to(fake, late)
    assert "⌛ Expired at " in record["content"]
    assert answer["content"] == "Already decided: expired."
    assert not (workspace(tmp_path) / "build").exists()


async def test_a_press_after_a_restart_reaches_the_core(
    tmp_path: Path, llm: FakeLLM, fake: FakeDiscord
) -> None:
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]))
    channel = fake.channel["id"]
    async with approving_daemon(tmp_path, llm, fake):
        fake.user_sends(channel, fake.owner, "make a build folder", mentions_bot=True)
        request = await request_in(fake, channel)
    async with approving_daemon(tmp_path, llm, fake):
        record = await closed(fake, request)
        late = fake.user_presses(button(request, "once"), request, fake.owner)
        answer = await answer_to(fake, late)
    assert "PinClaw restarted before a decision" in record["content"]
    assert answer["content"] == "Already decided: expired."
    assert not (workspace(tmp_path) / "build").exists()
