"""Slack approvals: requests with buttons, records, DMs and presses over the real slack-bolt.

The first tests run ``SlackChannel`` alone against the fake Slack, with a
scripted inbox in place of the core, and pin what the adapter promises: one
message per request with its three buttons, an edit into a record without
buttons (or a new message when the request is gone), the DM a
``direct_target`` stands for, and every press acknowledged at once, handed to
the inbox once and answered to the presser alone, even when the core fails.
The end-to-end tests further down run the real daemon, its approval service
and a real shell command.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import pytest

from bot.core.channel import ButtonPress, ChatTarget, PressReply, ShuttingDown
from bot.core.messages import Button
from bot.daemon.main import Daemon
from channels.slack.channel import SlackChannel
from channels.slack.settings import SlackSettings
from tests.adapter_harness import ScriptedInbox, channel_deps, connected
from tests.daemon_harness import running_daemon
from tests.fake_llm import CallTools, FakeLLM, Say
from tests.fake_slack import ALICE, ALICE_DM, BOB, BOB_DM, GENERAL, Envelope, FakeSlack
from tests.fake_slack.payloads import block_actions
from tests.test_channel_slack import bot_messages, eventually, slack_daemon, slack_table

JSON = dict[str, Any]
APPROVAL = "ap:AbCdEfGhIjKlMnOp"
BUTTONS = (
    Button("✅ Allow once", f"{APPROVAL}:once"),
    Button("♾️ Always allow", f"{APPROVAL}:always"),
    Button("❌ Deny", f"{APPROVAL}:deny"),
)
REQUEST = "🔐 **Approval needed** for **shell**\n`mkdir build`"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """A fake Slack; unacked events are redelivered after 3 s, as Slack does."""
    with FakeSlack.running() as fake:
        yield fake


@asynccontextmanager
async def running_channel(
    tmp_path: Path, slack: FakeSlack, inbox: ScriptedInbox
) -> AsyncIterator[tuple[SlackChannel, asyncio.Task[None]]]:
    """A connected ``SlackChannel`` feeding ``inbox``, and its run; state in ``tmp_path``."""
    settings = SlackSettings.model_validate(slack_table(slack)["slack"])
    async with channel_deps(tmp_path) as deps:
        channel = SlackChannel(settings, deps)
        async with connected(channel, inbox) as task:
            yield channel, task


def actions(message: JSON) -> list[JSON]:
    """The buttons of a message, across its actions blocks."""
    blocks = message.get("blocks") or []
    return [e for b in blocks if b["type"] == "actions" for e in b["elements"]]


def requests_in(slack: FakeSlack, channel: str) -> list[JSON]:
    """The bot's messages in ``channel`` that still carry buttons."""
    return [m for m in slack.sent(channel) if actions(m)]


async def ephemerals_for(slack: FakeSlack, user: str, count: int = 1) -> list[JSON]:
    """Wait until ``user`` has been shown ``count`` ephemeral messages; return them."""
    await slack.await_until(
        lambda: len([e for e in slack.ephemerals() if e["user"] == user]) >= count,
        what=f"{count} ephemeral messages for {user}",
    )
    return [e for e in slack.ephemerals() if e["user"] == user]


# The adapter on its own.


async def test_request_is_one_message_with_its_buttons_and_closes_into_a_record(
    tmp_path: Path, slack: FakeSlack, inbox: ScriptedInbox
) -> None:
    async with running_channel(tmp_path, slack, inbox) as (channel, _):
        asked = slack.user_sends(GENERAL, ALICE, "make a build folder", mention_bot=True)
        target = ChatTarget("slack", GENERAL, asked.ts)
        ref = await channel.post_approval(target, REQUEST, BUTTONS)
        (request,) = slack.sent(GENERAL)
        assert (request["ts"], request["thread_ts"]) == (ref, asked.ts)
        section, _ = request["blocks"]
        assert section["text"]["text"] == "🔐 *Approval needed* for *shell*\n`mkdir build`"
        assert request["text"] == section["text"]["text"]  # what notifications show
        assert [b["text"]["text"] for b in actions(request)] == [b.label for b in BUTTONS]
        ids = [b["action_id"] for b in actions(request)]
        assert ids == [b.action_id for b in BUTTONS] and len(set(ids)) == 3

        await channel.close_approval(target, ref, REQUEST + "\n\n✅ Allowed once by **Alice**")
        (record,) = slack.sent(GENERAL)
    assert record["ts"] == ref and "edited" in record
    assert record["text"].endswith("✅ Allowed once by *Alice*")
    assert [b["type"] for b in record["blocks"]] == ["section"]  # no buttons left to press


async def test_a_gone_request_is_closed_with_a_new_message(
    tmp_path: Path, slack: FakeSlack, inbox: ScriptedInbox, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_channel(tmp_path, slack, inbox) as (channel, _):
        target = ChatTarget("slack", GENERAL, "1700000000.000100")
        await channel.close_approval(target, "1700000000.999999", "⌛ Expired")
        (posted,) = slack.sent(GENERAL)
    assert (posted["text"], posted["thread_ts"]) == ("⌛ Expired", "1700000000.000100")
    assert [c.response["error"] for c in slack.calls("chat.update")] == ["message_not_found"]
    assert "posting its outcome as a new message instead" in caplog.text


async def test_direct_target_is_the_dm_and_is_remembered_across_restarts(
    tmp_path: Path, slack: FakeSlack, inbox: ScriptedInbox
) -> None:
    async with running_channel(tmp_path, slack, inbox) as (channel, _):
        assert channel.direct_target("not a member id") is None
        target = channel.direct_target(BOB)
        assert target == ChatTarget("slack", BOB)  # Slack opens the DM when posted to
        ref = await channel.post_approval(target, REQUEST, BUTTONS)
        (request,) = slack.sent(BOB_DM)
        assert request["ts"] == ref
        assert channel.direct_target(BOB) == ChatTarget("slack", BOB_DM)
        said = slack.user_sends(ALICE_DM, ALICE, "hello")
        await slack.await_ack(said.envelope.envelope_id)  # acked once the message is taken
        assert channel.direct_target(ALICE) == ChatTarget("slack", ALICE_DM)
    async with running_channel(tmp_path, slack, inbox) as (channel, _):
        await channel.close_approval(target, ref, "❌ Denied by Alice")  # chat.update needs D…
    (record,) = slack.sent(BOB_DM)
    assert (record["ts"], record["text"]) == (ref, "❌ Denied by Alice")
    assert [c.args["channel"] for c in slack.calls("chat.update")] == [BOB_DM]


async def test_press_is_acked_at_once_handed_over_and_answered_to_the_presser_alone(
    tmp_path: Path, slack: FakeSlack, inbox: ScriptedInbox
) -> None:
    inbox.hold = asyncio.Event()
    inbox.reply = PressReply("Only **the owner** can decide on this request.")
    async with running_channel(tmp_path, slack, inbox) as (channel, _):
        asked = slack.user_sends(GENERAL, ALICE, "make a build folder", mention_bot=True)
        ref = await channel.post_approval(ChatTarget("slack", GENERAL, asked.ts), REQUEST, BUTTONS)
        pressed = slack.user_presses(BOB, f"{APPROVAL}:once", channel=GENERAL)
        await slack.await_ack(pressed.envelope.envelope_id)  # while the core still thinks
        assert slack.ephemerals() == []
        inbox.hold.set()
        (answer,) = await ephemerals_for(slack, BOB)
    assert inbox.presses == [ButtonPress("slack", GENERAL, BOB, "Bob", f"{APPROVAL}:once", ref)]
    assert answer["via"] == "chat.postEphemeral"
    assert (answer["channel"], answer["thread_ts"]) == (GENERAL, asked.ts)
    assert answer["text"] == "Only *the owner* can decide on this request."
    (request,) = slack.sent(GENERAL)
    assert "edited" not in request and len(actions(request)) == 3  # the core closes it


async def test_failing_core_or_refused_ephemeral_still_answers_the_presser(
    tmp_path: Path, slack: FakeSlack, inbox: ScriptedInbox, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_channel(tmp_path, slack, inbox) as (channel, _):
        ref = await channel.post_approval(ChatTarget("slack", ALICE_DM), REQUEST, BUTTONS)
        inbox.reply = RuntimeError("the approval store is on fire")
        slack.user_presses(ALICE, f"{APPROVAL}:deny")
        (bug,) = await ephemerals_for(slack, ALICE)
        inbox.reply = ShuttingDown("stopping")
        slack.user_presses(ALICE, f"{APPROVAL}:deny")
        _, restarting = await ephemerals_for(slack, ALICE, 2)
        inbox.reply = PressReply("Denied.")
        slack.fail("chat.postEphemeral", "channel_not_found")
        slack.user_presses(ALICE, f"{APPROVAL}:deny")
        *_, fallback = await ephemerals_for(slack, ALICE, 3)
        inbox.reply = PressReply("Noted by the bot, for everyone.", private=False)
        slack.user_presses(ALICE, f"{APPROVAL}:once")
        await slack.await_until(lambda: len(slack.sent(ALICE_DM)) == 2)
    assert bug["text"].startswith("Something went wrong on my side (error id ")
    assert "on fire" not in bug["text"] and "the approval store is on fire" in caplog.text
    assert restarting["text"] == "PinClaw is restarting; please press the button again in a minute."
    assert (fallback["via"], fallback["text"]) == ("response_url", "Denied.")
    (hook_post,) = slack.calls("response_url")
    assert hook_post.args["replace_original"] is False  # the request stays as it was
    request, public = slack.sent(ALICE_DM)
    assert request["ts"] == ref and len(actions(request)) == 3
    assert public["text"] == "Noted by the bot, for everyone."
    assert [p.message_ref for p in inbox.presses] == [ref] * 4


async def test_a_press_in_progress_is_finished_before_the_channel_stops(
    tmp_path: Path, slack: FakeSlack, inbox: ScriptedInbox
) -> None:
    inbox.hold = asyncio.Event()
    inbox.reply = PressReply("Allowed once.")
    async with running_channel(tmp_path, slack, inbox) as (channel, run):
        await channel.post_approval(ChatTarget("slack", ALICE_DM), REQUEST, BUTTONS)
        pressed = slack.user_presses(ALICE, f"{APPROVAL}:once")
        await slack.await_ack(pressed.envelope.envelope_id)
        await asyncio.wait_for(inbox.asked.wait(), 10)
        run.cancel()
        # Proving that something does not happen takes a bounded wait.
        stopped, _ = await asyncio.wait({run}, timeout=0.3)
        assert not stopped, "the run ended while a press was still being handled"
        inbox.hold.set()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        (answer,) = slack.ephemerals()
    assert (answer["via"], answer["text"]) == ("chat.postEphemeral", "Allowed once.")


# The real daemon and its approval service.


async def posted_request(daemon: Daemon, slack: FakeSlack, channel: str) -> JSON:
    """Wait for a request with buttons in ``channel`` and for the core to have recorded
    its ``ts`` (the core refuses a press that comes before that as misrouted)."""
    await slack.await_until(lambda: bool(requests_in(slack, channel)), what="a request")
    (request,) = requests_in(slack, channel)

    def recorded() -> bool:
        with closing(sqlite3.connect(daemon.app.db.path)) as db:
            found = db.execute("SELECT 1 FROM approvals WHERE message_ref = ?", (request["ts"],))
            return found.fetchone() is not None

    await eventually(recorded)
    return request


def forged_press(slack: FakeSlack, user: str, channel: str, message: JSON, action: str) -> Envelope:
    """A ``block_actions`` envelope for a button the message does not have."""
    payload = block_actions(
        user={"id": user, "username": user.lower(), "name": user.lower(), "team_id": "T0FAKE"},
        team={"id": "T0FAKE", "domain": "pinclawtest"},
        app_id="A0FAKE",
        channel={"id": channel, "name": "directmessage"},
        message=message,
        action={"action_id": action, "block_id": "pinclaw_buttons", "type": "button",
                "text": {"type": "plain_text", "text": "✅ Allow once"},
                "action_ts": f"{time.time():.6f}"},
        response_url=f"{slack.url}/hooks/actions/T0FAKE/1/forged",
        trigger_id=uuid.uuid4().hex,
    )  # fmt: skip
    return Envelope(str(uuid.uuid4()), "interactive", payload)


async def test_only_the_approver_can_allow_and_the_command_then_runs(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    workspace = tmp_path / "state" / "workspace"
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("Done."))
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        asked = slack.user_sends(GENERAL, ALICE, "make a build folder", mention_bot=True)
        request = await posted_request(daemon, slack, GENERAL)
        assert request["thread_ts"] == asked.ts
        assert "Approval needed" in request["text"] and "mkdir build" in request["text"]
        ids = [b["action_id"] for b in actions(request)]
        assert [i.rsplit(":", 1)[1] for i in ids] == ["once", "person", "always", "deny"]

        slack.user_presses(BOB, ids[0], channel=GENERAL)  # Bob is in the channel, not an approver
        (refusal,) = await ephemerals_for(slack, BOB)
        assert refusal["text"] == "Only the owner can decide on this request."
        assert slack.sent(GENERAL) == [request] and not (workspace / "build").exists()

        slack.user_presses(ALICE, ids[0], channel=GENERAL)
        (allowed,) = await ephemerals_for(slack, ALICE)
        record, done = await bot_messages(slack, GENERAL, 2)
        await slack.await_until(lambda: "edited" in slack.sent(GENERAL)[0], what="the record")
        record = slack.sent(GENERAL)[0]
    assert allowed["text"] == "Allowed once."
    assert (workspace / "build").is_dir()
    assert (done["text"], done["thread_ts"]) == ("Done.", asked.ts)
    assert record["ts"] == request["ts"] and actions(record) == []
    assert "mkdir build" in record["text"] and "Allowed once by Alice at " in record["text"]


async def test_deny_and_forged_presses_run_nothing(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    workspace = tmp_path / "state" / "workspace"
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("I did not make it."))
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        slack.user_sends(ALICE_DM, ALICE, "make a build folder")
        request = await posted_request(daemon, slack, ALICE_DM)
        slack.deliver(forged_press(slack, ALICE, ALICE_DM, request, "ap:nonexistent:once"))
        (rejected,) = await ephemerals_for(slack, ALICE)
        assert rejected["text"] == "This approval request does not exist."
        assert slack.sent(ALICE_DM) == [request]

        deny = next(b["action_id"] for b in actions(request) if b["action_id"].endswith(":deny"))
        slack.user_presses(ALICE, deny, channel=ALICE_DM)
        _, denied = await ephemerals_for(slack, ALICE, 2)
        record, reply = await bot_messages(slack, ALICE_DM, 2)
        await slack.await_until(lambda: "edited" in slack.sent(ALICE_DM)[0], what="the record")
        record = slack.sent(ALICE_DM)[0]
    assert "rejected a decision on unknown or misrouted approval 'nonexistent'" in caplog.text
    assert denied["text"] == "Denied."
    assert "Denied by Alice at " in record["text"] and actions(record) == []
    assert reply["text"] == "I did not make it."
    assert not (workspace / "build").exists()


async def test_the_decision_can_be_typed_as_a_slash_command(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("Done."))
    async with slack_daemon(tmp_path, llm, slack) as (daemon, _):
        slack.user_sends(ALICE_DM, ALICE, "make a build folder")
        request = await posted_request(daemon, slack, ALICE_DM)
        approval_id = actions(request)[0]["action_id"].split(":")[1]
        assert f"/pinclaw approve {approval_id} once|person|always|deny" in request["text"]
        slack.user_runs_command(ALICE_DM, ALICE, f"approve {approval_id} always")
        (answer,) = await ephemerals_for(slack, ALICE)
        _, done = await bot_messages(slack, ALICE_DM, 2)
        await slack.await_until(lambda: "edited" in slack.sent(ALICE_DM)[0], what="the record")
        record = slack.sent(ALICE_DM)[0]
    assert (answer["via"], answer["text"]) == ("response_url", "Always allowed (rule #1).")
    assert "Always allowed by Alice at " in record["text"] and actions(record) == []
    assert done["text"] == "Done."
    assert (tmp_path / "state" / "workspace" / "build").is_dir()


async def test_requests_from_a_channel_can_go_to_the_approvers_dm(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    workspace = tmp_path / "state" / "workspace"
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("Done."))
    async with slack_daemon(tmp_path, llm, slack, approvals_in_dm=True) as (daemon, _):
        asked = slack.user_sends(GENERAL, ALICE, "make a build folder", mention_bot=True)
        request = await posted_request(daemon, slack, ALICE_DM)
        assert "in the group chat C0GENERAL" in request["text"] and slack.sent(GENERAL) == []
        once = actions(request)[0]["action_id"]
        slack.user_presses(ALICE, once, channel=ALICE_DM)
        (done,) = await bot_messages(slack, GENERAL, 1)
        await slack.await_until(lambda: "edited" in slack.sent(ALICE_DM)[0], what="the record")
        (record,) = slack.sent(ALICE_DM)
    assert (done["text"], done["thread_ts"]) == ("Done.", asked.ts)
    assert "Allowed once by Alice at " in record["text"] and actions(record) == []
    assert [c.args["channel"] for c in slack.calls("chat.update")] == [ALICE_DM]
    assert (workspace / "build").is_dir()


async def test_http_mode_handles_a_signed_press(
    tmp_path: Path, llm: FakeLLM, slack: FakeSlack
) -> None:
    table = slack_table(
        slack, mode="http", app_token=None, signing_secret=slack.signing_secret, http_port=0
    )
    llm.queue(CallTools([("shell", {"command": "mkdir build"})]), Say("Done over HTTP."))
    async with running_daemon(tmp_path, llm, table) as daemon:
        channel = daemon.channels["slack"]
        assert isinstance(channel, SlackChannel)
        assert await channel.status.wait_connected(10) and channel.http_url is not None
        slack.use_http(channel.http_url)
        slack.user_sends(ALICE_DM, ALICE, "make a build folder")
        once = actions(await posted_request(daemon, slack, ALICE_DM))[0]["action_id"]
        pressed = slack.user_presses(ALICE, once, channel=ALICE_DM)
        assert (await slack.await_ack(pressed.envelope.envelope_id)).via == "http"
        (allowed,) = await ephemerals_for(slack, ALICE)
        _, done = await bot_messages(slack, ALICE_DM, 2)
    assert allowed["text"] == "Allowed once."
    assert done["text"] == "Done over HTTP."
    assert (tmp_path / "state" / "workspace" / "build").is_dir()
